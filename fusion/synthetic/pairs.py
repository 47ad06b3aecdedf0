"""Synthetic AMD/NVIDIA Kineto trace pairs with known fusion differences.

The generator models the decode loop of a vLLM MoE model and lowers every op to
kernels per platform, injecting chosen fusion differences (and differences that
are *not* fusions) so the comparison engine can be scored against ground truth.
Events are streamed to the output file one step at a time, so 1 GB traces need
no more memory than a 1 MB one.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import random
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import orjson

ALL_FUSIONS: tuple[str, ...] = ("add_rmsnorm", "moe_swiglu", "sort_chain", "inductor_silu")
CASES: tuple[str, ...] = (
    "gemm_silu_epilogue",
    "template_rmsnorm",
    "split_k",
    "split_k_partial",
    "unknown_attention",
    "gemv_split",
)
"""Further differences, off by default: a GEMM epilogue and an Inductor template prologue fusion, split-K on
NVIDIA (every o_proj and lm_head call; or only o_proj while AMD runs one GEMM name for every shape), an
NVIDIA attention kernel no classification rule knows, and the QKV projection run on NVIDIA as a cuBLAS GEMV with
its two-pass reduce (dot_kernel + reduce_1Block_kernel): another kernel-name pattern than split-K, so another
finding."""
SCENARIOS: tuple[str, ...] = ("full_graph", "piecewise", "eager")
AMD, NVIDIA = "AMD", "NVIDIA"
PLATFORMS: tuple[str, str] = (AMD, NVIDIA)


@dataclass(frozen=True)
class PairSpec:
    """What to generate. Trace 1 is always AMD, trace 2 NVIDIA."""

    scenario: str = "full_graph"
    layers: int = 16
    steps: int = 8
    fusions: tuple[str, ...] = ALL_FUSIONS
    non_fusion: bool = True
    steps2: int | None = None
    seed: int = 0
    prefill: bool = False
    prefill2: bool | None = None
    cpu_fill: int = 0
    cpu_fill2: int | None = None
    cases: tuple[str, ...] = ()
    group_cuts: bool = False
    """Cut each decode step's graph launches into pieces of GROUP_PIECE kernels, in one of CUT_PATTERNS
    patterns per side (step i uses pattern i mod CUT_PATTERNS): many distinct groups, as in issue 14's pair."""
    piecewise_every: int = 0
    """Every this many decode steps, one runs piecewise (graphs between eager attention); 0: never."""
    prep_share: float = 1.0
    """Host-side prep calls per graph-launched kernel (the CPU bytes around each graph launch)."""

    def __post_init__(self) -> None:
        if self.scenario not in SCENARIOS:
            raise ValueError(f"scenario must be one of {SCENARIOS}, got {self.scenario!r}")
        unknown = set(self.fusions) - set(ALL_FUSIONS)
        if unknown:
            raise ValueError(f"unknown fusions {sorted(unknown)}; known: {ALL_FUSIONS}")
        if set(self.cases) - set(CASES):
            raise ValueError(f"unknown cases {sorted(set(self.cases) - set(CASES))}; known: {CASES}")
        if self.layers < 1 or self.steps < 1 or (self.steps2 is not None and self.steps2 < 1):
            raise ValueError("layers and steps must be >= 1")
        if self.piecewise_every < 0 or self.prep_share < 0:
            raise ValueError("piecewise_every and prep_share must be >= 0")

    @classmethod
    def from_dict(cls, data: dict) -> PairSpec:
        """Rebuild a spec from its ground-truth JSON form."""
        return cls(**{**data, "fusions": tuple(data["fusions"]), "cases": tuple(data.get("cases", ()))})

    def for_trace(self, trace: int) -> tuple[int, bool, int]:
        """(steps, prefill, cpu_fill) for trace 1 or 2."""
        if trace == 1:
            return self.steps, self.prefill, self.cpu_fill
        return (
            self.steps if self.steps2 is None else self.steps2,
            self.prefill if self.prefill2 is None else self.prefill2,
            self.cpu_fill if self.cpu_fill2 is None else self.cpu_fill2,
        )


@dataclass(frozen=True)
class PairFiles:
    trace1: Path
    trace2: Path
    ground_truth: Path


@dataclass(frozen=True)
class Kernel:
    """A kernel template: name, the type the classifier should give it, mean duration (µs)."""

    name: str
    ktype: str
    dur: float
    op: str
    grid: tuple[int, int, int] = (256, 1, 1)
    block: tuple[int, int, int] = (256, 1, 1)


# Roles decide how a kernel is launched: "graph" kernels are captured in CUDA/HIP graphs,
# "split" kernels run eagerly between piecewise graphs (attention), "tail" runs eagerly
# after the model graph (logits and sampling).
Slot = tuple[str, Kernel]

_CIJK_TAIL = (
    "_MI16x16x1_SN_LDSB1_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA8_GRVWB8"
    "_GSUAMB_GLS0_ISA942_IU1_K1_LBSPPA512_LBSPPB512_LBSPPM0_LPA16_LPB16_LPM0_LRVW8_LWPMn1_MIAV0_MIWT2_2"
    "_MO40_NTn1_NTA0_NTB0_NTC0_NTD4_NTM0_NEPBS16_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO0_SRVW0"
    "_SSO0_SVW1_SK0_SKXCCM0_TLDS1_ULSGRO0_USL1_UIOFGRO0_USFGROn1_VSn1_VWA1_VWB1_WSGRA0_WSGRB0_WS64_WG64_4_1"
)


def _cijk(tile: str) -> str:
    return f"Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT{tile}{_CIJK_TAIL}"


_BF16 = {AMD: "__hip_bfloat16", NVIDIA: "__nv_bfloat16"}
_RMS_NORM = (
    "void vllm::rms_norm_kernel<c10::BFloat16, 8, 2>(c10::BFloat16*, c10::BFloat16 const*, long, long, long,"
    " long, long, c10::BFloat16 const*, float, int, int)"
)
_FUSED_ADD_RMS_NORM = (
    "std::enable_if<(((8)>(0)))&&vllm::_typeConvert<c10::BFloat16>::exists, void>::type"
    " vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, long, c10::BFloat16*,"
    " c10::BFloat16 const*, float, int, int)"
)
_ADD = (
    "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>,"
    " std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"
)
_ROPE = (
    "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*,"
    " c10::BFloat16 const*, int, long, long, long, int, int, int)"
)
_GATHER = "void at::native::vectorized_gather_kernel<16, long>(char*, char*, long*, int, long, long, long, long, bool)"
_SILU_AND_MUL = (
    "void vllm::act_and_mul_kernel<c10::BFloat16, &(c10::BFloat16 vllm::silu_kernel<c10::BFloat16>"
    "(c10::BFloat16 const&)), true>(c10::BFloat16*, c10::BFloat16 const*, int)"
)
_SOFTMAX = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float,"
    " at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)"
)
_ARGMAX = (
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>,"
    " unsigned int, long, 4, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int,"
    " long, 4, 4>)"
)
_MOE_GEMM = "_matmul_ogs_NNT_bf16xbf16xmxfp4_16x128x256x1"
_INDUCTOR_SILU = "triton_poi_fused_add_mul_silu_3"
_AMD_SORT_PASS = (
    "void rocprim::detail::onesweep_iteration_kernel<rocprim::detail::wrapped_radix_sort_onesweep_config"
    "<rocprim::default_config, int, int>, false, int*, int*, int*, int*, unsigned int,"
    " rocprim::identity_decomposer>(int*, int*, int*, int*, int*, int*, unsigned int, unsigned int*,"
    " unsigned int*, unsigned int, unsigned int, unsigned int, rocprim::identity_decomposer)"
)
_NV_SORT = (
    "void cub::DeviceRadixSortSingleTileKernel<cub::DeviceRadixSortPolicy<int, int, int>::Policy800, false,"
    " int, int, int, int, cub::detail::identity_decomposer_t>(int const*, int*, int const*, int*, int, int,"
    " int, cub::detail::identity_decomposer_t)"
)
_NV_ATTN = (
    "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<64, 64, 256, 4, false, false,"
    " cutlass::bfloat16_t, Flash_kernel_traits<64, 64, 256, 4, cutlass::bfloat16_t> >, true, false, false,"
    " false, true, true, false, false>(flash::Flash_fwd_params)"
)
_NV_PREFILL_ATTN = (
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 64, 4, false, false, cutlass::bfloat16_t,"
    " Flash_kernel_traits<64, 128, 64, 4, cutlass::bfloat16_t> >, true, false, false, false, true, true,"
    " false, false>(flash::Flash_fwd_params)"
)
_NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
_RCCL = "ncclDevKernel_Generic(ncclDevComm*, channelMasks, ncclWork*)"
_AMD_MEMSET = "__amd_rocclr_fillBufferAligned"
_AMD_ANY_SHAPE_GEMM = _cijk("128x128x64")
_SPLIT_K_REDUCE = Kernel(
    "void cublasLt::splitKreduce_kernel<32, 16, int, __nv_bfloat16, __nv_bfloat16, float, __nv_bfloat16, true,"
    " true, false>(cublasLt::cublasSplitKParams<float>, __nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*,"
    " float const*, float const*, __nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, void*, long, float*,"
    " int*)",
    "GEMM",
    3.0,
    "aten::mm",
    (48, 1, 1),
    (512, 1, 1),
)
_GEMV = Kernel(
    "void dot_kernel<float, 128, 0, cublasDotParams<cublasGemvTensorStridedBatched<__nv_bfloat16 const>,"
    " cublasGemvTensorStridedBatched<float> > >(cublasDotParams<cublasGemvTensorStridedBatched<__nv_bfloat16"
    " const>, cublasGemvTensorStridedBatched<float> >)",
    "GEMM",
    14.0,
    "aten::mm",
    (256, 1, 1),
    (128, 1, 1),
)
_GEMV_REDUCE = Kernel(
    "void cublasLt::reduce_1Block_kernel<float, float, float, 64, 8>(float const*, float*, int, int)",
    "GEMM",
    2.0,
    "aten::mm",
    (1, 1, 1),
    (64, 1, 1),
)
_CUTLASS_SILU_AND_MUL = (
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>,"
    " cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecializedCooperative<4,"
    " cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cutlass::gemm::KernelTmaWarpSpecializedCooperative>,"
    " cute::tuple<cute::C<128>, cute::C<128>, cute::C<64> >, cutlass::bfloat16_t>,"
    " cutlass::epilogue::collective::CollectiveEpilogue<cutlass::epilogue::Sm90TmaWarpSpecializedCooperative,"
    " cutlass::epilogue::fusion::LinCombDeEltActSiLuAndMul<cutlass::bfloat16_t, float> >, void> >"
    "(cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int> >::Params)"
)
_TEMPLATE_RMSNORM_GEMM = "triton_tem_fused_addmm_mean_mul_pow_rsqrt_0"
_UNKNOWN_ATTN = "void hkv_fwd_tile_kernel<128, 64, 2>(HKParams)"
"""An attention kernel of a family no rule knows (made up, so that no future rule learns it)."""

_GEMM_NAMES = {
    AMD: {"qkv": _cijk("256x128x64"), "o_proj": _cijk("128x64x64"), "lm_head": _cijk("256x256x64")},
    NVIDIA: {
        "qkv": "nvjet_tst_128x64_64x8_1x1_v_bz_TNT",
        "o_proj": "nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT",
        "lm_head": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"
        "_execute_segment_k_off_kernel__5x_cublas",
    },
}
_GEMM_DUR = {"qkv": 18.0, "o_proj": 12.0, "lm_head": 140.0}


def _kv_cache(platform: str) -> str:
    t = _BF16[platform]
    tail = ", int)" if platform == AMD else ")"
    return (
        f"void vllm::reshape_and_cache_flash_kernel<{t}, {t}, (vllm::Fp8KVCacheDataType)0>({t} const*,"
        f" {t} const*, {t}*, {t}*, long const*, long, long, long, long, long, int, int, int, float const*,"
        f" float const*{tail}"
    )


def _gemm(platform: str, role: str, spec: PairSpec) -> Kernel:
    dur = _GEMM_DUR[role] * (1.1 if platform == AMD else 1.0)
    one_name = platform == AMD and "split_k_partial" in spec.cases
    name = _AMD_ANY_SHAPE_GEMM if one_name else _GEMM_NAMES[platform][role]
    return Kernel(name, "GEMM", dur, "aten::mm", (304, 1, 1), (256, 1, 1))


def _split_k_roles(platform: str, spec: PairSpec) -> tuple[str, ...]:
    """GEMM roles that NVIDIA runs as GEMM + splitKreduce."""
    if platform != NVIDIA:
        return ()
    return ("o_proj", "lm_head") if "split_k" in spec.cases else ("o_proj",) if "split_k_partial" in spec.cases else ()


def _gemm_call(platform: str, role: str, spec: PairSpec) -> list[Kernel]:
    """One GEMM call: its kernel, followed by a split-K reduce where the case asks for one."""
    gemm = _gemm(platform, role, spec)
    return [gemm, _SPLIT_K_REDUCE] if role in _split_k_roles(platform, spec) else [gemm]


def _attention(platform: str, prefill: bool, spec: PairSpec) -> Kernel:
    if platform == AMD:
        name, ktype = "kernel_unified_attention_2d", "Attention"
    elif "unknown_attention" in spec.cases:
        name, ktype = _UNKNOWN_ATTN, "Other"
    else:
        name, ktype = (_NV_PREFILL_ATTN if prefill else _NV_ATTN), "Attention"
    return Kernel(
        name, ktype, 38.0 if platform == AMD else 32.0, "vllm::unified_attention_with_output", (32, 8, 1), (128, 1, 1)
    )


def _fused_dur(parts: Sequence[Kernel]) -> float:
    """A fused kernel saves the extra launch and memory round trip: a bit under the sum."""
    return round(0.85 * sum(k.dur for k in parts), 3)


@dataclass(frozen=True)
class FusionSite:
    """One injected fusion: the unfused kernels on one platform, one fused kernel on the other."""

    id: str
    fused_platform: str
    fused_name: str
    fused_op: str
    unfused: tuple[Kernel, ...]
    fused_type: str
    description: str

    @property
    def fused(self) -> Kernel:
        return Kernel(self.fused_name, self.fused_type, _fused_dur(self.unfused), self.fused_op)

    def kernels(self, platform: str, enabled: bool) -> tuple[Kernel, ...]:
        """Disabled sites run the fused kernel on both platforms."""
        if enabled and platform != self.fused_platform:
            return self.unfused
        return (self.fused,)


def _sites() -> dict[str, FusionSite]:
    moe_gemm = Kernel(_MOE_GEMM, "MoE_GEMM", 62.0, "vllm::moe_forward", (64, 8, 1), (256, 1, 1))
    silu_and_mul = Kernel(_SILU_AND_MUL, "SwiGLU", 4.0, "_C::silu_and_mul", (32, 1, 1), (1024, 1, 1))
    add = Kernel(_ADD, "Elementwise", 3.0, "aten::add")
    sort_pass = Kernel(_AMD_SORT_PASS, "Sort", 3.0, "aten::sort", (16, 1, 1), (256, 1, 1))
    sites = [
        FusionSite(
            "add_rmsnorm",
            NVIDIA,
            _FUSED_ADD_RMS_NORM,
            "_C::fused_add_rms_norm",
            (add, Kernel(_RMS_NORM, "RMSNorm", 4.5, "_C::rms_norm")),
            "RMSNorm",
            "post-attention residual add + RMSNorm: AMD launches an elementwise add then rms_norm_kernel,"
            " NVIDIA one fused_add_rms_norm_kernel",
        ),
        FusionSite(
            "moe_swiglu",
            AMD,
            _MOE_GEMM + "_swiglu",
            "vllm::moe_forward",
            (moe_gemm, silu_and_mul),
            "MoE_GEMM",
            "MoE gate/up GEMM with SwiGLU epilogue: AMD runs _matmul_ogs_..._swiglu, NVIDIA the plain"
            " MoE GEMM followed by act_and_mul_kernel",
        ),
        FusionSite(
            "sort_chain",
            NVIDIA,
            _NV_SORT,
            "aten::sort",
            (sort_pass,) * 4,
            "Sort",
            "MoE token sort: AMD runs four rocprim onesweep radix passes, NVIDIA one cub single-tile sort",
        ),
        FusionSite(
            "inductor_silu",
            AMD,
            _INDUCTOR_SILU,
            "triton_poi_fused_add_mul_silu",
            (silu_and_mul, add),
            "SwiGLU",
            "shared-expert silu(gate)*up + residual: AMD runs one Inductor kernel"
            " triton_poi_fused_add_mul_silu_3, NVIDIA act_and_mul_kernel then an elementwise add",
        ),
        FusionSite(
            "gemm_silu_epilogue",
            NVIDIA,
            _CUTLASS_SILU_AND_MUL,
            "aten::mm",
            (Kernel(_cijk("256x256x64"), "GEMM", 20.0, "aten::mm", (304, 1, 1)), silu_and_mul),
            "GEMM",
            "dense MLP gate/up GEMM and SiLU-and-mul: AMD runs a hipBLASLt GEMM then act_and_mul_kernel,"
            " NVIDIA one CUTLASS GEMM whose epilogue is LinCombDeEltActSiLuAndMul",
        ),
        FusionSite(
            "template_rmsnorm",
            NVIDIA,
            _TEMPLATE_RMSNORM_GEMM,
            "aten::addmm",
            (Kernel(_RMS_NORM, "RMSNorm", 4.5, "_C::rms_norm"), _gemm(AMD, "qkv", PairSpec())),
            "GEMM",
            "input RMSNorm + QKV projection: AMD runs rms_norm_kernel then the GEMM, NVIDIA one Inductor"
            " template GEMM with the norm as its prologue (triton_tem_fused_addmm_mean_mul_pow_rsqrt_0)",
        ),
    ]
    return {s.id: s for s in sites}


SITES: dict[str, FusionSite] = _sites()


def _layer(platform: str, spec: PairSpec, prefill: bool) -> list[Slot]:
    """One decoder layer: attention block, then the MoE block."""
    on = set(spec.fusions)
    comm = Kernel(
        _RCCL if platform == AMD else _NCCL, "Communication", 15.0, "vllm::all_reduce", (64, 1, 1), (256, 1, 1)
    )
    moe_down = Kernel(_MOE_GEMM, "MoE_GEMM", 41.0, "vllm::moe_forward", (64, 8, 1), (256, 1, 1))
    topk = Kernel("_topk_forward", "MoE_Routing", 5.0, "vllm::moe_forward", (32, 1, 1), (128, 1, 1))
    slots: list[Slot] = _input_norm_and_qkv(platform, spec)
    slots += [
        ("graph", Kernel(_ROPE, "RoPE", 3.0, "_C::rotary_embedding")),
        (
            "split",
            Kernel(
                _kv_cache(platform), "KV_Cache", 3.0, "_C_cache_ops::reshape_and_cache_flash", (32, 1, 1), (128, 1, 1)
            ),
        ),
        ("split", _attention(platform, prefill, spec)),
    ]
    slots += [("graph", k) for k in _gemm_call(platform, "o_proj", spec)]
    slots.append(("graph", comm))
    slots += [("graph", k) for k in SITES["add_rmsnorm"].kernels(platform, "add_rmsnorm" in on)]
    slots.append(("graph", topk))
    for site in ("sort_chain", "moe_swiglu"):
        slots += [("graph", k) for k in SITES[site].kernels(platform, site in on)]
    slots.append(("graph", moe_down))
    slots += [("graph", k) for k in SITES["inductor_silu"].kernels(platform, "inductor_silu" in on)]
    if "gemm_silu_epilogue" in spec.cases:
        slots += [("graph", k) for k in SITES["gemm_silu_epilogue"].kernels(platform, True)]
        slots.append(("graph", Kernel(_GEMM_NAMES[platform]["o_proj"], "GEMM", 14.0, "aten::mm", (304, 1, 1))))
    return slots


def _input_norm_and_qkv(platform: str, spec: PairSpec) -> list[Slot]:
    """The layer's input RMSNorm and QKV GEMM (one template GEMM on NVIDIA with template_rmsnorm)."""
    if "template_rmsnorm" in spec.cases:
        return [("graph", k) for k in SITES["template_rmsnorm"].kernels(platform, True)]
    qkv = [_GEMV, _GEMV_REDUCE] if platform == NVIDIA and "gemv_split" in spec.cases else [_gemm(platform, "qkv", spec)]
    return [("graph", Kernel(_RMS_NORM, "RMSNorm", 4.5, "_C::rms_norm")), *(("graph", k) for k in qkv)]


def _extra_memset(platform: str, spec: PairSpec) -> bool:
    return spec.non_fusion and platform == AMD


def forward_slots(platform: str, spec: PairSpec, prefill: bool = False) -> list[Slot]:
    """All kernels of one forward pass (a decode step or a prefill), in launch order."""
    slots: list[Slot] = [("graph", Kernel(_GATHER, "Elementwise", 3.0, "aten::embedding", (32, 2, 1)))]
    if _extra_memset(platform, spec):
        slots.append(("graph", Kernel(_AMD_MEMSET, "Memset", 2.0, "aten::zero_", (64, 1, 1))))
    for _ in range(spec.layers):
        slots += _layer(platform, spec, prefill)
    slots.append(("graph", Kernel(_RMS_NORM, "RMSNorm", 4.5, "_C::rms_norm")))
    slots += [("tail", k) for k in _gemm_call(platform, "lm_head", spec)]
    slots += [
        ("tail", Kernel(_SOFTMAX, "Softmax", 8.0, "aten::softmax", (32, 1, 1), (1024, 1, 1))),
        ("tail", Kernel(_ARGMAX, "Reduce", 5.0, "aten::argmax", (32, 1, 1), (512, 1, 1))),
    ]
    return slots


def launches(slots: Sequence[Slot], scenario: str) -> list[tuple[bool, list[Kernel]]]:
    """Group a forward pass into launches: (is_graph, kernels). One correlation id per launch."""
    out: list[tuple[bool, list[Kernel]]] = []
    for role, kernel in slots:
        graph = scenario == "full_graph" or (scenario == "piecewise" and role == "graph")
        if graph and out and out[-1][0]:
            out[-1][1].append(kernel)
        else:
            out.append((graph, [kernel]))
    return out


GROUP_PIECE = (50, 150)
"""Kernels per piece when group_cuts cuts graph launches: [low, high)."""
CUT_PATTERNS = 4


def _cut(step: list[tuple[bool, list[Kernel]]], rng: random.Random) -> list[tuple[bool, list[Kernel]]]:
    """The step's graph launches cut into consecutive pieces of GROUP_PIECE kernels (the last may be shorter)."""
    out: list[tuple[bool, list[Kernel]]] = []
    for graph, kernels in step:
        if not graph:
            out.append((graph, kernels))
            continue
        start = 0
        while start < len(kernels):
            end = start + rng.randrange(*GROUP_PIECE)
            out.append((True, kernels[start:end]))
            start = end
    return out


def _step_layouts(spec: PairSpec, trace: int) -> dict[tuple[str, int], list[tuple[bool, list[Kernel]]]]:
    """Each (scenario, cut pattern) a decode step can take, built once: the Kernel objects are shared."""
    slots = forward_slots(PLATFORMS[trace - 1], spec)
    layouts = {}
    for scenario in {spec.scenario, "piecewise" if spec.piecewise_every else spec.scenario}:
        step = launches(slots, scenario)
        layouts[scenario, -1] = step
        if spec.group_cuts and scenario != "eager":
            for pattern in range(CUT_PATTERNS):
                layouts[scenario, pattern] = _cut(step, random.Random(f"{spec.seed}:{trace}:cut{pattern}"))
    return layouts


def _step_layout(spec: PairSpec, step: int) -> tuple[str, int]:
    every = spec.piecewise_every
    scenario = "piecewise" if every and step % every == every - 1 else spec.scenario
    return scenario, step % CUT_PATTERNS if spec.group_cuts and scenario != "eager" else -1


def trace_passes(spec: PairSpec, trace: int) -> Iterator[tuple[bool, list[tuple[bool, list[Kernel]]]]]:
    """Every forward pass of a trace in order as (is_prefill, launches): the optional eager prefill, then
    the decode steps."""
    platform = PLATFORMS[trace - 1]
    steps, prefill, _ = spec.for_trace(trace)
    layouts = _step_layouts(spec, trace)  # before the prefill's kernels come and go: the writer keys by id
    if prefill:
        yield True, launches(forward_slots(platform, spec, prefill=True), "eager")
    for step in range(steps):
        yield False, layouts[_step_layout(spec, step)]


def kernel_counts(spec: PairSpec, trace: int) -> dict[str, int]:
    """Exact number of kernels of each type in a trace, as loaded (a kernel's name types it whatever launches it)."""
    counts: Counter[str] = Counter()
    for _, pass_launches in trace_passes(spec, trace):
        for _, kernels in pass_launches:
            counts.update(k.ktype for k in kernels)
    return dict(sorted(counts.items()))


@dataclass(frozen=True)
class _Platform:
    """Per-vendor constants of a trace file."""

    gpu: str
    header: dict
    cpu_pid: int
    ts0: float
    corr0: int
    ext0: int
    graph_launch: str
    graph_launch_us: float
    launch: str
    gemm_launch: str
    triton_launch: str


_COMMON_PROPS = {"id": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536}
_AMD_GPU = "AMD Instinct MI300X"
_NV_GPU = "NVIDIA H100 80GB HBM3"


def _header(props: dict, versions: dict, trace_id: str, base_ns: int) -> dict:
    """Top-level keys before traceEvents, in the order Kineto writes them."""
    return {
        "schemaVersion": 1,
        "deviceProperties": [{**_COMMON_PROPS, **props}],
        **versions,
        "with_flops": 1,
        "record_shapes": 1,
        "profile_memory": 0,
        "with_stack": 1,
        "trace_id": trace_id,
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": base_ns,
    }


_PLATFORMS = {
    AMD: _Platform(
        gpu=_AMD_GPU,
        header=_header(
            {
                "name": _AMD_GPU,
                "totalGlobalMem": 206141652992,
                "computeMajor": 9,
                "computeMinor": 4,
                "warpSize": 64,
                "sharedMemPerBlock": 65536,
                "numSms": 304,
                "maxSharedMemoryPerMultiProcessor": 65536,
            },
            {"roctracer_version": 4.1, "hip_runtime_version": 70051831, "hip_driver_version": 70051831},
            "5F1C0A3E9B7D4E21A6C8D0F2B4E6A8C0",
            1767189312000000000,
        ),
        cpu_pid=851,
        ts0=6520618853000.0,
        corr0=505100,
        ext0=1479500,
        graph_launch="hipGraphLaunch",
        graph_launch_us=1.2,
        launch="hipLaunchKernel",
        gemm_launch="hipExtModuleLaunchKernel",
        triton_launch="hipModuleLaunchKernel",
    ),
    NVIDIA: _Platform(
        gpu=_NV_GPU,
        header=_header(
            {
                "name": _NV_GPU,
                "totalGlobalMem": 85018279936,
                "computeMajor": 9,
                "computeMinor": 0,
                "warpSize": 32,
                "sharedMemPerBlock": 49152,
                "numSms": 132,
                "regsPerMultiprocessor": 65536,
                "sharedMemPerBlockOptin": 232448,
                "sharedMemPerMultiprocessor": 233472,
            },
            {"cuda_runtime_version": 12080, "cupti_version": 24, "cuda_driver_version": 12090},
            "0B7E2D4C6A8F4B1D9E3C5A7F1D3B5E70",
            1752839000000000000,
        ),
        cpu_pid=25286,
        ts0=1428625731000.0,
        corr0=675700,
        ext0=18400,
        graph_launch="cudaGraphLaunch",
        graph_launch_us=0.05,
        launch="cudaLaunchKernel",
        gemm_launch="cudaLaunchKernelExC",
        triton_launch="cudaLaunchKernel",
    ),
}
_GPU_PID, _STREAM = 0, 7
_TOKENS = {False: 32, True: 2048}
_HIDDEN = 4096
_PREFILL_SCALE = 6.0
_PY_FRAMES = {
    "aten::mm": "vllm/model_executor/layers/linear.py(548): forward",
    "_C::rms_norm": "vllm/model_executor/layers/layernorm.py(254): forward_cuda",
    "_C::fused_add_rms_norm": "vllm/model_executor/layers/layernorm.py(254): forward_cuda",
    "vllm::moe_forward": "vllm/model_executor/layers/fused_moe/layer.py(1512): forward_impl",
    "vllm::unified_attention_with_output": "vllm/attention/layer.py(310): forward",
}
_PREP_OPS = ("aten::as_strided", "aten::slice", "aten::select", "aten::copy_", "aten::view", "aten::index_select")


_FIELD_CODES = {"@f@": b"%.3f", "@d@": b"%d"}


def _template(event: dict) -> bytes:
    """Pre-encode an event once: the sentinel strings "@f@" (float) and "@d@" (int) become % codes, so a
    hot event costs one bytes % tuple instead of building and encoding a dict."""
    raw = orjson.dumps(event).replace(b"%", b"%%")
    for sentinel, code in _FIELD_CODES.items():
        raw = raw.replace(orjson.dumps(sentinel), code)
    return raw


class _Writer:
    """Streams one trace: keeps the CPU and GPU clocks, ids, and a per-step event buffer."""

    def __init__(self, out: IO[bytes], platform: str, rng: random.Random) -> None:
        self.out, self.rng = out, rng
        self.p = _PLATFORMS[platform]
        self.amd = platform == AMD
        self.cpu = self.gpu = self.p.ts0
        self.corr, self.ext, self.ev_idx, self.py_id = self.p.corr0, self.p.ext0, 0, 1000
        self.tokens = _TOKENS[False]
        self.buf: list[bytes] = []
        self.started = False
        self.templates: dict[tuple, bytes] = {}

    def emit(self, event: dict) -> None:
        self.buf.append(orjson.dumps(event))

    def flush(self) -> None:
        if self.buf:
            self.out.write((b"," if self.started else b"") + b",".join(self.buf))
            self.started = True
            self.buf.clear()

    def _next(self) -> tuple[int, int]:
        """A fresh (correlation id, External id) for a launch."""
        self.corr += 1
        self.ext += 1
        return self.corr, self.ext

    def _cached(self, key: tuple, build: Callable[[], dict]) -> bytes:
        tmpl = self.templates.get(key)
        if tmpl is None:
            tmpl = self.templates[key] = _template(build())
        return tmpl

    def _x(
        self, cat: str, name: str, ts: float, dur: float, args: dict, pid: int | None = None, tid: int | None = None
    ) -> None:
        pid = self.p.cpu_pid if pid is None else pid
        self.emit(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": pid,
                "tid": pid if tid is None else tid,
                "ts": round(ts, 3),
                "dur": round(dur, 3),
                "args": args,
            }
        )

    def _flow(self, phase: str, corr: int, ts: float, gpu: bool) -> None:
        self.buf.append(self._cached(("flow", gpu), lambda: self._flow_event(phase, gpu)) % (corr, ts))

    def _flow_event(self, phase: str, gpu: bool) -> dict:
        event = {
            "ph": phase,
            "id": "@d@",
            "pid": _GPU_PID if gpu else self.p.cpu_pid,
            "tid": _STREAM if gpu else self.p.cpu_pid,
            "ts": "@f@",
            "cat": "ac2g",
            "name": "ac2g",
        }
        if gpu:
            event["bp"] = "e"
        return event

    def _jitter(self, x: float, spread: float = 0.1) -> float:
        return x * (1.0 + spread * (self.rng.random() - 0.5))

    def metadata(self) -> None:
        for pid, tid, label in ((self.p.cpu_pid, self.p.cpu_pid, "python3"), (_GPU_PID, _STREAM, "stream 7")):
            self.emit(
                {
                    "name": "process_name",
                    "ph": "M",
                    "ts": self.p.ts0,
                    "pid": pid,
                    "tid": 0,
                    "args": {"name": "python3" if pid else "GPU 0"},
                }
            )
            self.emit(
                {"name": "thread_name", "ph": "M", "ts": self.p.ts0, "pid": pid, "tid": tid, "args": {"name": label}}
            )

    def _cpu_event(self, cat: str, name: str, args: dict) -> dict:
        return {
            "ph": "X",
            "cat": cat,
            "name": name,
            "pid": self.p.cpu_pid,
            "tid": self.p.cpu_pid,
            "ts": "@f@",
            "dur": "@f@",
            "args": args,
        }

    def python(self, name: str, ts: float, dur: float) -> None:
        self.py_id += 1
        self.ev_idx += 1
        tmpl = self._cached(
            ("py", name),
            lambda: self._cpu_event(
                "python_function", name, {"Python parent id": "@d@", "Python id": "@d@", "Ev Idx": "@d@"}
            ),
        )
        self.buf.append(tmpl % (ts, dur, self.py_id - 1, self.py_id, self.ev_idx))

    def cpu_op(self, name: str, ts: float, dur: float, ext: int) -> None:
        self.ev_idx += 1
        tmpl = self._cached(
            ("op", name, self.tokens),
            lambda: self._cpu_event(
                "cpu_op",
                name,
                {
                    "External id": "@d@",
                    "Record function id": 0,
                    "Concrete Inputs": ["", ""],
                    "Input type": ["c10::BFloat16", "c10::BFloat16"],
                    "Input Strides": [[_HIDDEN, 1], [1, _HIDDEN]],
                    "Input Dims": [[self.tokens, _HIDDEN], [_HIDDEN, _HIDDEN]],
                    "Ev Idx": "@d@",
                },
            ),
        )
        self.buf.append(tmpl % (ts, dur, ext, self.ev_idx))

    def prep(self, count: int) -> None:
        """Host-side tensor bookkeeping between launches: most of a real trace's bytes."""
        for i in range(count):
            dur = self._jitter(3.0, 0.6)
            self.python("vllm/v1/worker/gpu_model_runner.py(1530): _prepare_inputs", self.cpu, dur + 2.0)
            self.python("torch/_tensor.py(1512): __torch_function__", self.cpu + 0.5, dur + 1.0)
            self.ext += 1
            self.cpu_op(_PREP_OPS[i % len(_PREP_OPS)], self.cpu + 0.9, dur, self.ext)
            self.cpu += dur + 2.6

    def _runtime_name(self, kernel: Kernel) -> str:
        if kernel.ktype == "GEMM":
            return self.p.gemm_launch
        return self.p.triton_launch if kernel.name.startswith(("triton_", "_")) else self.p.launch

    def kernel(self, k: Kernel, corr: int, ext: int | None, ts: float, scale: float) -> float:
        """Emit one GPU kernel starting no earlier than ts; returns its end."""
        start = max(ts, self.gpu + self._jitter(1.0))
        dur = self._jitter(k.dur * (1.0 if k.ktype == "Memset" else scale))
        tmpl = self._cached((id(k), ext is None), lambda: self._kernel_event(k, ext is None))
        ids = (corr,) if ext is None else (ext, corr)
        self.buf.append(tmpl % (start, dur, *ids))
        self._flow("f", corr, start, gpu=True)
        self.gpu = start + dur
        return self.gpu

    def _kernel_event(self, k: Kernel, in_graph: bool) -> dict:
        args: dict = {} if in_graph else {"External id": "@d@"}
        if self.amd:
            args.update(
                device=0,
                stream=_STREAM,
                correlation="@d@",
                kind="Dispatch Task" if in_graph else "Dispatch Kernel",
                grid=k.grid,
                block=k.block,
            )
        else:
            args.update(
                {
                    "queued": 0,
                    "device": 0,
                    "context": 1,
                    "stream": _STREAM,
                    "correlation": "@d@",
                    "registers per thread": 64,
                    "shared memory": 0,
                    "grid": k.grid,
                    "block": k.block,
                }
            )
        return {
            "ph": "X",
            "cat": "kernel",
            "name": k.name,
            "pid": _GPU_PID,
            "tid": _STREAM,
            "ts": "@f@",
            "dur": "@f@",
            "args": args,
        }

    def eager(self, k: Kernel, scale: float) -> None:
        corr, ext = self._next()
        t0, launch = self.cpu, self._jitter(6.0)
        self.python("torch/nn/modules/module.py(1773): _call_impl", t0, launch + 9.0)
        self.python(_PY_FRAMES.get(k.op, "torch/_ops.py(1243): __call__"), t0 + 1.0, launch + 7.0)
        self.cpu_op(k.op, t0 + 2.0, launch + 5.0, ext)
        rt = t0 + 4.5
        self._x("cuda_runtime", self._runtime_name(k), rt, launch, {"External id": ext, "correlation": corr})
        self._flow("s", corr, rt, gpu=False)
        self.kernel(k, corr, ext, rt + self._jitter(5.0), scale)
        self.cpu = t0 + launch + 10.0

    def graph(self, kernels: Sequence[Kernel], scale: float, prep_share: float) -> None:
        self.prep(round(len(kernels) * prep_share))
        corr, _ = self._next()
        t0 = self.cpu
        launch = self._jitter(8.0 + self.p.graph_launch_us * len(kernels))
        self.python("vllm/compilation/cuda_graph.py(190): __call__", t0, launch + 4.0)
        self._x("cuda_runtime", self.p.graph_launch, t0 + 2.0, launch, {"correlation": corr})
        self._flow("s", corr, t0 + 2.0, gpu=False)
        ts = t0 + 2.0 + self._jitter(10.0)
        for k in kernels:
            ts = self.kernel(k, corr, None, ts, scale)
        self.cpu = t0 + launch + 5.0

    def forward(
        self, prefill: bool, pass_launches: Sequence[tuple[bool, list[Kernel]]], fill: int, prep_share: float
    ) -> None:
        """One forward pass inside an annotation, followed by a host sync."""
        t0 = self.cpu
        self.tokens = _TOKENS[prefill]
        scale = _PREFILL_SCALE if prefill else 1.0
        self.prep(fill)
        for is_graph, kernels in pass_launches:
            if is_graph:
                self.graph(kernels, scale, prep_share)
            else:
                self.eager(kernels[0], scale)
        self.cpu = max(self.cpu, self.gpu) + self._jitter(30.0)
        self.ext += 1
        name = f"execute_{'context' if prefill else 'generation'}_{self.tokens}"
        self._x("user_annotation", name, t0, self.cpu - t0, {"External id": self.ext, "Record function id": 0})
        self.flush()


def _trace_name(spec: PairSpec, trace: int) -> str:
    return f"synthetic_{PLATFORMS[trace - 1].lower()}_{spec.scenario}_seed{spec.seed}.json"


def write_trace(out: IO[bytes], spec: PairSpec, trace: int) -> None:
    """Stream trace 1 (AMD) or 2 (NVIDIA) of the pair to a binary stream."""
    platform = PLATFORMS[trace - 1]
    writer = _Writer(out, platform, random.Random(f"{spec.seed}:{trace}"))
    out.write(orjson.dumps(_PLATFORMS[platform].header)[:-1] + b',"traceEvents":[')
    writer.metadata()
    fill = spec.for_trace(trace)[2]
    for prefill, pass_launches in trace_passes(spec, trace):
        writer.forward(prefill, pass_launches, fill, spec.prep_share)
    writer.flush()
    out.write(b'],"traceName":' + orjson.dumps(_trace_name(spec, trace)) + b"}")


class _ByteCounter:
    """A write-only sink that only counts, to size traces without storing them."""

    def __init__(self) -> None:
        self.n = 0

    def write(self, data: bytes) -> int:
        self.n += len(data)
        return len(data)


def trace_size(spec: PairSpec, trace: int) -> int:
    """Uncompressed size in bytes of a trace, computed by generating it into a counter."""
    sink = _ByteCounter()
    write_trace(sink, spec, trace)  # type: ignore[arg-type]
    return sink.n


def _linear_size(spec: PairSpec, trace: int) -> tuple[float, float, float]:
    """(fixed bytes, bytes per step, bytes per filler op per step) of a trace."""
    one = dataclasses.replace(spec, steps=1, steps2=1)
    two = dataclasses.replace(spec, steps=2, steps2=2)
    filled = dataclasses.replace(
        one, cpu_fill=one.cpu_fill + 100, cpu_fill2=None if one.cpu_fill2 is None else one.cpu_fill2 + 100
    )
    base = trace_size(one, trace)
    per_step = trace_size(two, trace) - base
    return base - per_step, per_step, (trace_size(filled, trace) - base) / 100


def fit_spec(spec: PairSpec, target_bytes: int) -> PairSpec:
    """Grow steps (keeping the steps2/steps ratio) until the larger trace is ~target_bytes, then pad each
    trace's steps with CPU filler ops to reach the target too."""
    ratio = 1.0 if spec.steps2 is None else spec.steps2 / spec.steps
    fits = []
    for trace, multiplier in ((1, 1.0), (2, ratio)):
        fixed, per_step, _ = _linear_size(spec, trace)
        fits.append((target_bytes - fixed) / (per_step * multiplier))
    steps = max(1, round(min(fits)))
    steps2 = None if spec.steps2 is None else max(1, round(ratio * steps))
    fitted = dataclasses.replace(spec, steps=steps, steps2=steps2)
    fills = []
    for trace in (1, 2):
        fixed, per_step, per_fill = _linear_size(fitted, trace)
        n, _, fill = fitted.for_trace(trace)
        extra = (target_bytes - fixed - n * per_step) / (n * per_fill)
        fills.append(max(0, fill + round(extra)))
    return dataclasses.replace(fitted, cpu_fill=fills[0], cpu_fill2=fills[1] if fills[1] != fills[0] else None)


def _file_name(trace: int, gz: bool) -> str:
    return ("amd" if trace == 1 else "nvidia") + (".json.gz" if gz else ".json")


def _fusion_truth(site: FusionSite, spec: PairSpec) -> dict:
    fused_trace = PLATFORMS.index(site.fused_platform) + 1
    return {
        "id": site.id,
        "fused_trace": fused_trace,
        "fused_platform": site.fused_platform,
        "fused_kernel_type": site.fused_type,
        "fused_kernel_name": site.fused_name,
        "fused_kernel_names": [site.fused_name],
        "unfused_sequence": [k.ktype for k in site.unfused],
        "unfused_kernel_names": list(dict.fromkeys(k.name for k in site.unfused)),
        "per_layer": 1,
        "occurrences": {f"trace{t}": spec.layers * _passes(spec, t) for t in (1, 2)},
        "description": site.description,
    }


def _split_k_truth(spec: PairSpec) -> dict:
    roles = _split_k_roles(NVIDIA, spec)
    amd = list(dict.fromkeys(_gemm(AMD, r, spec).name for r in roles))
    passes = _passes(spec, 1)
    return {
        "id": "split_k",
        "detector": "split_kernel",
        "fused_trace": 1,
        "fused_platform": AMD,
        "fused_kernel_type": "GEMM",
        "fused_kernel_name": amd[0],
        "fused_kernel_names": amd,
        "unfused_sequence": ["GEMM", "GEMM"],
        "unfused_kernel_names": [_gemm(NVIDIA, r, spec).name for r in roles] + [_SPLIT_K_REDUCE.name],
        "occurrences": {f"trace{t}": passes * (spec.layers + ("lm_head" in roles)) for t in (1, 2)},
        "description": "NVIDIA runs these GEMMs as a GEMM plus cublasLt::splitKreduce_kernel (split-K), AMD as one"
        " kernel" + ("; AMD uses one GEMM kernel name for every shape" if "split_k_partial" in spec.cases else ""),
    }


def _gemv_split_truth(spec: PairSpec) -> dict:
    amd = _gemm(AMD, "qkv", spec).name
    return {
        "id": "gemv_split",
        "detector": "split_kernel",
        "fused_trace": 1,
        "fused_platform": AMD,
        "fused_kernel_type": "GEMM",
        "fused_kernel_name": amd,
        "fused_kernel_names": [amd],
        "unfused_sequence": ["GEMM", "GEMM"],
        "unfused_kernel_names": [_GEMV.name, _GEMV_REDUCE.name],
        "occurrences": {f"trace{t}": _passes(spec, 1) * spec.layers for t in (1, 2)},
        "description": "NVIDIA runs the QKV projection as a cuBLAS GEMV and its two-pass reduce (dot_kernel +"
        " reduce_1Block_kernel), AMD as one GEMM: a split of another kernel-name pattern than split-K, reported"
        " on its own",
    }


def _case_truths(spec: PairSpec) -> list[dict]:
    """Ground truth of the enabled CASES that are fusions or splits."""
    out = [_fusion_truth(SITES[c], spec) for c in ("gemm_silu_epilogue", "template_rmsnorm") if c in spec.cases]
    out += [_gemv_split_truth(spec)] if "gemv_split" in spec.cases and "template_rmsnorm" not in spec.cases else []
    return out + ([_split_k_truth(spec)] if _split_k_roles(NVIDIA, spec) else [])


def _passes(spec: PairSpec, trace: int) -> int:
    steps, prefill, _ = spec.for_trace(trace)
    return steps + int(prefill)


def _non_fusion_truth(spec: PairSpec) -> list[dict]:
    diffs = [
        {
            "id": "gemm_library_names",
            "kernel_type": "GEMM",
            "description": "dense GEMMs are hipBLASLt/Tensile Cijk_* kernels on AMD and nvjet/cuBLAS sm90_xmma kernels"
            " on NVIDIA: different names, same count per layer",
        },
        {
            "id": "nccl_vs_rccl",
            "kernel_type": "Communication",
            "description": "the per-layer tensor-parallel all-reduce is an RCCL ncclDevKernel_Generic kernel on AMD"
            " and ncclDevKernel_AllReduce_Sum_bf16_RING_LL on NVIDIA: same count",
        },
    ]
    if spec.non_fusion:
        diffs.append(
            {
                "id": "extra_memset",
                "trace": 1,
                "platform": AMD,
                "kernel_type": "Memset",
                "kernel_name": _AMD_MEMSET,
                "per_step": 1,
                "description": "AMD zero-fills a buffer once per forward pass (__amd_rocclr_fillBufferAligned);"
                " NVIDIA has no such kernel: an extra kernel, not a fusion",
            }
        )
    if "unknown_attention" in spec.cases:
        diffs.append(
            {
                "id": "unknown_attention",
                "trace": 2,
                "platform": NVIDIA,
                "kernel_type": "Other",
                "kernel_name": _UNKNOWN_ATTN,
                "description": "NVIDIA's attention kernel belongs to a family no classification rule knows (typed"
                " Other): same count as AMD's attention, not a difference of the workload",
            }
        )
    return diffs


def ground_truth(spec: PairSpec, *, gzip: bool = True) -> dict:
    """The injected differences and exact kernel counts per type: what write_pair writes."""
    traces = {
        f"trace{t}": {
            "platform": PLATFORMS[t - 1],
            "gpu": _PLATFORMS[PLATFORMS[t - 1]].gpu,
            "file": _file_name(t, gzip),
        }
        for t in (1, 2)
    }
    return {
        "spec": {**dataclasses.asdict(spec), "fusions": list(spec.fusions), "cases": list(spec.cases)},
        **traces,
        "fusions": [_fusion_truth(SITES[f], spec) for f in ALL_FUSIONS if f in spec.fusions] + _case_truths(spec),
        "non_fusion_differences": _non_fusion_truth(spec),
        "expected_counts": {f"trace{t}": kernel_counts(spec, t) for t in (1, 2)},
    }


def _write_file(path: Path, spec: PairSpec, trace: int, gz: bool, level: int) -> None:
    with open(path, "wb") as raw:
        if not gz:
            write_trace(raw, spec, trace)
            return
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=level, mtime=0) as out:
            write_trace(out, spec, trace)  # type: ignore[arg-type]


def write_pair(out_dir: Path, spec: PairSpec, *, gzip: bool = True, target_bytes: int | None = None) -> PairFiles:
    """Write amd.json(.gz), nvidia.json(.gz) and ground_truth.json into out_dir."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if target_bytes is not None:
        spec = fit_spec(spec, target_bytes)
    level = 6 if target_bytes is None else 1
    paths = [out_dir / _file_name(t, gzip) for t in (1, 2)]
    for trace, path in enumerate(paths, start=1):
        _write_file(path, spec, trace, gzip, level)
    truth = out_dir / "ground_truth.json"
    truth.write_bytes(orjson.dumps(ground_truth(spec, gzip=gzip), option=orjson.OPT_INDENT_2) + b"\n")
    return PairFiles(paths[0], paths[1], truth)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m fusion.synthetic", description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--scenario", choices=SCENARIOS, default="full_graph")
    parser.add_argument("--layers", type=int, default=16)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--steps2", type=int, default=None, help="decode steps on trace 2 (default: --steps)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--fusions", default=",".join(ALL_FUSIONS), help=f"comma-separated subset of {','.join(ALL_FUSIONS)}, or 'none'"
    )
    parser.add_argument("--cases", default="", help=f"comma-separated subset of {','.join(CASES)}")
    parser.add_argument("--no-non-fusion", action="store_true", help="omit the extra AMD memset")
    parser.add_argument("--prefill", action="store_true", help="an eager prefill pass before decoding")
    parser.add_argument("--prefill2", choices=("on", "off"), default=None, help="override --prefill on trace 2")
    parser.add_argument("--target-mb", type=float, default=None, help="grow each trace to about this many MB")
    parser.add_argument("--plain", action="store_true", help="write .json instead of .json.gz")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    fusions = () if args.fusions == "none" else tuple(f for f in args.fusions.split(",") if f)
    spec = PairSpec(
        scenario=args.scenario,
        layers=args.layers,
        steps=args.steps,
        fusions=fusions,
        non_fusion=not args.no_non_fusion,
        steps2=args.steps2,
        seed=args.seed,
        prefill=args.prefill,
        prefill2=None if args.prefill2 is None else args.prefill2 == "on",
        cases=tuple(c for c in args.cases.split(",") if c),
    )
    target = None if args.target_mb is None else int(args.target_mb * 1_000_000)
    files = write_pair(args.out_dir, spec, gzip=not args.plain, target_bytes=target)
    for path in (files.trace1, files.trace2, files.ground_truth):
        print(f"{path}\t{path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
