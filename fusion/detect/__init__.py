"""Stage 5, detect: findings from aligned kernels and op calls, one module per kind.

In: the matched and aligned data of fusion.match. Out: findings as fusion.result types, each with its evidence:
`evidence` walks the alignments, `mappings` turns repeated patterns into fusions and splits, `imbalance` finds
per-type differences across group pairs, `op_kernels` kernel-count differences of aligned op calls,
`opportunities` type-count differences, `workload` whether the traces say they ran the same workload and
`comparability` whether their counts look like it, `cited_ops` the ops of the kernels each finding cites. Every
finding has a `kind` (fusion.result.FINDING_KINDS). Every number they decide with is a field of
`thresholds.Thresholds`.

May import: fusion.match, fusion.classify, fusion.model, fusion.loader and the top-level modules (result).
"""

from fusion.detect.comparability import comparability
from fusion.detect.evidence import Evidence, Segment, Side, collect_evidence
from fusion.detect.imbalance import group_imbalance
from fusion.detect.mappings import fusion_mappings, short_name
from fusion.detect.opportunities import fusion_opportunities, type_stats
from fusion.detect.thresholds import Thresholds

__all__ = [
    "Evidence",
    "Segment",
    "Side",
    "Thresholds",
    "collect_evidence",
    "comparability",
    "fusion_mappings",
    "fusion_opportunities",
    "group_imbalance",
    "short_name",
    "type_stats",
]
