"""Each detector on a crafted pair of traces (built by hand, no files)."""

import math

import numpy as np
import pytest
from kernels import layer, make_trace, steps

from fusion.comparison.pair import compare
from fusion.detect.evidence import _main_positions
from fusion.match.align import FOLDED


def mapping_keys(comparison):
    return {(m.detector, m.fused_trace, m.fused_kernel_type, tuple(m.unfused_sequence)) for m in comparison.mappings}


FUSED_NORM = {"fused_add_rms_norm_kernel": ("Elementwise",)}


def test_sequence_fusion_named_by_the_fused_kernel():
    c = compare(make_trace(steps(layer(False), 6)), make_trace(steps(layer(True), 6), fused=FUSED_NORM))
    assert mapping_keys(c) == {("sequence", 2, "RMSNorm", ("Elementwise", "RMSNorm"))}
    m = c.mappings[0]
    assert m.pattern_count == 60 and m.pattern_confidence == 1.0
    assert m.fused_kernel_names == ["fused_add_rms_norm_kernel"] and m.fused_components == ["Elementwise"]
    assert m.unfused_kernel_names == ["elementwise_add", "rms_norm_kernel"] and m.evidence_source == "groups"
    assert "fused_add_rms_norm_kernel" in m.evidence and "elementwise_add" in m.evidence
    ref = m.evidence_refs[0]
    assert c.trace1.kernels["name"].iloc[ref.window1[0]] == "elementwise_add"
    assert c.trace2.kernels["name"].iloc[ref.window2[0]] == "fused_add_rms_norm_kernel"


def test_a_kernel_that_does_not_cover_the_run_gets_no_fusion():
    """Without a name that says the norm kernel also adds, the extra add is a note, not a fusion."""
    c = compare(make_trace(steps(layer(False), 6)), make_trace(steps(layer(True), 6)))
    assert c.mappings == []
    assert [(n.side, n.kernel_type) for n in c.one_sided] == [(1, "Elementwise")]
    assert "performs" in c.one_sided[0].reason


def test_intra_type_chain_four_sorts_vs_one():
    base = [("topk", "MoE_Routing"), ("gemm", "MoE_GEMM")] * 20
    chain = [("topk", "MoE_Routing")] + [("radix_pass", "Sort")] * 4 + [("gemm", "MoE_GEMM")]
    single = [("topk", "MoE_Routing"), ("cub_sort", "Sort"), ("gemm", "MoE_GEMM")]
    c = compare(make_trace(steps(base + chain * 10, 5)), make_trace(steps(base + single * 10, 5)))
    assert mapping_keys(c) == {("intra_type_chain", 2, "Sort", ("Sort",) * 4)}
    assert c.mappings[0].unfused_count_per_type == {"Sort": 200}


def test_a_same_type_chain_must_repeat_on_the_same_kernels():
    """Two GEMMs against one, ten times: a finding when the same kernels show it each time, a note when every
    time it is another pair of GEMM kernels (different shapes), since no kernel name says one GEMM does two."""

    def pair(tile):
        side1 = [
            k for i in range(10) for k in ((tile(i) + "_a", "GEMM"), (tile(i) + "_b", "GEMM"), ("norm", "RMSNorm"))
        ]
        side2 = [k for i in range(10) for k in ((tile(i) + "_blas", "GEMM"), ("norm", "RMSNorm"))]
        return compare(make_trace(steps(side1, 1, eager=True)), make_trace(steps(side2, 1, eager=True)))

    repeated = pair(lambda i: "gemm")
    assert mapping_keys(repeated) == {("intra_type_chain", 2, "GEMM", ("GEMM", "GEMM"))}
    shapes = pair(lambda i: f"gemm_tile{i}")
    assert shapes.mappings == []
    assert [(n.side, n.kernel_type, n.count) for n in shapes.one_sided] == [(1, "GEMM", 10)]
    assert "no pair of aligned kernel names shows them repeatedly" in shapes.one_sided[0].reason
    assert_note_kernels(shapes, shapes.one_sided[0], {f"gemm_tile{i}_a" for i in range(10)})


def assert_note_kernels(comparison, note, names: set[str]) -> None:
    """A rejected pattern's note named no kernel (issue 38 #14): it lists its one-sided kernels by raw name,
    with counts adding up to the note's and each name's kernel time on its side."""
    assert {k.name for k in note.kernels} == names
    assert sum(k.count for k in note.kernels) == note.count
    kernels = comparison.trace(note.side).kernels
    for k in note.kernels:
        of_name = kernels[kernels["name"] == k.name]
        assert k.time_us == pytest.approx(float(of_name["dur"].sum()) * k.count / len(of_name), abs=1e-3)


def test_a_same_type_chain_between_different_workloads_is_a_note():
    """The same repeated chain, but trace 1 also runs attention and trace 2 none: the comparability check calls
    them different workloads, and an extra GEMM there is different work, not a fusion."""
    side1 = [("attn", "Attention")] * 10 + [("gemm_a", "GEMM"), ("gemm_b", "GEMM"), ("norm", "RMSNorm")] * 10
    side2 = [("gemm_blas", "GEMM"), ("norm", "RMSNorm")] * 10
    c = compare(make_trace(steps(side1, 1, eager=True)), make_trace(steps(side2, 1, eager=True)))
    assert c.comparability.level == "mismatch" and c.mappings == []
    other_work = (
        "one-sided; extra kernels of the neighbour's own type, in traces that do not look like the same"
        " workload (see comparability): different work, not reported as a fusion"
    )
    assert [(n.side, n.kernel_type, n.count) for n in c.one_sided if n.reason == other_work] == [(1, "GEMM", 9)]
    assert_note_kernels(c, next(n for n in c.one_sided if n.reason == other_work), {"gemm_a"})


def test_a_kernel_whose_name_says_it_does_one_operation_fuses_nothing():
    """Trace 1 runs a multiply and an add where trace 2 runs only the add. A generic elementwise kernel may have
    done both (a chain); an ATen add functor kernel says it adds and nothing else: the multiply is a note."""
    add = "vectorized_elementwise_kernel<4, CUDAFunctor_add<float>>"
    side1 = [("gemm", "GEMM"), ("mul_kernel", "Elementwise"), (add, "Elementwise"), ("norm", "RMSNorm")] * 10
    side2 = [("gemm", "GEMM"), (add, "Elementwise"), ("norm", "RMSNorm")] * 10
    generic = compare(make_trace(steps(side1, 4)), make_trace(steps(side2, 4)))
    assert mapping_keys(generic) == {("intra_type_chain", 2, "Elementwise", ("Elementwise", "Elementwise"))}
    single = compare(
        make_trace(steps(side1, 4), single_op=frozenset({add})), make_trace(steps(side2, 4), single_op=frozenset({add}))
    )
    assert single.mappings == []
    assert [(n.side, n.kernel_type, n.count) for n in single.one_sided] == [(1, "Elementwise", 40)]
    assert "no neighbouring kernel on the other side performs its operations" in single.one_sided[0].reason


def test_an_epilogue_is_found_when_an_unrelated_kernel_follows_it():
    """Trace 2 runs the add after its SwiGLU and then an extra GEMM; trace 1's SwiGLU kernel says it also adds.
    The add is the SwiGLU kernel's epilogue; the GEMM, which no neighbour performs, stays a one-sided note."""
    side1 = [("gemm", "GEMM"), ("silu_mul_add", "SwiGLU"), ("norm", "RMSNorm")] * 10
    side2 = [
        ("gemm", "GEMM"),
        ("silu_and_mul", "SwiGLU"),
        ("add", "Elementwise"),
        ("gemm_extra", "GEMM"),
        ("norm", "RMSNorm"),
    ] * 10
    c = compare(make_trace(steps(side1, 4), fused={"silu_mul_add": ("Elementwise",)}), make_trace(steps(side2, 4)))
    assert mapping_keys(c) == {("sequence", 1, "SwiGLU", ("SwiGLU", "Elementwise"))}
    assert c.mappings[0].pattern_count == 40 and c.mappings[0].unfused_kernel_names == ["silu_and_mul", "add"]
    assert [(n.side, n.kernel_type, n.count) for n in c.one_sided] == [(2, "GEMM", 40)]


def test_inductor_kernel_with_op_list():
    inductor = "triton_poi_fused_add_mul_silu_3"
    side1 = [("gemm", "GEMM"), (inductor, "SwiGLU"), ("norm", "RMSNorm")] * 30
    side2 = [("gemm", "GEMM"), ("silu_and_mul", "SwiGLU"), ("add_kernel", "Elementwise"), ("norm", "RMSNorm")] * 30
    c = compare(make_trace(steps(side1, 4), fused={inductor: ("Elementwise",)}), make_trace(steps(side2, 4)))
    assert mapping_keys(c) == {("inductor_fusion", 1, "SwiGLU", ("SwiGLU", "Elementwise"))}
    assert "add, mul, silu" in c.mappings[0].evidence
    assert c.mappings[0].unfused_kernel_names == ["silu_and_mul", "add_kernel"]


def test_name_differences_at_equal_count_are_not_fusion():
    side1 = [("Cijk_gemm", "GEMM"), ("rccl_generic", "Communication"), ("norm", "RMSNorm")] * 30
    side2 = [("nvjet_gemm", "GEMM"), ("nccl_allreduce", "Communication"), ("norm", "RMSNorm")] * 30
    c = compare(make_trace(steps(side1, 4)), make_trace(steps(side2, 4)))
    assert c.mappings == [] and c.opportunities == [] and c.one_sided == []


def test_extra_memset_is_a_note_not_a_fusion():
    body = [("gemm", "GEMM"), ("norm", "RMSNorm")] * 30
    c = compare(make_trace(steps([("fill", "Memset")] + body, 4)), make_trace(steps(body, 4)))
    assert c.mappings == [] and c.opportunities == []
    assert [(n.side, n.kernel_type, n.count) for n in c.one_sided] == [(1, "Memset", 4)]


def test_inconsistent_one_sided_kernel_is_not_fusion():
    body = [("gemm", "GEMM"), ("norm", "RMSNorm")] * 30
    odd = list(body)
    odd.insert(7, ("copy_like", "Elementwise"))
    c = compare(make_trace(steps(odd, 4)), make_trace(steps(body, 4)))
    assert c.mappings == []
    assert {(n.side, n.kernel_type) for n in c.one_sided} == {(1, "Elementwise")}


def test_group_imbalance_names_target_from_alignment():
    """Extra Elementwise kernels spread over different neighbours: no single sequence, one imbalance."""
    fused = [("gemm", "GEMM"), ("norm", "RMSNorm"), ("attn", "Attention")] * 40
    unfused = []
    for i, kernel in enumerate(fused):
        unfused.append(kernel)
        if i % 3 == 1 and i % 2 == 0:
            unfused.append(("ew_before", "Elementwise"))
    covering = {"norm": ("Elementwise",)}
    c = compare(make_trace(steps(unfused, 6)), make_trace(steps(fused, 6), fused=covering), min_pattern_confidence=1.01)
    detectors = {m.detector for m in c.mappings}
    assert detectors == {"group_imbalance"}
    m = c.mappings[0]
    assert m.fused_trace == 2 and m.unfused_sequence == ["Elementwise"] and m.fused_kernel_type == "RMSNorm"
    assert m.fused_kernel_names == ["norm"] and m.unfused_kernel_names == ["ew_before"]
    no_cover = compare(make_trace(steps(unfused, 6)), make_trace(steps(fused, 6)), min_pattern_confidence=1.01)
    assert no_cover.mappings == []


def test_global_counts_one_sided_type_has_null_ratio():
    c = compare(make_trace(steps(layer(False), 6)), make_trace(steps(layer(True), 6)))
    counts = c.to_dict()["global_counts"]
    assert counts["GEMM"]["ratio"] == 1.0
    only = c.type_stats.loc["Elementwise"]
    assert only["only_in"] == 1 and math.isnan(only["count_ratio"])
    assert counts["Elementwise"] == {"trace1_count": 60, "trace2_count": 0, "ratio": None, "only_in": 1}


def test_opportunities_ranked_by_time_impact():
    side1 = [("a", "Sort", 1.0, 1)] * 300 + [("b", "Softmax", 50.0, 1)] * 90
    side2 = [("a", "Sort", 1.0, 2)] * 100 + [("b", "Softmax", 50.0, 2)] * 30
    c = compare(make_trace(side1), make_trace(side2), opportunities_on_mismatch=True)
    assert [o.kernel_type for o in c.opportunities] == ["Softmax", "Sort"]
    assert c.opportunities[0].fused_by == "Trace 2" and c.opportunities[0].ratio == 3.0


def test_opportunities_of_a_mismatch_are_withheld_unless_asked_and_then_carry_the_warning():
    """Counts three times apart and groups that match nothing: count-based opportunities are doubtful."""
    side1 = [("a", "Sort", 1.0, 1)] * 300 + [("b", "Softmax", 50.0, 1)] * 90
    side2 = [("a", "Sort", 1.0, 2)] * 100 + [("b", "Softmax", 50.0, 2)] * 30
    withheld = compare(make_trace(side1), make_trace(side2))
    assert withheld.comparability.level == "mismatch" and withheld.opportunities == []
    shown = compare(make_trace(side1), make_trace(side2), opportunities_on_mismatch=True)
    assert len(shown.opportunities) == 2
    assert all("compositions differ too much" in o.warning for o in shown.opportunities)
    assert shown.params["opportunities_on_mismatch"] is True


def test_comparability_flags_different_workloads():
    c = compare(make_trace(steps(layer(False), 6)), make_trace(steps([("gemm", "GEMM"), ("s", "Sort")] * 40, 6)))
    assert not c.comparability.ok and c.comparability.level == "not_same_workload"
    assert c.comparability.checks["workload_signal"] == "operation mix"
    assert c.comparability.checks["workload_similarity"] < 0.5
    assert any("attention kernel counts differ too much" in w for w in c.comparability.warnings)
    assert c.mappings == [] and c.opportunities == [] and c.one_sided == []
    same = compare(make_trace(steps(layer(False), 6)), make_trace(steps(layer(True), 6), platform="NVIDIA"))
    assert same.comparability.ok and same.comparability.level == "ok"


def _moe_layer(experts: str, expert_type: str) -> list[tuple[str, str]]:
    """A layer whose MLP runs as `experts` kernels of `expert_type` (2 per layer)."""
    return [(k, t) for k, t in layer(False, layers=10) if t != "GEMM" or k in ("gemm_qkv", "gemm_o")] + [
        (experts, expert_type)
    ] * 20


def test_comparability_warns_when_only_one_trace_runs_expert_gemms():
    dense = make_trace(steps(layer(False), 4))
    moe = make_trace(steps(_moe_layer("fused_moe_kernel", "MoE_GEMM"), 4), platform="NVIDIA")
    warnings = compare(dense, moe).comparability.warnings
    assert any("MoE expert GEMM kernels run on one trace only (0 vs 80)" in w for w in warnings)
    unknown = make_trace(steps(_moe_layer("expert_kernel", "Other"), 4))
    assert not any("one trace only" in w for w in compare(unknown, moe).comparability.warnings), (
        "the other side's unclassified kernels could be its expert GEMMs"
    )
    assert not any("one trace only" in w for w in compare(moe, moe).comparability.warnings)


SPLIT_K = {"splitKreduce_kernel": "split_k_reduce"}


def test_split_k_is_a_split_not_a_one_sided_gemm():
    """GEMM + splitKreduce vs one GEMM: the GEMMs align, the reduce is the GEMM's second kernel."""
    one = [("Cijk_gemm", "GEMM"), ("add", "Elementwise"), ("norm", "RMSNorm")] * 20
    two = [("cutlass_gemm", "GEMM"), ("splitKreduce_kernel", "GEMM"), ("add", "Elementwise"), ("norm", "RMSNorm")] * 20
    c = compare(make_trace(steps(one, 4)), make_trace(steps(two, 4), platform="NVIDIA", helpers=SPLIT_K))
    assert mapping_keys(c) == {("split_kernel", 1, "GEMM", ("GEMM", "GEMM"))}
    m = c.mappings[0]
    assert m.pattern_count == 80 and m.pattern_confidence == 1.0 and m.fused_components == []
    assert m.fused_kernel_names == ["Cijk_gemm"] and m.unfused_kernel_names == ["cutlass_gemm", "splitKreduce_kernel"]
    assert m.time_saved_us == 80 * 5.0, "the helpers' own time"
    assert "as 2 kernels (split_k_reduce: cutlass_gemm, splitKreduce_kernel)" in m.evidence
    assert c.one_sided == [] and c.comparability.level == "ok"
    table = c.alignment(0)
    reduce_row = table[table["name2"] == "splitKreduce_kernel"].iloc[0]
    assert reduce_row["op"] == "only2"


def test_split_on_some_calls_of_a_kernel_that_serves_many_shapes():
    """One AMD name for every GEMM; the reduce follows only one shape's GEMM: confidence over the reduces."""
    one = [("Cijk_any_shape", "GEMM"), ("add", "Elementwise")] * 30
    two = []
    for i in range(30):
        two += [("cutlass_a", "GEMM"), ("splitKreduce_kernel", "GEMM")] if i % 3 == 0 else [("cutlass_b", "GEMM")]
        two.append(("add", "Elementwise"))
    c = compare(make_trace(steps(one, 3)), make_trace(steps(two, 3), helpers=SPLIT_K))
    assert mapping_keys(c) == {("split_kernel", 1, "GEMM", ("GEMM", "GEMM"))}
    m = c.mappings[0]
    assert m.pattern_count == 30 and m.pattern_confidence == 1.0
    assert m.unfused_kernel_names == ["cutlass_a", "splitKreduce_kernel"]


def test_one_sided_norm_is_not_fused_into_a_communication_kernel():
    one = [("gemm", "GEMM"), ("allreduce", "Communication"), ("norm", "RMSNorm"), ("attn", "Attention")] * 20
    two = [("gemm", "GEMM"), ("allreduce", "Communication"), ("attn", "Attention")] * 20
    c = compare(make_trace(steps(one, 6)), make_trace(steps(two, 6)))
    assert c.mappings == []
    assert [(n.side, n.kernel_type, n.count) for n in c.one_sided] == [(1, "RMSNorm", 120)]


def test_groups_that_straddle_the_threshold_are_matched():
    """60 kernels per step on one side, 45 on the fused side, min_group_size 50: every step differs the same way."""
    fused = [("gemm", "GEMM"), ("fused_add_rms_norm_kernel", "RMSNorm"), ("attn", "Attention")] * 15
    unfused = [
        ("gemm", "GEMM"),
        ("elementwise_add", "Elementwise"),
        ("rms_norm_kernel", "RMSNorm"),
        ("attn", "Attention"),
    ] * 15
    c = compare(make_trace(steps(unfused, 6)), make_trace(steps(fused, 6), fused=FUSED_NORM))
    assert c.metadata["matched_groups"] == 6
    assert c.metadata["trace1_correlation_groups"] == 6 and c.metadata["trace2_correlation_groups"] == 0
    assert list(c.groups2["significant"]) == [False] * 6
    assert mapping_keys(c) == {("sequence", 2, "RMSNorm", ("Elementwise", "RMSNorm"))}
    assert c.mappings[0].pattern_count == 90


def test_groups_both_below_the_threshold_are_not_matched():
    step = [("gemm", "GEMM"), ("norm", "RMSNorm"), ("attn", "Attention")] * 15
    c = compare(make_trace(steps(step, 4)), make_trace(steps(step, 4)))
    assert c.metadata["matched_groups"] == 0 and c.metadata["stream_windows"] >= 1


def test_every_call_one_extra_helper_in_eager_windows():
    """GEMM + add vs GEMM + splitKreduce + add in every call: a split, the adds one to one, nothing else."""
    one = steps([("Cijk_gemm", "GEMM"), ("add", "Elementwise")] * 50, 1, eager=True)
    two = steps([("cutlass_gemm", "GEMM"), ("splitKreduce_kernel", "GEMM"), ("add", "Elementwise")] * 50, 1, eager=True)
    c = compare(make_trace(one), make_trace(two, helpers=SPLIT_K))
    assert mapping_keys(c) == {("split_kernel", 1, "GEMM", ("GEMM", "GEMM"))}
    assert c.mappings[0].pattern_count == 50 and c.mappings[0].evidence_source == "windows"
    assert c.one_sided == []


def test_unknown_attention_names_do_not_break_comparability():
    one = [("gemm", "GEMM"), ("unified_attention", "Attention"), ("norm", "RMSNorm")] * 38
    two = [("gemm", "GEMM"), ("sage_fwd", "Other"), ("norm", "RMSNorm")] * 38
    c = compare(make_trace(steps(one, 6)), make_trace(steps(two, 6)))
    assert c.comparability.ok and c.comparability.level == "warn"
    assert any("no rule" in w for w in c.comparability.warnings)
    assert c.opportunities == [] and c.mappings == []


def test_split_counts_the_kernels_of_the_operation_on_both_sides():
    """GEMM + 2 reduces vs GEMM + 1 reduce: 3 kernels against 2, not 2 against 1."""
    one = [("Cijk_gemm", "GEMM"), ("PostGSU", "GEMM"), ("add", "Elementwise")] * 20
    two = [
        ("cutlass_gemm", "GEMM"),
        ("splitKreduce_kernel", "GEMM"),
        ("splitKreduce_kernel", "GEMM"),
        ("add", "Elementwise"),
    ] * 20
    c = compare(
        make_trace(steps(one, 4), helpers={"PostGSU": "split_k_reduce"}),
        make_trace(steps(two, 4), platform="NVIDIA", helpers=SPLIT_K),
    )
    assert mapping_keys(c) == {("split_kernel", 1, "GEMM", ("GEMM", "GEMM", "GEMM"))}
    assert "as 3 kernels" in c.mappings[0].evidence and "as 2 (Cijk_gemm" in c.mappings[0].evidence


def test_a_rare_split_is_a_note_with_its_reason():
    one = [("Cijk_gemm", "GEMM"), ("add", "Elementwise")] * 30
    two = [("cutlass_gemm", "GEMM"), ("add", "Elementwise")] * 29 + [
        ("cutlass_gemm", "GEMM"),
        ("splitKreduce_kernel", "GEMM"),
        ("add", "Elementwise"),
    ]
    c = compare(make_trace(steps(one, 2)), make_trace(steps(two, 2), platform="NVIDIA", helpers=SPLIT_K))
    assert c.mappings == []
    assert [(n.side, n.kernel_type, n.count) for n in c.one_sided] == [(2, "GEMM", 2)]
    assert "too rarely" in c.one_sided[0].reason
    assert_note_kernels(c, c.one_sided[0], {"splitKreduce_kernel"})


def epilogue_pair(fused_names):
    """An extra Elementwise kernel between two GEMMs on trace 1; on trace 2 the GEMMs named in `fused_names`
    say they also perform Elementwise."""
    side1 = [("gemm_a", "GEMM"), ("add_kernel", "Elementwise"), ("gemm_b", "GEMM"), ("norm", "RMSNorm")] * 20
    side2 = [("gemm_a_epi", "GEMM"), ("gemm_b_epi", "GEMM"), ("norm", "RMSNorm")] * 20
    return compare(
        make_trace(steps(side1, 4)), make_trace(steps(side2, 4), fused={n: ("Elementwise",) for n in fused_names})
    )


def test_a_run_between_two_covering_kernels_is_credited_to_the_one_before():
    c = epilogue_pair(["gemm_a_epi", "gemm_b_epi"])
    assert mapping_keys(c) == {("sequence", 2, "GEMM", ("GEMM", "Elementwise"))}
    assert c.mappings[0].fused_kernel_names == ["gemm_a_epi"]
    assert c.mappings[0].unfused_kernel_names == ["gemm_a", "add_kernel"]


def test_a_run_is_credited_to_the_kernel_after_it_when_only_that_one_covers_it():
    c = epilogue_pair(["gemm_b_epi"])
    assert mapping_keys(c) == {("sequence", 2, "GEMM", ("Elementwise", "GEMM"))}
    assert c.mappings[0].fused_kernel_names == ["gemm_b_epi"]


def test_a_long_run_of_one_sided_kernels_is_a_stretch_not_a_fusion():
    """More than max_fused_run kernels in a row with no counterpart: notes, even next to a covering kernel."""
    body = [("gemm", "GEMM"), ("norm", "RMSNorm")] * 30
    extra = [("add_kernel", "Elementwise")] * 9
    c = compare(
        make_trace(steps(body[:10] + extra + body[10:], 4)),
        make_trace(steps(body, 4), fused={"gemm": ("Elementwise",)}),
        max_fused_run=8,
    )
    assert c.mappings == []
    assert [(n.side, n.kernel_type, n.count) for n in c.one_sided] == [(1, "Elementwise", 36)]
    assert "long stretch" in c.one_sided[0].reason
    longer = compare(
        make_trace(steps(body[:10] + extra + body[10:], 4)),
        make_trace(steps(body, 4), fused={"gemm": ("Elementwise",)}),
        max_fused_run=9,
    )
    assert not any("long stretch" in n.reason for n in longer.one_sided)


def test_each_folded_helper_belongs_to_the_nearest_kernel_of_its_type_before_it_else_after_it():
    """_main_positions on columns agrees with walking from each folded helper to the nearest unfolded kernel of
    its segment (the walk puts all segments end to end; no helper belongs to a kernel of another segment)."""

    def walked(codes, segment):
        kinds, folded = codes & (FOLDED - 1), (codes & FOLDED) != 0
        out = []
        for p in range(len(codes)):
            mine = [q for q in range(len(codes)) if segment[q] == segment[p]]
            before = next((q for q in reversed(mine) if q < p and not folded[q]), -1) if folded[p] else -1
            after = next((q for q in mine if q > p and not folded[q]), -1) if folded[p] else -1
            out.append(
                before
                if before >= 0 and kinds[before] == kinds[p]
                else after
                if after >= 0 and kinds[after] == kinds[p]
                else -1
            )
        return out

    rng = np.random.default_rng(7)
    for _ in range(300):
        length = int(rng.integers(0, 12))
        codes = rng.integers(0, 3, length) | np.where(rng.random(length) < 0.5, FOLDED, 0)
        segment = np.sort(rng.integers(0, 3, length))
        assert _main_positions(codes, segment).tolist() == walked(codes, segment)


def test_a_note_cites_only_its_own_kernels_when_it_has_fewer_than_the_refs_allowed():
    """A note's evidence refs (up to max_evidence_refs) point at kernels of its side and type only: a note with
    fewer kernels than refs allowed takes none of the next note's."""
    body = [("gemm", "GEMM"), ("norm", "RMSNorm")] * 30
    odd = list(body)
    odd.insert(7, ("copy_like", "Elementwise"))
    traces = {1: make_trace(steps([("fill", "Memset")] + body, 4)), 2: make_trace(steps(odd, 4))}
    c = compare(traces[1], traces[2])
    assert {(n.side, n.kernel_type) for n in c.one_sided} == {(1, "Memset"), (2, "Elementwise")}
    for note in c.one_sided:
        assert note.evidence_refs
        for ref in note.evidence_refs:
            own, other = (ref.window1, ref.window2) if note.side == 1 else (ref.window2, ref.window1)
            trace = traces[note.side]
            names = trace.kernels["name"].iloc[own[0] : own[1]].astype(str)
            assert other == (-1, -1) and set(trace.names.loc[names, "type"]) == {note.kernel_type}
