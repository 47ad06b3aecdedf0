"""numba's njit with its machine code cached on disk, shared by the modules that compile (dp.py, piece_scan.py),
and whether that code is ready.

numba keeps the code next to the source in `__pycache__`, or in its user cache directory when that is not
writable (NUMBA_CACHE_DIR, when set, comes first). Where none is writable (a read-only install without a
writable home), each process would compile the function on its first call; `UNCACHED` names those functions,
and callers take their plain path instead.

Compiling takes long (the piece scan about 20 s, once per machine), so a process compiles while holding
`compile_lock`: another process that finds the code not cached yet sees the lock held
(`compiling_elsewhere`) and takes its plain path meanwhile instead of compiling the same code again. This
module imports numba only when a function is compiled, so asking whether numba is loaded costs nothing.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

UNCACHED: set[str] = set()
"""Qualified names of the functions numba compiles in each process (no writable cache location)."""
COMPILE_NOTE = "compiling the fast loader for this machine (once, about 20 s; later runs reuse it)"

log = logging.getLogger(__name__)

try:
    import fcntl
except ImportError:  # not POSIX: no lock, each process compiles what it needs
    fcntl = None  # type: ignore[assignment]


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
    import numba

    options: dict[str, Any] = {"nogil": True} if allocates else {"nogil": True, "_nrt": False}
    if inline:
        options["forceinline"] = True
    try:
        return numba.njit(cache=True, **options)(function)
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        UNCACHED.add(f"{function.__module__}.{function.__qualname__}")
        return numba.njit(**options)(function)


def numba_loaded() -> bool:
    """numba is imported in this process (a compiled function was defined): its import is paid."""
    return "numba" in sys.modules


def cacheable(function: Any) -> bool:
    """numba keeps this function's machine code on disk."""
    py_func = getattr(function, "py_func", function)
    return f"{py_func.__module__}.{py_func.__qualname__}" not in UNCACHED


def compile_pending(function: Any) -> bool:
    """Calling `function` would compile it: not compiled in this process, and numba's disk cache has no index
    for it (numba keeps an index file next to the machine code; it offers no public query, and where its
    internals differ this says False)."""
    if getattr(function, "signatures", None):
        return False
    index = getattr(getattr(getattr(function, "_cache", None), "_cache_file", None), "_index_path", None)
    return isinstance(index, str) and not os.path.exists(index)


def lock_path() -> Path:
    """The lock of the cache it guards: in numba's cache folder when NUMBA_CACHE_DIR names one, else one per user
    in the temporary folder (numba's own default locations are per source tree or per user)."""
    folder = os.environ.get("NUMBA_CACHE_DIR") or tempfile.gettempdir()
    return Path(folder) / f"fusion-compile-{getattr(os, 'getuid', lambda: 0)()}.lock"


@contextmanager
def compile_lock(wait: bool) -> Iterator[bool]:
    """Hold the machine's compile lock while the block runs; yields False when another process holds it (and
    `wait` is False). Where the lock cannot be made (no fcntl, no writable cache folder), yields True."""
    handle = _open_lock()
    if handle is None:
        yield True
        return
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        handle.close()  # releases the lock


def compiling_elsewhere() -> bool:
    """Another process holds the compile lock: it is filling numba's cache."""
    handle = _open_lock()
    if handle is None:
        return False
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        handle.close()
    return False


def _open_lock() -> Any:
    if fcntl is None:
        return None
    path = lock_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.open("a")
    except OSError:
        return None


def compile_here(functions: Iterable[Any], warm: Callable[[], None]) -> bool:
    """Make `functions` ready in this process: load them, or compile them (`warm` calls each once) under the
    compile lock, announced once. False when another process is compiling them: take the plain path."""
    functions = list(functions)
    if not any(compile_pending(f) for f in functions):
        return True
    with compile_lock(wait=False) as held:
        if not held:
            return False
        if any(compile_pending(f) for f in functions):  # another process may have finished meanwhile
            announce_compile()
        warm()
    return True


@cache
def announce_compile() -> None:
    """Say once per process, as a notice, that compiled code is being compiled (the CLI shows it on a terminal)."""
    log.info(COMPILE_NOTE)
