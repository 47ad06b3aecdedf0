"""Matched groups that are not the same stretch of work go back to the stream.

A matched group pair is compared kernel by kernel on the premise that both groups run the same stretch
of the model (a decode step, a piecewise graph). Graph launches cut at different places on the two sides
break it: half a step on one side pairs with a whole step on the other, and the alignment of the pair
leaves one side's surplus layers unaligned at its start or end. Such a pair's evidence is at best partial
and depends on which trace comes first, so its groups rejoin the kernels outside groups, whose stream
alignment follows the work across launch boundaries.

Realigning is bounded like the rest of the stream: when the pairs' kernels would take a side's stream beyond
Thresholds.stream_budget, the pairs stay compared as groups and a warning says so.

A pair is cut differently when its alignment starts or ends with more one-sided kernels than a fused run
can have (Thresholds.max_fused_run): a fusion or a split leaves a few kernels unaligned, never a layer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fusion.match.align import align_codes


def cut_differently(codes1: np.ndarray, codes2: np.ndarray, max_fused_run: int) -> bool:
    """Whether more than `max_fused_run` kernels of one side (given as alignment codes) have no counterpart
    before the first or after the last aligned pair of kernels.

    The alignment here leaves leading and trailing kernels unaligned at no cost, so a surplus shows as one
    unaligned stretch at the start or the end, not spread over the pair as gaps."""
    path = align_codes(codes1, codes2, free_end=True, free_start=True)
    both = np.flatnonzero((path[:, 0] >= 0) & (path[:, 1] >= 0))
    if not len(both):
        return max(len(codes1), len(codes2)) > max_fused_run
    first, last = path[both[0]], path[both[-1]]
    lead = max(first[0], first[1])
    trail = max(len(codes1) - 1 - last[0], len(codes2) - 1 - last[1])
    return int(max(lead, trail)) > max_fused_run


@dataclass(frozen=True)
class CutPairs:
    """How many matched group pairs were cut differently, and whether their kernels joined the stream."""

    count: int = 0
    realigned: bool = False

    def warnings(self, max_fused_run: int, stream_budget: int) -> list[str]:
        if not self.count:
            return []
        what = (
            f"{self.count} matched group pairs ran different stretches of work (more than {max_fused_run} kernels"
            " of one side at a pair's start or end had no counterpart: graph launches cut at different places)"
        )
        if self.realigned:
            return [f"{what}; their kernels are compared with the kernels outside groups, as a stream"]
        return [
            f"{what}; they stay compared as groups, since their kernels would take the stream beyond"
            f" {stream_budget} kernels per trace (stream_budget): findings near their edges may be missed"
        ]
