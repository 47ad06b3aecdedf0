"""Findings from aligned kernels, one module per kind: evidence (walk the alignments), mappings (fusions
and splits), imbalance (per-type differences across group pairs), opportunities (type counts) and
comparability; every number they decide with is a field of Thresholds."""

from fusion.detect.comparability import comparability
from fusion.detect.evidence import Evidence, Segment, Side, collect_evidence
from fusion.detect.imbalance import group_imbalance
from fusion.detect.mappings import fusion_mappings, short_name
from fusion.detect.opportunities import fusion_opportunities, type_stats
from fusion.detect.thresholds import Thresholds

__all__ = ["Evidence", "Segment", "Side", "Thresholds", "collect_evidence", "comparability", "fusion_mappings",
           "fusion_opportunities", "group_imbalance", "short_name", "type_stats"]
