"""numba's disk cache of the loader's scan and the alignment's DP: filled before a large pair is read.

A new install has no machine code yet: the scan takes about 20 s to compile, once per machine, the DP a few
seconds. Small traces never need it (msgspec reads them, numpy rows align them). A one-shot caller (the CLI)
fills the cache before it reads a large pair, with a notice (`fill`); a server (the dashboard) fills it in a
niced background process from its start (`fill_in_background`), and reads large traces with msgspec until it
is done: fusion.compiled's compile lock tells the readers that the code is on its way.

Run as `python -m fusion.cache.machine_code` it fills the cache and exits.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from fusion.compiled import compile_here, compile_pending, compiling_elsewhere

BACKGROUND_NICENESS = 10
"""The background fill yields the cores to the server's own work."""
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


def fill() -> bool:
    """Load or compile the scan and the DP in this process; False when another process is compiling them."""
    from fusion.loader import piece_scan
    from fusion.match import align, dp

    functions = [*piece_scan.COMPILED, *dp.COMPILED] if piece_scan.USABLE else list(dp.COMPILED)

    def warm() -> None:
        if piece_scan.USABLE:
            piece_scan.warm()
        align.warm()

    return compile_here(functions, warm)


def pending() -> bool:
    """Some of the code a large pair needs is not in numba's cache yet."""
    from fusion.loader import piece_scan
    from fusion.match import dp

    return piece_scan.compile_pending() or any(compile_pending(f) for f in dp.COMPILED)


def fill_in_background() -> subprocess.Popen | None:
    """Start the fill in a niced child process (which exits at once when the cache is filled); None when a fill
    already runs. The child checks the cache itself, so the caller imports no numba."""
    if compiling_elsewhere():
        return None
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen(
        [sys.executable, "-m", "fusion.cache.machine_code"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )


def _main() -> None:
    if hasattr(os, "nice"):
        os.nice(BACKGROUND_NICENESS)
    if pending():
        fill()


if __name__ == "__main__":
    _main()
