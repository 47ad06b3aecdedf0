"""Each detector on a crafted pair of traces (built by hand, no files)."""

import math

from fusion.compare import compare
from kernels import layer, make_trace, steps


def mapping_keys(comparison):
    return {(m.detector, m.fused_trace, m.fused_kernel_type, tuple(m.unfused_sequence)) for m in comparison.mappings}


def test_sequence_fusion_named_by_the_fused_kernel():
    c = compare(make_trace(steps(layer(False), 6)), make_trace(steps(layer(True), 6)))
    assert mapping_keys(c) == {("sequence", 2, "RMSNorm", ("Elementwise", "RMSNorm"))}
    m = c.mappings[0]
    assert m.pattern_count == 60 and m.pattern_confidence == 1.0
    ref = m.evidence_refs[0]
    assert c.trace1.kernels["name"].iloc[ref.window1[0]] == "elementwise_add"
    assert c.trace2.kernels["name"].iloc[ref.window2[0]] == "fused_add_rms_norm_kernel"


def test_intra_type_chain_four_sorts_vs_one():
    base = [("topk", "MoE_Routing"), ("gemm", "MoE_GEMM")] * 20
    chain = [("topk", "MoE_Routing")] + [("radix_pass", "Sort")] * 4 + [("gemm", "MoE_GEMM")]
    single = [("topk", "MoE_Routing"), ("cub_sort", "Sort"), ("gemm", "MoE_GEMM")]
    c = compare(make_trace(steps(base + chain * 10, 5)), make_trace(steps(base + single * 10, 5)))
    assert mapping_keys(c) == {("intra_type_chain", 2, "Sort", ("Sort",) * 4)}
    assert c.mappings[0].unfused_count_per_type == {"Sort": 200}


def test_inductor_kernel_with_op_list():
    side1 = [("gemm", "GEMM"), ("triton_poi_fused_add_mul_silu_3", "SwiGLU"), ("norm", "RMSNorm")] * 30
    side2 = [("gemm", "GEMM"), ("silu_and_mul", "SwiGLU"), ("add_kernel", "Elementwise"), ("norm", "RMSNorm")] * 30
    c = compare(make_trace(steps(side1, 4)), make_trace(steps(side2, 4)))
    assert mapping_keys(c) == {("inductor_fusion", 1, "SwiGLU", ("SwiGLU", "Elementwise"))}
    assert "add, mul, silu" in c.mappings[0].evidence


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
    c = compare(make_trace(steps(unfused, 6)), make_trace(steps(fused, 6)), min_pattern_confidence=1.01)
    detectors = {m.detector for m in c.mappings}
    assert detectors == {"group_imbalance"}
    m = c.mappings[0]
    assert m.fused_trace == 2 and m.unfused_sequence == ["Elementwise"] and m.fused_kernel_type == "RMSNorm"


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
    c = compare(make_trace(side1), make_trace(side2))
    assert [o.kernel_type for o in c.opportunities] == ["Softmax", "Sort"]
    assert c.opportunities[0].fused_by == "Trace 2" and c.opportunities[0].ratio == 3.0


def test_comparability_flags_different_workloads():
    c = compare(make_trace(steps(layer(False), 6)), make_trace(steps([("gemm", "GEMM"), ("s", "Sort")] * 40, 6)))
    assert not c.comparability.ok and c.comparability.level == "mismatch"
    same = compare(make_trace(steps(layer(False), 6)), make_trace(steps(layer(True), 6), platform="NVIDIA"))
    assert same.comparability.ok and same.comparability.level == "ok"
