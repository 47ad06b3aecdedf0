"""End to end: generated pairs scored against their ground truth, and the real cross-vendor pairs."""

import json

import pytest
from builders import shared_trace

from fusion.classify.trace import load
from fusion.comparison.pair import analyze_fusion_differences, compare
from fusion.detect.op_kernels import OP_KERNELS_DETECTOR
from fusion.result import FINDING_KINDS
from fusion.synthetic.pairs import PairSpec, ground_truth, write_pair
from fusion.vocabulary import LAYOUT_ROLE

SCENARIOS = [
    PairSpec(scenario="full_graph", layers=4, steps=4),
    PairSpec(scenario="piecewise", layers=4, steps=4),
    PairSpec(scenario="eager", layers=4, steps=4),
    PairSpec(scenario="full_graph", layers=6, steps=6, steps2=4),
    PairSpec(scenario="piecewise", layers=4, steps=3, steps2=5),
    PairSpec(scenario="eager", layers=4, steps=4, steps2=3, prefill=True),
    PairSpec(scenario="full_graph", layers=4, steps=4, fusions=("sort_chain",), seed=3),
    # Extra steps on one side: their helpers can show no split and must not lower its confidence.
    PairSpec(scenario="eager", layers=4, steps=5, steps2=3, fusions=("sort_chain",)),
    PairSpec(scenario="piecewise", layers=4, steps=3, steps2=5, fusions=(), cases=("split_k_partial",)),
]
CUT_SCENARIOS = [
    # Graph launches cut into pieces at different places on each side: half a step would pair with a whole one.
    PairSpec(
        scenario="full_graph",
        layers=5,
        steps=4,
        steps2=6,
        fusions=("add_rmsnorm", "sort_chain"),
        non_fusion=False,
        seed=32,
        cpu_fill=200,
        cases=("template_rmsnorm", "unknown_attention"),
        group_cuts=True,
    ),
    PairSpec(
        scenario="full_graph",
        layers=5,
        steps=3,
        fusions=("add_rmsnorm", "moe_swiglu", "inductor_silu"),
        seed=17,
        cases=("split_k", "unknown_attention"),
        group_cuts=True,
        piecewise_every=2,
        prep_share=2.0,
    ),
    PairSpec(
        scenario="full_graph",
        layers=5,
        steps=3,
        fusions=("add_rmsnorm", "sort_chain", "inductor_silu"),
        seed=88,
        prefill2=True,
        cpu_fill=200,
        cases=("template_rmsnorm", "split_k_partial"),
        group_cuts=True,
        prep_share=0.5,
    ),
]
REFERENCE_KEYS = {"metadata", "global_counts", "fusion_opportunities", "fusion_mappings"}
MAPPING_FIELDS = {
    "fused_platform",
    "fused_kernel_type",
    "fused_count",
    "unfused_platform",
    "unfused_sequence",
    "unfused_count_per_type",
    "pattern_count",
    "pattern_confidence",
    "evidence",
}
OPPORTUNITY_FIELDS = {
    "kernel_type",
    "trace1_total",
    "trace2_total",
    "trace1_avg_per_group",
    "trace2_avg_per_group",
    "trace1_time_ms",
    "trace2_time_ms",
    "time_ratio",
    "ratio",
    "fused_by",
    "groups_affected",
    "total_groups",
}
METADATA_FIELDS = {
    "trace1_gpu",
    "trace2_gpu",
    "trace1_total_kernels",
    "trace2_total_kernels",
    "trace1_correlation_groups",
    "trace2_correlation_groups",
    "matched_groups",
}


def truth_keys(truth):
    return {(f["fused_trace"], f["fused_kernel_type"], tuple(f["unfused_sequence"])) for f in truth["fusions"]}


@pytest.fixture(scope="module", params=SCENARIOS, ids=lambda s: f"{s.scenario}-{s.steps}-{s.steps2}-{len(s.fusions)}")
def scored(request, tmp_path_factory):
    spec = request.param
    files = write_pair(tmp_path_factory.mktemp("pair"), spec)
    return spec, compare(load(files.trace1), load(files.trace2)), ground_truth(spec)


def test_precision_and_recall_against_ground_truth(scored):
    spec, comparison, truth = scored
    found = {(m.fused_trace, m.fused_kernel_type, tuple(m.unfused_sequence)) for m in comparison.mappings}
    assert found == truth_keys(truth)


def test_non_fusion_differences_not_reported(scored):
    """The extra memset, NCCL vs RCCL and the GEMM library names are no fusion (GEMM only where the truth has one,
    such as split-K)."""
    _, comparison, truth = scored
    reported = {t for m in comparison.mappings for t in m.unfused_sequence} | {
        m.fused_kernel_type for m in comparison.mappings
    }
    reported |= {o.kernel_type for o in comparison.opportunities}
    injected = {t for f in truth["fusions"] for t in (f["fused_kernel_type"], *f["unfused_sequence"])}
    assert not reported & ({"Memset", "Communication", "GEMM"} - injected)
    if spec_has_memset(scored[0]):
        assert any(n.kernel_type == "Memset" and n.side == 1 for n in comparison.one_sided)


def spec_has_memset(spec):
    return spec.non_fusion


def test_full_graph_pairs_match_groups(scored):
    spec, comparison, _ = scored
    if spec.scenario == "full_graph":
        steps2 = spec.steps2 or spec.steps
        assert comparison.metadata["matched_groups"] == min(spec.steps, steps2)
        assert comparison.metadata["realigned_group_pairs"] == 0
        assert len(comparison.unmatched1) == spec.steps - min(spec.steps, steps2)


def test_counts_are_the_generators(scored):
    _, comparison, truth = scored
    for side in (1, 2):
        expected = truth["expected_counts"][f"trace{side}"]
        counts = comparison.type_stats[f"trace{side}_count"]
        assert {t: int(n) for t, n in counts.items() if n} == expected


def test_reference_compatible_strict_dict(scored):
    _, comparison, _ = scored
    result = comparison.to_dict()
    text = json.dumps(result, allow_nan=False)
    assert REFERENCE_KEYS <= set(result) and METADATA_FIELDS <= set(result["metadata"])
    assert all(MAPPING_FIELDS <= set(m) for m in result["fusion_mappings"])
    assert all(OPPORTUNITY_FIELDS <= set(o) for o in result["fusion_opportunities"])
    assert "Infinity" not in text and "NaN" not in text


def test_every_mapping_points_at_its_kernels(scored):
    _, comparison, _ = scored
    for mapping in comparison.mappings:
        assert 0 < len(mapping.evidence_refs) <= comparison.params["max_evidence_refs"]
        ref = mapping.evidence_refs[0]
        fused = comparison.trace(mapping.fused_trace).kernels
        window = ref.window1 if mapping.fused_trace == 1 else ref.window2
        assert fused["type"].iloc[window[0]] == mapping.fused_kernel_type
        table = comparison.alignment(ref.pair_id)
        column = f"index{mapping.fused_trace}"
        assert window[0] in set(table[column])


@pytest.mark.parametrize("spec", CUT_SCENARIOS, ids=lambda s: f"seed{s.seed}")
def test_groups_cut_at_different_places_in_either_order(spec, tmp_path):
    """Pairs of groups that are not the same stretch of work are realigned as a stream: the ground truth is
    found, and swapping the traces mirrors the findings."""
    files = write_pair(tmp_path, spec)
    trace1, trace2 = load(files.trace1), load(files.trace2)
    comparison = compare(trace1, trace2)
    realigned = comparison.metadata["realigned_group_pairs"]
    assert realigned > 0 and any(
        w.startswith(f"{realigned} matched group pairs ran different") for w in comparison.warnings
    )
    found = {(m.fused_trace, m.fused_kernel_type, tuple(m.unfused_sequence)) for m in comparison.mappings}
    swapped = {
        (3 - m.fused_trace, m.fused_kernel_type, tuple(m.unfused_sequence)) for m in compare(trace2, trace1).mappings
    }
    assert found == truth_keys(ground_truth(spec)) == swapped


def test_groups_cut_at_different_places_stay_groups_beyond_the_stream_budget(tmp_path):
    """Realigning is bounded by the stream budget: past it the pairs stay groups, and a warning says so."""
    files = write_pair(tmp_path, CUT_SCENARIOS[0])
    trace1, trace2 = load(files.trace1), load(files.trace2)
    realigned = compare(trace1, trace2)
    kept = compare(trace1, trace2, stream_budget=100)
    cut = realigned.metadata["cut_group_pairs"]
    assert cut > 0 and realigned.metadata["realigned_group_pairs"] == cut
    assert kept.metadata["cut_group_pairs"] == cut and kept.metadata["realigned_group_pairs"] == 0
    assert kept.metadata["matched_groups"] == realigned.metadata["matched_groups"] + cut
    assert any(w.startswith(f"{cut} matched group pairs") and "stay compared as groups" in w for w in kept.warnings)


def test_analyze_fusion_differences_accepts_paths_and_reports_progress(tmp_path):
    files = write_pair(tmp_path, PairSpec(layers=4, steps=2))
    result = analyze_fusion_differences(files.trace1, str(files.trace2))
    assert result["metadata"]["matched_groups"] == 2
    stages = []
    compare(load(files.trace1), load(files.trace2), progress=lambda stage, fraction: stages.append(stage))
    assert [s for i, s in enumerate(stages) if s not in stages[:i]] == ["groups", "match", "align", "detect"]


def test_unknown_threshold_is_an_error(tmp_path):
    files = write_pair(tmp_path, PairSpec(layers=1, steps=1))
    with pytest.raises(TypeError):
        compare(load(files.trace1), load(files.trace2), min_ratoi=3)


@pytest.mark.parametrize("model", ["bert_small", "falconsai_nsfw", "qwen1.5-0.5b", "timesformer"])
def test_real_cross_vendor_pairs(model):
    nvidia, amd = load(shared_trace(f"tl_h100_{model}")), load(shared_trace(f"tl_mi300_{model}"))
    comparison = compare(amd, nvidia)
    result = comparison.to_dict()
    json.dumps(result, allow_nan=False)
    gemm = comparison.type_stats.loc["GEMM"]
    assert 0.5 <= gemm["trace1_count"] / gemm["trace2_count"] <= 2.0
    assert result["metadata"]["trace1_platform"] == "AMD" and result["metadata"]["trace2_platform"] == "NVIDIA"
    assert comparison.metadata["stream_windows"] >= 1


@pytest.mark.parametrize("model", ["bert_small", "falconsai_nsfw", "qwen1.5-0.5b", "timesformer"])
def test_real_pair_mappings_are_covered_and_named(model):
    """Property: a mapping's fused kernel performs every type it replaces (or the rest are its helpers), it names
    kernels of the right types that are in the traces, and every finding has a kind and an op; no layout
    conversion is typed as the convolution it serves."""
    comparison = compare(load(shared_trace(f"tl_mi300_{model}")), load(shared_trace(f"tl_h100_{model}")))
    for m in comparison.mappings:
        fused, unfused = comparison.trace(m.fused_trace).names, comparison.trace(3 - m.fused_trace).names
        assert m.fused_kernel_names and m.unfused_kernel_names
        assert set(m.fused_kernel_names) <= set(fused.index) and set(m.unfused_kernel_names) <= set(unfused.index)
        assert m.kind in FINDING_KINDS and m.op and m.inner_op and m.fused_ops and m.unfused_ops
        kernels = comparison.trace(m.fused_trace).kernels
        named = set(kernels.loc[kernels["name"].isin(m.fused_kernel_names), "type"])
        covered = set(m.unfused_sequence) <= {m.fused_kernel_type, *m.fused_components}
        if m.detector == "split_kernel":
            assert (unfused.loc[m.unfused_kernel_names, "helper"] != "").any()
        elif m.detector == OP_KERNELS_DETECTOR:
            assert set(m.fused_kernel_type.split(" + ")) == named
            assert (m.kind == "fusion") == (" fuses " in m.evidence)
        else:
            assert m.fused_kernel_type in named and covered
    for note in comparison.one_sided:
        assert note.kind in FINDING_KINDS and note.op
    for trace in (comparison.trace1, comparison.trace2):
        layout = trace.names.index[trace.names["helper"] == LAYOUT_ROLE]
        assert set(trace.kernels.loc[trace.kernels["name"].isin(layout), "type"]) <= {"MemCopy"}


@pytest.mark.parametrize(
    "name", ["tl_vllm_decode_full_exec", "tl_xdit_flux_aiter_profile", "tl_vllm_pd_piecewise_exec"]
)
def test_real_graph_trace_against_itself(name):
    trace = load(shared_trace(name))
    comparison = compare(trace, trace, min_group_size=4)
    assert comparison.mappings == [] and comparison.opportunities == []
    assert len(comparison.unmatched1) == len(comparison.unmatched2) == 0
    assert comparison.metadata["matched_groups"] == len(comparison.groups1)
