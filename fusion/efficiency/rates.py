"""One trace's op calls with their work, achieved rates and place on the GPU's roofline; and per op signature.

A call's time is the kernel time of the kernels it launched, as the op-level comparison attributes them (each
kernel to its top-level op call, fusion.match.op_calls), so no kernel's time counts twice. Its work is counted
at one level: the top-level op's, from the shapes that op recorded; where the top-level op is not modelled
(aten::to, aten::reshape) and the call launched one kernel, the work of the innermost op that launched it
(aten::copy_). Each distinct (op, shapes) is counted once per process (counted_work).

Rates: TFLOP/s = FLOPs / time, TB/s = bytes / time (10^12), arithmetic intensity = FLOPs / byte. Against the
GPU's peaks (peaks.py): % of the dense peak for the work's dtype (matrix peak for GEMM, convolution and
attention, vector peak otherwise; 16- and 8-bit vector work against the fp32 vector peak, see
VECTOR_AS_FP32), % of the memory bandwidth, compute- or memory-bound by the roofline's ridge (peak / bandwidth)
and the roofline efficiency: achieved over attainable, min(peak, intensity x bandwidth). A GPU the table does
not name gets rates without any of these, and one note saying why.
"""

from __future__ import annotations

import functools
import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fusion import settings
from fusion.efficiency.peaks import DEFAULT_PATH, GpuPeaks, PeakTable, load_peaks
from fusion.efficiency.work import Work, op_work
from fusion.errors import ConfigError
from fusion.match.groups import unique_rows
from fusion.match.op_calls import OpCalls, factorized, op_calls
from fusion.model.trace import Trace

TOP_LEVEL, INNERMOST = "top-level op", "innermost op"
"""The level a call's work was counted at."""
COMPUTE_BOUND, MEMORY_BOUND = "compute", "memory"
VECTOR_AS_FP32 = frozenset({"bf16", "fp16", "fp8", "int8"})
"""Vector (non-matrix) work in these dtypes is rated against the fp32 vector peak where the table gives no rate
of its own: PyTorch's elementwise, norm and reduction kernels compute them in fp32, and datasheets give no
16-bit vector rate."""
TOP_KERNEL_NAMES = 3
NOT_RATED = "not rated"

# Columns of a call table (call_rates) and a signature table (signatures).
CALL = "call"
OP = "op"
OP_NAME = "op_name"
MODULE = "module"
COUNTED_OP = "counted_op"
LEVEL = "level"
DIMS = "dims"
TYPES = "types"
FAMILY = "family"
DTYPE = "dtype"
MATRIX = "matrix"
FLOPS = "flops"
BYTES = "bytes"
REASON = "reason"
KERNELS = "kernels"
TIME_US = "time_us"
TFLOPS = "tflops"
TBPS = "tb_s"
INTENSITY = "intensity"
PEAK_TFLOPS = "peak_tflops"
PEAK_PCT = "peak_pct"
BANDWIDTH_PCT = "bandwidth_pct"
BOUND = "bound"
ROOFLINE_PCT = "roofline_pct"
CALLS = "calls"
KERNEL_NAMES = "kernel_names"
RATE_COLUMNS = (TFLOPS, TBPS, INTENSITY, PEAK_TFLOPS, PEAK_PCT, BANDWIDTH_PCT, BOUND, ROOFLINE_PCT)
WORK_COLUMNS = (OP, OP_NAME, COUNTED_OP, LEVEL, DIMS, TYPES, FAMILY, DTYPE, MATRIX, FLOPS, BYTES, REASON)
CALL_COLUMNS = (CALL, *WORK_COLUMNS[:2], MODULE, *WORK_COLUMNS[2:], KERNELS, TIME_US, *RATE_COLUMNS)
SIGNATURE_COLUMNS = (*WORK_COLUMNS, CALLS, KERNELS, TIME_US, *RATE_COLUMNS, KERNEL_NAMES)
"""Per op signature (op, counted op, shapes, dtypes, and so the same work per call): FLOPS and BYTES are per
call, TIME_US and KERNELS summed, the rates of the summed work over the summed time."""


@dataclass(frozen=True)
class Gpu:
    """The GPU a trace ran on and its row of the peak table; `note` says why there is none (then '' peaks)."""

    name: str
    compute_units: int | None
    peaks: GpuPeaks | None
    note: str = ""

    def peak_tflops(self, dtype: str, matrix: bool) -> float | None:
        """The dense peak for work of `dtype` (VECTOR_AS_FP32 for 16- and 8-bit vector work); None if unknown."""
        if self.peaks is None or not dtype:
            return None
        peak = self.peaks.peak_tflops(dtype, matrix)
        if peak is None and not matrix and dtype in VECTOR_AS_FP32:
            peak = self.peaks.peak_tflops("fp32", False)
        return peak

    @property
    def bandwidth_tb_s(self) -> float | None:
        return None if self.peaks is None else self.peaks.hbm_tb_s


def peak_table() -> PeakTable:
    """The built-in table plus FUSION_GPU_PEAKS; a bad file is a ConfigError naming it (and the setting, when it
    is the user's)."""
    extra = settings.gpu_peaks_path()
    stamp = Path(extra).stat().st_mtime_ns if extra and Path(extra).is_file() else 0
    return _peak_table(extra, stamp)


@functools.lru_cache(maxsize=4)
def _peak_table(extra: str, stamp: int) -> PeakTable:
    try:
        return load_peaks(DEFAULT_PATH, extra or None)
    except (ValueError, OSError) as exc:
        setting = f"FUSION_GPU_PEAKS={extra!r}: " if extra else ""  # else the built-in table, which exc names
        raise ConfigError(f"{setting}{exc}") from None


def gpu_of(trace: Trace, table: PeakTable | None = None) -> Gpu:
    """The trace's GPU (its first deviceProperties entry with a name) and its peaks, or a note why there are none."""
    table = table if table is not None else peak_table()
    props = next((p for p in trace.device_properties if isinstance(p.get("name"), str) and p["name"].strip()), None)
    if props is None:
        return Gpu(trace.gpu, None, None, "the trace records no GPU name: rates without % of peak")
    name = props["name"].strip()
    units = props.get("numSms") if isinstance(props.get("numSms"), int) else None
    row = table.lookup(name, compute_units=units)
    if row is None:
        where = "the peak table (fusion/efficiency/gpu_peaks.toml; add a row with FUSION_GPU_PEAKS)"
        return Gpu(name, units, None, f"{name} is not in {where}: rates without % of peak")
    if units is not None and row.compute_units is not None and units != row.compute_units:
        note = (
            f"{name} records {units} compute units where the table's {row.name} has {row.compute_units} (a"
            " partition?): rates without % of peak"
        )
        return Gpu(name, units, None, note)
    return Gpu(name, units, row)


def work_of(op: str, shapes: str) -> Work:
    """The work of one call of `op` from its shapes text (fusion.loader.op_args: '' when none was recorded)."""
    if not shapes:
        return op_work(op, None, None)
    dims, types, strides, concrete = json.loads(shapes)
    return op_work(op, dims, types, strides, concrete)


@dataclass
class TraceRates:
    """One trace's GPU, its op calls with their work and rates (CALL_COLUMNS), and the totals they cover."""

    gpu: Gpu
    calls: pd.DataFrame
    kernel_time_us: float
    """All kernel time of the trace (the share of it in rated calls is the coverage)."""
    work: np.ndarray
    """Per call: its distinct work (the same ops, shapes and counted work: the same WORK_COLUMNS values)."""

    def groups(self, columns: tuple[str, ...]) -> np.ndarray:
        """Per call, its group of equal values in `columns` (of WORK_COLUMNS), numbered in order of first call:
        first_seen_groups(self.calls, columns), with the values compared once per distinct work."""
        if not set(columns) <= set(WORK_COLUMNS):
            raise ValueError(f"not a column of the calls' work: {sorted(set(columns) - set(WORK_COLUMNS))}")
        per_work = first_seen_groups(self._works, columns)
        return first_seen(per_work[self.work][:, None])

    @functools.cached_property
    def _works(self) -> pd.DataFrame:
        """One call of each distinct work, in work order."""
        return self.calls.iloc[np.unique(self.work, return_index=True)[1]]

    @property
    def rated(self) -> np.ndarray:
        return self.calls[TFLOPS].notna().to_numpy()

    def coverage(self) -> dict[str, Any]:
        """How much of the trace's kernel time sits in op calls, and in op calls with a rate."""
        calls, rated = self.calls, self.rated
        call_time = float(calls[TIME_US].sum())
        rated_time = float(calls[TIME_US].to_numpy()[rated].sum())
        total = self.kernel_time_us
        return {
            "op_calls": len(calls),
            "rated_calls": int(rated.sum()),
            "kernel_time_us": round(total, 3),
            "op_call_time_us": round(call_time, 3),
            "rated_time_us": round(rated_time, 3),
            "rated_share": rated_time / total if total else None,
            "rated_share_of_op_calls": rated_time / call_time if call_time else None,
        }


def trace_rates(trace: Trace, calls: OpCalls | None = None, table: PeakTable | None = None) -> TraceRates:
    """The rates of every op call of `trace` (`calls`: its op calls, when already made)."""
    calls = calls if calls is not None else op_calls(trace, 1)
    gpu = gpu_of(trace, table)
    table, work = call_rates(calls, gpu)
    return TraceRates(gpu, table, trace.kernel_time_us, work)


SHAPE_COLUMNS = ("op_top", "op_top_shapes", "op", "op_shapes")
"""The kernel columns a call's work is counted from (at its first kernel): the top-level and innermost op."""
COUNTED_CACHE = 1 << 16
"""Distinct (op, shapes) counts kept per process (counted_work): a trace compared again counts nothing anew."""


def call_rates(calls: OpCalls, gpu: Gpu) -> tuple[pd.DataFrame, np.ndarray]:
    """One row per op call (CALL_COLUMNS), in call order, and each call's distinct work (TraceRates.work)."""
    if not len(calls):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in CALL_COLUMNS}), np.zeros(0, dtype=np.int64)
    kernels = calls.trace.kernels
    heads = calls.rows[calls.offsets[:-1]]
    codes = np.column_stack(
        [kernels[c].cat.codes.to_numpy()[heads] for c in SHAPE_COLUMNS] + [calls.counts == 1]
    ).astype(np.int64)
    distinct, inverse, _ = unique_rows(codes)
    texts = [  # code -1 (no value) reads '' (appended last), as op_calls reads it
        [str(v) for v in np.append(np.asarray(kernels[c].cat.categories, dtype=object), "")[distinct[:, i]]]
        for i, c in enumerate(SHAPE_COLUMNS)
    ]
    counted = [counted_work(*row, bool(single)) for *row, single in zip(*texts, distinct[:, 4].tolist())]
    works = [work for *_, work in counted]
    table: dict[str, Any] = {
        CALL: np.arange(len(calls)),
        OP: _texts(calls.ops, calls.op_ids),
        OP_NAME: _texts(calls.raw_ops, calls.raw_op_ids),
        MODULE: _texts(calls.modules, calls.module_ids),
        **{
            c: _per_call_texts([row[i] for row in counted], inverse)
            for i, c in enumerate((LEVEL, COUNTED_OP, DIMS, TYPES))
        },
        FAMILY: _per_call_texts([w.family for w in works], inverse),
        DTYPE: _per_call_texts([w.dtype for w in works], inverse),
        MATRIX: _per_call([w.matrix for w in works], inverse),
        FLOPS: _per_call([np.nan if w.flops is None else w.flops for w in works], inverse),
        BYTES: _per_call([np.nan if w.bytes is None else w.bytes for w in works], inverse),
        REASON: _per_call_texts([w.reason for w in works], inverse),
        KERNELS: calls.counts,
        TIME_US: np.add.reduceat(calls.dur[calls.rows], calls.offsets[:-1]),
    }
    peak = peak_tflops([(w.dtype, w.matrix) for w in works], gpu)[inverse]
    table.update(work_rates(table[FLOPS], table[BYTES], table[TIME_US], peak, gpu))
    table[BOUND] = _texts(table[BOUND])
    return pd.DataFrame({c: table[c] for c in CALL_COLUMNS}), inverse


def _per_call_texts(values: list[Any], inverse: np.ndarray) -> pd.api.extensions.ExtensionArray:
    """A text column of the calls from the values of each distinct call work (`inverse`: each call's distinct row):
    the few distinct strings converted to pandas' text type once, then spread (converting every call's string
    costs about 50 ns each)."""
    return pd.array(values, dtype="str").take(inverse)


def _texts(values: np.ndarray, ids: np.ndarray | None = None) -> pd.api.extensions.ExtensionArray:
    """A text column from per-call strings, converted once per distinct string (_per_call_texts); `ids`, ints equal
    exactly where the strings are, where the caller has them (op_calls.factorized: quicker than hashing strings)."""
    codes, distinct = pd.factorize(values, use_na_sentinel=False) if ids is None else factorized(values, ids)
    return _per_call_texts(list(distinct), codes)


def _per_call(values: list[Any], inverse: np.ndarray, dtype: Any = None) -> np.ndarray:
    """Values of each distinct call work spread to the calls (`inverse`: each call's distinct row)."""
    return np.array(values, dtype=dtype)[inverse]


@functools.lru_cache(maxsize=COUNTED_CACHE)
def counted_work(
    top: str, top_shapes: str, inner: str, inner_shapes: str, single: bool
) -> tuple[str, str, str, str, Work]:
    """(level, op, dims, types, work) of a call: the top-level op's work, else (one kernel) the innermost op's;
    dims and types as compact JSON (_dims_types). Pure, so each distinct call work is counted once per process."""
    work = work_of(top, top_shapes)
    if not _counted_fully(work) and single and inner and inner != top:
        inner_work = work_of(inner, inner_shapes)
        if _counted_fully(inner_work):
            return INNERMOST, inner, *_dims_types(inner_shapes), inner_work
    return TOP_LEVEL, top, *_dims_types(top_shapes), work


def _counted_fully(work: Work) -> bool:
    return work.flops is not None and work.bytes is not None


def _dims_types(shapes: str) -> tuple[str, str]:
    """The Input Dims and Input type of a shapes text, as compact JSON ('' where absent)."""
    if not shapes:
        return "", ""
    dims, types, _, _ = json.loads(shapes)
    return _compact(dims), _compact(types)


def _compact(value: Any) -> str:
    return "" if value is None else json.dumps(value, separators=(",", ":"))


def peak_tflops(kinds: list[tuple[str, bool]], gpu: Gpu) -> np.ndarray:
    """The GPU's peak TFLOP/s for each (dtype, matrix) of `kinds` (NaN where it has none), looked up once per kind."""
    peaks = {kind: gpu.peak_tflops(*kind) for kind in set(kinds)}
    return np.array([peaks[kind] or np.nan for kind in kinds], dtype=np.float64)


def work_rates(
    flops: np.ndarray, nbytes: np.ndarray, time_us: np.ndarray, peak: np.ndarray, gpu: Gpu
) -> dict[str, np.ndarray]:
    """The RATE_COLUMNS of work given as columns (`peak`: peak_tflops of each row's kind); rates only where both
    FLOPs and bytes are counted and the time is positive."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return _rates(flops, nbytes, time_us, peak, gpu)


def _rates(
    flops: np.ndarray, nbytes: np.ndarray, time_us: np.ndarray, peak: np.ndarray, gpu: Gpu
) -> dict[str, np.ndarray]:
    seconds = time_us * 1e-6
    ok = np.isfinite(flops) & np.isfinite(nbytes) & (seconds > 0)
    tflops = np.where(ok, flops / seconds / 1e12, np.nan)
    tbps = np.where(ok, nbytes / seconds / 1e12, np.nan)
    intensity = np.where(ok & (nbytes > 0), flops / nbytes, np.nan)
    bandwidth = gpu.bandwidth_tb_s or np.nan
    memory_only = ok & (flops == 0)
    roofline = np.where(memory_only, tbps / bandwidth, tflops / np.minimum(peak, intensity * bandwidth))
    ridge = peak / bandwidth
    known = ok & ~np.isnan(bandwidth) & (memory_only | ~np.isnan(ridge))
    bound = np.where(memory_only | (intensity < ridge), MEMORY_BOUND, COMPUTE_BOUND)
    return {
        TFLOPS: tflops,
        TBPS: tbps,
        INTENSITY: intensity,
        PEAK_TFLOPS: np.where(ok, peak, np.nan),
        PEAK_PCT: np.where(ok & (flops > 0), 100 * tflops / peak, np.nan),
        BANDWIDTH_PCT: np.where(ok, 100 * tbps / bandwidth, np.nan),
        BOUND: np.where(known, bound, ""),
        ROOFLINE_PCT: np.where(ok, 100 * roofline, np.nan),
    }


def signatures(rates: TraceRates, op_calls: OpCalls | None = None) -> pd.DataFrame:
    """Per op signature of the trace's calls (SIGNATURE_COLUMNS), most kernel time first; with the trace's
    `op_calls`, each signature's kernel names by time (at most TOP_KERNEL_NAMES)."""
    calls, gpu = rates.calls, rates.gpu
    if calls.empty:
        return pd.DataFrame({c: pd.Series(dtype=object) for c in SIGNATURE_COLUMNS})
    group = rates.groups(WORK_COLUMNS)
    first = np.unique(group, return_index=True)[1]
    heads = calls.iloc[first]
    table: dict[str, Any] = {c: heads[c].to_numpy() for c in WORK_COLUMNS}
    table[CALLS] = np.bincount(group)
    table[KERNELS] = np.bincount(group, weights=calls[KERNELS].to_numpy(np.float64)).astype(np.int64)
    table[TIME_US] = np.bincount(group, weights=calls[TIME_US].to_numpy(np.float64))
    kinds = list(zip(table[DTYPE].tolist(), table[MATRIX].astype(bool).tolist()))
    summed = (table[FLOPS].astype(np.float64) * table[CALLS], table[BYTES].astype(np.float64) * table[CALLS])
    table.update(work_rates(*summed, table[TIME_US], peak_tflops(kinds, gpu), gpu))
    table[KERNEL_NAMES] = _top_names(group, calls[CALL].to_numpy(), op_calls, len(first))
    order = np.argsort(-table[TIME_US], kind="stable")
    return pd.DataFrame({c: _taken(table[c], order) for c in SIGNATURE_COLUMNS})


def _taken(values: Any, order: np.ndarray) -> Any:
    return [values[i] for i in order.tolist()] if isinstance(values, list) else values[order]


def first_seen_groups(frame: pd.DataFrame, columns: tuple[str, ...]) -> np.ndarray:
    """Per row, its group of equal values in `columns` (NaN equal to NaN), numbered in order of first row: what
    `frame.groupby(columns, sort=False, dropna=False).ngroup()` gives, from integer codes of each column."""
    return first_seen(np.column_stack([pd.factorize(frame[c])[0] for c in columns]))


def first_seen(codes: np.ndarray) -> np.ndarray:
    """Per row of a 2-D int array, its group of equal rows, numbered in order of first row."""
    _, inverse, _ = unique_rows(codes)
    first = np.unique(inverse, return_index=True)[1]
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    return rank[inverse]


def group_sums(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Per group 0..max (each must occur), its values summed in row order with pandas' compensated (Kahan)
    summation, as the tables' groupby sums always were: np.bincount's plain sum differs in the last bit."""
    return pd.Series(values).groupby(groups, sort=True).sum().to_numpy(np.float64)


def _top_names(group: np.ndarray, call: np.ndarray, calls: OpCalls | None, groups: int) -> list[list[str]]:
    """Per signature, its kernel names by total time (at most TOP_KERNEL_NAMES); [] without the op calls."""
    names: list[list[str]] = [[] for _ in range(groups)]
    if calls is None:
        return names
    group_of_call = np.full(len(calls), -1, dtype=np.int64)
    group_of_call[call] = group
    per_row = np.repeat(group_of_call, calls.counts)
    kept = per_row >= 0
    for g, code in top_by_time(
        per_row[kept], calls.names.codes[calls.rows][kept], calls.dur[calls.rows][kept], TOP_KERNEL_NAMES
    ):
        names[g].append(str(calls.names.values[code]))
    return names


def top_by_time(group: np.ndarray, name: np.ndarray, dur: np.ndarray, top: int) -> list[tuple[int, int]]:
    """The (group, name) pairs of each group's `top` names by summed `dur`, by time (ties in (group, name)
    order): `groupby([group, name]).sum()` sorted by time (stable) and cut to the first `top` of each group."""
    pairs, inverse, _ = unique_rows(np.column_stack([group, name]).astype(np.int64))
    sums = group_sums(dur, inverse)
    kept: dict[int, int] = defaultdict(int)
    out = []
    for g, code in pairs[np.argsort(-sums, kind="stable")].tolist():
        if kept[g] < top:
            kept[g] += 1
            out.append((g, code))
    return out


def shapes_text(dims: str) -> str:
    """Input Dims as a person reads them: '16×559×1024, 1024×1024' (scalars and None left out)."""
    if not dims:
        return ""
    parts = [
        "×".join(str(d) for d in shape) if isinstance(shape, list) and all(isinstance(d, int) for d in shape) else ""
        for shape in json.loads(dims)
    ]
    return ", ".join(p for p in parts if p)


def rate_text(row: Any) -> str:
    """The rate in the unit of the work: matrix work (gemm, conv, attention) in TFLOP/s and % of peak, with its
    TB/s when it is memory-bound; other work in TB/s and % of bandwidth. '617 TFLOP/s (62% of peak,
    compute-bound)', '46.6 TFLOP/s (4.7% of peak; 0.47 TB/s, 14% of bandwidth; memory-bound)', '2.61 TB/s (78% of
    bandwidth, memory-bound)'."""
    if not isinstance(row[TFLOPS], float) or math.isnan(row[TFLOPS]):
        return NOT_RATED
    bandwidth = _pct(row[BANDWIDTH_PCT], "of bandwidth")
    if row[MATRIX] and row[FLOPS]:
        head, details = f"{row[TFLOPS]:.3g} TFLOP/s", [_pct(row[PEAK_PCT], "of peak")]
        if row[BOUND] == MEMORY_BOUND:
            details.append(", ".join(p for p in (f"{row[TBPS]:.2f} TB/s", bandwidth) if p))
    else:
        head, details = f"{row[TBPS]:.2f} TB/s", [bandwidth]
    details = [d for d in details if d] + ([f"{row[BOUND]}-bound"] if row[BOUND] else [])
    separator = "; " if len(details) > 2 else ", "
    return head + (f" ({separator.join(details)})" if details else "")


def _pct(value: Any, of: str) -> str:
    known = isinstance(value, float) and not math.isnan(value)
    return f"{percent_text(value)} {of}" if known else ""


def percent_text(value: float) -> str:
    """62%, 4.7%, 0.37%: two significant digits below 10%."""
    return f"{value:.0f}%" if value >= 10 else f"{value:.2g}%"
