"""numba's njit with its machine code cached on disk, shared by the modules that compile (dp.py, piece_scan.py).

numba keeps the code next to the source in `__pycache__`, or in its user cache directory when that is not
writable. Where neither is (a read-only install without a writable home), each process compiles the
function on its first call instead; `UNCACHED` names those functions, so a caller can skip compiled code
whose compile time would cost more than it saves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba

UNCACHED: set[str] = set()
"""Qualified names of the functions numba compiles in each process (no writable cache location)."""


def compiled(function: Callable | None = None, *, allocates: bool = True, inline: bool = False) -> Any:
    """numba.njit of `function` (nogil), cached on disk where numba finds a place for it.

    `allocates=False` compiles without numba's reference counting: the function must create no array
    (views are fine). Each array passed to a counted function costs two atomic operations per call,
    which made them half of the time of the piece scan's small helpers.

    `inline=True` marks the function for LLVM to inline into each caller (numba's forceinline). LLVM's own
    cost model leaves most helpers as calls, and a call passes each array as seven values, which can cost
    more than a small helper's work. (numba's inline="always" does the same on numba's IR, typing each copy
    again: the piece scan then took 51 s to compile instead of 18 s.)"""
    if function is None:
        return lambda f: compiled(f, allocates=allocates, inline=inline)
    options: dict[str, Any] = {"nogil": True} if allocates else {"nogil": True, "_nrt": False}
    if inline:
        options["forceinline"] = True
    try:
        return numba.njit(cache=True, **options)(function)
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        UNCACHED.add(f"{function.__module__}.{function.__qualname__}")
        return numba.njit(**options)(function)
