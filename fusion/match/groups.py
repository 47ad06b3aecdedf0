"""Correlation groups: the kernels of one graph launch share one correlation id.

Everything is computed on columns (np.unique / bincount / reduceat), never per kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from fusion.loader.columns import MISSING_ID


@dataclass
class Groups:
    """The significant groups (>= min_group_size kernels) of one trace, in execution order.

    Group g's kernels are `kernel_rows[offsets[g]:offsets[g + 1]]` (global rows of trace.kernels, in
    time order); `residual_rows` are all other kernels (eager launches, small graphs) in time order.
    """

    table: pd.DataFrame
    type_counts: np.ndarray
    type_time_us: np.ndarray
    kernel_rows: np.ndarray
    offsets: np.ndarray
    residual_rows: np.ndarray
    total_groups: int

    def __len__(self) -> int:
        return len(self.table)

    def rows(self, group: int) -> np.ndarray:
        return self.kernel_rows[self.offsets[group] : self.offsets[group + 1]]

    @cached_property
    def correlations(self) -> np.ndarray:
        return self.table["correlation"].to_numpy()

    def select(self, keep: np.ndarray) -> Groups:
        """The groups where `keep` (bool per group) holds; the kernels of the others join residual_rows."""
        sizes = np.diff(self.offsets)
        member = np.repeat(keep, sizes)
        offsets = np.zeros(int(keep.sum()) + 1, dtype=np.int64)
        np.cumsum(sizes[keep], out=offsets[1:])
        table = self.table[keep].reset_index(drop=True).assign(order=np.arange(int(keep.sum())))
        left = np.ones(len(self.kernel_rows) + len(self.residual_rows), dtype=bool)
        left[self.kernel_rows[member]] = False
        residual = np.flatnonzero(left)  # the residual rows and the dropped groups' rows, ascending
        return Groups(
            table,
            self.type_counts[keep],
            self.type_time_us[keep],
            self.kernel_rows[member],
            offsets,
            residual,
            self.total_groups,
        )

    def within(self, view: View) -> Groups | None:
        """These groups in `view` of their trace, renumbered, when the view cuts none: each group lies wholly in
        the view (it is kept, with the same kernels, counts and times) or wholly outside it (it is left out). These
        are then the view's own groups of the same minimum size. None when the view may cut a group (it would
        shrink there, perhaps below the minimum)."""
        keep = view.holds(self)
        if keep is None:
            return None
        sizes = np.diff(self.offsets)
        offsets = np.zeros(int(keep.sum()) + 1, dtype=np.int64)
        np.cumsum(sizes[keep], out=offsets[1:])
        every = bool(keep.all())
        table = self.table if every else self.table[keep].reset_index(drop=True)
        return Groups(
            table.assign(first_index=view.renumbered(table["first_index"].to_numpy()), order=np.arange(len(table))),
            self.type_counts[keep],
            self.type_time_us[keep],
            view.renumbered(self.kernel_rows if every else self.kernel_rows[np.repeat(keep, sizes)]),
            offsets,
            view.renumbered(self.residual_rows[view.keeps(self.residual_rows)]),
            view.total_groups,
        )


@dataclass(frozen=True)
class View:
    """The kernels a view of a trace keeps (Groups.within), and the view's count of distinct correlation ids
    (Groups.total_groups). Kept rows that form one range [start, stop) are tested and renumbered by arithmetic;
    others through a mask and a rank per row of the trace."""

    start: int
    stop: int
    total_groups: int
    kept: np.ndarray | None = None
    rank: np.ndarray | None = None

    @classmethod
    def of(cls, rows: np.ndarray, trace_rows: int, correlations: np.ndarray) -> View:
        """The view that keeps the kernels at `rows` (ascending) of a trace of `trace_rows` kernels; `correlations`:
        the view's correlation column."""
        total = len(_runs(correlations[correlations != MISSING_ID])[0])
        if not len(rows) or int(rows[-1]) - int(rows[0]) + 1 == len(rows):
            start = int(rows[0]) if len(rows) else 0
            return cls(start, start + len(rows), total)
        kept = np.zeros(trace_rows, dtype=bool)
        kept[rows] = True
        return cls(0, 0, total, kept, np.cumsum(kept) - 1)

    def holds(self, groups: Groups) -> np.ndarray | None:
        """Per group: does the view keep all its kernels (else none); None when it may keep only part of one. For a
        range of rows, decided on each group's first and last row (a group around the range is taken as cut)."""
        if not len(groups):
            return np.zeros(0, dtype=bool)
        starts, sizes = groups.offsets[:-1], np.diff(groups.offsets)
        if self.kept is None:
            first, last = groups.kernel_rows[starts], groups.kernel_rows[starts + sizes - 1]
            inside = (first >= self.start) & (last < self.stop)
            cut = ~inside & ~((last < self.start) | (first >= self.stop))
        else:
            kept = np.add.reduceat(self.kept[groups.kernel_rows], starts, dtype=np.int64)
            inside = kept == sizes
            cut = (kept != 0) & ~inside
        return None if cut.any() else inside

    def keeps(self, rows: np.ndarray) -> np.ndarray:
        """Per row of the trace in `rows`: does the view keep it."""
        return (rows >= self.start) & (rows < self.stop) if self.kept is None else self.kept[rows]

    def renumbered(self, rows: np.ndarray) -> np.ndarray:
        """Kept rows of the trace as rows of the view."""
        return rows - self.start if self.rank is None else self.rank[rows]


def type_codes(kernels: pd.DataFrame, types: list[str]) -> np.ndarray:
    """Kernel types as small ints indexing `types` (a superset of the trace's type categories)."""
    column = kernels["type"]
    if list(column.cat.categories) != types:
        column = column.cat.set_categories(types)
    return column.cat.codes.to_numpy().astype(np.int16)


def correlation_groups(kernels: pd.DataFrame, codes: np.ndarray, n_types: int, min_group_size: int = 50) -> Groups:
    """Group kernels by correlation id; keep groups of at least `min_group_size` kernels as significant."""
    corr = kernels["correlation"].to_numpy()
    valid = np.flatnonzero(corr != MISSING_ID)
    ids, first, runs, run_ids = _runs(corr[valid])
    sizes = np.bincount(run_ids, weights=np.diff(np.r_[runs, len(valid)]), minlength=len(ids)).astype(np.int64)
    order = np.argsort(first, kind="stable")
    keep = sizes[order] >= min_group_size
    rank = np.empty(len(ids), dtype=np.int64)
    rank[order] = np.where(keep, np.cumsum(keep) - 1, -1)
    kernel_rows, group_of = _rows_by_group(valid, runs, rank[run_ids])
    n_groups = int(keep.sum())
    offsets = np.zeros(n_groups + 1, dtype=np.int64)
    np.cumsum(np.bincount(group_of, minlength=n_groups), out=offsets[1:])
    in_group = np.zeros(len(kernels), dtype=bool)
    in_group[kernel_rows] = True
    dur = kernels["dur"].to_numpy()[kernel_rows]
    flat = group_of * n_types + codes[kernel_rows]
    counts = np.bincount(flat, minlength=n_groups * n_types).reshape(n_groups, n_types)
    times = np.bincount(flat, weights=dur, minlength=n_groups * n_types).reshape(n_groups, n_types)
    return Groups(
        table=_summary(kernels, ids[order][keep], kernel_rows, offsets, dur),
        type_counts=counts,
        type_time_us=times,
        kernel_rows=kernel_rows,
        offsets=offsets,
        residual_rows=np.flatnonzero(~in_group),
        total_groups=len(ids),
    )


def _runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(distinct values sorted, index of each one's first occurrence, start of each run of equal values, the
    distinct value of each run): np.unique over the runs, which are few when groups are contiguous."""
    runs = np.flatnonzero(np.r_[True, values[1:] != values[:-1]]) if len(values) else np.zeros(0, dtype=np.int64)
    ids, first_run, run_ids = np.unique(values[runs], return_index=True, return_inverse=True)
    return ids, runs[first_run], runs, run_ids.ravel()


def _rows_by_group(rows: np.ndarray, runs: np.ndarray, run_group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the runs with a group (>= 0), ordered by group then row, and the group of each. Where the groups'
    runs come in group order (each group one run, groups numbered in order of first kernel: a graph replay's
    kernels are contiguous), that order is the rows' own and they are picked by a mask."""
    lengths = np.diff(np.r_[runs, len(rows)])
    kept = np.flatnonzero(run_group >= 0)
    if (np.diff(run_group[kept]) > 0).all():
        in_group = np.repeat(run_group >= 0, lengths)
        return rows[in_group], np.repeat(run_group[kept], lengths[kept])
    kept = kept[np.argsort(run_group[kept], kind="stable")]
    lengths = lengths[kept]
    ends = np.cumsum(lengths)
    position = np.arange(int(ends[-1]) if len(ends) else 0) + np.repeat(runs[kept] - (ends - lengths), lengths)
    return rows[position], np.repeat(run_group[kept], lengths)


def joint_counts(first: np.ndarray, second: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """A `shape` array counting each (first, second) pair of codes (non-negative ints below shape), in one
    bincount; a pair with a negative code (no value) is not counted."""
    if len(first) and min(first.min(), second.min()) < 0:
        known = (first >= 0) & (second >= 0)
        first, second = first[known], second[known]
    flat = first.astype(np.intp)  # a fresh array, so the arithmetic below is in place (no temporaries)
    flat *= shape[1]
    flat += second
    return np.bincount(flat, minlength=shape[0] * shape[1]).reshape(shape)


def unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """np.unique(rows, axis=0, return_inverse=True, return_counts=True) for a 2-D int array, same order
    (rows sorted lexicographically), through one lexsort instead of a sort of structured rows."""
    if len(rows) == 0:
        return rows[:0], np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort(rows.T[::-1])
    ordered = rows[order]
    new = np.r_[True, (ordered[1:] != ordered[:-1]).any(axis=1)]
    inverse = np.empty(len(rows), dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    return ordered[starts], inverse, np.diff(np.r_[starts, len(rows)])


def _summary(
    kernels: pd.DataFrame, correlations: np.ndarray, kernel_rows: np.ndarray, offsets: np.ndarray, dur: np.ndarray
) -> pd.DataFrame:
    """One row per group; `dur` is the duration of each of `kernel_rows`."""
    ts = kernels["ts"].to_numpy()[kernel_rows]
    starts = offsets[:-1]
    return pd.DataFrame(
        {
            "correlation": correlations,
            "size": np.diff(offsets),
            "start_us": _reduce(np.minimum, ts, starts),
            "end_us": _reduce(np.maximum, ts + dur, starts),
            "kernel_time_us": _reduce(np.add, dur, starts),
            "first_index": kernel_rows[starts] if len(kernel_rows) else starts,
            "order": np.arange(len(starts)),
        }
    )


def _reduce(ufunc: np.ufunc, values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    return ufunc.reduceat(values, starts) if len(starts) else np.zeros(0)
