"""Tests import their helpers from this folder (builders.py and friends), and never write to the user's cache.
The batch fixtures (a real batch result) serve the batch, view-state and dashboard tests."""

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from builders import BATCH_RANKS as RANKS  # noqa: E402
from builders import BATCH_SAME_RANK as SAME_RANK  # noqa: E402
from builders import FUSED_SAMPLE as FUSED  # noqa: E402
from builders import SHARED_ABSENT, SHARED_TRACES  # noqa: E402

from fusion.batch import run as batch  # noqa: E402

SUMMARY_LINES = pytest.StashKey[list[str]]()


@pytest.fixture
def summary_line(request: pytest.FixtureRequest):
    """Say something at the end of the run, even when output is captured (the browser sweep's count)."""
    return request.config.stash.setdefault(SUMMARY_LINES, []).append


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter) -> Iterator[None]:
    """Lines at the end of the run (after the short summary, before the counts): what tests asked to say
    (summary_line), and how many tests skipped for want of ../shared, and how to get them."""
    yield
    for line in terminalreporter.config.stash.get(SUMMARY_LINES, []):
        terminalreporter.write_line(line)
    skipped = [report for report in terminalreporter.stats.get("skipped", []) if SHARED_ABSENT in str(report.longrepr)]
    if skipped:
        terminalreporter.write_line(
            f"{len(skipped)} tests skipped: they need the real public traces in {SHARED_TRACES.parent}, which is "
            "absent; put a copy of the shared folder (shared/traces, shared/repro) beside this checkout to run them "
            "(docs/development.md, Real traces)"
        )


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
    root = tmp_path_factory.mktemp("batches")
    broken = root.parent / f"{root.name}-broken.json"
    broken.write_text('{"traceEvents": [{"cat": "kernel",')
    jobs = [*batch.jobs_from_directories(*rank_dirs), batch.Job(str(broken), str(FUSED / "nvidia.json.gz"), "broken")]
    batch.run_batch(jobs, root / "run1", workers=1)
    return root / "run1"
