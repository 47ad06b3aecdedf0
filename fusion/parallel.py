"""Load the traces of a pair at once (the machines have two cores): in a process each, or in a thread each.

Each child parses one file and sends back the finished Trace; its parsing memory goes back to
the system when it exits. A one-shot caller may load in threads instead (see load_traces). Small inputs are loaded in-process, where a child would cost more
than it saves. The loader (and pandas) is imported only where a trace is loaded or read back, so
the parent adds little memory to the children's while they run. A child exits when its parent dies (its stdin closes), and the work folders of a
parent that was killed are removed by the next parallel load.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import queue
import selectors
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from . import settings
from .errors import TraceError
from .reader import GZIP_MAGIC, TraceSource
from .tablecache import TableCache, stamp

if TYPE_CHECKING:
    from .trace import Trace

PARALLEL_MIN_BYTES = 256 << 20
WORKDIR_PREFIX = "fusion-load-"
LEFTOVER_SECONDS = 24 * 3600
"""A work folder without an owner pid (older versions) is removed after this long."""
EXIT_ORPHANED = 3
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])
SideProgress = Callable[[int, int, int], None]
"""Called with (side: 1 for the first source, bytes read, total bytes)."""
Meanwhile = Callable[[], None]
"""Work for the parent to do once, when one loader process has finished and the other still runs: a core is free
then, and the finished child's memory is released (the CLI loads its analysis code there)."""


@dataclass(frozen=True)
class Request:
    """One trace to load: the input, its label, and the name that messages use for it."""

    source: TraceSource
    label: str | None = None
    name: str | None = None


def load_pair(
    source1: TraceSource,
    source2: TraceSource,
    *,
    labels: tuple[str | None, str | None] = (None, None),
    progress: SideProgress | None = None,
    max_bytes: int | None = None,
    parallel: bool | None = None,
    cache: TableCache | None = None,
    meanwhile: Meanwhile | None = None,
    isolated: bool = True,
) -> tuple[Trace, Trace]:
    """Both traces, or the first side's TraceError; see load_traces."""
    requests = [Request(source1, labels[0]), Request(source2, labels[1])]
    results = load_traces(
        requests, progress=progress, max_bytes=max_bytes, parallel=parallel, cache=cache, meanwhile=meanwhile,
        isolated=isolated,
    )
    for result in results:
        if isinstance(result, TraceError):
            raise result
    return results[0], results[1]  # type: ignore[return-value]


def load_traces(
    requests: list[Request],
    *,
    progress: SideProgress | None = None,
    max_bytes: int | None = None,
    parallel: bool | None = None,
    cache: TableCache | None = None,
    meanwhile: Meanwhile | None = None,
    isolated: bool = True,
) -> list[Trace | TraceError]:
    """Each trace, or the TraceError that says why not, so one bad side never hides the other.

    Files loaded before come from `cache`; the rest are parsed at once when two or more need parsing
    and together are large enough; newly parsed files enter the cache. At once means each in its own
    process, so that a parser that runs out of memory cannot take the caller (a dashboard) down; or,
    with `isolated=False` (a one-shot caller such as the CLI), each in a thread of this process when the
    compiled scan will decode the pieces: it releases the interpreter's lock, so the threads use both
    cores with one interpreter and one copy of numba, and the tables need no copy back. `meanwhile`
    runs once the first of two or more loaders has finished, if another still runs.
    """
    max_bytes = settings.max_trace_bytes() if max_bytes is None else max_bytes
    results: list[Trace | TraceError | None] = [_lookup(cache, request) for request in requests]
    todo = [i for i, result in enumerate(results) if result is None]
    seen = {i: stamp(Path(requests[i].source)) for i in todo if _is_path(requests[i].source)}  # type: ignore[arg-type]
    if parallel is None:
        parallel = _worth_parallel([requests[i].source for i in todo])
    if parallel and len(todo) > 1:
        at_once = _load_in_children if isolated or not _compiled_scan_usable() else _load_in_threads
        loaded = at_once([requests[i] for i in todo], progress, todo, max_bytes, meanwhile)
    else:
        loaded = [_load_here(requests[i], _side_progress(progress, i + 1), max_bytes) for i in todo]
    for i, result in zip(todo, loaded):
        results[i] = result
        if cache is not None and not isinstance(result, TraceError) and _is_path(requests[i].source):
            cache.store(requests[i].source, result, seen=seen[i])  # type: ignore[arg-type]
    return results  # type: ignore[return-value]


def _load_here(request: Request, progress: Callable[[int, int], None] | None, max_bytes: int) -> Trace | TraceError:
    from .trace import load

    try:
        return load(request.source, request.label, name=request.name, progress=progress, max_bytes=max_bytes)
    except TraceError as exc:
        return exc
    except MemoryError:
        return TraceError(request.name or os.fspath(request.source), "out of memory while loading")


def _compiled_scan_usable() -> bool:
    from .piece_scan import USABLE  # imports numba: only for a pair large enough to load at once

    return USABLE


def _load_in_threads(
    requests: list[Request],
    progress: SideProgress | None,
    indices: list[int],
    max_bytes: int,
    meanwhile: Meanwhile | None = None,
) -> list[Trace | TraceError]:
    """Each trace parsed in a thread of this process; progress and `meanwhile` run in the calling thread."""
    events: queue.Queue[tuple[int, int, int] | int] = queue.Queue()
    results: dict[int, Trace | TraceError | BaseException] = {}

    def run(slot: int, request: Request, side: int) -> None:
        try:
            results[slot] = _load_here(request, lambda done, total: events.put((side, done, total)), max_bytes)
        except BaseException as exc:  # a bug, not bad input: raised again in the calling thread
            results[slot] = exc
        finally:
            events.put(slot)  # this loader has finished

    threads = [
        threading.Thread(target=run, args=(slot, request, index + 1), name=f"fusion-load-{index + 1}", daemon=True)
        for slot, (index, request) in enumerate(zip(indices, requests))
    ]
    for thread in threads:
        thread.start()
    running = len(threads)
    while running:
        event = events.get()
        if isinstance(event, int):
            running -= 1
            if meanwhile is not None and running:
                meanwhile()
                meanwhile = None
        elif progress is not None:
            progress(*event)
    _return_freed_memory()
    for result in results.values():
        if isinstance(result, BaseException) and not isinstance(result, TraceError):
            raise result
    return [results[slot] for slot in range(len(requests))]  # type: ignore[misc]


def _return_freed_memory() -> None:
    """Give the loaders' freed memory back to the system, where the C library is glibc.

    glibc keeps what a thread frees in that thread's arena, and after the first 16 MB piece buffer is
    freed it serves the next ones from the arena too: after a 2 x 1 GB load about 240 MB stay with the
    process, which the analysis would then add to."""
    try:
        libc = ctypes.CDLL(None)
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc
        return
    trim(0)


def _is_path(source: TraceSource) -> bool:
    return isinstance(source, (str, os.PathLike))


def _lookup(cache: TableCache | None, request: Request) -> Trace | None:
    if cache is None or not _is_path(request.source):
        return None
    return cache.lookup(request.source, request.label, name=request.name)  # type: ignore[arg-type]


def _worth_parallel(sources: list[TraceSource]) -> bool:
    if len(sources) < 2 or not all(_is_path(src) for src in sources):
        return False
    try:
        return sum(json_size(Path(src)) for src in sources) >= PARALLEL_MIN_BYTES  # type: ignore[arg-type]
    except OSError:
        return False


def json_size(path: Path) -> int:
    """The file's JSON size: for gzip, the size its trailer records (modulo 4 GiB, enough to decide)."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        if handle.read(2) != GZIP_MAGIC or size < 18:
            return size
        handle.seek(-4, os.SEEK_END)
        return max(size, int.from_bytes(handle.read(4), "little"))


def _side_progress(progress: SideProgress | None, side: int) -> Callable[[int, int], None] | None:
    if progress is None:
        return None
    return lambda done, total: progress(side, done, total)


def _load_in_children(
    requests: list[Request],
    progress: SideProgress | None,
    indices: list[int],
    max_bytes: int,
    meanwhile: Meanwhile | None = None,
) -> list[Trace | TraceError]:
    """Each trace parsed by `python -m fusion.parallel` in its own interpreter.

    A plain subprocess, not multiprocessing: spawn re-imports the parent's __main__, which fails
    under `python -` and costs a Streamlit server a second import of its script runner.
    """
    remove_leftovers()
    with tempfile.TemporaryDirectory(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-") as workdir:
        children = [
            (index + 1, _start_child(Path(workdir) / f"{index}.pickle", request, max_bytes))
            for index, request in zip(indices, requests)
        ]
        try:
            _relay_progress(children, progress, meanwhile)
        finally:
            for _, (child, _) in children:
                if child.poll() is None:
                    child.kill()
                child.wait()
                child.stdin.close()  # type: ignore[union-attr]
        return [_child_result(out, request, child) for (_, (child, out)), request in zip(children, requests)]


def _start_child(out: Path, request: Request, max_bytes: int) -> tuple[subprocess.Popen, Path]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))}
    command = [
        sys.executable, "-m", "fusion.parallel", os.fspath(request.source), str(out),
        request.label or "", request.name or "", str(max_bytes),
    ]
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    return child, out


def remove_leftovers() -> None:
    """Delete work folders of loads whose parent process is gone (killed before it could clean up)."""
    root = Path(tempfile.gettempdir())
    try:
        folders = [p for p in root.glob(f"{WORKDIR_PREFIX}*") if p.is_dir() and not p.is_symlink()]
    except OSError:
        return
    for folder in folders:
        if not _owner_alive(folder):
            shutil.rmtree(folder, ignore_errors=True)


def _owner_alive(folder: Path) -> bool:
    """Whether the process named in fusion-load-<pid>-* still runs; unnamed folders live LEFTOVER_SECONDS."""
    pid = folder.name[len(WORKDIR_PREFIX):].partition("-")[0]
    if not pid.isdigit():
        try:
            return time.time() - folder.stat().st_mtime < LEFTOVER_SECONDS
        except OSError:
            return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _exit_with_parent() -> None:
    """In a child: exit as soon as the parent is gone, which closes our stdin (works on every OS)."""

    def watch() -> None:
        while sys.stdin.buffer.read(1 << 16):
            pass
        os._exit(EXIT_ORPHANED)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _relay_progress(
    children: list[tuple[int, tuple[subprocess.Popen, Path]]],
    progress: SideProgress | None,
    meanwhile: Meanwhile | None = None,
) -> None:
    """Pass the children's 'done total' lines to `progress` until every child has closed its stderr (it exits);
    `meanwhile` runs when the first child has, if another still runs."""
    with selectors.DefaultSelector() as selector:
        for side, (child, _) in children:
            selector.register(child.stderr, selectors.EVENT_READ, (side, child))
        while selector.get_map():
            for key, _ in selector.select():
                line = key.fileobj.readline()  # type: ignore[union-attr]
                if not line:
                    selector.unregister(key.fileobj)
                    if meanwhile is not None and selector.get_map():
                        key.data[1].wait()  # gone, and its memory with it, before the parent takes more
                        meanwhile()
                        meanwhile = None
                elif progress is not None and line.startswith(b"progress "):
                    done, total = line.split()[1:3]
                    progress(key.data[0], int(done), int(total))


def _child_result(out: Path, request: Request, child: subprocess.Popen) -> Trace | TraceError:
    try:
        with out.open("rb") as handle:
            return pickle.load(handle)
    except (OSError, EOFError, pickle.UnpicklingError):
        why = "out of memory?" if child.returncode and child.returncode < 0 else f"exit status {child.returncode}"
        return TraceError(request.name or os.fspath(request.source), f"the loader process died ({why})")


def _child_main(argv: list[str]) -> None:
    _exit_with_parent()
    path, out, label, name, max_bytes = argv

    def report(done: int, total: int) -> None:
        sys.stderr.buffer.write(f"progress {done} {total}\n".encode())
        sys.stderr.buffer.flush()

    result = _load_here(Request(path, label or None, name or None), report, int(max_bytes))
    with open(out, "wb") as handle:
        pickle.dump(result, handle, protocol=pickle.HIGHEST_PROTOCOL)


if __name__ == "__main__":
    _child_main(sys.argv[1:])
