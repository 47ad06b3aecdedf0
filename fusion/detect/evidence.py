"""Walk the alignments of all compared pairs and collect what their one-sided kernels show.

A one-sided helper kernel folded into an aligned kernel of its operation (GEMM + splitKreduce vs GEMM)
is a split: one operation run as more kernels on one side. Any other run of one-sided kernels is
credited to a neighbouring aligned kernel K on the other side only when K covers it: K's operation type
plus its fused components include every operation type of the run and of K's counterpart (a CUTLASS GEMM
with a SiLU-and-mul epilogue covers GEMM + act_and_mul), and K's name does not say it computes one operation
only (an ATen add functor covers nothing). Otherwise the run is a one-sided note with its reason. All
occurrences of one (fused side, fused type, unfused sequence) with one kernel-name pattern per side (the name
family of the fused kernel and of the other side's extra kernels, classify.name_family) form a Pattern; whether it
is a finding is decided in mappings.py over the occurrences that could show it.

All segments are walked at once: _Walk puts their alignments end to end in one set of numpy columns (no run,
neighbour or operation reaches across a segment's bounds) and _Runs decides the runs on them. Occurrences of the
same kernels in a segment are counted once, weighted by how often they occur (_add), and their kernels and the
notes' are tallied per name on columns (_tally, _note), so the Python work follows the distinct occurrences.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, reduce
from operator import add
from typing import NamedTuple

import numpy as np

from fusion.classify.names import name_family
from fusion.detect.thresholds import Thresholds
from fusion.match.align import FOLDED, ONLY1, SUBSTITUTE, align_codes, ops, type_code
from fusion.match.groups import joint_counts
from fusion.model.trace import Trace
from fusion.result import EvidenceRef
from fusion.vocabulary import SPLIT_ROLES

NON_FUSABLE_TYPES = frozenset({"Memset", "MemCopy", "Communication"})
"""One-sided kernels of these types are notes, never fusions (an extra memset is not a fused op)."""
STRETCH_REASON = "part of a long stretch of kernels with no counterpart (an extra step or phase), not a fusion"
NON_COMPUTE_REASON = "a non-compute kernel on one side only (not a fusion)"
NOT_COVERED_REASON = "one-sided; no neighbouring kernel on the other side performs its operations: not a fusion"
NO_NEIGHBOUR_REASON = "one-sided; no aligned kernel next to it"
REASONS = (NON_COMPUTE_REASON, STRETCH_REASON, NOT_COVERED_REASON, NO_NEIGHBOUR_REASON)
"""Why one-sided kernels are notes, by code."""


@dataclass
class Side:
    """Per-kernel columns of one trace the detectors read (codes index the shared type list)."""

    number: int
    trace: Trace
    codes: np.ndarray
    names: np.ndarray
    name_list: list[str]
    name_types: list[str]
    fused_components: list[tuple[str, ...]]
    components: list[tuple[str, ...]]
    helper_roles: list[str]
    dur: np.ndarray
    single_op: np.ndarray
    """Per name code: the name says the kernel computes one elementwise operation and nothing else."""
    families: list[str]
    """Per name code: its name family (classify.name_family): one pattern is one family per kernel on each side."""
    helper_names: np.ndarray
    """Per name code: its kernels are helpers of their operation (helpers)."""

    def helpers(self, rows: np.ndarray) -> np.ndarray:
        """Per kernel at `rows`: it is a helper of its own operation type (a split role, such as split-K reduce)."""
        return self.helper_names[self.names[rows]]

    @cached_property
    def name_type_counts(self) -> np.ndarray:
        """(name code, type code) -> the kernels of that name and type (a name's kernels may differ in type where
        the launching op decides it), counted in one pass; as wide as the largest type code present."""
        width = int(self.codes.max()) + 1 if len(self.codes) and self.codes.max() >= 0 else 0
        return joint_counts(self.names, self.codes, (len(self.name_list), width))

    def type_counts(self, n_types: int, names: np.ndarray | None = None) -> np.ndarray:
        """Per type code (of `n_types`): the kernels of that type, of the name codes where `names` holds (bool per
        name code; every name without it)."""
        counts = self.name_type_counts if names is None else self.name_type_counts[names]
        out = np.zeros(n_types, dtype=np.int64)
        out[: counts.shape[1]] = counts.sum(axis=0)
        return out

    @classmethod
    def of(cls, number: int, trace: Trace, codes: np.ndarray) -> Side:
        column = trace.kernels["name"]
        name_list = [str(n) for n in column.cat.categories]
        table = trace.names.loc[name_list] if name_list else trace.names.iloc[0:0]
        roles = [str(r) for r in table["helper"]]
        names = column.cat.codes.to_numpy()
        helper = np.array([r in SPLIT_ROLES for r in roles], dtype=bool)
        return cls(
            number,
            trace,
            codes,
            names,
            name_list,
            [str(t) for t in table["type"]],
            [tuple(c) for c in table["fused_components"]],
            [tuple(c) for c in table["components"]],
            roles,
            trace.kernels["dur"].to_numpy(np.float64),
            table["single_op"].to_numpy(bool),
            [
                name_family(n, str(rule), tuple(fused))
                for n, rule, fused in zip(name_list, table["rule"], table["fused_components"])
            ],
            helper,
        )


@dataclass
class Segment:
    """All pairs that share one pair of kernel-name sequences: aligned once, counted per pair.

    codes1/codes2 are alignment codes (align.unit_codes); rows1/rows2 are (pairs, length) global kernel
    rows; pair_ids and correlations per pair; kind 'group' or 'stream'.
    """

    codes1: np.ndarray
    codes2: np.ndarray
    rows1: np.ndarray
    rows2: np.ndarray
    pair_ids: np.ndarray
    correlations1: np.ndarray
    correlations2: np.ndarray
    kind: str

    @property
    def weight(self) -> int:
        return len(self.pair_ids)

    def codes(self, side: int) -> np.ndarray:
        return self.codes1 if side == 1 else self.codes2

    def rows(self, side: int) -> np.ndarray:
        return self.rows1 if side == 1 else self.rows2

    def ref(self, k: int, positions1: list[int], positions2: list[int]) -> EvidenceRef:
        return EvidenceRef(
            int(self.pair_ids[k]),
            int(self.correlations1[k]),
            int(self.correlations2[k]),
            _window(self.rows1[k], positions1),
            _window(self.rows2[k], positions2),
        )


def _window(rows: np.ndarray, positions: list[int]) -> tuple[int, int]:
    picked = rows[positions] if positions else rows[:0]
    return (int(picked.min()), int(picked.max()) + 1) if len(picked) else (-1, -1)


@dataclass
class Pattern:
    """Accumulated occurrences of one (fused side, fused type, unfused sequence) and name families; `split` for
    helpers."""

    fused_trace: int
    fused_type: str
    sequence: tuple[str, ...]
    split: bool = False
    fused_kernels: int = 1
    """Split patterns: kernels of the operation on the fused side (1 unless it has helpers too)."""
    occurrences: int = 0
    fused_names: Counter = field(default_factory=Counter)
    unfused_names: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    """Unfused type -> name codes of the kernels of that type it stands for (counterpart and extras)."""
    anchors: Counter = field(default_factory=Counter)
    """(fused name, counterpart name) -> occurrences: what could show the pattern is counted per anchor."""
    helper_names: Counter = field(default_factory=Counter)
    """Split patterns: the one-sided helper kernels by name."""
    extra_time_us: float = 0.0
    refs: list[EvidenceRef] = field(default_factory=list)
    pair_ids: set[int] = field(default_factory=set)
    kinds: Counter = field(default_factory=Counter)
    group_extra: Counter = field(default_factory=Counter)
    """One-sided kernels per type explained by this pattern inside group pairs."""
    extra_kernels: dict[tuple[str, int], list[float]] = field(default_factory=dict)
    """(type, name code) of its one-sided kernels -> [count, time]: what a note of the rejected pattern lists."""

    @property
    def unfused_trace(self) -> int:
        return 3 - self.fused_trace


@dataclass
class Evidence:
    """What walking all alignments produced; input of the mapping detectors."""

    patterns: dict[tuple, Pattern] = field(default_factory=dict)
    anchor_totals: Counter = field(default_factory=Counter)
    """(side, name code, counterpart name code) -> aligned occurrences of that pair of names."""
    helper_totals: Counter = field(default_factory=Counter)
    """(side, name code) -> occurrences of a helper kernel name in the compared pairs whose operation's kernel
    is aligned (_Walk.operation_aligned)."""
    attributions: dict[tuple[int, str], Counter] = field(default_factory=lambda: defaultdict(Counter))
    """(unfused side, one-sided type) -> name codes (on the fused side) of the kernels that cover it."""
    attributed_names: dict[tuple[int, str], Counter] = field(default_factory=lambda: defaultdict(Counter))
    """(unfused side, one-sided type) -> name codes of the one-sided kernels credited to a covering kernel."""
    unattributed: Counter = field(default_factory=Counter)
    """(side, type, reason) -> one-sided kernels that are no fusion."""
    note_refs: dict[tuple, list[EvidenceRef]] = field(default_factory=lambda: defaultdict(list))
    note_kernels: dict[tuple, dict[int, list[float]]] = field(default_factory=lambda: defaultdict(dict))
    """(side, type, reason) -> name code -> [kernels, their time in µs] of the one-sided kernels of a note."""


@dataclass(frozen=True)
class _TypeSets:
    """Sets of operation types as bit masks (bit i: types[i]), for deciding coverage on columns."""

    bits: np.ndarray
    """Per type code: its bit (int64, or Python ints past 62 types)."""
    components: tuple[np.ndarray, np.ndarray]
    """Per side and name code: the bits of the name's fused components."""
    non_fusable: np.ndarray
    """Per type code: NON_FUSABLE_TYPES holds it."""
    single_op: tuple[np.ndarray, np.ndarray]
    """Per side and name code: the name says the kernel computes one operation only (Side.single_op)."""

    @classmethod
    def of(cls, sides: tuple[Side, Side], types: list[str]) -> _TypeSets:
        index = {t: i for i, t in enumerate(types)}
        dtype = np.int64 if len(types) < 63 else object
        bits = np.array([1 << i for i in range(len(types))], dtype=dtype)
        components = tuple(
            np.array(
                [sum(1 << index[c] for c in set(comps) if c in index) for comps in side.fused_components], dtype=dtype
            )
            for side in sides
        )
        return cls(
            bits,
            components,
            np.array([t in NON_FUSABLE_TYPES for t in types], dtype=bool),
            (sides[0].single_op, sides[1].single_op),
        )


@dataclass
class _Walk:
    """All segments' alignments as one set of columns: the positions of every segment end to end per side
    (segment i's start at offsets[side - 1][i]) and their alignment rows end to end (path holds those global
    positions, -1 for a gap). No run, neighbour, operation or unit reaches across a segment's bounds."""

    segments: list[Segment]
    sides: tuple[Side, Side]
    types: list[str]
    type_sets: _TypeSets
    limits: Thresholds
    path: np.ndarray
    op: np.ndarray
    row_segment: np.ndarray
    """Per alignment row: its segment."""
    codes: tuple[np.ndarray, np.ndarray]
    """Per side and position: the alignment code (align.unit_codes)."""
    offsets: tuple[np.ndarray, np.ndarray]
    """Per side: the first position of each segment, and the number of positions last."""

    @classmethod
    def of(cls, segments: list[Segment], sides: tuple[Side, Side], types: list[str], limits: Thresholds) -> _Walk:
        paths = [align_codes(s.codes1, s.codes2) for s in segments]
        op = np.concatenate([ops(p, s.codes1, s.codes2) for p, s in zip(paths, segments)]).astype(np.int64)
        offsets = _per_side_of(
            lambda side: np.r_[0, np.cumsum([len(s.codes(side)) for s in segments])].astype(np.int64)
        )
        row_segment = np.repeat(np.arange(len(segments)), [len(p) for p in paths])
        path = np.concatenate(paths).astype(np.int64).reshape(-1, 2)
        path = np.where(path >= 0, path + np.column_stack([o[row_segment] for o in offsets]), -1)
        codes = _per_side_of(lambda side: np.concatenate([s.codes(side) for s in segments]))
        return cls(segments, sides, types, _TypeSets.of(sides, types), limits, path, op, row_segment, codes, offsets)

    def kernel_type(self, side: int, position: int) -> str:
        return self._type_names[side - 1][position]

    def name(self, side: int, position: int) -> int:
        return self._name_list[side - 1][position]

    def type_names(self, side: int) -> list[str]:
        """Per position of one side: its kernel's type (kernel_type of every position)."""
        return self._type_names[side - 1]

    def names(self, side: int) -> list[int]:
        """Per position of one side: its kernel's name code (name of every position)."""
        return self._name_list[side - 1]

    def helpers(self, side: int) -> list[bool]:
        """Per position of one side: its kernel is a helper of its operation (Side.helpers)."""
        return self._helpers[side - 1]

    def position(self, side: int, row: int) -> int:
        """The position of one side's kernel at an alignment row (-1 for a gap)."""
        return self._path_columns[side - 1][row]

    def local(self, side: int, position: int) -> int:
        """A position of one side within its segment."""
        return position - int(self.offsets[side - 1][self.position_segment[side - 1][position]])

    @cached_property
    def aligned(self) -> np.ndarray:
        """Alignment rows where both sides have a kernel."""
        return np.flatnonzero(self.op <= SUBSTITUTE)

    @cached_property
    def name_count(self) -> int:
        """More than any name code of either side."""
        return max(len(side.name_list) for side in self.sides)

    @cached_property
    def weights(self) -> np.ndarray:
        """Per segment: its weight (pairs)."""
        return np.array([s.weight for s in self.segments], dtype=np.int64)

    @cached_property
    def position_segment(self) -> tuple[np.ndarray, np.ndarray]:
        """Per side and position: its segment."""
        return _per_side_of(lambda s: np.repeat(np.arange(len(self.segments)), np.diff(self.offsets[s - 1])))

    @cached_property
    def first_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """Per side and position: its kernel's global row in the segment's first pair."""
        return _per_side_of(lambda side: np.concatenate([s.rows(side)[0] for s in self.segments]))

    @cached_property
    def _helpers(self) -> tuple[list[bool], list[bool]]:
        return tuple(self.sides[s - 1].helpers(self.first_rows[s - 1]).tolist() for s in (1, 2))

    @cached_property
    def _path_columns(self) -> tuple[list[int], list[int]]:
        return self.path[:, 0].tolist(), self.path[:, 1].tolist()

    @cached_property
    def type_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """Per side and position: the kernel's type code (index into `types`)."""
        return type_code(self.codes[0]), type_code(self.codes[1])

    @cached_property
    def _type_names(self) -> tuple[list[str], list[str]]:
        names = np.array(self.types, dtype=object)
        return tuple(names[codes].tolist() for codes in self.type_codes)

    @cached_property
    def name_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """Per side and position: the kernel's name code (Side.names)."""
        return tuple(self.sides[s - 1].names[self.first_rows[s - 1]] for s in (1, 2))

    @cached_property
    def _name_list(self) -> tuple[list[int], list[int]]:
        return self.name_codes[0].tolist(), self.name_codes[1].tolist()

    @cached_property
    def main_positions(self) -> tuple[np.ndarray, np.ndarray]:
        """Per side and position: the position of the operation kernel a folded helper belongs to: the unfolded
        kernel of its type before it, else the one after it; -1 if it is not folded or that kernel is outside
        its segment."""
        return _per_side_of(lambda s: _main_positions(self.codes[s - 1], self.position_segment[s - 1]))

    @cached_property
    def split_mains(self) -> tuple[np.ndarray, np.ndarray]:
        """Per side and position: main_positions when that kernel is aligned (the position is a helper split
        off an operation both sides run), else -1."""
        return tuple(np.where(self.operation_aligned[s], self.main_positions[s], -1) for s in (0, 1))

    @cached_property
    def operation_aligned(self) -> tuple[np.ndarray, np.ndarray]:
        """Per side and position: the kernel of its operation (itself, or for a folded helper the kernel it is
        folded into) is aligned with a kernel of the other side."""
        out = []
        for s in (1, 2):
            codes = self.codes[s - 1]
            mains = np.where((codes & FOLDED) != 0, self.main_positions[s - 1], np.arange(len(codes)))
            aligned = np.zeros(len(codes), dtype=bool)
            known = mains >= 0
            aligned[known] = self.op[self.row_of[s - 1][mains[known]]] <= SUBSTITUTE
            out.append(aligned)
        return tuple(out)

    def non_fusable(self, side: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Per (side, position): the kernel's type is one of NON_FUSABLE_TYPES."""
        return self.type_sets.non_fusable[_per_side(self.type_codes, side, positions)]

    def position_times(self, side: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Per (side, position): its kernels' time summed over the segment's pairs (pair after pair)."""
        return self._summed(_pair_sums, side, positions)

    def note_times(self, side: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Per (side, position): its kernels' time summed over the segment's pairs as a note sums it
        (_column_sums)."""
        return self._summed(_column_sums, side, positions)

    def _summed(
        self, total: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray], side: np.ndarray, positions: np.ndarray
    ) -> np.ndarray:
        """Per (side, position): `total` of its kernels' times over the segment's pairs (one pair: its time),
        computed for these positions only, segment by segment."""
        out = np.zeros(len(positions))
        for s in (1, 2):
            at = np.flatnonzero(side == s)
            wanted, dur = positions[at], self.sides[s - 1].dur
            out[at] = dur[self.first_rows[s - 1][wanted]]
            segment = self.position_segment[s - 1][wanted]
            repeated = np.flatnonzero(self.weights[segment] > 1)
            order, bounds = _grouped(segment[repeated])
            for a, b in zip(bounds[:-1], bounds[1:]):
                picked = repeated[order[a:b]]
                i = int(segment[picked[0]])
                local = wanted[picked] - self.offsets[s - 1][i]
                out[at[picked]] = total(dur, self.segments[i].rows(s), local)
        return out

    @cached_property
    def units(self) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
        """(first, end) per side and position of an operation's kernel: the positions of its kernel and the
        helpers folded into it, in its segment; for a folded position, it and the folded ones after it."""
        firsts, ends = [], []
        for s in (1, 2):
            folded = (self.codes[s - 1] & FOLDED) != 0
            index = np.arange(len(folded))
            segment_end = self.offsets[s - 1][1:][self.position_segment[s - 1]]
            next_unfolded = np.minimum.accumulate(np.where(folded, len(folded), index)[::-1])[::-1]
            ends.append(np.minimum(np.r_[next_unfolded[1:], len(folded)][: len(folded)], segment_end))
            folded_into_next = folded & (self.main_positions[s - 1] == next_unfolded)
            last_other = np.maximum.accumulate(np.where(folded_into_next, -1, index))
            firsts.append(np.where(folded, index, np.r_[0, last_other[:-1] + 1][: len(folded)]))
        return (firsts[0], firsts[1]), (ends[0], ends[1])

    @cached_property
    def row_of(self) -> tuple[np.ndarray, np.ndarray]:
        """Per side: the alignment row of each position."""
        out = []
        for s in (1, 2):
            column = self.path[:, s - 1]
            rows = np.full(len(self.codes[s - 1]), -1, dtype=np.int64)
            rows[column[column >= 0]] = np.flatnonzero(column >= 0)
            out.append(rows)
        return tuple(out)


def collect_evidence(
    segments: list[Segment], sides: tuple[Side, Side], types: list[str], limits: Thresholds
) -> Evidence:
    """Align every distinct segment once and attribute its one-sided kernels (weighted by pair count), all
    segments at once."""
    evidence = Evidence()
    if not segments:
        return evidence
    walk = _Walk.of(segments, sides, types, limits)
    _count_anchors(walk, evidence)
    _walk_runs(walk, evidence)
    return evidence


def _count_anchors(walk: _Walk, evidence: Evidence) -> None:
    """Aligned name pairs, and helpers whose operation's kernel is aligned: the occurrences that could show a
    pattern. A helper in a stretch the other side does not run (an extra step) can show no split, so it does
    not count against the split's confidence. Keys are counted in order of first occurrence (segment by
    segment; helpers of side 1 before side 2's)."""
    aligned = walk.path[walk.aligned]
    names = [walk.name_codes[s][aligned[:, s]] for s in (0, 1)]
    weights = walk.weights[walk.row_segment[walk.aligned]]
    for (first, second), count in _weighted_counts(np.column_stack(names), weights):
        evidence.anchor_totals[(1, first, second)] += count
        evidence.anchor_totals[(2, second, first)] += count
    helpers = [np.flatnonzero(walk.sides[s].helpers(walk.first_rows[s]) & walk.operation_aligned[s]) for s in (0, 1)]
    segment = np.concatenate([walk.position_segment[s][helpers[s]] for s in (0, 1)])
    side = np.repeat([1, 2], [len(h) for h in helpers])
    order = np.argsort(segment * 2 + side, kind="stable")
    keys = np.column_stack([side, np.concatenate([walk.name_codes[s][helpers[s]] for s in (0, 1)])])[order]
    for (number, name), count in _weighted_counts(keys, walk.weights[segment[order]]):
        evidence.helper_totals[(number, name)] += count


def _weighted_counts(keys: np.ndarray, weights: np.ndarray) -> list[tuple[tuple[int, ...], int]]:
    """Per distinct row of `keys`, in order of first occurrence: the sum of its rows' weights."""
    if not len(keys):
        return []
    first, inverse = _row_groups(keys)
    totals = np.bincount(inverse, weights=weights, minlength=len(first)).astype(np.int64)
    return list(zip(map(tuple, keys[first].tolist()), totals.tolist()))


def _walk_runs(walk: _Walk, evidence: Evidence) -> None:
    """Each run of one-sided kernels: a helper folded into an aligned kernel of its operation is a split, a
    non-compute kernel is a note, the rest is credited to its covering neighbour or noted with the reason.
    The notes are counted in run order; then the occurrences are added, segment by segment, fusions first."""
    runs = _Runs.of(walk)
    target = runs.targets(walk)
    _notes(walk, evidence, runs, target)
    _add(walk, evidence, [_fusions(walk, runs, target), _splits(walk, runs)])


@dataclass
class _Runs:
    """The maximal runs of one-sided kernels (ONLY1 or ONLY2 rows) of every segment, decided on columns: which of
    their kernels are split helpers, which are non-compute, and the alignment row of the kernel covering the rest.
    Per-kernel columns follow the one-sided rows in alignment order; per-run columns are indexed by run_of."""

    side: np.ndarray
    """Per one-sided row: the side its kernel is on."""
    positions: np.ndarray
    """Per one-sided row: its kernel's position on its side."""
    kinds: np.ndarray
    """Per one-sided row: SPLIT (a helper whose operation's kernel is aligned), NON_COMPUTE or COMPUTE."""
    run_of: np.ndarray
    """Per one-sided row: its run."""
    main_rows: np.ndarray
    """Per one-sided row: the alignment row of its operation's kernel (split helpers only, else -1)."""
    anchor: np.ndarray
    """Per run: the alignment row of the kernel credited with its compute kernels, -1 for none."""
    reason: np.ndarray
    """Per run without an anchor: why its compute kernels are notes (a code into REASONS)."""
    before: np.ndarray
    """Per run short enough to be fused work: the aligned row just before it when that kernel's name has fused
    components (-1: none, no components, or a longer run)."""
    after: np.ndarray
    """The same for the aligned row just after it."""

    def targets(self, walk: _Walk) -> np.ndarray:
        """Per one-sided row: the alignment row of the kernel credited with its compute kernel (the run's anchor,
        or the neighbour taking the part of the run it is in, _partial_cover), -1 for none."""
        compute = self.kinds == COMPUTE
        target = np.where(compute, self.anchor[self.run_of], -1)
        for run in np.flatnonzero((self.before >= 0) | (self.after >= 0)).tolist():
            kernels = np.flatnonzero(compute & (self.run_of == run))
            positions = self.positions[kernels]
            side, before, after = int(self.side[kernels[0]]), int(self.before[run]), int(self.after[run])
            parts, _ = _partial_cover(walk, side, positions.tolist(), before, after)
            for row, covered in parts:
                target[kernels[np.isin(positions, covered)]] = row
        return target

    @classmethod
    def of(cls, walk: _Walk) -> _Runs:
        op, path = walk.op, walk.path
        rows = np.flatnonzero(op > SUBSTITUTE)
        side = np.where(op[rows] == ONLY1, 1, 2)
        positions = path[rows, side - 1]
        mains = _per_side(walk.split_mains, side, positions)
        kinds = np.where(mains >= 0, SPLIT, np.where(walk.non_fusable(side, positions), NON_COMPUTE, COMPUTE))
        segment = walk.row_segment[rows]
        breaks = (rows[1:] != rows[:-1] + 1) | (side[1:] != side[:-1]) | (segment[1:] != segment[:-1])
        new = np.r_[True, breaks] if len(rows) else np.zeros(0, bool)
        starts = np.flatnonzero(new)
        run_of = np.cumsum(new) - 1
        compute = kinds == COMPUTE
        count = np.bincount(run_of[compute], minlength=len(starts))
        anchor, reason, before, after = _anchors(
            walk, rows[starts], side[starts], count, run_of[compute], side[compute], positions[compute]
        )
        main_rows = np.where(mains >= 0, _per_side(walk.row_of, side, np.maximum(mains, 0)), -1)
        return cls(side, positions, kinds, run_of, main_rows, anchor, reason, before, after)


SPLIT, NON_COMPUTE, COMPUTE = 0, 1, 2
"""_Runs.kinds: what a one-sided kernel is."""


def _per_side_of(column: Callable[[int], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(column(1), column(2)): one column per side."""
    return column(1), column(2)


def _per_side(values: tuple[np.ndarray, np.ndarray], side: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """values[side - 1][position] for each (side, position)."""
    out = np.zeros(len(positions), dtype=values[0].dtype)
    for s in (1, 2):
        at = side == s
        out[at] = values[s - 1][positions[at]]
    return out


def _anchors(
    walk: _Walk,
    starts: np.ndarray,
    unfused: np.ndarray,
    count: np.ndarray,
    run_of: np.ndarray,
    side: np.ndarray,
    positions: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per run (first alignment row `starts`, `count` compute kernels at `positions` of `run_of`): the aligned
    row of its segment before or after it whose kernel on the other side covers them, best score first (-1:
    none), and the reason when none does. The one before wins a tie (epilogue_bonus). Then, for runs short enough
    to be fused work, the aligned rows just before and after them whose kernels' names have fused components (-1:
    none), for _partial_cover: only those can take part of a run."""
    limits, aligned, row_segment = walk.limits, walk.aligned, walk.row_segment
    anchor = np.full(len(starts), -1, dtype=np.int64)
    segment = row_segment[starts]
    neighboured = (np.bincount(row_segment[aligned], minlength=len(walk.segments)) > 0)[segment]
    reason = np.where(count > limits.max_fused_run, 1, np.where(neighboured, 2, 3))
    candidate = (count > 0) & (count <= limits.max_fused_run)
    if not len(aligned) or not candidate.any():
        return anchor, reason, anchor, anchor
    bits = walk.type_sets.bits
    run_types = np.zeros(len(starts), dtype=bits.dtype)
    np.bitwise_or.at(run_types, run_of, bits[_per_side(walk.type_codes, side, positions)])
    k = np.searchsorted(aligned, starts)
    before, after = aligned[np.maximum(k - 1, 0)], aligned[np.minimum(k, len(aligned) - 1)]
    has_before = (k > 0) & (row_segment[before] == segment)
    has_after = (k < len(aligned)) & (row_segment[after] == segment)
    before_score = _cover_scores(walk, before, unfused, run_types)
    after_score = _cover_scores(walk, after, unfused, run_types)
    before_score = np.where(has_before & (before_score > 0), before_score + limits.epilogue_bonus, -np.inf)
    after_score = np.where(has_after & (after_score > 0), after_score, -np.inf)
    use_after = candidate & (after_score > -np.inf) & (after_score >= before_score)
    use_before = candidate & ~use_after & (before_score > -np.inf)
    anchor[use_after], anchor[use_before] = after[use_after], before[use_before]
    partial = candidate & (anchor < 0)
    return (
        anchor,
        reason,
        np.where(partial & has_before & _named_parts(walk, before, unfused), before, -1),
        np.where(partial & has_after & _named_parts(walk, after, unfused), after, -1),
    )


def _named_parts(walk: _Walk, rows: np.ndarray, unfused: np.ndarray) -> np.ndarray:
    """Per aligned row: the kernel on the side other than `unfused` has fused components by its name."""
    fused = 3 - unfused
    names = _per_side(walk.name_codes, fused, walk.path[rows, fused - 1])
    return _per_side(walk.type_sets.components, fused, names) != 0


def _partial_cover(
    walk: _Walk, unfused: int, compute: list[int], before: int, after: int
) -> tuple[list[tuple[int, list[int]]], list[int]]:
    """A run no neighbour covers as a whole: the longest part next to the kernel before it that this kernel's name
    says it performs (its epilogue), then the same for the kernel after it (its prologue); the kernels in between
    stay one-sided, so an extra GEMM right after the add of a SwiGLU-with-add kernel does not hide that fusion.
    Returns [(aligned row, positions)] and the positions left over."""
    parts, left = [], list(compute)
    if before >= 0:
        size = _covered_length(walk, before, unfused, left)
        if size:
            parts.append((before, left[:size]))
            left = left[size:]
    if after >= 0 and left:
        size = _covered_length(walk, after, unfused, left[::-1])
        if size:
            parts.append((after, left[-size:]))
            left = left[:-size]
    return parts, left


def _covered_length(walk: _Walk, row: int, unfused: int, positions: list[int]) -> int:
    """How many of `positions` (nearest the kernel at aligned `row` first) that kernel covers by its name's fused
    components, one after another. A part of a run is credited only on the name's word: a kernel's own type
    alone (a chain) never takes part of a run."""
    bits = walk.type_sets.bits[walk.type_codes[unfused - 1][positions]]
    run_types = np.bitwise_or.accumulate(bits)
    scores = _cover_scores(walk, np.full(len(positions), row), np.full(len(positions), unfused), run_types)
    named = scores == walk.limits.cover_by_components_score
    return len(positions) if named.all() else int(np.argmin(named))


def _cover_scores(walk: _Walk, rows: np.ndarray, unfused: np.ndarray, run_types: np.ndarray) -> np.ndarray:
    """Per run, the score ladder of the kernel at aligned row `rows` on the side other than `unfused`: 0 unless
    its type plus its fused components include every type of the run (run_types) and of its counterpart, and
    its name does not say it computes one operation only; Thresholds.cover_by_type_score when all are its own
    type, else cover_by_components_score."""
    fused = 3 - unfused
    fused_pos, counterpart = walk.path[rows, fused - 1], walk.path[rows, unfused - 1]
    bits = walk.type_sets.bits
    own = bits[_per_side(walk.type_codes, fused, fused_pos)]
    names = _per_side(walk.name_codes, fused, fused_pos)
    performs = own | _per_side(walk.type_sets.components, fused, names)
    needed = run_types | bits[_per_side(walk.type_codes, unfused, counterpart)]
    limits = walk.limits
    scores = np.where(
        needed == own,
        limits.cover_by_type_score,
        np.where((needed & ~performs) == 0, limits.cover_by_components_score, 0.0),
    )
    return np.where(_per_side(walk.type_sets.single_op, fused, names), 0.0, scores).astype(np.float64)


def _main_positions(codes: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """Per position of alignment codes: the nearest unfolded position before a folded one if it has the same
    type, else the nearest after it if it does, in the position's `segment`; -1 for unfolded positions and
    folded ones with neither."""
    folded = (codes & FOLDED) != 0
    kinds = type_code(codes)
    index = np.arange(len(codes))
    if not len(codes):
        return index
    before = np.maximum.accumulate(np.where(folded, -1, index))
    after = np.minimum.accumulate(np.where(folded, len(codes), index)[::-1])[::-1]
    before_at, after_at = np.maximum(before, 0), np.minimum(after, len(codes) - 1)
    before_ok = (before >= 0) & (kinds[before_at] == kinds) & (segment[before_at] == segment)
    after_ok = (after < len(codes)) & (kinds[after_at] == kinds) & (segment[after_at] == segment)
    return np.where(~folded, -1, np.where(before_ok, before, np.where(after_ok, after, -1)))


def _notes(walk: _Walk, evidence: Evidence, runs: _Runs, target: np.ndarray) -> None:
    """The one-sided kernels no fusion or split takes, run by run: its non-compute kernels, then its compute
    kernels left over (with the run's reason)."""
    left = (runs.kinds == COMPUTE) & (target < 0)
    kernels = np.flatnonzero(left | (runs.kinds == NON_COMPUTE))
    kernels = kernels[np.argsort(runs.run_of[kernels] * 2 + left[kernels], kind="stable")]
    reasons = np.where(left[kernels], runs.reason[runs.run_of[kernels]], 0)
    _note(walk, evidence, runs.side[kernels], runs.positions[kernels], reasons)


def _note(walk: _Walk, evidence: Evidence, sides: np.ndarray, positions: np.ndarray, reasons: np.ndarray) -> None:
    """Count one-sided kernels (side, position) as notes with their reasons (codes into REASONS), in order: per
    (side, type, reason) in order of first occurrence, its kernels by name (their times one after another) and
    its first evidence refs."""
    type_codes, names = _per_side(walk.type_codes, sides, positions), _per_side(walk.name_codes, sides, positions)
    segments = _per_side(walk.position_segment, sides, positions)
    weights, times = walk.weights[segments], walk.note_times(sides, positions)
    keys = ((sides - 1) * len(walk.types) + type_codes) * len(REASONS) + reasons
    by_name: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    name_order, name_bounds = _grouped(keys * walk.name_count + names)
    for a, b in zip(name_bounds[:-1], name_bounds[1:]):
        by_name[int(keys[name_order[a]])].append((int(names[name_order[a]]), a, b))
    name_times, name_weights = times[name_order].tolist(), weights[name_order]
    order, bounds = _grouped(keys)
    cap = walk.limits.max_evidence_refs
    for a, b in zip(bounds[:-1], bounds[1:]):
        i = int(order[a])
        key = (int(sides[i]), walk.types[int(type_codes[i])], REASONS[int(reasons[i])])
        evidence.unattributed[key] += int(weights[order[a:b]].sum())
        kernels = evidence.note_kernels[key]
        for name, c, d in by_name[int(keys[i])]:
            tally = kernels.setdefault(name, [0, 0.0])
            tally[0] += int(name_weights[c:d].sum())
            tally[1] = reduce(add, name_times[c:d], tally[1])
        refs = evidence.note_refs[key]
        for j in order[a:b][: max(cap - len(refs), 0)].tolist():
            segment, local = walk.segments[int(segments[j])], [walk.local(int(sides[j]), int(positions[j]))]
            refs.append(segment.ref(0, local if sides[j] == 1 else [], local if sides[j] == 2 else []))


def _column_sums(values: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Per column j in `columns` of (pairs, positions) `rows`: values[rows[:, j]].sum(), all at once. Each column is
    summed as a contiguous row of the transposed values, so to the same bits as on its own (pairwise); sum(axis=0)
    adds pair after pair and can differ in the last bits."""
    return np.ascontiguousarray(values[rows[:, columns]].T).sum(axis=1)


def _pair_sums(values: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Per column j in `columns` of (pairs, positions) `rows`: values[rows].sum(axis=0)[j], pair after pair, as over
    all of them. One column of several is summed beside a copy of itself: alone, numpy would sum it pairwise, to
    other bits."""
    if len(columns) == 1 and rows.shape[1] > 1:
        return values[rows[:, np.repeat(columns, 2)]].sum(axis=0)[:1]
    return values[rows[:, columns]].sum(axis=0)


class _Counting(NamedTuple):
    """What counting one segment's occurrences reads: the sides, the segment, and the patterns that already hold
    its pair ids."""

    sides: tuple[Side, Side]
    segment: Segment
    patterns_seen: set[tuple]


def _pattern(
    counting: _Counting,
    evidence: Evidence,
    key: tuple,
    fused: int,
    fused_type: str,
    sequence: tuple[str, ...],
    split: bool,
    weight: int,
) -> Pattern:
    pattern = evidence.patterns.get(key)
    if pattern is None:
        pattern = evidence.patterns[key] = Pattern(fused, fused_type, sequence, split)
    pattern.occurrences += weight
    if key not in counting.patterns_seen:
        counting.patterns_seen.add(key)
        pattern.pair_ids.update(counting.segment.pair_ids.tolist())
    pattern.kinds[counting.segment.kind] += weight
    return pattern


class _Occurrences(NamedTuple):
    """All fusion or all split occurrences as columns, in walk order, and how to count them. Two occurrences (of any
    segments) have equal `identity` rows exactly when they have the same facts (all the counters they add to);
    bounds[i]:bounds[i + 1] are the one-sided kernels occurrence i credits, as name code, the type of the note
    counting it and its time over the segment's pairs; facts(i) and cited(i) are occurrence i's facts and the
    positions it cites per side (within its segment)."""

    segment: np.ndarray
    identity: np.ndarray
    bounds: list[int]
    names: np.ndarray
    type_codes: np.ndarray
    times: np.ndarray
    facts: Callable[[int], tuple]
    cited: Callable[[int], dict[int, list[int]]]
    counter: Callable[[_Counting, Evidence, tuple, int], Pattern]


def _add(walk: _Walk, evidence: Evidence, kinds: list[_Occurrences]) -> None:
    """Count each distinct facts of a segment once, weighted by its occurrences: segment by segment, fusions
    before splits, each in order of first occurrence (so every counter sees its keys in walk order); then each
    occurrence's time and evidence refs, in walk order."""
    counting = [_Counting(walk.sides, s, set()) for s in walk.segments]
    distinct: list[tuple[int, int, int, int, int]] = []
    inverses: list[np.ndarray] = []
    for kind, occurrences in enumerate(kinds):
        first, inverse = _row_groups(np.column_stack([occurrences.segment, occurrences.identity]))
        inverses.append(inverse)
        repeats, segments = np.bincount(inverse, minlength=len(first)), occurrences.segment[first]
        distinct += zip(segments.tolist(), [kind] * len(first), first.tolist(), range(len(first)), repeats.tolist())
    patterns: list[dict[int, Pattern]] = [{} for _ in kinds]
    known: dict[tuple[int, bytes], tuple] = {}  # facts by identity: computed once over all segments
    for segment, kind, first_occurrence, index, times in sorted(distinct):
        identity = (kind, kinds[kind].identity[first_occurrence].tobytes())
        if identity not in known:
            known[identity] = kinds[kind].facts(first_occurrence)
        facts = known[identity]
        weight = walk.segments[segment].weight * times
        patterns[kind][index] = kinds[kind].counter(counting[segment], evidence, facts, weight)
    for kind, occurrences in enumerate(kinds):
        _tally(walk, occurrences, [patterns[kind][d] for d in range(len(patterns[kind]))], inverses[kind])


def _tally(walk: _Walk, occurrences: _Occurrences, distinct: list[Pattern], inverse: np.ndarray) -> None:
    """On the pattern of each occurrence (distinct[inverse[i]]), in walk order: its time (its kernels' times one
    after another), its evidence refs while the pattern has room, and its one-sided kernels' count and time."""
    numbers: dict[int, int] = {}
    unique = [numbers.setdefault(id(p), len(numbers)) for p in distinct]
    patterns = list({id(p): p for p in distinct}.values())
    number = np.asarray(unique, dtype=np.int64)[inverse]
    order, bounds = _grouped(number)
    times = _ordered_sums(occurrences.times, occurrences.bounds)[order].tolist()
    cap = walk.limits.max_evidence_refs
    for a, b in zip(bounds[:-1], bounds[1:]):
        pattern = patterns[int(number[order[a]])]
        pattern.extra_time_us = reduce(add, times[a:b], pattern.extra_time_us)
        for i in order[a:b][:cap].tolist():
            if len(pattern.refs) >= cap:
                break
            segment, cited = walk.segments[int(occurrences.segment[i])], occurrences.cited(i)
            for k in range(min(segment.weight, cap - len(pattern.refs))):
                pattern.refs.append(segment.ref(k, cited[1], cited[2]))
    sizes = np.diff(occurrences.bounds)
    kernel_number = np.repeat(number, sizes)
    weights = np.repeat(walk.weights[occurrences.segment], sizes)
    codes = (kernel_number * len(walk.types) + occurrences.type_codes) * walk.name_count + occurrences.names
    order, bounds = _grouped(codes)
    kernel_times = occurrences.times[order].tolist()
    counts = np.add.reduceat(weights[order], bounds[:-1]).tolist() if len(order) else []
    firsts = order[bounds[:-1]]
    keys = zip(
        kernel_number[firsts].tolist(), occurrences.type_codes[firsts].tolist(), occurrences.names[firsts].tolist()
    )
    for (p, t, name), count, a, b in zip(keys, counts, bounds[:-1], bounds[1:]):
        tally = patterns[p].extra_kernels.setdefault((walk.types[t], name), [0, 0.0])
        tally[0] += count
        tally[1] = reduce(add, kernel_times[a:b], tally[1])


def _ordered_sums(values: np.ndarray, bounds: list[int]) -> np.ndarray:
    """Per group bounds[i]:bounds[i + 1] of `values`: its values added one after another, as sum() of them does."""
    sizes, starts = np.diff(bounds), np.asarray(bounds[:-1], dtype=np.int64)
    out = np.zeros(len(sizes))
    for j in range(int(sizes.max()) if len(sizes) else 0):
        at = np.flatnonzero(sizes > j)
        out[at] += values[starts[at] + j]
    return out


def _row_groups(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of an integer matrix, numbered in order of first occurrence: each one's first row, and
    per row the number of its distinct row."""
    if not len(rows):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort(rows.T[::-1])
    ordered = rows[order]
    new = np.r_[True, (ordered[1:] != ordered[:-1]).any(axis=1)]
    first = order[new]
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    inverse = np.empty(len(rows), dtype=np.int64)
    inverse[order] = rank[np.cumsum(new) - 1]
    return np.sort(first), inverse


def _grouped(keys: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Indices of `keys` grouped by key, groups in order of first appearance and each in order, and the group
    bounds in that order."""
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    group = rank[inverse.ravel()]
    order = np.argsort(group, kind="stable")
    return order, np.searchsorted(group[order], np.arange(len(first) + 1)).tolist()


def _padded(values: np.ndarray, bounds: list[int]) -> np.ndarray:
    """(groups, longest group) matrix of the groups bounds[i]:bounds[i + 1] of `values`, -1 past a group's end."""
    sizes = np.diff(bounds)
    group = np.repeat(np.arange(len(sizes)), sizes)
    out = np.full((len(sizes), int(sizes.max()) if len(sizes) else 0), -1, dtype=np.int64)
    out[group, np.arange(len(values)) - np.asarray(bounds[:-1], dtype=np.int64)[group]] = values
    return out


def _fusions(walk: _Walk, runs: _Runs, target: np.ndarray) -> _Occurrences:
    """Per (covering aligned row, unfused side): one fusion occurrence of the compute kernels credited to it."""
    kernels = np.flatnonzero(target >= 0)
    order, bounds = _grouped(target[kernels] * 3 + runs.side[kernels])
    kernels = kernels[order]
    first = kernels[np.asarray(bounds[:-1], dtype=np.int64)]
    rows, unfused = target[first], runs.side[first]
    fused_pos, counterpart = walk.path[rows, 2 - unfused], walk.path[rows, unfused - 1]
    side, positions = runs.side[kernels], runs.positions[kernels]
    type_codes, names = _per_side(walk.type_codes, side, positions), _per_side(walk.name_codes, side, positions)
    occurrence = np.repeat(np.arange(len(rows)), np.diff(bounds))
    before_counterpart = np.bincount(occurrence[positions < counterpart[occurrence]], minlength=len(rows))
    identity = np.column_stack(
        [
            unfused,
            _per_side(walk.type_codes, 3 - unfused, fused_pos),
            _per_side(walk.name_codes, 3 - unfused, fused_pos),
            _per_side(walk.type_codes, unfused, counterpart),
            _per_side(walk.name_codes, unfused, counterpart),
            before_counterpart,
            _padded(type_codes, bounds),
            _padded(names, bounds),
        ]
    ).astype(np.int64)
    position_list, rows_list, unfused_list = positions.tolist(), rows.tolist(), unfused.tolist()

    def facts(i: int) -> tuple:
        return _fusion_facts(walk, rows_list[i], unfused_list[i], position_list[bounds[i] : bounds[i + 1]])

    def cited(i: int) -> dict[int, list[int]]:
        row, unfused_side = rows_list[i], unfused_list[i]
        extra = position_list[bounds[i] : bounds[i + 1]] + [walk.position(unfused_side, row)]
        fused_side = 3 - unfused_side
        return {
            fused_side: [walk.local(fused_side, walk.position(fused_side, row))],
            unfused_side: sorted(walk.local(unfused_side, p) for p in extra),
        }

    times = walk.position_times(side, positions)
    return _Occurrences(walk.row_segment[rows], identity, bounds, names, type_codes, times, facts, cited, _add_fusion)


def _fusion_facts(walk: _Walk, row: int, unfused: int, positions: list[int]) -> tuple:
    """The facts of the run `positions` covered by the kernel at alignment `row`."""
    fused = 3 - unfused
    fused_pos, counterpart = walk.position(fused, row), walk.position(unfused, row)
    unfused_positions = sorted(positions + [counterpart])
    types, names = walk.type_names(unfused), walk.names(unfused)
    return (
        unfused,
        walk.kernel_type(fused, fused_pos),
        walk.name(fused, fused_pos),
        names[counterpart],
        tuple([(types[p], names[p]) for p in unfused_positions]),
        tuple([(types[p], names[p]) for p in positions]),
    )


def _add_fusion(counting: _Counting, evidence: Evidence, facts: tuple, weight: int) -> Pattern:
    unfused, fused_type, fused_name, counterpart_name, kernels, extra = facts
    fused = 3 - unfused
    sequence = tuple(kernel_type for kernel_type, _ in kernels)
    families = counting.sides[unfused - 1].families
    key = (
        fused,
        fused_type,
        sequence,
        counting.sides[fused - 1].families[fused_name],
        tuple(families[n] for _, n in extra),
    )
    pattern = _pattern(counting, evidence, key, fused, fused_type, sequence, False, weight)
    pattern.fused_names[fused_name] += weight
    pattern.anchors[(fused_name, counterpart_name)] += weight
    for kernel_type, name in kernels:
        pattern.unfused_names[kernel_type][name] += weight
    for kernel_type, name in extra:
        evidence.attributions[(unfused, kernel_type)][fused_name] += weight
        evidence.attributed_names[(unfused, kernel_type)][name] += weight
        if counting.segment.kind == "group":
            pattern.group_extra[kernel_type] += weight
    return pattern


def _splits(walk: _Walk, runs: _Runs) -> _Occurrences:
    """Per (aligned row of an operation's kernel, side): one split occurrence of the helpers folded into it."""
    kernels = np.flatnonzero(runs.kinds == SPLIT)
    order, bounds = _grouped(runs.main_rows[kernels] * 3 + runs.side[kernels])
    kernels = kernels[order]
    first = kernels[np.asarray(bounds[:-1], dtype=np.int64)]
    rows, side = runs.main_rows[first], runs.side[first]
    main, counterpart = walk.path[rows, side - 1], walk.path[rows, 2 - side]
    unit_first, unit_end = (_per_side(walk.units[k], side, main) for k in (0, 1))
    other_first, other_end = (_per_side(walk.units[k], 3 - side, counterpart) for k in (0, 1))
    unit_bounds = np.r_[0, np.cumsum(unit_end - unit_first)].astype(np.int64)
    unit_positions = np.arange(unit_bounds[-1]) - np.repeat(unit_bounds[:-1] - unit_first, unit_end - unit_first)
    unit_sides = np.repeat(side, unit_end - unit_first)
    op_types = _per_side(walk.type_codes, side, main)
    identity = np.column_stack(
        [
            side,
            op_types,
            other_end - other_first,
            _per_side(walk.name_codes, 3 - side, counterpart),
            np.diff(bounds),
            _padded(_per_side(walk.name_codes, unit_sides, unit_positions), unit_bounds.tolist()),
        ]
    ).astype(np.int64)
    positions, rows_list, side_list = runs.positions[kernels], rows.tolist(), side.tolist()
    position_list = positions.tolist()

    def facts(i: int) -> tuple:
        return _split_facts(walk, rows_list[i], side_list[i], bounds[i + 1] - bounds[i])

    def cited(i: int) -> dict[int, list[int]]:
        row, s = rows_list[i], side_list[i]
        own = [walk.position(s, row)] + position_list[bounds[i] : bounds[i + 1]]
        return {3 - s: [walk.local(3 - s, walk.position(3 - s, row))], s: [walk.local(s, p) for p in own]}

    kernel_sides = runs.side[kernels]
    type_codes = np.repeat(op_types, np.diff(bounds))
    names = _per_side(walk.name_codes, kernel_sides, positions)
    times = walk.position_times(kernel_sides, positions)
    return _Occurrences(walk.row_segment[rows], identity, bounds, names, type_codes, times, facts, cited, _add_split)


def _split_facts(walk: _Walk, row: int, side: int, helpers: int) -> tuple:
    """The facts of one operation run as its kernel plus `helpers` one-sided helpers on `side`, as one kernel on
    the other."""
    other = 3 - side
    main, counterpart = walk.position(side, row), walk.position(other, row)
    firsts, ends = walk.units
    unit = range(int(firsts[side - 1][main]), int(ends[side - 1][main]))
    names, helper = walk.names(side), walk.helpers(side)
    return (
        side,
        walk.kernel_type(side, main),
        int(ends[other - 1][counterpart] - firsts[other - 1][counterpart]),
        walk.name(other, counterpart),
        tuple([names[p] for p in unit]),
        tuple([helper[p] for p in unit]),
        helpers,
    )


def _add_split(counting: _Counting, evidence: Evidence, facts: tuple, weight: int) -> Pattern:
    side, op_type, fused_kernels, fused_name, unit_names, helper, helpers = facts
    other = 3 - side
    families = counting.sides[side - 1].families
    helper_families = tuple(families[n] for n, is_helper in zip(unit_names, helper) if is_helper)
    pattern_families = (counting.sides[other - 1].families[fused_name], helper_families)
    key = ("split", other, op_type, len(unit_names), fused_kernels, pattern_families)
    pattern = _pattern(counting, evidence, key, other, op_type, (op_type,) * len(unit_names), True, weight)
    pattern.fused_kernels = fused_kernels
    pattern.fused_names[fused_name] += weight
    for name, is_helper in zip(unit_names, helper):
        pattern.unfused_names[op_type][name] += weight
        if is_helper:
            pattern.helper_names[name] += weight
    if counting.segment.kind == "group":
        pattern.group_extra[op_type] += weight * helpers
    return pattern
