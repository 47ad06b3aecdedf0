"""Tests for work.py: hand-computed cases per family, properties, and the shared real traces."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest
from builders import SHARED_TRACES, shared_absent
from hypothesis import given, settings
from hypothesis import strategies as st

from fusion.efficiency.work import (
    FAMILIES,
    LAYER_NORM_FLOPS,
    RMS_NORM_FLOPS,
    SOFTMAX_FLOPS,
    Work,
    attention_flops,
    dense_attention_flops,
    dtype_of,
    element_bytes,
    family_of,
    op_work,
)
from fusion.loader.cpu_events import RangeKind
from fusion.loader.kineto import read_kineto
from fusion.loader.op_args import SHAPE_KEYS

BF16, F32, I64 = "c10::BFloat16", "float", "long int"
HF_PAIRS = ("bert_small", "falconsai_nsfw", "qwen1.5-0.5b", "timesformer")


def counted(w: Work) -> Work:
    assert w.reason == "" and w.flops is not None and w.bytes is not None, w
    return w


# --------------------------------------------------------------------------- dtypes
@pytest.mark.parametrize(
    "name, dtype, size",
    [
        ("double", "fp64", 8),
        ("float", "fp32", 4),
        ("c10::Half", "fp16", 2),
        ("c10::BFloat16", "bf16", 2),
        ("c10::Float8_e4m3fn", "fp8", 1),
        ("c10::Float8_e4m3fnuz", "fp8", 1),
        ("c10::Float8_e5m2", "fp8", 1),
        ("c10::Float8_e5m2fnuz", "fp8", 1),
        ("signed char", "int8", 1),
        ("unsigned char", "int8", 1),
        ("long int", "", 8),
        ("long", "", 8),
        ("int", "", 4),
        ("short int", "", 2),
        ("bool", "", 1),
        ("Scalar", "", None),
        ("", "", None),
        ("ScalarList", "", None),
        ("TensorList", "", None),
    ],
)
def test_dtype_table(name: str, dtype: str, size: int | None) -> None:
    assert dtype_of(name) == dtype
    assert element_bytes(name) == size


def test_family_lookup_handles_prefix_and_in_place() -> None:
    assert family_of("aten::linear") == "gemm"
    assert family_of("aten::add_") == "elementwise"
    assert family_of("aten::copy_") == "copy"
    assert family_of("aten::view") == ""
    assert family_of("aten::index_copy_") == ""


# --------------------------------------------------------------------------- gemm
QWEN_X, QWEN_M = [16, 559, 1024], 16 * 559  # M = 8944 tokens


def test_qwen_linear_with_bias() -> None:
    # q/k/v projections: 2·8944·1024·1024 = 18_756_927_488, bias add 8944·1024 = 9_158_656.
    # bytes (bf16): x 8944·1024·2 = 18_317_312, W 1024·1024·2 = 2_097_152, b 2048, out 18_317_312.
    w = counted(op_work("aten::linear", [QWEN_X, [1024, 1024], [1024]], [BF16] * 3))
    assert w.flops == 18_756_927_488 + 9_158_656 == 2 * 8944 * 1024 * 1024 + 8944 * 1024
    assert w.bytes == 18_317_312 + 2_097_152 + 2048 + 18_317_312
    assert (w.family, w.matrix, w.dtype) == ("gemm", True, "bf16")


def test_linear_without_bias() -> None:
    # o_proj: no bias ('' type, [] dims): 2·8944·1024·1024, bytes 18_317_312·2 + 2_097_152.
    w = counted(op_work("aten::linear", [QWEN_X, [1024, 1024], []], [BF16, BF16, ""]))
    assert w.flops == 18_756_927_488
    assert w.bytes == 2 * 18_317_312 + 2_097_152
    # MLP up/gate proj [2816, 1024]: 2·8944·2816·1024 = 51_581_550_592
    up = counted(op_work("aten::linear", [QWEN_X, [2816, 1024], []], [BF16, BF16, ""]))
    assert up.flops == 51_581_550_592


def test_addmm_bias_and_beta_zero() -> None:
    dims = [[1024], [8944, 1024], [1024, 1024], [], []]
    types = [BF16, BF16, BF16, "Scalar", "Scalar"]
    w = counted(op_work("aten::addmm", dims, types, None, ["", "", "", "1", "1"]))
    lin = op_work("aten::linear", [QWEN_X, [1024, 1024], [1024]], [BF16] * 3)
    assert (w.flops, w.bytes) == (lin.flops, lin.bytes)
    no_bias = counted(op_work("aten::addmm", dims, types, None, ["", "", "", "0", "1"]))
    assert no_bias.flops == 2 * 8944 * 1024 * 1024


def test_mm_transposed_input_same_work() -> None:
    dims = [[8944, 1024], [1024, 2816]]
    plain = counted(op_work("aten::mm", dims, [BF16, BF16], [[1024, 1], [2816, 1]]))
    transposed = counted(op_work("aten::mm", dims, [BF16, BF16], [[1024, 1], [1, 1024]]))
    assert plain == transposed
    assert plain.flops == 2 * 8944 * 2816 * 1024


def test_bmm_batch() -> None:
    # timesformer attention scores: 96 × (3137×64 @ 64×3137): 2·96·3137·3137·64 = 120_923_369_472
    # bytes: 2 inputs 96·3137·64·2 = 38_547_456 each, out 96·3137·3137·2 = 1_889_427_648
    w = counted(op_work("aten::bmm", [[96, 3137, 64], [96, 64, 3137]], [BF16, BF16]))
    assert w.flops == 120_923_369_472
    assert w.bytes == 2 * 38_547_456 + 1_889_427_648


def test_baddbmm_bias() -> None:
    w = counted(
        op_work(
            "aten::baddbmm",
            [[4, 8, 16], [4, 8, 32], [4, 32, 16], [], []],
            [F32] * 3 + ["Scalar"] * 2,
            None,
            ["", "", "", "1", "1"],
        )
    )
    assert w.flops == 2 * 4 * 8 * 16 * 32 + 4 * 8 * 16


def test_matmul_4d_by_3d_broadcast() -> None:
    # [2,3,4,5] @ [3,5,6]: batch dims [2,3] vs [3] broadcast to [2,3] → 6 products of 4×5 @ 5×6
    # flops 2·6·4·6·5 = 1440; bytes fp32: 120·4 + 90·4 + (6·4·6 = 144)·4 = 1416
    w = counted(op_work("aten::matmul", [[2, 3, 4, 5], [3, 5, 6]], [F32, F32]))
    assert w.flops == 1440
    assert w.bytes == 1416


def test_matmul_3d_by_2d_equals_mm() -> None:
    a = op_work("aten::matmul", [QWEN_X, [1024, 1024]], [BF16, BF16])
    b = op_work("aten::mm", [[8944, 1024], [1024, 1024]], [BF16, BF16])
    assert counted(a).flops == counted(b).flops and a.bytes == b.bytes


def test_matmul_vectors() -> None:
    assert counted(op_work("aten::matmul", [[5], [5]], [F32, F32])).flops == 10
    assert counted(op_work("aten::matmul", [[3, 5], [5]], [F32, F32])).flops == 30


def test_gemm_inner_dim_mismatch_not_counted() -> None:
    w = op_work("aten::mm", [[4, 5], [6, 7]], [F32, F32])
    assert w.flops is None and w.bytes is None and "shape" in w.reason


def test_mm_out_variant_out_tensor_written_not_read() -> None:
    # Inductor's mm(out=...) records the out tensor as a third input.
    w = counted(op_work("aten::mm", [[32768, 2048], [2048, 2048], [32768, 2048]], [BF16] * 3))
    assert w.flops == 2 * 32768 * 2048 * 2048
    assert w.bytes == (32768 * 2048 * 2 + 2048 * 2048) * 2


def test_scaled_mm_fp8() -> None:
    dims = [[64, 128], [128, 32], [], [], [], [], [], []]
    types = ["c10::Float8_e4m3fn"] * 2 + [F32, F32, "", "", "Scalar", "Scalar"]
    w = counted(op_work("aten::_scaled_mm", dims, types, None, ["", "", "", "", "", "", "15", "False"]))
    assert w.flops == 2 * 64 * 32 * 128 and w.dtype == "fp8"
    assert w.bytes == 64 * 128 + 128 * 32 + 64 * 32 * 2  # fp8 in, bf16 out (scalar scales 0-dim)


# --------------------------------------------------------------------------- conv
def conv2d(
    x: list[int], w: list[int], bias: bool, stride: str, pad: str, dil: str, groups: int, dtype: str = F32
) -> Work:
    dims = [x, w, [w[0]] if bias else [], [], [], [], []]
    types = [dtype, dtype, dtype if bias else "", "ScalarList", "ScalarList", "ScalarList", "Scalar"]
    return op_work("aten::conv2d", dims, types, None, ["", "", "", stride, pad, dil, str(groups)])


def test_grouped_conv_stride_padding() -> None:
    # x [8,32,28,28], W [64, 32/4, 3, 3], groups 4, stride 2, pad 1:
    # out = floor((28 + 2 - 2 - 1)/2) + 1 = 14; flops 2·8·64·14·14·8·9 = 14_450_688
    w = counted(conv2d([8, 32, 28, 28], [64, 8, 3, 3], False, "[2, 2]", "[1, 1]", "[1, 1]", 4))
    assert w.flops == 14_450_688
    assert w.bytes == (8 * 32 * 28 * 28 + 64 * 8 * 9 + 8 * 64 * 14 * 14) * 4
    assert (w.family, w.matrix) == ("conv", True)


def test_depthwise_conv_dilation_with_bias() -> None:
    # x [1,16,10,10], W [16,1,3,3], groups 16, pad 2, dilation 2: out = (10+4-4-1)/1+1 = 10
    # flops 2·1·16·100·1·9 = 28_800 plus bias add 1·16·100 = 1_600
    w = counted(conv2d([1, 16, 10, 10], [16, 1, 3, 3], True, "[1, 1]", "[2, 2]", "[2, 2]", 16))
    assert w.flops == 28_800 + 1_600


def test_conv_bad_channels_not_counted() -> None:
    w = conv2d([1, 16, 10, 10], [16, 3, 3, 3], False, "[1, 1]", "[0, 0]", "[1, 1]", 1)
    assert w.flops is None and w.reason


def test_vit_patch_conv_cudnn_vs_miopen() -> None:
    # falconsai patch embedding: x [4,3,224,224], W [768,3,16,16], stride 16 → 14×14
    # 2·4·768·196·3·256 = 924_844_032; MIOpen passes the bias: + 4·768·196 = 602_112
    x, wt = [4, 3, 224, 224], [768, 3, 16, 16]
    cud = counted(
        op_work(
            "aten::cudnn_convolution",
            [x, wt, [], [], [], [], [], [], []],
            [BF16, BF16, "ScalarList", "ScalarList", "ScalarList"] + ["Scalar"] * 4,
            None,
            ["", "", "[0, 0]", "[16, 16]", "[1, 1]", "1", "False", "False", "True"],
        )
    )
    mio = counted(
        op_work(
            "aten::miopen_convolution",
            [x, wt, [768], [], [], [], [], [], []],
            [BF16, BF16, BF16, "ScalarList", "ScalarList", "ScalarList"] + ["Scalar"] * 3,
            None,
            ["", "", "", "[0, 0]", "[16, 16]", "[1, 1]", "1", "False", "False"],
        )
    )
    assert cud.flops == 924_844_032
    assert mio.flops == 924_844_032 + 602_112


def test_conv_tf32_when_recorded() -> None:
    w = op_work(
        "aten::cudnn_convolution",
        [[1, 3, 8, 8], [4, 3, 3, 3]] + [[]] * 7,
        [F32, F32, "ScalarList", "ScalarList", "ScalarList"] + ["Scalar"] * 4,
        None,
        ["", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False", "False", "True"],
    )
    assert counted(w).dtype == "tf32"


def test_conv1d_conv3d_and_transposed() -> None:
    c1 = counted(
        op_work(
            "aten::convolution",
            [[2, 4, 50], [8, 4, 5], [], [], [], [], [], [], []],
            [F32, F32, ""] + ["ScalarList"] * 3 + ["Scalar", "ScalarList", "Scalar"],
            None,
            ["", "", "", "[1]", "[0]", "[1]", "False", "[0]", "1"],
        )
    )
    assert c1.flops == 2 * 2 * 8 * 46 * 4 * 5  # out length 50 - 5 + 1 = 46
    c3 = counted(
        op_work(
            "aten::convolution",
            [[1, 2, 4, 8, 8], [3, 2, 1, 3, 3]] + [[]] * 7,
            [F32, F32, ""] + ["ScalarList"] * 3 + ["Scalar", "ScalarList", "Scalar"],
            None,
            ["", "", "", "[1, 1, 1]", "[0, 1, 1]", "[1, 1, 1]", "False", "[0, 0, 0]", "1"],
        )
    )
    assert c3.flops == 2 * 1 * 3 * (4 * 8 * 8) * 2 * 9
    # transposed: x [1,4,5,5], W [C_in=4, K=2, 3, 3], stride 2, pad 1, output_padding 1
    # out = (5-1)·2 - 2 + 2 + 1 + 1 = 10; flops 2·N·C_in·25·K·9 = 3600; out 1·2·10·10 = 200 elems
    t = counted(
        op_work(
            "aten::convolution",
            [[1, 4, 5, 5], [4, 2, 3, 3]] + [[]] * 7,
            [F32, F32, ""] + ["ScalarList"] * 3 + ["Scalar", "ScalarList", "Scalar"],
            None,
            ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "True", "[1, 1]", "1"],
        )
    )
    assert t.flops == 3600
    assert t.bytes == (100 + 72 + 200) * 4


def test_conv_without_concrete_inputs_not_counted() -> None:
    w = op_work(
        "aten::conv2d",
        [[1, 3, 8, 8], [4, 3, 3, 3], [], [], [], [], []],
        [F32, F32, ""] + ["ScalarList"] * 3 + ["Scalar"],
    )
    assert w.flops is None and "not recorded" in w.reason


# --------------------------------------------------------------------------- attention
Q = [16, 16, 559, 64]  # Qwen: B=16, H=16, S=559, D=64
SDPA_TYPES = [BF16] * 3 + ["", "Scalar", "Scalar", "Scalar", "Scalar"]


def sdpa(causal: str) -> Work:
    return op_work(
        "aten::scaled_dot_product_attention",
        [Q, Q, Q, [], [], [], [], []],
        SDPA_TYPES,
        None,
        ["", "", "", "", "0.", causal, "0.125", "False"],
    )


def test_attention_causal_vs_not() -> None:
    # 4·B·H·S·S·D = 4·16·16·559·559·64 = 20_478_754_816; causal half = 10_239_377_408
    full, causal = counted(sdpa("False")), counted(sdpa("True"))
    assert full.flops == 20_478_754_816 == 4 * 16 * 16 * 559 * 559 * 64
    assert causal.flops == 10_239_377_408
    assert dense_attention_flops("aten::scaled_dot_product_attention", [Q, Q, Q], [BF16] * 3) == full.flops
    # bytes: q, k, v, out each 16·16·559·64·2 = 18_317_312
    assert causal.bytes == full.bytes == 4 * 18_317_312
    assert (causal.family, causal.matrix) == ("attention", True)


def test_flash_forward_bshd_layout_same_as_sdpa() -> None:
    bshd = [16, 559, 16, 64]
    w = counted(
        op_work(
            "aten::_flash_attention_forward",
            [bshd] * 3 + [[]] * 12,
            [BF16] * 3 + ["", ""] + ["Scalar"] * 6 + [""] * 4,
            None,
            ["", "", "", "", "", "559", "559", "0.", "True", "False", "0.125", "", "", "", ""],
        )
    )
    assert (w.flops, w.bytes) == (sdpa("True").flops, sdpa("True").bytes)


def test_attention_gqa_and_mask_type() -> None:
    q, kv = [1, 32, 128, 64], [1, 8, 256, 64]
    w = counted(
        op_work(
            "aten::_scaled_dot_product_efficient_attention",
            [q, kv, kv, [], [], [], [], []],
            [BF16] * 3 + ["", "Scalar", "Scalar", "Scalar", ""],
            None,
            ["", "", "", "", "False", "0.", "False", ""],
        )
    )
    assert w.flops == 4 * 32 * 128 * 256 * 64 == attention_flops(32, 128, 256, 64)
    e = counted(
        op_work(
            "aten::_efficient_attention_forward",
            [[2, 100, 4, 32]] * 3 + [[]] * 9,
            [BF16] * 3 + [""] * 9,
            None,
            ["", "", "", "", "", "", "", "", "0.", "1", "False", ""],
        )
    )
    assert e.flops == 4 * 2 * 4 * 100 * 100 * 32 / 2


def test_attention_causal_not_recorded() -> None:
    w = op_work("aten::scaled_dot_product_attention", [Q, Q, Q, [], [], [], [], []], SDPA_TYPES)
    assert w.flops is None and w.bytes == 4 * 18_317_312 and "is_causal" in w.reason


# --------------------------------------------------------------------------- norm, softmax
def test_layer_norm() -> None:
    # timesformer: [3136, 8, 768] = 19_267_584 elems, weight+bias 768 each, bf16
    w = counted(
        op_work(
            "aten::layer_norm",
            [[3136, 8, 768], [], [768], [768], [], []],
            [BF16, "ScalarList", BF16, BF16, "Scalar", "Scalar"],
            None,
            ["", "[768]", "", "", "1e-06", "True"],
        )
    )
    assert w.flops == LAYER_NORM_FLOPS * 19_267_584
    assert w.bytes == (2 * 19_267_584 + 2 * 768) * 2
    assert (w.family, w.matrix) == ("norm", False)


def test_rms_group_batch_norm() -> None:
    r = counted(op_work("aten::rms_norm", [[4, 8], [], [8], []], [F32, "ScalarList", F32, "Scalar"]))
    assert r.flops == RMS_NORM_FLOPS * 32 and r.bytes == (32 + 8 + 32) * 4
    g = counted(
        op_work(
            "aten::group_norm",
            [[2, 8, 4, 4], [], [8], [8], [], []],
            [F32, "Scalar", F32, F32, "Scalar", "Scalar"],
            None,
            ["", "2", "", "", "1e-05", "True"],
        )
    )
    assert g.flops == 5 * 256 and g.bytes == (256 + 16 + 256) * 4
    bn = [[2, 8, 4, 4], [8], [8], [8], [8], [], [], [], []]
    bt = [F32] * 5 + ["Scalar"] * 4
    train = op_work("aten::batch_norm", bn, bt, None, ["", "", "", "", "", "True", "0.1", "1e-05", "True"])
    ev = op_work("aten::batch_norm", bn, bt, None, ["", "", "", "", "", "False", "0.1", "1e-05", "True"])
    assert counted(train).flops == 5 * 256 and counted(ev).flops == 2 * 256
    assert train.bytes == ev.bytes == (256 + 4 * 8 + 256) * 4


def test_softmax_and_half_to_float() -> None:
    n = 8 * 12 * 3137 * 3137
    s = counted(
        op_work("aten::_softmax", [[8, 12, 3137, 3137], [], []], [BF16, "Scalar", "Scalar"], None, ["", "-1", "False"])
    )
    assert s.flops == SOFTMAX_FLOPS * n and s.bytes == n * 4
    up = counted(op_work("aten::_softmax", [[4, 10], [], []], [BF16, "Scalar", "Scalar"], None, ["", "-1", "True"]))
    assert up.bytes == 40 * 2 + 40 * 4
    to32 = counted(op_work("aten::softmax", [[4, 10], [], []], [BF16, "Scalar", "Scalar"], None, ["", "-1", "6"]))
    assert to32.bytes == 40 * 2 + 40 * 4


# --------------------------------------------------------------------------- elementwise
def test_broadcast_add() -> None:
    # [16,559,1024] + [1024]: 9_158_656 outputs; bytes (9_158_656 + 1024 + 9_158_656)·2
    w = counted(op_work("aten::add", [QWEN_X, [1024], []], [BF16, BF16, "Scalar"], None, ["", "", "1"]))
    assert w.flops == 9_158_656
    assert w.bytes == (9_158_656 + 1024 + 9_158_656) * 2
    assert (w.family, w.matrix, w.dtype) == ("elementwise", False, "bf16")


def test_scalar_operand_not_read() -> None:
    # the profiler records a Python float as a 0-dim "double"
    w = counted(op_work("aten::mul", [[1, 559, 64], []], [F32, "double"]))
    assert w.flops == 35_776 and w.bytes == 35_776 * 8 and w.dtype == "fp32"


def test_in_place_writes_first_input() -> None:
    # conv bias add on H100: [128,768,14,14] += [1,768,1,1]: read both, write the first
    w = counted(
        op_work("aten::add_", [[128, 768, 14, 14], [1, 768, 1, 1], []], [BF16, BF16, "Scalar"], None, ["", "", "1"])
    )
    n = 128 * 768 * 14 * 14
    assert w.flops == n and w.bytes == (2 * n + 768) * 2
    grow = op_work("aten::mul_", [[1, 4], [3, 4]], [F32, F32])
    assert grow.flops is None and grow.reason


def test_elementwise_exceptions_and_result_types() -> None:
    assert counted(op_work("aten::gelu", [[10], []], [BF16, ""], None, ["", ""])).flops == 50
    assert counted(op_work("aten::gelu", [[10], []], [BF16, ""], None, ["", "tanh"])).flops == 90
    assert counted(op_work("aten::silu", [[10]], [BF16])).flops == 50
    eq = counted(op_work("aten::eq", [[16, 559], []], [I64, "Scalar"], None, ["", "1"]))
    assert eq.bytes == 8944 * 8 + 8944 * 1  # bool result
    mixed = counted(op_work("aten::mul", [[4], [4]], [F32, BF16]))
    assert mixed.bytes == 16 + 8 + 16 and mixed.dtype == "fp32"  # promotes to fp32
    where = counted(op_work("aten::where", [[4, 1], [4, 3], [3]], ["bool", F32, F32]))
    assert where.flops == 12 and where.bytes == 4 + 48 + 12 + 48


def test_expanded_input_counts_distinct_elements() -> None:
    w = counted(op_work("aten::add", [[4, 8], [4, 8], []], [F32, F32, "Scalar"], [[8, 1], [0, 1], []], ["", "", "1"]))
    assert w.bytes == (32 + 8 + 32) * 4


def test_elementwise_out_variant() -> None:
    w = counted(op_work("aten::abs", [[512, 512], [0]], [I64, I64], None, ["", ""]))
    assert w.bytes == 512 * 512 * 8 * 2


# --------------------------------------------------------------------------- reduction
RMS_MEAN = ([QWEN_X, [], [], []], [F32, "ScalarList", "Scalar", ""])


def test_reduction_keepdim() -> None:
    # Qwen RMSNorm variance: mean over -1, keepdim → out [16,559,1]
    w = counted(op_work("aten::mean", *RMS_MEAN, None, ["", "[-1]", "True", ""]))
    assert w.flops == 9_158_656 and w.bytes == (9_158_656 + 8944) * 4
    no_keep = counted(op_work("aten::sum", *RMS_MEAN, None, ["", "[0, 2]", "False", ""]))
    assert no_keep.bytes == (9_158_656 + 559) * 4
    full = counted(op_work("aten::sum", *RMS_MEAN, None, ["", "[]", "False", ""]))
    assert full.bytes == (9_158_656 + 1) * 4


def test_reduction_output_types() -> None:
    assert counted(op_work("aten::sum", [[10, 4], []], ["int", ""])).bytes == 160 + 8
    am = counted(op_work("aten::argmax", [[15, 151936], [], []], [F32, "Scalar", "Scalar"], None, ["", "-1", "False"]))
    assert am.bytes == 15 * 151936 * 4 + 15 * 8
    mx = counted(op_work("aten::max", [[2, 6], [], []], [F32, "Scalar", "Scalar"], None, ["", "1", "False"]))
    assert mx.bytes == 48 + 2 * (4 + 8)  # values + int64 indices
    assert counted(op_work("aten::all", [[16, 559]], ["bool"])).bytes == 8944 + 1


def test_reduction_dims_not_recorded() -> None:
    w = op_work("aten::sum", [[1024, 40], [], [], []], [F32, "", "Scalar", ""])
    assert w.flops is None and w.bytes is None and "not recorded" in w.reason


# --------------------------------------------------------------------------- embedding, copy
def test_embedding_reads_only_gathered_rows() -> None:
    # 8944 ids (int64): 71_552 B; gathered rows and output 8944·1024·2 = 18_317_312 B each
    e = counted(
        op_work(
            "aten::embedding",
            [[151936, 1024], [16, 559], [], [], []],
            [BF16, I64, "Scalar", "Scalar", "Scalar"],
            None,
            ["", "", "-1", "False", "False"],
        )
    )
    assert e.flops == 0 and e.bytes == 71_552 + 2 * 18_317_312
    i = counted(op_work("aten::index_select", [[151936, 1024], [], [8944]], [BF16, "Scalar", I64], None, ["", "0", ""]))
    assert i.bytes == e.bytes


def test_embedding_indices_must_be_integers() -> None:
    w = op_work("aten::embedding", [[2048, 4096], [4096, 4096]], [BF16, BF16])
    assert w.bytes is None and "indices not integer" in w.reason


def test_copies() -> None:
    n = 9_158_656
    to = counted(
        op_work(
            "aten::_to_copy",
            [QWEN_X] + [[]] * 6,
            [BF16, "Scalar", "", "", "", "Scalar", ""],
            None,
            ["", "6", "", "", "", "False", ""],
        )
    )
    assert to.bytes == n * (2 + 4)  # bf16 → fp32
    cp = counted(op_work("aten::copy_", [QWEN_X, QWEN_X, []], [F32, BF16, "Scalar"]))
    assert cp.bytes == n * (2 + 4)
    assert counted(op_work("aten::clone", [QWEN_X, []], [BF16, "Scalar"])).bytes == n * 4
    strided = [[572416, 64, 1024, 1], []]
    c = counted(op_work("aten::contiguous", [Q, []], [BF16, "Scalar"], strided, ["", "0"]))
    assert c.bytes == 2 * 2 * math.prod(Q)
    same = counted(op_work("aten::contiguous", [Q, []], [BF16, "Scalar"], [[572416, 35776, 64, 1], []], ["", "0"]))
    assert same.bytes == 0
    unknown = op_work("aten::contiguous", [Q, []], [BF16, "Scalar"])
    assert unknown.bytes is None and unknown.reason
    cat = op_work("aten::cat", [[[1, 559, 32], [1, 559, 32]], []], ["TensorList", "Scalar"])
    assert cat.bytes is None and "TensorList" in cat.reason
    assert counted(op_work("aten::fill_", [[5, 128], []], [F32, "Scalar"])).bytes == 640 * 4


# --------------------------------------------------------------------------- not counted
def test_missing_dims_and_unknown_op() -> None:
    w = op_work("aten::mm", None, None)
    assert (w.flops, w.bytes, w.reason, w.family) == (None, None, "no Input Dims", "gemm")
    u = op_work("vllm::unified_attention_with_output", [[1, 2]], [BF16])
    assert (u.flops, u.bytes, u.reason) == (None, None, "op not modelled")


def test_extra_tensor_arguments_rejected() -> None:
    # hta_sampled_rank0 records unrelated tensors on some calls
    w = op_work("aten::linear", [[512, 2112], [512], [2048, 512], [2048, 160, 267], [10, 267], [10]], [F32] * 6)
    assert w.flops is None and w.reason


# --------------------------------------------------------------------------- properties
dim = st.integers(1, 64)


@given(dim, dim, dim, dim, st.sampled_from(["m", "n", "k", "b"]))
def test_doubling_a_gemm_dim_doubles_flops(b: int, m: int, n: int, k: int, which: str) -> None:
    def flops(b: int, m: int, n: int, k: int) -> float:
        return counted(op_work("aten::bmm", [[b, m, k], [b, k, n]], [BF16, BF16])).flops

    doubled = {"b": (2 * b, m, n, k), "m": (b, 2 * m, n, k), "n": (b, m, 2 * n, k), "k": (b, m, n, 2 * k)}[which]
    assert flops(*doubled) == 2 * flops(b, m, n, k)
    mm = counted(op_work("aten::mm", [[m, k], [k, n]], [F32, F32]))
    mm2 = counted(op_work("aten::mm", [[2 * m, k], [k, n]], [F32, F32]))
    assert mm2.flops == 2 * mm.flops


@given(
    st.integers(1, 4),
    st.integers(1, 4),
    st.integers(1, 16),
    st.integers(3, 20),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(0, 2),
    st.integers(1, 2),
    st.booleans(),
)
def test_doubling_out_channels_doubles_conv_flops(
    n: int, groups: int, cpg: int, size: int, r: int, stride: int, pad: int, dil: int, bias: bool
) -> None:
    if size + 2 * pad - dil * (r - 1) - 1 < 0:
        return
    c, k = groups * cpg, groups * 2

    def flops(k_out: int) -> float:
        return counted(
            conv2d(
                [n, c, size, size],
                [k_out, cpg, r, r],
                bias,
                f"[{stride}]",
                f"[{pad}, {pad}]",
                f"[{dil}, {dil}]",
                groups,
            )
        ).flops

    assert flops(2 * k) == 2 * flops(k)


@st.composite
def broadcastable(draw: st.DrawFn) -> tuple[list[int], list[list[int]]]:
    out = draw(st.lists(st.integers(1, 6), min_size=0, max_size=4))
    shapes = []
    for _ in range(draw(st.integers(1, 2))):
        drop = draw(st.integers(0, len(out)))
        shapes.append([1 if draw(st.booleans()) else d for d in out[drop:]])
    shapes[0] = list(out)  # make sure the broadcast result is exactly `out`
    draw(st.randoms()).shuffle(shapes)
    return out, shapes


@given(
    broadcastable(),
    st.sampled_from(["aten::add", "aten::mul", "aten::sub", "aten::div"]),
    st.sampled_from([F32, BF16, "c10::Half"]),
)
def test_elementwise_flops_equal_broadcast_output(case: tuple, op: str, dtype: str) -> None:
    out, shapes = case
    if len(shapes) == 1:
        shapes = shapes + [[]]
    w = op_work(op, shapes, [dtype] * len(shapes))
    if not out and all(not s for s in shapes):  # only 0-dim operands: nothing read
        return
    assert counted(w).flops == math.prod(out)
    assert w.bytes >= math.prod(out) * element_bytes(dtype)


@given(dim, dim, dim, st.sampled_from([F32, BF16]), st.booleans())
def test_bytes_at_least_output(m: int, n: int, k: int, dtype: str, bias: bool) -> None:
    w = counted(op_work("aten::linear", [[m, k], [n, k], [n] if bias else []], [dtype, dtype, dtype if bias else ""]))
    assert w.bytes >= m * n * element_bytes(dtype)
    s = counted(op_work("aten::softmax", [[m, n], [], []], [dtype, "Scalar", ""], None, ["", "-1", ""]))
    assert s.bytes >= m * n * element_bytes(dtype)


ALL_OPS = sorted({("aten::" + o if "::" not in o else o) for ops in FAMILIES.values() for o in ops})


@given(st.sampled_from(ALL_OPS), st.sampled_from([None, []]))
def test_missing_dims_give_reason(op: str, dims: list | None) -> None:
    w = op_work(op, dims, None)
    assert w.flops is None and w.bytes is None and w.reason == "no Input Dims"


arg_dims = st.one_of(st.lists(st.integers(0, 9), max_size=5), st.just([]))
arg_type = st.sampled_from([F32, BF16, I64, "bool", "Scalar", "", "ScalarList", "TensorList"])
arg_ci = st.sampled_from(["", "0", "1", "-1", "True", "False", "[1, 1]", "[]", "[0]", "x", "15"])


@settings(max_examples=400)
@given(st.sampled_from(ALL_OPS), st.lists(st.tuples(arg_dims, arg_type, arg_ci), max_size=10))
def test_never_raises_on_junk(op: str, args: list) -> None:
    w = op_work(op, [a[0] for a in args], [a[1] for a in args], None, [a[2] for a in args])
    assert isinstance(w, Work)
    assert (w.flops is not None and w.bytes is not None) or w.reason


# --------------------------------------------------------------------------- real traces
def _real_files() -> list[Path]:
    """Every Kineto trace under the shared folder, capture traces included (not rocprofv3 output)."""
    files = sorted(p for p in SHARED_TRACES.rglob("*.json*") if p.is_file())
    return [p for p in files if "execution_details" not in p.name and "rocprof" not in str(p)]


def _cpu_ops(path: Path) -> list[dict]:
    """The trace's cpu_op events as the loader keeps them: name and the four shapes args (op_args)."""
    cpu = read_kineto(path).cpu
    ops = cpu.ranges.of_kind(RangeKind.OP)
    events = []
    for name, code in zip(ops.name.tolist(), ops.shapes.tolist()):
        values = dict(zip(SHAPE_KEYS, json.loads(cpu.shapes[code]))) if code >= 0 else {}
        events.append({"name": cpu.names[name], "args": {k: v for k, v in values.items() if v is not None}})
    return events


@pytest.fixture(scope="module")
def real_traces() -> dict[str, list[dict]]:
    if not SHARED_TRACES.is_dir():
        pytest.skip(shared_absent(SHARED_TRACES))
    return {str(p.relative_to(SHARED_TRACES)): _cpu_ops(p) for p in _real_files()}


def _work(e: dict) -> Work:
    a = e.get("args", {})
    return op_work(
        e["name"], a.get("Input Dims"), a.get("Input type"), a.get("Input Strides"), a.get("Concrete Inputs")
    )


def test_real_traces_matrix_ops_all_counted(real_traces: dict[str, list[dict]]) -> None:
    misses: list[str] = []
    for name, events in real_traces.items():
        hf = name.split("/")[0] in {f"tl_{v}_{m}" for v in ("h100", "mi300") for m in HF_PAIRS}
        for e in events:
            w = _work(e)  # no call may raise
            matrix_op = family_of(e["name"]) in ("gemm", "conv", "attention")
            if hf and matrix_op and (w.flops is None or w.bytes is None):
                misses.append(f"{name}: {e['name']} {w.reason}")
    assert sum(len(ev) for ev in real_traces.values()) > 10_000
    assert not misses, misses[:10]


def test_real_qwen_linear_cross_check(real_traces: dict[str, list[dict]]) -> None:
    # q/k/v projections: 2·8944·1024·1024 + 8944·1024 (bias) = 18_766_086_144 FLOPs
    # o_proj (no bias):  2·8944·1024·1024 = 18_756_927_488
    # up/gate [2816,1024] and down [1024,2816], no bias: 2·8944·2816·1024 = 51_581_550_592
    expected = {
        str([QWEN_X, [1024, 1024], [1024]]): 18_766_086_144,
        str([QWEN_X, [1024, 1024], []]): 18_756_927_488,
        str([QWEN_X, [2816, 1024], []]): 51_581_550_592,
        str([[16, 559, 2816], [1024, 2816], []]): 51_581_550_592,
    }
    for vendor in ("h100", "mi300"):
        seen: Counter = Counter()
        for name, events in real_traces.items():
            if not name.startswith(f"tl_{vendor}_qwen1.5-0.5b"):
                continue
            for e in events:
                key = str(e.get("args", {}).get("Input Dims"))
                if e["name"] == "aten::linear" and key in expected:
                    assert _work(e).flops == expected[key]
                    seen[key] += 1
        # 24 layers: q, k, v with bias; o; gate, up; down
        assert seen[str([QWEN_X, [1024, 1024], [1024]])] == 72
        assert seen[str([QWEN_X, [1024, 1024], []])] == 24
        assert seen[str([QWEN_X, [2816, 1024], []])] == 48
        assert seen[str([[16, 559, 2816], [1024, 2816], []])] == 24


def test_real_pairs_same_work_on_both_vendors(real_traces: dict[str, list[dict]]) -> None:
    # Same model and input on H100 and MI300X: module-level ops must get identical numbers.
    module_ops = {
        "aten::linear",
        "aten::scaled_dot_product_attention",
        "aten::conv2d",
        "aten::layer_norm",
        "aten::softmax",
        "aten::embedding",
    }

    def work_multiset(prefix: str) -> Counter:
        return Counter(
            (e["name"], _work(e).flops, _work(e).bytes)
            for name, events in real_traces.items()
            if name.startswith(prefix)
            for e in events
            if e["name"] in module_ops
        )

    for model in HF_PAIRS:
        h100, mi300 = work_multiset(f"tl_h100_{model}/"), work_multiset(f"tl_mi300_{model}/")
        assert h100 and h100 == mi300, model
