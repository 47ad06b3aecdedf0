"""Benchmark: load and compare generated trace pairs against `orjson.loads` of the same files.

    python bench/bench.py --sizes 100 1000 --runs 1

For each size (MB of JSON per trace) it generates a pair with the project's generator, plain and
gzipped, and measures in fresh subprocesses, side by side in one run:
  read       reading the bytes of both files (gzip: decompress them), the floor
  orjson     orjson.loads of both files (gzip: decompress, then loads), the baseline
  load       our load of each trace, one after the other
  compare    our full compare: both traces loaded in parallel processes, then the analysis
  reopen     the same compare again, the traces coming from the on-disk table cache
Wall time and peak RSS (summed over the process and its children, sampled every 20 ms) are
printed with the ratios to orjson and to the floor. Figures are medians over --runs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from fusion.synthetic import PairSpec, write_pair  # noqa: E402

_MB = 1_000_000

SNIPPETS = {
    "read": """
import gzip, sys
for path in sys.argv[1:3]:
    data = open(path, "rb").read()
    if data[:2] == b"\\x1f\\x8b":
        data = gzip.decompress(data)
    del data
""",
    "orjson": """
import gzip, sys, orjson
for path in sys.argv[1:3]:
    data = open(path, "rb").read()
    if data[:2] == b"\\x1f\\x8b":
        data = gzip.decompress(data)
    orjson.loads(data)
    del data
""",
    "load": """
import sys
from fusion.trace import load
for path in sys.argv[1:3]:
    load(path)
""",
    "compare": """
import sys, time
from fusion.compare import compare
from fusion.parallel import load_pair
from fusion.tablecache import TableCache
start = time.perf_counter()
pair = load_pair(sys.argv[1], sys.argv[2], cache=TableCache())
loaded = time.perf_counter()
compare(*pair)
done = time.perf_counter()
print(f"ANALYSIS {loaded - start:.3f} {done - loaded:.3f} {len(pair[0].kernels)} {len(pair[1].kernels)}")
""",
}


@dataclass
class Run:
    wall: float
    rss: int
    load_s: float = 0.0
    analysis_s: float = 0.0
    kernels: str = ""


def measure(snippet: str, args: list[str], env: dict[str, str], tree: Path = PROJECT) -> Run:
    """Run a snippet in a fresh interpreter on the code of `tree`; wall time and peak RSS of its process tree."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", snippet, *args], cwd=tree, env={**env, "PYTHONPATH": str(tree)},
        stdout=subprocess.PIPE, text=True,
    )
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss(proc.pid))
        time.sleep(0.02)
    wall = time.perf_counter() - start
    out = proc.stdout.read() if proc.stdout else ""
    if proc.returncode:
        raise SystemExit(f"benchmark step failed ({proc.returncode}): {snippet[:60]}")
    run = Run(wall=wall, rss=peak)
    for line in out.splitlines():
        if line.startswith("ANALYSIS"):
            _, load_s, analysis_s, k1, k2 = line.split()
            run.load_s, run.analysis_s, run.kernels = float(load_s), float(analysis_s), f"{k1}+{k2}"
    return run


def _tree_rss(root: int) -> int:
    """Resident bytes of `root` and all its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(stat.parent.name)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * 4096
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, []))
    return total


def median_run(snippet: str, args: list[str], env: dict[str, str], runs: int, tree: Path = PROJECT) -> Run:
    results = [measure(snippet, args, env, tree) for _ in range(runs)]
    return sorted(results, key=lambda r: r.wall)[len(results) // 2]


def bench_pair(files: tuple[Path, Path], runs: int, cache_dir: Path, before: Path | None) -> dict[str, Run]:
    env = {"PATH": "/usr/bin:/bin", "FUSION_CACHE_DIR": str(cache_dir)}
    args = [str(files[0]), str(files[1])]
    steps = {
        "read": median_run(SNIPPETS["read"], args, env, runs),
        "orjson": median_run(SNIPPETS["orjson"], args, env, runs),
        "load": median_run(SNIPPETS["load"], args, env, runs),
    }
    if before is not None:
        steps["load was"] = median_run(SNIPPETS["load"], args, env, runs, before)
    steps["compare"] = _fresh_compare(args, env, runs, cache_dir)
    steps["reopen"] = median_run(SNIPPETS["compare"], args, env, runs)
    return steps


def _fresh_compare(args: list[str], env: dict[str, str], runs: int, cache_dir: Path) -> Run:
    """Compare with an empty cache each run; the last run leaves the cache filled for `reopen`."""
    results = []
    for _ in range(runs):
        for entry in cache_dir.iterdir():
            entry.unlink()
        results.append(measure(SNIPPETS["compare"], args, env))
    return sorted(results, key=lambda r: r.wall)[len(results) // 2]


def generate(out: Path, size_mb: int, formats: list[str]) -> dict[str, tuple[Path, Path]]:
    pairs = {}
    for gz in (form == "gz" for form in formats):
        folder = out / f"{size_mb}mb_{'gz' if gz else 'plain'}"
        if not folder.exists():
            started = time.perf_counter()
            write_pair(folder, PairSpec(), gzip=gz, target_bytes=size_mb * _MB)
            print(f"generated {folder.name} in {time.perf_counter() - started:.1f} s", flush=True)
        files = sorted(p for p in folder.iterdir() if p.name != "ground_truth.json")
        pairs[folder.name] = (files[0], files[1])
    return pairs


def report(name: str, files: tuple[Path, Path], runs: dict[str, Run]) -> None:
    base, floor = runs["orjson"], runs["read"]
    json_mb = max(_json_size(f) for f in files) / _MB
    print(f"\n{name}: {files[0].stat().st_size / _MB:.0f} MB + {files[1].stat().st_size / _MB:.0f} MB on disk, "
          f"larger JSON {json_mb:.0f} MB, kernels {runs['compare'].kernels}")
    print(f"  {'step':<9}{'wall s':>9}{'x orjson':>10}{'x read':>8}{'peak RSS MB':>13}{'x orjson':>10}"
          f"{'x JSON size':>13}")
    for step, run in runs.items():
        print(f"  {step:<9}{run.wall:>9.2f}{run.wall / base.wall:>10.3f}{run.wall / floor.wall:>8.2f}"
              f"{run.rss / _MB:>13.0f}{run.rss / base.rss:>10.3f}{run.rss / _MB / json_mb:>13.3f}")
    fresh = runs["compare"]
    print(f"  analysis after loading: {fresh.analysis_s:.3f} s = {100 * fresh.analysis_s / fresh.load_s:.1f}% "
          f"of the {fresh.load_s:.2f} s load (reopen: load {runs['reopen'].load_s:.3f} s, "
          f"analysis {runs['reopen'].analysis_s:.3f} s)")


def _json_size(path: Path) -> int:
    with path.open("rb") as handle:
        if handle.read(2) != b"\x1f\x8b":
            return path.stat().st_size
    inflater, total = zlib.decompressobj(wbits=31), 0
    with path.open("rb") as handle:
        while block := handle.read(1 << 22):
            total += len(inflater.decompress(block))
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000], help="MB of JSON per trace")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--formats", nargs="+", choices=["plain", "gz"], default=["plain", "gz"])
    parser.add_argument("--workdir", type=Path, default=PROJECT / "bench" / "out")
    parser.add_argument("--before", type=Path, help="another source tree (e.g. `git archive main | tar -x -C DIR`) "
                        "whose load is measured beside ours, as 'load was'")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as cache_dir:
        for size in args.sizes:
            for name, files in generate(args.workdir, size, args.formats).items():
                report(name, files, bench_pair(files, args.runs, Path(cache_dir), args.before))


if __name__ == "__main__":
    main()
