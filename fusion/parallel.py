"""Load the two traces of a pair in two processes at once (the machines have two cores).

Each child parses one file and sends back the finished Trace; its parsing memory goes back to
the system when it exits. Small inputs are loaded in-process, where a child would cost more
than it saves.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from .errors import TraceError
from .reader import DEFAULT_MAX_BYTES, TraceSource
from .trace import Trace, load

PARALLEL_MIN_BYTES = 32 << 20
PairProgress = Callable[[int, int, int], None]
"""Called with (side 1 or 2, bytes read, total bytes)."""


def load_pair(
    source1: TraceSource,
    source2: TraceSource,
    *,
    labels: tuple[str | None, str | None] = (None, None),
    progress: PairProgress | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    parallel: bool | None = None,
) -> tuple[Trace, Trace]:
    """Both traces; in parallel processes when both are files and together large enough."""
    sources = (source1, source2)
    if parallel is None:
        parallel = _worth_parallel(sources)
    if not parallel:
        return tuple(  # type: ignore[return-value]
            load(src, label, progress=_side_progress(progress, side), max_bytes=max_bytes)
            for side, (src, label) in enumerate(zip(sources, labels), start=1)
        )
    return _load_in_children(sources, labels, progress, max_bytes)


def _worth_parallel(sources: tuple[TraceSource, TraceSource]) -> bool:
    if not all(isinstance(src, (str, os.PathLike)) for src in sources):
        return False
    try:
        return sum(Path(src).stat().st_size for src in sources) >= PARALLEL_MIN_BYTES  # type: ignore[arg-type]
    except OSError:
        return False


def _side_progress(progress: PairProgress | None, side: int) -> Callable[[int, int], None] | None:
    if progress is None:
        return None
    return lambda done, total: progress(side, done, total)


def _load_in_children(
    sources: tuple[TraceSource, TraceSource],
    labels: tuple[str | None, str | None],
    progress: PairProgress | None,
    max_bytes: int,
) -> tuple[Trace, Trace]:
    context = mp.get_context("spawn")
    pipes: dict[Connection, int] = {}
    children = []
    for side, (src, label) in enumerate(zip(sources, labels), start=1):
        parent_end, child_end = context.Pipe(duplex=False)
        child = context.Process(target=_child, args=(child_end, os.fspath(src), label, max_bytes), daemon=True)
        child.start()
        child_end.close()
        pipes[parent_end] = side
        children.append(child)
    try:
        results = _collect(pipes, progress)
    finally:
        for child in children:
            child.join(timeout=5)
            if child.is_alive():
                child.kill()
    errors = [results[side] for side in (1, 2) if isinstance(results[side], TraceError)]
    if errors:
        raise errors[0]
    return results[1], results[2]


def _collect(pipes: dict[Connection, int], progress: PairProgress | None) -> dict[int, Any]:
    results: dict[int, Any] = {}
    while len(results) < 2:
        for conn in wait(list(pipes)):
            side = pipes[conn]
            try:
                kind, payload = conn.recv()
            except EOFError:
                kind, payload = "error", TraceError(f"trace {side}", "the loader process died (out of memory?)")
            if kind == "progress" and progress:
                progress(side, *payload)
            elif kind in ("trace", "error"):
                results[side] = payload
                del pipes[conn]
    return results


def _child(conn: Connection, path: str, label: str | None, max_bytes: int) -> None:
    def report(done: int, total: int) -> None:
        conn.send(("progress", (done, total)))

    try:
        conn.send(("trace", load(path, label, progress=report, max_bytes=max_bytes)))
    except TraceError as exc:
        conn.send(("error", exc))
    except MemoryError:
        conn.send(("error", TraceError(path, "out of memory while loading")))
    finally:
        conn.close()
