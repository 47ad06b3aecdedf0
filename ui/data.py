"""The cached data layer: where each side's trace comes from, the loaded traces and comparisons, uploads.

Parsed traces and comparisons live in process-wide LRU caches keyed by content digests (never by
the bytes, which Streamlit would rehash on every call), filled by plain functions that show
progress. The on-disk table cache and the trace store are optimisations and a place to keep
uploads: when their folder cannot be written, the dashboard carries on without caching and says so,
and an upload that cannot be stored gets the store's one-line message. The process-wide resources show no spinner:
they are quick to make, and the server's warm-up (ui.warmup) makes them outside any page.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from fusion import settings
from fusion.cache import machine_code
from fusion.cache.loading import Request, load_traces
from fusion.cache.results import ResultCache, cached_compare
from fusion.cache.store import StoreError, TraceStore, TraceUnavailable
from fusion.cache.tables import TableCache
from fusion.classify.trace import load
from fusion.comparison.result import Comparison
from fusion.errors import TraceError
from fusion.loader.events import scan_compile_pending
from fusion.match.align import prepare as prepare_alignment
from fusion.model.capture import read_captures
from fusion.model.capture_files import resolve_input
from fusion.model.phases import ALL as ALL_PHASES
from fusion.model.phases import pair_steps, step_spans
from fusion.model.trace import Trace
from ui import batch
from ui.state import NOT_ALLOWED, SAMPLES_DIR, View, server_path

DEFAULT_SAMPLE = "vllm_moe_full_graph"
DERIVED_PER_COMPARISON = 16
"""Derived tables and figures kept per cached comparison: enough for a few pairs' charts."""
COMPARE_STAGES = {
    "groups": "Finding kernel groups",
    "match": "Matching groups",
    "align": "Aligning kernels",
    "detect": "Detecting fusions",
}


@dataclass(frozen=True)
class Source:
    """Where one side's trace comes from: a cache key, the file to read, the name for messages, and the capture
    traces its graph replays are tied to (uploaded, or found in a `capture/` folder beside a server path)."""

    key: Hashable
    path: Path
    name: str
    captures: tuple[Path, ...] = ()
    found_in: str | None = None


def samples() -> dict[str, tuple[Path, Path]]:
    """Bundled pairs: each sample_traces/ folder holding exactly two traces, AMD's first when named so."""
    pairs = {}
    if SAMPLES_DIR.is_dir():
        for folder in sorted(p for p in SAMPLES_DIR.iterdir() if p.is_dir()):
            traces = [
                p
                for p in folder.iterdir()
                if p.name.endswith((".json", ".json.gz")) and not p.name.startswith(("ground_truth", "."))
            ]
            if len(traces) == 2:
                first, second = sorted(traces, key=lambda p: ("amd" not in p.name.lower(), p.name))
                pairs[folder.name] = (first, second)
    return pairs


def default_sample() -> str | None:
    names = samples()
    return DEFAULT_SAMPLE if DEFAULT_SAMPLE in names else next(iter(names), None)


# --- the server's folders: optional, said once when unusable ---------------------------------------


@st.cache_resource(show_spinner=False)
def table_cache() -> TableCache:
    """Parsed kernel tables on disk (FUSION_CACHE_DIR), so a link reopens fast even after a restart."""
    return TableCache()


@st.cache_resource(show_spinner=False)
def result_cache() -> ResultCache:
    """Comparisons on disk, beside the tables, so an analysed pair reopens without analysing it again."""
    return ResultCache()


@st.cache_resource(show_spinner=False)
def trace_store() -> TraceStore:
    """The server's one trace store (FUSION_STORE_DIR, FUSION_STORE_MAX_MB)."""
    return TraceStore()


def folder_notes() -> list[str]:
    """Why caching is off, if it is (no server path when hosted); results are unaffected."""
    problems = {cache.problem for cache in (table_cache(), result_cache()) if cache.problem}
    return [f"{problem}: results are unaffected, only slower to reopen." for problem in sorted(problems)]


# --- each side's source --------------------------------------------------------------------------


def sources(view: View) -> tuple[list[Source | None], list[str | None]]:
    """Each side's source, or a message saying why that side has none."""
    if view.sample:
        pair = samples().get(view.sample)
        if pair is None:
            return [None, None], [f"There is no bundled sample named {view.sample!r}."] * 2
        files = [_file_source(path, f"{view.sample}/{path.name}") for path in pair]
        return (files[::-1] if view.swap else files), [None, None]
    if view.bpair is not None and view.batch:
        return _batch_pair_sources(view.batch, view.bpair, view.swap)
    found, errors = [], []
    for digest, path, capture in ((view.t1, view.p1, view.c1), (view.t2, view.p2, view.c2)):
        source, error = _side_source(digest, path)
        if source is not None and error is None:
            source, error = _with_capture(source, capture, uploaded=bool(digest))
        found.append(source)
        errors.append(error)
    return found, errors


def _with_capture(source: Source, digest: str | None, uploaded: bool) -> tuple[Source | None, str | None]:
    """The source with its capture traces: an uploaded one (by digest), else those beside a server path (or in the
    folder a server path names, laid out as a trace plus capture/)."""
    if digest:
        try:
            path = trace_store().path(digest)
        except (TraceUnavailable, KeyError):
            return (
                None,
                f"The link names capture trace {digest[:12]}…, which this server does not have. Upload it again.",
            )
        return dataclasses.replace(source, key=(source.key, "capture", digest), captures=(path,)), None
    if uploaded:
        return source, None
    trace, found, folder = resolve_input(str(source.path))
    if not found:
        return source, None
    key = (_file_source(Path(trace), trace).key, "captures", *(_file_source(Path(f), f).key for f in found))
    captures = tuple(Path(f) for f in found)
    return dataclasses.replace(source, key=key, path=Path(trace), captures=captures, found_in=folder), None


def _batch_pair_sources(name: str, index: int, swap: bool) -> tuple[list[Source | None], list[str | None]]:
    """The two trace files a batch of this server recorded for one pair (never a URL, never a path from the link)."""
    try:
        pair, *paths = batch.pair_files(name, index)
    except TraceError as exc:
        return [None, None], [str(exc)] * 2
    files = [_file_source(path, f"{pair.label}/{path.name}") for path in paths]
    return (files[::-1] if swap else files), [None, None]


def _side_source(digest: str | None, path: str | None) -> tuple[Source | None, str | None]:
    if digest:
        try:
            return Source(digest, trace_store().path(digest), f"uploaded trace {digest[:12]}"), None
        except TraceUnavailable as exc:
            return None, f"Stored trace {digest[:12]}…: {exc}."
        except KeyError:
            return None, (
                f"The link names stored trace {digest[:12]}…, which this server does not have "
                "(it was evicted or uploaded elsewhere). Upload it again."
            )
    if path and not settings.hosted():
        resolved = server_path(path)
        if resolved is None:
            return None, f"{path}: {NOT_ALLOWED}"
        return _file_source(resolved, str(resolved)), None
    return None, None


def _file_source(path: Path, name: str) -> Source:
    """Key a file by path, size, mtime, inode and ctime so an edited file is read again (the system sets ctime on
    every write, so an in-place rewrite that keeps size and mtime changes it; the table cache hashes the bytes)."""
    try:
        stat = path.stat()
        key: Hashable = ("file", str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_ctime_ns)
    except OSError:
        key = ("missing", str(path), time.monotonic())
    return Source(key, path, name)


# --- uploads -------------------------------------------------------------------------------------------


def accept_upload(side: int, upload: Any) -> dict[str, str]:
    """Parse and store an upload once per file_id: {'digest', 'name', 'label'} or {'error': ...}, remembered per
    session."""
    seen = st.session_state.setdefault("uploads", {})
    if upload.file_id not in seen:
        seen[upload.file_id] = _ingest(side, upload)
    return seen[upload.file_id]


def _ingest(side: int, upload: Any) -> dict[str, str]:
    limit = settings.max_upload_mb()
    if limit and upload.size > limit * 1e6:
        return {
            "error": f"{upload.name}: {upload.size / 1e6:,.1f} MB is above this server's {limit:,g} MB upload limit."
        }
    data = upload.getvalue()
    progress = Progress(f"Reading trace {side} ({upload.name})")
    try:
        trace = load(data, name=upload.name, progress=progress.bytes_callback(f"Reading {upload.name}", 0, 1))
    except TraceError as exc:
        progress.fail(str(exc))
        return {"error": str(exc)}
    try:
        digest = trace_store().put(data)
    except StoreError as exc:
        progress.fail(f"{upload.name} could not be stored")
        return {"error": f"{upload.name}: {exc}"}
    table_cache().store(trace_store().path(digest), trace)
    _traces().put(digest, trace)
    progress.done(f"Trace {side}: {upload.name} read ({trace.kernel_count:,} kernels)")
    return {"digest": digest, "name": upload.name, "label": trace.label}


def accept_capture(side: int, upload: Any) -> dict[str, str]:
    """Check and store an uploaded graph-capture trace once per file_id: {'digest': ...} or {'error': ...}."""
    seen = st.session_state.setdefault("uploads", {})
    if upload.file_id not in seen:
        seen[upload.file_id] = _ingest_capture(side, upload)
    return seen[upload.file_id]


def _ingest_capture(side: int, upload: Any) -> dict[str, str]:
    limit = settings.max_upload_mb()
    if limit and upload.size > limit * 1e6:
        return {
            "error": f"{upload.name}: {upload.size / 1e6:,.1f} MB is above this server's {limit:,g} MB upload limit."
        }
    data = upload.getvalue()
    try:
        captures = read_captures([data], names=[upload.name])
    except TraceError as exc:
        return {"error": str(exc)}
    if not captures.graphs:
        return {"error": f"{upload.name}: no graph capture in it (no StreamBeginCapture .. EndCapture with launches)"}
    try:
        digest = trace_store().put(data)
    except StoreError as exc:
        return {"error": f"{upload.name}: {exc}"}
    return {"digest": digest, "graphs": str(len(captures.graphs))}


# --- in-memory caches and progress -------------------------------------------------------------------


class Lru:
    """A small thread-safe LRU map, shared by all sessions of this server process. `made` computes a missing
    value once however many sessions (or the server's warm-up) ask for it at the same time: the others wait
    for it instead of repeating the work."""

    def __init__(self, capacity: int) -> None:
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._capacity = max(1, capacity)
        self._lock = threading.Lock()
        self._making: dict[Hashable, threading.Lock] = {}

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            if key not in self._items:
                return None
            self._items.move_to_end(key)
            return self._items[key]

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)

    def made(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The value under `key`, from `make()` (kept) when missing; one `make` per key at a time."""
        value = self.get(key)
        if value is not None:
            return value
        with self.making(key):
            value = self.get(key)
            if value is None:
                value = make()
                self.put(key, value)
        return value

    @contextmanager
    def making(self, *keys: Hashable) -> Iterator[None]:
        """Hold the keys' make-locks (in one order, so two holders of overlapping keys cannot deadlock)."""
        with self._lock:
            locks = [self._making.setdefault(key, threading.Lock()) for key in sorted(set(keys), key=repr)]
        with ExitStack() as stack:
            for lock in locks:
                stack.enter_context(lock)
            yield


@st.cache_resource(show_spinner=False)
def _traces() -> Lru:
    return Lru(settings.cached_traces())


@st.cache_resource(show_spinner=False)
def _comparisons() -> Lru:
    return Lru(settings.cached_comparisons())


@st.cache_resource(show_spinner=False)
def _derived() -> Lru:
    """Tables and figures derived from a comparison (kernel counterparts, a pair's charts)."""
    return Lru(DERIVED_PER_COMPARISON * settings.cached_comparisons())


def derived(comparison: Comparison, what: Hashable, make: Callable[[Comparison], Any]) -> Any:
    """`make(comparison)`, computed once per comparison (under its labels) and `what`."""
    key = (
        comparison.trace1.digest,
        comparison.trace2.digest,
        comparison.params.get("min_group_size"),
        comparison.params.get("phase"),
        comparison.params.get("keep_unlaunched"),
        comparison.trace1.label,
        comparison.trace2.label,
        what,
    )
    return _derived().made(key, lambda: make(comparison))


class Progress:
    """An st.status with a progress bar, created only when there is work to show."""

    def __init__(self, label: str, *, shown: bool = True) -> None:
        self._label = label
        self._shown = shown
        self._status: Any = None
        self._bar: Any = None
        self._last = (-1.0, "")

    def update(self, fraction: float, text: str) -> None:
        if not self._shown:
            return
        if self._status is None:
            self._status = st.status(self._label, expanded=True)
            self._bar = self._status.progress(0.0)
        fraction = min(max(fraction, 0.0), 1.0)
        if text != self._last[1] or fraction - self._last[0] >= 0.01:
            self._bar.progress(fraction, text=text)
            self._last = (fraction, text)

    def bytes_callback(self, what: str, start: float, stop: float) -> Callable[[int, int], None]:
        """A loader progress callback reporting bytes read within [start, stop] of the bar."""

        def report(done: int, total: int) -> None:
            share = done / total if total else 0.0
            self.update(start + (stop - start) * share, reading_text(what, done, total))

        return report

    def done(self, label: str) -> None:
        if self._status is not None:
            self._status.update(label=label, state="complete", expanded=False)

    def fail(self, label: str) -> None:
        if self._status is not None:
            self._status.update(label=label, state="error", expanded=False)


COMPILE_HINT = " (the first large trace on this server compiles the trace reader: about 20 s, once)"


def reading_text(what: str, done: int, total: int) -> str:
    """A load's progress line: bytes read, then parsing; with COMPILE_HINT while the loader's compiled scan is
    not in numba's cache yet (a new install stalls on its first large piece)."""
    if total and done >= total:
        text = f"{what}: parsing and classifying kernels"
    else:
        text = f"{what}: {done / 1e6:,.0f} / {total / 1e6:,.0f} MB" if total else f"{what}: {done / 1e6:,.0f} MB"
    return text + COMPILE_HINT if scan_compile_pending(total) else text


@dataclass
class Analysis:
    """Both sides' traces (or why not) and their comparison when both loaded."""

    traces: list[Trace | None]
    errors: list[str | None]
    comparison: Comparison | None
    phases: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)
    """The phases the pair can be compared on ('all' last), each with its steps on both sides."""
    phase_problem: str | None = None
    """Why the view's phase was not compared ('all' was), when it was not."""


_FILL = threading.Lock()


def compiled_code() -> None:
    """Fill numba's cache of the loader's scan and the alignment's DP in a background process, once per server
    process (a Streamlit runtime's cache_resource would start one per runtime: tests run many in one process, each
    child costing 0.6 s of CPU to find the cache filled): until it is done, large traces are read by msgspec (a new
    install never waits 20 s for a compile)."""
    with _FILL:
        _fill_once()


@functools.cache
def _fill_once() -> None:
    machine_code.fill_in_background()


def analyse(view: View, *, shown: bool = True) -> Analysis:
    """Load both traces and compare them, from the caches when possible, else with visible progress (`shown`;
    the server's warm-up, outside any page, shows none)."""
    compiled_code()
    found, errors = sources(view)
    progress = Progress("Analysing traces", shown=shown)
    traces = _load_sides(found, errors, progress)
    if traces[0] is None or traces[1] is None:
        progress.fail("Could not read both traces")
        return Analysis(traces, errors, None)
    phases = pair_phases(traces[0], traces[1])
    phase = view.phase if view.phase in phases else ALL_PHASES
    problem = (
        None
        if phase == view.phase
        else (
            f"These traces cannot be compared on phase {view.phase!r}: both have kernels only in "
            f"{', '.join(phases)}. Showing all phases."
        )
    )
    comparison = _compare(traces[0], traces[1], view.mgs, phase, view.keep, progress)
    progress.done(f"Compared {comparison.trace1.kernel_count:,} and {comparison.trace2.kernel_count:,} kernels")
    return Analysis(traces, errors, relabel(comparison, view), phases, problem)


def pair_phases(trace1: Trace, trace2: Trace) -> dict[str, tuple[int, int]]:
    """Phases both traces have kernels in ('all' last) and each side's steps in it; kept per pair of traces."""
    return _derived().made(("phases", trace1.digest, trace2.digest), lambda: pair_steps((trace1, trace2)))


def trace_steps(trace: Trace) -> pd.DataFrame:
    """The trace's recorded steps (phase_compare.step_spans), kept per trace."""
    return _derived().made(("steps", trace.digest), lambda: step_spans(trace.kernels))


def _load_sides(found: list[Source | None], errors: list[str | None], progress: Progress) -> list[Trace | None]:
    """Each side's trace: from memory, else the on-disk table cache, else parsed (both at once when large;
    the alignment's compiled code is loaded once the first has finished, on the core it frees). A trace that
    another session (or the warm-up) is loading is waited for, not loaded again."""
    traces = _cached_traces(found)
    missing = [source.key for source, trace in zip(found, traces) if source is not None and trace is None]
    if not missing:
        return traces
    with _traces().making(*missing):
        traces = _cached_traces(found)
        todo = {i: source for i, source in enumerate(found) if source is not None and traces[i] is None}
        for (i, source), result in zip(todo.items(), _parse(list(todo.values()), list(todo), progress)):
            if isinstance(result, TraceError):
                errors[i] = str(result)
            else:
                traces[i] = result
                _traces().put(source.key, result)
    return traces


def _cached_traces(found: list[Source | None]) -> list[Trace | None]:
    return [_traces().get(s.key) if s is not None else None for s in found]


def _parse(sources: list[Source], sides: list[int], progress: Progress) -> list[Trace | TraceError]:
    """Load the sources (0-based `sides` of the page), reporting each one's bytes read."""
    if not sources:
        return []
    requests = [Request(s.path, name=s.name, captures=s.captures, found_in=s.found_in) for s in sources]
    callbacks = [
        progress.bytes_callback(f"Reading trace {i + 1} ({Path(s.name).name})", 0.35 * i, 0.35 * (i + 1))
        for i, s in zip(sides, sources)
    ]

    def report(side: int, done: int, total: int) -> None:
        callbacks[side - 1](done, total)

    return load_traces(requests, progress=report, cache=table_cache(), meanwhile=prepare_alignment)


def _compare(
    trace1: Trace, trace2: Trace, min_group_size: int, phase: str, keep: bool, progress: Progress
) -> Comparison:
    key = (trace1.digest, trace2.digest, min_group_size, phase, keep)

    def report(stage: str, fraction: float) -> None:
        progress.update(0.7 + 0.3 * fraction, f"{COMPARE_STAGES.get(stage, stage)}…")

    return _comparisons().made(
        key,
        lambda: cached_compare(
            trace1,
            trace2,
            cache=result_cache(),
            progress=report,
            min_group_size=min_group_size,
            phase=phase,
            keep_unlaunched=keep,
        ),
    )


def relabel(comparison: Comparison, view: View) -> Comparison:
    """The cached comparison under the view's labels, without recomputing (its caches stay shared)."""
    old = [comparison.trace1.label, comparison.trace2.label]
    new = [view.l1 or old[0], view.l2 or old[1]]
    if new == old:
        return comparison
    renamed = {old[i]: new[i] for i in (0, 1)}
    return dataclasses.replace(
        comparison,
        trace1=dataclasses.replace(comparison.trace1, label=new[0]),
        trace2=dataclasses.replace(comparison.trace2, label=new[1]),
        metadata={**comparison.metadata, "trace1_label": new[0], "trace2_label": new[1]},
        warnings=[_renamed(w, renamed) for w in comparison.warnings],
    )


def _renamed(warning: str, renamed: dict[str, str]) -> str:
    label, sep, rest = warning.partition(": ")
    return f"{renamed[label]}{sep}{rest}" if sep and label in renamed else warning
