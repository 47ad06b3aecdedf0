"""The end of a run says what tests asked it to (summary_line: the browser sweep's count) and how many tests
skipped for want of ../shared, in a serial run and in a parallel one (pytest-xdist's controller prints the summary,
its workers run the tests): a small project that uses tests/summary.py's hooks, run by pytest in a child."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from summary import pytest_terminal_summary, summary_line  # noqa: F401
"""
PROJECT_TESTS = """
import pytest
from builders import shared_absent


def test_passes_and_says(summary_line):
    summary_line("said by a test that passes")


def test_fails_and_says(summary_line):
    summary_line("said by a test that fails")
    assert False


@pytest.mark.parametrize("case", range(3))
def test_needs_shared(case):
    pytest.skip(shared_absent("../shared/traces"))


def test_skips_for_another_reason():
    pytest.skip("not for want of ../shared")
"""
SAID = ("said by a test that passes", "said by a test that fails")
SHARED_LINE = "3 tests skipped: they need the real public traces in"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("summary-project")
    (folder / "pytest.ini").write_text("[pytest]\n")
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "test_said.py").write_text(PROJECT_TESTS)
    return folder


@pytest.mark.parametrize("mode", [[], ["-p", "xdist.plugin", "-n", "2"]], ids=["serial", "xdist"])
def test_the_said_lines_and_the_shared_count_reach_the_end_of_the_run(project: Path, mode: list[str]) -> None:
    """(The child loads no installed plugin but xdist where asked: summary.py's hooks need none, and hypothesis's
    and anyio's plugins cost each of its processes about 0.4 s of CPU to import.)"""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs", *mode, str(project)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = run.stdout.splitlines()
    assert run.returncode == 1, run.stdout + run.stderr
    counts = next(i for i, line in enumerate(lines) if "1 failed, 1 passed, 4 skipped" in line)
    short_summary = next(i for i, line in enumerate(lines) if "short test summary info" in line)
    ends = [next((i for i, line in enumerate(lines) if line == said), None) for said in SAID]
    shared = next((i for i, line in enumerate(lines) if line.startswith(SHARED_LINE)), None)
    assert None not in ends and shared is not None, run.stdout
    assert all(short_summary < i < counts for i in [*ends, shared]), run.stdout
