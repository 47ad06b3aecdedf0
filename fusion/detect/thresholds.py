"""Every number the detectors decide with, named after what it means (reference values where it has one)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from fusion.errors import ConfigError


@dataclass(frozen=True)
class Thresholds:
    """Detection thresholds; defaults are the reference analyzer's values where it has one."""

    one_sided_ratio: float = 10.0
    """Per-group count ratio above which a type is significant at any count (one side lacks it)."""
    min_ratio: float = 2.0
    """Count ratio for a fusion opportunity."""
    min_group_total: int = 20
    """Both traces' count of a type in matched groups must exceed this for a ratio-based opportunity."""
    min_global_total: int = 100
    """The same for whole-trace (global) opportunities."""
    min_pattern_count: int = 5
    """A fusion pattern must occur at least this often; a same-type chain, on one pair of aligned kernel names."""
    min_pattern_confidence: float = 0.8
    """Share of the occurrences that could show a pattern which do show it: the aligned (fused kernel,
    counterpart) name pairs for a fusion, the helper kernels' occurrences for a split."""
    partial_ratio: float = 1.3
    """Group-differential imbalance: count ratio in matched groups."""
    min_partial_total: int = 100
    """Group-differential imbalance: minimum count of the type in matched groups (both sides)."""
    min_consistent_pairs: int = 5
    """Group-differential imbalance: pairs in which the difference has the dominant sign."""
    max_fused_run: int = 8
    """Longer runs of one-sided kernels are unmatched stretches (an extra step), not fused kernels."""
    max_evidence_refs: int = 5
    """Evidence references kept per mapping."""
    max_names: int = 5
    """Raw kernel names kept per mapping (fused names; unfused names per type)."""
    stream_budget: int = 20000
    """Kernels per side outside significant groups that are aligned as an eager stream."""
    cover_by_components_score: float = 2.0
    """Score ladder, top: the neighbour's name says it also performs the run's operations (fused components)."""
    cover_by_type_score: float = 1.0
    """Score ladder, middle: the run has the neighbour's own type only (4 sort passes vs 1 sort)."""
    epilogue_bonus: float = 0.1
    """Score ladder, tie-break: the kernel before the run (an epilogue) wins over the one after (a prologue)."""
    kernel_count_band: float = 2.0
    """Comparability: total kernel counts within this factor of each other are unremarkable."""
    op_count_warn_band: float = 1.5
    """Comparability: GEMM or attention counts beyond this factor get a warning."""
    op_count_mismatch_band: float = 3.0
    """Comparability: beyond this factor the traces are probably not the same workload."""
    max_left_out_share: float = 0.1
    """Comparability: a comparison that leaves out more than this share of either side's kernel time (kernels
    without a launch event) is 'warn': its totals and findings cover only the rest."""
    op_min_calls: int = 3
    """Op level: a kernel-count difference must show in at least this many aligned call pairs of the op."""
    op_min_consistency: float = 0.8
    """Op level: share of the op's aligned call pairs that must show the same difference (same kernel types per side).
    A difference every aligned call of its op shows is a finding however few the calls."""
    workload_signal_coverage: float = 0.5
    """Workload identity: a CPU-side signal (modules, op calls) is compared only when it covers this share of both
    traces' kernels; else the next signal (detect.workload)."""
    min_model_similarity: float = 0.5
    """Workload identity: below this overlap of root nn.Module classes the traces run different models (the shared
    cross-vendor pairs: 1.0; two different shared models: at most 0.003)."""
    min_op_call_similarity: float = 0.5
    """Workload identity: below this share of aligned top-level op calls (per step) the traces run different work;
    a same-workload pair whose platforms call different ops for fused work reaches 0.65 (the generated eager
    pair), two different shared models at most 0.05."""
    min_operation_mix_similarity: float = 0.7
    """Workload identity without a CPU side that covers both traces: below this operation-mix similarity (the mean
    of the overlaps of operation amounts and of operation type sets) the traces run different work. Between the
    highest pair of two different shared models (0.58, a recommendation model against FLUX) and the sample pairs
    with four injected fusions (0.92)."""
    min_layer_similarity: float = 0.9
    """Workload identity: below this ratio of module instances (or of attention operations per forward step) the
    traces run models with different layer counts (24 vs 36 layers: 0.67)."""


def threshold_overrides(items: list[str]) -> dict[str, int | float]:
    """`NAME=VALUE` strings as Thresholds keyword arguments, each value of its field's type and positive.

    Raises ConfigError naming the item when a name is not a threshold or a value does not fit it."""
    fields = {f.name: type(f.default) for f in dataclasses.fields(Thresholds)}
    overrides: dict[str, int | float] = {}
    for item in items:
        name, _, text = item.partition("=")
        kind = fields.get(name.strip())
        if kind is None:
            raise ConfigError(f"--threshold {item}: not a threshold; one of {', '.join(fields)}")
        try:
            value = kind(text.strip())
        except ValueError:
            wanted = "a whole number" if kind is int else "a number"
            raise ConfigError(f"--threshold {item}: {name.strip()} takes {wanted}") from None
        if not value > 0:
            raise ConfigError(f"--threshold {item}: must be greater than 0")
        overrides[name.strip()] = value
    return overrides
