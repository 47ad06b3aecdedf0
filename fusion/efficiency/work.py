"""FLOPs and minimum bytes moved by one PyTorch op call, from profiler-recorded shapes.

Input: one Kineto ``cpu_op`` event's ``Input Dims``, ``Input type``, ``Input Strides`` and
``Concrete Inputs``. Output: a :class:`Work`. Pure functions, standard library only.

General rules
-------------
* Nothing is guessed. If a shape, dtype or parameter that the count depends on is absent or not
  understood, the affected figure is ``None`` and ``reason`` says why (``''`` means fully counted).
* Bytes are the *minimum* traffic: each tensor input read once, each output written once, at the
  element size of its recorded dtype. An input with stride-0 dims (an ``expand``-ed view, only
  known when strides are recorded) counts only its distinct elements. 0-dim operands (Python
  scalars, which the profiler records as 0-dim ``double``/``long int`` tensors) are not counted.
  Small side outputs (layer-norm mean/rstd, attention logsumexp) are ignored.
* In-place ops (name ending ``_``, e.g. ``add_``) read all operands and write their first input.
* ``.out`` overloads record the ``out=`` tensor as a trailing input: it is written, not read.
  More tensor arguments than the op's schema allows (``MAX_TENSOR_ARGS``) are not counted: some
  traces (hta_sampled_rank0) attach unrelated tensors to an op.
* ``dtype`` is the compute dtype in the vocabulary fp64/fp32/tf32/bf16/fp16/fp8/int8, ``''`` when
  unknown or outside it (int16/32/64, bool, complex). TF32 is reported only where the trace
  records it: fp32 cuDNN convolutions with ``allow_tf32=True``; fp32 matmuls stay ``fp32``
  because the matmul TF32 flag is not recorded.

Per family
----------
* gemm: ``2·M·N·K`` per matrix product, ``× batch`` for bmm/baddbmm/matmul (matmul batch dims
  broadcast). A bias add (addmm/baddbmm/linear with bias, ``beta != 0``) adds ``M·N`` (× batch).
  Strides (transposed operands) do not change FLOPs or bytes. ``_scaled_mm`` writes
  ``out_dtype``.
* conv: ``2·N·K·prod(out spatial)·(C/groups)·prod(kernel)`` with out spatial from stride, padding,
  dilation (1d/2d/3d); plus ``N·K·prod(out spatial)`` when a bias tensor is passed (as for gemm;
  cuDNN passes no bias and a separate ``add_`` follows, MIOpen fuses it). Transposed conv counts
  ``2·N·C_in·prod(in spatial)·(K/groups)·prod(kernel)``.
* attention (SDPA family): ``2·B·H·Sq·Sk·(D + Dv)`` = ``4·B·H·Sq·Sk·D`` forward (QKᵀ and PV),
  halved when ``is_causal`` is recorded True (use :func:`dense_attention_flops` for the
  non-halved figure). Softmax inside attention is not counted. Bytes = q + k + v (+ mask) + out.
  Varlen (cu_seqlens) calls are not modelled: per-sequence lengths are not in the shapes.
* norm: per input element LAYER_NORM_FLOPS (5), RMS_NORM_FLOPS (4), GROUP_NORM_FLOPS (5),
  BATCH_NORM_TRAIN_FLOPS (5) / BATCH_NORM_EVAL_FLOPS (2). Bytes = input + weight/bias
  (+ running stats) + output; batch norm needs the recorded ``training`` flag.
* softmax: SOFTMAX_FLOPS (5) per element (max, subtract, exp, sum, divide). Bytes = in + out,
  out in fp32 when ``half_to_float`` / ``dtype`` say so.
* elementwise: ELEMENTWISE_FLOPS per output element (default 1; exceptions in the table, e.g.
  gelu 5 / 9 for the tanh form, silu 5, sigmoid 4, counting a transcendental as 1 flop).
  Output shape by broadcasting the tensor operands. A tensor operand beyond the op's arity is an
  ``out=`` tensor: written, not read.
* reduction: 1 flop per input element; output shape from ``dim``/``keepdim`` in Concrete Inputs
  (``dim=[]``/None: all dims). Integer sums write int64, arg-reductions int64, ``max.dim``
  values + int64 indices, all/any bool.
* embedding (gathers): 0 flops; bytes = indices + gathered rows read + output written.
* copy: 0 flops; bytes = read + write, with the target dtype of ``_to_copy``/``copy_``;
  ``contiguous`` on an already-contiguous input (by recorded strides) moves 0 bytes;
  ``fill_``/``zero_`` only write. ``cat`` gets no bytes: a TensorList's dtype is not recorded.
  Host<->device copies look the same as device copies in the args.
* Wrapper ops and their children are both modelled (linear -> addmm or matmul -> mm,
  conv2d -> convolution -> _convolution -> cudnn/miopen_convolution, SDPA -> flash): attribute
  each kernel to one level, or the work is counted more than once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

# --------------------------------------------------------------------------- families (data)
# aten ops are listed without the "aten::" prefix; other namespaces keep their full name.
# In-place variants ("add_") resolve to their base name ("add") unless listed themselves.
ELEMENTWISE_UNARY = (
    "neg",
    "abs",
    "reciprocal",
    "sqrt",
    "rsqrt",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "square",
    "sin",
    "cos",
    "tanh",
    "sigmoid",
    "erf",
    "relu",
    "gelu",
    "silu",
    "hardtanh",
    "leaky_relu",
    "elu",
    "nan_to_num",
    "sign",
    "sgn",
    "floor",
    "ceil",
    "round",
    "trunc",
    "isnan",
    "isinf",
    "logical_not",
    "bitwise_not",
    "clamp_min",
    "clamp_max",
)
ELEMENTWISE_BINARY = (
    "add",
    "sub",
    "rsub",
    "mul",
    "div",
    "pow",
    "minimum",
    "maximum",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_and",
    "logical_or",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "threshold_backward",
    "sigmoid_backward",
    "tanh_backward",
)
ELEMENTWISE_TERNARY = ("where", "clamp", "masked_fill", "addcmul", "addcdiv", "lerp")

FAMILIES: dict[str, tuple[str, ...]] = {
    "gemm": (
        "mm",
        "addmm",
        "bmm",
        "baddbmm",
        "matmul",
        "linear",
        "_scaled_mm",
        "vllm::rocm_unquantized_gemm",
        "aiter::gemm_a16w16",
    ),
    "conv": (
        "conv1d",
        "conv2d",
        "conv3d",
        "conv_transpose1d",
        "conv_transpose2d",
        "conv_transpose3d",
        "convolution",
        "_convolution",
        "cudnn_convolution",
        "cudnn_convolution_transpose",
        "miopen_convolution",
        "miopen_convolution_transpose",
        "miopen_depthwise_convolution",
    ),
    "attention": (
        "scaled_dot_product_attention",
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_flash_attention_forward",
        "_efficient_attention_forward",
    ),
    "norm": (
        "layer_norm",
        "native_layer_norm",
        "rms_norm",
        "_fused_rms_norm",
        "group_norm",
        "native_group_norm",
        "batch_norm",
        "native_batch_norm",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
        "cudnn_batch_norm",
        "miopen_batch_norm",
    ),
    "softmax": ("softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax"),
    "elementwise": ELEMENTWISE_UNARY + ELEMENTWISE_BINARY + ELEMENTWISE_TERNARY,
    "reduction": ("sum", "mean", "amax", "amin", "max", "min", "prod", "argmax", "argmin", "all", "any"),
    "embedding": ("embedding", "index_select", "gather"),
    "copy": ("copy_", "_to_copy", "clone", "contiguous", "cat", "fill_", "zero_"),
}
# Most tensor arguments (with dims) each op's schema can take; more means the profiler recorded
# something else (seen in hta_sampled_rank0: aten::linear with 6 tensors), so it is not counted.
MAX_TENSOR_ARGS: dict[str, int] = {
    "mm": 2,
    "bmm": 2,
    "matmul": 2,
    "addmm": 3,
    "baddbmm": 3,
    "linear": 3,
    "_scaled_mm": 6,
    "vllm::rocm_unquantized_gemm": 3,
    "aiter::gemm_a16w16": 3,
    **{op: 3 for op in FAMILIES["conv"]},
    "scaled_dot_product_attention": 4,
    "_scaled_dot_product_flash_attention": 3,
    "_scaled_dot_product_efficient_attention": 4,
    "_scaled_dot_product_cudnn_attention": 4,
    "_flash_attention_forward": 7,
    "_efficient_attention_forward": 7,
    "layer_norm": 3,
    "native_layer_norm": 3,
    "rms_norm": 2,
    "_fused_rms_norm": 2,
    "group_norm": 3,
    "native_group_norm": 3,
    **{op: 5 for op in FAMILIES["norm"] if "batch_norm" in op},
    **{op: 1 for op in FAMILIES["softmax"]},
    "embedding": 2,
    "index_select": 2,
    "gather": 2,
    "copy_": 2,
}
MATRIX_FAMILIES = frozenset({"gemm", "conv", "attention"})
_FAMILY_OF = {op: fam for fam, ops in FAMILIES.items() for op in ops}
_ARITY = {
    **{o: 1 for o in ELEMENTWISE_UNARY},
    **{o: 2 for o in ELEMENTWISE_BINARY},
    **{o: 3 for o in ELEMENTWISE_TERNARY},
}

# --------------------------------------------------------------------------- per-element costs
LAYER_NORM_FLOPS = 5  # (x-mean), square, accumulate, ·rstd, affine (DeepSpeed profiler's 5)
RMS_NORM_FLOPS = 4  # square, accumulate, ·rstd, ·weight
GROUP_NORM_FLOPS = 5  # same work as layer norm, over groups
BATCH_NORM_TRAIN_FLOPS = 5  # statistics + normalise + affine
BATCH_NORM_EVAL_FLOPS = 2  # running stats folded into one scale-and-shift
SOFTMAX_FLOPS = 5  # max, subtract, exp, sum, divide
REDUCTION_FLOPS = 1  # per input element
ELEMENTWISE_DEFAULT_FLOPS = 1
ELEMENTWISE_FLOPS: dict[str, int] = {  # per output element; transcendental = 1
    "gelu": 5,  # 0.5·x·(1+erf(x/√2)); the tanh form: GELU_TANH_FLOPS
    "silu": 5,  # x·sigmoid(x)
    "sigmoid": 4,  # 1/(1+exp(-x))
    "addcmul": 3,
    "addcdiv": 3,  # self + value·t1·t2
    "lerp": 3,  # self + w·(end-self)
    "sigmoid_backward": 3,  # g·y·(1-y)
    "tanh_backward": 3,  # g·(1-y²)
}
GELU_TANH_FLOPS = 9  # 0.5·x·(1+tanh(√(2/π)·(x+0.044715·x³)))

# --------------------------------------------------------------------------- dtypes
_TYPES: dict[str, tuple[str, int]] = {
    "double": ("fp64", 8),
    "float": ("fp32", 4),
    "c10::Half": ("fp16", 2),
    "c10::BFloat16": ("bf16", 2),
    "c10::Float8_e4m3fn": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
    "c10::Float8_e8m0fnu": ("", 1),
    "c10::Float4_e2m1fn_x2": ("", 1),
    "signed char": ("int8", 1),
    "unsigned char": ("int8", 1),
    "bool": ("", 1),
    "short int": ("", 2),
    "short": ("", 2),
    "unsigned short": ("", 2),
    "int": ("", 4),
    "unsigned int": ("", 4),
    "long int": ("", 8),
    "long": ("", 8),
    "long long": ("", 8),
    "unsigned long": ("", 8),
    "c10::complex<c10::Half>": ("", 4),
    "c10::complex<float>": ("", 8),
    "c10::complex<double>": ("", 16),
}
_TYPES_LOWER = {k.lower(): v for k, v in _TYPES.items()}
# c10::ScalarType enum values, as recorded in Concrete Inputs (e.g. _to_copy's dtype "15").
SCALAR_TYPE_ENUM: dict[int, str] = {
    0: "unsigned char",
    1: "signed char",
    2: "short int",
    3: "int",
    4: "long int",
    5: "c10::Half",
    6: "float",
    7: "double",
    8: "c10::complex<c10::Half>",
    9: "c10::complex<float>",
    10: "c10::complex<double>",
    11: "bool",
    15: "c10::BFloat16",
    23: "c10::Float8_e5m2",
    24: "c10::Float8_e4m3fn",
    25: "c10::Float8_e5m2fnuz",
    26: "c10::Float8_e4m3fnuz",
    44: "c10::Float8_e8m0fnu",
    45: "c10::Float4_e2m1fn_x2",
}


def _type_info(type_name: str) -> tuple[str, int] | None:
    return _TYPES.get(type_name) or _TYPES_LOWER.get(str(type_name).lower())


def dtype_of(type_name: str) -> str:
    """Profiler ``Input type`` string -> "fp64"/"fp32"/"bf16"/"fp16"/"fp8"/"int8"/""."""
    info = _type_info(type_name)
    return info[0] if info else ""


def element_bytes(type_name: str) -> int | None:
    """Bytes per element of a profiler ``Input type``; None for non-tensors ("Scalar", "")."""
    info = _type_info(type_name)
    return info[1] if info else None


# --------------------------------------------------------------------------- result type
@dataclass(frozen=True)
class Work:
    flops: float | None
    bytes: float | None
    matrix: bool  # matrix/tensor-core work (gemm, conv, attention) vs vector work
    dtype: str  # compute dtype: fp64/fp32/tf32/bf16/fp16/fp8/int8, '' unknown
    family: str  # a FAMILIES key, '' when the op is not modelled
    reason: str  # '' when counted; otherwise why not


class _Unknown(Exception):
    """Raised to give up on a figure with a reason; never escapes op_work."""


def family_of(op: str) -> str:
    """Family of an op name ('' if not modelled); handles 'aten::' and in-place '_' suffix."""
    return _FAMILY_OF.get(_base(op)[0], "")


def _base(op: str) -> tuple[str, bool]:
    """(table name, in_place) for a profiler op name."""
    name = op[6:] if op.startswith("aten::") else op
    if name in _FAMILY_OF:
        return name, False
    if name.endswith("_") and _FAMILY_OF.get(name[:-1]) == "elementwise":
        return name[:-1], True
    return name, False


# --------------------------------------------------------------------------- argument access
@dataclass
class _Args:
    dims: list
    types: list
    strides: list | None
    concrete: list | None
    _shapes: list[list[int] | None] = field(init=False, repr=False)
    """Each argument's dims where they are a shape (a list of ints), else None: read many times per op."""
    _tensors: list[bool] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._shapes = [_shape_of(d) for d in self.dims]
        self._tensors = [d is not None and element_bytes(self.type(i)) is not None for i, d in enumerate(self._shapes)]

    def shape(self, i: int) -> list[int] | None:
        return self._shapes[i] if i < len(self._shapes) else None

    def type(self, i: int) -> str:
        return self.types[i] if i < len(self.types) else ""

    def is_tensor(self, i: int) -> bool:
        return i < len(self._tensors) and self._tensors[i]

    def tensor(self, i: int) -> list[int]:
        """Shape of a required tensor argument."""
        if not self.is_tensor(i):
            raise _Unknown("shape not understood")
        return self.shape(i)  # type: ignore[return-value]

    def has_tensor(self, i: int) -> bool:
        """An optional tensor argument that was passed (not None, not 0-dim scalar)."""
        return self.is_tensor(i) and len(self.shape(i) or []) > 0

    def ci(self, i: int) -> str | None:
        """Concrete input i as a string; None if Concrete Inputs were not recorded."""
        if self.concrete is None or i >= len(self.concrete):
            return None
        return str(self.concrete[i])

    def need(self, i: int, what: str) -> str:
        v = self.ci(i)
        if v is None or v == "":
            raise _Unknown(f"{what} not recorded")
        return v

    def read_bytes(self, i: int) -> int:
        """Distinct bytes of tensor input i (stride-0 dims count once)."""
        shape = self.tensor(i)
        strides = None
        if self.strides is not None and i < len(self.strides):
            st = self.strides[i]
            if isinstance(st, list) and len(st) == len(shape):
                strides = st
        elems = math.prod(d for k, d in enumerate(shape) if strides is None or strides[k] != 0)
        return elems * _bytes_of(self.type(i))

    def tensors(self) -> list[int]:
        return [i for i in range(len(self.dims)) if self.has_tensor(i)]


def _shape_of(dims: object) -> list[int] | None:
    if isinstance(dims, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in dims):
        return dims
    return None


def _bytes_of(type_name: str) -> int:
    b = element_bytes(type_name)
    if b is None:
        raise _Unknown(f"unknown dtype {type_name!r}")
    return b


def _ints(s: str) -> list[int]:
    s = s.strip().strip("[]()")
    return [int(x) for x in s.split(",") if x.strip()]


def _bool(s: str) -> bool:
    if s in ("True", "true", "1"):
        return True
    if s in ("False", "false", "0"):
        return False
    raise _Unknown(f"bool argument {s!r} not understood")


def _enum_type(s: str) -> str:
    t = SCALAR_TYPE_ENUM.get(int(s))
    if t is None:
        raise _Unknown(f"dtype enum {s} not known")
    return t


def _broadcast(shapes: list[list[int]]) -> list[int]:
    out: list[int] = []
    for shape in shapes:
        a, b = out[::-1], shape[::-1]
        merged = []
        for k in range(max(len(a), len(b))):
            x = a[k] if k < len(a) else 1
            y = b[k] if k < len(b) else 1
            if x != y and 1 not in (x, y):
                raise _Unknown("shape not understood: not broadcastable")
            merged.append(y if x == 1 else x)
        out = merged[::-1]
    return out


_FLOAT_RANK = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


def _category(t: str) -> int:
    """2 float, 1 integer, 0 bool (type promotion categories)."""
    return 0 if t == "bool" else 2 if dtype_of(t) in _FLOAT_RANK else 1


def _promote(types: list[str], scalar_types: list[str]) -> str:
    """Result type of an elementwise op (PyTorch promotion, simplified to the recorded types)."""
    best = types[0]
    for t in types[1:]:
        if t == best:
            continue
        cb, ct = _category(best), _category(t)
        if ct != cb:
            best = t if ct > cb else best
        elif _bytes_of(t) != _bytes_of(best):
            best = t if _bytes_of(t) > _bytes_of(best) else best
        else:  # e.g. bf16 with fp16 -> fp32
            best = "float" if cb == 2 else best
    for t in scalar_types:  # 0-dim operands only raise the category
        if _category(t) > _category(best):
            best = "float" if t == "double" else t  # Python floats promote to the default fp32
    return best


def _work(family: str, flops: float | None, nbytes: float | None, dtype: str, reason: str = "") -> Work:
    return Work(
        None if flops is None else float(flops),
        None if nbytes is None else float(nbytes),
        family in MATRIX_FAMILIES,
        dtype,
        family,
        reason,
    )


# --------------------------------------------------------------------------- gemm
_LINEAR_LIKE = ("linear", "vllm::rocm_unquantized_gemm", "aiter::gemm_a16w16")


def _gemm(name: str, a: _Args) -> Work:
    bias: int | None = None
    out_type = a.type(0)
    if name in _LINEAR_LIKE:  # x [..., K], weight [N, K], bias [N]
        x, w = a.tensor(0), a.tensor(1)
        if len(x) < 1 or len(w) != 2 or x[-1] != w[1]:
            raise _Unknown("shape not understood")
        batch, m, k, n = 1, math.prod(x[:-1]), x[-1], w[0]
        bias = 2
    elif name in ("mm", "addmm", "_scaled_mm", "bmm", "baddbmm"):
        i = 1 if name in ("addmm", "baddbmm") else 0
        p, q = a.tensor(i), a.tensor(i + 1)
        rank = 3 if name in ("bmm", "baddbmm") else 2
        if len(p) != rank or len(q) != rank or p[-1] != q[-2] or p[:-2] != q[:-2]:
            raise _Unknown("shape not understood")
        batch, m, k, n = math.prod(p[:-2]), p[-2], p[-1], q[-1]
        out_type = a.type(i)
        if i == 1:
            beta = a.ci(3)
            bias = None if beta is not None and beta in ("0", "0.") else 0
        if name == "_scaled_mm":
            bias = 4
            if a.ci(6) is None:
                raise _Unknown("out_dtype not recorded")
            out_type = _enum_type(a.ci(6)) if a.ci(6) else a.type(0)  # type: ignore[arg-type]
    else:  # matmul, torch.matmul semantics
        p, q = a.tensor(0), a.tensor(1)
        if not p or not q:
            raise _Unknown("shape not understood")
        p2 = [1] + p if len(p) == 1 else p
        q2 = q + [1] if len(q) == 1 else q
        if p2[-1] != q2[-2]:
            raise _Unknown("shape not understood")
        batch = math.prod(_broadcast([p2[:-2], q2[:-2]]))
        m, k, n = p2[-2], p2[-1], q2[-1]
    flops = 2 * batch * m * n * k
    if bias is not None and a.has_tensor(bias):
        flops += batch * m * n
    nbytes = sum(a.read_bytes(i) for i in a.tensors()) + batch * m * n * _bytes_of(out_type)
    return _work("gemm", flops, nbytes, dtype_of(a.type(0)))


# --------------------------------------------------------------------------- conv
class _ConvArgs(NamedTuple):
    stride: int
    padding: int
    dilation: int
    groups: int
    transposed: int | bool  # argument index, or a constant
    output_padding: int | None
    tf32: int | None = None  # allow_tf32 argument index


_CONV: dict[str, _ConvArgs] = {
    "conv1d": _ConvArgs(3, 4, 5, 6, False, None),
    "conv2d": _ConvArgs(3, 4, 5, 6, False, None),
    "conv3d": _ConvArgs(3, 4, 5, 6, False, None),
    "conv_transpose1d": _ConvArgs(3, 4, 7, 6, True, 5),
    "conv_transpose2d": _ConvArgs(3, 4, 7, 6, True, 5),
    "conv_transpose3d": _ConvArgs(3, 4, 7, 6, True, 5),
    "convolution": _ConvArgs(3, 4, 5, 8, 6, 7),
    "_convolution": _ConvArgs(3, 4, 5, 8, 6, 7, 12),
    "cudnn_convolution": _ConvArgs(3, 2, 4, 5, False, None, 8),  # (self, weight, padding,
    "cudnn_convolution_transpose": _ConvArgs(4, 2, 5, 6, True, 3, 9),  #  stride, ...): no bias
    "miopen_convolution": _ConvArgs(4, 3, 5, 6, False, None),  # padding before stride
    "miopen_depthwise_convolution": _ConvArgs(4, 3, 5, 6, False, None),
    "miopen_convolution_transpose": _ConvArgs(5, 3, 6, 7, True, 4),
}


def _conv(name: str, a: _Args) -> Work:
    spec = _CONV[name]
    x, w = a.tensor(0), a.tensor(1)
    nsp = len(w) - 2
    if nsp not in (1, 2, 3) or len(x) not in (nsp + 1, nsp + 2):
        raise _Unknown("shape not understood")
    if len(x) == nsp + 1:  # unbatched input
        x = [1] + x
    n, c, in_sp, r = x[0], x[1], x[2:], w[2:]

    def lst(i: int, what: str) -> list[int]:
        v = _ints(a.need(i, what))
        return v * nsp if len(v) == 1 else v

    groups = int(a.need(spec.groups, "groups"))
    transposed = spec.transposed if isinstance(spec.transposed, bool) else _bool(a.need(spec.transposed, "transposed"))
    stride, dilation = lst(spec.stride, "stride"), lst(spec.dilation, "dilation")
    if len(stride) != nsp or len(dilation) != nsp or groups < 1:
        raise _Unknown("shape not understood")
    pad_s = a.need(spec.padding, "padding")
    if pad_s in ("same", "valid"):  # conv2d(padding='same'|'valid')
        out_sp = (
            list(in_sp)
            if pad_s == "same"
            else [(i - d * (k - 1) - 1) // s + 1 for i, k, s, d in zip(in_sp, r, stride, dilation, strict=True)]
        )
        padding = None
    else:
        padding = lst(spec.padding, "padding")
        if len(padding) != nsp:
            raise _Unknown("shape not understood")
    if transposed:
        outpad = lst(spec.output_padding, "output_padding") if spec.output_padding else [0] * nsp
        if w[0] != c:
            raise _Unknown("shape not understood")
        k_out = w[1] * groups
        out_sp = [
            (i - 1) * s - 2 * p + d * (k - 1) + op + 1
            for i, k, s, p, d, op in zip(in_sp, r, stride, padding or [0] * nsp, dilation, outpad, strict=True)
        ]
        flops = 2 * n * c * math.prod(in_sp) * (k_out // groups) * math.prod(r)
    else:
        if w[1] * groups != c:
            raise _Unknown("shape not understood")
        k_out = w[0]
        if padding is not None:
            out_sp = [
                (i + 2 * p - d * (k - 1) - 1) // s + 1
                for i, k, s, p, d in zip(in_sp, r, stride, padding, dilation, strict=True)
            ]
        flops = 2 * n * k_out * math.prod(out_sp) * (c // groups) * math.prod(r)
    if min(out_sp) <= 0:
        raise _Unknown("shape not understood")
    out_elems = n * k_out * math.prod(out_sp)
    if a.has_tensor(2):  # cuDNN's arg 2 is padding: never a tensor
        flops += out_elems
    nbytes = sum(a.read_bytes(i) for i in a.tensors()) + out_elems * _bytes_of(a.type(0))
    dtype = dtype_of(a.type(0))
    if dtype == "fp32" and spec.tf32 is not None and a.ci(spec.tf32) == "True":
        dtype = "tf32"
    return _work("conv", flops, nbytes, dtype)


# --------------------------------------------------------------------------- attention
class _AttnArgs(NamedTuple):
    bshd: bool  # layout [B, S, H, D] instead of [..., S, D]
    causal: int  # is_causal (or custom_mask_type) argument index
    mask_type: bool  # causal index holds _efficient_attention's custom_mask_type
    varlen: int | None  # cu_seqlens_q argument index


_ATTN: dict[str, _AttnArgs] = {
    "scaled_dot_product_attention": _AttnArgs(False, 5, False, None),
    "_scaled_dot_product_flash_attention": _AttnArgs(False, 4, False, None),
    "_scaled_dot_product_efficient_attention": _AttnArgs(False, 6, False, None),
    "_scaled_dot_product_cudnn_attention": _AttnArgs(False, 6, False, None),
    "_flash_attention_forward": _AttnArgs(True, 8, False, 3),
    "_efficient_attention_forward": _AttnArgs(True, 9, True, 4),
}


def attention_flops(bh: int, sq: int, sk: int, d: int, dv: int | None = None, causal: bool = False) -> float:
    """Forward attention FLOPs: QKᵀ (2·Sq·Sk·D) + PV (2·Sq·Sk·Dv) per (batch, head), ½ if causal."""
    dv = d if dv is None else dv
    return 2.0 * bh * sq * sk * (d + dv) * (0.5 if causal else 1.0)


def _attn_shape(name: str, a: _Args) -> tuple[int, int, int, int, int]:
    """(B·H, Sq, Sk, D, Dv) from q, k, v."""
    spec = _ATTN[name]
    if spec.varlen is not None and a.has_tensor(spec.varlen):
        raise _Unknown("varlen attention not modelled")
    q, k, v = a.tensor(0), a.tensor(1), a.tensor(2)
    if spec.bshd:
        if not len(q) == len(k) == len(v) == 4:
            raise _Unknown("shape not understood")
        return q[0] * q[2], q[1], k[1], q[3], v[3]
    if len(q) < 2 or len(k) != len(q) or len(v) != len(q) or k[-1] != q[-1] or v[-2] != k[-2]:
        raise _Unknown("shape not understood")
    return math.prod(q[:-2]), q[-2], k[-2], q[-1], v[-1]


def dense_attention_flops(op: str, input_dims: list, input_types: list) -> float | None:
    """Attention FLOPs without the causal half (None if the op/shape is not understood)."""
    name = _base(op)[0]
    if name not in _ATTN or not input_dims:
        return None
    try:
        return attention_flops(*_attn_shape(name, _Args(input_dims, input_types, None, None)))
    except _Unknown:
        return None


def _attention(name: str, a: _Args) -> Work:
    bh, sq, sk, d, dv = _attn_shape(name, a)
    spec = _ATTN[name]
    nbytes = sum(a.read_bytes(i) for i in a.tensors()) + bh * sq * dv * _bytes_of(a.type(0))
    flag = a.ci(spec.causal)
    if flag is None or flag == "":
        return _work("attention", None, nbytes, dtype_of(a.type(0)), "is_causal not recorded")
    causal = int(flag) in (1, 2) if spec.mask_type else _bool(flag)
    return _work("attention", attention_flops(bh, sq, sk, d, dv, causal), nbytes, dtype_of(a.type(0)))


# --------------------------------------------------------------------------- norm, softmax


def _norm(name: str, a: _Args) -> Work:
    x = a.tensor(0)
    numel = math.prod(x)
    if "layer_norm" in name:
        per = LAYER_NORM_FLOPS
    elif "rms_norm" in name:
        per = RMS_NORM_FLOPS
    elif "group_norm" in name:
        per = GROUP_NORM_FLOPS
    elif name == "_native_batch_norm_legit_no_training":
        per = BATCH_NORM_EVAL_FLOPS
    else:  # (input, weight, bias, running_mean, running_var, training, ...); the no_stats
        # overload of _native_batch_norm_legit has no running stats: training is arg 3
        at = 3 if name == "_native_batch_norm_legit" and a.type(3) == "Scalar" else 5
        training = _bool(a.need(at, "training flag"))
        per = BATCH_NORM_TRAIN_FLOPS if training else BATCH_NORM_EVAL_FLOPS
    nbytes = sum(a.read_bytes(i) for i in a.tensors()) + numel * _bytes_of(a.type(0))
    return _work("norm", per * numel, nbytes, dtype_of(a.type(0)))


def _softmax(name: str, a: _Args) -> Work:
    x = a.tensor(0)
    out_type = a.type(0)
    if name.startswith("_") and name != "_safe_softmax":  # (self, dim, half_to_float)
        if dtype_of(out_type) in ("fp16", "bf16") and _bool(a.need(2, "half_to_float")):
            out_type = "float"
    elif a.type(2) != "":  # (self, dim, dtype) dtype passed
        out_type = _enum_type(a.need(2, "dtype"))
    numel = math.prod(x)
    nbytes = a.read_bytes(0) + numel * _bytes_of(out_type)
    return _work("softmax", SOFTMAX_FLOPS * numel, nbytes, dtype_of(a.type(0)))


# --------------------------------------------------------------------------- elementwise
_BOOL_RESULT = (
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "isnan",
    "isinf",
    "logical_and",
    "logical_or",
    "logical_xor",
    "logical_not",
)


def _elementwise(name: str, a: _Args, in_place: bool) -> Work:
    tensor_args = [i for i in range(len(a.dims)) if a.is_tensor(i)]
    arity = _ARITY[name]
    operands, outs = tensor_args[:arity], tensor_args[arity:]
    if not operands or len(outs) > 1:
        raise _Unknown("shape not understood")
    shaped = [i for i in operands if a.shape(i)]
    scalars = [a.type(i) for i in operands if not a.shape(i)]
    if in_place:
        out_shape, out_type = a.tensor(operands[0]), a.type(operands[0])
        if _broadcast([a.tensor(i) for i in shaped] + [out_shape]) != out_shape:
            raise _Unknown("shape not understood: in-place broadcast")
    else:
        out_shape = _broadcast([a.tensor(i) for i in shaped])
        out_type = _promote([a.type(i) for i in shaped] or scalars[:1], scalars)
    compute_type = out_type
    if name in _BOOL_RESULT:
        compute_type = _promote([a.type(i) for i in shaped] or scalars[:1], scalars)
        out_type = "bool" if not in_place else out_type
    if outs:  # out= tensor; recorded empty if to be resized
        if a.tensor(outs[0]) != out_shape and math.prod(a.tensor(outs[0])) != 0:
            raise _Unknown("shape not understood: out= shape")
        out_type = a.type(outs[0])
    numel = math.prod(out_shape)
    per = ELEMENTWISE_FLOPS.get(name, ELEMENTWISE_DEFAULT_FLOPS)
    if name == "gelu" and a.ci(1) == "tanh":
        per = GELU_TANH_FLOPS
    nbytes = sum(a.read_bytes(i) for i in shaped) + numel * _bytes_of(out_type)
    return _work("elementwise", per * numel, nbytes, dtype_of(compute_type))


# --------------------------------------------------------------------------- reduction
_INDEX_RESULT = ("argmax", "argmin")


def _reduction(name: str, a: _Args) -> Work:
    if name in ("max", "min") and a.is_tensor(1) and a.shape(1) is not None:
        return _elementwise("maximum" if name == "max" else "minimum", a, False)
    x = a.tensor(0)
    n_args = len(a.dims)
    if n_args == 1 or (name in ("sum", "mean", "prod") and n_args == 2):
        reduced, keepdim = list(range(len(x))), False  # full reduction, (self[, dtype])
    else:
        if a.concrete is None:
            raise _Unknown("reduction dims not recorded")
        dim_s = a.need(1, "dim") if a.type(1) != "" else ""
        reduced = [d % len(x) for d in _ints(dim_s)] if x else []
        if not reduced:  # dim=None or [] -> all dims
            reduced = list(range(len(x)))
        keepdim = _bool(a.need(2, "keepdim"))
    out_shape = (
        [1 if k in reduced else d for k, d in enumerate(x)]
        if keepdim
        else [d for k, d in enumerate(x) if k not in reduced]
    )
    out_elems = math.prod(out_shape)
    in_type = a.type(0)
    if name in _INDEX_RESULT:
        out_bytes = out_elems * 8
    elif name in ("max", "min") and n_args == 3:  # max.dim: values + int64 indices
        out_bytes = out_elems * (_bytes_of(in_type) + 8)
    elif name in ("all", "any"):
        out_bytes = out_elems * 1
    elif name in ("sum", "prod") and _category(in_type) < 2:  # integral sums widen to int64
        dtype_arg = 1 if n_args == 2 else 3
        if a.type(dtype_arg) != "":
            raise _Unknown("dtype argument not understood")
        out_bytes = out_elems * 8
    else:
        out_bytes = out_elems * _bytes_of(in_type)
    flops = REDUCTION_FLOPS * math.prod(x)
    return _work("reduction", flops, a.read_bytes(0) + out_bytes, dtype_of(in_type))


# --------------------------------------------------------------------------- embedding, copy
def _embedding(name: str, a: _Args) -> Work:
    if name == "embedding":  # (weight [V, D], indices [...])
        w, idx_i = a.tensor(0), 1
        if len(w) != 2:
            raise _Unknown("shape not understood")
        gathered = math.prod(a.tensor(1)) * w[1]
    elif name == "index_select":  # (self, dim, index [L])
        x, idx_i = a.tensor(0), 2
        if len(a.tensor(2)) > 1:
            raise _Unknown("shape not understood")
        dim = 0 if len(x) <= 1 else int(a.need(1, "dim")) % len(x)
        gathered = math.prod(x) // max(x[dim], 1) * math.prod(a.tensor(2)) if x else 1
    else:  # gather(self, dim, index): out = index shape
        idx_i = 2
        a.tensor(0)
        gathered = math.prod(a.tensor(2))
    if _category(a.type(idx_i)) != 1:  # indices are integers; anything else is not this op's schema
        raise _Unknown("shape not understood: indices not integer")
    row_bytes = _bytes_of(a.type(0))
    nbytes = a.read_bytes(idx_i) + 2 * gathered * row_bytes
    return _work("embedding", 0, nbytes, dtype_of(a.type(0)))


def _is_contiguous(shape: list[int], strides: list[int]) -> bool:
    expected = 1
    for d, s in zip(reversed(shape), reversed(strides), strict=True):
        if d != 1 and s != expected:
            return False
        expected *= d
    return True


def _copy(name: str, a: _Args) -> Work:
    if name == "cat":
        if a.type(0) == "TensorList":
            return _work("copy", 0, None, "", "TensorList element type not recorded")
        raise _Unknown("shape not understood")
    x = a.tensor(0)
    numel = math.prod(x)
    dtype = dtype_of(a.type(0))
    if name in ("fill_", "zero_"):
        return _work("copy", 0, numel * _bytes_of(a.type(0)), dtype)
    if name == "copy_":  # (self <- src): read src, write self
        if _broadcast([a.tensor(1), x]) != x:
            raise _Unknown("shape not understood")
        return _work("copy", 0, a.read_bytes(1) + numel * _bytes_of(a.type(0)), dtype)
    out_type = a.type(0)
    if name == "_to_copy":  # (self, dtype, layout, device, ...)
        if a.type(1) != "":
            out_type = _enum_type(a.need(1, "target dtype"))
    elif name == "contiguous":
        if not a.strides or not isinstance(a.strides[0], list) or len(a.strides[0]) != len(x):
            raise _Unknown("contiguity unknown without Input Strides")
        if a.ci(1) not in (None, "", "0"):
            raise _Unknown("memory_format not modelled")
        if _is_contiguous(x, a.strides[0]):
            return _work("copy", 0, 0, dtype)  # returns self, no kernel
    return _work("copy", 0, a.read_bytes(0) + numel * _bytes_of(out_type), dtype)


# --------------------------------------------------------------------------- entry point
def _drop_last(a: _Args) -> _Args:
    """Arguments without the trailing out= tensor, which is written (as the output), not read."""
    cut = len(a.dims) - 1
    return _Args(
        a.dims[:cut],
        a.types[:cut],
        a.strides[:cut] if a.strides else a.strides,
        a.concrete[:cut] if a.concrete else a.concrete,
    )


def op_work(
    op: str,
    input_dims: list | None,
    input_types: list | None,
    input_strides: list | None = None,
    concrete_inputs: list | None = None,
) -> Work:
    """FLOPs and minimum bytes of one op call (see the module docstring for conventions)."""
    name, in_place = _base(op)
    family = _FAMILY_OF.get(name, "")
    if not family:
        return _work("", None, None, "", "op not modelled")
    if not input_dims:
        return _work(family, None, None, "", "no Input Dims")
    a = _Args(list(input_dims), list(input_types or []), input_strides, concrete_inputs)
    limit = MAX_TENSOR_ARGS.get(name, len(a.dims))
    if len(a.tensors()) > limit:
        if len(a.tensors()) == limit + 1 and a.has_tensor(len(a.dims) - 1):
            a = _drop_last(a)  # trailing out= tensor (".out" overload)
        else:
            return _work(family, None, None, dtype_of(a.type(0)), "unexpected extra tensor arguments")
    try:
        if family == "gemm":
            return _gemm(name, a)
        if family == "conv":
            return _conv(name, a)
        if family == "attention":
            return _attention(name, a)
        if family == "norm":
            return _norm(name, a)
        if family == "softmax":
            return _softmax(name, a)
        if family == "elementwise":
            return _elementwise(name, a, in_place)
        if family == "reduction":
            return _reduction(name, a)
        if family == "embedding":
            return _embedding(name, a)
        return _copy(name, a)
    except _Unknown as e:
        reason = str(e)
    except (ValueError, TypeError, IndexError, ZeroDivisionError) as e:
        reason = f"args not understood ({type(e).__name__})"
    return _work(family, None, None, dtype_of(a.type(0)), reason)
