"""How cost grows with trace size (issue 34): `python bench/bench.py --scale [--runs 3] [--plot docs/scale.png]`.

Generates (once, into --data-dir) many-kernel pairs (issue 14's spec: graph launches cut into many groups, an
eager prefill, every 8th decode step piecewise) of --scale-sizes MB of plain JSON per trace, and for each pair
runs, in a fresh process, --runs times:
  start-up  imports and the compiled scan and DP loaded (or compiled): a constant of the process, whatever
            it reads; printed apart, not in the figures
  first use a bundled sample pair loaded and compared (rules read, lazy imports): also a constant, apart;
            after it the process is in the state of a server that has analysed a pair before
  load      load_pair as the CLI runs it (threads in this process, no table cache)
  analysis  compare() of the loaded pair (no result cache)
It prints, per size, the medians of load and analysis time, the peak RSS of the process against the larger
file, and the time per million kernels (load + analysis over both sides' kernels, and each part alone). Every
cost a trace brings, fixed or not (opening and hashing a file, threads, the tables of a trace, the analysis
of a pair), is in the figures. Then how much the time per million kernels varies across the sizes (goal
<= 1.5x) and the peak at 1 GB and above (goal <= 0.8x the larger file). With --plot it draws time against size
on log-log axes into a PNG. --keep keeps the generated pairs (several GB); by default each is deleted once
measured.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from bench import MANYKERNEL_SPEC, PROJECT, Run, _generated, measure  # bench/bench.py, beside this file

WARM_UP_PAIR = PROJECT / "sample_traces" / "vllm_moe_piecewise"

PER_MILLION_SPREAD_GOAL = 1.5
PEAK_GOAL = 0.8
PEAK_FROM_MB = 1000
SNIPPET = """
import sys, time
started = time.perf_counter()
from fusion.cache import machine_code
from fusion.cache.loading import load_pair
from fusion.comparison.pair import compare
from fusion.loader import piece_scan
from fusion.match import align
machine_code.fill()
piece_scan.warm()
align.warm()
ready = time.perf_counter()
compare(*load_pair(sys.argv[3], sys.argv[4], isolated=False))  # first-use costs (rules, lazy imports) paid
align.clear_cache()
start = time.perf_counter()
print(f"STARTUP {ready - started:.3f} {start - ready:.3f}")
pair = load_pair(sys.argv[1], sys.argv[2], isolated=False)
loaded = time.perf_counter()
compare(*pair)
done = time.perf_counter()
print(f"ANALYSIS {loaded - start:.3f} {done - loaded:.3f} {len(pair[0].kernels)} {len(pair[1].kernels)}")
"""


@dataclass
class Point:
    size_mb: int
    json_mb: float
    kernels: int
    load_s: float
    analysis_s: float
    rss: int
    startup_s: float
    first_use_s: float

    @property
    def per_million(self) -> float:
        return (self.load_s + self.analysis_s) / self.kernels * 1e6

    @property
    def load_per_million(self) -> float:
        return self.load_s / self.kernels * 1e6

    @property
    def analysis_per_million(self) -> float:
        return self.analysis_s / self.kernels * 1e6


def run(sizes: list[int], runs: int, data_dir: Path, plot: Path | None, keep: bool) -> list[Point]:
    started_load = _load_average()
    print(f"load average at the start {started_load}", flush=True)
    points = []
    header = f"  {'MB/trace':>8}{'kernels':>11}{'load s':>8}{'analysis s':>12}{'s per M kernels':>17}"
    print(f"{header}{'(load':>7}{'analysis)':>11}{'peak MB':>9}{'x larger JSON':>15}{'load average':>17}", flush=True)
    env = {"PATH": "/usr/bin:/bin"}
    if os.environ.get("NUMBA_CACHE_DIR"):
        env["NUMBA_CACHE_DIR"] = os.environ["NUMBA_CACHE_DIR"]
    for size in sizes:
        folder = data_dir / f"manykernel_{size}mb_plain"
        files = _generated(folder, MANYKERNEL_SPEC, False, size)
        point = _point(size, files, runs, env)
        points.append(point)
        print(
            f"  {size:>8}{point.kernels:>11,}{point.load_s:>8.2f}{point.analysis_s:>12.3f}{point.per_million:>17.2f}"
            f"{point.load_per_million:>7.2f}{point.analysis_per_million:>11.2f}"
            f"{point.rss / 1e6:>9.0f}{point.rss / 1e6 / point.json_mb:>15.2f}{_load_average():>17}",
            flush=True,
        )
        if not keep:
            shutil.rmtree(folder)
    _verdict(points)
    loads = f"load average {started_load} at the start, {_load_average()} at the end"
    startup = sorted(p.startup_s for p in points)[len(points) // 2]
    first_use = sorted(p.first_use_s for p in points)[len(points) // 2]
    print(
        f"  not in the figures: each process's start-up (imports, compiled code loaded) {startup:.2f} s and first "
        f"use (a sample pair) {first_use:.2f} s, the same whatever the size (medians over the sizes)"
    )
    print(f"  load average at the end {_load_average()}")
    if plot is not None:
        draw(points, plot, loads)
        print(f"  plot written to {plot}")
    return points


def _point(size: int, files: tuple[Path, Path], runs: int, env: dict[str, str]) -> Point:
    args = [str(files[0]), str(files[1]), str(WARM_UP_PAIR / "amd.json.gz"), str(WARM_UP_PAIR / "nvidia.json.gz")]
    results: list[Run] = [measure(SNIPPET, args, env) for _ in range(runs)]
    ordered = sorted(results, key=lambda r: r.load_s + r.analysis_s)
    middle = ordered[len(ordered) // 2]
    first, second = (int(k) for k in middle.kernels.split("+"))
    json_mb = max(f.stat().st_size for f in files) / 1e6
    return Point(
        size,
        json_mb,
        first + second,
        middle.load_s,
        middle.analysis_s,
        max(r.rss for r in results),
        middle.startup_s,
        middle.first_use_s,
    )


def _verdict(points: list[Point]) -> None:
    for what, rates in (
        ("time per million kernels", [p.per_million for p in points]),
        ("  load alone", [p.load_per_million for p in points]),
        ("  analysis alone", [p.analysis_per_million for p in points]),
    ):
        spread = max(rates) / min(rates)
        mark = "ok" if spread <= PER_MILLION_SPREAD_GOAL else "!!"
        print(f"  {what}: {min(rates):.2f}-{max(rates):.2f} s, {spread:.2f}x (goal <= 1.5x) {mark}")
    large = [p for p in points if p.size_mb >= PEAK_FROM_MB]
    if large:
        worst = max(p.rss / 1e6 / p.json_mb for p in large)
        mark = "ok" if worst <= PEAK_GOAL else "!!"
        print(f"  peak RSS at >= 1 GB: at most {worst:.2f}x the larger JSON (goal <= {PEAK_GOAL}x) {mark}")


def draw(points: list[Point], path: Path, loads: str) -> None:
    """Load, analysis and their sum against JSON size per trace, log-log, with a line of slope 1 for scale;
    `loads` (the machine's load average) under the title."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [p.json_mb for p in points]
    figure, axes = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    axes.loglog(sizes, [p.load_s for p in points], "o-", label="load (both traces)")
    axes.loglog(sizes, [p.analysis_s for p in points], "s-", label="analysis (compare)")
    total = [p.load_s + p.analysis_s for p in points]
    axes.loglog(sizes, total, "^-", label="load + analysis")
    axes.loglog(sizes, [total[-1] * s / sizes[-1] for s in sizes], ":", color="grey", label="linear (slope 1)")
    axes.set_xlabel("JSON per trace (MB)")
    axes.set_ylabel("seconds")
    axes.set_title(f"Many-kernel pairs: time against size\n{loads}", fontsize=10)
    axes.grid(True, which="both", alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def _load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
