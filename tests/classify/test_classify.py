"""Tests of the kernel-name classifier (fusion/classify.py and fusion/rules.toml)."""

from __future__ import annotations

import re
import time
import tomllib
from pathlib import Path

import pandas as pd
import pytest
from builders import shared_absent
from hypothesis import given, settings
from hypothesis import strategies as st

from fusion.classify.names import (
    BUILTIN_OP_RULES,
    BUILTIN_RULES,
    COLUMNS,
    HELPER_ROLES,
    KERNEL_TYPES,
    MAX_MATCH_CHARS,
    RULES_ENV,
    Classification,
    canonical_op,
    classify,
    classify_names,
    inductor_ops,
    type_from_op,
)
from fusion.errors import ConfigError

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason=shared_absent(TRACES))
MIN_COVERAGE = 0.98
LINEAR_SLACK = 3.0

# Real kernel names from /work/shared/traces/*/kernel_names.txt; long C++
# names are cut after their first template arguments.
REAL_NAMES = [
    ("AMD", "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1_AF", "GEMM"),
    ("AMD", "Cijk_Ailk_Bljk_BBS_BH_MT256x256x32_MI32x32x8x1_SN_1LDSB1_APM1_AF0EM1_AF1EM1_AMAS3_ASE", "GEMM"),
    ("NVIDIA", "nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", "GEMM"),
    (
        "NVIDIA",
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        "GEMM",
    ),
    (
        "NVIDIA",
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8::Params)",
        "GEMM",
    ),
    ("NVIDIA", "ampere_sgemm_128x64_tn", "GEMM"),
    (
        "NVIDIA",
        "void splitKreduce_kernel<float, float, float, float, true, false, false>(cublasSplitKParams<float>, float const*)",
        "GEMM",
    ),
    ("AMD", "_matmul_ogs_NNT_bf16xbf16xmxfp4_128x128x128x1_swiglu", "MoE_GEMM"),
    (
        "NVIDIA",
        "bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1_16dp256b_rM_TN_transOut_schedP2x1x2x3_biasM_bN_tma_tmaOpt_clmp_swiGlu_dynBatch_sm100f",
        "MoE_GEMM",
    ),
    ("AMD", "attn_fwd", "Attention"),
    ("AMD", "kernel_unified_attention_3d", "Attention"),
    ("AMD", "aiter::fmha_fwd_hd128_bf16_rtz", "Attention"),
    (
        "AMD",
        "_ZN7ck_tile6kentryILi2ENS_38FmhaBatchPrefillWithPagedKVCacheKernelINS_40BlockFmhaBatchPrefillPipelineQRKSVSAsync",
        "Attention",
    ),
    (
        "NVIDIA",
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t>",
        "Attention",
    ),
    ("NVIDIA", "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext", "Attention"),
    (
        "AMD",
        "void vllm::reshape_and_cache_flash_kernel<__hip_bfloat16, __hip_bfloat16, (vllm::Fp8KVCacheDataType)0>(__hip_bfloat16 const*)",
        "KV_Cache",
    ),
    (
        "AMD",
        "void (anonymous namespace)::store_kvcache<2048l, 4, false, long>((anonymous namespace)::StoreKVCacheParams)",
        "KV_Cache",
    ),
    (
        "NVIDIA",
        "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char, (vllm::Fp8KVCacheDataType)1>(__nv_bfloat16 const*)",
        "KV_Cache",
    ),
    ("NVIDIA", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "Communication"),
    ("NVIDIA", "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "Communication"),
    (
        "NVIDIA",
        "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long)",
        "Communication",
    ),
    (
        "AMD",
        "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt64x64x16_wt16x16x4_ws1x1_wr2x2_ta1x1x4x1_1x16x1x16_tb1x1x4x1_1x16x1x16_me",
        "Convolution",
    ),
    (
        "AMD",
        "_ZN2ck16tensor_operation6device12_GLOBAL__N_139kernel_grouped_conv_fwd_xdl_cshuffle_v3INS_34GridwiseGemmMultiD_xdl_cshuffle_v3",
        "Convolution",
    ),
    (
        "NVIDIA",
        "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8>(cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8::Params)",
        "Convolution",
    ),
    (
        "AMD",
        "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi64ELi8ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib",
        "RMSNorm",
    ),
    (
        "AMD",
        "_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePassINS_27Rmsnorm2dFwdPipelineProblemIDF16bDF16bfDF16b",
        "RMSNorm",
    ),
    (
        "NVIDIA",
        "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long)",
        "RMSNorm",
    ),
    (
        "AMD",
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*)",
        "LayerNorm",
    ),
    (
        "NVIDIA",
        "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel<float, float>(long, long, float const*, float const*)",
        "LayerNorm",
    ),
    (
        "AMD",
        "void at::native::batch_norm_collect_statistics_kernel<at::native::Var, c10::BFloat16, c10::BFloat16, float, int>(at::GenericPackedTensorAccessor<c10::BFloat16 const, 3ul, at::RestrictPtrTraits, int>)",
        "BatchNorm",
    ),
    (
        "AMD",
        "void (anonymous namespace)::groupnorm_kernel_dispatch_down<__hip_bfloat16, 1024u>(unsigned int, unsigned int, long, float, bool)",
        "GroupNorm",
    ),
    ("AMD", "l2norm_fwd_kernel1", "L2Norm"),
    (
        "AMD",
        "_ZN7sgl_hip10activation18act_and_mul_kernelI14__hip_bfloat16TnPFT_RKS3_EXadL_Z4siluIS2_ES3_S5_EEEEvPS3_PS4_i",
        "SwiGLU",
    ),
    (
        "NVIDIA",
        "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const",
        "SiLU",
    ),
    (
        "AMD",
        "void at::native::vectorized_elementwise_kernel<8, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const",
        "GELU",
    ),
    (
        "NVIDIA",
        "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, at::native::(anonymous namespace)::threshold_kernel_impl<float>(at::TensorIteratorBase&, float, float)::{lambda(float, float)#1}>",
        "ReLU",
    ),
    ("AMD", "void rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*)", "RoPE"),
    (
        "NVIDIA",
        "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*)",
        "RoPE",
    ),
    ("AMD", "_topk_forward", "MoE_Routing"),
    ("AMD", "_finalize_matmul_scatter_bf16", "MoE_Routing"),
    (
        "NVIDIA",
        "void moe::dev::routing::routingIndicesHistogramKernel<moe::dev::routing::routingRenormalize::KernelParams<__nv_bfloat16, __nv_bfloat16, 128, false, true, true> >",
        "MoE_Routing",
    ),
    (
        "AMD",
        "void at::native::(anonymous namespace)::cunn_SoftMaxForwardReg<c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue, long, 4>",
        "Softmax",
    ),
    (
        "NVIDIA",
        "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>(float*, float const*, int, int, int, bool const*, int, bool)",
        "Softmax",
    ),
    (
        "NVIDIA",
        "void split_embedding_codegen_forward_unweighted_kernel<float, float, float, false, long, 1ul, 16ul>(at::GenericPackedTensorAccessor<float, 1ul, at::RestrictPtrTraits, long>)",
        "Embedding",
    ),
    (
        "NVIDIA",
        "void fbgemm_gpu::permute_2D_data_kernel<false, int, int, decltype(nullptr)>(int, int, int, int const*)",
        "Embedding",
    ),
    (
        "NVIDIA",
        "void fbgemm_gpu::(anonymous namespace)::_compute_FP8_quantize_cuda_kernel<float>(float const*, float const*, int, int, unsigned char*, bool)",
        "Quantize",
    ),
    (
        "NVIDIA",
        "void vllm::scaled_fp8_quant_kernel_strided<c10::BFloat16, c10::Float8_e4m3fn>(c10::Float8_e4m3fn*, c10::BFloat16 const*)",
        "Quantize",
    ),
    (
        "AMD",
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4> >",
        "Reduce",
    ),
    (
        "NVIDIA",
        "void cub::DeviceReduceByKeyKernel<cub::DispatchReduceByKey<long*, long*, cub::ConstantInputIterator<int, int>, int*, int*, cub::Equality, cub::Sum, int>::PtxReduceByKeyPolicy>",
        "Reduce",
    ),
    (
        "AMD",
        "void at::native::(anonymous namespace)::max_pool_forward_nchw<c10::BFloat16>(int, c10::BFloat16 const*, long, long, long)",
        "Reduce",
    ),
    (
        "NVIDIA",
        "void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, int>::Policy800, false, long, int, int, int>(int*, int*, int*)",
        "Sort",
    ),
    (
        "NVIDIA",
        "void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(at::cuda::detail::TensorInfo<float const, unsigned int>)",
        "Sort",
    ),
    (
        "NVIDIA",
        "void cub::DeviceScanKernel<cub::AgentScanPolicy<128, 15, int, (cub::BlockLoadAlgorithm)3, (cub::CacheLoadModifier)0> >",
        "Scan",
    ),
    (
        "AMD",
        "void rocprim::ROCPRIM_400200_NS::detail::trampoline_kernel<rocprim::ROCPRIM_400200_NS::detail::wrapped_scan_config<rocprim::ROCPRIM_400200_NS::default_config, long>",
        "Scan",
    ),
    (
        "AMD",
        "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)",
        "Elementwise",
    ),
    (
        "NVIDIA",
        "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0> >",
        "Elementwise",
    ),
    ("AMD", "triton_poi_fused__unsafe_view_mul_silu_2", "SwiGLU"),
    ("AMD", "triton_poi_fused_constant_pad_nd_moe_forward_0", "MemCopy"),
    ("AMD", "triton_red_fused_add_mean_mul_pow_rsqrt_0", "RMSNorm"),
    ("AMD", "triton_per_fused__to_copy_addmm_mean_pow_view_8", "Reduce"),
    ("NVIDIA", "triton_tem_fused_addmm_0", "GEMM"),
    (
        "NVIDIA",
        "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const",
        "MemCopy",
    ),
    (
        "AMD",
        "void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >",
        "Cast",
    ),
    ("AMD", "batched_transpose_32x32_half", "MemCopy"),
    ("AMD", "__amd_rocclr_copyBuffer", "MemCopy"),
    (
        "NVIDIA",
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
        "Memset",
    ),
    ("AMD", "__amd_rocclr_fillBufferAligned", "Memset"),
    ("NVIDIA", "triton__0d1d2d3d4d5d", "Other"),
]


@pytest.fixture(autouse=True)
def _builtin_rules_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RULES_ENV, raising=False)


@pytest.mark.parametrize(("platform", "name", "expected"), REAL_NAMES, ids=lambda v: str(v)[:50])
def test_real_names(platform: str, name: str, expected: str) -> None:
    assert classify(name, platform).kernel_type == expected
    assert classify(name).kernel_type == expected


def test_real_names_cover_every_type() -> None:
    untested = set(KERNEL_TYPES) - {expected for _, _, expected in REAL_NAMES}
    assert untested == set()


def test_kernel_types_are_unique_with_other_last() -> None:
    assert len(set(KERNEL_TYPES)) == len(KERNEL_TYPES)
    assert KERNEL_TYPES[-1] == "Other"
    reference = {
        "GEMM",
        "Attention",
        "KV_Cache",
        "RMSNorm",
        "SwiGLU",
        "SiLU",
        "GELU",
        "ReLU",
        "Cast",
        "Reduce",
        "Sort",
        "Softmax",
        "Elementwise",
        "MemCopy",
    }
    assert reference <= set(KERNEL_TYPES)
    assert not [t for t in KERNEL_TYPES if t.startswith("Triton")]


def test_builtin_rules_are_documented() -> None:
    data = tomllib.loads(BUILTIN_RULES.read_text(encoding="utf-8"))
    rules = [r for table in ("rule", "component", "implementation", "inductor_op") for r in data[table]]
    assert [r["id"] for r in rules if len(r.get("note", "")) < 20] == []


# --- coverage on the real traces -------------------------------------------


def _trace_dirs() -> list[Path]:
    if not TRACES.is_dir():
        return []
    return sorted(p for p in TRACES.iterdir() if (p / "kernel_names.txt").is_file())


def _manifest_vendors() -> dict[str, str]:
    """Trace folder -> vendor, from the table in MANIFEST.md."""
    vendors = {}
    for line in (TRACES / "MANIFEST.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 2 and cells[2] in ("AMD", "NVIDIA"):
            vendors[cells[0]] = cells[2]
    return vendors


def _kernel_times(trace_dir: Path) -> list[tuple[float, str]]:
    rows = (trace_dir / "kernel_names.txt").read_text(encoding="utf-8").splitlines()
    return [(float(dur), name) for _, dur, name in (r.split("\t", 2) for r in rows if not r.startswith("#"))]


@needs_traces
def test_every_trace_folder_has_a_vendor() -> None:
    vendors = _manifest_vendors()
    assert _trace_dirs(), "no kernel_names.txt found"
    assert [d.name for d in _trace_dirs() if d.name not in vendors] == []


@needs_traces
@pytest.mark.parametrize("trace_dir", _trace_dirs(), ids=lambda p: p.name)
def test_trace_coverage(trace_dir: Path) -> None:
    times = _kernel_times(trace_dir)
    table = classify_names([name for _, name in times], _manifest_vendors().get(trace_dir.name, "unknown"))
    other = sorted(((dur, name) for dur, name in times if table.at[name, "type"] == "Other"), reverse=True)
    total = sum(dur for dur, _ in times)
    covered = 1 - sum(dur for dur, _ in other) / total
    print(f"{trace_dir.name}: {covered:.2%} of kernel time classified")
    top = "\n".join(f"  {dur:10.1f} us  {name[:160]}" for dur, name in other[:8])
    assert covered >= MIN_COVERAGE, f"{trace_dir.name}: only {covered:.2%} classified; top Other:\n{top}"


# --- vendor tags ----------------------------------------------------------------

TENSILE = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1_SN_LDSB1_AFC1"
NVJET = "nvjet_tst_144x128_64x6_2x1_v_bz_bias_TNN"


@pytest.mark.parametrize(
    ("name", "platform", "rule"),
    [
        (TENSILE, "AMD", "tensile_gemm"),
        (TENSILE, "unknown", "tensile_gemm"),
        (TENSILE, "NVIDIA", "unclassified"),
        (NVJET, "NVIDIA", "nvjet_gemm"),
        (NVJET, "unknown", "nvjet_gemm"),
        (NVJET, "AMD", "unclassified"),
        ("igemm_wrw_gtcx2_nhwc_bf16_bx0_ex1_bt256x128x16", "NVIDIA", "generic_gemm"),
    ],
)
def test_vendor_tags(name: str, platform: str, rule: str) -> None:
    assert classify(name, platform).rule == rule


def test_platform_is_case_insensitive_and_checked() -> None:
    assert classify(TENSILE, "amd") == classify(TENSILE, "AMD")
    with pytest.raises(ValueError, match="platform"):
        classify(TENSILE, "ROCm")


# --- Inductor components -------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "components"),
    [
        ("triton_red_fused_add_mean_mul_pow_rsqrt_0", ("add", "mean", "mul", "pow", "rsqrt")),
        ("triton_poi_fused__to_copy_add_mul_silu_3", ("_to_copy", "add", "mul", "silu")),
        ("triton_poi_fused__unsafe_view_mul_silu_2", ("_unsafe_view", "mul", "silu")),
        ("triton_per_fused__softmax_12", ("_softmax",)),
        ("triton_red_fused__log_softmax_nll_loss_forward_7", ("_log_softmax", "nll_loss_forward")),
        (
            "triton_per_fused__native_batch_norm_legit_functional_relu_4",
            ("_native_batch_norm_legit_functional", "relu"),
        ),
        (
            "triton_red_fused_add_addmm_mul_native_layer_norm_split_unsqueeze_view_15",
            ("add", "addmm", "mul", "native_layer_norm", "split", "unsqueeze", "view"),
        ),
        ("triton_poi_fused_constant_pad_nd_moe_forward_0", ("constant_pad_nd", "moe_forward")),
        ("triton_poi_fused_embedding_dense_backward_index_select_1", ("embedding_dense_backward", "index_select")),
        ("triton_tem_fused_addmm_gelu_0", ("addmm", "gelu")),
        ("triton_poi_fused__my_new_op_add_5", ("_my", "new", "op", "add")),
        ("triton_poi_fused_add_mul", ("add", "mul")),
        ("triton_poi_fused_0", ()),
        ("triton__0d1d2d", ()),
        ("attn_fwd", ()),
        ("", ()),
    ],
)
def test_inductor_ops(name: str, components: tuple[str, ...]) -> None:
    assert inductor_ops(name) == components


def test_classification_carries_components() -> None:
    result = classify("triton_red_fused_add_mean_mul_pow_rsqrt_0", "AMD")
    assert result == Classification(
        "RMSNorm", "inductor_rmsnorm", ("add", "mean", "mul", "pow", "rsqrt"), (), "Inductor", ""
    )


# --- hostile and odd input ----------------------------------------------------


def test_empty_name_is_other() -> None:
    assert classify("") == Classification("Other", "unclassified", ())


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("ncclKernel_AllReduce_" + "x" * 10_000_000, "Communication"),
        ("cutlass_" * 1_250_000, "Other"),
        ("triton_poi_fused_" + "add_" * 2_500_000, "Elementwise"),
        ("a" * (10_000_000 - 4) + "gemm", "Other"),
        ("\u00e9\u4e2d\U0001f600" * 3_000_000, "Other"),
    ],
    ids=["nccl-prefix", "repeated-cutlass", "huge-inductor", "gemm-past-window", "unicode"],
)
def test_ten_megabyte_names_are_fast(name: str, expected: str) -> None:
    start = time.perf_counter()
    result = classify(name)
    assert time.perf_counter() - start < 0.5
    assert result.kernel_type == expected
    assert len(name) > MAX_MATCH_CHARS and result.components == ()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_classifies(name: str) -> None:
    result = classify(name, "NVIDIA")
    assert result.kernel_type in KERNEL_TYPES
    assert isinstance(inductor_ops(name), tuple)
    assert set(result.fused_components) <= set(KERNEL_TYPES) - {result.kernel_type}
    assert result.helper in ("", *HELPER_ROLES)


def test_matching_ignores_case() -> None:
    assert classify("NCCLKERNEL_ALLREDUCE").kernel_type == "Communication"
    assert classify("cijk_alik_bljk_bbs", "AMD").kernel_type == "GEMM"


# --- classify_names ---------------------------------------------------------------


def test_classify_names_one_row_per_distinct_name() -> None:
    names = ["attn_fwd", TENSILE, "attn_fwd", "triton_poi_fused_add_0", TENSILE, "mystery"]
    table = classify_names(names, "AMD")
    assert list(table.index) == ["attn_fwd", TENSILE, "triton_poi_fused_add_0", "mystery"]
    assert table.index.name == "name"
    assert list(table.columns) == list(COLUMNS)
    assert list(table["type"]) == ["Attention", "GEMM", "Elementwise", "Other"]
    assert list(table["rule"]) == ["fmha", "tensile_gemm", "inductor_poi", "unclassified"]
    assert list(table["implementation"]) == ["Triton", "Tensile", "Inductor", ""]
    assert list(table["components"]) == [(), (), ("add",), ()]
    for name in table.index:
        assert tuple(table.loc[name]) == tuple(vars(classify(name, "AMD")).values())


def test_classify_names_empty() -> None:
    table = classify_names([])
    assert table.empty and list(table.columns) == list(COLUMNS)


def _timed(names: list[str]) -> tuple[float, pd.DataFrame]:
    start = time.perf_counter()
    table = classify_names(names)
    return time.perf_counter() - start, table


def test_classify_names_is_linear() -> None:
    """Ten times the names take about ten times as long (the absolute speed is measured in bench/)."""
    names = [f"hostile_kernel_{i}_" + "q" * 150 for i in range(10_000)]
    small = min(_timed(names[:1_000])[0] for _ in range(3))
    large = [_timed(names) for _ in range(2)]
    assert min(seconds for seconds, _ in large) < LINEAR_SLACK * 10 * small
    table = large[-1][1]
    assert len(table) == len(names) and set(table["type"]) == {"Other"}


# --- user rules (FUSION_RULES) ------------------------------------------------------

USER_RULES = """
compound_ops = ["my_fancy_op"]

[[rule]]
id = "my_attention"
type = "Attention"
pattern = '^my_custom_kernel|foo[|]bar'
note = "our in-house attention kernel"

[[rule]]
id = "nvjet_as_other"
type = "Other"
pattern = '^nvjet_'
vendor = "NVIDIA"
note = "override a built-in rule"
"""


def _use_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, name: str = "rules.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    monkeypatch.setenv(RULES_ENV, str(path))
    return path


def test_user_rules_come_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _use_rules(tmp_path, monkeypatch, USER_RULES)
    assert classify("my_custom_kernel_v2").rule == "my_attention"
    assert classify("xx foo|bar yy").rule == "my_attention"
    assert classify("xmy_custom_kernel").rule == "unclassified"
    assert classify(NVJET, "NVIDIA").rule == "nvjet_as_other"
    assert classify(NVJET, "unknown").rule == "nvjet_as_other"
    assert classify(TENSILE, "AMD").rule == "tensile_gemm"
    assert inductor_ops("triton_poi_fused_my_fancy_op_add_0") == ("my_fancy_op", "add")


def test_a_user_single_op_rule_marks_names_of_any_type(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = "void my_scale_kernel<float>(float*, float)"
    assert not classify(name).single_op
    _use_rules(tmp_path, monkeypatch, '[[single_op]]\nid = "my_scale"\npattern = "my_scale_kernel"\n')
    assert classify(name).single_op and classify(name).kernel_type == "Other"
    assert not classify("my_other_kernel").single_op


def test_user_rules_follow_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _use_rules(tmp_path, monkeypatch, USER_RULES)
    assert classify(NVJET, "NVIDIA").kernel_type == "Other"
    _use_rules(tmp_path, monkeypatch, USER_RULES.replace('type = "Other"', 'type = "Attention"'), "other.toml")
    assert classify(NVJET, "NVIDIA").kernel_type == "Attention"
    monkeypatch.delenv(RULES_ENV)
    assert classify(NVJET, "NVIDIA").kernel_type == "GEMM"
    assert classify("my_custom_kernel_v2").kernel_type == "Other"


def _rule(pattern: str = "'^x_'", extra: str = "", rule_type: str = "GEMM", rule_id: str = "bad_one") -> str:
    return f'[[rule]]\nid = "{rule_id}"\ntype = "{rule_type}"\npattern = {pattern}\n{extra}\n'


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (_rule(rule_type="Matmul"), "type 'Matmul' is not one of"),
        (_rule(pattern="'(unclosed'"), "not a valid regex"),
        (_rule(pattern="'(a|aa)+b'"), "repeats a group"),
        (_rule(pattern="'cutlass.*gemm'"), "unbounded repeat"),
        (_rule(pattern=r"'(x)\1'"), "back-reference"),
        (_rule(pattern="'Cijk_'"), "upper-case"),
        (_rule(pattern="''"), "'pattern' must be a non-empty string"),
        (_rule(extra='patern = "x"'), "unknown keys"),
        (_rule(extra='vendor = "Intel"'), "vendor must be"),
        (_rule() + _rule(), "duplicate id"),
        (_rule(rule_id="tensile_gemm"), "already used by a built-in rule"),
        ('[[single_op]]\nid = "aten_binary_functor"\npattern = "x"\n', "already used by a built-in rule"),
        ('[[single_op]]\nid = "no_pattern"\n', "'pattern' must be a non-empty string"),
        ("rules = 3\n", "unknown top-level keys"),
        ("compound_ops = ['plain']\n", "compound_ops"),
        ("[[rule]\n", "cannot read rules file"),
    ],
)
def test_bad_user_rules_raise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, problem: str) -> None:
    path = _use_rules(tmp_path, monkeypatch, text)
    with pytest.raises(ConfigError, match=re.escape(str(path))) as error:
        classify("anything")
        type_from_op("Other", "aten::mm", "")
    assert problem in str(error.value)
    rule_id = re.search(r'id = "(\w+)"', text)
    assert rule_id is None or f" {rule_id.group(1)!r}: " in str(error.value)


def test_missing_user_rules_file_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RULES_ENV, str(tmp_path / "absent.toml"))
    with pytest.raises(ConfigError, match="absent.toml"):
        classify_names(["attn_fwd"])


# --- new rule-file keys are validated like the old ones ------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (_rule(extra='fused = ["Matmul"]'), "fused: 'Matmul' is not one of"),
        (_rule(extra='fused = "SwiGLU"'), "'fused' must be a list"),
        (_rule(extra='helper = "reducer"'), "helper 'reducer' is not one of"),
        ('[[component]]\nid = "c1"\npattern = "x"\nfused = ["GELU"]\n', "'fused' and 'types' must each list"),
        (
            '[[component]]\nid = "c2"\npattern = "x"\nfused = ["GELU"]\ntypes = ["Gemm"]\n',
            "types: 'Gemm' is not one of",
        ),
        ('[[implementation]]\nid = "i1"\npattern = "x"\n', "'implementation' must be a non-empty string"),
        ('[[inductor_op]]\nid = "o1"\ntype = "GEMM"\n', "needs 'all' or 'any'"),
        ('[[inductor_op]]\nid = "o2"\ntype = "GEMM"\nany = ["mm"]\nkinds = ["pointwise"]\n', "kinds: 'pointwise'"),
        ('[[inductor_op]]\nid = "o3"\ntype = "GEMM"\nany = ["mm"]\nalone = "yes"\n', "'alone' must be true or false"),
        ('[inductor]\nimplementation = "X"\n', "[inductor] settings belong to the built-in rules"),
        ('[[op]]\nid = "p1"\ntype = "GEMM"\npattern = "aten::.*"\n', "unbounded repeat"),
        ('[[op]]\nid = "p2"\ntype = "GEMM"\npattern = "x"\noverrides = ["GEMM"]\n', "unknown keys ['overrides']"),
        ('[[op]]\nid = "op_gemm"\ntype = "GEMM"\npattern = "x"\n', "already used by a built-in rule"),
        (
            '[[equivalent]]\ncanonical = "a::x"\nops = ["a::y"]\n[[equivalent]]\ncanonical = "a::z"\nops = ["a::y"]\n',
            "already equivalent to",
        ),
    ],
)
def test_bad_new_keys_raise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, problem: str) -> None:
    path = _use_rules(tmp_path, monkeypatch, text)
    with pytest.raises(ConfigError, match=re.escape(str(path))) as error:
        classify("anything")
        type_from_op("Other", "aten::mm", "")
        canonical_op("aten::mm")
    assert problem in str(error.value)


def test_rules_path_is_read_through_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RULES_ENV, "   ")
    assert classify(NVJET, "NVIDIA").rule == "nvjet_gemm"


def test_user_op_rules_come_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _use_rules(
        tmp_path,
        monkeypatch,
        "[[op]]\nid = 'my_op'\ntype = 'Attention'\npattern = 'mylib::fancy_\\w{0,20}'\n"
        '[[equivalent]]\ncanonical = "mylib::a"\nops = ["mylib::b"]\n',
    )
    assert type_from_op("Other", "mylib::fancy_attn", "") == ("Attention", "op")
    assert canonical_op("mylib::b") == "mylib::a"
    assert canonical_op("aten::addmm") == "aten::mm"


# --- fused components, implementation, helper roles ----------------------------------------------

CUTLASS_SWIGLU = (
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
    "cutlass::epilogue::collective::CollectiveEpilogue<cutlass::epilogue::fusion::"
    "LinCombDeEltActSiLuAndMul<cutlass::bfloat16_t, float> > > >(Params)"
)


@pytest.mark.parametrize(
    ("name", "platform", "expected"),
    [
        (CUTLASS_SWIGLU, "NVIDIA", ("GEMM", ("SwiGLU",), "CUTLASS", "")),
        ("triton_tem_fused_add_addmm_mean_mul_pow_rsqrt_1", "NVIDIA", ("GEMM", ("RMSNorm",), "Inductor", "")),
        ("triton_tem_fused_addmm_gelu_0", "NVIDIA", ("GEMM", ("GELU",), "Inductor", "")),
        ("triton_poi_fused_mul_silu_0", "AMD", ("SwiGLU", (), "Inductor", "")),
        ("triton_poi_fused_silu_0", "AMD", ("SiLU", (), "Inductor", "")),
        ("triton_poi_fused__to_copy_1", "AMD", ("Cast", (), "Inductor", "")),
        ("triton_poi_fused__to_copy_add_mul_2", "AMD", ("Elementwise", ("Cast",), "Inductor", "")),
        ("triton_tem_fused__to_copy_mm_4", "NVIDIA", ("GEMM", ("Cast",), "Inductor", "")),
        ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "AMD", ("RMSNorm", (), "Inductor", "")),
        ("triton_per_fused__softmax_12", "AMD", ("Softmax", (), "Inductor", "")),
        ("triton_poi_fused_addmm_gelu_view_17", "AMD", ("GELU", ("Elementwise",), "Inductor", "")),
        (
            "triton_per_fused__native_batch_norm_legit_functional_relu_4",
            "AMD",
            ("BatchNorm", ("ReLU",), "Inductor", ""),
        ),
        ("triton_red_fused_mean_pow_rsqrt_0", "AMD", ("RMSNorm", (), "Inductor", "")),
        ("triton_tem_fused_0", "AMD", ("GEMM", (), "Inductor", "")),
        ("triton_red_fused_sum_0", "AMD", ("Reduce", (), "Inductor", "")),
        (
            "std::enable_if<true, void>::type vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*)",
            "NVIDIA",
            ("RMSNorm", ("Elementwise",), "vLLM", ""),
        ),
        (
            "_ZN5aiter24add_rmsnorm_quant_kernelIDF16bDF16bLi64ELi8ELb0ELb0ELb1ELi1EEEvPT0_PT_PfS4_S4_S4_diiiiiiib",
            "AMD",
            ("RMSNorm", ("Elementwise", "Quantize"), "aiter", ""),
        ),
        (
            "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>(c10::BFloat16*)",
            "NVIDIA",
            ("SwiGLU", (), "vLLM", ""),
        ),
        ("_matmul_ogs_NNT_bf16xbf16xmxfp4_128x128x128x1_swiglu", "AMD", ("MoE_GEMM", ("SwiGLU",), "Triton", "")),
        (
            "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8>(Params)",
            "NVIDIA",
            ("GEMM", (), "CUTLASS", ""),
        ),
        (
            "void splitKreduce_kernel<float, float, float, float, true, false, false>(cublasSplitKParams<float>, float const*)",
            "NVIDIA",
            ("GEMM", (), "cuBLAS", "split_k_reduce"),
        ),
        ("Cijk_SS_BiasS_HAS_ScaleAlphaVec_PostGSU16_VW4", "AMD", ("GEMM", (), "Tensile", "split_k_reduce")),
        (
            "void flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>, 16, 4, false>(Flash_fwd_params)",
            "NVIDIA",
            ("Attention", (), "FlashAttention", "split_kv_combine"),
        ),
        ("reduce_segments", "AMD", ("Attention", (), "vLLM", "split_kv_combine")),
        (
            "void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, int>::Policy800, false, long, int, int, int>(int*)",
            "NVIDIA",
            ("Sort", (), "cub", "sort_pass"),
        ),
        (
            "void cub::DeviceRadixSortHistogramKernel<cub::DeviceRadixSortPolicy<long, int, int>::Policy800, false, long, int>(int*)",
            "NVIDIA",
            ("Sort", (), "cub", ""),
        ),
        # composable_kernel: the output (CDE) op is the last element_wise template argument. Names shortened; the
        # mangled one follows the xdit trace's spelling (12element_wise11PassThroughE, later ops after a substitution).
        (
            "void ck::kernel_gemm_multiple_d_xdl_cshuffle<ck::GridwiseGemmMultipleD_xdl_cshuffle<ck::half_t, float,"
            " ck::tensor_operation::element_wise::PassThrough, ck::tensor_operation::element_wise::PassThrough,"
            " ck::tensor_operation::element_wise::AddFastGelu, 256>, true>(ck::half_t const*)",
            "AMD",
            ("GEMM", ("GELU", "Elementwise"), "CK", ""),
        ),
        (
            "_ZN2ck26kernel_gemm_xdl_cshuffle_v3INS_28GridwiseGemm_xdl_cshuffle_v3INS_13tensor_layout4gemm8RowMajorENS3_11Column"
            "MajorES4_DF16_S6_fS6_S6_NS_16tensor_operation12element_wise11PassThroughESA_NS8_7AddReluELi256EEELb1EEEvNT_8ArgumentE",
            "AMD",
            ("GEMM", ("ReLU", "Elementwise"), "CK", ""),
        ),
        (
            "void ck::kernel_gemm_xdl_cshuffle_v3<ck::GridwiseGemm_xdl_cshuffle_v3<ck::tensor_layout::gemm::RowMajor,"
            " ck::tensor_operation::element_wise::PassThrough, ck::tensor_operation::element_wise::Multiply,"
            " ck::tensor_operation::element_wise::PassThrough, 256> >(int)",
            "AMD",
            ("GEMM", (), "CK", ""),
        ),
        (
            "void ck::kernel_batched_gemm_softmax_gemm_xdl_cshuffle_v1<ck::GridwiseBatchedGemmSoftmaxGemm_Xdl_CShuffle<ck::half_t,"
            " ck::tensor_operation::element_wise::PassThrough, ck::tensor_operation::element_wise::Scale> >(int)",
            "AMD",
            ("Attention", (), "CK", ""),
        ),
    ],
    ids=lambda v: str(v)[:40],
)
def test_fused_components_implementation_and_helper(name: str, platform: str, expected: tuple) -> None:
    result = classify(name, platform)
    assert (result.kernel_type, result.fused_components, result.implementation, result.helper) == expected


def test_helper_roles_are_known() -> None:
    data = tomllib.loads(BUILTIN_RULES.read_text(encoding="utf-8"))
    assert {r["helper"] for r in data["rule"] if "helper" in r} == set(HELPER_ROLES)


# --- op-based typing -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name_type", "op", "op_top", "expected"),
    [
        ("Other", "aten::addmm", "aten::linear", ("GEMM", "op")),
        ("Other", "aten::cudnn_convolution", "aten::conv2d", ("Convolution", "op")),
        (
            "Other",
            "aten::_scaled_dot_product_flash_attention",
            "aten::scaled_dot_product_attention",
            ("Attention", "op"),
        ),
        ("Other", "aten::_flash_attention_forward", "aten::scaled_dot_product_attention", ("Attention", "op")),
        ("Other", "vllm::unified_attention", "vllm::unified_attention", ("Attention", "op")),
        ("Other", "deep_ep::dispatch", "", ("Communication", "op")),
        ("Other", "aten::embedding", "aten::embedding", ("Embedding", "op")),
        ("Other", "aten::native_layer_norm", "aten::layer_norm", ("LayerNorm", "op")),
        ("Other", "", "", ("Other", "unknown")),
        ("Other", "mylib::mystery", "", ("Other", "unknown")),
        ("GEMM", "aten::miopen_convolution", "aten::conv2d", ("GEMM", "name")),
        ("Convolution", "aten::miopen_convolution", "aten::conv2d", ("Convolution", "name")),
        ("GEMM", "aten::addmm", "aten::linear", ("GEMM", "name")),
        ("Elementwise", "aten::index_select", "aten::embedding", ("Elementwise", "name")),
        ("MemCopy", "aten::copy_", "aten::to", ("MemCopy", "name")),
        ("MemCopy", "aten::_to_copy", "aten::_to_copy", ("MemCopy", "name")),
        ("MemCopy", "aten::copy_", "aten::contiguous", ("MemCopy", "name")),
        ("Memset", "aten::fill_", "aten::_flash_attention_forward", ("Memset", "name")),
        ("SiLU", "aten::silu", "aten::silu", ("SiLU", "name")),
        ("Other", "aten::copy_", "aten::to", ("Cast", "op")),
        ("Other", "aten::copy_", "aten::clone", ("MemCopy", "op")),
        ("Other", "aten::add_", "aten::conv2d", ("Convolution", "op")),
        ("Elementwise", "aten::add", "aten::add", ("Elementwise", "name")),
        ("LayerNorm", "aten::native_group_norm", "aten::group_norm", ("LayerNorm", "name")),
        ("LayerNorm", "aten::_fused_rms_norm", "aten::rms_norm", ("LayerNorm", "name")),
        ("MemCopy", "aten::cudnn_convolution", "aten::conv2d", ("MemCopy", "name")),
        ("Elementwise", "aten::add_", "aten::conv2d", ("Elementwise", "name")),
        ("LayerNorm", "aten::native_layer_norm", "aten::layer_norm", ("LayerNorm", "name")),
    ],
)
def test_type_from_op(name_type: str, op: str, op_top: str, expected: tuple[str, str]) -> None:
    assert type_from_op(name_type, op, op_top) == expected


@pytest.mark.parametrize(
    ("op", "canonical"),
    [
        ("aten::addmm", "aten::mm"),
        ("aten::linear", "aten::mm"),
        ("aten::mm", "aten::mm"),
        ("aten::_scaled_dot_product_flash_attention", "aten::scaled_dot_product_attention"),
        ("aten::_scaled_dot_product_efficient_attention", "aten::scaled_dot_product_attention"),
        ("aten::_scaled_dot_product_cudnn_attention", "aten::scaled_dot_product_attention"),
        ("aten::_flash_attention_forward", "aten::scaled_dot_product_attention"),
        ("aten::cudnn_convolution", "aten::convolution"),
        ("aten::miopen_convolution", "aten::convolution"),
        ("aten::native_layer_norm", "aten::layer_norm"),
        ("aten::add", "aten::add"),
        ("", ""),
    ],
)
def test_canonical_op(op: str, canonical: str) -> None:
    assert canonical_op(op) == canonical


def test_op_rule_types_are_known() -> None:
    data = tomllib.loads(BUILTIN_OP_RULES.read_text(encoding="utf-8"))
    assert {r["type"] for r in data["op"]} <= set(KERNEL_TYPES)
    assert [r["id"] for r in data["op"] if len(r.get("note", "")) < 20] == []


# Real launching ops (PyTorch profiler cpu_op names, vLLM/SGLang custom ops) and the type each gives
# a kernel whose name says nothing.
REAL_OPS = [
    ("aten::mm", "GEMM"),
    ("aten::bmm", "GEMM"),
    ("aten::_scaled_mm", "GEMM"),
    ("vllm::rocm_unquantized_gemm", "GEMM"),
    ("aten::miopen_convolution", "Convolution"),
    ("aten::cudnn_convolution", "Convolution"),
    ("aten::_scaled_dot_product_efficient_attention", "Attention"),
    ("aten::_efficient_attention_forward", "Attention"),
    ("vllm::unified_attention_with_output", "Attention"),
    ("aiter::fmha_v3_fwd", "Attention"),
    ("deep_ep::combine", "Communication"),
    ("c10d::allreduce_", "Communication"),
    ("vllm::all_reduce", "Communication"),
    ("aten::embedding", "Embedding"),
    ("aten::layer_norm", "LayerNorm"),
    ("_C::fused_add_rms_norm", "RMSNorm"),
    ("aten::cudnn_batch_norm", "BatchNorm"),
    ("aten::group_norm", "GroupNorm"),
    ("aten::_softmax", "Softmax"),
    ("_C::silu_and_mul", "SwiGLU"),
    ("aten::silu", "SiLU"),
    ("aten::gelu", "GELU"),
    ("_C::rotary_embedding", "RoPE"),
    ("_C::scaled_fp8_quant", "Quantize"),
    ("aten::sort", "Sort"),
    ("aten::cumsum", "Scan"),
    ("aten::fill_", "Memset"),
    ("aten::clone", "MemCopy"),
    ("aten::_to_copy", "Cast"),
    ("aten::sum", "Reduce"),
    ("aten::mul", "Elementwise"),
]


@pytest.mark.parametrize(("op", "expected"), REAL_OPS)
def test_real_ops_type_unnamed_kernels(op: str, expected: str) -> None:
    assert type_from_op("Other", op, "") == (expected, "op")
    assert type_from_op("Other", "", op) == (expected, "op")


def test_real_ops_cover_every_op_rule_type() -> None:
    data = tomllib.loads(BUILTIN_OP_RULES.read_text(encoding="utf-8"))
    assert {r["type"] for r in data["op"]} == {expected for _, expected in REAL_OPS}


@pytest.mark.parametrize("suffix", [".kd", " [clone .kd]"])
def test_a_code_object_symbol_is_classified_as_its_kernel(suffix):
    """rocprofv3 names kernels by code-object symbol: the suffix is no Inductor op word (no fused Elementwise)."""
    name = "triton_poi_fused_mul_silu_slice_0"
    assert classify(name + suffix, "AMD") == classify(name, "AMD")
    assert classify(name, "AMD").fused_components == ()
    assert classify("_gemm_a8w8_blockscale_reduce_kernel" + suffix, "AMD").helper == "split_k_reduce"
