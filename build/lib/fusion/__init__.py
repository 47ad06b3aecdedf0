"""Fusion Explorer: compare kernel fusion between two GPU profiler traces.

    from fusion import load, compare
    comparison = compare(load("amd.json.gz"), load("nvidia.json.gz"))

`analyze_fusion_differences(trace1, trace2, min_group_size=50)` returns the same findings as a
plain dict with the keys of wafer-core's function of that name.

The names below are imported when first used, so `python -m fusion` (and a re-open from the
caches) does not pay for pandas and the analysis modules before it needs them.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.30.0"
"""The version `fusion --version` prints and pyproject.toml reads."""

_EXPORTS = {
    "Comparison": "fusion.result",
    "Trace": "fusion.model.trace",
    "TraceError": "fusion.errors",
    "analyze_fusion_differences": "fusion.comparison.pair",
    "compare": "fusion.comparison.pair",
    "load": "fusion.classify.trace",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'fusion' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
