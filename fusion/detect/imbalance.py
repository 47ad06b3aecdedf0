"""Per-type count differences, consistent across matched group pairs, that no accepted pattern explains.

The fusion target is a kernel that covers the type (evidence.py credited the one-sided kernels to it by
coverage), never a guess; a type nothing covers is not reported.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fusion.detect.evidence import NON_FUSABLE_TYPES, Evidence, Side
from fusion.detect.mappings import EVIDENCE_SOURCES, PLATFORM_NAMES, short_name, top_names
from fusion.detect.thresholds import Thresholds
from fusion.result import FUSION, EvidenceRef, FusionMapping

IMBALANCE_DETECTOR = "group_imbalance"


def group_imbalance(
    evidence: Evidence,
    counts1: np.ndarray,
    counts2: np.ndarray,
    pair_ref: Callable[[int], EvidenceRef],
    types: list[str],
    mappings: list[FusionMapping],
    sides: tuple[Side, Side],
    limits: Thresholds,
) -> list[FusionMapping]:
    """One mapping per type whose count differs in most matched group pairs and has a covering kernel;
    `pair_ref(i)` is matched pair i's reference."""
    if len(counts1) == 0:
        return []
    diff = counts1.astype(np.int64) - counts2.astype(np.int64)
    explained = _explained(evidence, mappings)
    out = []
    for t, kernel_type in enumerate(types):
        low, high = sorted((int(counts1[:, t].sum()), int(counts2[:, t].sum())))
        if (
            kernel_type in NON_FUSABLE_TYPES
            or high < limits.partial_ratio * low
            or low + high < limits.min_partial_total
        ):
            continue
        unfused = 1 if counts1[:, t].sum() > counts2[:, t].sum() else 2
        excess = diff[:, t] * (1 if unfused == 1 else -1)
        imbalance = _Imbalance(
            kernel_type,
            unfused,
            high,
            low,
            high - low - explained[(unfused, kernel_type)],
            int((excess > 0).sum()),
            len(diff),
        )
        targets = evidence.attributions.get((unfused, kernel_type))
        if imbalance.consistent >= limits.min_consistent_pairs and imbalance.missing > (high - low) / 2 and targets:
            refs = _top_pairs(excess, pair_ref, limits.max_evidence_refs)
            out.append(_mapping(imbalance, targets, evidence, sides, refs, limits))
    return out


@dataclass(frozen=True)
class _Imbalance:
    """One type's count difference over the matched group pairs."""

    kernel_type: str
    unfused: int
    high: int
    low: int
    missing: int
    """The part of the difference no accepted pattern explains."""
    consistent: int
    """Pairs in which the unfused side runs more of the type."""
    pairs: int


def _mapping(
    imbalance: _Imbalance,
    targets: Counter,
    evidence: Evidence,
    sides: tuple[Side, Side],
    refs: list[EvidenceRef],
    limits: Thresholds,
) -> FusionMapping:
    fused, unfused = sides[2 - imbalance.unfused], sides[imbalance.unfused - 1]
    top = targets.most_common(1)[0][0]
    kernel_type = imbalance.kernel_type
    return FusionMapping(
        detector=IMBALANCE_DETECTOR,
        fused_trace=fused.number,
        fused_platform=PLATFORM_NAMES[fused.number],
        fused_kernel_type=fused.name_types[top],
        fused_count=imbalance.low,
        unfused_platform=PLATFORM_NAMES[unfused.number],
        unfused_sequence=[kernel_type],
        unfused_count_per_type={kernel_type: imbalance.high},
        pattern_count=imbalance.missing,
        pattern_confidence=imbalance.consistent / imbalance.pairs,
        evidence=_text(imbalance, fused, targets),
        evidence_refs=refs,
        pairs_with_pattern=imbalance.consistent,
        fused_kernel_names=top_names(fused, targets, limits.max_names),
        unfused_kernel_names=top_names(
            unfused, evidence.attributed_names[(unfused.number, kernel_type)], limits.max_names
        ),
        fused_components=list(fused.fused_components[top]),
        evidence_source=EVIDENCE_SOURCES["group"],
        kind=FUSION,
    )


def _explained(evidence: Evidence, mappings: list[FusionMapping]) -> Counter:
    accepted = {(m.fused_trace, m.fused_kernel_type, tuple(m.unfused_sequence)) for m in mappings}
    explained: Counter = Counter()
    for pattern in evidence.patterns.values():
        if (pattern.fused_trace, pattern.fused_type, pattern.sequence) in accepted:
            for extra_type, n in pattern.group_extra.items():
                explained[(pattern.unfused_trace, extra_type)] += n
    return explained


def _top_pairs(excess: np.ndarray, pair_ref: Callable[[int], EvidenceRef], limit: int) -> list[EvidenceRef]:
    order = np.argsort(-excess, kind="stable")[:limit]
    return [pair_ref(int(i)) for i in order if excess[i] > 0]


def _text(imbalance: _Imbalance, fused: Side, targets: Counter) -> str:
    shown = ", ".join(
        f"{short_name(fused.name_list[n])} ({fused.name_types[n]}, {k})" for n, k in targets.most_common(3)
    )
    return (
        f"{PLATFORM_NAMES[imbalance.unfused]} runs more {imbalance.kernel_type} in matched groups ({imbalance.high} vs"
        f" {imbalance.low}); more in {imbalance.consistent} of {imbalance.pairs} pairs; the extra kernels sit next to"
        f" kernels that also perform {imbalance.kernel_type}: {shown}"
    )
