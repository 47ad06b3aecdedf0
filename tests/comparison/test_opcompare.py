"""Op-level comparison: aligned op calls, kernel-count findings named by their op, and the op table.

The generated pairs are eager Kineto traces (CPU ops around runtime launches) read by the real loader and
classifier; the kernel names are the ones ATen, hipBLASLt, cuBLAS, CUTLASS and FlashAttention emit.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from builders import EagerTrace, Graph, Launch, Module, Op, shared_trace

from fusion.__main__ import main
from fusion.classify.names import canonical_op
from fusion.classify.trace import load
from fusion.comparison.ops import compare_ops
from fusion.comparison.pair import compare
from fusion.detect.op_kernels import OP_CALLS_SOURCE, OP_EVIDENCE_PAIR, OP_KERNELS_DETECTOR
from fusion.detect.thresholds import Thresholds
from fusion.model.trace import Trace
from fusion.report import render as report
from fusion.result import (
    CALLS,
    KERNEL_NAMES,
    KERNELS_PER_CALL,
    MODULE,
    OP,
    OP_NAMES,
    OP_TABLE_COLUMNS,
    TIME_GAP_US,
    TIME_RATIO,
    TIME_US,
    side_column,
)

ROWWISE = "void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<float, float>(long, float, float const*, float*, float*)"
LN_FORWARD = (
    "void at::native::(anonymous namespace)::LayerNormForwardCUDAKernel<float, float>(long, float const*,"
    " float const*, float const*, float const*, float const*, float*)"
)
LN_VECTORIZED = (
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*)"
)
FLASH = (
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false,"
    " cutlass::bfloat16_t> >(pytorch_flash::Flash_fwd_params)"
)
BMM_AMD = "Cijk_Ailk_Bljk_BBS_BH_MT128x128x32_MI32x32x8_SN_LDSB1"
SOFTMAX = "void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 10, false, false>(c10::BFloat16*)"
GEMM_AMD = "Cijk_Alik_Bljk_BBS_BH_MT256x128x64_MI16x16x8_SN_LDSB1_AFC1"
ADD_AMD = (
    "void at::native::elementwise_kernel_manual_unroll<128, 8, at::native::gpu_kernel_impl_nocast<"
    "at::native::CUDAFunctor_add<c10::BFloat16> > >(int, at::native::CUDAFunctor_add<c10::BFloat16>)"
)
ADD_NV = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>,"
    " std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"
)
GEMM_BIAS_NV = (
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>,"
    " cutlass::epilogue::fusion::LinCombPerRowBias<cutlass::bfloat16_t, float> > >(Params)"
)
GEMM_NV = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
SPLIT_K = (
    "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, false, true,"
    " false>(cublasLt::cublasSplitKParams<float>, __nv_bfloat16 const*)"
)
GELU_AMD = (
    "void at::native::elementwise_kernel_manual_unroll<128, 8, at::native::GeluCUDAKernelImpl<c10::BFloat16> >(int)"
)
GELU_NV = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl<c10::BFloat16> >(int)"
FILL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul> >"
    "(int, at::native::FillFunctor<int>, std::array<char*, 1ul>)"
)

Kernels = list[tuple[str, float]]
"""(kernel name, dur_us) of one op call, in launch order."""
SAME: dict[str, tuple[str, dict[str, Kernels]]] = {
    "aten::layer_norm": ("aten::native_layer_norm", {"AMD": [(LN_VECTORIZED, 7.0)], "NVIDIA": [(LN_VECTORIZED, 7.0)]}),
    "aten::scaled_dot_product_attention": (
        "aten::_scaled_dot_product_flash_attention",
        {"AMD": [(FLASH, 25.0)], "NVIDIA": [(FLASH, 25.0)]},
    ),
    "aten::linear": ("aten::addmm", {"AMD": [(GEMM_AMD, 20.0)], "NVIDIA": [(GEMM_NV, 18.0)]}),
    "aten::gelu": ("aten::gelu", {"AMD": [(GELU_AMD, 5.0)], "NVIDIA": [(GELU_NV, 4.0)]}),
    "aten::add": ("aten::add", {"AMD": [(ADD_AMD, 2.0)], "NVIDIA": [(ADD_NV, 2.0)]}),
}
DIFFERENT: dict[str, dict[str, Kernels]] = {
    "aten::layer_norm": {"AMD": [(ROWWISE, 4.0), (LN_FORWARD, 6.0)], "NVIDIA": [(LN_VECTORIZED, 7.0)]},
    "aten::scaled_dot_product_attention": {
        "AMD": [(BMM_AMD, 9.0), (SOFTMAX, 5.0), (BMM_AMD, 9.0)],
        "NVIDIA": [(FLASH, 25.0)],
    },
    "aten::linear": {"AMD": [(GEMM_AMD, 20.0), (ADD_AMD, 3.0)], "NVIDIA": [(GEMM_BIAS_NV, 18.0)]},
}
"""Known truth: AMD launches 2, 3 and 2 kernels where NVIDIA launches 1 (layer_norm, math-path SDPA, GEMM + bias)."""
ATTENTION = ["aten::layer_norm", "aten::linear", "aten::scaled_dot_product_attention", "aten::linear", "aten::add"]
MLP = ["aten::layer_norm", "aten::linear", "aten::gelu", "aten::linear", "aten::add"]
PLATFORMS = ("AMD", "NVIDIA")
LABELS = {"AMD": "MI300X", "NVIDIA": "H100"}


def op_call(op: str, platform: str, kernels: Kernels | None = None) -> Op:
    """A top-level op around its inner op, launching `kernels` (default: the op's usual kernels)."""
    inner, usual = SAME[op]
    launches = [Launch(name, dur) for name, dur in (kernels or usual[platform])]
    return Op(op, [Op(inner, launches)] if inner != op else launches)


def layer_calls(platform: str, layers: int, differing: dict[str, dict[str, Kernels]]) -> list[list[Op]]:
    """Per layer, the attention block's and the MLP block's op calls."""
    blocks = []
    for _ in range(layers):
        for block in (ATTENTION, MLP):
            blocks.append([op_call(op, platform, differing.get(op, {}).get(platform)) for op in block])
    return blocks


def flat(blocks: list[list[Op]]) -> list[Op]:
    return [call for block in blocks for call in block]


def traced(items: list, platform: str, *more_threads: tuple[int, float, list]) -> Trace:
    """Load the eager trace of `items` on thread 1 (and `more_threads`: (tid, start_us, items)) like a file."""
    builder = EagerTrace(platform)
    builder.run(*items)
    for tid, start, thread_items in more_threads:
        builder.run(*thread_items, tid=tid, start=start)
    return load(builder.data(), label=LABELS[platform])


def pair(layers: int, differing: dict[str, dict[str, Kernels]]) -> tuple[Trace, Trace]:
    return tuple(traced(flat(layer_calls(p, layers, differing)), p) for p in PLATFORMS)


def only(differences: str) -> dict[str, dict[str, Kernels]]:
    return {differences: DIFFERENT[differences]}


def test_known_op_differences_are_found_exactly():
    result = compare_ops(*pair(6, DIFFERENT))
    found = {(m.op, m.fused_trace, len(m.unfused_sequence), m.pattern_count) for m in result.findings}
    assert found == {
        ("aten::layer_norm", 2, 2, 12),
        ("aten::scaled_dot_product_attention", 2, 3, 6),
        ("aten::linear", 2, 2, 24),
    }
    assert all(m.detector == OP_KERNELS_DETECTOR and m.evidence_source == OP_CALLS_SOURCE for m in result.findings)
    assert result.aligned_calls == result.calls[0] == result.calls[1] == 60


def test_no_finding_on_a_pair_without_op_differences():
    result = compare_ops(*pair(6, {}))
    assert result.findings == [] and result.notes == []
    assert result.aligned_calls == 60


def test_finding_names_both_sides_with_raw_names_and_time():
    (finding,) = compare_ops(*pair(4, only("aten::layer_norm"))).findings
    assert finding.fused_kernel_names == [LN_VECTORIZED]
    assert finding.unfused_kernel_names == [ROWWISE, LN_FORWARD]
    assert finding.unfused_sequence == ["LayerNorm", "LayerNorm"] and finding.fused_kernel_type == "LayerNorm"
    assert finding.pattern_confidence == 1.0
    assert finding.time_saved_us == pytest.approx(8 * 4.0)
    assert finding.evidence.startswith(
        f"aten::layer_norm: MI300X 2 kernels (`{ROWWISE[:99]}…`, `{LN_FORWARD[:99]}…`),"
        f" H100 1 kernel (`{LN_VECTORIZED[:99]}…`), 8 calls,"
        " 10.0 vs 7.0 us of kernel time per call"
    )
    assert finding.evidence.endswith("; H100 fuses LayerNorm + LayerNorm into one LayerNorm kernel")


def test_uncovered_types_read_as_different_kernel_counts_not_a_fusion():
    (finding,) = compare_ops(*pair(4, only("aten::scaled_dot_product_attention"))).findings
    assert finding.unfused_sequence == ["GEMM", "Softmax", "GEMM"] and finding.fused_kernel_type == "Attention"
    assert finding.kind == "decomposition"
    assert "; two decompositions of the same op (3 vs 1 kernels): MI300X runs GEMM + Softmax + GEMM, H100" in (
        finding.evidence
    )
    assert "fuses" not in finding.evidence
    assert finding.unfused_kernel_names == [BMM_AMD, SOFTMAX]


def test_fused_components_of_the_names_table_make_a_fusion():
    (finding,) = compare_ops(*pair(4, only("aten::linear"))).findings
    assert finding.fused_components == ["Elementwise"]
    assert finding.unfused_sequence == ["GEMM", "Elementwise"]
    assert finding.evidence.endswith("; H100 fuses GEMM + Elementwise into one GEMM kernel")
    assert finding.time_saved_us == pytest.approx(16 * 3.0)


def test_a_split_k_helper_reads_as_a_split():
    split = {"aten::linear": {"NVIDIA": [(GEMM_NV, 15.0), (SPLIT_K, 2.0)], "AMD": [(GEMM_AMD, 20.0)]}}
    (finding,) = compare_ops(*pair(4, split)).findings
    assert finding.fused_trace == 1
    assert f"H100 splits the op (2 vs 1 kernels): helper kernel `{SPLIT_K[:99]}…` (split_k_reduce)" in finding.evidence
    assert "fuses" not in finding.evidence and finding.kind == "split"


def test_evidence_refs_cite_the_calls_kernels():
    trace1, trace2 = pair(6, DIFFERENT)
    for finding in compare_ops(trace1, trace2).findings:
        assert 0 < len(finding.evidence_refs) <= Thresholds().max_evidence_refs
        for ref in finding.evidence_refs:
            assert ref.pair_id == OP_EVIDENCE_PAIR
            for trace, window, correlation in (
                (trace1, ref.window1, ref.correlation1),
                (trace2, ref.window2, ref.correlation2),
            ):
                cited = trace.kernels.iloc[window[0] : window[1]]
                assert set(cited["op_top"].astype(str)) == {finding.op}
                assert cited["correlation"].iloc[0] == correlation
        assert_cited_names_in_windows(finding, trace1, trace2)


def assert_cited_names_in_windows(finding, trace1, trace2):
    """Every cited raw name occurs in a cited kernel window of its side."""
    for side, trace in ((1, trace1), (2, trace2)):
        names = finding.fused_kernel_names if side == finding.fused_trace else finding.unfused_kernel_names
        windows = [ref.window1 if side == 1 else ref.window2 for ref in finding.evidence_refs]
        seen = {str(n) for w in windows for n in trace.kernels["name"].iloc[w[0] : w[1]]}
        assert names and set(names) <= seen


def test_rare_or_inconsistent_differences_are_notes():
    calls = [flat(layer_calls(p, 6, {})) for p in PLATFORMS]
    for call in (0, 10):
        calls[0][call] = op_call("aten::layer_norm", "AMD", DIFFERENT["aten::layer_norm"]["AMD"])
    result = compare_ops(*(traced(c, p) for c, p in zip(calls, PLATFORMS)))
    assert result.findings == []
    assert result.notes == [
        "aten::layer_norm: 2 of 12 aligned calls launch 2 vs 1 kernels; below 3 calls or"
        " 80% of the op's calls, and not in every call of the op: not reported"
    ]


def test_a_difference_in_every_call_of_a_rare_op_is_a_finding_with_its_count():
    """One layer: the op runs twice and both calls differ the same way; below op_min_calls, yet every call shows it."""
    (finding,) = compare_ops(*pair(1, only("aten::layer_norm"))).findings
    assert finding.pattern_count == 2 and finding.pattern_confidence == 1.0
    assert finding.evidence.startswith("aten::layer_norm: MI300X 2 kernels") and ", 2 calls," in finding.evidence


def _all_but_one_call_differs(layers: int) -> tuple:
    calls = [flat(layer_calls(p, layers, only("aten::layer_norm"))) for p in PLATFORMS]
    same = flat(layer_calls("AMD", layers, {}))
    first = next(i for i, c in enumerate(calls[0]) if c.name == "aten::layer_norm")
    calls[0][first] = same[first]
    return tuple(traced(c, p) for c, p in zip(calls, PLATFORMS))


def test_op_thresholds_are_compare_parameters_and_copied_into_the_result():
    traces = _all_but_one_call_differs(6)
    assert [m.op for m in compare(*traces).mappings] == ["aten::layer_norm"]
    strict = compare(*traces, op_min_calls=13)
    assert strict.params["op_min_calls"] == 13 and strict.params["op_min_consistency"] == 0.8
    assert [m for m in strict.mappings if m.detector == OP_KERNELS_DETECTOR] == []
    assert any("below 13 calls" in note for note in strict.op_notes)


def test_extra_op_calls_on_one_side_do_not_shift_the_alignment():
    calls = [flat(layer_calls(p, 5, only("aten::layer_norm"))) for p in PLATFORMS]
    calls[0].insert(7, Op("aten::zeros", [Op("aten::fill_", [Launch(FILL, 1.0)])]))
    result = compare_ops(*(traced(c, p) for c, p in zip(calls, PLATFORMS)))
    assert [(m.op, m.pattern_count) for m in result.findings] == [("aten::layer_norm", 10)]
    assert result.aligned_calls == 50
    assert result.notes == ["MI300X: 1 of 51 op calls have no counterpart with the same op"]


def test_threads_are_aligned_separately():
    copies = [Op("aten::copy_", [Launch(ADD_NV, 1.0)])] * 6
    calls = [flat(layer_calls(p, 4, only("aten::layer_norm"))) for p in PLATFORMS]
    trace1 = traced(calls[0], "AMD", (2, 0.0, copies))
    trace2 = traced(calls[1], "NVIDIA", (9, 300.0, copies))
    assert trace1.kernels["thread"].nunique() == trace2.kernels["thread"].nunique() == 2
    result = compare_ops(trace1, trace2)
    assert [(m.op, m.pattern_count) for m in result.findings] == [("aten::layer_norm", 8)]
    assert result.aligned_calls == 46


def test_equivalent_ops_are_aligned_as_the_same_op():
    calls = [flat(layer_calls(p, 4, only("aten::scaled_dot_product_attention"))) for p in PLATFORMS]
    for k, call in enumerate(calls[0]):
        if call.name == "aten::scaled_dot_product_attention":
            calls[0][k] = Op("aten::_scaled_dot_product_efficient_attention", call.body[0].body)
    (finding,) = compare_ops(*(traced(c, p) for c, p in zip(calls, PLATFORMS))).findings
    assert (
        finding.op
        == canonical_op("aten::_scaled_dot_product_efficient_attention")
        == canonical_op("aten::scaled_dot_product_attention")
    )
    assert finding.pattern_count == 4


def test_graph_replays_and_kernels_outside_ops_are_left_out():
    calls = [flat(layer_calls(p, 4, only("aten::layer_norm"))) for p in PLATFORMS]
    names = [LN_FORWARD, ROWWISE]
    calls[0] = [Op(c.name, [Graph(names)]) if c.name == "aten::layer_norm" else c for c in calls[0]]
    calls[0].append(Launch(ADD_AMD))
    trace1 = traced(calls[0], "AMD")
    result = compare_ops(trace1, traced(calls[1], "NVIDIA"))
    assert result.findings == []
    assert set(trace1.kernels["launch"].astype(str)) == {"kernel", "graph"}
    assert "aten::layer_norm" not in set(result.op_table.loc[result.op_table[side_column(CALLS, 1)] > 0, OP])
    assert result.calls == (32, 40)
    assert result.notes[-1] == (
        "MI300X: eagerly launched kernels with no enclosing op: 1 (0.004 ms); not part of the op-level comparison"
    )


def test_traces_without_op_context_give_an_empty_comparison():
    plain = EagerTrace("AMD")
    plain.run(Launch(GEMM_AMD), Launch(ADD_AMD))
    result = compare_ops(load(plain.data(), label="plain"), pair(1, {})[1])
    assert result.findings == [] and result.aligned_calls == 0
    assert result.notes == ["no eager op calls recorded in plain: no op-level comparison"]
    assert list(result.op_table.columns) == list(OP_TABLE_COLUMNS)


def test_a_trace_without_kernels_has_no_ratio():
    empty = EagerTrace("NVIDIA")
    result = compare_ops(pair(1, {})[0], load(empty.data(), label="empty"))
    assert result.findings == [] and result.notes == ["no eager op calls recorded in empty: no op-level comparison"]
    assert result.op_table[TIME_RATIO].isna().all()
    assert (result.op_table[TIME_GAP_US] == result.op_table[side_column(TIME_US, 1)]).all()


def test_op_table_counts_times_and_ranks_by_time_gap():
    table = compare_ops(*pair(3, DIFFERENT)).op_table
    assert list(table.columns) == list(OP_TABLE_COLUMNS)
    assert table[TIME_GAP_US].abs().is_monotonic_decreasing
    row = table.set_index(OP).loc["aten::layer_norm"]
    assert row[OP_NAMES] == ["aten::layer_norm"] and row[MODULE] == ""
    assert row[side_column(CALLS, 1)] == row[side_column(CALLS, 2)] == 6
    assert row[side_column(KERNELS_PER_CALL, 1)] == 2.0 and row[side_column(KERNELS_PER_CALL, 2)] == 1.0
    assert row[side_column(TIME_US, 1)] == pytest.approx(60.0) and row[side_column(TIME_US, 2)] == pytest.approx(42.0)
    assert row[TIME_RATIO] == pytest.approx(60 / 42) and row[TIME_GAP_US] == pytest.approx(18.0)
    assert row[side_column(KERNEL_NAMES, 1)] == [LN_FORWARD, ROWWISE]


def test_op_table_keeps_ops_of_one_side_with_no_ratio():
    calls = [flat(layer_calls(p, 2, {})) for p in PLATFORMS]
    calls[0].append(Op("aten::zeros", [Op("aten::fill_", [Launch(FILL, 1.0)])]))
    table = compare_ops(*(traced(c, p) for c, p in zip(calls, PLATFORMS))).op_table
    row = table.set_index(OP).loc["aten::zeros"]
    assert row[side_column(CALLS, 2)] == 0 and row[side_column(KERNEL_NAMES, 2)] == []
    assert np.isnan(row[TIME_RATIO]) and row[TIME_GAP_US] == pytest.approx(1.0)


def test_op_table_rows_per_module_class_across_layers():
    traces = []
    for platform in PLATFORMS:
        blocks = layer_calls(platform, 3, {})
        layers = [
            Module(f"Layer_{n}", [Module("Attention_0", blocks[2 * n]), Module("MLP_0", blocks[2 * n + 1])])
            for n in range(3)
        ]
        traces.append(traced([Module("Model_0", layers)], platform))
    table = compare_ops(*traces).op_table
    linear = table[table[OP] == canonical_op("aten::linear")].set_index(MODULE)
    assert sorted(linear.index) == ["Model/Layer/Attention", "Model/Layer/MLP"]
    assert all(names == ["aten::linear"] for names in linear[OP_NAMES])
    assert linear[side_column(CALLS, 1)].to_dict() == {"Model/Layer/Attention": 6, "Model/Layer/MLP": 6}


def test_report_lists_op_findings_and_top_ops():
    trace1, trace2 = pair(4, only("aten::layer_norm"))
    result = compare_ops(trace1, trace2)
    text = report.op_findings_text(result.findings, ["a note"])
    assert "[fusion] aten::layer_norm: MI300X 2 kernels" in text and "op call: trace1 kernels 0..1" in text
    assert "op: aten::layer_norm (innermost aten::native_layer_norm)" in text
    assert text.endswith("\n  note: a note")
    assert report.op_findings_text([], []) == "Op-level findings: none"
    table = report.op_table_text(result.op_table, (trace1.label, trace2.label), limit=2)
    assert table.splitlines()[0] == "Top ops by time gap (trace 1: MI300X, trace 2: H100)"
    assert len(table.splitlines()) == 4 and "aten::layer_norm" in table
    rows = list(csv.DictReader(io.StringIO(report.op_table_csv(result.op_table))))
    layer_norm = next(r for r in rows if r[OP] == "aten::layer_norm")
    assert layer_norm[side_column(KERNEL_NAMES, 1)] == f"{LN_FORWARD} | {ROWWISE}"


REAL_PAIRS = ["bert_small", "falconsai_nsfw", "qwen1.5-0.5b", "timesformer"]


def _real_pair(name: str):
    traces = load(shared_trace(f"tl_mi300_{name}")), load(shared_trace(f"tl_h100_{name}"))
    return name, traces, compare_ops(*traces)


@pytest.fixture(scope="module", params=REAL_PAIRS)
def real_pair(request):
    return _real_pair(request.param)


def test_real_pair_findings_are_backed_by_their_op_calls(real_pair):
    _, (trace1, trace2), result = real_pair
    assert result.aligned_calls > 0.9 * min(result.calls)
    for finding in result.findings:
        assert finding.op and finding.evidence.startswith(f"{finding.op}: {trace1.label} ")
        for ref in finding.evidence_refs:
            for trace, window in ((trace1, ref.window1), (trace2, ref.window2)):
                launched = trace.kernels.iloc[window[0] : window[1]]
                launched = launched[launched["launch"] == "kernel"]
                assert {canonical_op(str(op)) for op in launched["op_top"]} == {canonical_op(finding.op)}
        assert_cited_names_in_windows(finding, trace1, trace2)


def test_real_qwen_attention_launches_an_extra_memset_on_mi300x_which_is_extra_work():
    """MI300X's SDPA zero-fills an int buffer (FillFunctor<int>) before attn_fwd; H100's flash_fwd needs none. And
    H100's cuBLAS runs a memset (a gpu_memset activity) before the GEMM of nearly every aten::linear: extra work too."""
    _, _, result = _real_pair("qwen1.5-0.5b")
    linear, finding = sorted(result.findings, key=lambda m: m.op)
    assert linear.kind == "extra_work" and linear.op == "aten::linear" and linear.fused_trace == 1
    assert linear.unfused_sequence[0] == "Memset" and "fuses" not in linear.evidence
    assert finding.kind == "extra_work" and finding.op == "aten::scaled_dot_product_attention"
    assert finding.pattern_count == 24 and finding.fused_trace == 2
    assert finding.unfused_sequence == ["Memset", "Attention"]
    assert "AMD Instinct MI300X VF runs Memset more per call" in finding.evidence and "fuses" not in finding.evidence


@pytest.mark.parametrize("name", ["timesformer", "falconsai_nsfw"])
def test_real_conv2d_called_once_is_a_decomposition_with_layout_conversions_not_a_fusion(name):
    """The one aten::conv2d call: MIOpen's SubTensorOpWithScalar1d, 3 batched_transpose and an igemm on MI300X; cuDNN's
    nchwToNhwc x2, a CUTLASS fprop and nhwcToNchw on H100; both then add the bias. Every aligned call (1 of 1)
    differs the same way: a finding, with its count, of kind decomposition (no H100 kernel performs the tensor op).
    cuDNN also runs two memsets (gpu_memset activities), so H100 runs more kernels; the extras doing no compute does
    not make it extra work, as MI300X's SubTensorOpWithScalar1d has no counterpart."""
    _, _, result = _real_pair(name)
    (finding,) = [m for m in result.findings if m.op == "aten::conv2d"]
    assert finding.kind == "decomposition" and finding.pattern_count == 1 and finding.fused_trace == 1
    assert finding.fused_kernel_type == "Elementwise + MemCopy + MemCopy + Convolution + MemCopy + Elementwise"
    assert finding.inner_op == "aten::miopen_convolution"
    assert "aten::conv2d > aten::cudnn_convolution" in finding.unfused_ops
    assert ", 1 call," in finding.evidence and "two decompositions of the same op (7 vs 6 kernels)" in finding.evidence
    assert "`SubTensorOpWithScalar1d`" in finding.evidence and "fuses" not in finding.evidence


def test_an_op_that_only_launches_an_extra_memset_or_copy_is_extra_work_not_a_fusion():
    """As in the kernel-sequence walk, a non-compute kernel one side adds is no fusion: alone it is extra work;
    with a compute kernel among the extra ones the difference reads by those, and leaves the non-compute kernel out
    (a note says so)."""
    attention = DIFFERENT["aten::scaled_dot_product_attention"]
    cases = {
        "fill": ([(FILL, 2.0), (FLASH, 25.0)], ["Memset", "Attention"], "extra_work"),
        "fill and softmax": ([(FILL, 2.0), *attention["AMD"]], ["GEMM", "Softmax", "GEMM"], "decomposition"),
    }
    for extra, (amd, sequence, kind) in cases.items():
        result = compare_ops(*pair(4, {"aten::scaled_dot_product_attention": {"AMD": amd, "NVIDIA": [(FLASH, 25.0)]}}))
        assert [(m.unfused_sequence, m.kind) for m in result.findings] == [(sequence, kind)], extra
        finding = result.findings[0]
        if kind == "extra_work":
            assert finding.time_saved_us == 4 * 2.0 and result.notes == []
            continue
        assert any("(Memset, 0.008 ms in all) does no compute: left out of the finding" in n for n in result.notes)
        assert finding.unfused_count_per_type == {"GEMM": 8, "Softmax": 4}
        assert FILL not in finding.unfused_kernel_names and set(finding.unfused_kernel_names) == {BMM_AMD, SOFTMAX}
        assert finding.time_saved_us == 4 * sum(us for _, us in attention["AMD"])  # every extra kernel but the fill
    comparison = compare(
        *pair(
            4, {"aten::scaled_dot_product_attention": {"AMD": [(FILL, 2.0), (FLASH, 25.0)], "NVIDIA": [(FLASH, 25.0)]}}
        )
    )
    assert [(m.kind, m.unfused_sequence) for m in comparison.mappings] == [("extra_work", ["Memset", "Attention"])]
    assert [(n.side, n.kernel_type, n.count, n.kind) for n in comparison.one_sided] == [(1, "Memset", 4, "extra_work")]


def test_only_non_compute_extras_are_a_decomposition_when_the_fewer_kernel_call_has_its_own_compute_kernel():
    """AMD runs two fills and the attention kernel, NVIDIA the attention kernel and a softmax AMD does not run: the
    extra kernels do no compute, but the calls still compute differently, so it is no mere extra work."""
    ops = {
        "aten::scaled_dot_product_attention": {
            "AMD": [(FILL, 2.0), (FILL, 2.0), (FLASH, 25.0)],
            "NVIDIA": [(FLASH, 25.0), (SOFTMAX, 3.0)],
        }
    }
    result = compare_ops(*pair(4, ops))
    assert [(m.kind, m.fused_trace) for m in result.findings] == [("decomposition", 2)]


def test_compare_reports_op_findings_first_and_the_same_kernels_once(tmp_path, capsys):
    files = []
    for platform in PLATFORMS:
        builder = EagerTrace(platform)
        builder.run(*flat(layer_calls(platform, 6, DIFFERENT)))
        files.append(tmp_path / f"{platform}.json")
        files[-1].write_bytes(builder.data())
    comparison = compare(load(files[0]), load(files[1]))
    assert [m.op for m in comparison.mappings[:3]] == [
        m.op for m in compare_ops(load(files[0]), load(files[1])).findings
    ]
    assert not any(
        m.evidence_source != OP_CALLS_SOURCE and "LayerNorm" in m.unfused_sequence for m in comparison.mappings
    )
    assert any("cites only kernels of op-level findings" in note for note in comparison.op_notes)
    assert main(["compare", str(files[0]), str(files[1]), "--no-cache"]) == 0
    text = capsys.readouterr().out
    assert "[fusion] aten::layer_norm: AMD Instinct MI300X 2 kernels" in text and "Top ops by time gap" in text
    assert main(["compare", str(files[0]), str(files[1]), "--no-cache", "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert {m["op"] for m in result["fusion_mappings"]} >= {"aten::layer_norm", "aten::linear"}
    assert result["op_table"][0][OP_NAMES] == ["aten::linear"]
    assert (
        main(["compare", str(files[0]), str(files[1]), "--no-cache", "--format", "csv", "-o", str(tmp_path / "t.csv")])
        == 0
    )
    ops = list(csv.DictReader((tmp_path / "t_ops.csv").open()))
    assert ops[0][OP_NAMES] == "aten::linear" and ops[0][side_column(CALLS, 1)] == "24"
