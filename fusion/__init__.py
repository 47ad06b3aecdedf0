"""Fusion Explorer: compare kernel fusion between two GPU profiler traces.

    from fusion import load, compare
    comparison = compare(load("amd.json.gz"), load("nvidia.json.gz"))

`analyze_fusion_differences(trace1, trace2, min_group_size=50)` returns the same findings as a
plain dict with the keys of wafer-core's function of that name.
"""

from .compare import analyze_fusion_differences, compare
from .errors import TraceError
from .result import Comparison
from .trace import Trace, load

__all__ = ["Comparison", "Trace", "TraceError", "analyze_fusion_differences", "compare", "load"]
