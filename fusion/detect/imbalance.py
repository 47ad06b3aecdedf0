"""Per-type count differences, consistent across matched group pairs, that no accepted pattern explains.

The fusion target is a kernel that covers the type (evidence.py credited the one-sided kernels to it by
coverage), never a guess; a type nothing covers is not reported.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..result import EvidenceRef, FusionMapping
from .evidence import NON_FUSABLE_TYPES, Evidence, Side
from .mappings import EVIDENCE_SOURCES, PLATFORM_NAMES, short_name, top_names
from .thresholds import Thresholds

IMBALANCE_DETECTOR = "group_imbalance"


def group_imbalance(
    evidence: Evidence, counts1: np.ndarray, counts2: np.ndarray, pair_refs: list[EvidenceRef], types: list[str],
    mappings: list[FusionMapping], sides: tuple[Side, Side], limits: Thresholds,
) -> list[FusionMapping]:
    """One mapping per type whose count differs in most matched group pairs and has a covering kernel."""
    if len(counts1) == 0:
        return []
    diff = counts1.astype(np.int64) - counts2.astype(np.int64)
    explained = _explained(evidence, mappings)
    out = []
    for t, kernel_type in enumerate(types):
        low, high = sorted((int(counts1[:, t].sum()), int(counts2[:, t].sum())))
        if kernel_type in NON_FUSABLE_TYPES or high < limits.partial_ratio * low or low + high < limits.min_partial_total:
            continue
        unfused = 1 if counts1[:, t].sum() > counts2[:, t].sum() else 2
        excess = diff[:, t] * (1 if unfused == 1 else -1)
        consistent = int((excess > 0).sum())
        missing = high - low - explained[(unfused, kernel_type)]
        targets = evidence.attributions.get((unfused, kernel_type))
        if consistent < limits.min_consistent_pairs or missing <= (high - low) / 2 or not targets:
            continue
        fused = sides[2 - unfused]
        out.append(FusionMapping(
            detector=IMBALANCE_DETECTOR,
            fused_trace=fused.number,
            fused_platform=PLATFORM_NAMES[fused.number],
            fused_kernel_type=fused.name_types[targets.most_common(1)[0][0]],
            fused_count=low,
            unfused_platform=PLATFORM_NAMES[unfused],
            unfused_sequence=[kernel_type],
            unfused_count_per_type={kernel_type: high},
            pattern_count=missing,
            pattern_confidence=consistent / len(diff),
            evidence=_text(kernel_type, unfused, high, low, consistent, len(diff), fused, targets),
            evidence_refs=_top_pairs(excess, pair_refs, limits.max_evidence_refs),
            pairs_with_pattern=consistent,
            fused_kernel_names=top_names(fused, targets, limits.max_names),
            unfused_kernel_names=top_names(sides[unfused - 1], evidence.attributed_names[(unfused, kernel_type)],
                                           limits.max_names),
            fused_components=list(fused.fused_components[targets.most_common(1)[0][0]]),
            evidence_source=EVIDENCE_SOURCES["group"],
        ))
    return out


def _explained(evidence: Evidence, mappings: list[FusionMapping]) -> Counter:
    accepted = {(m.fused_trace, m.fused_kernel_type, tuple(m.unfused_sequence)) for m in mappings}
    explained: Counter = Counter()
    for pattern in evidence.patterns.values():
        if (pattern.fused_trace, pattern.fused_type, pattern.sequence) in accepted:
            for extra_type, n in pattern.group_extra.items():
                explained[(pattern.unfused_trace, extra_type)] += n
    return explained


def _top_pairs(excess: np.ndarray, pair_refs: list[EvidenceRef], limit: int) -> list[EvidenceRef]:
    order = np.argsort(-excess, kind="stable")[:limit]
    return [pair_refs[i] for i in order if excess[i] > 0]


def _text(kernel_type: str, unfused: int, high: int, low: int, consistent: int, pairs: int, fused: Side,
          targets: Counter) -> str:
    shown = ", ".join(f"{short_name(fused.name_list[n])} ({fused.name_types[n]}, {k})" for n, k in targets.most_common(3))
    return (
        f"{PLATFORM_NAMES[unfused]} runs more {kernel_type} in matched groups ({high} vs {low}); more in {consistent}"
        f" of {pairs} pairs; the extra kernels sit next to kernels that also perform {kernel_type}: {shown}"
    )
