"""Patterns that repeat and are consistent become fusion mappings; the rest become one-sided notes.

Consistency is measured over the occurrences that could show a pattern, never over every use of a
kernel name (one AMD Tensile kernel may serve 330 calls of different shapes): for a fusion, the aligned
occurrences of the same (fused kernel, counterpart) pair of names; for a split, the helper kernels'
occurrences (does the reduce kernel follow its GEMM every time it runs).
"""

from __future__ import annotations

import re
from collections import Counter

from fusion.detect.evidence import NON_COMPUTE_REASON, Evidence, Pattern, Side
from fusion.detect.thresholds import Thresholds
from fusion.result import EXTRA_WORK, FUSION, ONE_SIDED, SPLIT, TIME_DECIMALS, FusionMapping, NoteKernel, OneSidedNote

PLATFORM_NAMES = {1: "Trace 1", 2: "Trace 2"}
SPLIT_DETECTOR = "split_kernel"
INDUCTOR_DETECTOR = "inductor_fusion"
CHAIN_DETECTOR = "intra_type_chain"
SEQUENCE_DETECTOR = "sequence"
EVIDENCE_SOURCES = {"group": "groups", "stream": "windows"}
"""Pair kind -> FusionMapping.evidence_source."""
INCONSISTENT_REASON = (
    "one-sided; covered by a neighbouring kernel in too few of the occurrences that could show it:"
    " not reported as a fusion"
)
RARE_REASON = "one-sided; covered by a neighbouring kernel, but too rarely to be a pattern: not reported as a fusion"
OTHER_WORK_CHAIN_REASON = (
    "one-sided; extra kernels of the neighbour's own type, in traces that do not look like the"
    " same workload (see comparability): different work, not reported as a fusion"
)
UNREPEATED_CHAIN_REASON = (
    "one-sided; extra kernels of the neighbour's own type, but no pair of aligned kernel names"
    " shows them repeatedly (different shapes or kernel choices): not reported as a fusion"
)


def fusion_mappings(
    evidence: Evidence, sides: tuple[Side, Side], limits: Thresholds, same_workload: bool = True
) -> tuple[list[FusionMapping], list[OneSidedNote]]:
    """Accepted patterns become mappings (split, chain, Inductor or sequence detector); the rest notes.
    `same_workload` is False when the comparability check finds the traces too different (mismatch)."""
    mappings, notes = [], []
    for pattern in evidence.patterns.values():
        shown, total = could_show(pattern, evidence)
        reason = _rejected(pattern, shown / total if total else 0.0, sides, limits, same_workload)
        if reason is None:
            mappings.append(_mapping(pattern, (shown, total), sides, limits))
            continue
        names = sides[pattern.unfused_trace - 1].name_list
        for extra_type, count in _extra_counts(pattern).items():
            tallies = {code: tally for (t, code), tally in pattern.extra_kernels.items() if t == extra_type}
            kernels = _note_kernels(tallies, names)
            notes.append(OneSidedNote(pattern.unfused_trace, extra_type, count, reason, pattern.refs, kernels=kernels))
    for (side, kernel_type, reason), count in evidence.unattributed.items():
        key = (side, kernel_type, reason)
        kernels = _note_kernels(evidence.note_kernels[key], sides[side - 1].name_list)
        kind = EXTRA_WORK if reason == NON_COMPUTE_REASON else ONE_SIDED
        notes.append(
            OneSidedNote(side, kernel_type, count, reason, evidence.note_refs[key], kind=kind, kernels=kernels)
        )
    return sorted(mappings, key=lambda m: -m.time_saved_us), _merge_notes(notes)


def _rejected(
    pattern: Pattern, confidence: float, sides: tuple[Side, Side], limits: Thresholds, same_workload: bool
) -> str | None:
    """Why a pattern is no finding (None: it is one): too rare, inconsistent, or a chain without support.

    A chain (extra kernels of the covering kernel's own type) is the one finding no kernel name supports: it
    rests on both traces doing the same work, and it must repeat on the same kernels (one pair of aligned
    names showing it min_pattern_count times). Ten different GEMM tile pairs that each show an extra GEMM
    once are different shapes, not a fusion; two models' extra GEMMs are different work."""
    if pattern.occurrences < limits.min_pattern_count:
        return RARE_REASON
    if confidence < limits.min_pattern_confidence:
        return INCONSISTENT_REASON
    if _detector(pattern, sides[pattern.fused_trace - 1]) != CHAIN_DETECTOR:
        return None
    if not same_workload:
        return OTHER_WORK_CHAIN_REASON
    return UNREPEATED_CHAIN_REASON if max(pattern.anchors.values()) < limits.min_pattern_count else None


def could_show(pattern: Pattern, evidence: Evidence) -> tuple[int, int]:
    """(occurrences showing the pattern, occurrences that could show it): their ratio is its confidence."""
    if pattern.split:
        total = sum(evidence.helper_totals[(pattern.unfused_trace, name)] for name in pattern.helper_names)
        return sum(pattern.helper_names.values()), total
    total = sum(evidence.anchor_totals[(pattern.fused_trace, *anchor)] for anchor in pattern.anchors)
    return pattern.occurrences, total


def _extra_counts(pattern: Pattern) -> Counter:
    """One-sided kernels per type in all occurrences (the sequence minus the aligned counterpart)."""
    if pattern.split:
        return Counter({pattern.fused_type: (len(pattern.sequence) - pattern.fused_kernels) * pattern.occurrences})
    counts = Counter(pattern.sequence)
    counts[pattern.fused_type if pattern.fused_type in pattern.sequence else pattern.sequence[0]] -= 1
    return Counter({t: n * pattern.occurrences for t, n in counts.items() if n > 0})


def _detector(pattern: Pattern, fused: Side) -> str:
    if pattern.split:
        return SPLIT_DETECTOR
    if any(len(fused.components[name]) >= 2 for name in pattern.fused_names):
        return INDUCTOR_DETECTOR
    return CHAIN_DETECTOR if set(pattern.sequence) == {pattern.fused_type} else SEQUENCE_DETECTOR


def top_names(side: Side, counts: Counter, limit: int) -> list[str]:
    """Raw kernel names, most frequent first, at most `limit`."""
    return [side.name_list[n] for n, _ in counts.most_common(limit)]


def unfused_names(pattern: Pattern, side: Side, limit: int) -> list[str]:
    """Raw names of the replaced kernels, in sequence order of their types, at most `limit` per type."""
    return [n for t in dict.fromkeys(pattern.sequence) for n in top_names(side, pattern.unfused_names[t], limit)]


def evidence_source(kinds: Counter) -> str:
    return EVIDENCE_SOURCES[kinds.most_common(1)[0][0]]


def _mapping(pattern: Pattern, shown: tuple[int, int], sides: tuple[Side, Side], limits: Thresholds) -> FusionMapping:
    fused, unfused = sides[pattern.fused_trace - 1], sides[pattern.unfused_trace - 1]
    confidence = min(1.0, shown[0] / shown[1])
    top_fused = pattern.fused_names.most_common(1)[0][0]
    text = _split_text if pattern.split else _fusion_text
    return FusionMapping(
        detector=_detector(pattern, fused),
        fused_trace=pattern.fused_trace,
        fused_platform=PLATFORM_NAMES[pattern.fused_trace],
        fused_kernel_type=pattern.fused_type,
        fused_count=pattern.occurrences,
        unfused_platform=PLATFORM_NAMES[pattern.unfused_trace],
        unfused_sequence=list(pattern.sequence),
        unfused_count_per_type={t: n * pattern.occurrences for t, n in Counter(pattern.sequence).items()},
        pattern_count=pattern.occurrences,
        pattern_confidence=confidence,
        evidence=text(pattern, shown, fused, unfused),
        evidence_refs=list(pattern.refs),
        pairs_with_pattern=len(pattern.pair_ids),
        time_saved_us=round(pattern.extra_time_us, TIME_DECIMALS),
        fused_kernel_names=top_names(fused, pattern.fused_names, limits.max_names),
        unfused_kernel_names=unfused_names(pattern, unfused, limits.max_names),
        fused_components=[] if pattern.split else list(fused.fused_components[top_fused]),
        evidence_source=evidence_source(pattern.kinds),
        kind=SPLIT if pattern.split else FUSION,
    )


def _side_label(side: Side) -> str:
    return f"{PLATFORM_NAMES[side.number]} ({side.trace.label})"


def _listed(side: Side, counts: Counter, limit: int = 3) -> str:
    return ", ".join(short_name(side.name_list[n]) for n, _ in counts.most_common(limit))


def _fusion_text(pattern: Pattern, shown: tuple[int, int], fused: Side, unfused: Side) -> str:
    top = pattern.fused_names.most_common(1)[0][0]
    also = [t for t in fused.fused_components[top] if t in pattern.sequence]
    performs = f" that also performs {' + '.join(also)}" if also else ""
    ops = f" (Inductor ops: {', '.join(fused.components[top])})" if len(fused.components[top]) >= 2 else ""
    replaced = "; ".join(f"{t}: {_listed(unfused, pattern.unfused_names[t])}" for t in dict.fromkeys(pattern.sequence))
    return (
        f"{_side_label(unfused)} runs {' + '.join(pattern.sequence)} as {len(pattern.sequence)} kernels ({replaced})"
        f" where {_side_label(fused)} runs one {pattern.fused_type} kernel{performs}: {_listed(fused, pattern.fused_names)}"
        f"{ops}; seen {pattern.occurrences} times, in {shown[0]} of the {shown[1]} aligned occurrences of these kernels"
    )


def _split_text(pattern: Pattern, shown: tuple[int, int], fused: Side, unfused: Side) -> str:
    roles = ", ".join(dict.fromkeys(unfused.helper_roles[n] for n in pattern.helper_names))
    kernels = _listed(unfused, pattern.unfused_names[pattern.fused_type], 4)
    return (
        f"{_side_label(unfused)} runs this {pattern.fused_type} as {len(pattern.sequence)} kernels ({roles}: {kernels}),"
        f" {_side_label(fused)} as {pattern.fused_kernels} ({_listed(fused, pattern.fused_names)});"
        f" seen {pattern.occurrences} times;"
        f" the helper kernels sit with their {pattern.fused_type} in {shown[0]} of their {shown[1]} occurrences,"
        f" {pattern.extra_time_us:.1f} us of helper time"
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


def _note_kernels(tallies: dict[int, list[float]], name_list: list[str]) -> list[NoteKernel]:
    kernels = [NoteKernel(name_list[code], int(n), round(t, TIME_DECIMALS)) for code, (n, t) in tallies.items()]
    return sorted(kernels, key=lambda k: (-k.time_us, k.name))


def _merge_notes(notes: list[OneSidedNote]) -> list[OneSidedNote]:
    merged: dict[tuple, OneSidedNote] = {}
    for note in notes:
        key = (note.side, note.kernel_type, note.reason)
        if key in merged:
            merged[key].count += note.count
            merged[key].kernels = _merged_kernels(merged[key].kernels + note.kernels)
        else:
            merged[key] = OneSidedNote(
                note.side,
                note.kernel_type,
                note.count,
                note.reason,
                list(note.evidence_refs),
                kind=note.kind,
                kernels=list(note.kernels),
            )
    return sorted(merged.values(), key=lambda n: -n.count)


def _merged_kernels(kernels: list[NoteKernel]) -> list[NoteKernel]:
    totals: dict[str, list[float]] = {}
    for kernel in kernels:
        tally = totals.setdefault(kernel.name, [0, 0.0])
        tally[0] += kernel.count
        tally[1] += kernel.time_us
    merged = [NoteKernel(name, int(n), round(t, TIME_DECIMALS)) for name, (n, t) in totals.items()]
    return sorted(merged, key=lambda k: (-k.time_us, k.name))
