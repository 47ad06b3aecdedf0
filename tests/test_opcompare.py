"""Op-level comparison: aligned op calls, kernel-count findings named by their op, and the op table."""

from __future__ import annotations

import csv
import io

import numpy as np
import pandas as pd
import pytest

from builders import shared_trace
from fusion import report
from fusion.classify import canonical_op
from fusion.opcompare import (
    CALLS,
    KERNEL_NAMES,
    KERNELS_PER_CALL,
    OP,
    OP_NAMES,
    OP_CALLS_SOURCE,
    OP_EVIDENCE_PAIR,
    OP_KERNELS_DETECTOR,
    OP_TABLE_COLUMNS,
    TIME_GAP_US,
    TIME_RATIO,
    TIME_US,
    OpThresholds,
    compare_ops,
    side_column,
)
from fusion.trace import load
from kernels import make_trace

Call = tuple[str, list[tuple[str, str, float]]]
"""(top-level op, [(kernel name, type, dur_us)]) of one op call."""

LN_AMD = [("RowwiseMomentsCUDAKernel<float>", "LayerNorm", 4.0), ("LayerNormForwardCUDAKernel<float>", "LayerNorm", 6.0)]
LN_NV = [("vectorized_layer_norm_kernel<float>", "LayerNorm", 7.0)]
SDPA_AMD = [("FillFunctor<int>", "Memset", 1.0), ("attn_fwd", "Attention", 30.0)]
SDPA_NV = [("flash_fwd_kernel<Flash_fwd_kernel_traits>", "Attention", 25.0)]
LINEAR_AMD = [("Cijk_Alik_Bljk_HHS_BH_MT128x128x32", "GEMM", 20.0), ("elementwise_kernel<add_bias>", "Elementwise", 3.0)]
LINEAR_NV = [("sm90_xmma_gemm_bf16_bias_epilogue", "GEMM", 18.0)]
SAME = {"aten::gelu": ([("gelu_kernel_amd", "GELU", 5.0)], [("gelu_kernel_nv", "GELU", 4.0)]),
        "aten::add": ([("add_kernel_amd", "Elementwise", 2.0)], [("add_kernel_nv", "Elementwise", 2.0)])}


def eager_trace(calls: list[Call], label: str, threads: list[int] | None = None, launch: list[str] | None = None):
    """A Trace whose op calls run in list order, one kernel per correlation id, with the loader's op columns."""
    kernels, op_top, op_call, thread = [], [], [], []
    for number, (op, launched) in enumerate(calls):
        for name, kernel_type, dur in launched:
            kernels.append((name, kernel_type, dur, len(kernels) + 1))
            op_top.append(op)
            op_call.append(number)
            thread.append(threads[number] if threads else 11)
    trace = make_trace(kernels, label=label, platform="AMD" if "MI" in label else "NVIDIA")
    trace.kernels["op"] = pd.Categorical(op_top)
    trace.kernels["op_top"] = pd.Categorical(op_top)
    trace.kernels["module"] = pd.Categorical([""] * len(kernels))
    trace.kernels["op_call"] = np.array(op_call, dtype=np.int64)
    trace.kernels["thread"] = np.array(thread, dtype=np.int64)
    trace.kernels["launch"] = pd.Categorical(launch or ["kernel"] * len(kernels))
    return trace


def layers(count: int, differing: dict[str, tuple[list, list]]) -> tuple[list[Call], list[Call]]:
    """`count` transformer-like layers per side: the ops in `differing` launch their own kernels per side."""
    body = {"aten::layer_norm": (LN_NV, LN_NV), "aten::scaled_dot_product_attention": (SDPA_NV, SDPA_NV),
            "aten::linear": (LINEAR_NV, LINEAR_NV), **SAME, **differing}
    order = ["aten::layer_norm", "aten::linear", "aten::scaled_dot_product_attention", "aten::linear", "aten::add",
             "aten::layer_norm", "aten::linear", "aten::gelu", "aten::linear", "aten::add"]
    sides: tuple[list[Call], list[Call]] = ([], [])
    for _ in range(count):
        for op in order:
            for s in (0, 1):
                sides[s].append((op, body[op][s]))
    return sides


def pair(count: int, differing: dict[str, tuple[list, list]]):
    calls1, calls2 = layers(count, differing)
    return eager_trace(calls1, "MI300X"), eager_trace(calls2, "H100")


DIFFERENCES = {"aten::layer_norm": (LN_AMD, LN_NV), "aten::scaled_dot_product_attention": (SDPA_AMD, SDPA_NV),
               "aten::linear": (LINEAR_AMD, LINEAR_NV)}


def test_known_op_differences_are_found_exactly():
    result = compare_ops(*pair(6, DIFFERENCES))
    found = {(m.op, m.fused_trace, len(m.unfused_sequence), m.pattern_count) for m in result.findings}
    assert found == {("aten::layer_norm", 2, 2, 12), ("aten::scaled_dot_product_attention", 2, 2, 6),
                     ("aten::linear", 2, 2, 24)}
    assert all(m.detector == OP_KERNELS_DETECTOR and m.evidence_source == OP_CALLS_SOURCE for m in result.findings)
    assert result.aligned_calls == 60


def test_no_finding_on_a_pair_without_op_differences():
    result = compare_ops(*pair(6, {}))
    assert result.findings == []
    assert result.aligned_calls == 60


def test_finding_names_both_sides_with_raw_names_and_time():
    trace1, trace2 = pair(4, {"aten::layer_norm": (LN_AMD, LN_NV)})
    (finding,) = compare_ops(trace1, trace2).findings
    assert finding.fused_kernel_names == ["vectorized_layer_norm_kernel<float>"]
    assert finding.unfused_kernel_names == ["RowwiseMomentsCUDAKernel<float>", "LayerNormForwardCUDAKernel<float>"]
    assert finding.unfused_sequence == ["LayerNorm", "LayerNorm"]
    assert finding.fused_kernel_type == "LayerNorm"
    assert finding.pattern_confidence == 1.0
    assert finding.time_saved_us == pytest.approx(8 * 4.0)
    assert finding.evidence.startswith("aten::layer_norm: MI300X 2 kernels (`RowwiseMomentsCUDAKernel<float>`,"
                                       " `LayerNormForwardCUDAKernel<float>`), H100 1 kernel"
                                       " (`vectorized_layer_norm_kernel<float>`), 8 calls")
    assert "H100 fuses LayerNorm + LayerNorm into one LayerNorm kernel" in finding.evidence


def test_uncovered_types_read_as_different_kernel_counts_not_a_fusion():
    (finding,) = compare_ops(*pair(4, {"aten::scaled_dot_product_attention": (SDPA_AMD, SDPA_NV)})).findings
    assert "fuses" not in finding.evidence
    assert "the same op launches 2 vs 1 kernels (MI300X vs H100)" in finding.evidence
    assert finding.time_saved_us == pytest.approx(4 * 1.0)


def test_fused_components_from_the_names_table_make_a_fusion():
    trace1, trace2 = pair(4, {"aten::linear": (LINEAR_AMD, LINEAR_NV)})
    trace2.names["fused_components"] = [("Elementwise",) if "bias" in n else () for n in trace2.names.index]
    (finding,) = compare_ops(trace1, trace2).findings
    assert finding.fused_components == ["Elementwise"]
    assert "H100 fuses GEMM + Elementwise into one GEMM kernel" in finding.evidence


def test_a_split_k_helper_reads_as_a_split():
    split = [("Cijk_Alik_Bljk_GSU4", "GEMM", 15.0), ("splitKreduce_kernel", "GEMM", 2.0)]
    trace1, trace2 = pair(4, {"aten::linear": (split, LINEAR_NV)})
    trace1.names["helper"] = ["split_k_reduce" if n.startswith("splitK") else "" for n in trace1.names.index]
    (finding,) = compare_ops(trace1, trace2).findings
    assert "MI300X splits the op (2 vs 1 kernels): helper kernel `splitKreduce_kernel` (split_k_reduce)" in finding.evidence
    assert "fuses" not in finding.evidence


def test_evidence_refs_cite_the_calls_kernels():
    trace1, trace2 = pair(6, DIFFERENCES)
    for finding in compare_ops(trace1, trace2).findings:
        assert 0 < len(finding.evidence_refs) <= OpThresholds().max_evidence_refs
        for ref in finding.evidence_refs:
            assert ref.pair_id == OP_EVIDENCE_PAIR
            for trace, window, correlation in ((trace1, ref.window1, ref.correlation1),
                                               (trace2, ref.window2, ref.correlation2)):
                cited = trace.kernels.iloc[window[0]:window[1]]
                assert set(cited["op_top"].astype(str)) == {finding.op}
                assert cited["correlation"].iloc[0] == correlation
        assert_cited_names_in_windows(finding, trace1, trace2)


def assert_cited_names_in_windows(finding, trace1, trace2):
    """Every cited raw name occurs in a cited kernel window of its side."""
    fused, unfused = (trace1, trace2) if finding.fused_trace == 1 else (trace2, trace1)
    for trace, names, side in ((fused, finding.fused_kernel_names, finding.fused_trace),
                               (unfused, finding.unfused_kernel_names, 3 - finding.fused_trace)):
        windows = [ref.window1 if side == 1 else ref.window2 for ref in finding.evidence_refs]
        seen = {str(n) for w in windows for n in trace.kernels["name"].iloc[w[0]:w[1]]}
        assert names and set(names) <= seen


def test_rare_or_inconsistent_differences_are_notes():
    calls1, calls2 = layers(6, {})
    calls1[0] = ("aten::layer_norm", LN_AMD)
    calls1[10] = ("aten::layer_norm", LN_AMD)
    result = compare_ops(eager_trace(calls1, "MI300X"), eager_trace(calls2, "H100"))
    assert result.findings == []
    assert any(n.startswith("aten::layer_norm: 2 of 12 aligned calls launch 2 vs 1 kernels") for n in result.notes)
    for count, found in ((1, 0), (2, 1)):
        assert len(compare_ops(*pair(count, {"aten::layer_norm": (LN_AMD, LN_NV)})).findings) == found


def test_extra_op_calls_on_one_side_do_not_shift_the_alignment():
    calls1, calls2 = layers(5, {"aten::layer_norm": (LN_AMD, LN_NV)})
    calls1.insert(7, ("aten::zeros", [("FillFunctor<int>", "Memset", 1.0)]))
    result = compare_ops(eager_trace(calls1, "MI300X"), eager_trace(calls2, "H100"))
    assert [(m.op, m.pattern_count) for m in result.findings] == [("aten::layer_norm", 10)]
    assert result.aligned_calls == 50
    assert any("1 of 51 op calls have no counterpart" in n for n in result.notes)


def test_threads_are_aligned_separately():
    calls1, calls2 = layers(4, {"aten::layer_norm": (LN_AMD, LN_NV)})
    loader_calls = [("aten::copy_", [("copy_kernel", "MemCopy", 1.0)])] * 6
    mixed1 = [c for pair in zip(calls1[:6], loader_calls) for c in pair] + calls1[6:]
    threads = [11, 99] * 6 + [11] * (len(calls1) - 6)
    result = compare_ops(eager_trace(mixed1, "MI300X", threads=threads), eager_trace(calls2 + loader_calls, "H100"))
    assert [(m.op, m.pattern_count) for m in result.findings] == [("aten::layer_norm", 8)]
    assert result.aligned_calls == 40


def test_graph_replays_and_unlaunched_kernels_are_left_out():
    calls1, calls2 = layers(4, {"aten::layer_norm": (LN_AMD, LN_NV)})
    trace1 = eager_trace(calls1, "MI300X")
    graph = trace1.kernels["op_top"].astype(str).to_numpy() == "aten::layer_norm"
    trace1.kernels["launch"] = pd.Categorical(np.where(graph, "graph", "kernel"))
    result = compare_ops(trace1, eager_trace(calls2, "H100"))
    assert result.findings == []
    assert "aten::layer_norm" not in set(result.op_table.loc[result.op_table[side_column(CALLS, 1)] > 0, OP])


def test_traces_without_op_context_give_an_empty_comparison():
    plain = make_trace([("k", "GEMM", 1.0, 1)], label="plain")
    result = compare_ops(plain, eager_trace(layers(2, {})[1], "H100"))
    assert result.findings == [] and result.aligned_calls == 0
    assert result.notes == ["no eager op calls recorded in plain: no op-level comparison"]
    assert list(result.op_table.columns) == list(OP_TABLE_COLUMNS)


def test_op_table_counts_times_and_ranks_by_time_gap():
    table = compare_ops(*pair(3, DIFFERENCES)).op_table
    assert list(table.columns) == list(OP_TABLE_COLUMNS)
    assert table[TIME_GAP_US].abs().is_monotonic_decreasing
    row = table.set_index(OP).loc["aten::layer_norm"]
    assert row[side_column(CALLS, 1)] == row[side_column(CALLS, 2)] == 6
    assert row[side_column(KERNELS_PER_CALL, 1)] == 2.0 and row[side_column(KERNELS_PER_CALL, 2)] == 1.0
    assert row[side_column(TIME_US, 1)] == pytest.approx(60.0) and row[side_column(TIME_US, 2)] == pytest.approx(42.0)
    assert row[TIME_RATIO] == pytest.approx(60 / 42) and row[TIME_GAP_US] == pytest.approx(18.0)
    assert row[side_column(KERNEL_NAMES, 1)] == ["LayerNormForwardCUDAKernel<float>", "RowwiseMomentsCUDAKernel<float>"]


def test_op_table_keeps_ops_of_one_side_with_no_ratio():
    calls1, calls2 = layers(2, {})
    calls1.append(("aten::zeros", [("FillFunctor<int>", "Memset", 1.0)]))
    row = compare_ops(eager_trace(calls1, "MI300X"), eager_trace(calls2, "H100")).op_table.set_index(OP).loc["aten::zeros"]
    assert row[side_column(CALLS, 2)] == 0 and row[side_column(KERNEL_NAMES, 2)] == []
    assert np.isnan(row[TIME_RATIO]) and row[TIME_GAP_US] == pytest.approx(1.0)


def test_op_table_rows_per_module_class_across_layers():
    calls1, calls2 = layers(3, {})
    traces = [eager_trace(calls1, "MI300X"), eager_trace(calls2, "H100")]
    for trace in traces:
        ops = trace.kernels["op_top"].astype(str)
        layer = trace.kernels["op_call"] // 10
        kind = np.where(ops.isin(["aten::gelu", "aten::linear"]) & (trace.kernels["op_call"] % 10 >= 6), "MLP", "Attention")
        trace.kernels["module"] = pd.Categorical([f"Model_0/Layer_{n}/{k}_0" for n, k in zip(layer, kind)])
    table = compare_ops(*traces).op_table
    linear = table[table[OP] == canonical_op("aten::linear")].set_index("module")
    assert all(names == ["aten::linear"] for names in linear[OP_NAMES])
    assert sorted(linear.index) == ["Model/Layer/Attention", "Model/Layer/MLP"]
    assert linear[side_column(CALLS, 1)].to_dict() == {"Model/Layer/Attention": 6, "Model/Layer/MLP": 6}


REAL_PAIRS = ["bert_small", "falconsai_nsfw", "qwen1.5-0.5b", "timesformer"]


@pytest.fixture(scope="module", params=REAL_PAIRS)
def real_pair(request):
    traces = load(shared_trace(f"tl_mi300_{request.param}")), load(shared_trace(f"tl_h100_{request.param}"))
    return request.param, traces, compare_ops(*traces)


def test_real_pair_findings_are_backed_by_their_op_calls(real_pair):
    _, (trace1, trace2), result = real_pair
    assert result.aligned_calls > 0.9 * min(result.calls)
    for finding in result.findings:
        assert finding.op and finding.evidence.startswith(f"{finding.op}: {trace1.label} ")
        for ref in finding.evidence_refs:
            for trace, window in ((trace1, ref.window1), (trace2, ref.window2)):
                launched = trace.kernels.iloc[window[0]:window[1]]
                launched = launched[launched["launch"] == "kernel"]
                assert {canonical_op(str(op)) for op in launched["op_top"]} == {finding.op}
        assert_cited_names_in_windows(finding, trace1, trace2)


def test_real_qwen_attention_is_two_kernels_on_mi300x_and_one_on_h100(real_pair):
    name, (trace1, trace2), result = real_pair
    if name != "qwen1.5-0.5b":
        pytest.skip("the Qwen pair's known truth")
    (sdpa,) = [m for m in result.findings if m.op == canonical_op("aten::scaled_dot_product_attention")]
    assert (sdpa.fused_trace, sdpa.pattern_count, sdpa.unfused_sequence) == (2, 24, ["Memset", "Attention"])
    assert any("FillFunctor<int>" in n for n in sdpa.unfused_kernel_names) and "attn_fwd" in sdpa.unfused_kernel_names
    assert any("flash_fwd_kernel" in n for n in sdpa.fused_kernel_names)
    assert "launches 2 vs 1 kernels" in sdpa.evidence


def test_report_lists_op_findings_and_top_ops():
    trace1, trace2 = pair(4, {"aten::layer_norm": (LN_AMD, LN_NV)})
    result = compare_ops(trace1, trace2)
    text = report.op_findings_text(result.findings)
    assert "[op_kernels] aten::layer_norm: MI300X 2 kernels" in text and "op call: trace1 kernels 0..1" in text
    table = report.op_table_text(result.op_table, (trace1.label, trace2.label), limit=2)
    assert table.splitlines()[0] == "Top ops by time gap (trace 1: MI300X, trace 2: H100)"
    assert len(table.splitlines()) == 4 and "aten::layer_norm" in table
    rows = list(csv.DictReader(io.StringIO(report.op_table_csv(result.op_table))))
    layer_norm = next(r for r in rows if r[OP] == "aten::layer_norm")
    assert layer_norm[side_column(KERNEL_NAMES, 1)] == "LayerNormForwardCUDAKernel<float> | RowwiseMomentsCUDAKernel<float>"
