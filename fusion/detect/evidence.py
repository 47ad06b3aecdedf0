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

The runs of a segment are decided on numpy columns (_Runs); occurrences of the same kernels are counted once,
weighted by how often they occur (_add), so the Python work follows the distinct occurrences.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

import numpy as np

from fusion.classify.names import name_family
from fusion.detect.thresholds import Thresholds
from fusion.match.align import FOLDED, ONLY1, SUBSTITUTE, align_codes, ops, type_code
from fusion.model.trace import Trace
from fusion.result import EvidenceRef
from fusion.vocabulary import SPLIT_ROLES

NON_FUSABLE_TYPES = frozenset({"Memset", "MemCopy", "Communication"})
"""One-sided kernels of these types are notes, never fusions (an extra memset is not a fused op)."""
STRETCH_REASON = "part of a long stretch of kernels with no counterpart (an extra step or phase), not a fusion"
NON_COMPUTE_REASON = "a non-compute kernel on one side only (not a fusion)"
NOT_COVERED_REASON = "one-sided; no neighbouring kernel on the other side performs its operations: not a fusion"
NO_NEIGHBOUR_REASON = "one-sided; no aligned kernel next to it"


@dataclass
class Side:
    """Per-kernel columns of one trace the detectors read (codes index the shared type list)."""

    number: int
    trace: Trace
    codes: np.ndarray
    helper: np.ndarray
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
            helper[names] if len(names) else np.zeros(0, dtype=bool),
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
    """One segment's alignment and what the walk needs to read it."""

    segment: Segment
    sides: tuple[Side, Side]
    types: list[str]
    type_sets: _TypeSets
    limits: Thresholds
    path: np.ndarray
    op: np.ndarray
    aligned: np.ndarray
    """Alignment rows where both sides have a kernel."""
    patterns_seen: set[tuple] = field(default_factory=set)
    """Patterns that already hold this segment's pair ids."""

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
        """Per position of one side: its kernel is a helper of its operation (Side.helper)."""
        return self._helpers[side - 1]

    @cached_property
    def _helpers(self) -> tuple[list[bool], list[bool]]:
        return tuple(self.sides[s - 1].helper[self.segment.rows(s)[0]].tolist() for s in (1, 2))

    def folded(self, side: int, position: int) -> bool:
        return self._folded[side - 1][position]

    def position(self, side: int, row: int) -> int:
        """The position of one side's kernel at an alignment row (-1 for a gap)."""
        return self._path_columns[side - 1][row]

    @cached_property
    def _path_columns(self) -> tuple[list[int], list[int]]:
        return self.path[:, 0].tolist(), self.path[:, 1].tolist()

    @cached_property
    def type_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """Per side and position: the kernel's type code (index into `types`)."""
        return type_code(self.segment.codes1), type_code(self.segment.codes2)

    @cached_property
    def _type_names(self) -> tuple[list[str], list[str]]:
        return tuple([self.types[c] for c in codes.tolist()] for codes in self.type_codes)

    @cached_property
    def name_codes(self) -> tuple[np.ndarray, np.ndarray]:
        """Per side and position: the kernel's name code (Side.names)."""
        return tuple(self.sides[s - 1].names[self.segment.rows(s)[0]] for s in (1, 2))

    @cached_property
    def _name_list(self) -> tuple[list[int], list[int]]:
        return self.name_codes[0].tolist(), self.name_codes[1].tolist()

    @cached_property
    def _folded(self) -> tuple[list[bool], list[bool]]:
        return tuple(((self.segment.codes(s) & FOLDED) != 0).tolist() for s in (1, 2))

    def main_kernel(self, side: int, position: int) -> int | None:
        """The position of the operation kernel a folded helper belongs to: the unfolded kernel of its type
        before it, else the one after it; None if it is not folded or that kernel is outside the pair."""
        main = self._mains[side - 1][position]
        return None if main < 0 else main

    @cached_property
    def _main_positions(self) -> tuple[np.ndarray, np.ndarray]:
        return _main_positions(self.segment.codes1), _main_positions(self.segment.codes2)

    @cached_property
    def _mains(self) -> tuple[list[int], list[int]]:
        return self._main_positions[0].tolist(), self._main_positions[1].tolist()

    @cached_property
    def split_mains(self) -> tuple[np.ndarray, np.ndarray]:
        """Per side and position: main_kernel's answer when that kernel is aligned (the position is a helper
        split off an operation both sides run), else -1."""
        return tuple(np.where(self.operation_aligned[s], self._main_positions[s], -1) for s in (0, 1))

    @cached_property
    def operation_aligned(self) -> tuple[np.ndarray, np.ndarray]:
        """Per side and position: the kernel of its operation (itself, or for a folded helper the kernel it is
        folded into) is aligned with a kernel of the other side."""
        out = []
        for s in (1, 2):
            codes = self.segment.codes(s)
            mains = np.where((codes & FOLDED) != 0, self._main_positions[s - 1], np.arange(len(codes)))
            aligned = np.zeros(len(codes), dtype=bool)
            known = mains >= 0
            aligned[known] = self.op[self.row_of[s - 1][mains[known]]] <= SUBSTITUTE
            out.append(aligned)
        return tuple(out)

    def non_fusable(self, side: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Per (side, position): the kernel's type is one of NON_FUSABLE_TYPES."""
        return self.type_sets.non_fusable[_per_side(self.type_codes, side, positions)]

    def time(self, side: int, positions: list[int]) -> float:
        """Kernel time of one side's `positions` summed over the segment's pairs."""
        times = self._position_times[side - 1]
        return sum(times[p] for p in positions)

    def position_times(self, side: int) -> list[float]:
        """Per position of one side: its kernels' time summed over the segment's pairs (time of one position)."""
        return self._position_times[side - 1]

    @cached_property
    def _position_times(self) -> tuple[list[float], list[float]]:
        return tuple(self.sides[s - 1].dur[self.segment.rows(s)].sum(axis=0).tolist() for s in (1, 2))

    @cached_property
    def row_of(self) -> tuple[np.ndarray, np.ndarray]:
        """Per side: the alignment row of each position."""
        out = []
        for s in (1, 2):
            column = self.path[:, s - 1]
            rows = np.full(len(self.segment.codes(s)), -1, dtype=np.int64)
            rows[column[column >= 0]] = np.flatnonzero(column >= 0)
            out.append(rows)
        return tuple(out)


def collect_evidence(
    segments: list[Segment], sides: tuple[Side, Side], types: list[str], limits: Thresholds
) -> Evidence:
    """Align every distinct segment once and attribute its one-sided kernels (weighted by pair count)."""
    evidence, type_sets = Evidence(), _TypeSets.of(sides, types)
    for segment in segments:
        path = align_codes(segment.codes1, segment.codes2)
        op = ops(path, segment.codes1, segment.codes2)
        walk = _Walk(segment, sides, types, type_sets, limits, path, op, np.flatnonzero(op <= SUBSTITUTE))
        _count_anchors(walk, evidence)
        _walk_runs(walk, evidence)
    return evidence


def _count_anchors(walk: _Walk, evidence: Evidence) -> None:
    """Aligned name pairs, and helpers whose operation's kernel is aligned: the occurrences that could show a
    pattern. A helper in a stretch the other side does not run (an extra step) can show no split, so it does
    not count against the split's confidence."""
    weight = walk.segment.weight
    aligned = walk.path[walk.aligned]
    names = [walk.sides[s].names[walk.segment.rows(s + 1)[0, aligned[:, s]]] for s in (0, 1)]
    for pair, count in Counter(zip(names[0].tolist(), names[1].tolist())).items():
        evidence.anchor_totals[(1, pair[0], pair[1])] += count * weight
        evidence.anchor_totals[(2, pair[1], pair[0])] += count * weight
    for side in walk.sides:
        rows = walk.segment.rows(side.number)[0]
        could_split = side.helper[rows] & walk.operation_aligned[side.number - 1]
        for name, count in Counter(side.names[rows[could_split]].tolist()).items():
            evidence.helper_totals[(side.number, name)] += count * weight


def _walk_runs(walk: _Walk, evidence: Evidence) -> None:
    """Each run of one-sided kernels: a helper folded into an aligned kernel of its operation is a split, a
    non-compute kernel is a note, the rest is credited to its covering neighbour or noted with the reason.
    Then the occurrences are added, fusions first."""
    runs = _Runs.of(walk)
    fusions: dict[tuple[int, int], list[int]] = defaultdict(list)
    for i in runs.to_walk:
        unfused, rest = runs.unfused[i], runs.rest(i)
        non_compute = [p for p, skip in rest if skip]
        if non_compute:
            _note(walk, evidence, unfused, non_compute, NON_COMPUTE_REASON)
        compute = [p for p, skip in rest if not skip]
        if not compute:
            continue
        if runs.anchor[i] >= 0:
            fusions[(runs.anchor[i], unfused)].extend(compute)
            continue
        parts, rest_of_run = _partial_cover(walk, unfused, compute, runs.before[i], runs.after[i])
        for row, covered in parts:
            fusions[(row, unfused)].extend(covered)
        if rest_of_run:
            _note(walk, evidence, unfused, rest_of_run, runs.reason[i])
    _add(
        walk,
        evidence,
        [_fusion(walk, row, unfused, positions) for (row, unfused), positions in fusions.items()],
        _add_fusion,
    )
    _add(
        walk, evidence, [_split(walk, row, side, helpers) for (row, side), helpers in runs.splits().items()], _add_split
    )


@dataclass
class _Runs:
    """A segment's maximal runs of one-sided kernels (ONLY1 or ONLY2 rows), decided on columns: which of their
    kernels are split helpers, which are non-compute, and the alignment row of the kernel covering the rest."""

    unfused: list[int]
    """Per run: the side its kernels are on."""
    bounds: list[int]
    """Run i is one-sided rows bounds[i]:bounds[i + 1] of `positions`, `kinds`, ..."""
    positions: list[int]
    """Per one-sided row, in alignment order: its kernel's position on its side."""
    kinds: list[int]
    """Per one-sided row: SPLIT (a helper whose operation's kernel is aligned), NON_COMPUTE or COMPUTE."""
    mains: list[int]
    """Per one-sided row: the alignment row of its operation's kernel (split helpers only)."""
    anchor: list[int]
    """Per run: the alignment row of the kernel credited with its compute kernels, -1 for none."""
    reason: list[str]
    """Per run without an anchor: why its compute kernels are notes."""
    before: list[int]
    """Per run short enough to be fused work: the aligned row just before it when that kernel's name has fused
    components (-1: none, no components, or a longer run)."""
    after: list[int]
    """The same for the aligned row just after it."""
    to_walk: list[int]
    """The runs with a kernel that is no split helper, in order."""

    def rest(self, run: int) -> list[tuple[int, bool]]:
        """(position, non-compute) of the run's kernels that are no split helper, in order."""
        a, b = self.bounds[run], self.bounds[run + 1]
        return [(p, k == NON_COMPUTE) for p, k in zip(self.positions[a:b], self.kinds[a:b]) if k != SPLIT]

    def splits(self) -> dict[tuple[int, int], list[int]]:
        """(alignment row of the operation's kernel, side) -> its split helpers' positions, in walk order."""
        out: dict[tuple[int, int], list[int]] = defaultdict(list)
        for run, side in enumerate(self.unfused):
            for i in range(self.bounds[run], self.bounds[run + 1]):
                if self.kinds[i] == SPLIT:
                    out[(self.mains[i], side)].append(self.positions[i])
        return out

    @classmethod
    def of(cls, walk: _Walk) -> _Runs:
        op, path = walk.op, walk.path
        rows = np.flatnonzero(op > SUBSTITUTE)
        side = np.where(op[rows] == ONLY1, 1, 2)
        positions = path[rows, side - 1]
        mains = _per_side(walk.split_mains, side, positions)
        kinds = np.where(mains >= 0, SPLIT, np.where(walk.non_fusable(side, positions), NON_COMPUTE, COMPUTE))
        new = np.r_[True, (rows[1:] != rows[:-1] + 1) | (side[1:] != side[:-1])] if len(rows) else np.zeros(0, bool)
        starts = np.flatnonzero(new)
        run_of = np.cumsum(new) - 1
        compute = kinds == COMPUTE
        count = np.bincount(run_of[compute], minlength=len(starts))
        anchor, reason, before, after = _anchors(
            walk, rows[starts], side[starts], count, run_of[compute], side[compute], positions[compute]
        )
        has_rest = np.bincount(run_of[kinds != SPLIT], minlength=len(starts)) > 0
        main_rows = np.where(mains >= 0, _per_side(walk.row_of, side, np.maximum(mains, 0)), -1)
        return cls(
            side[starts].tolist(),
            np.r_[starts, len(rows)].tolist(),
            positions.tolist(),
            kinds.tolist(),
            main_rows.tolist(),
            anchor.tolist(),
            reason,
            before.tolist(),
            after.tolist(),
            np.flatnonzero(has_rest).tolist(),
        )


SPLIT, NON_COMPUTE, COMPUTE = 0, 1, 2
"""_Runs.kinds: what a one-sided kernel is."""


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
) -> tuple[np.ndarray, list[str], np.ndarray, np.ndarray]:
    """Per run (first alignment row `starts`, `count` compute kernels at `positions` of `run_of`): the aligned
    row before or after it whose kernel on the other side covers them, best score first (-1: none), and the
    reason when none does. The one before wins a tie (epilogue_bonus). Then, for runs short enough to be fused
    work, the aligned rows just before and after them whose kernels' names have fused components (-1: none),
    for _partial_cover: only those can take part of a run."""
    limits, aligned = walk.limits, walk.aligned
    anchor = np.full(len(starts), -1, dtype=np.int64)
    reason = [
        STRETCH_REASON if n > limits.max_fused_run else NOT_COVERED_REASON if len(aligned) else NO_NEIGHBOUR_REASON
        for n in count.tolist()
    ]
    candidate = (count > 0) & (count <= limits.max_fused_run)
    if not len(aligned) or not candidate.any():
        return anchor, reason, anchor, anchor
    bits = walk.type_sets.bits
    run_types = np.zeros(len(starts), dtype=bits.dtype)
    np.bitwise_or.at(run_types, run_of, bits[_per_side(walk.type_codes, side, positions)])
    k = np.searchsorted(aligned, starts)
    before, after = aligned[np.maximum(k - 1, 0)], aligned[np.minimum(k, len(aligned) - 1)]
    before_score = _cover_scores(walk, before, unfused, run_types)
    after_score = _cover_scores(walk, after, unfused, run_types)
    before_score = np.where((k > 0) & (before_score > 0), before_score + limits.epilogue_bonus, -np.inf)
    after_score = np.where((k < len(aligned)) & (after_score > 0), after_score, -np.inf)
    use_after = candidate & (after_score > -np.inf) & (after_score >= before_score)
    use_before = candidate & ~use_after & (before_score > -np.inf)
    anchor[use_after], anchor[use_before] = after[use_after], before[use_before]
    partial = candidate & (anchor < 0)
    return (
        anchor,
        reason,
        np.where(partial & (k > 0) & _named_parts(walk, before, unfused), before, -1),
        np.where(partial & (k < len(aligned)) & _named_parts(walk, after, unfused), after, -1),
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


def _main_positions(codes: np.ndarray) -> np.ndarray:
    """Per position of alignment codes: the nearest unfolded position before a folded one if it has the same
    type, else the nearest after it if it does; -1 for unfolded positions and folded ones with neither."""
    folded = (codes & FOLDED) != 0
    kinds = type_code(codes)
    index = np.arange(len(codes))
    before = np.maximum.accumulate(np.where(folded, -1, index)) if len(codes) else index
    after = np.minimum.accumulate(np.where(folded, len(codes), index)[::-1])[::-1] if len(codes) else index
    before_ok = (before >= 0) & (kinds[np.maximum(before, 0)] == kinds)
    after_ok = (after < len(codes)) & (kinds[np.minimum(after, len(codes) - 1)] == kinds)
    return np.where(~folded, -1, np.where(before_ok, before, np.where(after_ok, after, -1)))


def _note(walk: _Walk, evidence: Evidence, side: int, positions: list[int], reason: str) -> None:
    times = _column_sums(walk.sides[side - 1].dur, walk.segment.rows(side)[:, positions]).tolist()
    types, names, weight = walk.type_names(side), walk.names(side), walk.segment.weight
    for p, time_us in zip(positions, times):
        key = (side, types[p], reason)
        evidence.unattributed[key] += weight
        tally = evidence.note_kernels[key].setdefault(names[p], [0, 0.0])
        tally[0] += weight
        tally[1] += time_us
        refs = evidence.note_refs[key]
        if len(refs) < walk.limits.max_evidence_refs:
            refs.append(walk.segment.ref(0, [p] if side == 1 else [], [p] if side == 2 else []))


def _column_sums(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per column of (pairs, positions) `rows`: values[rows[:, j]].sum(), all at once. Each column is summed as a
    contiguous row of the transposed values, so to the same bits as on its own (pairwise); sum(axis=0) adds
    pair after pair and can differ in the last bits."""
    return np.ascontiguousarray(values[rows].T).sum(axis=1)


def _pattern(
    walk: _Walk,
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
    if key not in walk.patterns_seen:
        walk.patterns_seen.add(key)
        pattern.pair_ids.update(walk.segment.pair_ids.tolist())
    pattern.kinds[walk.segment.kind] += weight
    return pattern


class _Occurrence(NamedTuple):
    """One fusion or split occurrence of a segment: `facts` (all its counters read, the same for every
    occurrence of the same kernels), its extra time over the segment's pairs, the positions it cites and its
    one-sided kernels as (type of the note counting it, name code, time over the segment's pairs)."""

    facts: tuple
    time_us: float
    positions: dict[int, list[int]]
    extras: list[tuple[str, int, float]]


def _add(
    walk: _Walk,
    evidence: Evidence,
    occurrences: list[_Occurrence],
    count: Callable[[_Walk, Evidence, tuple, int], Pattern],
) -> None:
    """Count each distinct `facts` once, weighted by its occurrences (in order of first occurrence, so every
    counter sees its keys in walk order); then each occurrence's time and evidence refs, in walk order."""
    repeats = Counter(o.facts for o in occurrences)
    patterns = {facts: count(walk, evidence, facts, walk.segment.weight * n) for facts, n in repeats.items()}
    for occurrence in occurrences:
        pattern = patterns[occurrence.facts]
        pattern.extra_time_us += occurrence.time_us
        _add_refs(walk, pattern, occurrence.positions)
        for kernel_type, name, time_us in occurrence.extras:
            tally = pattern.extra_kernels.setdefault((kernel_type, name), [0, 0.0])
            tally[0] += walk.segment.weight
            tally[1] += time_us


def _fusion(walk: _Walk, row: int, unfused: int, positions: list[int]) -> _Occurrence:
    """The run `positions` covered by the kernel at alignment `row` (once per pair of the segment)."""
    fused = 3 - unfused
    fused_pos, counterpart = walk.position(fused, row), walk.position(unfused, row)
    unfused_positions = sorted(positions + [counterpart])
    types, names = walk.type_names(unfused), walk.names(unfused)
    facts = (
        unfused,
        walk.kernel_type(fused, fused_pos),
        walk.name(fused, fused_pos),
        names[counterpart],
        tuple([(types[p], names[p]) for p in unfused_positions]),
        tuple([(types[p], names[p]) for p in positions]),
    )
    times = walk.position_times(unfused)
    extras = [(types[p], names[p], times[p]) for p in positions]
    return _Occurrence(facts, walk.time(unfused, positions), {fused: [fused_pos], unfused: unfused_positions}, extras)


def _add_fusion(walk: _Walk, evidence: Evidence, facts: tuple, weight: int) -> Pattern:
    unfused, fused_type, fused_name, counterpart_name, kernels, extra = facts
    fused = 3 - unfused
    sequence = tuple(kernel_type for kernel_type, _ in kernels)
    families = walk.sides[unfused - 1].families
    key = (
        fused,
        fused_type,
        sequence,
        walk.sides[fused - 1].families[fused_name],
        tuple(families[n] for _, n in extra),
    )
    pattern = _pattern(walk, evidence, key, fused, fused_type, sequence, False, weight)
    pattern.fused_names[fused_name] += weight
    pattern.anchors[(fused_name, counterpart_name)] += weight
    for kernel_type, name in kernels:
        pattern.unfused_names[kernel_type][name] += weight
    for kernel_type, name in extra:
        evidence.attributions[(unfused, kernel_type)][fused_name] += weight
        evidence.attributed_names[(unfused, kernel_type)][name] += weight
        if walk.segment.kind == "group":
            pattern.group_extra[kernel_type] += weight
    return pattern


def _split(walk: _Walk, row: int, side: int, helpers: list[int]) -> _Occurrence:
    """One operation run as its kernel plus one-sided helpers on `side`, as one kernel on the other."""
    other = 3 - side
    main, counterpart = walk.position(side, row), walk.position(other, row)
    unit = _unit(walk, side, main)
    names, helper = walk.names(side), walk.helpers(side)
    facts = (
        side,
        walk.kernel_type(side, main),
        len(_unit(walk, other, counterpart)),
        walk.name(other, counterpart),
        tuple([names[p] for p in unit]),
        tuple([helper[p] for p in unit]),
        len(helpers),
    )
    op_type = facts[1]  # a split's note counts its helpers as kernels of the operation's type
    times = walk.position_times(side)
    extras = [(op_type, names[p], times[p]) for p in helpers]
    return _Occurrence(facts, walk.time(side, helpers), {other: [counterpart], side: [main] + helpers}, extras)


def _add_split(walk: _Walk, evidence: Evidence, facts: tuple, weight: int) -> Pattern:
    side, op_type, fused_kernels, fused_name, unit_names, helper, helpers = facts
    other = 3 - side
    families = walk.sides[side - 1].families
    helper_families = tuple(families[n] for n, is_helper in zip(unit_names, helper) if is_helper)
    pattern_families = (walk.sides[other - 1].families[fused_name], helper_families)
    key = ("split", other, op_type, len(unit_names), fused_kernels, pattern_families)
    pattern = _pattern(walk, evidence, key, other, op_type, (op_type,) * len(unit_names), True, weight)
    pattern.fused_kernels = fused_kernels
    pattern.fused_names[fused_name] += weight
    for name, is_helper in zip(unit_names, helper):
        pattern.unfused_names[op_type][name] += weight
        if is_helper:
            pattern.helper_names[name] += weight
    if walk.segment.kind == "group":
        pattern.group_extra[op_type] += weight * helpers
    return pattern


def _unit(walk: _Walk, side: int, main: int) -> list[int]:
    """Positions of one operation's kernels: its kernel and the helpers folded into it, in order."""
    first, last = main, main + 1
    while first > 0 and walk.folded(side, first - 1) and walk.main_kernel(side, first - 1) == main:
        first -= 1
    while last < len(walk.segment.codes(side)) and walk.folded(side, last):
        last += 1
    return list(range(first, last))


def _add_refs(walk: _Walk, pattern: Pattern, positions: dict[int, list[int]]) -> None:
    for k in range(min(walk.segment.weight, walk.limits.max_evidence_refs - len(pattern.refs))):
        pattern.refs.append(walk.segment.ref(k, positions[1], positions[2]))
