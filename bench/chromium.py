"""The browser that the end-to-end tests and the browser benches drive: Debian's Chromium.

Where Debian's `chromium-headless-shell` is installed, they use it. It is Chromium's headless shell, built from the
same source as `chromium`, and it is what Playwright itself runs for headless Chromium. It renders the same pages
with the same engine, without the full browser's window machinery. The same e2e and concurrency tests cost 90-95 s
of the machine's CPU with it, against 108-117 s with `chromium --headless` (docs/development.md). Where it is not
installed, the full browser runs headless.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

HEADLESS_SHELL = Path("/usr/bin/chromium-headless-shell")
FULL_BROWSER = Path("/usr/bin/chromium")
INSTALL = "apt-get install chromium chromium-headless-shell"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
"""No sandbox (tests run as root in containers), no GPU, and nothing fetched but the pages asked for."""


def executable() -> Path | None:
    """The Chromium binary to launch headless: the headless shell, else the full browser; None without either."""
    return next((path for path in (HEADLESS_SHELL, FULL_BROWSER) if path.exists()), None)


def launch_options() -> dict[str, Any]:
    """Playwright's `chromium.launch` keywords for that binary, headless, with ARGS."""
    return {"executable_path": executable(), "args": ARGS, "headless": True}
