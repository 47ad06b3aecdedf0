"""Load the two traces of a pair in two processes at once (the machines have two cores).

Each child parses one file and sends back the finished Trace; its parsing memory goes back to
the system when it exits. Small inputs are loaded in-process, where a child would cost more
than it saves.
"""

from __future__ import annotations

import os
import pickle
import selectors
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import TraceError
from .reader import DEFAULT_MAX_BYTES, GZIP_MAGIC, TraceSource
from .tablecache import TableCache
from .trace import Trace, load

PARALLEL_MIN_BYTES = 256 << 20
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])
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
    cache: TableCache | None = None,
) -> tuple[Trace, Trace]:
    """Both traces: from `cache` where the file was loaded before, else parsed, in parallel
    processes when both need parsing and are large enough; newly parsed files enter the cache."""
    sources = (source1, source2)
    cached = [_lookup(cache, src, label) for src, label in zip(sources, labels)]
    todo = [side for side in (1, 2) if cached[side - 1] is None]
    if parallel is None:
        parallel = len(todo) == 2 and _worth_parallel(sources)
    if parallel and len(todo) == 2:
        loaded = dict(zip((1, 2), _load_in_children(sources, labels, progress, max_bytes)))
    else:
        loaded = {
            side: load(sources[side - 1], labels[side - 1], progress=_side_progress(progress, side), max_bytes=max_bytes)
            for side in todo
        }
    for side, trace in loaded.items():
        if cache is not None and _is_path(sources[side - 1]):
            cache.store(sources[side - 1], trace)  # type: ignore[arg-type]
    return tuple(cached[side - 1] or loaded[side] for side in (1, 2))  # type: ignore[return-value]


def _is_path(source: TraceSource) -> bool:
    return isinstance(source, (str, os.PathLike))


def _lookup(cache: TableCache | None, source: TraceSource, label: str | None) -> Trace | None:
    return cache.lookup(source, label) if cache is not None and _is_path(source) else None  # type: ignore[arg-type]


def _worth_parallel(sources: tuple[TraceSource, TraceSource]) -> bool:
    if not all(_is_path(src) for src in sources):
        return False
    try:
        return sum(_json_size(Path(src)) for src in sources) >= PARALLEL_MIN_BYTES  # type: ignore[arg-type]
    except OSError:
        return False


def _json_size(path: Path) -> int:
    """The file's JSON size: for gzip, the size its trailer records (modulo 4 GiB, enough to decide)."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        if handle.read(2) != GZIP_MAGIC or size < 18:
            return size
        handle.seek(-4, os.SEEK_END)
        return max(size, int.from_bytes(handle.read(4), "little"))


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
    """Each trace parsed by `python -m fusion.parallel` in its own interpreter.

    A plain subprocess, not multiprocessing: spawn re-imports the parent's __main__, which fails
    under `python -` and costs a Streamlit server a second import of its script runner.
    """
    with tempfile.TemporaryDirectory(prefix="fusion-load-") as workdir:
        children = {
            side: _start_child(Path(workdir) / f"{side}.pickle", sources[side - 1], labels[side - 1], max_bytes)
            for side in (1, 2)
        }
        try:
            _relay_progress(children, progress)
        finally:
            for child, _ in children.values():
                if child.poll() is None:
                    child.kill()
                child.wait()
        results = {side: _child_result(out, sources[side - 1], child) for side, (child, out) in children.items()}
    return results[1], results[2]


def _start_child(out: Path, source: TraceSource, label: str | None, max_bytes: int) -> tuple[subprocess.Popen, Path]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "fusion.parallel", os.fspath(source), str(out), label or "", str(max_bytes)]
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    return child, out


def _relay_progress(children: dict[int, tuple[subprocess.Popen, Path]], progress: PairProgress | None) -> None:
    """Pass the children's 'done total' lines to `progress` until both have closed their stderr."""
    with selectors.DefaultSelector() as selector:
        for side, (child, _) in children.items():
            selector.register(child.stderr, selectors.EVENT_READ, side)
        while selector.get_map():
            for key, _ in selector.select():
                line = key.fileobj.readline()  # type: ignore[union-attr]
                if not line:
                    selector.unregister(key.fileobj)
                elif progress is not None and line.startswith(b"progress "):
                    done, total = line.split()[1:3]
                    progress(key.data, int(done), int(total))


def _child_result(out: Path, source: TraceSource, child: subprocess.Popen) -> Trace:
    try:
        with out.open("rb") as handle:
            kind, payload = pickle.load(handle)
    except (OSError, EOFError, pickle.UnpicklingError):
        why = "out of memory?" if child.returncode and child.returncode < 0 else f"exit status {child.returncode}"
        raise TraceError(os.fspath(source), f"the loader process died ({why})") from None
    if kind == "error":
        raise payload
    return payload


def _child_main(argv: list[str]) -> None:
    path, out, label, max_bytes = argv

    def report(done: int, total: int) -> None:
        sys.stderr.buffer.write(f"progress {done} {total}\n".encode())
        sys.stderr.buffer.flush()

    try:
        result: tuple[str, Any] = ("trace", load(path, label or None, progress=report, max_bytes=int(max_bytes)))
    except TraceError as exc:
        result = ("error", exc)
    except MemoryError:
        result = ("error", TraceError(path, "out of memory while loading"))
    with open(out, "wb") as handle:
        pickle.dump(result, handle, protocol=pickle.HIGHEST_PROTOCOL)


if __name__ == "__main__":
    _child_main(sys.argv[1:])
