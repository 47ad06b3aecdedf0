"""Which Chromium the browser tests and benches launch (bench/chromium.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import chromium  # noqa: E402


@pytest.mark.parametrize(
    ("installed", "chosen"),
    [
        (("headless shell", "full browser"), "headless shell"),
        (("full browser",), "full browser"),
        (("headless shell",), "headless shell"),
        ((), None),
    ],
)
def test_the_headless_shell_is_preferred_and_the_full_browser_is_the_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, installed: tuple[str, ...], chosen: str | None
) -> None:
    paths = {"headless shell": tmp_path / "chromium-headless-shell", "full browser": tmp_path / "chromium"}
    monkeypatch.setattr(chromium, "HEADLESS_SHELL", paths["headless shell"])
    monkeypatch.setattr(chromium, "FULL_BROWSER", paths["full browser"])
    for name in installed:
        paths[name].touch()
    assert chromium.executable() == (paths[chosen] if chosen else None)
    assert chromium.launch_options()["executable_path"] == chromium.executable()
    assert chromium.launch_options()["headless"] is True
