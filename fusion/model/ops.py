"""Kernel -> the op that launched it: correlation -> runtime launch -> enclosing CPU ranges by time.

A kernel's `args.correlation` names its runtime launch (one per eager kernel; one graph launch shared
by every kernel of a graph replay). The launch sits, by time on its own thread, inside a stack of
`cpu_op` ranges (innermost `aten::addmm`, outermost `aten::linear`) and of `nn.Module` frames. Every
step is a sort or an array lookup over launches and ranges: n log n in their number, with a few
vectorised passes per nesting level.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fusion.loader.cpu_events import CpuEvents, RangeKind, Ranges
from fusion.model.columns import LAUNCH_KINDS, OP_COLUMNS, SHAPE_COLUMNS
from fusion.model.trace import Trace

GRAPH_LAUNCH = re.compile("GraphLaunch")
"""A runtime call that replays a captured graph: every kernel of the replay shares its correlation."""
MODULE_SEPARATOR = "/"
NO_ROW = -1


def launch_columns(kernels: pd.DataFrame, cpu: CpuEvents) -> dict[str, pd.Categorical | np.ndarray]:
    """The OP_COLUMNS and SHAPE_COLUMNS of `kernels`, resolved through `cpu`'s launches and ranges. A graph
    replay's kernels have no op call: the ops around its launch did not launch them (fusion.model.capture ties
    them to the ops of the graph's capture)."""
    if not len(cpu.launches.correlation):
        return unrecorded_columns(len(kernels))
    launch = launch_rows(kernels["correlation"].to_numpy(), cpu.launches.correlation)
    found = launch >= 0
    used, per_kernel = small_unique(launch[found])

    def spread(per_launch: np.ndarray) -> np.ndarray:
        out = np.full(len(kernels), NO_ROW, dtype=np.int64)
        out[found] = per_launch[per_kernel]
        return out

    around = launch_context(cpu, cpu.launches.thread[used], cpu.launches.ts[used])
    launch_names, name_of = small_unique(cpu.launches.name[used])
    graph = np.array([bool(GRAPH_LAUNCH.search(cpu.names[c])) for c in launch_names], dtype=np.int64)[name_of]
    kind = np.where(found, spread(graph), LAUNCH_KINDS.index("none"))
    replayed = kind == LAUNCH_KINDS.index("graph")
    return {
        "op": _categorical(spread(around.op), cpu.names),
        "op_top": _categorical(spread(around.op_top), cpu.names),
        "module": _categorical(spread(around.module), around.paths),
        "op_call": np.where(replayed, NO_ROW, spread(around.call)),
        "thread": spread(cpu.tids()[cpu.launches.thread[used]]),
        "launch": pd.Categorical.from_codes(kind, categories=list(LAUNCH_KINDS)),
        "op_shapes": _categorical(spread(around.op_shapes), cpu.shapes),
        "op_top_shapes": _categorical(spread(around.op_top_shapes), cpu.shapes),
    }


@dataclass
class LaunchContext:
    """Per launch: the innermost and top-level op around it (codes into CpuEvents.names), the top-level op's
    call id, their shapes (codes into CpuEvents.shapes) and the module path (an index into `paths`); NO_ROW for
    none."""

    op: np.ndarray
    op_top: np.ndarray
    call: np.ndarray
    op_shapes: np.ndarray
    op_top_shapes: np.ndarray
    module: np.ndarray
    paths: list[str]


def launch_context(cpu: CpuEvents, thread: np.ndarray, ts: np.ndarray) -> LaunchContext:
    """The ops and module frames around launches made on thread codes `thread` at times `ts`."""
    ops = Nesting.of(cpu.ranges.of_kind(RangeKind.OP))
    op = ops.innermost(thread, ts)
    top = _take(ops.top(), op)
    modules = Nesting.of(cpu.ranges.of_kind(RangeKind.MODULE))
    paths, path_of = modules.paths(modules.innermost(thread, ts), cpu.names)
    return LaunchContext(
        op=_take(ops.name, op),
        op_top=_take(ops.name, top),
        call=_take(ops.call_ids(), top),
        op_shapes=_take(ops.shapes, op),
        op_top_shapes=_take(ops.shapes, top),
        module=path_of,
        paths=paths,
    )


def unrecorded_columns(count: int) -> dict[str, pd.Categorical | np.ndarray]:
    """The OP_COLUMNS of `count` kernels in a trace without runtime launch events."""
    return {
        **{column: pd.Categorical.from_codes(np.zeros(count, np.int8), categories=[""]) for column in OP_COLUMNS[:3]},
        "op_call": np.full(count, NO_ROW, dtype=np.int64),
        "thread": np.full(count, NO_ROW, dtype=np.int64),
        "launch": pd.Categorical.from_codes(
            np.full(count, LAUNCH_KINDS.index("unrecorded")), categories=list(LAUNCH_KINDS)
        ),
        **{column: pd.Categorical.from_codes(np.zeros(count, np.int8), categories=[""]) for column in SHAPE_COLUMNS},
    }


def unlaunched_note(kernels: pd.DataFrame) -> str | None:
    """What the kernels with launch 'none' are: how many, their time, how many precede every launched one."""
    none = (kernels["launch"] == "none").to_numpy()
    if not none.any():
        return None
    correlation = kernels["correlation"].to_numpy()
    launched = correlation[kernels["launch"].isin(("kernel", "graph")).to_numpy()]
    first = launched.min() if len(launched) else np.iinfo(np.int64).max
    earlier = int((correlation[none] < first).sum())
    dur = kernels["dur"].to_numpy()
    time_us, total = float(dur[none].sum()), float(dur.sum()) or 1.0
    note = (
        f"{int(none.sum())} kernels ({time_us / 1e3:,.3f} ms, {100 * time_us / total:.1f}% of kernel time) have no "
        f"runtime launch event in the trace; {earlier} of them have correlation ids below every launched kernel's: "
        "launched before the profiled CPU window opened (such as the tail of a previous step, captured partially)"
    )
    rest = int(none.sum()) - earlier
    return note + (f"; {rest} have ids among the launched ones, but no launch event was recorded" if rest else "")


@dataclass(frozen=True)
class LeftOut:
    """What launched_only leaves out of one trace: kernels, their time and its share of the kernel time."""

    kernels: int = 0
    time_us: float = 0.0
    share: float = 0.0


def unlaunched_share(kernels: pd.DataFrame) -> LeftOut:
    """The kernels with launch 'none' (no runtime launch event: launched before the profiled CPU window opened,
    partial steps, or not recorded) as launched_only would leave them out."""
    none = (kernels["launch"] == "none").to_numpy()
    dur = kernels["dur"].to_numpy()
    time_us, total = float(dur[none].sum()), float(dur.sum())
    return LeftOut(int(none.sum()), time_us, time_us / total if total > 0 else 0.0)


def launched_only(trace: Trace) -> Trace:
    """The trace without its kernels of launch 'none', with a warning saying what was left out and why."""
    note = unlaunched_note(trace.kernels)
    if note is None:
        return trace
    launched = np.flatnonzero((trace.kernels["launch"] != "none").to_numpy())
    return trace.subset(
        launched, f"{note}; left out of the comparison (keep_unlaunched=True or --keep-unlaunched keeps them)"
    )


@dataclass
class Nesting:
    """Ranges of one kind sorted by (thread, start, longest first); `parent` is the enclosing range's row.

    Answers "which range encloses this point on this thread" for many points at once; built for ops and
    module frames here, and usable as is for annotations (steps, phases)."""

    thread: np.ndarray
    start: np.ndarray
    end: np.ndarray
    name: np.ndarray
    parent: np.ndarray
    shapes: np.ndarray
    """The range's shapes code (loader.cpu_events.Ranges.shapes)."""

    @classmethod
    def of(cls, ranges: Ranges) -> Nesting:
        order = np.lexsort((-ranges.end, ranges.start, ranges.thread))
        columns = (ranges.thread, ranges.start, ranges.end, ranges.name, ranges.shapes)
        thread, start, end, name, shapes = (column[order] for column in columns)
        return cls(thread, start, end, name, _parents(thread, start, end), shapes)

    def innermost(self, thread: np.ndarray, point: np.ndarray) -> np.ndarray:
        """Row of the innermost range on `thread` with start <= point < end; NO_ROW where none."""
        row = _last_starting_at_or_before(self.thread, self.start, thread, point)
        pending = row >= 0
        while pending.any():
            rows = np.flatnonzero(pending)
            inside = point[rows] < self.end[row[rows]]
            up = rows[~inside]
            row[up] = self.parent[row[up]]
            pending[rows[inside]] = False
            pending[up[row[up] < 0]] = False
        return row

    def top(self) -> np.ndarray:
        """Row of each range's outermost enclosing range (itself when it has none)."""
        top = np.where(self.parent < 0, np.arange(len(self.parent)), self.parent)
        while True:
            higher = top[top]
            if np.array_equal(higher, top):
                return top
            top = higher

    def call_ids(self) -> np.ndarray:
        """Per range: the number of its top-level range among all top-level ranges in start order."""
        roots = np.flatnonzero(self.parent < 0)
        ids = np.full(len(self.parent), NO_ROW, dtype=np.int64)
        ids[roots[np.argsort(self.start[roots], kind="stable")]] = np.arange(len(roots))
        return ids

    def paths(self, rows: np.ndarray, names: list[str]) -> tuple[list[str], np.ndarray]:
        """Distinct 'outer/inner' name paths of `rows`, and each row's index into them (NO_ROW for none)."""
        levels = []
        current = rows
        while (current >= 0).any():
            levels.append(_take(self.name, current))
            current = _take(self.parent, current)
        if not levels:
            return [], np.full(len(rows), NO_ROW, dtype=np.int64)
        distinct, index = np.unique(np.stack(levels, axis=1), axis=0, return_inverse=True)
        paths = [MODULE_SEPARATOR.join(names[c] for c in reversed(row) if c >= 0) for row in distinct]
        return paths, np.where(rows >= 0, index.reshape(-1), NO_ROW)


def _parents(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Enclosing range of each sorted range (NO_ROW for top level), by pointer jumping.

    A guess starts at the previous range and jumps to the guess's own guess while it does not contain
    the range's start. The ranges jumped over end before the guess starts, so before this range
    starts too: none of them can be the parent. Each round halves the chains left, so the rounds grow
    with the log of the number of siblings.
    """
    guess = np.arange(len(start)) - 1
    guess[1:][thread[1:] != thread[:-1]] = NO_ROW
    pending = guess >= 0
    while pending.any():
        rows = np.flatnonzero(pending)
        inside = start[rows] < end[guess[rows]]
        up = rows[~inside]
        guess[up] = guess[guess[up]]
        pending[rows[inside]] = False
        pending[up[guess[up] < 0]] = False
    return guess


def _last_starting_at_or_before(
    range_thread: np.ndarray, range_start: np.ndarray, thread: np.ndarray, point: np.ndarray
) -> np.ndarray:
    """Per point, the last sorted range on its thread that starts at or before it; NO_ROW where none."""
    count = len(range_start)
    keys_thread = np.concatenate([range_thread, thread])
    keys_time = np.concatenate([range_start, point])
    is_point = np.arange(count + len(point)) >= count
    order = np.lexsort((is_point, keys_time, keys_thread))
    last = np.maximum.accumulate(np.where(order < count, order, NO_ROW)) if len(order) else order
    row = np.empty(len(point), dtype=np.int64)
    at_point = order >= count
    row[order[at_point] - count] = last[at_point]
    same_thread = row >= 0
    same_thread[same_thread] = range_thread[row[same_thread]] == thread[same_thread]
    return np.where(same_thread, row, NO_ROW)


def launch_rows(correlation: np.ndarray, launch_correlation: np.ndarray) -> np.ndarray:
    """Per kernel, the row of the first launch with its correlation id; NO_ROW where there is none."""
    order = np.argsort(launch_correlation, kind="stable")
    ordered = launch_correlation[order]
    position = np.minimum(np.searchsorted(ordered, correlation), len(ordered) - 1)
    found = (ordered[position] == correlation) & (correlation >= 0)
    return np.where(found, order[position], NO_ROW)


def small_unique(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(values, return_inverse=True) for integers >= NO_ROW that index an array (launch rows,
    name codes): counted in one pass instead of sorted."""
    if not len(values):
        return np.zeros(0, dtype=values.dtype), np.zeros(0, dtype=np.int64)
    shifted = values.astype(np.int64) - NO_ROW
    present = np.flatnonzero(np.bincount(shifted))
    position = np.zeros(int(present[-1]) + 1, dtype=np.int64)
    position[present] = np.arange(len(present))
    return (present + NO_ROW).astype(values.dtype), position[shifted]


def _take(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """values[rows] as int64, NO_ROW where rows is NO_ROW."""
    return np.where(rows >= 0, values[np.maximum(rows, 0)] if len(values) else NO_ROW, NO_ROW).astype(np.int64)


def _categorical(codes: np.ndarray, names: list[str]) -> pd.Categorical:
    """Strings by code into `names` ('' for NO_ROW) as a categorical of the distinct strings present."""
    present, index = small_unique(codes)
    strings = np.array(["" if c < 0 else names[c] for c in present], dtype=object)
    categories, remap = np.unique(strings.astype(str), return_inverse=True)
    return pd.Categorical.from_codes(remap[index].reshape(-1), categories=list(categories))
