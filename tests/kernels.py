"""Build small Trace objects straight from kernel lists, for unit tests of the comparison pipeline."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from fusion.classify.names import KERNEL_TYPES, inductor_ops
from fusion.model.ops import unrecorded_columns
from fusion.model.phases import no_phase_columns
from fusion.model.trace import Trace

Kernel = tuple[str, str, float, int]
"""(name, kernel_type, dur_us, correlation)."""


def make_trace(
    kernels: list[Kernel],
    label: str = "T",
    platform: str = "AMD",
    fused: dict[str, tuple[str, ...]] | None = None,
    helpers: dict[str, str] | None = None,
    single_op: frozenset[str] = frozenset(),
) -> Trace:
    """A Trace whose kernels run back to back in list order (1 µs apart).

    `fused` gives a name's fused components (operation types), `helpers` a name's helper role; `single_op` holds
    the names that say they compute one operation only.
    """
    names = [k[0] for k in kernels]
    dur = np.array([k[2] for k in kernels], dtype=np.float64)
    ts = np.cumsum(np.r_[0.0, dur[:-1] + 1.0]) if len(kernels) else np.zeros(0)
    table = pd.DataFrame(
        {
            "name": pd.Categorical(names),
            "type": pd.Categorical([k[1] for k in kernels], categories=list(KERNEL_TYPES)),
            "ts": ts,
            "dur": dur,
            "correlation": np.array([k[3] for k in kernels], dtype=np.int64),
            "stream": np.full(len(kernels), 7, dtype=np.int64),
            "device": np.zeros(len(kernels), dtype=np.int64),
            **unrecorded_columns(len(kernels)),
            **no_phase_columns(len(kernels)),
        }
    )
    name_types = dict(zip(names, (k[1] for k in kernels)))
    fused, helpers = fused or {}, helpers or {}
    info = pd.DataFrame(
        {
            "type": list(name_types.values()),
            "rule": "test",
            "components": [inductor_ops(n) for n in name_types],
            "fused_components": [fused.get(n, ()) for n in name_types],
            "implementation": "",
            "helper": [helpers.get(n, "") for n in name_types],
            "single_op": [n in single_op for n in name_types],
            "count": [names.count(n) for n in name_types],
            "time_us": 0.0,
        },
        index=pd.Index(list(name_types), name="name"),
    )
    return Trace(
        label=label,
        source=f"{label}.json",
        platform=platform,
        platform_evidence="test",
        gpu=label,
        gpu_recorded=True,
        device_properties=[],
        kernels=table,
        names=info,
        digest=_digest(kernels),
    )


def _digest(kernels: list[Kernel]) -> str:
    """Stands for the file digest: equal kernel lists are the same trace."""
    return hashlib.sha256(repr(kernels).encode()).hexdigest()


def steps(
    step: list[tuple[str, str]], count: int, first_correlation: int = 1, eager: bool = False, dur: float = 5.0
) -> list[Kernel]:
    """`count` repetitions of one step (name, type list): one correlation id per step, or per kernel if eager."""
    out: list[Kernel] = []
    corr = first_correlation
    for _ in range(count):
        for name, kernel_type in step:
            out.append((name, kernel_type, dur, corr))
            corr += eager
        corr += not eager
    return out


def layer(fused: bool, layers: int = 10) -> list[tuple[str, str]]:
    """A decoder-like step: unfused = add + rms_norm, fused = one fused_add_rms_norm; 3 GEMMs per layer."""
    body: list[tuple[str, str]] = []
    for _ in range(layers):
        body += [("gemm_qkv", "GEMM"), ("attn", "Attention"), ("gemm_o", "GEMM")]
        body += (
            [("fused_add_rms_norm_kernel", "RMSNorm")]
            if fused
            else [("elementwise_add", "Elementwise"), ("rms_norm_kernel", "RMSNorm")]
        )
        body += [("gemm_up", "GEMM"), ("silu_and_mul_kernel", "SwiGLU"), ("gemm_down", "GEMM")]
    return body
