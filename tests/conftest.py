"""Tests import their helpers from this folder (builders.py and friends), and never write to the user's cache.
The batch fixtures (a real batch result) serve the batch, view-state and dashboard tests."""

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

from fusion.batch import run as batch  # noqa: E402


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
