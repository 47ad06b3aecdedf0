"""Findings from aligned kernels: type statistics, fusion opportunities, fusion mappings, comparability.

Mappings come from the alignment of matched pairs (group pairs and eager-stream windows). A run of
one-sided kernels is attributed to a neighbouring aligned kernel (the one it was fused into) by, in
order of strength: same type (an intra-type chain such as 4 sorts vs 1), the fused kernel's name or
Inductor op list naming the missing op (`fused_add_rms_norm` absorbs an `add`), a known fusion
affinity (an elementwise op next to a norm), and finally the previous kernel (epilogue fusion). All
occurrences of one (fused side, fused type, unfused sequence) form a pattern; a pattern is a fusion
only if it repeats and is consistent: most kernels with the fused kernel's name show it.
Every detector is written once and parametrised by side (1 or 2).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .align import ONLY1, ONLY2, SUBSTITUTE, align_codes, ops
from .result import Comparability, EvidenceRef, FusionMapping, OneSidedNote, Opportunity
from .trace import Trace
from .pair_checks import pair_warnings

NON_FUSABLE_TYPES = frozenset({"Memset", "MemCopy", "Communication"})
"""One-sided kernels of these types are notes, never fusions (an extra memset is not a fused op)."""
TYPE_KEYWORDS: dict[str, frozenset[str]] = {
    "Elementwise": frozenset({"add", "mul", "sub", "div", "residual", "bias"}),
    "SwiGLU": frozenset({"swiglu", "silu", "act"}),
    "GELU": frozenset({"gelu"}),
    "ReLU": frozenset({"relu"}),
    "RoPE": frozenset({"rope", "rotary"}),
    "Softmax": frozenset({"softmax"}),
    "RMSNorm": frozenset({"rms", "rmsnorm"}),
    "LayerNorm": frozenset({"layernorm", "layer_norm"}),
    "Reduce": frozenset({"reduce", "sum", "mean", "amax"}),
    "MoE_Routing": frozenset({"topk", "router", "routing"}),
    "Quantize": frozenset({"quant", "quantize"}),
    "Sort": frozenset({"sort"}),
}
"""Name tokens that say a kernel also performs an op of this type."""
AFFINITY: dict[str, frozenset[str]] = {
    "Elementwise": frozenset({"RMSNorm", "LayerNorm"}),
    "SwiGLU": frozenset({"GEMM", "MoE_GEMM"}),
    "GELU": frozenset({"GEMM"}),
    "ReLU": frozenset({"GEMM"}),
    "RoPE": frozenset({"Attention", "KV_Cache"}),
    "Softmax": frozenset({"Attention"}),
    "Reduce": frozenset({"Attention", "Softmax"}),
}
"""Fused-kernel types commonly absorbing a one-sided kernel of the key type."""
PLATFORM_NAMES = {1: "Trace 1", 2: "Trace 2"}
STRETCH_REASON = "part of a long stretch of kernels with no counterpart (an extra step or phase), not a fusion"
INCONSISTENT_REASON = "one-sided, but not consistently next to one fused kernel: not reported as a fusion"
_TOKEN = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class Thresholds:
    """Detection thresholds; defaults are the reference analyzer's values where it has one."""

    one_sided_ratio: float = 10.0
    """Per-group count ratio above which a type is significant at any count (one side lacks it)."""
    min_ratio: float = 2.0
    """Count ratio for a fusion opportunity."""
    min_group_total: int = 20
    """Both traces' count of a type in matched groups must exceed this for a ratio-based opportunity."""
    min_global_total: int = 100
    """The same for whole-trace (global) opportunities."""
    min_pattern_count: int = 5
    """A fusion pattern must occur at least this often."""
    min_pattern_confidence: float = 0.8
    """Share of the fused kernel's (by name) aligned occurrences that must show the pattern."""
    partial_ratio: float = 1.3
    """Group-differential imbalance: count ratio in matched groups."""
    min_partial_total: int = 100
    """Group-differential imbalance: minimum count of the type in matched groups (both sides)."""
    min_consistent_pairs: int = 5
    """Group-differential imbalance: pairs in which the difference has the dominant sign."""
    max_fused_run: int = 8
    """Longer runs of one-sided kernels are unmatched stretches (an extra step), not fused kernels."""
    max_evidence_refs: int = 5
    """Evidence references kept per mapping."""
    stream_budget: int = 20000
    """Kernels per side outside significant groups that are aligned as an eager stream."""


@dataclass
class Side:
    """Per-kernel columns of one trace the detectors read (codes index the shared type list)."""

    number: int
    trace: Trace
    codes: np.ndarray
    names: np.ndarray
    name_list: list[str]
    tokens: list[frozenset[str]]
    components: list[tuple[str, ...]]
    dur: np.ndarray

    @classmethod
    def of(cls, number: int, trace: Trace, codes: np.ndarray) -> Side:
        column = trace.kernels["name"]
        name_list = [str(n) for n in column.cat.categories]
        components = [_components(trace, n) for n in name_list]
        tokens = [frozenset(_TOKEN.findall(n.lower())) | frozenset(c) for n, c in zip(name_list, components)]
        return cls(number, trace, codes, column.cat.codes.to_numpy(), name_list, tokens, components,
                   trace.kernels["dur"].to_numpy(np.float64))


def _components(trace: Trace, name: str) -> tuple[str, ...]:
    if "components" not in trace.names.columns or name not in trace.names.index:
        return ()
    value = trace.names.at[name, "components"]
    return tuple(value) if isinstance(value, (tuple, list)) else ()


@dataclass
class Segment:
    """All pairs that share one pair of kernel-type sequences: aligned once, counted per pair.

    rows1/rows2 are (pairs, length) global kernel rows; pair_ids and correlations per pair.
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
    """Accumulated occurrences of one (fused side, fused type, unfused sequence)."""

    fused_trace: int
    fused_type: str
    sequence: tuple[str, ...]
    occurrences: int = 0
    fused_names: Counter = field(default_factory=Counter)
    unfused_names: Counter = field(default_factory=Counter)
    extra_time_us: float = 0.0
    refs: list[EvidenceRef] = field(default_factory=list)
    pair_ids: set[int] = field(default_factory=set)
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
    """(fused side, name code) -> aligned occurrences of kernels of that name."""
    attributions: dict[tuple[int, str], Counter] = field(default_factory=lambda: defaultdict(Counter))
    """(unfused side, one-sided type) -> Counter of the fused type it was attributed to."""
    unattributed: Counter = field(default_factory=Counter)
    """(side, type, reason) -> one-sided kernels that are no fusion."""
    note_refs: dict[tuple, list[EvidenceRef]] = field(default_factory=lambda: defaultdict(list))


def type_stats(sides: tuple[Side, Side], types: list[str]) -> pd.DataFrame:
    """Per kernel type present on either side: counts, times, ratios (NaN with a zero side), only_in."""
    n = len(types)
    data = {}
    for side in sides:
        data[f"trace{side.number}_count"] = np.bincount(side.codes, minlength=n)
        data[f"trace{side.number}_time_us"] = np.bincount(side.codes, weights=side.dur, minlength=n)
    table = pd.DataFrame(data, index=pd.Index(types, name="kernel_type"))
    table = table[(table["trace1_count"] > 0) | (table["trace2_count"] > 0)].copy()
    c1, c2 = table["trace1_count"], table["trace2_count"]
    table["count_ratio"] = (c1 / c2).where((c1 > 0) & (c2 > 0))
    table["time_ratio"] = (table["trace1_time_us"] / table["trace2_time_us"]).where(
        (table["trace1_time_us"] > 0) & (table["trace2_time_us"] > 0))
    table["only_in"] = np.where(c2 == 0, 1, np.where(c1 == 0, 2, 0))
    return table.sort_values(["trace1_time_us", "trace2_time_us"], ascending=False)


def fusion_opportunities(
    type_table: pd.DataFrame, group_counts: pd.DataFrame, total_groups: int, thresholds: Thresholds
) -> list[Opportunity]:
    """Types whose counts differ enough, from matched groups and then whole-trace counts; by time impact.

    `group_counts` is indexed by kernel_type with columns trace{1,2}_count, trace{1,2}_time_us and
    groups_affected, summed over matched group pairs.
    """
    out = []
    for kernel_type, row in group_counts.iterrows():
        if kernel_type not in NON_FUSABLE_TYPES and _significant(row, total_groups, thresholds):
            out.append(_opportunity(kernel_type, row, total_groups, "groups"))
    seen = {o.kernel_type for o in out}
    for kernel_type, row in type_table.iterrows():
        if kernel_type in seen or kernel_type in NON_FUSABLE_TYPES:
            continue
        c1, c2 = row["trace1_count"], row["trace2_count"]
        if c1 + c2 > thresholds.min_global_total and max(c1, c2) > thresholds.min_ratio * min(c1, c2):
            out.append(_opportunity(kernel_type, row, total_groups, "global"))
    return sorted(out, key=lambda o: -o.time_impact_ms)


def _significant(row: pd.Series, total_groups: int, thresholds: Thresholds) -> bool:
    low, high = sorted((row["trace1_count"], row["trace2_count"]))
    if high > thresholds.one_sided_ratio * low:
        return True
    return high > thresholds.min_ratio * low and low + high > thresholds.min_group_total


def _opportunity(kernel_type: str, row: pd.Series, total_groups: int, source: str) -> Opportunity:
    c1, c2 = int(row["trace1_count"]), int(row["trace2_count"])
    t1, t2 = float(row["trace1_time_us"]) / 1000, float(row["trace2_time_us"]) / 1000
    fused_trace = 2 if c2 < c1 else 1
    low, high = min(c1, c2), max(c1, c2)
    return Opportunity(
        kernel_type=str(kernel_type),
        trace1_total=c1,
        trace2_total=c2,
        trace1_avg_per_group=c1 / total_groups if total_groups else 0.0,
        trace2_avg_per_group=c2 / total_groups if total_groups else 0.0,
        trace1_time_ms=t1,
        trace2_time_ms=t2,
        time_ratio=t1 / t2 if t1 > 0 and t2 > 0 else None,
        ratio=high / low if low else None,
        fused_by=PLATFORM_NAMES[fused_trace],
        fused_trace=fused_trace,
        groups_affected=int(row.get("groups_affected", 0)),
        total_groups=total_groups,
        source=source,
        time_impact_ms=abs(t1 - t2),
        only_in=0 if low else (1 if c2 == 0 else 2),
    )


def collect_evidence(segments: list[Segment], sides: tuple[Side, Side], types: list[str], thresholds: Thresholds) -> Evidence:
    """Align every distinct segment once and attribute its one-sided kernels (weighted by pair count)."""
    evidence = Evidence()
    for segment in segments:
        _walk_segment(segment, sides, types, evidence, thresholds)
    return evidence


def _walk_segment(segment: Segment, sides: tuple[Side, Side], types: list[str], evidence: Evidence, thresholds: Thresholds) -> None:
    path = align_codes(segment.codes1, segment.codes2)
    op = ops(path, segment.codes1, segment.codes2)
    aligned = np.flatnonzero(op <= SUBSTITUTE)
    for side in sides:
        names = side.names[segment.rows(side.number)[0, path[aligned, side.number - 1]]]
        evidence.anchor_totals.update({(side.number, int(c)): int(k) * segment.weight
                                       for c, k in zip(*np.unique(names, return_counts=True))})
    occurrences: dict[tuple[int, int], list[int]] = defaultdict(list)
    for start, stop in _one_sided_runs(op):
        unfused = 1 if op[start] == ONLY1 else 2
        positions = [int(p) for p in path[start:stop, unfused - 1]]
        positions = _drop_non_fusable(positions, unfused, segment, sides, types, evidence, thresholds)
        if not positions:
            continue
        if len(positions) > thresholds.max_fused_run:
            _note(evidence, segment, sides, types, unfused, positions, STRETCH_REASON, thresholds)
            continue
        anchor = _attribute(positions, start, stop, aligned, path, unfused, segment, sides, types)
        if anchor is None:
            _note(evidence, segment, sides, types, unfused, positions, "no aligned kernel next to it", thresholds)
            continue
        occurrences[(anchor, unfused)].extend(positions)
    for (anchor, unfused), positions in occurrences.items():
        _add_occurrence(evidence, segment, sides, types, path[anchor], unfused, positions, thresholds)


def _one_sided_runs(op: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) of maximal runs of ONLY1 or of ONLY2 rows."""
    one_sided = (op == ONLY1) | (op == ONLY2)
    change = np.flatnonzero(np.diff(np.r_[-1, op, -1]) != 0)
    return [(int(a), int(b)) for a, b in zip(change[:-1], change[1:]) if one_sided[a]]


def _drop_non_fusable(positions: list[int], side: int, segment: Segment, sides: tuple[Side, Side], types: list[str],
                      evidence: Evidence, thresholds: Thresholds) -> list[int]:
    codes = segment.codes(side)
    keep = [p for p in positions if types[codes[p]] not in NON_FUSABLE_TYPES]
    dropped = [p for p in positions if types[codes[p]] in NON_FUSABLE_TYPES]
    if dropped:
        _note(evidence, segment, sides, types, side, dropped, "a non-compute kernel on one side only (not a fusion)", thresholds)
    return keep


def _note(evidence: Evidence, segment: Segment, sides: tuple[Side, Side], types: list[str], side: int,
          positions: list[int], reason: str, thresholds: Thresholds) -> None:
    codes = segment.codes(side)
    for p in positions:
        key = (side, types[codes[p]], reason)
        evidence.unattributed[key] += segment.weight
        refs = evidence.note_refs[key]
        if len(refs) < thresholds.max_evidence_refs:
            refs.append(segment.ref(0, [p] if side == 1 else [], [p] if side == 2 else []))


def _attribute(positions: list[int], start: int, stop: int, aligned: np.ndarray, path: np.ndarray, unfused: int,
               segment: Segment, sides: tuple[Side, Side], types: list[str]) -> int | None:
    """The alignment row of the aligned kernel this one-sided run was fused into (or None)."""
    k = int(np.searchsorted(aligned, start))
    candidates = ([(int(aligned[k - 1]), 0.1)] if k > 0 else []) + ([(int(aligned[k]), 0.0)] if k < len(aligned) else [])
    if not candidates:
        return None
    run_types = {types[segment.codes(unfused)[p]] for p in positions}
    scored = [(_absorb_score(row, run_types, path, unfused, segment, sides, types) + bonus, row) for row, bonus in candidates]
    return max(scored)[1]


def _absorb_score(row: int, run_types: set[str], path: np.ndarray, unfused: int, segment: Segment,
                  sides: tuple[Side, Side], types: list[str]) -> float:
    """How well the aligned kernel at `row` explains the run: chain 3, name evidence 2/1, affinity 0.5."""
    fused = 3 - unfused
    fused_pos, unfused_pos = int(path[row, fused - 1]), int(path[row, unfused - 1])
    fused_type = types[segment.codes(fused)[fused_pos]]
    if run_types == {fused_type}:
        return 3.0
    keywords = frozenset().union(*(TYPE_KEYWORDS.get(t, frozenset()) for t in run_types))
    fused_tokens = _tokens(sides[fused - 1], segment.rows(fused)[0, fused_pos])
    counterpart_tokens = _tokens(sides[unfused - 1], segment.rows(unfused)[0, unfused_pos])
    if keywords & fused_tokens:
        return 1.0 if keywords & counterpart_tokens else 2.0
    return 0.5 if any(fused_type in AFFINITY.get(t, ()) for t in run_types) else 0.0


def _tokens(side: Side, row: int) -> frozenset[str]:
    return side.tokens[side.names[row]]


def _add_occurrence(evidence: Evidence, segment: Segment, sides: tuple[Side, Side], types: list[str],
                    anchor: np.ndarray, unfused: int, positions: list[int], thresholds: Thresholds) -> None:
    fused = 3 - unfused
    fused_pos, counterpart = int(anchor[fused - 1]), int(anchor[unfused - 1])
    unfused_positions = sorted(positions + [counterpart])
    unfused_codes = segment.codes(unfused)
    sequence = tuple(types[unfused_codes[p]] for p in unfused_positions)
    fused_type = types[segment.codes(fused)[fused_pos]]
    key = (fused, fused_type, sequence)
    pattern = evidence.patterns.setdefault(key, Pattern(fused, fused_type, sequence))
    pattern.occurrences += segment.weight
    pattern.pair_ids.update(segment.pair_ids.tolist())
    pattern.fused_names[int(sides[fused - 1].names[segment.rows(fused)[0, fused_pos]])] += segment.weight
    pattern.unfused_names.update(int(sides[unfused - 1].names[segment.rows(unfused)[0, p]]) for p in positions)
    pattern.extra_time_us += float(sides[unfused - 1].dur[segment.rows(unfused)[:, positions]].sum())
    for p in positions:
        extra_type = types[unfused_codes[p]]
        evidence.attributions[(unfused, extra_type)][fused_type] += segment.weight
        if segment.kind == "group":
            pattern.group_extra[extra_type] += segment.weight
    for k in range(min(segment.weight, thresholds.max_evidence_refs - len(pattern.refs))):
        by_side = {fused: [fused_pos], unfused: unfused_positions}
        pattern.refs.append(segment.ref(k, by_side[1], by_side[2]))


def fusion_mappings(evidence: Evidence, sides: tuple[Side, Side], thresholds: Thresholds) -> tuple[list[FusionMapping], list[OneSidedNote]]:
    """Accepted patterns become mappings (chain, Inductor or sequence detector); the rest become notes."""
    mappings, notes = [], []
    for pattern in evidence.patterns.values():
        confidence = _confidence(pattern, evidence)
        if pattern.occurrences >= thresholds.min_pattern_count and confidence >= thresholds.min_pattern_confidence:
            mappings.append(_mapping(pattern, confidence, sides))
            continue
        for extra_type, count in _extra_counts(pattern).items():
            notes.append(OneSidedNote(pattern.unfused_trace, extra_type, count, INCONSISTENT_REASON, pattern.refs))
    for (side, kernel_type, reason), count in evidence.unattributed.items():
        notes.append(OneSidedNote(side, kernel_type, count, reason, evidence.note_refs[(side, kernel_type, reason)]))
    return sorted(mappings, key=lambda m: -m.time_saved_us), _merge_notes(notes)


def _confidence(pattern: Pattern, evidence: Evidence) -> float:
    total = sum(evidence.anchor_totals[(pattern.fused_trace, name)] for name in pattern.fused_names)
    return min(1.0, pattern.occurrences / total) if total else 0.0


def _extra_counts(pattern: Pattern) -> Counter:
    """One-sided kernels per type in all occurrences (the sequence minus the aligned counterpart)."""
    counts = Counter(pattern.sequence)
    counterpart = _counterpart_type(pattern)
    counts[counterpart] -= 1
    return Counter({t: n * pattern.occurrences for t, n in counts.items() if n > 0})


def _counterpart_type(pattern: Pattern) -> str:
    return pattern.fused_type if pattern.fused_type in pattern.sequence else pattern.sequence[0]


def _detector(pattern: Pattern, sides: tuple[Side, Side]) -> str:
    fused_side = sides[pattern.fused_trace - 1]
    if any(len(fused_side.components[name]) >= 2 for name in pattern.fused_names):
        return "inductor_fusion"
    return "intra_type_chain" if set(pattern.sequence) == {pattern.fused_type} else "sequence"


def _mapping(pattern: Pattern, confidence: float, sides: tuple[Side, Side]) -> FusionMapping:
    fused, unfused = sides[pattern.fused_trace - 1], sides[pattern.unfused_trace - 1]
    detector = _detector(pattern, sides)
    fused_name = fused.name_list[pattern.fused_names.most_common(1)[0][0]]
    extra_names = ", ".join(short_name(unfused.name_list[n]) for n, _ in pattern.unfused_names.most_common(3))
    what = " + ".join(pattern.sequence)
    ops_note = ""
    if detector == "inductor_fusion":
        ops_note = f" (Inductor ops: {', '.join(fused.components[pattern.fused_names.most_common(1)[0][0]])})"
    evidence = (
        f"{PLATFORM_NAMES[pattern.unfused_trace]} ({unfused.trace.label}) runs {what} where"
        f" {PLATFORM_NAMES[pattern.fused_trace]} ({fused.trace.label}) runs one {pattern.fused_type}"
        f" {short_name(fused_name)}{ops_note}; extra kernels: {extra_names}; seen {pattern.occurrences} times,"
        f" {confidence:.0%} of the aligned {short_name(fused_name)} kernels"
    )
    return FusionMapping(
        detector=detector,
        fused_trace=pattern.fused_trace,
        fused_platform=PLATFORM_NAMES[pattern.fused_trace],
        fused_kernel_type=pattern.fused_type,
        fused_count=pattern.occurrences,
        unfused_platform=PLATFORM_NAMES[pattern.unfused_trace],
        unfused_sequence=list(pattern.sequence),
        unfused_count_per_type={t: n * pattern.occurrences for t, n in Counter(pattern.sequence).items()},
        pattern_count=pattern.occurrences,
        pattern_confidence=confidence,
        evidence=evidence,
        evidence_refs=list(pattern.refs),
        pairs_with_pattern=len(pattern.pair_ids),
        time_saved_us=pattern.extra_time_us,
    )


def short_name(name: str, limit: int = 60) -> str:
    """A kernel name without 'void', template arguments and parameters, for messages."""
    base = name.replace("(anonymous namespace)::", "")
    while True:
        stripped = re.sub(r"<[^<>]*>|\([^()a-zA-Z]*\)", "", base)
        if stripped == base:
            break
        base = stripped
    base = base.split("(", 1)[0].strip().rsplit(" ", 1)[-1] or name
    return base if len(base) <= limit else base[: limit - 1] + "…"


def _merge_notes(notes: list[OneSidedNote]) -> list[OneSidedNote]:
    merged: dict[tuple, OneSidedNote] = {}
    for note in notes:
        key = (note.side, note.kernel_type, note.reason)
        if key in merged:
            merged[key].count += note.count
        else:
            merged[key] = OneSidedNote(note.side, note.kernel_type, note.count, note.reason, list(note.evidence_refs))
    return sorted(merged.values(), key=lambda n: -n.count)


def group_imbalance(
    evidence: Evidence, counts1: np.ndarray, counts2: np.ndarray, pair_refs: list[EvidenceRef], types: list[str],
    mappings: list[FusionMapping], thresholds: Thresholds,
) -> list[FusionMapping]:
    """Per-type count differences consistent across matched group pairs that no sequence mapping explains.

    The fusion target is what the alignment attributed that type's one-sided kernels to, never a guess;
    a type with no attribution is not reported.
    """
    if len(counts1) == 0:
        return []
    diff = counts1.astype(np.int64) - counts2.astype(np.int64)
    explained = _explained(evidence, mappings)
    out = []
    for t, kernel_type in enumerate(types):
        total1, total2 = int(counts1[:, t].sum()), int(counts2[:, t].sum())
        low, high = sorted((total1, total2))
        if kernel_type in NON_FUSABLE_TYPES or high < thresholds.partial_ratio * low or low + high < thresholds.min_partial_total:
            continue
        unfused = 1 if total1 > total2 else 2
        sign = 1 if unfused == 1 else -1
        consistent = int((diff[:, t] * sign > 0).sum())
        missing = high - low - explained[(unfused, kernel_type)]
        targets = evidence.attributions.get((unfused, kernel_type))
        if consistent < thresholds.min_consistent_pairs or missing <= (high - low) / 2 or not targets:
            continue
        out.append(_imbalance_mapping(kernel_type, unfused, high, low, missing, consistent, len(diff), targets,
                                      _top_pairs(diff[:, t] * sign, pair_refs, thresholds.max_evidence_refs)))
    return out


def _explained(evidence: Evidence, mappings: list[FusionMapping]) -> Counter:
    accepted = {(m.fused_trace, m.fused_kernel_type, tuple(m.unfused_sequence)) for m in mappings}
    explained: Counter = Counter()
    for key, pattern in evidence.patterns.items():
        if key in accepted:
            for extra_type, n in pattern.group_extra.items():
                explained[(pattern.unfused_trace, extra_type)] += n
    return explained


def _top_pairs(excess: np.ndarray, pair_refs: list[EvidenceRef], limit: int) -> list[EvidenceRef]:
    order = np.argsort(-excess, kind="stable")[:limit]
    return [pair_refs[i] for i in order if excess[i] > 0]


def _imbalance_mapping(kernel_type: str, unfused: int, high: int, low: int, missing: int, consistent: int, pairs: int,
                       targets: Counter, refs: list[EvidenceRef]) -> FusionMapping:
    fused = 3 - unfused
    target, _ = targets.most_common(1)[0]
    shown = ", ".join(f"{t} ({n})" for t, n in targets.most_common(3))
    return FusionMapping(
        detector="group_imbalance",
        fused_trace=fused,
        fused_platform=PLATFORM_NAMES[fused],
        fused_kernel_type=target,
        fused_count=low,
        unfused_platform=PLATFORM_NAMES[unfused],
        unfused_sequence=[kernel_type],
        unfused_count_per_type={kernel_type: high},
        pattern_count=missing,
        pattern_confidence=consistent / pairs if pairs else 0.0,
        evidence=(
            f"{PLATFORM_NAMES[unfused]} runs more {kernel_type} in matched groups ({high} vs {low});"
            f" more in {consistent} of {pairs} pairs; the alignment places the extra kernels next to: {shown}"
        ),
        evidence_refs=refs,
        pairs_with_pattern=consistent,
    )


def comparability(type_table: pd.DataFrame, sides: tuple[Side, Side], groups: tuple[int, int], matched: int,
                  attention_per_pair: tuple[float, float] | None) -> Comparability:
    """Do both traces look like the same workload? Compares totals, GEMM and attention counts, steps."""
    warnings: list[str] = []
    severe = False
    checks: dict[str, object] = {}
    totals = (len(sides[0].codes), len(sides[1].codes))
    checks["kernel_ratio"] = _safe_ratio(*totals)
    if checks["kernel_ratio"] is not None and not 0.5 <= checks["kernel_ratio"] <= 2.0:
        warnings.append(f"total kernel counts differ {checks['kernel_ratio']:.2f}x ({totals[0]} vs {totals[1]})")
    for label, members in (("GEMM", ("GEMM", "MoE_GEMM")), ("attention", ("Attention",))):
        counts = tuple(int(type_table.reindex(list(members))[f"trace{s}_count"].fillna(0).sum()) for s in (1, 2))
        ratio = checks[f"{label}_ratio"] = _safe_ratio(*counts)
        if counts == (0, 0):
            continue
        if ratio is None or not 1 / 3 <= ratio <= 3:
            severe = True
            warnings.append(f"{label} kernel counts differ too much ({counts[0]} vs {counts[1]}): probably not the same workload")
        elif not 0.67 <= ratio <= 1.5:
            warnings.append(f"{label} kernel counts differ {ratio:.2f}x ({counts[0]} vs {counts[1]}): different step counts or shapes?")
    warnings += _group_warnings(groups, matched, attention_per_pair)
    severe = severe or (min(groups) > 0 and matched == 0)
    warnings += pair_warnings(sides[0].trace, sides[1].trace)
    checks.update(groups1=groups[0], groups2=groups[1], matched_groups=matched)
    level = "mismatch" if severe else ("warn" if warnings else "ok")
    return Comparability(ok=not severe, level=level, warnings=warnings, checks=checks)


def _group_warnings(groups: tuple[int, int], matched: int, attention_per_pair: tuple[float, float] | None) -> list[str]:
    g1, g2 = groups
    out = []
    if (g1 == 0) != (g2 == 0):
        out.append(f"only one trace has significant groups ({g1} vs {g2}): graph launches on one side, eager on the other")
    elif g1 and g2 and matched == 0:
        out.append(f"no group of {g1} and {g2} significant groups matched: compositions differ too much")
    elif g1 != g2:
        out.append(f"significant group (step) counts differ: {g1} vs {g2}; counts are compared over the {matched} matched pairs")
    if attention_per_pair and attention_per_pair[0] != attention_per_pair[1]:
        out.append(f"attention kernels per matched group differ ({attention_per_pair[0]:g} vs {attention_per_pair[1]:g}):"
                   " different layer counts?")
    return out


def _safe_ratio(a: float, b: float) -> float | None:
    return a / b if a > 0 and b > 0 else None
