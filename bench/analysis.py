"""Benchmark the analysis alone: `compare()` of two loaded traces, in process, against a 0.4 s target.

    python bench/analysis.py --data /tmp/fusion-bench-analysis --target-mb 800

The first run generates a full-graph pair with the project's generator (about --target-mb MB of JSON per
trace), loads it and keeps the two Traces as a pickle in --data; later runs start from the pickle, so the
loader is never what is measured. Two pairs are compared:
  full_graph   the generated pair as loaded: a few large graph launches per decode step
  many_groups  the same kernels repeated --copies times, each graph launch cut into pieces of 50 to 149
               kernels (the cut pattern differs per launch and per side): many distinct groups per trace
With --traces A B, the pair of those trace files is compared too (loaded once; later runs read the table
cache), such as bench.py's many-kernel pair. For each, the median of --runs compares and the time between the
stages compare() reports are printed. With --shared, every pairing of the shared real traces (one Kineto
trace per folder of ../shared/traces, as tests.golden.pairs takes them) is compared too, each trace loaded
once: the median and the slowest of those compares against SHARED_TARGET_S, and how many exceed it.
"""

from __future__ import annotations

import argparse
import itertools
import pickle
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from fusion import Trace, compare, load  # noqa: E402
from fusion.cache.loading import load_pair  # noqa: E402
from fusion.cache.tables import TableCache  # noqa: E402
from fusion.efficiency.rates import counted_work  # noqa: E402
from fusion.loader.columns import MISSING_ID  # noqa: E402
from fusion.match.align import clear_cache  # noqa: E402
from fusion.synthetic.pairs import PairSpec, write_pair  # noqa: E402
from tests.golden.pairs import shared_traces  # noqa: E402

TARGET_S = 0.4
"""Issue 14: compare() of a loaded 2.4 M-kernel pair."""
SHARED_TARGET_S = 0.1
"""Issue 34: compare() of any loaded pair of the shared traces."""
PIECE_SIZES = (50, 150)
"""Kernels per piece when graph launches are cut into many groups: [low, high)."""
CUT_PATTERNS = 4
"""Distinct cut patterns per side (launch i uses pattern i mod this)."""


def loaded_pair(data: Path, target_mb: float) -> tuple[Trace, Trace]:
    """The generated pair's Traces, from the pickle in `data` or generated, loaded and pickled there."""
    cached = data / f"full_graph_{target_mb:g}mb.pkl"
    if cached.exists():
        with cached.open("rb") as f:
            return pickle.load(f)
    files = write_pair(
        data / f"full_graph_{target_mb:g}mb", PairSpec(scenario="full_graph"), target_bytes=int(target_mb * 1_000_000)
    )
    pair = (load(files.trace1), load(files.trace2))
    with cached.open("wb") as f:
        pickle.dump(pair, f, protocol=pickle.HIGHEST_PROTOCOL)
    return pair


def many_groups(trace: Trace, copies: int, seed: int) -> Trace:
    """`trace` repeated `copies` times with every graph launch cut into pieces of PIECE_SIZES kernels."""
    kernels = trace.kernels
    span = float((kernels["ts"] + kernels["dur"]).max() - kernels["ts"].min()) + 1.0
    corr = kernels["correlation"].to_numpy()
    shift = int(corr.max()) + 1
    parts = []
    for copy in range(copies):
        part = kernels.assign(
            ts=kernels["ts"] + copy * span, correlation=np.where(corr == MISSING_ID, MISSING_ID, corr + copy * shift)
        )
        parts.append(part)
    tiled = pd.concat(parts, ignore_index=True)
    tiled["correlation"] = _cut_launches(tiled["correlation"].to_numpy(), np.random.default_rng(seed))
    return Trace(
        trace.label,
        trace.source,
        trace.platform,
        trace.platform_evidence,
        trace.gpu,
        trace.gpu_recorded,
        trace.device_properties,
        tiled,
        trace.names,
        trace.digest + f"-many{copies}-{seed}",
        list(trace.warnings),
    )


def _cut_launches(corr: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """New correlation ids: kernel k of a launch goes to piece k // size, size from the launch's pattern."""
    patterns = rng.integers(*PIECE_SIZES, size=CUT_PATTERNS)
    valid = corr != MISSING_ID
    ids, inverse = np.unique(corr[valid], return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    starts = np.searchsorted(inverse[order], np.arange(len(ids)))
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    piece = position // patterns[inverse % CUT_PATTERNS]
    out = corr.copy()
    out[valid] = inverse * (int(piece.max()) + 1 if len(piece) else 1) + piece
    return out


def timed_compare(pair: tuple[Trace, Trace], runs: int) -> tuple[float, float, dict[str, float]]:
    """Median wall time of compare(), its median CPU time (of all its threads: the phases' section runs beside
    the whole comparison) and the median wall time of each stage (from one stage report to the next); every run
    starts without cached alignments or work counts, as a fresh process would."""
    totals, cpu, stages = [], [], defaultdict(list)
    for _ in range(runs):
        clear_cache()
        counted_work.cache_clear()
        marks: list[tuple[str, float]] = []
        start, start_cpu = time.perf_counter(), time.process_time()
        compare(*pair, progress=lambda stage, _fraction: marks.append((stage, time.perf_counter())))  # noqa: B023
        end = time.perf_counter()
        cpu.append(time.process_time() - start_cpu)
        totals.append(end - start)
        bounds = [("setup", start)] + marks + [("end", end)]
        spent: dict[str, float] = defaultdict(float)
        for (stage, t0), (_, t1) in zip(bounds[:-1], bounds[1:]):
            spent[stage] += t1 - t0
        for stage, seconds in spent.items():
            stages[stage].append(seconds)
    return statistics.median(totals), statistics.median(cpu), {s: statistics.median(v) for s, v in stages.items()}


def shared_pairs(runs: int) -> None:
    """Every pairing of the shared traces: the median of `runs` compares of each, summarised over the pairs."""
    traces = {path.parent.name: load(path) for path in shared_traces()}
    if not traces:
        print("shared: no ../shared/traces here")
        return
    times = {}
    for (a, first), (b, second) in itertools.combinations(traces.items(), 2):
        times[f"{a} ~ {b}"] = timed_compare((first, second), runs)[0]
    slowest = max(times, key=times.__getitem__)
    over = sum(t > SHARED_TARGET_S for t in times.values())
    print(
        f"shared: {len(times)} pairs of {len(traces)} traces, compare median {statistics.median(times.values()):.3f} s"
    )
    print(f"  slowest {times[slowest]:.3f} s ({slowest}); {over} over the target of {SHARED_TARGET_S} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "fusion-bench-analysis")
    parser.add_argument("--target-mb", type=float, default=800)
    parser.add_argument("--copies", type=int, default=2, help="repeats of the pair in the many_groups pair")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--shared", action="store_true", help="also compare every pairing of ../shared/traces")
    parser.add_argument(
        "--traces",
        nargs=2,
        type=Path,
        metavar=("TRACE1", "TRACE2"),
        help="also compare this pair of trace files (through the table cache)",
    )
    args = parser.parse_args()
    args.data.mkdir(parents=True, exist_ok=True)
    base = loaded_pair(args.data, args.target_mb)
    pairs = {
        "full_graph": base,
        "many_groups": tuple(many_groups(t, args.copies, seed) for seed, t in enumerate(base, start=1)),
    }
    if args.traces:
        pairs[args.traces[0].parent.name or "files"] = load_pair(*args.traces, cache=TableCache())
    for name, pair in pairs.items():
        total, cpu, stages = timed_compare(pair, args.runs)
        groups = [int(pair[i].kernels["correlation"].nunique()) for i in (0, 1)]
        print(
            f"{name}: {len(pair[0].kernels):,} + {len(pair[1].kernels):,} kernels, "
            f"{groups[0]:,} + {groups[1]:,} correlation ids"
        )
        print(
            f"  compare {total:.3f} s (median of {args.runs}), target {TARGET_S} s: {total / TARGET_S:.2f}x;"
            f" CPU {cpu:.3f} s"
        )
        print("  " + ", ".join(f"{stage} {seconds:.3f} s" for stage, seconds in stages.items()))
    if args.shared:
        shared_pairs(args.runs)


if __name__ == "__main__":
    main()
