"""Test helpers: where the real traces live, and small trace-file builders."""

from __future__ import annotations

import csv
import gzip
import io
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

PROJECT = Path(__file__).resolve().parents[1]
SHARED_TRACES = PROJECT.parent / "shared" / "traces"
SHARED_REPRO = PROJECT.parent / "shared" / "repro"
SAMPLES = PROJECT / "sample_traces"
SHARED_ABSENT = "needs ../shared"
"""Every test skipped for want of the shared traces says this; conftest.py counts them at the end of the run."""


def shared_absent(what: Path | str) -> str:
    """The skip reason of a test that needs `what` from ../shared."""
    return f"{SHARED_ABSENT}: {what} is absent"


def shared_trace(name: str) -> Path:
    """The trace file of one shared folder; skips the test when ../shared is absent."""
    folder = SHARED_TRACES / name
    if not folder.is_dir():
        pytest.skip(shared_absent(folder))
    return next(p for p in sorted(folder.iterdir()) if p.name.endswith((".json", ".json.gz")))


def shared_trace_names() -> list[Any]:
    """The shared traces' folder names, or one skipped parameter when ../shared is absent."""
    if not SHARED_TRACES.is_dir():
        return [pytest.param("absent", marks=pytest.mark.skip(reason=shared_absent(SHARED_TRACES)))]
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


@dataclass
class Launch:
    """A runtime launch of one kernel (eager)."""

    kernel: str
    dur: float = 4.0


@dataclass
class Graph:
    """A graph launch: one runtime call, every kernel sharing its correlation id."""

    kernels: list[str]


@dataclass
class Op:
    """A cpu_op range around its body; `args` are its recorded args (Input Dims, Input type, ...)."""

    name: str
    body: list[Item] = field(default_factory=list)
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class Module:
    """An nn.Module frame (python_function `nn.Module: NAME`) around its body."""

    name: str
    body: list[Item] = field(default_factory=list)


@dataclass
class Annotation:
    """A user_annotation range (record_function, ProfilerStep#N) around its body."""

    name: str
    body: list[Item] = field(default_factory=list)


@dataclass
class Captured:
    """A launch made while a graph is captured: the runtime call names its kernel (args.kernel), nothing runs."""

    kernel: str


@dataclass
class Capture:
    """A stream capture: StreamBeginCapture, its body (ops around Captured launches), StreamEndCapture."""

    body: list[Item] = field(default_factory=list)


Item = Launch | Graph | Op | Module | Annotation | Captured | Capture
_RANGE_CATEGORY = {Op: "cpu_op", Module: "python_function", Annotation: "user_annotation"}


class EagerTrace:
    """Builds a Kineto-shaped trace from nested CPU items: ops, module frames, annotations, launches, graphs.

    Items on one thread run back to back from `start`; a range spans its body plus 1 µs on each side, a
    launch's runtime call takes 1 µs. Kernels run on one GPU stream in launch order, each after its launch.
    """

    def __init__(self, platform: str = "NVIDIA", first_correlation: int = 100, gpu: str | None = None) -> None:
        amd = platform == "AMD"
        self.launch_name = "hipLaunchKernel" if amd else "cudaLaunchKernel"
        self.graph_name = "hipGraphLaunch" if amd else "cudaGraphLaunch"
        name = gpu or ("AMD Instinct MI300X" if amd else "NVIDIA H100")
        self.props = [{"id": 0, "name": name, "warpSize": 64 if amd else 32}]
        self.events: list[dict] = []
        self.correlation = first_correlation
        self.gpu_clock = 0.0

    def run(self, *items: Item, tid: int = 1, pid: int = 1, start: float = 0.0) -> float:
        """Lay out `items` on thread (pid, tid) from `start`; returns where they end."""
        now = start
        for item in items:
            now = self._item(item, now, pid, tid)
        return now

    def unlaunched(self, kernel: str, correlation: int, dur: float = 3.0) -> None:
        """A kernel whose launch is not in the trace (launched before the profiled window)."""
        self._kernel(kernel, correlation, self.gpu_clock, dur)

    def data(self) -> bytes:
        return trace_json(self.events, deviceProperties=self.props)

    def _item(self, item: Item, now: float, pid: int, tid: int) -> float:
        if isinstance(item, (Launch, Graph)):
            return self._launch(item, now, pid, tid)
        if isinstance(item, Captured):
            return self._runtime(self.launch_name, now, pid, tid, kernel=item.kernel)
        if isinstance(item, Capture):
            prefix = "hip" if self.launch_name.startswith("hip") else "cuda"
            now = self._runtime(f"{prefix}StreamBeginCapture", now, pid, tid)
            now = self.run(*item.body, tid=tid, pid=pid, start=now)
            return self._runtime(f"{prefix}StreamEndCapture", now, pid, tid)
        end = self.run(*item.body, tid=tid, pid=pid, start=now + 1.0) + 1.0
        name = f"nn.Module: {item.name}" if isinstance(item, Module) else item.name
        self.events.append(
            {
                "ph": "X",
                "cat": _RANGE_CATEGORY[type(item)],
                "name": name,
                "pid": pid,
                "tid": tid,
                "ts": now,
                "dur": end - now,
                "args": dict(item.args) if isinstance(item, Op) else {},
            }
        )
        return end

    def _launch(self, item: Launch | Graph, now: float, pid: int, tid: int) -> float:
        self.correlation += 1
        name = self.launch_name if isinstance(item, Launch) else self.graph_name
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": name,
                "pid": pid,
                "tid": tid,
                "ts": now,
                "dur": 1.0,
                "args": {"correlation": self.correlation},
            }
        )
        kernels = [(item.kernel, item.dur)] if isinstance(item, Launch) else [(k, 2.0) for k in item.kernels]
        for kernel, dur in kernels:
            self._kernel(kernel, self.correlation, max(self.gpu_clock, now + 0.5), dur)
        return now + 1.0

    def _runtime(self, name: str, now: float, pid: int, tid: int, **args: Any) -> float:
        """A runtime call that launches nothing that runs (a capture's calls)."""
        self.correlation += 1
        event = {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": pid, "tid": tid, "ts": now, "dur": 1.0}
        self.events.append({**event, "args": {"correlation": self.correlation, **args}})
        return now + 1.0

    def _kernel(self, name: str, correlation: int, ts: float, dur: float) -> None:
        self.events.append(kernel_event(name, ts, dur, correlation))
        self.gpu_clock = ts + dur + 0.25


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


def write_op_pair(folder: Path, norm_op: str = "aten::layer_norm") -> tuple[Path, Path]:
    """Eager AMD and NVIDIA traces with CPU ops: each of 6 `norm_op` calls launches 2 kernels on the AMD
    trace (layer_norm_stats, layer_norm_fwd) and 1 on the NVIDIA one; aten::mm launches gemm_kernel on both."""
    norm = {
        "AMD": [Launch("layer_norm_stats", 1.0), Launch("layer_norm_fwd", 4.0)],
        "NVIDIA": [Launch("layer_norm_fwd", 3.0)],
    }
    paths = []
    for platform in ("AMD", "NVIDIA"):
        builder = EagerTrace(platform)
        builder.run(
            *[
                call
                for _ in range(6)
                for call in (Op(norm_op, norm[platform]), Op("aten::mm", [Launch("gemm_kernel", 9.0)]))
            ]
        )
        paths.append(folder / f"{platform.lower()}.json")
        paths[-1].write_bytes(builder.data())
    return paths[0], paths[1]


FUSED_SAMPLE = SAMPLES / "vllm_moe_full_graph"
BATCH_RANKS = 4
BATCH_SAME_RANK = 3
"""The rank whose second trace is the first one again: no finding there, so the others' findings hold on some ranks."""


FORMULAS = ('=HYPERLINK("http://evil.example","x")', "+1+1", "-2+3", "@SUM(A1)", "\tcmd", "\rcmd")
"""Cells a spreadsheet would run as formulas (CSV injection), as op and kernel names."""


def write_formula_pair(folder: Path) -> tuple[Path, Path]:
    """Eager AMD and NVIDIA traces whose ops and kernels are named like formulas: each op launches 2 kernels on
    the AMD trace and 1 on the NVIDIA one, so the names reach the ops, mappings and matched-pair tables."""
    paths = []
    for platform in ("AMD", "NVIDIA"):
        builder = EagerTrace(platform)
        calls = []
        for formula in FORMULAS:
            kernels = [Launch(f"{formula}_stats", 1.0), Launch(f"{formula}_fwd", 4.0)]
            calls.append(Op(formula, kernels if platform == "AMD" else kernels[1:]))
        builder.run(*calls * 6)
        paths.append(folder / f"{platform.lower()}.json")
        paths[-1].write_bytes(builder.data())
    return paths[0], paths[1]


def formula_cells(text: str) -> list[str]:
    """Cells of a CSV text that a spreadsheet would evaluate: text starting with = + - @ tab or CR (a number is a
    number)."""
    found = []
    for cell in (cell for row in csv.reader(io.StringIO(text, newline="")) for cell in row):
        try:
            float(cell)
        except ValueError:
            if cell.startswith(("=", "+", "-", "@", "\t", "\r")):
                found.append(cell)
    return found
