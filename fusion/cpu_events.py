"""The CPU side of a trace as compact columns, kept only while the trace loads.

Two tables: runtime calls that carry a correlation id (the launches a kernel's correlation leads to)
and ranges on a CPU thread (`cpu_op`, `user_annotation`, and the `nn.Module` frames among the
`python_function` events). Names are interned and threads are (pid, tid) codes, so memory follows the
number of ops and launches, not the file size. Resolving kernels against them is fusion/ops.py's job;
annotations are kept for the step and phase markers they hold (`ProfilerStep#N`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

from .columns import id_column, id_fields, intern_codes, intern_pairs, numbers
from .events import Event

RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "runtime", "Runtime"})
MODULE_FRAME_PREFIX = "nn.Module: "
"""How PyTorch names the python_function frame of an nn.Module call: `nn.Module: Linear_3`."""


class RangeKind(IntEnum):
    OP = 0
    ANNOTATION = 1
    MODULE = 2
    FRAME = 3
    """Another python_function frame, kept when its name ends with one of CpuCollector.frame_suffixes."""


RANGE_CATEGORIES = {"cpu_op": RangeKind.OP, "user_annotation": RangeKind.ANNOTATION, "python_function": RangeKind.MODULE}
"""The category of each kind of range; python_function events are kept only where they are nn.Module frames."""


@dataclass
class Launches:
    """Runtime calls with a usable correlation id; `name` and `thread` are codes into CpuEvents."""

    correlation: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    thread: np.ndarray
    name: np.ndarray


@dataclass
class Ranges:
    """Complete events on a CPU thread: [start, end) in µs; `name` and `thread` are codes into CpuEvents."""

    kind: np.ndarray
    start: np.ndarray
    end: np.ndarray
    thread: np.ndarray
    name: np.ndarray

    def of_kind(self, kind: RangeKind) -> Ranges:
        return self.where(self.kind == kind)

    def where(self, rows: np.ndarray) -> Ranges:
        return Ranges(*(column[rows] for column in (self.kind, self.start, self.end, self.thread, self.name)))


@dataclass
class CpuEvents:
    launches: Launches
    ranges: Ranges
    names: list[str]
    """Names of launches and ranges; module frames without their `nn.Module: ` prefix."""
    threads: list[tuple[Any, Any]]
    """(pid, tid) per thread code, as recorded (None for a list or an object)."""

    def tids(self) -> np.ndarray:
        """The tid of each thread code as int64, -1 where it is not a non-negative integer."""
        return id_column([tid for _, tid in self.threads])[0]


@dataclass
class CpuCollector:
    """Builds CpuEvents piece by piece from the runtime and range events the loader hands it."""

    launch_parts: list[tuple[np.ndarray, ...]] = field(default_factory=list)
    range_parts: list[tuple[np.ndarray, ...]] = field(default_factory=list)
    name_code: dict[str, int] = field(default_factory=dict)
    thread_code: dict[tuple[Any, Any], int] = field(default_factory=dict)
    frame_suffixes: tuple[str, ...] = ()
    """python_function frames whose names end with one of these are kept as FRAME ranges."""

    def add_runtime(self, events: list[Event]) -> None:
        events = [e for e in events if type(e.name) is str]
        correlation, _ = id_column(id_fields([e.args for e in events])[0])
        ts = numbers([e.ts for e in events])
        keep = (correlation >= 0) & ~np.isnan(ts)
        if keep.any():
            kept = [events[i] for i in np.flatnonzero(keep)]
            dur = numbers([e.dur for e in kept])
            names = self._codes([e.name for e in kept])
            self.launch_parts.append((correlation[keep], ts[keep], dur, self._threads(kept), names))

    def add_ranges(self, events: list[Event], kind: RangeKind) -> None:
        """Events of one range category; python_function events count only where they are nn.Module frames
        (MODULE) or end with one of `frame_suffixes` (FRAME)."""
        if kind == RangeKind.MODULE:
            frames, modules = self._python_frames(events)
            if frames:
                self.add_ranges(frames, RangeKind.FRAME)
            events = modules
            names = [e.name[len(MODULE_FRAME_PREFIX) :] for e in events]
        else:
            events = [e for e in events if type(e.name) is str]
            names = [e.name for e in events]
        ts, dur = numbers([e.ts for e in events]), numbers([e.dur for e in events])
        keep = ~np.isnan(ts) & (dur >= 0)
        if not keep.any():
            return
        rows = np.flatnonzero(keep)
        if len(rows) < len(events):
            events, names = [events[i] for i in rows], [names[i] for i in rows]
        start = ts[keep]
        kinds = np.full(len(rows), kind, dtype=np.int8)
        self.range_parts.append((kinds, start, start + dur[keep], self._threads(events), self._codes(names)))

    def _python_frames(self, events: list[Event]) -> tuple[list[Event], list[Event]]:
        """The python_function events kept as FRAME (name ends with a frame suffix) and as MODULE (nn.Module).

        Each distinct name is tested once: a piece has millions of frames but few names."""
        names = [e.name for e in events]
        try:
            distinct = dict.fromkeys(names)
        except TypeError:  # a name that is a list or an object: test each event
            distinct = None
        suffixes = self.frame_suffixes
        kept = []
        for wanted in ((lambda n: bool(suffixes) and n.endswith(suffixes)), (lambda n: n.startswith(MODULE_FRAME_PREFIX))):
            if distinct is None:
                kept.append([e for e in events if type(e.name) is str and wanted(e.name)])
                continue
            test = {n: type(n) is str and wanted(n) for n in distinct}
            rows = np.flatnonzero(np.fromiter(map(test.__getitem__, names), dtype=bool, count=len(names)))
            kept.append(list(map(events.__getitem__, rows.tolist())))
        return kept[0], kept[1]

    def events(self) -> CpuEvents:
        """The collected columns; the parts are handed over (dropped here)."""
        launch_parts, range_parts, self.launch_parts, self.range_parts = self.launch_parts, self.range_parts, [], []
        launches = _concat(launch_parts, (np.int64, np.float64, np.float64, np.int32, np.int32))
        ranges = _concat(range_parts, (np.int8, np.float64, np.float64, np.int32, np.int32))
        return CpuEvents(Launches(*launches), Ranges(*ranges), list(self.name_code), list(self.thread_code))

    def _codes(self, names: list[str]) -> np.ndarray:
        return intern_codes(names, self.name_code)

    def _threads(self, events: list[Event]) -> np.ndarray:
        """Thread codes; a pid or tid that cannot be a key (a list, an object) counts as None."""
        try:
            return intern_pairs([e.pid for e in events], [e.tid for e in events], self.thread_code)
        except TypeError:
            return intern_codes([(_hashable(e.pid), _hashable(e.tid)) for e in events], self.thread_code)


def _hashable(value: Any) -> Any:
    return None if isinstance(value, (list, dict)) else value


def _concat(parts: list[tuple[np.ndarray, ...]], dtypes: tuple[type, ...]) -> list[np.ndarray]:
    if not parts:
        return [np.zeros(0, dtype) for dtype in dtypes]
    return [np.concatenate(columns) for columns in zip(*parts)]
