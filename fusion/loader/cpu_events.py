"""The CPU side of a trace as compact columns, kept only while the trace loads.

Two tables: runtime calls that carry a correlation id (the launches a kernel's correlation leads to)
and ranges on a CPU thread (`cpu_op`, `user_annotation`, and the `nn.Module` frames among the
`python_function` events). Names are interned and threads are (pid, tid) codes, so memory follows the
number of ops and launches, not the file size. An op keeps the code of its shapes (op_args: Input Dims, Input
type, Input Strides, Concrete Inputs), interned per distinct shapes text; a launch the name of the kernel it
launched where the loader was asked to keep it (a graph capture's launches). Resolving kernels against them is fusion/ops.py's job;
annotations are kept for the step and phase markers they hold (`ProfilerStep#N`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

from fusion.loader.columns import id_column, intern_coded
from fusion.loader.event_columns import NOT_A_STRING, EventColumns
from fusion.loader.op_args import NO_ARGS

RUNTIME_CATEGORIES = frozenset({"cuda_runtime", "cuda_driver", "hip_runtime", "runtime", "Runtime"})
MODULE_FRAME_PREFIX = "nn.Module: "
"""How PyTorch names the python_function frame of an nn.Module call: `nn.Module: Linear_3`."""


class RangeKind(IntEnum):
    OP = 0
    ANNOTATION = 1
    MODULE = 2
    FRAME = 3
    """Another python_function frame, kept when its name ends with one of CpuCollector.frame_suffixes."""


RANGE_CATEGORIES = {
    "cpu_op": RangeKind.OP,
    "user_annotation": RangeKind.ANNOTATION,
    "python_function": RangeKind.MODULE,
}
"""The category of each kind of range; python_function events are kept only where they are nn.Module frames."""


@dataclass
class Launches:
    """Runtime calls with a usable correlation id; `name`, `thread` and `kernel` are codes into CpuEvents."""

    correlation: np.ndarray
    ts: np.ndarray
    dur: np.ndarray
    thread: np.ndarray
    name: np.ndarray
    kernel: np.ndarray
    """The launched kernel's name (a code into CpuEvents.names), NO_ARGS where not recorded or not kept."""


@dataclass
class Ranges:
    """Complete events on a CPU thread: [start, end) in µs; `name` and `thread` are codes into CpuEvents."""

    kind: np.ndarray
    start: np.ndarray
    end: np.ndarray
    thread: np.ndarray
    name: np.ndarray
    shapes: np.ndarray
    """An op's shapes (a code into CpuEvents.shapes); NO_ARGS for other ranges and ops that record none."""

    def of_kind(self, kind: RangeKind) -> Ranges:
        return self.where(self.kind == kind)

    def where(self, rows: np.ndarray) -> Ranges:
        columns = (self.kind, self.start, self.end, self.thread, self.name, self.shapes)
        return Ranges(*(column[rows] for column in columns))


@dataclass
class CpuEvents:
    launches: Launches
    ranges: Ranges
    names: list[str]
    """Names of launches and ranges; module frames without their `nn.Module: ` prefix."""
    threads: list[tuple[Any, Any]]
    """(pid, tid) per thread code, as recorded (None for a list or an object)."""
    shapes: list[str] = field(default_factory=list)
    """Distinct shapes texts of ops (op_args.ArgValues.shapes)."""

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
    shape_code: dict[str, int] = field(default_factory=dict)
    frame_suffixes: tuple[str, ...] = ()
    """python_function frames whose names end with one of these are kept as FRAME ranges."""

    def add_runtime(self, events: EventColumns) -> None:
        """Runtime calls with a string name, a usable correlation id and a numeric ts."""
        events = events.rows(events.name != NOT_A_STRING)
        keep = (events.correlation >= 0) & ~np.isnan(events.ts)
        if keep.any():
            kept = events.rows(keep)
            names = self._names(kept)
            kernels = _interned(kept.args, [v.kernel for v in kept.arg_values], self.name_code)
            self.launch_parts.append((kept.correlation, kept.ts, kept.dur, self._threads(kept), names, kernels))

    def add_ranges(self, events: EventColumns, kind: RangeKind) -> None:
        """Events of one range category; python_function events count only where they are nn.Module frames
        (MODULE) or end with one of `frame_suffixes` (FRAME)."""
        if kind == RangeKind.MODULE:
            frames, events = self._python_frames(events)
            if len(frames):
                self.add_ranges(frames, RangeKind.FRAME)
        else:
            events = events.rows(events.name != NOT_A_STRING)
        keep = ~np.isnan(events.ts) & (events.dur >= 0)
        if not keep.any():
            return
        kept = events.rows(keep)
        kinds = np.full(len(kept), kind, dtype=np.int8)
        if kind == RangeKind.OP:
            shapes = _interned(kept.args, [v.shapes for v in kept.arg_values], self.shape_code)
        else:
            shapes = np.full(len(kept), NO_ARGS, dtype=np.int32)
        self.range_parts.append((kinds, kept.ts, kept.ts + kept.dur, self._threads(kept), self._names(kept), shapes))

    def _python_frames(self, events: EventColumns) -> tuple[EventColumns, EventColumns]:
        """The python_function events kept as FRAME (name ends with a frame suffix) and as MODULE (nn.Module,
        named without the prefix). Each distinct name is tested once."""
        suffixes = self.frame_suffixes
        # one entry per distinct name, and a last one (False) that the code NOT_A_STRING (-1) indexes
        is_frame = np.array([bool(suffixes) and n.endswith(suffixes) for n in events.names] + [False])
        is_module = np.array([n.startswith(MODULE_FRAME_PREFIX) for n in events.names] + [False])
        modules = events.rows(is_module[events.name])
        modules.names = [n.removeprefix(MODULE_FRAME_PREFIX) for n in events.names]
        return events.rows(is_frame[events.name]), modules

    def events(self) -> CpuEvents:
        """The collected columns; the parts are handed over (dropped here)."""
        launch_parts, range_parts, self.launch_parts, self.range_parts = self.launch_parts, self.range_parts, [], []
        launches = _concat(launch_parts, (np.int64, np.float64, np.float64, np.int32, np.int32, np.int32))
        ranges = _concat(range_parts, (np.int8, np.float64, np.float64, np.int32, np.int32, np.int32))
        return CpuEvents(
            Launches(*launches), Ranges(*ranges), list(self.name_code), list(self.thread_code), list(self.shape_code)
        )

    def _names(self, events: EventColumns) -> np.ndarray:
        return intern_coded(events.name, events.names, self.name_code)

    def _threads(self, events: EventColumns) -> np.ndarray:
        return intern_coded(events.thread, events.threads, self.thread_code)


def _interned(codes: np.ndarray, values: list[str], table: dict[str, int]) -> np.ndarray:
    """The code in `table` of each values[code] ('' and NO_ARGS give NO_ARGS), new values numbered in order of
    first appearance; each of the piece's distinct values is looked up once."""
    lookup = np.array([table.setdefault(v, len(table)) if v else NO_ARGS for v in values] + [NO_ARGS], np.int32)
    return lookup[codes]


def _concat(parts: list[tuple[np.ndarray, ...]], dtypes: tuple[type, ...]) -> list[np.ndarray]:
    if not parts:
        return [np.zeros(0, dtype) for dtype in dtypes]
    return [np.concatenate(columns) for columns in zip(*parts)]
