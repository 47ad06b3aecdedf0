"""The words classification uses: operation types, helper roles, platforms and Inductor kernel kinds.

The same type words are used on both vendors. A kernel's type is what it computes as a whole; what it
also performs is listed as fused components (more of these words); a helper role marks a kernel that is
one part of another operation: a split role's kernel carries that operation's type, a layout conversion is
copy work (MemCopy) that serves it.
"""

from __future__ import annotations

KERNEL_TYPES: tuple[str, ...] = (
    "GEMM",
    "MoE_GEMM",
    "Attention",
    "KV_Cache",
    "Communication",
    "Convolution",
    "RMSNorm",
    "LayerNorm",
    "BatchNorm",
    "GroupNorm",
    "L2Norm",
    "SwiGLU",
    "SiLU",
    "GELU",
    "ReLU",
    "RoPE",
    "MoE_Routing",
    "Softmax",
    "Embedding",
    "Quantize",
    "Cast",
    "Reduce",
    "Sort",
    "Scan",
    "Elementwise",
    "MemCopy",
    "Memset",
    "Other",
)
"""SwiGLU is silu(gate) * up in one kernel, SiLU a silu alone; L2Norm divides each row by its L2 norm
(no mean subtracted; weight_norm then scales by its gain); Cast converts dtypes (fusable work), MemCopy
copies without converting. Other (last) is what no rule and no op could type, and what no type describes
(token samplers)."""

SPLIT_ROLES: tuple[str, ...] = ("split_k_reduce", "split_kv_combine", "sort_pass")
"""Roles of kernels that are one part of an operation of their own type (a split-K reduce is GEMM work): the
alignment folds them into that operation's kernel."""
LAYOUT_ROLE = "layout"
"""The role of a layout conversion (NCHW <-> NHWC, a transpose) that serves the op beside it: typed MemCopy (its
own work), never as the op it serves, and not folded into it."""
HELPER_ROLES: tuple[str, ...] = (*SPLIT_ROLES, LAYOUT_ROLE)
"""Roles of kernels that are one part of another operation."""

PLATFORMS: tuple[str, ...] = ("AMD", "NVIDIA", "unknown")
VENDORS: tuple[str, ...] = ("AMD", "NVIDIA")

INDUCTOR_KINDS: tuple[str, ...] = ("poi", "red", "per", "tem", "for")
"""triton_<kind>_fused_...: pointwise, reduction, persistent reduction, template, foreach."""

PREFILL, DECODE, MIXED = "prefill", "decode", "mixed"
FORWARD, BACKWARD, OPTIMIZER = "forward", "backward", "optimizer"
ALL = "all"
PHASES = (PREFILL, DECODE, MIXED, FORWARD, BACKWARD, OPTIMIZER, ALL)
"""A kernel's phase (fusion/phases.py assigns them); here so the command line knows them without pandas."""

GPU_KERNEL, GPU_MEMCPY, GPU_MEMSET = "kernel", "memcpy", "memset"
GPU_WORK = (GPU_KERNEL, GPU_MEMCPY, GPU_MEMSET)
"""What a row of a trace's kernel table is: a kernel, or a memory copy or memset the GPU ran (typed MemCopy and
Memset by their names, counted beside the kernels)."""
