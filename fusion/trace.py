"""Load a profiler trace: platform, GPU, and a kernel table with one row per kernel event.

This is the only module that reads trace files. It keeps the kernel fields the analysis needs
(name, ts, dur, correlation, stream, device), interns names, and classifies each distinct name once.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import msgspec
import numpy as np
import pandas as pd

from .classify import KERNEL_TYPES, classify_names
from .errors import TraceError
from .events import Event, read_events
from .reader import Progress, TraceSource, open_input

KERNEL_CATEGORIES = frozenset({"kernel", "Kernel"})
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "runtime"})
KERNEL_COLUMNS = ("name", "type", "ts", "dur", "correlation", "stream", "device")
MISSING_ID = -1
"""Stored in correlation, stream or device when the event does not carry that field."""
_INT64_MAX = 2**63 - 1
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


class _KernelArgs(msgspec.Struct):
    correlation: Any = None
    stream: Any = None
    device: Any = None


_args_decoder = msgspec.json.Decoder(_KernelArgs)
_args_list_decoder = msgspec.json.Decoder(list[Optional[_KernelArgs]])
_ID_FIELDS = ("correlation", "stream", "device")
_NO_NUMBER = np.nan


@dataclass
class _Collector:
    """Kernel columns, built piece by piece: Python touches each kernel a few times, numpy does the rest."""

    parts: list[tuple[np.ndarray, ...]] = field(default_factory=list)
    code_of: dict[str, int] = field(default_factory=dict)
    skipped: Counter = field(default_factory=Counter)
    missing: Counter = field(default_factory=Counter)
    runtime_prefixes: Counter = field(default_factory=Counter)
    events: int = 0

    def add_piece(self, events: list[Event], source: str) -> None:
        if self.events < RUNTIME_SCAN_EVENTS:
            self._count_runtime(events)
        self.events += len(events)
        kernels = [e for e in events if isinstance(e.cat, str) and e.cat in KERNEL_CATEGORIES]
        if kernels:
            self._add_kernels(kernels, source)

    def _count_runtime(self, events: list[Event]) -> None:
        for event in events:
            if isinstance(event.cat, str) and event.cat in RUNTIME_CATEGORIES and isinstance(event.name, str):
                self.runtime_prefixes[event.name[:3]] += 1

    def _add_kernels(self, kernels: list[Event], source: str) -> None:
        names = [e.name for e in kernels]
        ts = _numbers([e.ts for e in kernels])
        dur = _numbers([e.dur for e in kernels])
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
        args = _decode_args(raws)
        absent = sum(a is None for a in args)
        if absent:
            self.missing["args"] += absent
        columns = []
        for what in _ID_FIELDS:
            column, unusable = _id_column([getattr(a, what) if a is not None else None for a in args])
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


def _is_plain_number(value: Any) -> bool:
    return (type(value) is float or type(value) is int) and abs(value) < 1e300


def _numbers(values: list[Any]) -> np.ndarray:
    """A float64 column; NaN where a value is not a plain finite number (bools, strings, None, huge)."""
    if all(type(v) is float or type(v) is int for v in values):
        try:
            column = np.array(values, dtype=np.float64)
        except OverflowError:
            pass
        else:
            column[~(np.abs(column) < 1e300)] = _NO_NUMBER
            return column
    return np.array([v if _is_plain_number(v) else _NO_NUMBER for v in values], dtype=np.float64)


def _id_column(values: list[Any]) -> tuple[np.ndarray, int]:
    """An int64 id column with MISSING_ID where a value is not a non-negative int64; and how many were not."""
    if all(type(v) is int for v in values):
        try:
            column = np.array(values, dtype=np.int64)
        except OverflowError:
            pass
        else:
            negative = column < 0
            column[negative] = MISSING_ID
            return column, int(negative.sum())
    column = np.array(
        [v if type(v) is int and 0 <= v <= _INT64_MAX else MISSING_ID for v in values], dtype=np.int64
    )
    bad = sum(not (type(v) is int and 0 <= v <= _INT64_MAX) for v in values)
    return column, bad


def _decode_args(raws: list[msgspec.Raw]) -> list[_KernelArgs | None]:
    """All args of a piece's kernels in one decode; one by one only when some are not objects."""
    try:
        return _args_list_decoder.decode(b"[" + b",".join(r if len(r) else b"null" for r in raws) + b"]")
    except (msgspec.DecodeError, RecursionError):
        return [_decode_one_args(r) for r in raws]


def _decode_one_args(raw: msgspec.Raw) -> _KernelArgs | None:
    try:
        return _args_decoder.decode(raw) if len(raw) else None
    except (msgspec.DecodeError, RecursionError):
        return None


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
    stream = read_events(raw)
    collector = _Collector()
    for piece in stream.pieces:
        collector.add_piece(piece, raw.source)
    top = stream.top_level
    props = _device_properties(top)
    platform, evidence = detect_platform(top, props, collector.runtime_prefixes)
    gpu, recorded = gpu_name(platform, props)
    kernels, warnings = _kernel_table(collector, raw.source)
    names = _name_table(kernels, platform)
    kernels.insert(1, "type", _types_for(kernels["name"], names))
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


def _types_for(names: pd.Series, name_table: pd.DataFrame) -> pd.Categorical:
    categories = names.cat.categories.astype(str)
    per_code = name_table["kernel_type"].reindex(categories).fillna("Other").to_numpy()
    codes = names.cat.codes.to_numpy()
    return pd.Categorical(per_code[codes] if len(codes) else [], categories=list(KERNEL_TYPES))


def _quality_warnings(collector: _Collector) -> list[str]:
    warnings = [f"{count} kernel events skipped: {why}" for why, count in sorted(collector.skipped.items())]
    warnings += [
        f"{count} kernel events have no usable {what}" for what, count in sorted(collector.missing.items())
    ]
    return warnings
