"""Findings from aligned kernels, one module per kind: evidence (walk the alignments), mappings (fusions
and splits), imbalance (per-type differences across group pairs), opportunities (type counts) and
comparability; every number they decide with is a field of Thresholds."""

from .comparability import comparability
from .evidence import Evidence, Segment, Side, collect_evidence
from .imbalance import group_imbalance
from .mappings import fusion_mappings, short_name
from .opportunities import fusion_opportunities, type_stats
from .thresholds import Thresholds

__all__ = ["Evidence", "Segment", "Side", "Thresholds", "collect_evidence", "comparability", "fusion_mappings",
           "fusion_opportunities", "group_imbalance", "short_name", "type_stats"]
