"""Every screenshot the README and docs show is one the browser test takes (tools/screenshots.py regenerates them)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import screenshots  # noqa: E402


def test_every_shown_screenshot_is_taken_by_a_test_the_script_runs() -> None:
    source = (ROOT / "tests" / "ui" / "test_e2e.py").read_text(encoding="utf-8")
    taken = set()
    for test in re.split(r"\n(?=def )", source):
        name = re.match(r"def (\w+)", test)
        if name and name.group(1) in screenshots.SHOT_TESTS:
            taken |= set(re.findall(r'_shot\(page, shots, "([\w-]+)"\)', test))
    shown = {p.stem for p in screenshots.shown_pictures()}
    assert shown and shown <= taken, shown - taken
