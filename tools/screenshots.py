"""Regenerate the README's and docs/' screenshots from the browser test, so they never go stale.

    python tools/screenshots.py

Runs the tests of tests/ui/test_e2e.py that take them (SHOT_TESTS) with FUSION_SCREENSHOTS=1, which makes the
test's `shots` folder docs/screenshots, then checks that every picture README.md and docs/*.md show was written
by this run. Exit 1 if a test fails or a shown picture was not rewritten.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "docs" / "screenshots"
SHOT_TESTS = (
    "test_upload_drill_down_and_share",
    "test_an_op_finding_opens_what_each_call_launched",
    "test_a_batch_result_opens_from_the_batch_list",
    "test_the_timeline_draws_a_graph_pair_aligned_and_a_kernel_opens_its_pair",
    "test_the_efficiency_page_draws_the_roofline_and_a_point_opens_its_op",
)
"""The browser tests that call _shot: home, overview, fusion, groups, kernels; ops; batch; timeline; efficiency."""
PICTURE = re.compile(r"\]\(((?:docs/)?screenshots/[\w.-]+\.png)\)")


def shown_pictures() -> set[Path]:
    """Every screenshot README.md and docs/*.md link to."""
    found = set()
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for link in PICTURE.findall(page.read_text(encoding="utf-8")):
            found.add(SHOTS / Path(link).name)
    return found


def main() -> int:
    started = time.time()
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/ui/test_e2e.py"]
    command += ["-k", " or ".join(SHOT_TESTS)]
    result = subprocess.run(command, cwd=ROOT, env={**os.environ, "FUSION_SCREENSHOTS": "1"}, check=False)
    stale = sorted(p.name for p in shown_pictures() if not p.exists() or p.stat().st_mtime < started)
    for name in stale:
        print(f"screenshots: {name} is shown in the docs but was not written by the browser test", file=sys.stderr)
    written = sorted(p.name for p in SHOTS.glob("*.png") if p.stat().st_mtime >= started)
    print(f"screenshots: wrote {len(written)} ({', '.join(written)}) in {time.time() - started:.0f} s")
    return 1 if result.returncode or stale else 0


if __name__ == "__main__":
    sys.exit(main())
