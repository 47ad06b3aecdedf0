"""The columns of a trace's kernel table, in order, and the values of its categorical columns.

One place for the schema: the reader gives the first six (name .. device), fusion.model.build adds the
launching-op, shape and phase columns, fusion.classify adds type and type_route."""

from __future__ import annotations

RECORD_COLUMNS = ("name", "ts", "dur", "correlation", "stream", "device")
"""What a reader gives per kernel event (fusion.loader)."""
LAUNCH_KINDS = ("kernel", "graph", "none", "unrecorded")
"""kernel: an eager runtime launch; graph: a graph launch; none: the trace records launches but none
for this kernel; unrecorded: the trace records no runtime launches at all."""
OP_COLUMNS = ("op", "op_top", "module", "op_call", "thread", "launch")
"""The launching op of each kernel (fusion.model.ops)."""
SHAPE_COLUMNS = ("op_shapes", "op_top_shapes")
"""The shapes the launching op (innermost) and its top-level op recorded: a compact JSON array of their
Input Dims, Input type, Input Strides and Concrete Inputs (fusion.loader.op_args), '' where none."""
PHASE_COLUMNS = ("phase", "step", "phase_source")
"""The phase and step of each kernel (fusion.model.phases)."""
TYPE_COLUMNS = ("type", "type_route")
"""The operation type of each kernel and what decided it (fusion.classify)."""
TYPE_ROUTES = ("name", "op", "unknown")
"""What typed a kernel: its name's rule, its launching op, or nothing (type Other)."""
KERNEL_COLUMNS = (RECORD_COLUMNS[0], *TYPE_COLUMNS, *RECORD_COLUMNS[1:], *OP_COLUMNS, *SHAPE_COLUMNS, *PHASE_COLUMNS)
"""The kernel table of a loaded trace."""
NAME_STATS = ("count", "time_us")
"""Per distinct kernel name in Trace.names, beside its classification: kernel count and total time."""
NAME_FACTS = ("raw_name", "gpu_work")
"""Per distinct kernel name in Trace.names: the name as the file records it (a rocprofv3 symbol before
demangling; the name itself elsewhere) and what GPU work it is (fusion.vocabulary.GPU_WORK)."""
