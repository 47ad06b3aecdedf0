"""Generated traces with known phases and steps: a serving pair and a training trace.

Serving: each trace runs a schedule of steps ('P' prefill, 'D' decode, 'M' mixed), each inside a vLLM
step annotation. Prefill and mixed steps launch every kernel eagerly; a decode step replays one graph.
The kernels are synthetic.forward_slots' decoder layers, with one fusion difference per phase: only in
decode (`decode_fusion`) and only in prefill (`prefill_fusion`); mixed steps have none. Trace 1 writes
the current vLLM annotation (`execute_T_context_N(sq..)_generation_M(sq..)`), trace 2 the older
`execute_context_N(K)_generation_M(L)`. With `engine_ranges` the steps carry vLLM V1's ranges instead
(`gpu_model_runner: preprocess`, `forward`, `sample`, no execute annotation): each step prepares its inputs
eagerly, runs its forward (eager in prefill, a graph replay in decode) and an eager sampler, whose own fusion
difference (`sampler_fusion`) shows in every step; only the step decides the phase of its preparation and
sampler kernels.

Training: ProfilerStep#N ranges; forward ops launch on the main thread, backward kernels under
`autograd::engine::evaluate_function: ...` frames on the autograd thread, then `Optimizer.step#...`.
"""

from __future__ import annotations

import gzip
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from fusion.synthetic.pairs import AMD, NVIDIA, PLATFORMS, SITES, Kernel, PairSpec, forward_slots

MAIN_TID, AUTOGRAD_TID, GPU_PID, STREAM = 101, 102, 0, 7
CPU_PID = 100
LAUNCH_US, GAP_US, QUEUE_US = 4.0, 2.0, 5.0
PREFILL_TOKENS, DECODE_REQUESTS = 2048, 32
_RUNTIME = {AMD: ("hipLaunchKernel", "hipGraphLaunch"), NVIDIA: ("cudaLaunchKernel", "cudaGraphLaunch")}
_HEADER = {
    AMD: {"roctracer_version": 4.1, "deviceProperties": [{"id": 0, "name": "AMD Instinct MI300X", "warpSize": 64}]},
    NVIDIA: {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "warpSize": 32}]},
}
STEP_PHASES = {"P": "prefill", "D": "decode", "M": "mixed"}
_PREP_COPY = Kernel(
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
    "{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(long)#1}, std::array<char*, 2ul>, 4,"
    " TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>,"
    " at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, at::native::"
    "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()()"
    " const::{lambda(long)#1}, std::array<char*, 2ul>, TrivialOffsetCalculator<1, unsigned int>,"
    " TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>,"
    " at::native::memory::StoreWithCast<1>)",
    "MemCopy",
    2.0,
    "aten::copy_",
)
_PREP_INDEX = Kernel(
    "void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::index_kernel_impl"
    "<at::native::OpaqueType<8> >(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>)::"
    "{lambda(char*, char const*, long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>,"
    " at::native::index_kernel_impl<at::native::OpaqueType<8> >(at::TensorIteratorBase&, c10::ArrayRef<long>,"
    " c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1} const&)::{lambda(int)#1}>(long,"
    " at::native::gpu_index_kernel<at::native::index_kernel_impl<at::native::OpaqueType<8> >(at::TensorIteratorBase&,"
    " c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1}>(at::TensorIteratorBase&,"
    " c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::index_kernel_impl<at::native::OpaqueType<8> >"
    "(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1}"
    " const&)::{lambda(int)#1})",
    "Elementwise",
    3.0,
    "aten::index",
)
"""The eager input preparation of a vLLM V1 step: the token ids copied to the device and gathered by position."""


@dataclass(frozen=True)
class ServingSpec:
    """A serving pair: per-trace step schedules and the fusion that differs in each phase."""

    schedule1: str = "PDDDPDDD"
    schedule2: str = "PDD"
    layers: int = 6
    """Each step shows its phase's fusion once per layer: enough occurrences for detect.min_pattern_count."""
    decode_fusion: str = "add_rmsnorm"
    prefill_fusion: str = "moe_swiglu"
    engine_ranges: bool = False
    """vLLM V1 steps: gpu_model_runner ranges around eager preparation, the forward and an eager sampler."""
    sampler_fusion: str = "sort_chain"
    """The sampler's fusion difference (engine_ranges only): in every step, so in both phases."""

    def __post_init__(self) -> None:
        if set(self.schedule1 + self.schedule2) - set(STEP_PHASES):
            raise ValueError(f"schedules are strings of {''.join(STEP_PHASES)}")
        if {self.decode_fusion, self.prefill_fusion, self.sampler_fusion} - set(SITES):
            raise ValueError(f"fusions are among {sorted(SITES)}")
        if self.engine_ranges and "M" in self.schedule1 + self.schedule2:
            raise ValueError("engine_ranges steps are 'P' or 'D': their ranges do not tell a mixed batch")

    def schedule(self, trace: int) -> str:
        return self.schedule1 if trace == 1 else self.schedule2

    def step_slots(self, platform: str, step: str) -> list[tuple[str, Kernel]]:
        """The kernels of one step, with its phase's fusion difference."""
        fusions = {"D": (self.decode_fusion,), "P": (self.prefill_fusion,), "M": ()}[step]
        spec = PairSpec(layers=self.layers, fusions=fusions, non_fusion=False)
        return forward_slots(platform, spec, prefill=step != "D")

    def prep_kernels(self) -> list[Kernel]:
        """The eager input preparation of an engine step (the same on both platforms)."""
        return [_PREP_COPY, _PREP_INDEX] if self.engine_ranges else []

    def sampler_kernels(self, platform: str) -> list[Kernel]:
        """The eager sampler of an engine step, with the sampler fusion difference."""
        return list(SITES[self.sampler_fusion].kernels(platform, True)) if self.engine_ranges else []


@dataclass
class _Writer:
    """Events of one trace; CPU time runs ahead, each kernel starts after its launch and the previous kernel."""

    platform: str
    events: list[dict[str, Any]] = field(default_factory=list)
    cpu: float = 1000.0
    gpu: float = 0.0
    correlation: int = 0

    def cpu_range(self, cat: str, name: str, ts: float, dur: float, tid: int = MAIN_TID) -> None:
        self.events.append(
            {"ph": "X", "cat": cat, "name": name, "pid": CPU_PID, "tid": tid, "ts": ts, "dur": dur, "args": {}}
        )

    def launch(self, kernels: list[Kernel], graph: bool, tid: int = MAIN_TID, op: str | None = None) -> None:
        """One runtime call (a graph launch for several kernels) and its kernels, under a cpu_op when given."""
        self.correlation += 1
        eager, graph_launch = _RUNTIME[self.platform]
        start = self.cpu
        if op:
            self.cpu_range("cpu_op", op, start, LAUNCH_US + 2, tid)
        runtime = {"correlation": self.correlation}
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": graph_launch if graph else eager,
                "pid": CPU_PID,
                "tid": tid,
                "ts": start + 1,
                "dur": LAUNCH_US,
                "args": runtime,
            }
        )
        for kernel in kernels:
            self.gpu = max(self.gpu, start + QUEUE_US) + 1.0
            self.events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": kernel.name,
                    "pid": GPU_PID,
                    "tid": STREAM,
                    "ts": self.gpu,
                    "dur": kernel.dur,
                    "args": {"device": 0, "stream": STREAM, "correlation": self.correlation},
                }
            )
            self.gpu += kernel.dur
        self.cpu = start + LAUNCH_US + GAP_US

    def document(self) -> dict[str, Any]:
        return {"schemaVersion": 1, **_HEADER[self.platform], "traceEvents": self.events}


def _annotation(step: str, trace: int) -> str:
    """The vLLM step annotation: current format on trace 1, the older one on trace 2."""
    context = 1 if step in "PM" else 0
    generation = DECODE_REQUESTS if step in "DM" else 0
    tokens = PREFILL_TOKENS * context + generation
    if trace == 1:
        return (
            f"execute_{tokens}_context_{context}(sq{PREFILL_TOKENS * context}sk0sqsq0sqsk0)"
            f"_generation_{generation}(sq{generation}sk0sqsq0sqsk0)"
        )
    return f"execute_context_{context}({PREFILL_TOKENS * context})_generation_{generation}({generation})"


def serving_trace(spec: ServingSpec, trace: int) -> dict[str, Any]:
    """Trace 1 (AMD) or 2 (NVIDIA) of the pair as a Chrome-trace document."""
    platform = PLATFORMS[trace - 1]
    writer = _Writer(platform)
    for step in spec.schedule(trace):
        begin = writer.cpu
        _engine_range(writer, spec, "preprocess", lambda: _eager(writer, spec.prep_kernels()))
        slots = spec.step_slots(platform, step)
        if step == "D":
            _engine_range(writer, spec, "forward", lambda: writer.launch([k for _, k in slots], graph=True))  # noqa: B023
        else:
            _engine_range(writer, spec, "forward", lambda: _eager(writer, [k for _, k in slots]))  # noqa: B023
        _engine_range(writer, spec, "sample", lambda: _eager(writer, spec.sampler_kernels(platform)))
        writer.cpu += GAP_US
        if not spec.engine_ranges:
            writer.cpu_range("user_annotation", _annotation(step, trace), begin, writer.cpu - begin)
        writer.cpu = max(writer.cpu, writer.gpu) + 50.0
    return writer.document()


def _eager(writer: _Writer, kernels: list[Kernel]) -> None:
    for kernel in kernels:
        writer.launch([kernel], graph=False, op=kernel.op)


def _engine_range(writer: _Writer, spec: ServingSpec, part: str, run: Callable[[], None]) -> None:
    """Run one part of a step, inside its `gpu_model_runner: part` range when the spec writes engine ranges."""
    start = writer.cpu
    run()
    if spec.engine_ranges:
        writer.cpu += 1.0
        writer.cpu_range("user_annotation", f"gpu_model_runner: {part}", start, writer.cpu - start)


def serving_truth(spec: ServingSpec) -> dict[str, Any]:
    """Per trace and phase: steps and kernels; per phase the one fusion (as synthetic's ground truth names it)."""
    traces = {}
    for trace in (1, 2):
        platform = PLATFORMS[trace - 1]
        steps = Counter(STEP_PHASES[s] for s in spec.schedule(trace))
        kernels = Counter()
        for step in spec.schedule(trace):
            extra = len(spec.prep_kernels()) + len(spec.sampler_kernels(platform))
            kernels[STEP_PHASES[step]] += len(spec.step_slots(platform, step)) + extra
        traces[f"trace{trace}"] = {p: {"steps": steps[p], "kernels": kernels[p]} for p in steps}
    fusions = {"decode": [_site_truth(spec.decode_fusion)], "prefill": [_site_truth(spec.prefill_fusion)]}
    if spec.engine_ranges:
        for phase in fusions.values():
            phase.append(_site_truth(spec.sampler_fusion))
    return {"traces": traces, "fusions": fusions}


def _site_truth(site_id: str) -> dict[str, Any]:
    site = SITES[site_id]
    return {
        "id": site.id,
        "fused_trace": PLATFORMS.index(site.fused_platform) + 1,
        "fused_kernel_type": site.fused_type,
        "unfused_sequence": [k.ktype for k in site.unfused],
    }


_TRAINING_KERNELS = {
    "gemm": Kernel("Cijk_Alik_Bljk_SB_MT64x16x32_MI16x16x1_SN", "GEMM", 20.0, "aten::addmm"),
    "relu": Kernel(
        "void at::native::vectorized_elementwise_kernel<4, at::native::clamp_scalar_kernel>", "ReLU", 3.0, "aten::relu"
    ),
    "relu_backward": Kernel(
        "void at::native::vectorized_elementwise_kernel<4, at::native::threshold_kernel_impl>",
        "ReLU",
        3.0,
        "aten::threshold_backward",
    ),
    "sum": Kernel(
        "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, sum_functor> >", "Reduce", 4.0, "aten::sum"
    ),
    "adam": Kernel(
        "void at::native::multi_tensor_apply_kernel<TensorListMetadata<4>, FusedAdamMathFunctor>",
        "Elementwise",
        6.0,
        "aten::_fused_adam_",
    ),
}
TRAINING_LAYERS = 3
BACKWARD_FRAMES = (("AddmmBackward0", ("gemm", "gemm", "sum")), ("ReluBackward0", ("relu_backward",)))


def training_trace(steps: int = 2, first_step: int = 5, platform: str = AMD) -> dict[str, Any]:
    """`steps` ProfilerSteps of forward (gemm, relu per layer), backward (frames on the autograd thread), optimizer."""
    writer = _Writer(platform)
    k = _TRAINING_KERNELS
    for n in range(first_step, first_step + steps):
        begin = writer.cpu
        for _ in range(TRAINING_LAYERS):
            for kernel in (k["gemm"], k["relu"]):
                writer.launch([kernel], graph=False, op=kernel.op)
        for _ in range(TRAINING_LAYERS):
            for frame, names in BACKWARD_FRAMES:
                start = writer.cpu
                for name in names:
                    writer.launch([k[name]], graph=False, tid=AUTOGRAD_TID, op=k[name].op)
                writer.cpu_range(
                    "cpu_op", f"autograd::engine::evaluate_function: {frame}", start, writer.cpu - start, AUTOGRAD_TID
                )
        start = writer.cpu
        writer.launch([k["adam"]], graph=False, op=k["adam"].op)
        writer.cpu_range("user_annotation", "Optimizer.step#AdamW.step", start, writer.cpu - start)
        writer.cpu = max(writer.cpu, writer.gpu) + 20.0
        writer.cpu_range("user_annotation", f"ProfilerStep#{n}", begin, writer.cpu - begin)
    return writer.document()


def training_truth(steps: int = 2) -> dict[str, dict[str, int]]:
    backward = sum(len(names) for _, names in BACKWARD_FRAMES) * TRAINING_LAYERS
    return {
        "forward": {"steps": steps, "kernels": 2 * TRAINING_LAYERS * steps},
        "backward": {"steps": steps, "kernels": backward * steps},
        "optimizer": {"steps": steps, "kernels": steps},
    }


def write(path: Path, document: dict[str, Any]) -> Path:
    """Write a document as .json or (by suffix) .json.gz."""
    data = orjson.dumps(document)
    path.write_bytes(gzip.compress(data, mtime=0) if path.name.endswith(".gz") else data)
    return path


def write_serving_pair(out_dir: Path, spec: ServingSpec = ServingSpec()) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    return tuple(write(out_dir / f"serving{t}.json.gz", serving_trace(spec, t)) for t in (1, 2))  # type: ignore[return-value]
