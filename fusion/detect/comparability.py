"""Do both traces look like the same workload? What they say they ran (detect.workload) first, then totals, GEMM and
attention operations, steps."""

from __future__ import annotations

import numpy as np

from fusion.detect.evidence import Side
from fusion.detect.opportunities import unknown_could_hide
from fusion.detect.thresholds import Thresholds
from fusion.detect.workload import WorkloadIdentity
from fusion.match.align import UNKNOWN_TYPE
from fusion.match.pair_checks import pair_warnings
from fusion.model.ops import LeftOut
from fusion.model.phases import recorded_steps
from fusion.result import MISMATCH, NOT_SAME_WORKLOAD, OK, WARN, Comparability

CHECKED_OPERATIONS = (("GEMM", ("GEMM", "MoE_GEMM")), ("attention", ("Attention",)))
"""Operations whose counts tell a workload apart: label and the types counted."""
ONE_SIDED_OPERATIONS = (
    ("MoE expert GEMM", "MoE_GEMM", "experts run as plain GEMMs"),
    ("convolution", "Convolution", "convolutions run as GEMMs"),
)
"""Operations that no fusion removes: (label, type, the same-workload reading) for a warning when only one
trace runs them. Counted within CHECKED_OPERATIONS' GEMM too, where an MoE model's experts hide among its GEMMs."""


def comparability(
    sides: tuple[Side, Side],
    types: list[str],
    groups: tuple[int, int],
    matched: int,
    attention_per_pair: tuple[float, float] | None,
    limits: Thresholds,
    identity: WorkloadIdentity | None = None,
    left_out: tuple[LeftOut, LeftOut] = (LeftOut(), LeftOut()),
) -> Comparability:
    """Operations are counted without helper kernels (a split-K reduce is part of its GEMM); `left_out` is what
    the comparison dropped from each trace before these sides were built.

    When both traces record steps and their numbers differ, counts are compared per step: four
    prefill steps against one are the same workload captured longer, not a different one. `identity` (what the
    traces say they ran, detect.workload) decides not_same_workload before any count; its figures are in
    checks['workload_similarity'] and its evidence in `evidence`."""
    identity = identity or WorkloadIdentity()
    deciding = identity.deciding
    warnings: list[str] = []
    if not identity.same and deciding:
        warnings.append(
            f"not the same workload: {deciding.evidence}, below {deciding.threshold:.0%}; no fusion finding is"
            " reported, and the type and op tables compare different workloads"
        )
    steps = tuple(recorded_steps(side.trace.kernels) for side in sides)
    per_step = all(steps) and steps[0] != steps[1]
    divisors = steps if per_step else (1, 1)
    if per_step:
        warnings.append(
            f"step counts differ ({steps[0]} vs {steps[1]}): kernel counts are compared per step,"
            " and fusion opportunities only within matched groups, not over the whole traces"
        )
    checks: dict[str, object] = {"steps1": steps[0], "steps2": steps[1], "per_step": per_step}
    totals = (len(sides[0].codes), len(sides[1].codes))
    checks["kernel_ratio"] = _safe_ratio(*_scaled(totals, divisors))
    band = limits.kernel_count_band
    if checks["kernel_ratio"] is not None and not 1 / band <= checks["kernel_ratio"] <= band:
        warnings.append(f"total kernel counts differ {checks['kernel_ratio']:.2f}x ({_counts(totals, divisors)})")
    per_type = [_operations_per_type(side, len(types)) for side in sides]
    unknown = tuple(_operations(c, types, (UNKNOWN_TYPE,)) for c in per_type)
    reasons = []
    for label, members in CHECKED_OPERATIONS:
        counts = tuple(_operations(c, types, members) for c in per_type)
        checks[f"{label}_ratio"] = _safe_ratio(*_scaled(counts, divisors))
        problem, is_severe = _operation_check(label, counts, unknown, divisors, limits)
        warnings += [problem] if problem else []
        reasons += [problem] if is_severe else []
    warnings += _one_sided_warnings(per_type, types, unknown)
    group_problems = _group_warnings(groups, matched, attention_per_pair)
    warnings += group_problems
    if min(groups) > 0 and matched == 0:
        reasons += group_problems[:1]
    warnings += pair_warnings(sides[0].trace, sides[1].trace)
    warnings += _left_out_warnings(left_out, limits.max_left_out_share)
    checks.update(left_out_share1=left_out[0].share, left_out_share2=left_out[1].share)
    checks.update(groups1=groups[0], groups2=groups[1], matched_groups=matched, mismatch_reasons=reasons)
    checks.update(identity.checks())
    level = _level(identity.same, bool(reasons), bool(warnings))
    return Comparability(
        ok=identity.same and not reasons,
        level=level,
        warnings=warnings,
        checks=checks,
        evidence=[s.evidence for s in identity.signals],
    )


def _level(same_workload: bool, severe: bool, warned: bool) -> str:
    if not same_workload:
        return NOT_SAME_WORKLOAD
    return MISMATCH if severe else (WARN if warned else OK)


def _scaled(counts: tuple[int, int], divisors: tuple[int, int]) -> tuple[float, float]:
    return counts[0] / divisors[0], counts[1] / divisors[1]


def _counts(counts: tuple[int, int], divisors: tuple[int, int]) -> str:
    """'100 vs 25', or per step when the step counts differ: '25 vs 25 per step; 100 vs 25 in 4 vs 1 steps'."""
    if divisors == (1, 1):
        return f"{counts[0]} vs {counts[1]}"
    scaled = _scaled(counts, divisors)
    return (
        f"{scaled[0]:.4g} vs {scaled[1]:.4g} per step; {counts[0]} vs {counts[1]} in"
        f" {divisors[0]} vs {divisors[1]} steps"
    )


def _operations_per_type(side: Side, n_types: int) -> np.ndarray:
    """Per type code: kernels that are not helpers, i.e. operations."""
    return side.type_counts(n_types, ~side.helper_names)


def _operations(per_type: np.ndarray, types: list[str], members: tuple[str, ...]) -> int:
    """The number of operations of these types."""
    return int(sum(per_type[types.index(t)] for t in members if t in types))


def _operation_check(
    label: str, counts: tuple[int, int], unknown: tuple[int, int], divisors: tuple[int, int], limits: Thresholds
) -> tuple[str, bool]:
    """(warning or '', severe?) for one operation's counts on both sides, per step when `divisors` are steps."""
    if counts == (0, 0):
        return "", False
    ratio = _safe_ratio(*_scaled(counts, divisors))
    severe_band, warn_band = limits.op_count_mismatch_band, limits.op_count_warn_band
    if ratio is not None and 1 / warn_band <= ratio <= warn_band:
        return "", False
    shown = _counts(counts, divisors)
    if divisors == (1, 1) and unknown_could_hide(*counts, unknown):
        return (
            f"{label} kernel counts differ ({shown}), but the side with fewer has as many"
            f" more unclassified kernels ({unknown[0]} vs {unknown[1]}): some may be {label} kernels no rule"
            " knows"
        ), False
    if ratio is None or not 1 / severe_band <= ratio <= severe_band:
        return f"{label} kernel counts differ too much ({shown}): probably not the same workload", True
    return f"{label} kernel counts differ {ratio:.2f}x ({shown}): different step counts or shapes?", False


def _one_sided_warnings(per_type: list[np.ndarray], types: list[str], unknown: tuple[int, int]) -> list[str]:
    """A warning per ONE_SIDED_OPERATIONS type that one trace runs and the other does not, unless the other's
    extra unclassified kernels could be them."""
    out = []
    for label, kernel_type, reading in ONE_SIDED_OPERATIONS:
        counts = tuple(_operations(c, types, (kernel_type,)) for c in per_type)
        if min(counts) == 0 < max(counts) and not unknown_could_hide(*counts, unknown):
            out.append(
                f"{label} kernels run on one trace only ({counts[0]} vs {counts[1]}): different models,"
                f" or {reading} on one side?"
            )
    return out


def _group_warnings(groups: tuple[int, int], matched: int, attention_per_pair: tuple[float, float] | None) -> list[str]:
    g1, g2 = groups
    out = []
    if (g1 == 0) != (g2 == 0):
        out.append(
            f"only one trace has significant groups ({g1} vs {g2}): graph launches on one side, eager on the other"
        )
    elif g1 and g2 and matched == 0:
        out.append(f"no group of {g1} and {g2} significant groups matched: compositions differ too much")
    elif g1 != g2:
        out.append(
            f"significant group (step) counts differ: {g1} vs {g2}; counts are compared over the {matched} matched pairs"
        )
    if attention_per_pair and attention_per_pair[0] != attention_per_pair[1]:
        out.append(
            f"attention kernels per matched group differ ({attention_per_pair[0]:g} vs {attention_per_pair[1]:g}):"
            " different layer counts?"
        )
    return out


def _left_out_warnings(left_out: tuple[LeftOut, LeftOut], limit: float) -> list[str]:
    """One warning when either side's left-out share of kernel time exceeds `limit`."""
    if max(side.share for side in left_out) <= limit:
        return []
    first, second = left_out
    return [
        f"{first.share:.0%} of trace 1's kernel time and {second.share:.0%} of trace 2's"
        f" ({first.kernels:,} and {second.kernels:,} kernels, {first.time_us / 1e3:,.1f} and"
        f" {second.time_us / 1e3:,.1f} ms) are left out of the comparison, more than the {limit:.0%} allowed"
        " (max_left_out_share): they have no runtime launch event (launched before the profiled CPU window"
        " opened, the partial tail of a step, or not recorded), so totals and findings cover only the rest;"
        " --keep-unlaunched (the dashboard's 'Keep kernels without a launch event') keeps them"
    ]


def _safe_ratio(a: float, b: float) -> float | None:
    return a / b if a > 0 and b > 0 else None
