"""Test helpers: where the real traces live, and small trace-file builders."""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path
from typing import Any

import orjson
import pytest

PROJECT = Path(__file__).resolve().parents[1]
SHARED_TRACES = PROJECT.parent / "shared" / "traces"
SAMPLES = PROJECT / "sample_traces"


def shared_trace(name: str) -> Path:
    """The trace file of one shared folder; skips the test when ../shared is absent."""
    folder = SHARED_TRACES / name
    if not folder.is_dir():
        pytest.skip(f"shared trace {name} not available ({SHARED_TRACES} is absent)")
    return next(p for p in sorted(folder.iterdir()) if p.name.endswith((".json", ".json.gz")))


def shared_trace_names() -> list[str]:
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(p.name for p in SHARED_TRACES.iterdir() if (p / "kernel_names.txt").exists())


def kernel_event(name: str, ts: float, dur: float, correlation: int, cat: str = "kernel", **args: Any) -> dict:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": 7, "correlation": correlation, **args},
    }


def trace_json(events: list[dict], **top: Any) -> bytes:
    doc = {"schemaVersion": 1, **top, "traceEvents": events}
    return orjson.dumps(doc)


def write_trace(path: Path, events: list[dict], *, compress: bool = False, **top: Any) -> Path:
    data = trace_json(events, **top)
    path.write_bytes(gzip.compress(data) if compress else data)
    return path


def kineto_trace(platform: str = "AMD", steps: int = 3) -> bytes:
    """A small Kineto-shaped trace: deviceProperties, CPU ops, runtime launches and kernels linked by correlation."""
    amd = platform == "AMD"
    gpu = "AMD Instinct MI300X" if amd else "NVIDIA H100 80GB HBM3"
    props = [{"id": 0, "name": gpu, "warpSize": 64 if amd else 32}]
    launch = "hipLaunchKernel" if amd else "cudaLaunchKernel"
    gemm = "Cijk_Alik_Bljk_HHS_BH_MT128x128x32" if amd else "sm90_xmma_gemm_f16f16_f32"
    kernels = [gemm, "void at::native::vectorized_elementwise_kernel<4>", "triton_red_fused_add_0"]
    events: list[dict] = []
    correlation = 0
    for step in range(steps):
        for i, name in enumerate(kernels):
            correlation += 1
            ts = 100.0 * step + 10.0 * i
            cpu_args = {"Input Dims": [[8, 16], [16, 8]], "External id": correlation}
            events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": ts, "dur": 5.0, "args": cpu_args})
            launch_event = {"ph": "X", "cat": "cuda_runtime", "name": launch, "ts": ts + 1, "dur": 2.0}
            events.append({**launch_event, "args": {"correlation": correlation}})
            events.append(kernel_event(name, ts + 3, 4.0 + i, correlation, grid=[1, 2, 1], block=[256, 1, 1]))
    return trace_json(events, deviceProperties=props, traceName="built", displayTimeUnit="ms")


GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
"""Deflate, no name, no mtime, maximum compression, unknown OS."""


def gzip_bomb(path: Path, expanded: int, prefix: bytes = b'{"traceEvents": [', suffix: bytes = b"]}") -> Path:
    """A valid gzip file of `prefix`, about `expanded` blanks, `suffix`: tiny on disk, built in bounded memory.

    A full flush resets deflate's history, so every further block of blanks compresses to the same bytes:
    the block is compressed once and written again, and only the CRC is streamed over the blanks.
    """
    block = b" " * (8 << 20)
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    crc = zlib.crc32(prefix)
    with path.open("wb") as out:
        out.write(GZIP_HEADER + packer.compress(prefix) + packer.flush(zlib.Z_FULL_FLUSH))
        packed = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
        blocks = max(1, expanded // len(block))
        for _ in range(blocks):
            out.write(packed)
            crc = zlib.crc32(block, crc)
        out.write(packer.compress(suffix) + packer.flush())
        size = len(prefix) + blocks * len(block) + len(suffix)
        out.write(struct.pack("<II", zlib.crc32(suffix, crc), size & 0xFFFFFFFF))
    return path
