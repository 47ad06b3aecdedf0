"""A new install's first run against a warm run, side by side (issue 34): `python bench/bench.py --first-run`.

For each pair (the shared Qwen1.5-0.5B pair when ../shared is here, and the bundled sample pairs), --runs
times, first and warm interleaved:
  first  `python -m fusion compare A B --format json` with an empty numba cache (NUMBA_CACHE_DIR names a
         new empty folder; numba puts it before the `__pycache__` next to the sources) and empty table and
         result caches: a new user's first command
  warm   the same command with numba's cache filled beforehand with everything the project compiles
         (`python -m fusion.cache.machine_code`), table and result caches emptied again
and the dashboard's path the same two ways (`load_pair` then `compare()` in a fresh process). One untimed
command runs first, so that Python's own bytecode cache is written (an install writes it). Wall time and peak
RSS of the process tree, medians, the ratio first / warm (goal <= 1.5), and the machine's load average.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from bench import PROJECT, SNIPPETS, Run, measure, measure_command, median  # bench/bench.py, beside this file

SHARED_PAIR = ("tl_mi300_qwen1.5-0.5b", "tl_h100_qwen1.5-0.5b")
GOAL = 1.5


def pairs() -> dict[str, tuple[Path, Path]]:
    """The shared Qwen pair (when ../shared is here) and the bundled sample pairs."""
    found = {}
    shared = PROJECT.parent / "shared" / "traces"
    files = [sorted((shared / name).glob("*.json*")) for name in SHARED_PAIR]
    if all(files):
        found["qwen1.5-0.5b (shared)"] = (files[0][0], files[1][0])
    for folder in sorted((PROJECT / "sample_traces").iterdir()):
        if (folder / "amd.json.gz").exists():
            found[f"{folder.name} (sample)"] = (folder / "amd.json.gz", folder / "nvidia.json.gz")
    return found


def run(runs: int) -> None:
    print(f"load average at the start {_load_average()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="fusion-first-run-") as root:
        base = Path(root)
        warm_numba, caches = base / "numba-warm", base / "caches"
        _fill(warm_numba)
        env = {"PATH": "/usr/bin:/bin", "FUSION_CACHE_DIR": str(caches / "tables")}
        env["FUSION_STORE_DIR"] = str(caches / "traces")
        found = pairs()
        first_pair = next(iter(found.values()))
        measure_command(_cli(first_pair), {**env, "PYTHONPATH": str(PROJECT), "NUMBA_CACHE_DIR": str(warm_numba)})
        print(
            f"\n  {'pair':<30}{'path':<11}{'first s':>9}{'warm s':>9}{'first/warm':>12}{'first MB':>10}{'warm MB':>9}"
        )
        for name, files in found.items():
            for path in ("cli", "dashboard"):
                first, warm = _side_by_side(path, files, env, base, warm_numba, caches, runs)
                ratio = first.wall / warm.wall
                print(
                    f"  {name:<30}{path:<11}{first.wall:>9.2f}{warm.wall:>9.2f}{ratio:>9.2f} {_mark(ratio)}"
                    f"{first.rss / 1e6:>10.0f}{warm.rss / 1e6:>9.0f}",
                    flush=True,
                )
    print(f"\n  goal: first <= {GOAL}x warm; medians of {runs}; load average at the end {_load_average()}")


def _side_by_side(
    path: str, files: tuple[Path, Path], env: dict[str, str], base: Path, warm_numba: Path, caches: Path, runs: int
) -> tuple[Run, Run]:
    firsts, warms = [], []
    for index in range(runs):
        fresh = base / f"numba-empty-{path}-{index}-{files[0].parent.name}"
        for numba_dir, results in ((fresh, firsts), (warm_numba, warms)):
            shutil.rmtree(caches, ignore_errors=True)
            numba_dir.mkdir(exist_ok=True)
            results.append(_measure(path, files, {**env, "NUMBA_CACHE_DIR": str(numba_dir)}))
    return median(firsts), median(warms)


def _measure(path: str, files: tuple[Path, Path], env: dict[str, str]) -> Run:
    if path == "cli":
        return measure_command(_cli(files), {**env, "PYTHONPATH": str(PROJECT)})
    return measure(SNIPPETS["compare"], [str(files[0]), str(files[1])], env)


def _cli(files: tuple[Path, Path]) -> list[str]:
    return [sys.executable, "-m", "fusion", "compare", str(files[0]), str(files[1]), "--format", "json"]


def _fill(numba_dir: Path) -> None:
    """numba's cache filled with the scan and the DP, as any run after a large trace's leaves it."""
    numba_dir.mkdir()
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT), "NUMBA_CACHE_DIR": str(numba_dir)}
    print("filling a numba cache for the warm runs (python -m fusion.cache.machine_code) ...", flush=True)
    done = measure_command([sys.executable, "-m", "fusion.cache.machine_code"], env)
    print(f"  took {done.wall:.1f} s", flush=True)


def _mark(ratio: float) -> str:
    return "ok" if ratio <= GOAL else "!!"


def _load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())
