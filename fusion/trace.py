"""Load a profiler trace: platform, GPU, and a kernel table with one row per kernel event.

This is the only module that reads trace files. It keeps the kernel fields the analysis needs
(name, ts, dur, correlation, stream, device), interns names, and classifies each distinct name once.
The CPU side (runtime launches, ops, annotations, module frames) is collected as compact columns
while the file is read, resolved into the launching-op columns (fusion/ops.py), then dropped.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from .classify import KERNEL_TYPES, classify_names, type_from_op
from .columns import MISSING_ID, decode_args, id_column, numbers
from .cpu_events import RANGE_CATEGORIES, RUNTIME_CATEGORIES, CpuCollector, RangeKind
from .errors import TraceError
from .events import Event, read_events
from .ops import OP_COLUMNS, launch_columns
from .reader import DEFAULT_MAX_BYTES, Progress, TraceSource, open_input

KERNEL_CATEGORIES = frozenset({"kernel", "Kernel"})
KERNEL_COLUMNS = ("name", "type", "type_route", "ts", "dur", "correlation", "stream", "device", *OP_COLUMNS)
TYPE_ROUTES = ("name", "op", "unknown")
"""What typed a kernel: its name's rule, its launching op, or nothing (type Other)."""
_KERNEL, _RUNTIME = range(2)
_BUCKET = {
    **dict.fromkeys(KERNEL_CATEGORIES, _KERNEL),
    **dict.fromkeys(RUNTIME_CATEGORIES, _RUNTIME),
    **{category: 2 + kind for category, kind in RANGE_CATEGORIES.items()},
}
"""Which list a piece's events are sorted into, by category (ranges: 2 + their RangeKind); others are dropped."""
_ID_FIELDS = ("correlation", "stream", "device")
MAX_KERNEL_NAMES = 200_000
RUNTIME_SCAN_EVENTS = 300_000
"""Events searched for hip*/cuda* runtime calls; the start of a trace tells the platform."""
"""More distinct names than this is not a GPU profile (real ones have thousands): refused before classifying."""


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
    kernels: pd.DataFrame
    names: pd.DataFrame
    digest: str
    warnings: list[str] = field(default_factory=list)

    @property
    def kernel_count(self) -> int:
        return len(self.kernels)

    @property
    def kernel_time_us(self) -> float:
        return float(self.kernels["dur"].sum())


@dataclass
class _Collector:
    """Kernel columns, built piece by piece: Python touches each kernel a few times, numpy does the rest."""

    parts: list[tuple[np.ndarray, ...]] = field(default_factory=list)
    code_of: dict[str, int] = field(default_factory=dict)
    skipped: Counter = field(default_factory=Counter)
    missing: Counter = field(default_factory=Counter)
    runtime_prefixes: Counter = field(default_factory=Counter)
    cpu: CpuCollector = field(default_factory=CpuCollector)
    events: int = 0

    def add_piece(self, events: list[Event], source: str) -> None:
        buckets: list[list[Event]] = [[] for _ in range(2 + len(RangeKind))]
        for event in events:
            if type(event.cat) is str:
                bucket = _BUCKET.get(event.cat)
                if bucket is not None:
                    buckets[bucket].append(event)
        kernels, runtime = buckets[_KERNEL], buckets[_RUNTIME]
        if self.events < RUNTIME_SCAN_EVENTS:
            self.runtime_prefixes.update(e.name[:3] for e in runtime if isinstance(e.name, str))
        self.events += len(events)
        if kernels:
            self._add_kernels(kernels, source)
        if runtime:
            self.cpu.add_runtime(runtime)
        for kind in RangeKind:
            if buckets[2 + kind]:
                self.cpu.add_ranges(buckets[2 + kind], kind)

    def _add_kernels(self, kernels: list[Event], source: str) -> None:
        names = [e.name for e in kernels]
        ts = numbers([e.ts for e in kernels])
        dur = numbers([e.dur for e in kernels])
        named = np.fromiter((type(n) is str for n in names), dtype=bool, count=len(names))
        keep = self._keep(named, ts, dur)
        rows = np.flatnonzero(keep)
        if len(rows) < len(kernels):
            kernels = [kernels[i] for i in rows]
            names = [names[i] for i in rows]
        code_of = self.code_of
        codes = np.array([code_of.setdefault(n, len(code_of)) for n in names], dtype=np.int32)
        if len(code_of) > MAX_KERNEL_NAMES:
            problem = f"more than {MAX_KERNEL_NAMES:,} distinct kernel names; a GPU profile has thousands; refused"
            raise TraceError(source, problem)
        ids = self._ids([e.args for e in kernels])
        self.parts.append((codes, ts[keep], dur[keep], *ids))

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

    def _ids(self, raws: list[msgspec.Raw]) -> list[np.ndarray]:
        """correlation, stream and device columns; MISSING_ID where an event lacks a usable value."""
        args = decode_args(raws)
        absent = sum(a is None for a in args)
        if absent:
            self.missing["args"] += absent
        columns = []
        for what in _ID_FIELDS:
            column, unusable = id_column([getattr(a, what) if a is not None else None for a in args])
            if unusable - absent:
                self.missing[what] += unusable - absent
            columns.append(column)
        return columns

    def table(self) -> pd.DataFrame:
        columns = [np.concatenate(parts) for parts in zip(*self.parts)] if self.parts else _empty_columns()
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
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Trace:
    """Read a trace from a path, bytes or a binary file; raises TraceError naming the input and the problem.

    `name` names an in-memory input in messages (an upload's file name); `progress` is called with
    (bytes read, total bytes) as the file is read.
    """
    raw = open_input(source, name=name, progress=progress, max_bytes=max_bytes)
    stream = read_events(raw)
    collector = _Collector()
    for piece in stream.pieces:
        collector.add_piece(piece, raw.source)
    top = stream.top_level
    props = _device_properties(top)
    platform, evidence = detect_platform(top, props, collector.runtime_prefixes)
    gpu, recorded = gpu_name(platform, props)
    kernels, warnings = _kernel_table(collector, raw.source)
    kernels = kernels.assign(**launch_columns(kernels, collector.cpu.events()))
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
    dup = table.duplicated()
    if dup.any():
        warnings.append(f"{int(dup.sum())} duplicate kernel events (same name, ts, dur and ids) were dropped")
        table = table[~dup]
    order = np.argsort(table["ts"].to_numpy(), kind="stable")
    table = table.iloc[order].reset_index(drop=True)
    table["name"] = table["name"].cat.remove_unused_categories()
    return table, warnings


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
    distinct, inverse = np.unique(key, return_inverse=True)
    name_code, rest = np.divmod(distinct, sizes[1] * sizes[2])
    op_code, top_code = np.divmod(rest, sizes[2])
    ops, tops = columns[1].categories, columns[2].categories
    typed = [type_from_op(name_types[n], ops[o], tops[t]) for n, o, t in zip(name_code, op_code, top_code)]
    types = np.array([t for t, _ in typed], dtype=object)
    routes = np.array([r for _, r in typed], dtype=object)
    index = inverse.reshape(-1)
    return (
        pd.Categorical(types[index], categories=list(KERNEL_TYPES)),
        pd.Categorical(routes[index], categories=list(TYPE_ROUTES)),
    )


def _quality_warnings(collector: _Collector) -> list[str]:
    warnings = [f"{count} kernel events skipped: {why}" for why, count in sorted(collector.skipped.items())]
    warnings += [
        f"{count} kernel events have no usable {what}" for what, count in sorted(collector.missing.items())
    ]
    return warnings
