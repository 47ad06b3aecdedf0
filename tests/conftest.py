"""Tests import their helpers from this folder (builders.py and friends), and never write to the user's cache.
The batch fixtures (a real batch result) serve the batch, view-state and dashboard tests. The run is parallel
(pyproject's addopts: pytest-xdist, `-n auto --dist loadfile`); the two hooks below choose the workers and keep
the tests that share a fixture on one worker."""

import compileall
import gc
import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from builders import BATCH_RANKS as RANKS  # noqa: E402
from builders import BATCH_SAME_RANK as SAME_RANK  # noqa: E402
from builders import FUSED_SAMPLE as FUSED  # noqa: E402

# The end-of-run lines (summary.py): its hook, and its fixture for every test.
from summary import pytest_terminal_summary, summary_line  # noqa: E402, F401

from fusion.settings import usable_cpus  # noqa: E402

MAX_WORKERS = 4
"""`-n auto` starts at most this many workers: each holds its own loaded traces and, for browser tests, its own
server and browser; on this project's 2-core machine 4 workers were no faster than 2 (266 s against 257 s)."""
WORK_UNITS = {
    "tests/comparison/test_golden.py": "the shared comparisons",
    "tests/detect/test_workload.py": "the shared comparisons",
}
"""Work units of `--dist loadfile` other than one test file: the two modules that share the session fixture
shared_comparisons (one unit: it is made once)."""
LONGEST_FIRST = (
    "tests/ui/test_e2e.py",
    "tests/ui/test_concurrency.py",
    "tests/cache/test_faults.py",
    "the shared comparisons",
    "tests/cli/test_bad_input.py",
    "tests/loader/test_fuzz.py",
    "tests/ui/test_app.py",
    "tests/loader/test_piece_scan.py",
    "tests/batch/test_batch.py",
    "tests/loader/test_trace.py",
    "tests/cache/test_tablecache.py",
)
"""The work units of 8 s or more in a parallel run on this project's 2-core machine, longest first: the browser
tests (105 s: the sweep, then the other pages), the concurrency test (37 s), the cache faults (29 s), the shared
comparisons (23 s), the bad-input corpus (23 s), the fuzz tests (22 s), the dashboard's AppTests (20 s), then
8-15 s units (2026-12-08 00:02 UTC, a quiet machine). They are handed out first and in this
order, the rest (each under 8 s) after them in collection order, so the run ends on short units: a long unit
handed out last keeps one worker busy while the other has nothing left (the dashboard's tests, then 49 s, handed
out last in collection order, left one worker idle for 47 s)."""


def work_unit(nodeid: str) -> str:
    """The work unit of a test: its WORK_UNITS entry, else its file."""
    path = nodeid.split("::", 1)[0]
    return WORK_UNITS.get(path) or path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In a parallel run's workers (whose collection order is the order xdist hands the units out in), tests of
    the LONGEST_FIRST units first; a stable sort: within a unit, and elsewhere, collection order."""
    if not hasattr(config, "workerinput"):
        return
    rank = {unit: i for i, unit in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(work_unit(item.nodeid), len(rank)))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Once the tests are collected, move every object made so far (the modules of pandas, Streamlit, numba,
    hypothesis and the rest, imported by the collection) out of the cyclic garbage collector's reach: they live as
    long as the process, and each full collection walked them all again. Objects the tests make are collected
    as before."""
    gc.freeze()


COMPILED_SOURCES = ("fusion", "ui")
"""The packages whose bytecode pytest_configure writes before the tests start."""


def pytest_configure(config: pytest.Config) -> None:
    """In the run's main process, before any worker starts: compile COMPILED_SOURCES to bytecode (`__pycache__`),
    for the Python processes the tests start (the command line, Streamlit servers, pool workers and children).
    Python writes no bytecode where PYTHONDONTWRITEBYTECODE is set, as on this project's machines, so each of
    them compiled the project's modules afresh: a `compare` of the eager sample took 0.84-0.94 s of CPU against
    0.65-0.68 s with the bytecode there. Python checks each file's stamp, so an edited module is compiled again."""
    if hasattr(config, "workerinput"):
        return
    root = Path(__file__).resolve().parents[1]
    for package in COMPILED_SOURCES:
        compileall.compile_dir(root / package, quiet=1)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """One worker per core this process may use, up to MAX_WORKERS; none (the tests run in this process) on one core
    or when the tests named are all in one file (`--dist loadfile` would give it one worker and stop the others).
    PYTEST_XDIST_AUTO_NUM_WORKERS, when set, decides."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = usable_cpus()
    files = {str(arg).split("::", 1)[0] for arg in config.args}
    if cores < 2 or (len(files) == 1 and next(iter(files)).endswith(".py")):
        return 0
    return min(cores, MAX_WORKERS)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """`--dist loadfile` with WORK_UNITS: the tests of one file run on one worker, so a module-scoped fixture (a
    Streamlit server and its browser, loaded traces, a batch result) is made once. (pytest-xdist 3.8's
    `--dist loadgroup` does not group under pytest 9, whose node ids it can no longer rename.)"""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # the collection's order (pytest_collection_modifyitems) decides
    return Scheduling(config, log)


@pytest.fixture(scope="session")
def shared_loaded() -> dict[Path, object]:
    """The shared traces loaded (by path), each once in the session: filled by shared_comparisons."""
    return {}


@pytest.fixture(scope="session")
def shared_comparisons(shared_loaded: dict[Path, object]) -> dict[str, object]:
    """`compare` of every pairing of the shared traces (tests/golden/pairs.py names them), made once for the
    before/after check (tests/comparison/test_golden.py) and the workload check (tests/detect/test_workload.py),
    which both ask it of all 190 pairs; {} without ../shared."""
    from golden import pairs

    return {name: pairs.compared(a, b, shared_loaded) for name, a, b in pairs.shared_pairs()}


@pytest.fixture(autouse=True)
def _private_cache_dirs(tmp_path_factory, monkeypatch) -> None:
    root = tmp_path_factory.mktemp("fusion-cache")
    monkeypatch.setenv("FUSION_CACHE_DIR", str(root / "tables"))
    monkeypatch.setenv("FUSION_STORE_DIR", str(root / "traces"))


@pytest.fixture(scope="module")
def rank_dirs(tmp_path_factory) -> tuple[Path, Path]:
    """Two directories of rank traces: ranks 0-2 the sample AMD/NVIDIA pair, rank 3 AMD against itself."""
    root = tmp_path_factory.mktemp("ranks")
    amd, nvidia = root / "mi300x", root / "h100"
    amd.mkdir()
    nvidia.mkdir()
    for rank in range(RANKS):
        shutil.copy(FUSED / "amd.json.gz", amd / f"trace_rank{rank}.json.gz")
        second = FUSED / ("amd.json.gz" if rank == SAME_RANK else "nvidia.json.gz")
        shutil.copy(second, nvidia / f"trace-rank-{rank}.json.gz")
    return amd, nvidia


@pytest.fixture(scope="module")
def batch_with_a_failure(rank_dirs, tmp_path_factory) -> Path:
    """A batch result folder `run1` (alone in its parent): the rank pairs, then a pair `broken` that fails."""
    from fusion.batch import run as batch  # here, not at the top: the run's main process never needs pandas

    root = tmp_path_factory.mktemp("batches")
    broken = root.parent / f"{root.name}-broken.json"
    broken.write_text('{"traceEvents": [{"cat": "kernel",')
    jobs = [*batch.jobs_from_directories(*rank_dirs), batch.Job(str(broken), str(FUSED / "nvidia.json.gz"), "broken")]
    batch.run_batch(jobs, root / "run1", workers=1)
    return root / "run1"
