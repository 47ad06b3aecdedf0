"""Warnings about a pair of inputs as a whole, before any analysis: is this comparison what the user meant?"""

from __future__ import annotations

from fusion.model.trace import Trace


def pair_warnings(trace1: Trace, trace2: Trace) -> list[str]:
    """Same content twice, same vendor twice, a side without kernels, an unknown platform; [] for a sound pair."""
    sides = ((1, trace1), (2, trace2))
    warnings = []
    if trace1.digest == trace2.digest:
        warnings.append("both sides are the same trace (identical content); every difference found will be zero")
    elif trace1.platform == trace2.platform != "unknown":
        warnings.append(
            f"both traces are {trace1.platform}; the tool is made for AMD vs NVIDIA, "
            "but a same-vendor comparison (e.g. two software versions) still works"
        )
    for side, trace in sides:
        if trace.kernel_count == 0:
            warnings.append(f"trace {side} ({trace.label}) has no kernel events; nothing to compare on that side")
    for side, trace in sides:
        if trace.platform == "unknown":
            warnings.append(
                f"trace {side} ({trace.label}): platform unknown ({trace.platform_evidence}); "
                "the kernel-name rules of both vendors are tried on it"
            )
    return warnings
