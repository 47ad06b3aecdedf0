"""Load a profiler trace: platform, GPU, and a kernel table with one row per kernel event.

This is the only module that reads trace files. It keeps the kernel fields the analysis needs
(name, ts, dur, correlation, stream, device), interns names, and classifies each distinct name once.
The CPU side (runtime launches, ops, annotations, module frames) is collected as compact columns
while the file is read, resolved into the launching-op columns (fusion/ops.py), then dropped.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fusion.classify.names import KERNEL_TYPES, classify_names, type_from_op
from fusion.loader.columns import MISSING_ID, intern_coded, used_categories
from fusion.loader.cpu_events import RANGE_CATEGORIES, RUNTIME_CATEGORIES, CpuCollector, RangeKind
from fusion.errors import TraceError
from fusion.loader.event_columns import NOT_A_STRING, EventColumns
from fusion.loader.events import read_events
from fusion.model.ops import OP_COLUMNS, launch_columns
from fusion.model.phases import ENGINE_FRAME_SUFFIXES, PHASE_COLUMNS, phase_columns
from fusion.loader.reader import Progress, TraceSource, open_input

KERNEL_CATEGORIES = frozenset({"kernel", "Kernel"})
KERNEL_COLUMNS = ("name", "type", "type_route", "ts", "dur", "correlation", "stream", "device", *OP_COLUMNS,
                  *PHASE_COLUMNS)
TYPE_ROUTES = ("name", "op", "unknown")
"""What typed a kernel: its name's rule, its launching op, or nothing (type Other)."""
_KERNEL, _RUNTIME = range(2)
_BUCKET = {
    **dict.fromkeys(KERNEL_CATEGORIES, _KERNEL),
    **dict.fromkeys(RUNTIME_CATEGORIES, _RUNTIME),
    **{category: 2 + kind for category, kind in RANGE_CATEGORIES.items()},
}
"""Which list a piece's events are sorted into, by category (ranges: 2 + their RangeKind); others are dropped."""
_BUCKETS = 2 + len(RangeKind)
_ID_FIELDS = ("correlation", "stream", "device")
_FRAME_FIELDS = ("kernels", "names")
MAX_KERNEL_NAMES = 200_000
RUNTIME_SCAN_EVENTS = 300_000
"""Events searched for hip*/cuda* runtime calls; the start of a trace tells the platform."""
"""More distinct names than this is not a GPU profile (real ones have thousands): refused before classifying."""


@dataclass(frozen=True)
class FrameLoader:
    """A table not built yet: its row count, and how to build it (the table cache reads it on demand)."""

    rows: int
    build: Callable[[], pd.DataFrame]


def _frame_slot(name: str) -> str:
    return f"_{name}_frame"


class _Frame:
    """A DataFrame field of Trace that may be given a FrameLoader: the frame is built on first access and kept.

    A re-open whose comparison is cached never needs the kernel table, so it never converts it."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = _frame_slot(name)

    def __get__(self, trace: Trace | None, owner: type | None = None) -> pd.DataFrame:
        if trace is None:
            raise AttributeError(self.slot)  # no default value: the dataclass field is required
        value = trace.__dict__[self.slot]
        if isinstance(value, FrameLoader):
            value = trace.__dict__[self.slot] = value.build()
        return value

    def __set__(self, trace: Trace, value: pd.DataFrame | FrameLoader) -> None:
        trace.__dict__[self.slot] = value

    def rows(self, trace: Trace) -> int:
        value = trace.__dict__[self.slot]
        return value.rows if isinstance(value, FrameLoader) else len(value)


@dataclass
class Trace:
    """One loaded trace; `kernels` is sorted by start time and its row number is the kernel's index."""

    label: str
    source: str
    platform: str
    platform_evidence: str
    gpu: str
    gpu_recorded: bool
    device_properties: list[dict[str, Any]]
    kernels: pd.DataFrame = _Frame()  # type: ignore[assignment]
    names: pd.DataFrame = _Frame()  # type: ignore[assignment]
    digest: str
    warnings: list[str] = field(default_factory=list)

    @property
    def kernel_count(self) -> int:
        return Trace.__dict__["kernels"].rows(self)

    def __getstate__(self) -> dict[str, Any]:
        """For pickling: every table built (a FrameLoader holds a reader, which does not pickle)."""
        return {**self.__dict__, **{_frame_slot(name): getattr(self, name) for name in _FRAME_FIELDS}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """From __getstate__, or from a Trace pickled before its tables could be lazy (plain attributes)."""
        self.__dict__.update({_frame_slot(k) if k in _FRAME_FIELDS else k: v for k, v in state.items()})

    @property
    def kernel_time_us(self) -> float:
        return float(self.kernels["dur"].sum())

    def subset(self, rows: np.ndarray, warning: str) -> Trace:
        """The trace with only the kernels at `rows` (in order, renumbered), its names table recounted over them,
        and `warning` added: what was left out and why."""
        kernels = self.kernels.take(rows).reset_index(drop=True)
        kernels["name"] = used_categories(kernels["name"])
        stats = kernels.groupby("name", observed=True)["dur"].agg(count="size", time_us="sum")
        stats.index = stats.index.astype(str)
        names = self.names.drop(columns=["count", "time_us"]).loc[stats.index].join(stats)
        return dataclasses.replace(self, kernels=kernels, names=names.sort_values("time_us", ascending=False),
                                   warnings=[*self.warnings, warning])


@dataclass
class _Collector:
    """Kernel columns, built piece by piece: Python touches each kernel a few times, numpy does the rest."""

    parts: list[tuple[np.ndarray, ...]] = field(default_factory=list)
    code_of: dict[str, int] = field(default_factory=dict)
    skipped: Counter = field(default_factory=Counter)
    missing: Counter = field(default_factory=Counter)
    runtime_prefixes: Counter = field(default_factory=Counter)
    cpu: CpuCollector = field(default_factory=lambda: CpuCollector(frame_suffixes=ENGINE_FRAME_SUFFIXES))
    events: int = 0

    def add_piece(self, piece: EventColumns, source: str) -> None:
        buckets = piece.by_bucket(_BUCKETS)
        kernels, runtime = buckets[_KERNEL], buckets[_RUNTIME]
        if self.events < RUNTIME_SCAN_EVENTS:
            self._count_prefixes(runtime)
        self.events += piece.events
        if len(kernels):
            self._add_kernels(kernels, source)
        if len(runtime):
            self.cpu.add_runtime(runtime)
        for kind in RangeKind:
            if len(buckets[2 + kind]):
                self.cpu.add_ranges(buckets[2 + kind], kind)

    def _count_prefixes(self, runtime: EventColumns) -> None:
        """hip/cud: the first three letters of the runtime calls' names tell the platform."""
        named = runtime.name[runtime.name != NOT_A_STRING]
        counts = np.bincount(named, minlength=len(runtime.names))
        for code in np.flatnonzero(counts).tolist():
            self.runtime_prefixes[runtime.names[code][:3]] += int(counts[code])

    def _add_kernels(self, kernels: EventColumns, source: str) -> None:
        keep = self._keep(kernels.name != NOT_A_STRING, kernels.ts, kernels.dur)
        kernels = kernels.rows(keep)
        codes = intern_coded(kernels.name, kernels.names, self.code_of)
        if len(self.code_of) > MAX_KERNEL_NAMES:
            problem = f"more than {MAX_KERNEL_NAMES:,} distinct kernel names; a GPU profile has thousands; refused"
            raise TraceError(source, problem)
        self._count_missing_ids(kernels)
        self.parts.append((codes, kernels.ts, kernels.dur, kernels.correlation, kernels.stream, kernels.device))

    def _keep(self, named: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> np.ndarray:
        """Rows with a name, a numeric ts and a non-negative numeric dur; the others are counted."""
        has_ts = ~np.isnan(ts)
        has_dur = ~np.isnan(dur)
        reasons = {
            "no name": ~named,
            "no numeric ts": named & ~has_ts,
            "no numeric dur": named & has_ts & ~has_dur,
            "negative dur": named & has_ts & has_dur & (dur < 0),
        }
        for why, rows in reasons.items():
            if rows.any():
                self.skipped[why] += int(rows.sum())
        return named & has_ts & has_dur & (dur >= 0)

    def _count_missing_ids(self, kernels: EventColumns) -> None:
        """Kernels without args, and kernels whose args lack a usable correlation, stream or device."""
        absent = int((~kernels.has_args).sum())
        if absent:
            self.missing["args"] += absent
        for what in _ID_FIELDS:
            unusable = int(((getattr(kernels, what) == MISSING_ID) & kernels.has_args).sum())
            if unusable:
                self.missing[what] += unusable

    def table(self) -> pd.DataFrame:
        """The kernel table; the parts are handed over (dropped here), so they are not kept beside it."""
        parts, self.parts = self.parts, []
        columns = [np.concatenate(part) for part in zip(*parts)] if parts else _empty_columns()
        del parts
        codes, ts, dur, correlation, stream, device = columns
        return pd.DataFrame(
            {
                "name": pd.Categorical.from_codes(codes, categories=list(self.code_of)),
                "ts": ts,
                "dur": dur,
                "correlation": correlation,
                "stream": stream,
                "device": device,
            }
        )


def _empty_columns() -> list[np.ndarray]:
    return [np.zeros(0, np.int32), np.zeros(0), np.zeros(0), *(np.zeros(0, np.int64) for _ in _ID_FIELDS)]


def load(
    source: TraceSource,
    label: str | None = None,
    *,
    name: str | None = None,
    progress: Progress | None = None,
    max_bytes: int | None = None,
) -> Trace:
    """Read a trace from a path, bytes or a binary file; raises TraceError naming the input and the problem.

    `name` names an in-memory input in messages (an upload's file name); `progress` is called with
    (bytes read, total bytes) as the file is read.
    """
    raw = open_input(source, name=name, progress=progress, max_bytes=max_bytes)
    stream = read_events(raw, _BUCKET)
    collector = _collect(stream.pieces, raw.source)
    top = stream.top_level
    props = _device_properties(top)
    platform, evidence = detect_platform(top, props, collector.runtime_prefixes)
    gpu, recorded = gpu_name(platform, props)
    kernels, warnings = _kernel_table(collector, raw.source)
    cpu = collector.cpu.events()
    kernels = kernels.assign(**launch_columns(kernels, cpu))
    kernels = kernels.assign(**phase_columns(kernels, cpu))
    names = _name_table(kernels, platform)
    types, routes = _kernel_types(kernels, names)
    kernels.insert(1, "type", types)
    kernels.insert(2, "type_route", routes)
    return Trace(
        label=label or default_label(platform, gpu, recorded, raw.source),
        source=raw.source,
        platform=platform,
        platform_evidence=evidence,
        gpu=gpu,
        gpu_recorded=recorded,
        device_properties=props,
        kernels=kernels,
        names=names,
        digest=raw.sha256,
        warnings=stream.warnings + warnings + _quality_warnings(collector),
    )


def _collect(pieces: Iterator[EventColumns], source: str) -> _Collector:
    """The columns of every piece; no piece outlives its turn (the last one included)."""
    collector = _Collector()
    for piece in pieces:
        collector.add_piece(piece, source)
    return collector


def _device_properties(top: dict[str, Any]) -> list[dict[str, Any]]:
    props = top.get("deviceProperties")
    if not isinstance(props, list):
        return []
    return [p for p in props if isinstance(p, dict)]


def detect_platform(
    top: dict[str, Any], props: list[dict[str, Any]], runtime_prefixes: Counter
) -> tuple[str, str]:
    """AMD or NVIDIA from the trace's own evidence; returns (platform, the evidence used)."""
    warp_sizes = [p.get("warpSize") for p in props]
    hip = runtime_prefixes.get("hip", 0)
    cuda = runtime_prefixes.get("cud", 0)
    if "roctracer_version" in top:
        return "AMD", "roctracer_version at the top level"
    if 64 in warp_sizes:
        return "AMD", "deviceProperties warpSize 64"
    if hip > cuda:
        return "AMD", "hip* runtime events"
    if cuda:
        return "NVIDIA", "cuda* runtime events"
    if 32 in warp_sizes:
        return "NVIDIA", "deviceProperties warpSize 32"
    return "unknown", "no roctracer_version, warpSize or runtime events to tell"


def gpu_name(platform: str, props: list[dict[str, Any]]) -> tuple[str, bool]:
    """The first recorded GPU name, or a statement that none was recorded; never a guessed model."""
    for entry in props:
        value = entry.get("name")
        if isinstance(value, str) and value.strip():
            return value.strip(), True
    vendor = f"{platform} GPU" if platform != "unknown" else "GPU"
    return f"{vendor}, name not recorded", False


def default_label(platform: str, gpu: str, recorded: bool, source: str) -> str:
    """'platform GPU' without repeating the vendor; unrecorded names fall back to the file name."""
    if not recorded:
        return f"{platform} GPU ({Path(source).name})" if platform != "unknown" else Path(source).name
    return gpu if gpu.upper().startswith(platform.upper()) else f"{platform} {gpu}"


def _kernel_table(collector: _Collector, source: str) -> tuple[pd.DataFrame, list[str]]:
    table = collector.table()
    warnings = []
    if table.empty:
        warnings.append(f"{source}: no kernel events (cat 'kernel'); a CPU-only trace or not a GPU profile")
    dup = _duplicated(table)
    if dup.any():
        warnings.append(f"{int(dup.sum())} duplicate kernel events (same name, ts, dur and ids) were dropped")
        table = table[~dup]
    order = np.argsort(table["ts"].to_numpy(), kind="stable")
    table = table.iloc[order].reset_index(drop=True)
    table["name"] = used_categories(table["name"])
    return table, warnings


def _duplicated(table: pd.DataFrame) -> np.ndarray:
    """table.duplicated(), checked only among rows whose ts is not unique: a full duplicate repeats its ts."""
    dup = np.zeros(len(table), dtype=bool)
    candidates = np.flatnonzero(table["ts"].duplicated(keep=False).to_numpy())
    if len(candidates):
        dup[candidates] = table.iloc[candidates].duplicated().to_numpy()
    return dup


def _name_table(kernels: pd.DataFrame, platform: str) -> pd.DataFrame:
    """Per distinct name: its classification, kernel count and total time."""
    stats = kernels.groupby("name", observed=True)["dur"].agg(count="size", time_us="sum")
    info = classify_names(stats.index.astype(str), platform)
    info.index.name = "name"
    stats.index = stats.index.astype(str)
    return info.join(stats).sort_values("time_us", ascending=False)


def _kernel_types(kernels: pd.DataFrame, name_table: pd.DataFrame) -> tuple[pd.Categorical, pd.Categorical]:
    """Per kernel, its type and what typed it, from the name's type and the launching ops.

    Each distinct (name, op, op_top) is classified once: the codes of the three are packed into one
    integer key, and classify.type_from_op runs on the distinct keys only.
    """
    columns = [kernels[c].cat for c in ("name", "op", "op_top")]
    name_types = name_table["type"].reindex(columns[0].categories.astype(str)).fillna("Other").to_numpy()
    sizes = [max(len(c.categories), 1) for c in columns]
    key = (columns[0].codes.to_numpy(np.int64) * sizes[1] + columns[1].codes) * sizes[2] + columns[2].codes
    inverse, distinct = pd.factorize(key)
    name_code, rest = np.divmod(distinct, sizes[1] * sizes[2])
    op_code, top_code = np.divmod(rest, sizes[2])
    ops, tops = columns[1].categories, columns[2].categories
    typed = [type_from_op(name_types[n], ops[o], tops[t]) for n, o, t in zip(name_code, op_code, top_code)]
    return _by_code([t for t, _ in typed], inverse, KERNEL_TYPES), _by_code([r for _, r in typed], inverse, TYPE_ROUTES)


def _by_code(values: list[str], inverse: np.ndarray, categories: tuple[str, ...]) -> pd.Categorical:
    """values[inverse] as a categorical over `categories` (missing where a value is not one of them)."""
    code_of = {category: code for code, category in enumerate(categories)}
    codes = np.array([code_of.get(v, -1) for v in values], dtype=np.int64)
    return pd.Categorical.from_codes(codes[inverse], categories=list(categories))


def _quality_warnings(collector: _Collector) -> list[str]:
    warnings = [f"{count} kernel events skipped: {why}" for why, count in sorted(collector.skipped.items())]
    warnings += [
        f"{count} kernel events have no usable {what}" for what, count in sorted(collector.missing.items())
    ]
    return warnings
