"""Walk the alignments of all compared pairs and collect what their one-sided kernels show.

A one-sided helper kernel folded into an aligned kernel of its operation (GEMM + splitKreduce vs GEMM)
is a split: one operation run as more kernels on one side. Any other run of one-sided kernels is
credited to a neighbouring aligned kernel K on the other side only when K covers it: K's operation type
plus its fused components include every operation type of the run and of K's counterpart (a CUTLASS GEMM
with a SiLU-and-mul epilogue covers GEMM + act_and_mul). Otherwise the run is a one-sided note with its
reason. All occurrences of one (fused side, fused type, unfused sequence) form a Pattern; whether it is a
finding is decided in mappings.py over the occurrences that could show it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..align import FOLDED, ONLY1, SUBSTITUTE, align_codes, ops, type_code
from ..result import EvidenceRef
from ..trace import Trace
from .thresholds import Thresholds

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

    @classmethod
    def of(cls, number: int, trace: Trace, codes: np.ndarray) -> Side:
        column = trace.kernels["name"]
        name_list = [str(n) for n in column.cat.categories]
        table = trace.names.loc[name_list] if name_list else trace.names.iloc[0:0]
        roles = [str(r) for r in table["helper"]]
        names = column.cat.codes.to_numpy()
        helper = np.array([r != "" for r in roles], dtype=bool)
        return cls(number, trace, codes, helper[names] if len(names) else np.zeros(0, dtype=bool), names, name_list,
                   [str(t) for t in table["type"]], [tuple(c) for c in table["fused_components"]],
                   [tuple(c) for c in table["components"]], roles, trace.kernels["dur"].to_numpy(np.float64))

    def performs(self, name: int, kernel_type: str) -> frozenset[str]:
        """Operation types a kernel of this name and type performs: its type plus its fused components."""
        return frozenset((kernel_type, *self.fused_components[name]))


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
        return EvidenceRef(int(self.pair_ids[k]), int(self.correlations1[k]), int(self.correlations2[k]),
                           _window(self.rows1[k], positions1), _window(self.rows2[k], positions2))


def _window(rows: np.ndarray, positions: list[int]) -> tuple[int, int]:
    picked = rows[positions] if positions else rows[:0]
    return (int(picked.min()), int(picked.max()) + 1) if len(picked) else (-1, -1)


@dataclass
class Pattern:
    """Accumulated occurrences of one (fused side, fused type, unfused sequence); `split` for helpers."""

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
    """(side, name code) -> occurrences of a helper kernel name in the compared pairs."""
    attributions: dict[tuple[int, str], Counter] = field(default_factory=lambda: defaultdict(Counter))
    """(unfused side, one-sided type) -> name codes (on the fused side) of the kernels that cover it."""
    attributed_names: dict[tuple[int, str], Counter] = field(default_factory=lambda: defaultdict(Counter))
    """(unfused side, one-sided type) -> name codes of the one-sided kernels credited to a covering kernel."""
    unattributed: Counter = field(default_factory=Counter)
    """(side, type, reason) -> one-sided kernels that are no fusion."""
    note_refs: dict[tuple, list[EvidenceRef]] = field(default_factory=lambda: defaultdict(list))


@dataclass
class _Walk:
    """One segment's alignment and what the walk needs to read it."""

    segment: Segment
    sides: tuple[Side, Side]
    types: list[str]
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
        return self._name_codes[side - 1][position]

    def folded(self, side: int, position: int) -> bool:
        return self._folded[side - 1][position]

    def position(self, side: int, row: int) -> int:
        """The position of one side's kernel at an alignment row (-1 for a gap)."""
        return self._path_columns[side - 1][row]

    @cached_property
    def _path_columns(self) -> tuple[list[int], list[int]]:
        return self.path[:, 0].tolist(), self.path[:, 1].tolist()

    @cached_property
    def _type_names(self) -> tuple[list[str], list[str]]:
        return tuple([self.types[c] for c in type_code(self.segment.codes(s)).tolist()] for s in (1, 2))

    @cached_property
    def _name_codes(self) -> tuple[list[int], list[int]]:
        return tuple(self.sides[s - 1].names[self.segment.rows(s)[0]].tolist() for s in (1, 2))

    @cached_property
    def _folded(self) -> tuple[list[bool], list[bool]]:
        return tuple(((self.segment.codes(s) & FOLDED) != 0).tolist() for s in (1, 2))

    def row_of(self, side: int) -> np.ndarray:
        """Alignment row of each position of one side."""
        column = self.path[:, side - 1]
        rows = np.full(len(self.segment.codes(side)), -1, dtype=np.int64)
        rows[column[column >= 0]] = np.flatnonzero(column >= 0)
        return rows


def collect_evidence(segments: list[Segment], sides: tuple[Side, Side], types: list[str], limits: Thresholds) -> Evidence:
    """Align every distinct segment once and attribute its one-sided kernels (weighted by pair count)."""
    evidence = Evidence()
    for segment in segments:
        path = align_codes(segment.codes1, segment.codes2)
        op = ops(path, segment.codes1, segment.codes2)
        walk = _Walk(segment, sides, types, limits, path, op, np.flatnonzero(op <= SUBSTITUTE))
        _count_anchors(walk, evidence)
        _walk_runs(walk, evidence)
    return evidence


def _count_anchors(walk: _Walk, evidence: Evidence) -> None:
    """Aligned name pairs and helper names: the occurrences that could show a pattern."""
    weight = walk.segment.weight
    aligned = walk.path[walk.aligned]
    names = [walk.sides[s].names[walk.segment.rows(s + 1)[0, aligned[:, s]]] for s in (0, 1)]
    for pair, count in Counter(zip(names[0].tolist(), names[1].tolist())).items():
        evidence.anchor_totals[(1, pair[0], pair[1])] += count * weight
        evidence.anchor_totals[(2, pair[1], pair[0])] += count * weight
    for side in walk.sides:
        rows = walk.segment.rows(side.number)[0]
        helpers = side.names[rows[side.helper[rows]]]
        for name, count in Counter(helpers.tolist()).items():
            evidence.helper_totals[(side.number, name)] += count * weight


def _one_sided_runs(op: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) of maximal runs of ONLY1 or of ONLY2 rows."""
    one_sided = op > SUBSTITUTE
    change = np.flatnonzero(np.diff(np.r_[-1, op, -1]) != 0)
    return [(int(a), int(b)) for a, b in zip(change[:-1], change[1:]) if one_sided[a]]


def _walk_runs(walk: _Walk, evidence: Evidence) -> None:
    occurrences: dict[tuple[int, int], list[int]] = defaultdict(list)
    splits: dict[tuple[int, int], list[int]] = defaultdict(list)
    row_of = {1: walk.row_of(1), 2: walk.row_of(2)}
    row_list = {1: row_of[1].tolist(), 2: row_of[2].tolist()}
    op = walk.op.tolist()
    for start, stop in _one_sided_runs(walk.op):
        unfused = 1 if op[start] == ONLY1 else 2
        rest = []
        for p in walk.path[start:stop, unfused - 1].tolist():
            main = _main_kernel(walk, unfused, p)
            if main is not None and op[row_list[unfused][main]] <= SUBSTITUTE:
                splits[(main, unfused)].append(p)
            else:
                rest.append(p)
        anchor, credited = _credit_run(walk, evidence, unfused, start, rest)
        if anchor is not None:
            occurrences[(anchor, unfused)].extend(credited)
    for (anchor, unfused), positions in occurrences.items():
        _add_fusion(walk, evidence, anchor, unfused, positions)
    for (main, side), helpers in splits.items():
        _add_split(walk, evidence, int(row_of[side][main]), side, helpers)


def _main_kernel(walk: _Walk, side: int, position: int) -> int | None:
    """The position of the operation kernel a folded helper belongs to: the unfolded kernel of its type
    before it, else the one after it; None if it is not folded or that kernel is outside the pair."""
    if not walk.folded(side, position):
        return None
    length, kernel_type = len(walk.segment.codes(side)), walk.kernel_type(side, position)
    before = position
    while before >= 0 and walk.folded(side, before):
        before -= 1
    if before >= 0 and walk.kernel_type(side, before) == kernel_type:
        return before
    after = position
    while after < length and walk.folded(side, after):
        after += 1
    return after if after < length and walk.kernel_type(side, after) == kernel_type else None


def _credit_run(walk: _Walk, evidence: Evidence, unfused: int, start: int,
                positions: list[int]) -> tuple[int | None, list[int]]:
    """(alignment row of the covering kernel, the run's compute kernels credited to it); (None, []) when
    the run became notes."""
    non_compute = [p for p in positions if walk.kernel_type(unfused, p) in NON_FUSABLE_TYPES]
    if non_compute:
        _note(walk, evidence, unfused, non_compute, NON_COMPUTE_REASON)
    positions = [p for p in positions if p not in non_compute]
    if not positions:
        return None, []
    reason = _why_not_credited(positions, walk.aligned, walk.limits)
    anchor = None if reason else _covering_neighbour(walk, unfused, start, positions)
    if anchor is None:
        _note(walk, evidence, unfused, positions, reason or NOT_COVERED_REASON)
        return None, []
    return anchor, positions


def _why_not_credited(positions: list[int], aligned: np.ndarray, limits: Thresholds) -> str:
    if len(positions) > limits.max_fused_run:
        return STRETCH_REASON
    return "" if len(aligned) else NO_NEIGHBOUR_REASON


def _covering_neighbour(walk: _Walk, unfused: int, start: int, positions: list[int]) -> int | None:
    """The aligned row before or after the run whose kernel on the other side covers it, best score first."""
    aligned = walk.aligned
    k = int(np.searchsorted(aligned, start))
    candidates = ([(int(aligned[k - 1]), walk.limits.epilogue_bonus)] if k > 0 else [])
    candidates += [(int(aligned[k]), 0.0)] if k < len(aligned) else []
    run_types = {walk.kernel_type(unfused, p) for p in positions}
    scored = [(score + bonus, row) for row, bonus in candidates if (score := _cover_score(walk, row, unfused, run_types)) > 0]
    return max(scored)[1] if scored else None


def _cover_score(walk: _Walk, row: int, unfused: int, run_types: set[str]) -> float:
    """Score ladder: 0 unless the fused kernel at `row` performs every type of the run and its counterpart."""
    fused = 3 - unfused
    fused_pos, counterpart = walk.position(fused, row), walk.position(unfused, row)
    name = walk.name(fused, fused_pos)
    own = walk.kernel_type(fused, fused_pos)
    needed = run_types | {walk.kernel_type(unfused, counterpart)}
    if needed == {own}:
        return walk.limits.cover_by_type_score
    return walk.limits.cover_by_components_score if needed <= walk.sides[fused - 1].performs(name, own) else 0.0


def _note(walk: _Walk, evidence: Evidence, side: int, positions: list[int], reason: str) -> None:
    for p in positions:
        key = (side, walk.kernel_type(side, p), reason)
        evidence.unattributed[key] += walk.segment.weight
        refs = evidence.note_refs[key]
        if len(refs) < walk.limits.max_evidence_refs:
            refs.append(walk.segment.ref(0, [p] if side == 1 else [], [p] if side == 2 else []))


def _pattern(walk: _Walk, evidence: Evidence, key: tuple, fused: int, fused_type: str, sequence: tuple[str, ...],
             split: bool) -> Pattern:
    pattern = evidence.patterns.get(key)
    if pattern is None:
        pattern = evidence.patterns[key] = Pattern(fused, fused_type, sequence, split)
    pattern.occurrences += walk.segment.weight
    if key not in walk.patterns_seen:
        walk.patterns_seen.add(key)
        pattern.pair_ids.update(walk.segment.pair_ids.tolist())
    pattern.kinds[walk.segment.kind] += walk.segment.weight
    return pattern


def _add_fusion(walk: _Walk, evidence: Evidence, row: int, unfused: int, positions: list[int]) -> None:
    """One occurrence (per pair of the segment) of the run `positions` covered by the kernel at `row`."""
    fused = 3 - unfused
    fused_pos, counterpart = walk.position(fused, row), walk.position(unfused, row)
    unfused_positions = sorted(positions + [counterpart])
    sequence = tuple(walk.kernel_type(unfused, p) for p in unfused_positions)
    fused_type = walk.kernel_type(fused, fused_pos)
    pattern = _pattern(walk, evidence, (fused, fused_type, sequence), fused, fused_type, sequence, False)
    weight = walk.segment.weight
    fused_name, counterpart_name = walk.name(fused, fused_pos), walk.name(unfused, counterpart)
    pattern.fused_names[fused_name] += weight
    pattern.anchors[(fused_name, counterpart_name)] += weight
    for p in unfused_positions:
        pattern.unfused_names[walk.kernel_type(unfused, p)][walk.name(unfused, p)] += weight
    pattern.extra_time_us += _time(walk, unfused, positions)
    for p in positions:
        extra_type = walk.kernel_type(unfused, p)
        evidence.attributions[(unfused, extra_type)][fused_name] += weight
        evidence.attributed_names[(unfused, extra_type)][walk.name(unfused, p)] += weight
        if walk.segment.kind == "group":
            pattern.group_extra[extra_type] += weight
    _add_refs(walk, pattern, {fused: [fused_pos], unfused: unfused_positions})


def _add_split(walk: _Walk, evidence: Evidence, row: int, side: int, helpers: list[int]) -> None:
    """One operation run as its kernel plus one-sided helpers on `side`, as one kernel on the other."""
    other = 3 - side
    main, counterpart = walk.position(side, row), walk.position(other, row)
    op_type = walk.kernel_type(side, main)
    unit = _unit(walk, side, main)
    fused_kernels = len(_unit(walk, other, counterpart))
    key = ("split", other, op_type, len(unit), fused_kernels)
    pattern = _pattern(walk, evidence, key, other, op_type, (op_type,) * len(unit), True)
    pattern.fused_kernels = fused_kernels
    weight = walk.segment.weight
    pattern.fused_names[walk.name(other, counterpart)] += weight
    rows = walk.segment.rows(side)[0]
    for p in unit:
        pattern.unfused_names[op_type][walk.name(side, p)] += weight
        if walk.sides[side - 1].helper[rows[p]]:
            pattern.helper_names[walk.name(side, p)] += weight
    pattern.extra_time_us += _time(walk, side, helpers)
    if walk.segment.kind == "group":
        pattern.group_extra[op_type] += weight * len(helpers)
    _add_refs(walk, pattern, {other: [counterpart], side: [main] + helpers})


def _unit(walk: _Walk, side: int, main: int) -> list[int]:
    """Positions of one operation's kernels: its kernel and the helpers folded into it, in order."""
    first, last = main, main + 1
    while first > 0 and walk.folded(side, first - 1) and _main_kernel(walk, side, first - 1) == main:
        first -= 1
    while last < len(walk.segment.codes(side)) and walk.folded(side, last):
        last += 1
    return list(range(first, last))


def _time(walk: _Walk, side: int, positions: list[int]) -> float:
    return float(walk.sides[side - 1].dur[walk.segment.rows(side)[:, positions]].sum())


def _add_refs(walk: _Walk, pattern: Pattern, positions: dict[int, list[int]]) -> None:
    for k in range(min(walk.segment.weight, walk.limits.max_evidence_refs - len(pattern.refs))):
        pattern.refs.append(walk.segment.ref(k, positions[1], positions[2]))
