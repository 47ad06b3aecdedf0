"""Load the traces of a pair at once (the machines have two cores): in a thread each, in a child process.

The child parses the files and sends back the finished Traces; its parsing memory goes back to the
system when it exits. A one-shot caller may run the threads in its own process (see load_traces).
Small inputs are loaded one after the other in-process, where loading at once would cost more than it
saves. The loader (and pandas) is imported only where a trace is loaded or read back, so the parent
adds little memory to the child's while it runs. A child exits when its parent dies (its stdin
closes), and the work folders of a parent that was killed are removed by the next parallel load.
"""

from __future__ import annotations

import ctypes
import json
import os
import pickle
import queue
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

from fusion import settings
from fusion.cache import machine_code
from fusion.cache.tables import TableCache
from fusion.errors import TraceError
from fusion.loader.reader import GZIP_MAGIC, TraceSource

if TYPE_CHECKING:
    from fusion.model.trace import Trace

PARALLEL_MIN_BYTES = 256 << 20
WORKDIR_PREFIX = "fusion-load-"
LEFTOVER_SECONDS = 24 * 3600
"""A work folder without an owner pid (older versions) is removed after this long."""
EXIT_ORPHANED = 3
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[1])
SideProgress = Callable[[int, int, int], None]
"""Called with (side: 1 for the first source, bytes read, total bytes)."""
Meanwhile = Callable[[], None]
"""Work for the caller to do once, when one loader has finished and the other still runs: a core is free then
(the CLI loads its analysis code there)."""


@dataclass(frozen=True)
class Request:
    """One trace to load: the input, its label, the name that messages use for it, and the capture traces its
    graph replays are tied to (fusion.model.capture; `found_in`: the folder they were found in by themselves)."""

    source: TraceSource
    label: str | None = None
    name: str | None = None
    device: int | None = None
    """The GPU of a multi-GPU file (None: the one with the most kernel time)."""
    captures: tuple[TraceSource, ...] = ()
    found_in: str | None = None


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
    devices: tuple[int | None, int | None] = (None, None),
) -> tuple[Trace, Trace]:
    """Both traces, or the first side's TraceError; see load_traces. `devices` picks each file's GPU."""
    return load_requests(
        (Request(source1, labels[0], device=devices[0]), Request(source2, labels[1], device=devices[1])),
        progress=progress,
        max_bytes=max_bytes,
        parallel=parallel,
        cache=cache,
        meanwhile=meanwhile,
        isolated=isolated,
    )


def load_requests(
    requests: tuple[Request, Request],
    *,
    progress: SideProgress | None = None,
    max_bytes: int | None = None,
    parallel: bool | None = None,
    cache: TableCache | None = None,
    meanwhile: Meanwhile | None = None,
    isolated: bool = True,
) -> tuple[Trace, Trace]:
    """load_pair of two requests (with their captures)."""
    results = load_traces(
        list(requests),
        progress=progress,
        max_bytes=max_bytes,
        parallel=parallel,
        cache=cache,
        meanwhile=meanwhile,
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
    and together are large enough; newly parsed files enter the cache. At once means in a thread each:
    the compiled scan that reads large pieces releases the interpreter's lock, so the threads use both
    cores with one interpreter and one copy of numba; a one-shot caller (`isolated=False`) makes the compiled
    code ready before the threads start (machine_code.fill: on a new install, announced). The threads run in one child process, so that a
    parser that runs out of memory cannot take the caller (a dashboard) down, or, with `isolated=False`
    (a one-shot caller such as the CLI), in this process, where the tables need no copy back.
    Files too small together for a child are parsed one after the other, or, when this process has the
    compiled scan loaded already (fusion.loader.events.scans), in a thread each here. `parallel` True or
    False decides instead: at once as above, or one after the other.
    `meanwhile` runs once the first of two or more loaders has finished, if another still runs.
    """
    max_bytes = settings.max_trace_bytes() if max_bytes is None else max_bytes
    results: list[Trace | TraceError | None] = [_lookup(cache, request) for request in requests]
    todo = [i for i, result in enumerate(results) if result is None]
    sources = [requests[i].source for i in todo]
    at_once = _worth_parallel(sources) if parallel is None else parallel
    if not isolated and _scanned(sources):
        machine_code.fill()  # compiled before the loaders start (a new install: announced, about 20 s)
    if at_once and len(todo) > 1:
        load_at_once = _load_in_child if isolated else _load_in_threads
        loaded = load_at_once([requests[i] for i in todo], progress, todo, max_bytes, meanwhile)
    elif parallel is None and len(todo) > 1 and _scanned_here(sources):
        loaded = _load_in_threads([requests[i] for i in todo], progress, todo, max_bytes, meanwhile)
    else:
        loaded = [_load_here(requests[i], _side_progress(progress, i + 1), max_bytes) for i in todo]
    for i, result in zip(todo, loaded):
        results[i] = result
        if cache is not None and not isinstance(result, TraceError) and _cacheable(requests[i]):
            cache.store(requests[i].source, result)  # type: ignore[arg-type]
    return [_with_captures(result, request) for result, request in zip(results, requests)]  # type: ignore[arg-type]


def _with_captures(result: Trace | TraceError, request: Request) -> Trace | TraceError:
    """The trace with its replays tied to the request's capture traces (after the cache: the cached trace is the
    execution trace alone); a capture that cannot be read is that side's TraceError."""
    if isinstance(result, TraceError) or not request.captures:
        return result
    from fusion.model.capture import read_captures, tie_captures

    try:
        return tie_captures(result, read_captures(list(request.captures), request.found_in))
    except TraceError as exc:
        return exc


def _load_here(request: Request, progress: Callable[[int, int], None] | None, max_bytes: int) -> Trace | TraceError:
    from fusion.classify.trace import load

    try:
        return load(
            request.source,
            request.label,
            name=request.name,
            progress=progress,
            max_bytes=max_bytes,
            device=request.device,
        )
    except TraceError as exc:
        return exc
    except MemoryError:
        return TraceError(request.name or os.fspath(request.source), "out of memory while loading")


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


def _cacheable(request: Request) -> bool:
    """A file the table cache keeps by path: read with its default GPU (the cache keeps one trace per file)."""
    return _is_path(request.source) and request.device is None


def _lookup(cache: TableCache | None, request: Request) -> Trace | None:
    if cache is None or not _cacheable(request):
        return None
    return cache.lookup(request.source, request.label, name=request.name)  # type: ignore[arg-type]


def _worth_parallel(sources: list[TraceSource]) -> bool:
    """Two or more large regular files. A pipe (process substitution) is read once, by its loader here: never
    peeked at, never handed to a child (its /dev/fd path would name another process's descriptor)."""
    if len(sources) < 2 or not all(_is_path(src) for src in sources):
        return False
    try:
        if not all(Path(src).is_file() for src in sources):  # type: ignore[arg-type]
            return False
        return sum(json_size(Path(src)) for src in sources) >= PARALLEL_MIN_BYTES  # type: ignore[arg-type]
    except OSError:
        return False


def _scanned_here(sources: list[TraceSource]) -> bool:
    """Files too small for a child process, all of which this process's loaded compiled scan reads
    (fusion.loader.events.scans): the scan releases the interpreter's lock, so a thread each uses both cores
    for the cost of starting the threads. (msgspec holds the lock: traces it reads gain nothing from threads.)"""
    from fusion.loader.events import scans

    try:
        return all(_is_path(src) and Path(src).is_file() and scans(json_size(Path(src))) for src in sources)  # type: ignore[arg-type]
    except OSError:
        return False


def _scanned(sources: list[TraceSource]) -> bool:
    """Some of these files is large enough for the loader's compiled scan."""
    from fusion.loader.events import COMPILED_SCAN_MIN_BYTES

    try:
        return any(json_size(Path(src)) >= COMPILED_SCAN_MIN_BYTES for src in sources if _is_path(src))  # type: ignore[arg-type]
    except OSError:
        return False


def json_size(path: Path) -> int:
    """The file's JSON size: for gzip, the size its trailer records (modulo 4 GiB, enough to decide). 0 for what
    is no regular file: a pipe is never peeked at (its loader reads it once)."""
    if not path.is_file():
        return 0
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


def _load_in_child(
    requests: list[Request],
    progress: SideProgress | None,
    indices: list[int],
    max_bytes: int,
    meanwhile: Meanwhile | None = None,
) -> list[Trace | TraceError]:
    """The traces loaded in threads by `python -m fusion.cache.loading` in its own interpreter, and sent back.

    A plain subprocess, not multiprocessing: spawn re-imports the parent's __main__, which fails
    under `python -` and costs a Streamlit server a second import of its script runner.
    """
    remove_leftovers()
    with tempfile.TemporaryDirectory(prefix=f"{WORKDIR_PREFIX}{os.getpid()}-") as workdir:
        out = Path(workdir) / "traces.pickle"
        child = _start_child(out, requests, indices, max_bytes)
        try:
            _relay_progress(child, progress, meanwhile)
        finally:
            if child.poll() is None:
                child.kill()
            child.wait()
            child.stdin.close()  # type: ignore[union-attr]
        return _child_results(out, requests, child)


def _start_child(out: Path, requests: list[Request], indices: list[int], max_bytes: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))}
    jobs = [[os.fspath(r.source), r.label, r.name, r.device, index] for r, index in zip(requests, indices)]  # type: ignore[arg-type]
    command = [sys.executable, "-m", "fusion.cache.loading", str(out), str(max_bytes), json.dumps(jobs)]
    return subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)


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
    pid = folder.name[len(WORKDIR_PREFIX) :].partition("-")[0]
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


def _relay_progress(child: subprocess.Popen, progress: SideProgress | None, meanwhile: Meanwhile | None) -> None:
    """Pass the child's 'progress side done total' lines to `progress`, and run `meanwhile` at its 'meanwhile'
    line, until the child closes its stderr (it exits)."""
    for line in child.stderr:  # type: ignore[union-attr]
        if line.startswith(b"progress ") and progress is not None:
            side, done, total = line.split()[1:4]
            progress(int(side), int(done), int(total))
        elif line == b"meanwhile\n" and meanwhile is not None:
            meanwhile()


def _child_results(out: Path, requests: list[Request], child: subprocess.Popen) -> list[Trace | TraceError]:
    try:
        with out.open("rb") as handle:
            return pickle.load(handle)
    except (OSError, EOFError, pickle.UnpicklingError):
        why = "out of memory?" if child.returncode and child.returncode < 0 else f"exit status {child.returncode}"
        return [TraceError(r.name or os.fspath(r.source), f"the loader process died ({why})") for r in requests]


def _child_main(argv: list[str]) -> None:
    _exit_with_parent()
    out, max_bytes, jobs = argv

    def say(line: str) -> None:
        sys.stderr.buffer.write(line.encode() + b"\n")
        sys.stderr.buffer.flush()

    requests, indices = [], []
    for source, label, name, device, index in json.loads(jobs):
        requests.append(Request(source, label, name, device))
        indices.append(index)
    results = _load_in_threads(
        requests,
        lambda side, done, total: say(f"progress {side} {done} {total}"),
        indices,
        int(max_bytes),
        lambda: say("meanwhile"),
    )
    with open(out, "wb") as handle:
        pickle.dump(results, handle, protocol=pickle.HIGHEST_PROTOCOL)


if __name__ == "__main__":
    _child_main(sys.argv[1:])
