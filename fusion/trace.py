"""Load a profiler trace: platform, GPU, and a kernel table with one row per kernel event.

This is the only module that reads trace files. It keeps the kernel fields the analysis needs
(name, ts, dur, correlation, stream, device), interns names, and classifies each distinct name once.
"""

from __future__ import annotations

from array import array
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from .classify import KERNEL_TYPES, classify_names
from .errors import TraceError
from .events import Event, read_events
from .reader import DEFAULT_MAX_BYTES, Progress, TraceSource, open_input

KERNEL_CATEGORIES = frozenset({"kernel", "Kernel"})
RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "runtime"})
KERNEL_COLUMNS = ("name", "type", "ts", "dur", "correlation", "stream", "device")
MISSING_ID = -1
"""Stored in correlation, stream or device when the event does not carry that field."""
_INT64_MAX = 2**63 - 1
MAX_KERNEL_NAMES = 200_000
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


@dataclass
class _Collector:
    """Column buffers for kernel events, filled piece by piece."""

    name_codes: array = field(default_factory=lambda: array("i"))
    ts: array = field(default_factory=lambda: array("d"))
    dur: array = field(default_factory=lambda: array("d"))
    correlation: array = field(default_factory=lambda: array("q"))
    stream: array = field(default_factory=lambda: array("q"))
    device: array = field(default_factory=lambda: array("q"))
    code_of: dict[str, int] = field(default_factory=dict)
    skipped: Counter = field(default_factory=Counter)
    missing: Counter = field(default_factory=Counter)
    runtime_prefixes: Counter = field(default_factory=Counter)
    events: int = 0

    def add_piece(self, events: list[Event], source: str) -> None:
        self.events += len(events)
        for event in events:
            cat = event.cat
            if not isinstance(cat, str):
                continue
            if cat in KERNEL_CATEGORIES:
                self._add_kernel(event, source)
            elif cat in RUNTIME_CATEGORIES and isinstance(event.name, str):
                self.runtime_prefixes[event.name[:3]] += 1

    def _add_kernel(self, event: Event, source: str) -> None:
        name, ts, dur = event.name, event.ts, event.dur
        if not isinstance(name, str):
            self.skipped["no name"] += 1
            return
        if not _is_number(ts):
            self.skipped["no numeric ts"] += 1
            return
        if not _is_number(dur):
            self.skipped["no numeric dur"] += 1
            return
        if dur < 0:
            self.skipped["negative dur"] += 1
            return
        code = self.code_of.setdefault(name, len(self.code_of))
        if code == MAX_KERNEL_NAMES:
            problem = f"more than {MAX_KERNEL_NAMES:,} distinct kernel names; a GPU profile has thousands; refused"
            raise TraceError(source, problem)
        ids = self._ids(event.args)
        self.name_codes.append(code)
        self.ts.append(ts)
        self.dur.append(dur)
        self.correlation.append(ids[0])
        self.stream.append(ids[1])
        self.device.append(ids[2])

    def _ids(self, raw: msgspec.Raw) -> tuple[int, int, int]:
        try:
            args = _args_decoder.decode(raw) if len(raw) else None
        except (msgspec.DecodeError, RecursionError):
            args = None
        if args is None:
            self.missing["args"] += 1
            return MISSING_ID, MISSING_ID, MISSING_ID
        return self._id(args.correlation, "correlation"), self._id(args.stream, "stream"), self._id(args.device, "device")

    def _id(self, value: Any, what: str) -> int:
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _INT64_MAX:
            return value
        self.missing[what] += 1
        return MISSING_ID

    def table(self) -> pd.DataFrame:
        names = list(self.code_of)
        return pd.DataFrame(
            {
                "name": pd.Categorical.from_codes(np.frombuffer(self.name_codes, dtype=np.int32), categories=names),
                "ts": np.frombuffer(self.ts, dtype=np.float64),
                "dur": np.frombuffer(self.dur, dtype=np.float64),
                "correlation": np.frombuffer(self.correlation, dtype=np.int64),
                "stream": np.frombuffer(self.stream, dtype=np.int64),
                "device": np.frombuffer(self.device, dtype=np.int64),
            }
        )


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e300


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
