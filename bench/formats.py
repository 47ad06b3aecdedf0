"""Benchmark: reading a rocprofv3 JSON trace against a Kineto trace of the same size and kernels.

    python bench/formats.py --scale 1 --scale 20 --runs 3

From the shared rocprofv3 trace (../shared/traces/tl_rocprofv3_mi3xx_train, or --trace), for each --scale N
it writes into --data-dir:
  rocprofv3  the trace with its kernel dispatches repeated N times (shifted in time; plain JSON)
  kineto     a Kineto trace of the same kernels (kernel events, a runtime launch each) padded with
             python_function events the loader drops, to the same JSON size
and measures, each in a fresh process, side by side in one run: the floor (reading the bytes), orjson.loads
of the file (the baseline), and our load() of it. Wall time and peak RSS (sampled every 20 ms) are printed,
with each load's ratios to orjson and to the Kineto trace of its size. Figures are medians over --runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from bench import PROJECT, Run, median_run

SHARED = PROJECT.parent / "shared" / "traces" / "tl_rocprofv3_mi3xx_train" / "908_results.json.gz"
_MB = 1_000_000
SNIPPETS = {
    "read": "import sys\nwith open(sys.argv[1], 'rb') as f:\n    while f.read(8 << 20):\n        pass\n",
    "orjson": "import sys, orjson\norjson.loads(open(sys.argv[1], 'rb').read())\n",
    "load": "import sys\nfrom fusion.classify.trace import load\nload(sys.argv[1])\n",
}
_PAD = {"ph": "X", "cat": "python_function", "name": "train.py(12): step", "pid": 1, "tid": 1, "ts": 1.0, "dur": 1.0}


def write_files(trace: Path, scale: int, folder: Path) -> tuple[Path, Path]:
    """The scaled rocprofv3 file and the Kineto file of its size and kernels (written once, then reused)."""
    rocprof_path, kineto_path = folder / f"rocprofv3_x{scale}.json", folder / f"kineto_x{scale}.json"
    if rocprof_path.exists() and kineto_path.exists():
        return rocprof_path, kineto_path
    sys.path.insert(0, str(PROJECT))
    from fusion.loader.reader import open_input

    doc = orjson.loads(b"".join(open_input(trace).chunks))
    tool = doc["rocprofiler-sdk-tool"][0]
    dispatches = tool["buffer_records"]["kernel_dispatch"]
    span = max(d["end_timestamp"] for d in dispatches) - min(d["start_timestamp"] for d in dispatches) + 1
    scaled = []
    for copy in range(scale):
        for d in dispatches:
            shift = copy * span
            scaled.append(
                {**d, "start_timestamp": d["start_timestamp"] + shift, "end_timestamp": d["end_timestamp"] + shift}
            )
    tool["buffer_records"]["kernel_dispatch"] = scaled
    rocprof_data = orjson.dumps(doc)
    rocprof_path.write_bytes(rocprof_data)
    names = {s["kernel_id"]: s["kernel_name"] for s in tool["kernel_symbols"]}
    events = []
    for i, d in enumerate(scaled):
        ts = d["start_timestamp"] / 1000
        args = {"correlation": i, "stream": d["stream_id"]["handle"], "device": 0}
        name = names[d["dispatch_info"]["kernel_id"]]
        events.append(
            {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": 1.0, "args": args}
        )
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "hipLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": ts - 5,
                "dur": 2.0,
                "args": {"correlation": i},
            }
        )
    size = len(orjson.dumps({"traceEvents": events}))
    events += [_PAD] * max(0, (len(rocprof_data) - size) // (len(orjson.dumps(_PAD)) + 1))
    kineto_path.write_bytes(orjson.dumps({"traceEvents": events}))
    return rocprof_path, kineto_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=SHARED)
    parser.add_argument("--scale", type=int, action="append", help="dispatch repeats (default 1 and 20)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=PROJECT / "bench" / "out" / "formats")
    args = parser.parse_args()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "FUSION_CACHE_DIR": str(args.data_dir / "cache")}
    for scale in args.scale or [1, 20]:
        files = write_files(args.trace, scale, args.data_dir)
        runs: dict[tuple[str, str], Run] = {}
        for step, snippet in SNIPPETS.items():
            for kind, path in zip(("rocprofv3", "kineto"), files):
                runs[kind, step] = median_run(snippet, [str(path)], env, args.runs)
        size = files[0].stat().st_size / _MB
        print(f"scale {scale}: {size:,.0f} MB of JSON each ({files[1].stat().st_size / _MB:,.0f} MB Kineto)")
        print(f"  {'file':<10}{'step':<8}{'wall s':>9}{'peak RSS MB':>13}{'x orjson':>10}{'x Kineto load':>15}")
        for (kind, step), run in runs.items():
            base, kineto = runs[kind, "orjson"], runs["kineto", step]
            print(
                f"  {kind:<10}{step:<8}{run.wall:>9.2f}{run.rss / _MB:>13.0f}{run.wall / base.wall:>10.3f}"
                f"{run.rss / kineto.rss:>9.2f} RSS"
            )


if __name__ == "__main__":
    main()
