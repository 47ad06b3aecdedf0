"""Benchmark: load and compare generated trace pairs against `orjson.loads` of the same files.

    python bench/bench.py --sizes 100 1000 --runs 1
    python bench/bench.py --pair manykernel --wafer
    python bench/bench.py --first-run --runs 3     # a new install's first run against a warm one (first_run.py)
    python bench/bench.py --scale --plot docs/scale.png   # time and memory from 10 MB to 2 GB (scale.py)
    python bench/bench.py --margin --runs 5 --wafer       # compare --no-cache / orjson run by run, wafer-core

`--pair sized` (default) generates, for each of --sizes (MB of JSON per trace), a pair with the
project's generator, plain and gzipped. `--pair manykernel` generates issue 14's pair once: about
1 M kernels and 1 GB of plain JSON per side, graph launches cut into many distinct groups, an eager
prefill and every 8th decode step piecewise (eager attention with its CPU ops and launches). Pairs are
written to --data-dir and reused. Each step runs in fresh subprocesses, side by side in one run:
  read        reading the bytes of each file in its own process, summed (gzip: inflating them too, with the
              loader's zlib-ng, output dropped): the floor
  orjson      orjson.loads of each file in its own process, summed (gzip: inflate, then loads): the baseline
  load        our load of each trace, one after the other in one process
  compare     the dashboard's path: load_pair (at once: threads in a child process; the alignment code loaded
              meanwhile), then the analysis (empty cache)
  reopen      the same compare again, the traces coming from the on-disk table cache
  cli no-cache  `python -m fusion compare A B --format json --no-cache`: issue 14's measure
  cli         the same without --no-cache, caches emptied first: also fills the table and result caches
  cli reopen  the same command again in a fresh process: the cold re-open of an analysed pair
  file hash   what proves a cached trace's file unchanged: fusion.cache.tables.file_hash of both files (read and
              hashed whole, as every re-open does), and the xxh3 of the same bytes already in memory (what the
              parsing pass adds to a cold load); goals: at most 0.3 s of a re-open, at most 5% of a cold load
  wafer-core  (--wafer) wafer-core 0.1.34's analyze_fusion_differences on the pair, in its own venv
Both files are read once before the steps, so every step reads them from the page cache. Wall time
and peak RSS (summed over the process and its children, sampled every 20 ms; for the per-file steps
the larger of the two) are printed with the ratios to orjson and to the floor, and the machine's load
average. Figures are medians over --runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from fusion.synthetic.pairs import PairSpec, write_pair  # noqa: E402

_MB = 1_000_000
MANYKERNEL_SPEC = PairSpec(scenario="full_graph", prefill=True, group_cuts=True, piecewise_every=8, prep_share=0.5)
"""Issue 14's pair: many distinct groups, an eager prefill and piecewise steps; ~1 M kernels per GB."""
MANYKERNEL_MB = 1000
WAFER_VERSION = "0.1.34"

SNIPPETS = {
    "read": """
import sys
from zlib_ng import zlib_ng
with open(sys.argv[1], "rb") as handle:
    head = handle.read(2)
    inflater = zlib_ng.decompressobj(wbits=31) if head == b"\\x1f\\x8b" else None
    for block in iter(lambda: handle.read(8 << 20), b""):
        if inflater is not None:
            inflater.decompress(head + block)
            head = b""
""",
    "orjson": """
import gzip, sys, orjson
data = open(sys.argv[1], "rb").read()
if data[:2] == b"\\x1f\\x8b":
    data = gzip.decompress(data)
orjson.loads(data)
""",
    "wafer-core": """
import sys
from wafer_core.lib.trace_compare import analyze_fusion_differences
result = analyze_fusion_differences(sys.argv[1], sys.argv[2])
print("WAFER", len(result.get("fusion_mappings", [])), len(result.get("fusion_opportunities", [])))
""",
    "load": """
import sys
from fusion.classify.trace import load
for path in sys.argv[1:3]:
    load(path)
""",
    "file hash": """
import sys, time
from pathlib import Path
import xxhash
from fusion.cache.tables import file_hash
start = time.perf_counter()
for path in sys.argv[1:3]:
    file_hash(Path(path))
whole = time.perf_counter() - start
in_pass = 0.0
for path in sys.argv[1:3]:
    digest = xxhash.xxh3_128()
    with open(path, "rb") as handle:
        while block := handle.read(8 << 20):
            started = time.perf_counter()
            digest.update(block)
            in_pass += time.perf_counter() - started
print(f"HASH {whole:.4f} {in_pass:.4f}")
""",
    "compare": """
import sys, time
from fusion.match.align import prepare
from fusion.comparison.pair import compare
from fusion.cache.loading import load_pair
from fusion.cache.tables import TableCache
start = time.perf_counter()
pair = load_pair(sys.argv[1], sys.argv[2], cache=TableCache(), meanwhile=prepare)
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
    hash_s: float = 0.0
    """file hash: reading and hashing both files whole (a re-open's cost)."""
    pass_s: float = 0.0
    """file hash: hashing the bytes in memory (what the parsing pass adds)."""
    startup_s: float = 0.0
    """scale: the process's imports and compiled code loaded."""
    first_use_s: float = 0.0
    """scale: the first (sample) pair loaded and compared."""


def measure(snippet: str, args: list[str], env: dict[str, str], tree: Path = PROJECT) -> Run:
    """Run a snippet in a fresh interpreter on the code of `tree`; wall time and peak RSS of its process tree."""
    return measure_command([sys.executable, "-c", snippet, *args], {**env, "PYTHONPATH": str(tree)}, tree)


def measure_command(command: list[str], env: dict[str, str], cwd: Path = PROJECT) -> Run:
    """Run a command; wall time and peak RSS of its process tree; its ANALYSIS line parsed.

    Output goes to a file, not a pipe: a command that prints megabytes of JSON never blocks on it;
    warnings (stderr) are dropped.
    """
    with tempfile.TemporaryFile("w+") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.DEVNULL, text=True)
        peak = 0
        while proc.poll() is None:
            peak = max(peak, _tree_rss(proc.pid))
            time.sleep(0.02)
        wall = time.perf_counter() - start
        if proc.returncode:
            raise StepFailed(f"exit status {proc.returncode}: {' '.join(command)[:160]}")
        out.seek(0)
        lines = [line for line in out if line.startswith(("ANALYSIS", "WAFER", "HASH", "STARTUP"))]
    run = Run(wall=wall, rss=peak)
    for line in lines:
        if line.startswith("ANALYSIS"):
            _, load_s, analysis_s, k1, k2 = line.split()
            run.load_s, run.analysis_s, run.kernels = float(load_s), float(analysis_s), f"{k1}+{k2}"
        elif line.startswith("HASH"):
            run.hash_s, run.pass_s = (float(v) for v in line.split()[1:])
        elif line.startswith("STARTUP"):
            run.startup_s, run.first_use_s = (float(v) for v in line.split()[1:])
    return run


class StepFailed(Exception):
    """A measured command exited with an error."""


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


def median(results: list[Run]) -> Run:
    return sorted(results, key=lambda r: r.wall)[len(results) // 2]


def median_run(snippet: str, args: list[str], env: dict[str, str], runs: int, tree: Path = PROJECT) -> Run:
    return median([measure(snippet, args, env, tree) for _ in range(runs)])


def per_file(snippet: str, args: list[str], env: dict[str, str], runs: int) -> Run:
    """Each file in its own fresh process: the walls summed, the larger peak."""
    sides = [median_run(snippet, [arg], env, runs) for arg in args]
    return Run(wall=sum(r.wall for r in sides), rss=max(r.rss for r in sides))


def bench_pair(
    files: tuple[Path, Path], runs: int, cache_dir: Path, before: Path | None, wafer: Path | None
) -> dict[str, Run]:
    env = {"PATH": "/usr/bin:/bin", "FUSION_CACHE_DIR": str(cache_dir)}
    args = [str(files[0]), str(files[1])]
    _warm(files)
    steps = {
        "read": per_file(SNIPPETS["read"], args, env, runs),
        "orjson": per_file(SNIPPETS["orjson"], args, env, runs),
        "load": median_run(SNIPPETS["load"], args, env, runs),
    }
    if before is not None:
        steps["load was"] = median_run(SNIPPETS["load"], args, env, runs, before)
    steps["compare"] = _fresh(lambda: measure(SNIPPETS["compare"], args, env), runs, cache_dir)
    steps["reopen"] = median_run(SNIPPETS["compare"], args, env, runs)
    cli = [sys.executable, "-m", "fusion", "compare", *args, "--format", "json"]
    cli_env = {**env, "PYTHONPATH": str(PROJECT)}
    steps["cli no-cache"] = median([measure_command([*cli, "--no-cache"], cli_env) for _ in range(runs)])
    steps["cli"] = _fresh(lambda: measure_command(cli, cli_env), runs, cache_dir)
    steps["cli reopen"] = median([measure_command(cli, cli_env) for _ in range(runs)])
    steps["file hash"] = median_run(SNIPPETS["file hash"], args, env, runs)
    if wafer is not None:
        wafer_run = _wafer(wafer, args)
        if wafer_run is not None:
            steps["wafer-core"] = wafer_run
    return steps


MARGIN_GOAL = 0.12
WAFER_GOAL = 15


def margin(files: tuple[Path, Path], runs: int, wafer: Path | None) -> None:
    """Issue 34's load with margin: per run, side by side, `orjson.loads` of each file in its own process (summed)
    and `compare --no-cache`; each run's ratio, how many meet MARGIN_GOAL; then wafer-core once against the
    median command."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT)}
    args = [str(files[0]), str(files[1])]
    _warm(files)
    cli = [sys.executable, "-m", "fusion", "compare", *args, "--format", "json", "--no-cache"]
    print(f"  {'run':<5}{'orjson s':>10}{'cli s':>8}{'ratio':>8}{'cli peak MB':>13}{'load average':>16}", flush=True)
    clis, met = [], 0
    for index in range(runs):
        base = per_file(SNIPPETS["orjson"], args, env, 1)
        run = measure_command(cli, env)
        clis.append(run)
        ratio = run.wall / base.wall
        met += ratio <= MARGIN_GOAL
        print(
            f"  {index + 1:<5}{base.wall:>10.2f}{run.wall:>8.2f}{ratio:>8.3f}{run.rss / _MB:>13.0f}  {_load_average()}",
            flush=True,
        )
    print(f"  compare --no-cache <= {MARGIN_GOAL}x orjson in {met} of {runs} runs (goal: 4 of 5)")
    if wafer is not None:
        wafer_run = _wafer(wafer, args)
        if wafer_run is not None:
            ours = median(clis)
            print(
                f"  wafer-core {WAFER_VERSION}: {wafer_run.wall:.1f} s, peak {wafer_run.rss / _MB:.0f} MB: "
                f"{wafer_run.wall / ours.wall:.1f}x our median {ours.wall:.2f} s (goal >= {WAFER_GOAL}x)"
            )


def _warm(files: tuple[Path, Path]) -> None:
    """Read both files once, so that every step (the floor first) reads them from the page cache, as a
    person re-running a comparison does, not the first one from disk."""
    for path in files:
        with path.open("rb") as handle:
            while handle.read(1 << 24):
                pass


def _fresh(step: Callable[[], Run], runs: int, cache_dir: Path) -> Run:
    """`step` with an empty cache each run; the last run leaves the cache filled for the re-open after it."""
    results = []
    for _ in range(runs):
        _empty(cache_dir)
        results.append(step())
    return median(results)


def _empty(folder: Path) -> None:
    for entry in folder.iterdir():
        if entry.is_dir():
            _empty(entry)
            entry.rmdir()
        else:
            entry.unlink()


def wafer_python(data_dir: Path) -> Path | None:
    """The interpreter of a venv in `data_dir` with wafer-core installed (made once); None, said why, if it cannot be."""
    venv = data_dir / "wafer-venv"
    python = venv / "bin" / "python"
    check = [str(python), "-c", "from wafer_core.lib.trace_compare import analyze_fusion_differences"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python
    print(f"installing wafer-core=={WAFER_VERSION} into {venv} ...", flush=True)
    for command in (
        [sys.executable, "-m", "venv", str(venv)],
        [str(python), "-m", "pip", "install", "-q", f"wafer-core=={WAFER_VERSION}"],
        check,
    ):
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            why = (done.stderr.strip().splitlines() or ["no message"])[-1]
            print(f"wafer-core not measured: `{' '.join(command[:4])}` failed: {why}")
            return None
    return python


def _wafer(python: Path, args: list[str]) -> Run | None:
    """wafer-core's analyze_fusion_differences of the pair (it json.loads both files, one after the other)."""
    try:
        return measure_command([str(python), "-c", SNIPPETS["wafer-core"], *args], {"PATH": "/usr/bin:/bin"})
    except StepFailed as exc:
        print(f"wafer-core not measured: {exc}")
        return None


def generate(out: Path, size_mb: int, formats: list[str]) -> dict[str, tuple[Path, Path]]:
    pairs = {}
    for gz in (form == "gz" for form in formats):
        folder = out / f"{size_mb}mb_{'gz' if gz else 'plain'}"
        pairs[folder.name] = _generated(folder, PairSpec(), gz, size_mb)
    return pairs


def generate_manykernel(out: Path) -> dict[str, tuple[Path, Path]]:
    folder = out / f"manykernel_{MANYKERNEL_MB}mb_plain"
    return {folder.name: _generated(folder, MANYKERNEL_SPEC, False, MANYKERNEL_MB)}


def _generated(folder: Path, spec: PairSpec, gz: bool, size_mb: int) -> tuple[Path, Path]:
    """The pair in `folder`, written there first if it is not complete."""
    truth = folder / "ground_truth.json"
    if not truth.exists():  # written last: a pair whose generation was cut short is written again
        started = time.perf_counter()
        write_pair(folder, spec, gzip=gz, target_bytes=size_mb * _MB)
        print(f"generated {folder.name} in {time.perf_counter() - started:.1f} s", flush=True)
    files = sorted(p for p in folder.iterdir() if p.name != truth.name)
    return files[0], files[1]


def report(name: str, files: tuple[Path, Path], runs: dict[str, Run]) -> None:
    base, floor = runs["orjson"], runs["read"]
    json_mb = max(_json_size(f) for f in files) / _MB
    print(
        f"\n{name}: {files[0].stat().st_size / _MB:.0f} MB + {files[1].stat().st_size / _MB:.0f} MB on disk, "
        f"larger JSON {json_mb:.0f} MB, kernels {runs['compare'].kernels}; load average at the end "
        f"{_load_average()}"
    )
    print(
        f"  {'step':<13}{'wall s':>9}{'x orjson':>10}{'x read':>8}{'peak RSS MB':>13}{'x orjson':>10}"
        f"{'x JSON size':>13}"
    )
    for step, run in runs.items():
        print(
            f"  {step:<13}{run.wall:>9.2f}{run.wall / base.wall:>10.3f}{run.wall / floor.wall:>8.2f}"
            f"{run.rss / _MB:>13.0f}{run.rss / base.rss:>10.3f}{run.rss / _MB / json_mb:>13.3f}"
        )
    fresh = runs["compare"]
    print(
        f"  analysis after loading: {fresh.analysis_s:.3f} s = {100 * fresh.analysis_s / fresh.load_s:.1f}% "
        f"of the {fresh.load_s:.2f} s load (reopen: load {runs['reopen'].load_s:.3f} s, "
        f"analysis {runs['reopen'].analysis_s:.3f} s)"
    )
    cli = runs["cli no-cache"]
    if "wafer-core" in runs:
        print(
            f"  wafer-core {WAFER_VERSION} / our cli compare --no-cache: {runs['wafer-core'].wall / cli.wall:.1f}x "
            f"the time, {runs['wafer-core'].rss / cli.rss:.1f}x the peak"
        )
    hashed = runs["file hash"]
    print(
        f"  issue 40: the file hash of both files {hashed.hash_s:.3f} s in each re-open (goal <= 0.3 s; the cli "
        f"re-open took {runs['cli reopen'].wall:.2f} s in all), {hashed.pass_s:.3f} s in the parsing pass = "
        f"{100 * hashed.pass_s / runs['load'].wall:.1f}% of the cold load's {runs['load'].wall:.2f} s and "
        f"{100 * hashed.pass_s / cli.wall:.1f}% of the command's {cli.wall:.2f} s (goal <= 5%)"
    )
    print(
        f"  issue 14: cli compare --no-cache {cli.wall / base.wall:.3f}x orjson (goal <= 0.15), {cli.wall / floor.wall:.1f}x "
        f"the floor, peak {cli.rss / _MB / json_mb:.2f}x the larger JSON (goal <= 0.8), cold re-open "
        f"{runs['cli reopen'].wall:.2f} s (goal <= 1 s)"
    )


def _load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


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
    parser.add_argument("--pair", choices=["sized", "manykernel"], default="sized")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000], help="MB of JSON per trace (sized)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--formats", nargs="+", choices=["plain", "gz"], default=["plain", "gz"])
    parser.add_argument(
        "--data-dir",
        "--workdir",
        type=Path,
        default=PROJECT / "bench" / "out",
        help="where generated pairs (and wafer-core's venv) are kept",
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="another source tree (e.g. `git archive main | tar -x -C DIR`) "
        "whose load is measured beside ours, as 'load was'",
    )
    parser.add_argument("--wafer", action="store_true", help=f"also run wafer-core {WAFER_VERSION} (own venv)")
    parser.add_argument(
        "--first-run", action="store_true", help="a new install's first compare against a warm one (bench/first_run.py)"
    )
    parser.add_argument(
        "--margin", action="store_true", help="manykernel: per-run ratio of compare --no-cache to orjson (issue 34)"
    )
    parser.add_argument("--scale", action="store_true", help="time and memory against size (bench/scale.py)")
    parser.add_argument("--scale-sizes", type=int, nargs="+", default=[10, 100, 500, 1000, 2000], help="MB per trace")
    parser.add_argument("--plot", type=Path, help="--scale: write the log-log plot to this PNG")
    parser.add_argument("--keep", action="store_true", help="--scale: keep the generated pairs")
    args = parser.parse_args()
    if args.scale:
        import scale  # bench/scale.py, beside this file

        args.data_dir.mkdir(parents=True, exist_ok=True)
        scale.run(args.scale_sizes, args.runs, args.data_dir, args.plot, args.keep)
        return
    if args.margin:
        print(f"load average at the start {_load_average()}", flush=True)
        for name, files in generate_manykernel(args.data_dir).items():
            print(f"\n{name}")
            margin(files, args.runs, wafer_python(args.data_dir) if args.wafer else None)
        return
    if args.first_run:
        import first_run  # bench/first_run.py, beside this file

        first_run.run(args.runs)
        return
    args.data_dir.mkdir(parents=True, exist_ok=True)
    wafer = wafer_python(args.data_dir) if args.wafer else None
    if args.pair == "manykernel":
        pairs = generate_manykernel(args.data_dir)
    else:
        pairs = {
            name: files for size in args.sizes for name, files in generate(args.data_dir, size, args.formats).items()
        }
    print(f"load average at the start {_load_average()}", flush=True)
    with tempfile.TemporaryDirectory() as cache_dir:
        for name, files in pairs.items():
            report(name, files, bench_pair(files, args.runs, Path(cache_dir), args.before, wafer))


if __name__ == "__main__":
    main()
