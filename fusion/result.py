"""The findings of a comparison as plain data, and the column names of its tables: what every stage from
detect on writes and the CLI, JSON/CSV export and pages read. It imports no stage.

Every number is traceable: opportunities come from per-type counts, mappings carry `evidence_refs` that
point at matched group pairs and global kernel index windows (fusion.comparison.result.Comparison gives
the kernel-by-kernel alignment behind them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

# Columns of the per-type tables (Comparison.type_stats, the group counts, the JSON's type_stats records);
# a side's column is side_column(COUNT, side), e.g. 'trace1_count'.
KERNEL_TYPE = "kernel_type"
COUNT = "count"
TIME_US = "time_us"
TIME_DECIMALS = 3
"""Summed kernel times in findings are rounded to the nanosecond (trace durations are microseconds with three
decimals), so they carry no float noise from the order of summation."""
COUNT_RATIO = "count_ratio"
"""trace1 count / trace2 count; NaN when a side has none."""
TIME_RATIO = "time_ratio"
"""trace1 time / trace2 time; NaN when a side has none."""
ONLY_IN = "only_in"
"""0, or the only side (1 or 2) that has the type."""
GROUPS_AFFECTED = "groups_affected"


def side_column(name: str, side: int) -> str:
    """The column of one side's `name`: side_column(COUNT, 1) == 'trace1_count'."""
    return f"trace{side}_{name}"


# Columns of the op table (Comparison.op_table); per-side columns are side_column(<name>, side), e.g. 'trace1_calls'.
OP = "op"
"""Canonical top-level op (classify.canonical_op of op_top)."""
OP_NAMES = "op_names"
"""The top-level ops as the traces spell them (aten::linear and aten::matmul are both canonical aten::mm)."""
MODULE = "module"
"""nn.Module class path of the call where the trace records it ('Qwen2DecoderLayer/Qwen2MLP/Linear': instance
numbers dropped, so all layers' calls of one op in one kind of module form one row), else ''."""
CALLS = "calls"
KERNELS_PER_CALL = "kernels_per_call"
KERNEL_NAMES = "kernel_names"
"""The side's kernel names of this op, by total time, at most TOP_OP_NAMES."""
TIME_PER_CALL_US = "time_per_call_us"
TIME_GAP_US = "time_gap_us"
"""trace1 time - trace2 time; the table is ranked by its absolute value."""
OP_SIDE_COLUMNS = (CALLS, KERNELS_PER_CALL, KERNEL_NAMES, TIME_US, TIME_PER_CALL_US)
OP_TABLE_COLUMNS = (
    OP,
    OP_NAMES,
    MODULE,
    *(side_column(c, s) for s in (1, 2) for c in OP_SIDE_COLUMNS),
    TIME_RATIO,
    TIME_GAP_US,
)


FUSION, SPLIT, DECOMPOSITION, EXTRA_WORK, ONE_SIDED = "fusion", "split", "decomposition", "extra_work", "one_sided"
FINDING_KINDS: dict[str, str] = {
    FUSION: "one kernel does what the other side does in several",
    SPLIT: "one op's work is split over several kernels of its own type on one side (split-K GEMM + reduce)",
    DECOMPOSITION: "the same op by a different algorithm (im2col + GEMM vs implicit GEMM with layout conversions)",
    EXTRA_WORK: "fills, memsets, copies or layout conversions that only one side runs",
    ONE_SIDED: "kernels with no counterpart on the other side",
}
"""The word for each difference: every finding's `kind` is one of these."""

NO_PAIR = -1
"""EvidenceRef.pair_id of evidence that is no row of Comparison.pairs: op calls, a per-phase comparison's pairs."""


@dataclass(frozen=True)
class EvidenceRef:
    """Where a finding can be seen: a pair and the [start, stop) kernel row ranges on each side.

    `pair_id` indexes Comparison.pairs (NO_PAIR: evidence that is no pair of it); correlation1/2 are -1 for
    stream-window pairs (eager kernels).
    """

    pair_id: int
    correlation1: int
    correlation2: int
    window1: tuple[int, int]
    window2: tuple[int, int]


@dataclass
class Opportunity:
    """A kernel type whose count differs enough between the traces (the reference's fusion_opportunities)."""

    kernel_type: str
    trace1_total: int
    trace2_total: int
    trace1_avg_per_group: float
    trace2_avg_per_group: float
    trace1_time_ms: float
    trace2_time_ms: float
    time_ratio: float | None
    ratio: float | None
    fused_by: str
    fused_trace: int
    groups_affected: int
    total_groups: int
    source: str
    """'groups' (counted in matched group pairs) or 'global' (whole-trace counts)."""
    time_impact_ms: float
    """|trace1_time_ms - trace2_time_ms|: what the ranking uses."""
    only_in: int = 0
    kind: str = FUSION
    """A count difference read as a possible fusion (FINDING_KINDS)."""
    warning: str = ""
    """Why this opportunity is doubtful, shown beside it ('' when the traces look like the same workload): set when
    opportunities of traces that do not look alike were asked for anyway."""


@dataclass
class FusionMapping:
    """One fused kernel on `fused_trace` standing for a sequence of kernels on the other trace."""

    detector: str
    fused_trace: int
    fused_platform: str
    fused_kernel_type: str
    fused_count: int
    unfused_platform: str
    unfused_sequence: list[str]
    unfused_count_per_type: dict[str, int]
    pattern_count: int
    pattern_confidence: float
    evidence: str
    evidence_refs: list[EvidenceRef] = field(default_factory=list)
    pairs_with_pattern: int = 0
    time_saved_us: float = 0.0
    """Time of the unfused side's extra kernels in the observed occurrences."""
    fused_kernel_names: list[str] = field(default_factory=list)
    """Raw names of the fused kernel(s) exactly as in the trace, most frequent first, at most 5."""
    unfused_kernel_names: list[str] = field(default_factory=list)
    """Raw names of the kernels on the other side that it replaces, at most 5 per type."""
    fused_components: list[str] = field(default_factory=list)
    """Operation types the fused kernel performs besides its own type, read from its name."""
    op: str = ""
    """The top-level PyTorch op (op_top) of the cited kernels, as the trace spells it; for an op-level finding the op
    whose calls differ; '' where the trace records no op (graph replays, GPU-only traces)."""
    evidence_source: str = ""
    """Where the finding comes from: 'op_calls', 'groups' or 'windows'."""
    kind: str = ""
    """What the difference is (FINDING_KINDS): fusion, split, decomposition or extra_work."""
    inner_op: str = ""
    """The innermost op of the kernels `op` names (aten::addmm under aten::linear)."""
    fused_ops: list[str] = field(default_factory=list)
    """Launching ops of the cited kernels on the fused trace, 'op_top > op' (or one op when both are the same), most
    kernels first, at most 5."""
    unfused_ops: list[str] = field(default_factory=list)
    """The same on the other trace."""


@dataclass
class OneSidedNote:
    """Kernels on one side only that are not a fusion (no consistent neighbour, or a non-compute type)."""

    side: int
    kernel_type: str
    count: int
    reason: str
    evidence_refs: list[EvidenceRef] = field(default_factory=list)
    kind: str = ONE_SIDED
    """extra_work for non-compute kernels (fills, copies, layout conversions), else one_sided (FINDING_KINDS)."""
    op: str = ""
    """Top-level op of the cited kernels ('' where not recorded)."""
    inner_op: str = ""
    ops: list[str] = field(default_factory=list)
    """Launching ops of the cited kernels, 'op_top > op', most kernels first, at most 5."""
    kernels: list[NoteKernel] = field(default_factory=list)
    """The one-sided kernels by raw name, most time first."""


@dataclass
class NoteKernel:
    """One kernel name of a one-sided note: how many of its kernels the note counts, and their time."""

    name: str
    count: int
    time_us: float


OK, WARN, MISMATCH, NOT_SAME_WORKLOAD = "ok", "warn", "mismatch", "not_same_workload"
COMPARABILITY_LEVELS = (OK, WARN, MISMATCH, NOT_SAME_WORKLOAD)
"""Comparability.level, worst last: not_same_workload when what the traces say they ran differs (detect.workload)."""


@dataclass
class Comparability:
    """Do the two traces look like the same workload? level: one of COMPARABILITY_LEVELS.

    `evidence`: what the workload identity check compared (its similarity figures, checks['workload_similarity'])."""

    ok: bool
    level: str
    warnings: list[str]
    checks: dict[str, Any]
    evidence: list[str] = field(default_factory=list)


def plain(value: Any) -> Any:
    """Recursively turn numpy/pandas scalars, tuples and non-finite floats into strict-JSON Python values."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [plain(v) for v in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if value is None or isinstance(value, str):
        return value
    if value is pd.NA or value is pd.NaT:
        return None
    return str(value)


def field_names(cls: type) -> list[str]:
    """Column order for CSV export of a result dataclass."""
    return [f.name for f in fields(cls)]
