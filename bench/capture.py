"""Benchmark: tying graph replays to their capture (fusion.model.capture), on the shared vLLM pairs and on a
generated 1 GB execution trace with a capture.

    python bench/capture.py [--runs 3] [--traces ../shared/traces] [--data-dir bench/out]

Shared pairs: every folder of --traces with a capture/ beside its trace. Generated: the AMD side of bench.py's
many-kernel pair (1 GB of JSON, about 1.1 M kernels in 22 k graph replays; generated into --data-dir if absent)
and a capture trace written from it once: one capture window per distinct replay, each kernel launched inside
an op with Input Dims. Per input, in one process, side by side: loading the execution trace (the reference),
reading the capture trace(s), and the merge (matching and carrying the columns over); medians of --runs. The
merge is what a capture adds to a load; reading the capture is a load of a small trace.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))
sys.path.insert(0, str(PROJECT / "bench"))

from fusion import load  # noqa: E402
from fusion.model.capture import read_captures, tie_captures  # noqa: E402
from fusion.model.capture_files import resolve_input  # noqa: E402

CAPTURED_OP = "aten::mm"
CAPTURED_DIMS = [[2048, 4096], [4096, 4096]]


def timed(step: Callable[[], Any], runs: int) -> tuple[float, Any]:
    """The median wall time of `runs` calls of `step`, and its last result."""
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = step()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def bench_one(name: str, trace_path: str, captures: list[str], runs: int) -> None:
    load_s, trace = timed(lambda: load(trace_path), runs)
    read_s, graphs = timed(lambda: read_captures(captures), runs)
    tie_s, tied = timed(lambda: tie_captures(trace, graphs), runs)
    report = tied.capture
    print(
        f"{name}: {trace.kernel_count:,} kernels, {report['replays']:,} replays of {report['captured_graphs']:,}"
        f" captured graphs; tied {report['tied']:,} of {report['replayed_kernels']:,}"
        f" ({report['tied_with_input_dims']:,} with Input Dims)"
    )
    print(
        f"  load the execution trace {load_s:8.3f} s   read the capture {read_s:7.3f} s   merge {tie_s:7.3f} s"
        f" = {100 * tie_s / load_s:.1f}% of the load"
    )


def write_capture(trace_path: Path, out: Path) -> None:
    """A capture trace for the execution trace's replays: one window per distinct kernel-name sequence, each
    kernel launched inside a CAPTURED_OP with Input Dims (the names come from the loaded trace)."""
    kernels = load(trace_path).kernels
    graph = np.flatnonzero((kernels["launch"] == "graph").to_numpy())
    correlation = kernels["correlation"].to_numpy()[graph]
    names = kernels["name"].astype(str).to_numpy()[graph]
    sequences: dict[tuple[str, ...], None] = {}
    order = np.argsort(correlation, kind="stable")
    starts = np.unique(correlation[order], return_index=True)[1]
    for rows in np.split(order, starts[1:]):
        sequences.setdefault(tuple(names[rows]), None)
    events, ts, correlation_id = [], 0.0, 1
    args = {"Input Dims": CAPTURED_DIMS, "Input type": ["c10::BFloat16"] * 2, "Concrete Inputs": ["", ""]}

    def runtime(name: str, **extra: Any) -> None:
        nonlocal ts, correlation_id
        events.append(
            {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 1.0}
            | {"args": {"correlation": correlation_id, **extra}}
        )
        ts += 2.0
        correlation_id += 1

    for sequence in sequences:
        runtime("hipStreamBeginCapture")
        for kernel in sequence:
            events.append(
                {"ph": "X", "cat": "cpu_op", "name": CAPTURED_OP, "pid": 1, "tid": 1, "ts": ts, "dur": 4.0}
                | {"args": args}
            )
            ts += 1.0
            runtime("hipLaunchKernel", kernel=kernel)
            ts += 1.0
        runtime("hipStreamEndCapture")
    props = [{"id": 0, "name": "AMD Instinct MI300X", "warpSize": 64}]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(gzip.compress(orjson.dumps({"deviceProperties": props, "traceEvents": events})))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--traces", type=Path, default=PROJECT.parent / "shared" / "traces")
    parser.add_argument("--data-dir", type=Path, default=PROJECT / "bench" / "out")
    args = parser.parse_args()
    if args.traces.is_dir():
        for folder in sorted(p for p in args.traces.iterdir() if (p / "capture").is_dir()):
            trace, captures, _ = resolve_input(str(folder))
            bench_one(folder.name, trace, captures, args.runs)
    from bench import generate_manykernel

    execution = generate_manykernel(args.data_dir)["manykernel_1000mb_plain"][0]
    capture = args.data_dir / "manykernel_capture" / "capture" / "graph_capture.json.gz"
    if not capture.exists():
        write_capture(execution, capture)
    size = execution.stat().st_size / 1e6
    bench_one(f"generated {execution.name} ({size:,.0f} MB)", str(execution), [str(capture)], args.runs)


if __name__ == "__main__":
    main()
