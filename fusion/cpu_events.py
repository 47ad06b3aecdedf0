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

from .columns import decode_args, id_column, numbers
from .events import Event

RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "runtime", "Runtime"})
MODULE_FRAME_PREFIX = "nn.Module: "
"""How PyTorch names the python_function frame of an nn.Module call: `nn.Module: Linear_3`."""


class RangeKind(IntEnum):
    OP = 0
    ANNOTATION = 1
    MODULE = 2


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
        rows = self.kind == kind
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

    def add_runtime(self, events: list[Event]) -> None:
        events = [e for e in events if type(e.name) is str]
        args = decode_args([e.args for e in events])
        correlation, _ = id_column([a.correlation if a is not None else None for a in args])
        ts = numbers([e.ts for e in events])
        keep = (correlation >= 0) & ~np.isnan(ts)
        if keep.any():
            kept = [events[i] for i in np.flatnonzero(keep)]
            dur = numbers([e.dur for e in kept])
            names = self._codes([e.name for e in kept])
            self.launch_parts.append((correlation[keep], ts[keep], dur, self._threads(kept), names))

    def add_ranges(self, events: list[Event], kind: RangeKind) -> None:
        """Events of one range category; python_function events count only where they are nn.Module frames."""
        if kind == RangeKind.MODULE:
            events = [e for e in events if type(e.name) is str and e.name.startswith(MODULE_FRAME_PREFIX)]
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

    def events(self) -> CpuEvents:
        launches = _concat(self.launch_parts, (np.int64, np.float64, np.float64, np.int32, np.int32))
        ranges = _concat(self.range_parts, (np.int8, np.float64, np.float64, np.int32, np.int32))
        return CpuEvents(Launches(*launches), Ranges(*ranges), list(self.name_code), list(self.thread_code))

    def _codes(self, names: list[str]) -> np.ndarray:
        return _intern(names, self.name_code)

    def _threads(self, events: list[Event]) -> np.ndarray:
        """Thread codes; a pid or tid that cannot be a key (a list, an object) counts as None."""
        try:
            return _intern([(e.pid, e.tid) for e in events], self.thread_code)
        except TypeError:
            return _intern([(_hashable(e.pid), _hashable(e.tid)) for e in events], self.thread_code)


def _intern(keys: list[Any], table: dict[Any, int]) -> np.ndarray:
    """The code of each key in `table`, new keys numbered in order of appearance (a piece has few distinct keys)."""
    for key in dict.fromkeys(keys):
        table.setdefault(key, len(table))
    return np.fromiter(map(table.__getitem__, keys), dtype=np.int32, count=len(keys))


def _hashable(value: Any) -> Any:
    return None if isinstance(value, (list, dict)) else value


def _concat(parts: list[tuple[np.ndarray, ...]], dtypes: tuple[type, ...]) -> list[np.ndarray]:
    if not parts:
        return [np.zeros(0, dtype) for dtype in dtypes]
    return [np.concatenate(columns) for columns in zip(*parts)]
