"""Whether a trace's CPU side reaches its kernels, and if not, the one warning that says what is missing.

Kernels are tied to ops through their runtime launch (correlation id) and the op ranges around the launch on
its thread (fusion.model.ops). A format or a profiler setting can leave out either side (rocprofv3 and Nsight
Systems record no PyTorch ops; a GPU-only Kineto trace no CPU events at all), or the two may not meet. Then
no kernel has an op, op-level findings cannot exist, and the reader is told why, once per trace.
"""

from __future__ import annotations

import pandas as pd

from fusion.loader.cpu_events import CpuEvents, RangeKind

NO_OP_FINDINGS = "so no kernel has an op and there are no op-level findings"


def cpu_link_warning(kernels: pd.DataFrame, cpu: CpuEvents) -> str | None:
    """One sentence when no kernel could be tied to an op, naming what the trace lacks; None when some are."""
    if kernels.empty or (kernels["op"] != "").any():
        return None
    has_launches = len(cpu.launches.correlation) > 0
    has_ops = bool((cpu.ranges.kind == RangeKind.OP).any())
    if not has_launches and not has_ops:
        return f"this trace has no op records and no runtime launches (GPU activity only), {NO_OP_FINDINGS}"
    if not has_ops:
        return f"this trace has no op records (cpu_op events): kernels are tied to their runtime launches only, {NO_OP_FINDINGS}"
    if not has_launches:
        return f"this trace records ops but no runtime launch events to tie kernels to them, {NO_OP_FINDINGS}"
    launch = kernels["launch"]
    if not launch.isin(("kernel", "graph")).any():
        return f"none of the kernels' correlation ids matches a recorded runtime launch, {NO_OP_FINDINGS}"
    if not (launch == "kernel").any():
        return f"every launched kernel runs in a graph replay, whose launch lies outside every recorded op, {NO_OP_FINDINGS}"
    return (
        "the runtime launches lie outside every recorded op on their threads (the ops' and the launches' "
        f"pid/tid differ?), {NO_OP_FINDINGS}"
    )
