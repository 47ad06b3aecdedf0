"""Two traces' op calls side by side: the aligned calls (fusion.match.op_calls.align_calls) grouped by op signature
on both sides, each side's rates and efficiency, ranked by the time a side would save at the other's efficiency.

A side's efficiency is its roofline efficiency (rates.py: achieved over attainable on its own GPU), so two GPUs
of different peaks compare fairly: at the other side's efficiency, a side would take time x (its efficiency /
the other's), and save the rest. Without both GPUs' peaks there is no efficiency, so no saving: those rows
rank after the others by their time gap. Findings that cite kernels of op calls with rates on both sides get one
sentence each: what each side's calls reach.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fusion.efficiency.rates import (
    BYTES,
    CALLS,
    COUNTED_OP,
    DIMS,
    DTYPE,
    FAMILY,
    FLOPS,
    KERNELS,
    MATRIX,
    OP,
    RATE_COLUMNS,
    REASON,
    ROOFLINE_PCT,
    TFLOPS,
    TIME_US,
    TYPES,
    Gpu,
    TraceRates,
    first_seen,
    group_sums,
    peak_tflops,
    rate_text,
    shapes_text,
    signatures,
    trace_rates,
    work_rates,
)
from fusion.match.op_calls import OpCalls
from fusion.result import FusionMapping, plain

SIDE_KEYS = (COUNTED_OP, DIMS, TYPES, FAMILY, DTYPE, MATRIX, FLOPS, BYTES, REASON)
"""What one side of an aligned row shares: the same counted work per call."""
SAVING_SIDE = "saving_side"
SAVING_US = "saving_us"
TIME_RATIO = "time_ratio"
TEXT = "text"
ALIGNED_COLUMNS = (
    OP,
    CALLS,
    *(f"{c}{s}" for s in (1, 2) for c in (*SIDE_KEYS, KERNELS, TIME_US, *RATE_COLUMNS)),
    TIME_RATIO,
    SAVING_SIDE,
    SAVING_US,
    TEXT,
)
"""Per aligned op signature pair: the op, its aligned calls, each side's work (per call), kernels and time
(summed) and rates (of the summed work over the summed time), trace1 / trace2 time, the side that would save
time at the other's efficiency (0 for none) and how much, and the row as a sentence."""
TOP_ROWS = 200
"""Aligned rows kept (largest saving first, then largest time gap); the notes say when there were more."""


@dataclass(frozen=True)
class GpuEntry:
    """A side's GPU as the JSON states it: its name, the table row used (None when unknown) and why not."""

    side: int
    gpu: str
    peaks_row: str | None
    hbm_tb_s: float | None
    sources: list[str]
    note: str


@dataclass(frozen=True)
class FindingLink:
    """A finding (its index in Comparison.mappings) and what the op calls it cites reach on each side."""

    finding: int
    op: str
    calls1: int
    calls2: int
    text: str


@dataclass
class OpEfficiency:
    """The `op_efficiency` section of a comparison (see docs/efficiency.md)."""

    gpus: list[GpuEntry] = field(default_factory=list)
    coverage: list[dict[str, Any]] = field(default_factory=list)
    calls1: pd.DataFrame = field(default_factory=pd.DataFrame)
    calls2: pd.DataFrame = field(default_factory=pd.DataFrame)
    signatures1: pd.DataFrame = field(default_factory=pd.DataFrame)
    signatures2: pd.DataFrame = field(default_factory=pd.DataFrame)
    aligned: pd.DataFrame = field(default_factory=pd.DataFrame)
    findings: list[FindingLink] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def calls(self, side: int) -> pd.DataFrame:
        return self.calls1 if side == 1 else self.calls2

    def signatures(self, side: int) -> pd.DataFrame:
        return self.signatures1 if side == 1 else self.signatures2

    def to_dict(self) -> dict[str, Any]:
        """The JSON section: GPUs, coverage, both sides' signatures, the aligned rows, finding links, notes."""
        return plain(
            {
                "gpus": [asdict(g) for g in self.gpus],
                "coverage": self.coverage,
                "signatures": {f"trace{s}": _records(self.signatures(s)) for s in (1, 2)},
                "aligned": _records(self.aligned),
                "findings": [asdict(f) for f in self.findings],
                "notes": self.notes,
            }
        )


def _records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """The table's rows as dicts (plain, which to_dict applies to them, makes its NaN and NA null)."""
    return table.to_dict(orient="records") if len(table) else []


def op_efficiency(
    calls: tuple[OpCalls, OpCalls], aligned: np.ndarray, mappings: list[FusionMapping], labels: tuple[str, str]
) -> OpEfficiency:
    """Both traces' call rates and signatures, the aligned calls side by side, and the findings' links."""
    rates = (trace_rates(calls[0].trace, calls[0]), trace_rates(calls[1].trace, calls[1]))
    notes = [f"{labels[s]}: {r.gpu.note}" for s, r in enumerate(rates) if r.gpu.note]
    table, total = aligned_table(rates[0], rates[1], aligned, labels)
    if total > TOP_ROWS:
        notes.append(f"{total:,} aligned op signatures; the {TOP_ROWS} with the largest saving or time gap kept")
    return OpEfficiency(
        gpus=[_gpu_entry(s + 1, r.gpu) for s, r in enumerate(rates)],
        coverage=[{"side": s + 1, **r.coverage()} for s, r in enumerate(rates)],
        calls1=rates[0].calls,
        calls2=rates[1].calls,
        signatures1=signatures(rates[0], calls[0]),
        signatures2=signatures(rates[1], calls[1]),
        aligned=table,
        findings=finding_links(mappings, calls, rates, labels),
        notes=notes,
    )


def _gpu_entry(side: int, gpu: Gpu) -> GpuEntry:
    row = gpu.peaks
    if row is None:
        return GpuEntry(side, gpu.name, None, None, [], gpu.note)
    return GpuEntry(side, gpu.name, row.name, row.hbm_tb_s, list(row.sources), gpu.note)


def aligned_table(
    rates1: TraceRates, rates2: TraceRates, aligned: np.ndarray, labels: tuple[str, str], top: int = TOP_ROWS
) -> tuple[pd.DataFrame, int]:
    """ALIGNED_COLUMNS per distinct (op, side-1 work, side-2 work) of the aligned calls, ranked by saving: the
    `top` first rows, and how many there are."""
    if not len(aligned):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in ALIGNED_COLUMNS}), 0
    keys = [rates1.groups((OP,))[aligned[:, 0]]]
    keys += [rates.groups(SIDE_KEYS)[aligned[:, s]] for s, rates in enumerate((rates1, rates2))]
    group = first_seen(np.column_stack(keys))
    first = np.unique(group, return_index=True)[1]
    table: dict[str, Any] = {OP: rates1.calls[OP].iloc[aligned[first, 0]].to_numpy(), CALLS: np.bincount(group)}
    for s, rates in enumerate((rates1, rates2), start=1):
        table.update(_side_columns(rates, aligned[:, s - 1], group, first, table[CALLS], s))
    time1, time2 = table[f"{TIME_US}1"], table[f"{TIME_US}2"]
    with np.errstate(invalid="ignore", divide="ignore"):
        table[TIME_RATIO] = np.where((time1 > 0) & (time2 > 0), time1 / time2, np.nan)
    table[SAVING_SIDE], table[SAVING_US] = _savings(table)
    gap = np.abs(time1 - time2)
    order = np.lexsort((-gap, -np.nan_to_num(table[SAVING_US], nan=-1.0)))[:top]
    kept = {c: v[order] for c, v in table.items()}
    rows = [dict(zip(kept, values)) for values in zip(*(v.tolist() for v in kept.values()))]
    kept[TEXT] = np.array([_row_text(row, labels) for row in rows], dtype=object)
    return pd.DataFrame({c: kept[c] for c in ALIGNED_COLUMNS}), len(first)


def _side_columns(
    rates: TraceRates, calls: np.ndarray, group: np.ndarray, first: np.ndarray, count: np.ndarray, side: int
) -> dict[str, np.ndarray]:
    """One side's SIDE_KEYS (of each group's first call), KERNELS and TIME_US (summed) and RATE_COLUMNS, suffixed."""
    frame = rates.calls
    heads = frame.iloc[calls[first]]
    out: dict[str, Any] = {c: heads[c].to_numpy() for c in SIDE_KEYS}
    out[KERNELS] = np.bincount(group, weights=frame[KERNELS].to_numpy(np.float64)[calls]).astype(np.int64)
    out[TIME_US] = group_sums(frame[TIME_US].to_numpy(np.float64)[calls], group)
    kinds = list(zip(out[DTYPE].tolist(), out[MATRIX].astype(bool).tolist()))
    summed = (out[FLOPS].astype(np.float64) * count, out[BYTES].astype(np.float64) * count)
    out.update(work_rates(*summed, out[TIME_US], peak_tflops(kinds, rates.gpu), rates.gpu))
    return {f"{c}{side}": v for c, v in out.items()}


def _savings(table: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the side that would save time at the other side's roofline efficiency (0: neither, or unknown),
    and that time (NaN where an efficiency is unknown)."""
    eff1, eff2 = (table[f"{ROOFLINE_PCT}{s}"].astype(np.float64) for s in (1, 2))
    time1, time2 = (table[f"{TIME_US}{s}"] for s in (1, 2))
    known = np.isfinite(eff1) & np.isfinite(eff2) & (eff1 > 0) & (eff2 > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        saving1 = np.where(known & (eff1 < eff2), time1 * (1 - eff1 / eff2), 0.0)
        saving2 = np.where(known & (eff2 < eff1), time2 * (1 - eff2 / eff1), 0.0)
    side = np.where(saving1 > 0, 1, np.where(saving2 > 0, 2, 0))
    return side, np.where(known, saving1 + saving2, np.nan)


def _row_text(row: dict[str, Any], labels: tuple[str, str]) -> str:
    """'aten::mm 16×559×1024, 2816×1024 bf16 ×48: H100 617 TFLOP/s (62% of peak, compute-bound) vs MI300X 466
    TFLOP/s (36% of peak, compute-bound): MI300X would save 1.89 ms at H100's efficiency'."""
    shapes = shapes_text(row[f"{DIMS}1"])
    head = " ".join(p for p in (row[OP], shapes, row[f"{DTYPE}1"]) if p) + f" ×{row[CALLS]:,}"
    rates = [f"{labels[s - 1]} {rate_text(_side_rates(row, s))}" for s in (1, 2)]
    text = f"{head}: {rates[0]} vs {rates[1]}"
    side = int(row[SAVING_SIDE])
    if side:
        text += f": {labels[side - 1]} would save {row[SAVING_US] / 1e3:.3f} ms at {labels[2 - side]}'s efficiency"
    return text


def _side_rates(row: dict[str, Any], side: int) -> dict[str, Any]:
    return {c: row[f"{c}{side}"] for c in (*RATE_COLUMNS, FLOPS, MATRIX)}


def finding_links(
    mappings: list[FusionMapping],
    calls: tuple[OpCalls, OpCalls],
    rates: tuple[TraceRates, TraceRates],
    labels: tuple[str, str],
) -> list[FindingLink]:
    """One link per finding whose cited kernels lie in op calls that have rates on both sides."""
    call_of_row = [_call_of_row(c) for c in calls]
    links = []
    for index, mapping in enumerate(mappings):
        cited = [_cited_calls(mapping, call_of_row[s], s) for s in (0, 1)]
        summed = [_summed(rates[s], cited[s]) for s in (0, 1)]
        if any(total is None for total in summed):
            continue
        op = mapping.op or str(rates[0].calls[OP].iloc[cited[0][0]])
        per_call = [float(rates[s].calls[KERNELS].iloc[cited[s]].mean()) for s in (0, 1)]
        parts = [f"{labels[s]} runs {op} as {_count(per_call[s])} per call at {rate_text(summed[s])}" for s in (0, 1)]
        text = f"{parts[0]}; {parts[1]} (the {len(cited[0])} and {len(cited[1])} calls the finding cites)"
        links.append(FindingLink(index, op, len(cited[0]), len(cited[1]), text))
    return links


def _count(kernels: float) -> str:
    whole = round(kernels)
    if math.isclose(kernels, whole):
        return f"{whole} kernel" + ("" if whole == 1 else "s")
    return f"{kernels:.1f} kernels"


def _call_of_row(calls: OpCalls) -> np.ndarray:
    """Per kernel row of the trace, the op call that launched it (-1 for none)."""
    out = np.full(len(calls.dur), -1, dtype=np.int64)
    out[calls.rows] = np.repeat(np.arange(len(calls)), calls.counts)
    return out


def _cited_calls(mapping: FusionMapping, call_of_row: np.ndarray, side: int) -> list[int]:
    """The op calls whose kernels the finding's evidence windows cite on one side (0-based side)."""
    found: set[int] = set()
    for ref in mapping.evidence_refs:
        start, stop = ref.window1 if side == 0 else ref.window2
        window = call_of_row[max(start, 0) : max(stop, 0)]
        found.update(int(c) for c in np.unique(window[window >= 0]))
    return sorted(found)


def _summed(rates: TraceRates, cited: list[int]) -> dict[str, Any] | None:
    """The rates of the cited calls' work over their time, when every cited call is rated; else None."""
    if not cited:
        return None
    calls = rates.calls
    if calls[TFLOPS].isna().to_numpy()[cited].any():
        return None
    flops, nbytes, time_us = (calls[c].to_numpy(np.float64)[cited].sum(keepdims=True) for c in (FLOPS, BYTES, TIME_US))
    dtypes = calls[DTYPE].iloc[cited]
    kind = (dtypes.iloc[0] if dtypes.nunique() == 1 else "", bool(calls[MATRIX].to_numpy(bool)[cited].all()))
    summed = work_rates(flops, nbytes, time_us, peak_tflops([kind], rates.gpu), rates.gpu)
    return {**{c: summed[c][0] for c in RATE_COLUMNS}, FLOPS: flops[0], MATRIX: kind[1]}
