"""Kineto (PyTorch profiler) Chrome-trace JSON -> TraceRecords: the kernel columns, the CPU side and the facts
recorded at the top level (platform, GPU). One pass over the file, in pieces (fusion.loader.events); Python
touches each kernel a few times and numpy does the rest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fusion.errors import TraceError
from fusion.loader.columns import MISSING_ID, intern_coded, taken, used_categories
from fusion.loader.cpu_events import RANGE_CATEGORIES, RUNTIME_CATEGORIES, CpuCollector, CpuEvents, RangeKind
from fusion.loader.event_columns import NOT_A_STRING, EventColumns
from fusion.loader.events import read_events
from fusion.loader.op_args import KERNEL_MASK, SHAPES_MASK
from fusion.loader.reader import Progress, RawInput, TraceSource, open_input
from fusion.vocabulary import GPU_KERNEL, GPU_MEMCPY, GPU_MEMSET, GPU_WORK

KERNEL_CATEGORIES = frozenset({"kernel", "Kernel"})
GPU_WORK_CATEGORIES = {
    **dict.fromkeys(KERNEL_CATEGORIES, GPU_KERNEL),
    **dict.fromkeys(("gpu_memcpy", "Memcpy"), GPU_MEMCPY),
    **dict.fromkeys(("gpu_memset", "Memset"), GPU_MEMSET),
}
"""GPU work of each kind by category; the capitalised ones are older Kineto's."""
LEGACY_RANGE_CATEGORIES = {"Operator": RangeKind.OP}
"""Older Kineto's name for cpu_op."""
_RUNTIME = len(GPU_WORK)
_RANGES = _RUNTIME + 1
_BUCKET = {
    **{category: GPU_WORK.index(work) for category, work in GPU_WORK_CATEGORIES.items()},
    **dict.fromkeys(RUNTIME_CATEGORIES, _RUNTIME),
    **{category: _RANGES + kind for category, kind in {**RANGE_CATEGORIES, **LEGACY_RANGE_CATEGORIES}.items()},
}
"""Which list a piece's events are sorted into, by category (GPU work by kind, runtime, ranges by RangeKind);
others are dropped."""
_BUCKETS = _RANGES + len(RangeKind)
_SHAPES_BUCKET = _RANGES + RangeKind.OP
"""cpu_op events keep their shapes args (op_args)."""
_ID_FIELDS = ("correlation", "stream", "device")
MAX_KERNEL_NAMES = 200_000
"""More distinct names than this is not a GPU profile (real ones have thousands): refused before classifying."""
PROFILER_STEP_PREFIX = "ProfilerStep#"
RUNTIME_SCAN_EVENTS = 300_000
"""Events searched for hip*/cuda* runtime calls; the start of a trace tells the platform."""


@dataclass
class TraceRecords:
    """What a reader keeps of one trace file: everything later stages derive the trace model from.

    `kernels` has one row per kernel event, sorted by start time: name (categorical), ts, dur, correlation,
    stream, device. `cpu` is the CPU side (runtime launches, ranges) as compact columns."""

    source: str
    digest: str
    file_hash: str
    """RawInput.file_hash: every reader sets it (digest=raw.sha256, file_hash=raw.file_hash), or its traces
    are never served from the table cache."""
    platform: str
    platform_evidence: str
    gpu: str
    gpu_recorded: bool
    device_properties: list[dict[str, Any]]
    kernels: pd.DataFrame
    cpu: CpuEvents
    warnings: list[str]
    format: str = "Kineto JSON"
    raw_names: dict[str, str] = field(default_factory=dict)
    """{name: the symbol as recorded} where a reader shows a kernel by another name (a demangled symbol)."""
    work: dict[str, str] = field(default_factory=dict)
    """{name: GPU_MEMCPY or GPU_MEMSET} of the rows that are GPU work other than kernels."""
    device_names: dict[int, str] = field(default_factory=dict)
    """{device: its GPU's name} where the file ties names to the kernels' device numbers."""


def read_kineto(
    source: TraceSource,
    *,
    name: str | None = None,
    progress: Progress | None = None,
    max_bytes: int | None = None,
    frame_suffixes: tuple[str, ...] = (),
    launch_kernels: bool = False,
) -> TraceRecords:
    """Read a Kineto trace from a path, bytes or a binary file; raises TraceError naming the input and the problem.

    `name` names an in-memory input in messages (an upload's file name); `progress` is called with (bytes read,
    total bytes); python_function frames whose names end with one of `frame_suffixes` are kept as ranges;
    `launch_kernels` keeps the kernel name each runtime launch records (a graph capture's, fusion.model.capture)."""
    raw = open_input(source, name=name, progress=progress, max_bytes=max_bytes)
    return read_kineto_input(raw, frame_suffixes=frame_suffixes, launch_kernels=launch_kernels)


def read_kineto_input(
    raw: RawInput, *, frame_suffixes: tuple[str, ...] = (), launch_kernels: bool = False
) -> TraceRecords:
    """read_kineto of an input opened already (fusion.loader.formats looked at its first bytes)."""
    stream = read_events(raw, _BUCKET, value_masks(launch_kernels))
    collector = _collect(stream.pieces, raw.source, frame_suffixes)
    top = stream.top_level
    props = _device_properties(top)
    platform, evidence = detect_platform(top, props, collector.runtime_prefixes)
    gpu, recorded = gpu_name(platform, props)
    kernels, warnings = _kernel_table(collector, raw.source)
    return TraceRecords(
        source=raw.source,
        digest=raw.sha256,
        file_hash=raw.file_hash,
        platform=platform,
        platform_evidence=evidence,
        gpu=gpu,
        gpu_recorded=recorded,
        device_properties=props,
        kernels=kernels,
        cpu=steps_as_annotations(collector.cpu.events()),
        warnings=stream.warnings + warnings + _quality_warnings(collector),
        work={name: collector.work_of[code] for name, code in collector.code_of.items() if code in collector.work_of},
    )


def value_masks(launch_kernels: bool) -> dict[int, int]:
    """The op_args values kept per bucket: cpu_ops' shapes, and the kernel a runtime launch names when asked."""
    return {_SHAPES_BUCKET: SHAPES_MASK} | ({_RUNTIME: KERNEL_MASK} if launch_kernels else {})


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
    work_of: dict[int, str] = field(default_factory=dict)
    """{name code: GPU_MEMCPY or GPU_MEMSET} of the names of GPU work other than kernels."""

    def add_piece(self, piece: EventColumns, source: str) -> None:
        buckets = piece.by_bucket(_BUCKETS)
        runtime = buckets[_RUNTIME]
        if self.events < RUNTIME_SCAN_EVENTS:
            self._count_prefixes(runtime)
        self.events += piece.events
        for bucket, work in enumerate(GPU_WORK):
            if len(buckets[bucket]):
                self._add_kernels(buckets[bucket], source, work)
        if len(runtime):
            self.cpu.add_runtime(runtime)
        for kind in RangeKind:
            if len(buckets[_RANGES + kind]):
                self.cpu.add_ranges(buckets[_RANGES + kind], kind)

    def _count_prefixes(self, runtime: EventColumns) -> None:
        """hip/cud: the first three letters of the runtime calls' names tell the platform."""
        named = runtime.name[runtime.name != NOT_A_STRING]
        counts = np.bincount(named, minlength=len(runtime.names))
        for code in np.flatnonzero(counts).tolist():
            self.runtime_prefixes[runtime.names[code][:3]] += int(counts[code])

    def _add_kernels(self, kernels: EventColumns, source: str, work: str = GPU_KERNEL) -> None:
        keep = self._keep(kernels.name != NOT_A_STRING, kernels.ts, kernels.dur)
        kernels = kernels.rows(keep)
        codes = intern_coded(kernels.name, kernels.names, self.code_of)
        if work != GPU_KERNEL:
            self.work_of.update(dict.fromkeys(np.unique(codes).tolist(), work))
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


def _collect(pieces: Iterator[EventColumns], source: str, frame_suffixes: tuple[str, ...]) -> _Collector:
    """The columns of every piece; no piece outlives its turn (the last one included)."""
    collector = _Collector(cpu=CpuCollector(frame_suffixes=frame_suffixes))
    for piece in pieces:
        collector.add_piece(piece, source)
    return collector


def steps_as_annotations(cpu: CpuEvents) -> CpuEvents:
    """`ProfilerStep#N` ranges recorded as ops (older Kineto: cat `Operator` or `cpu_op`) as the annotations
    they are, so they mark steps and never become every kernel's top-level op."""
    is_step = np.array([name.startswith(PROFILER_STEP_PREFIX) for name in cpu.names] + [False])
    ranges = cpu.ranges
    rows = (ranges.kind == RangeKind.OP) & is_step[ranges.name]
    if rows.any():
        ranges.kind[rows] = RangeKind.ANNOTATION
    return cpu


def _device_properties(top: dict[str, Any]) -> list[dict[str, Any]]:
    props = top.get("deviceProperties")
    if not isinstance(props, list):
        return []
    return [p for p in props if isinstance(p, dict)]


def detect_platform(top: dict[str, Any], props: list[dict[str, Any]], runtime_prefixes: Counter) -> tuple[str, str]:
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
    table = taken(table, order)
    table["name"] = used_categories(table["name"])
    return table, warnings + _duration_warnings(table, source)


def _duration_warnings(table: pd.DataFrame, source: str) -> list[str]:
    """Kernels that last longer than the trace's own span (first to last kernel start): their durations cannot be
    true, and every time total that holds them is off. Kept, with this warning."""
    if len(table) < 2:
        return []
    ts, dur = table["ts"].to_numpy(), table["dur"].to_numpy()
    span = float(ts[-1] - ts[0])
    longer = dur > span
    if span <= 0 or not longer.any():
        return []
    return [
        f"{source}: {int(longer.sum())} kernel events last longer than the trace's whole span ({span:,.1f} µs "
        f"from the first kernel start to the last; the longest lasts {float(dur.max()):,.1f} µs): their "
        "durations are suspect and every time total that holds them is off"
    ]


def _duplicated(table: pd.DataFrame) -> np.ndarray:
    """table.duplicated(), checked only among rows whose ts is not unique: a full duplicate repeats its ts."""
    dup = np.zeros(len(table), dtype=bool)
    candidates = np.flatnonzero(table["ts"].duplicated(keep=False).to_numpy())
    if len(candidates):
        dup[candidates] = table.iloc[candidates].duplicated().to_numpy()
    return dup


def _quality_warnings(collector: _Collector) -> list[str]:
    warnings = [f"{count} kernel events skipped: {why}" for why, count in sorted(collector.skipped.items())]
    warnings += [f"{count} kernel events have no usable {what}" for what, count in sorted(collector.missing.items())]
    return warnings
