"""The concurrency bench's short version: six browser sessions upload and analyse their own pairs at once on one
server (bench/concurrency.py; the bench runs 60 s). No upload may be lost, no session may see another's trace, no
page may show an error."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

pytest.importorskip("playwright.async_api", reason="playwright is not installed")
import chromium  # noqa: E402

if chromium.executable() is None:
    if os.environ.get("CI"):
        pytest.fail(f"Chromium is not installed; .ci/run installs it ({chromium.INSTALL})", pytrace=False)
    pytest.skip(f"Chromium is not installed ({chromium.INSTALL})", allow_module_level=True)

import concurrency  # noqa: E402

SESSIONS = 6
SECONDS = 1
"""Each session starts cycles for this long (the bench: 60 s): one cycle each, six at once."""


def test_six_sessions_at_once_lose_no_upload_and_see_only_their_own_traces(summary_line) -> None:
    tally, start, end = concurrency.run(SESSIONS, SECONDS, timeout=120)
    summary_line(
        f"concurrency: {SESSIONS} browser sessions at once, {tally.cycles} cycles, lost {tally.lost}, leaks "
        f"{tally.leaks}, errors {len(tally.errors)}; server memory {start:.0f} MB at the start, {end:.0f} MB at the end"
    )
    assert (tally.lost, tally.leaks, tally.dropped, tally.errors) == (0, 0, 0, [])
    assert tally.cycles >= SESSIONS
