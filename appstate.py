"""Streamlit glue shared by every page: view state in the URL, the trace store, the cached comparison, colours.

The URL is the source of truth for what is shown, so any page opened from a link on a fresh
server rebuilds the same view: a bundled sample by name, or uploaded traces by their store
digest. Parsed traces and comparisons live in process-wide LRU caches keyed by content digests
(never by the bytes, which Streamlit would rehash on every call), filled by plain functions that
show progress; nothing Streamlit-specific runs inside a cached function.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from fusion.classify import KERNEL_TYPES
from fusion.compare import compare
from fusion.errors import TraceError
from fusion.result import Comparison, FusionMapping
from fusion.parallel import Request, load_traces
from fusion.store import TraceStore, is_digest
from fusion.tablecache import TableCache
from fusion.trace import Trace, load

log = logging.getLogger("fusion.app")

HOSTED_UPLOAD_MB = 2048


def hosted() -> bool:
    """FUSION_HOSTED=1: no server paths from users or links, and an upload size cap."""
    return os.environ.get("FUSION_HOSTED", "").strip().lower() in {"1", "true", "yes"}


def max_upload_mb() -> float | None:
    """FUSION_MAX_UPLOAD_MB, else HOSTED_UPLOAD_MB when hosted; None means only the server's own limit."""
    configured = os.environ.get("FUSION_MAX_UPLOAD_MB")
    if configured:
        return float(configured)
    return HOSTED_UPLOAD_MB if hosted() else None


ROOT = Path(__file__).resolve().parent
SAMPLES_DIR = ROOT / "sample_traces"
DEFAULT_SAMPLE = "vllm_moe_full_graph"
DEFAULT_MIN_GROUP_SIZE = 50
CACHED_TRACES = int(os.environ.get("FUSION_CACHED_TRACES", 6))
CACHED_COMPARISONS = int(os.environ.get("FUSION_CACHED_COMPARISONS", 4))

PAGES = {
    "home": "app.py",
    "overview": "pages/1_Overview.py",
    "fusion": "pages/2_Fusion.py",
    "groups": "pages/3_Groups.py",
    "kernels": "pages/4_Kernels.py",
}

OTHER_TYPE = "Other"
_TYPE_PALETTE = {
    "GEMM": "#1F77B4", "MoE_GEMM": "#17BECF", "Attention": "#FF7F0E", "KV_Cache": "#FFBB78",
    "Communication": "#8C564B", "Convolution": "#C49C94", "RMSNorm": "#9467BD", "LayerNorm": "#C5B0D5",
    "BatchNorm": "#7B4173", "GroupNorm": "#A55194", "SwiGLU": "#2CA02C", "GELU": "#98DF8A", "ReLU": "#637939",
    "RoPE": "#BCBD22", "MoE_Routing": "#E377C2", "Softmax": "#D62728", "Embedding": "#AD494A",
    "Quantize": "#E7BA52", "Reduce": "#843C39", "Sort": "#393B79", "Scan": "#6B6ECF", "Elementwise": "#DBDB8D",
    "SiLU": "#B5CF6B", "Cast": "#E7969C", "MemCopy": "#C7C7C7", "Memset": "#525252", OTHER_TYPE: "#9E9E9E",
}
"""Hand-picked so that the types seen together most (GEMM, attention, norms, MoE, sort) differ in hue."""
_SPARE = px.colors.qualitative.Dark24
TYPE_COLORS: dict[str, str] = {
    kernel_type: _TYPE_PALETTE.get(kernel_type, _SPARE[i % len(_SPARE)]) for i, kernel_type in enumerate(KERNEL_TYPES)
}
"""One colour per kernel type, the same on every page."""
SIDE_COLORS = {1: "#C8102E", 2: "#5A9E00"}
"""Trace 1 and trace 2 keep their own colours (by side, not by vendor)."""


# --- view state (the URL) -------------------------------------------------------------------------

SOURCE_KEYS = ("sample", "t1", "t2", "p1", "p2")


@dataclass(frozen=True)
class View:
    """Everything that reproduces a view; round-trips through the query string."""

    sample: str | None = None
    t1: str | None = None
    t2: str | None = None
    p1: str | None = None
    p2: str | None = None
    l1: str | None = None
    l2: str | None = None
    mgs: int = DEFAULT_MIN_GROUP_SIZE
    swap: bool = False
    type: str | None = None
    pair: int | None = None
    w1: tuple[int, int] | None = None
    w2: tuple[int, int] | None = None

    def label(self, side: int) -> str | None:
        return self.l1 if side == 1 else self.l2

    def with_(self, **changes: Any) -> View:
        return dataclasses.replace(self, **changes)

    def with_sources(self, **changes: Any) -> View:
        """Only the given inputs; labels, selections and windows of the old comparison no longer apply."""
        cleared = dict.fromkeys((*SOURCE_KEYS, "l1", "l2", "type", "pair", "w1", "w2")) | {"swap": False}
        return dataclasses.replace(self, **{**cleared, **changes})

    def swapped(self) -> View:
        """Trace 1 and trace 2 exchanged; a selected pair's ids refer to the old order, so it is dropped."""
        base = self.with_(l1=self.l2, l2=self.l1, pair=None, w1=None, w2=None)
        if self.sample:
            return base.with_(swap=not self.swap)
        return base.with_(t1=self.t2, t2=self.t1, p1=self.p2, p2=self.p1)

    def to_params(self) -> dict[str, str]:
        params: dict[str, str] = {}
        for key in ("sample", "t1", "t2", "p1", "p2", "l1", "l2", "type"):
            value = getattr(self, key)
            if value:
                params[key] = value
        if self.mgs != DEFAULT_MIN_GROUP_SIZE:
            params["mgs"] = str(self.mgs)
        if self.swap:
            params["swap"] = "1"
        if self.pair is not None:
            params["pair"] = str(self.pair)
        for key in ("w1", "w2"):
            window = getattr(self, key)
            if window:
                params[key] = f"{window[0]}-{window[1]}"
        return params

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> View:
        """Parse a query string leniently: a malformed or disallowed value is dropped, never trusted."""
        digest = {key: params.get(key) if is_digest(params.get(key)) else None for key in ("t1", "t2")}
        paths = {key: (None if hosted() else params.get(key) or None) for key in ("p1", "p2")}
        return cls(
            sample=params.get("sample") or None,
            **digest,
            **paths,
            l1=clean_label(params.get("l1")),
            l2=clean_label(params.get("l2")),
            mgs=_int(params.get("mgs"), DEFAULT_MIN_GROUP_SIZE, low=1, high=1_000_000),
            swap=params.get("swap") == "1",
            type=params.get("type") if params.get("type") in KERNEL_TYPES else None,
            pair=_int(params.get("pair"), None, low=0, high=10**9),
            w1=_window(params.get("w1")),
            w2=_window(params.get("w2")),
        )


_MARKDOWN_SYNTAX = re.compile(r"([\\`*_{}\[\]()<>#+!|~$:])")


def md_text(text: str) -> str:
    """Untrusted text (a GPU or kernel name from a trace file, an upload's file name) as literal markdown."""
    return _MARKDOWN_SYNTAX.sub(r"\\\1", str(text).replace("\n", " "))


def clean_label(value: str | None, limit: int = 80) -> str | None:
    """A label as plain text: characters that markdown would turn into links or markup are dropped."""
    if not value:
        return None
    return re.sub(r"[\[\]*_`<>|~$\\]", "", value).strip()[:limit] or None


def _int(value: str | None, default: int | None, *, low: int, high: int) -> int | None:
    try:
        number = int(value) if value is not None else default
    except ValueError:
        return default
    return None if number is None else min(max(number, low), high)


def _window(value: str | None) -> tuple[int, int] | None:
    try:
        start, stop = (int(part) for part in (value or "").split("-"))
    except ValueError:
        return None
    return (start, stop) if 0 <= start <= stop else None


def current_view() -> View:
    """The view from the URL; else this session's last view (sidebar navigation drops the query); else the sample."""
    params = st.query_params.to_dict()
    if any(params.get(key) for key in SOURCE_KEYS):
        view = View.from_params(params)
    elif "view" in st.session_state:
        view = st.session_state["view"]
    else:
        view = View(sample=default_sample())
    set_view(view)
    return view


def set_view(view: View) -> None:
    """Remember the view in the session and mirror it into the URL (safe inside widget callbacks)."""
    st.session_state["view"] = view
    params = view.to_params()
    if params != st.query_params.to_dict():
        st.query_params.from_dict(params)


def update_view(**changes: Any) -> None:
    """Widget callback helper: change fields of the session's view."""
    set_view(st.session_state["view"].with_(**changes))


def bind(key: str, value: Any) -> None:
    """Make the keyed widget created next show `value` (taken from the URL) on this run."""
    st.session_state[key] = value


def share_url(view: View) -> str:
    """The full link to this page and view when the browser's URL is known, else a relative one."""
    query = urlencode(view.to_params())
    base = _context_url()
    return f"{base}?{query}" if base else f"?{query}"


def _context_url() -> str | None:
    try:
        return st.context.url
    except Exception:  # not every runtime (e.g. AppTest) has a browser URL
        return None


# --- inputs ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """Where one side's trace comes from: a cache key, the file to read, and the name for messages."""

    key: Hashable
    path: Path
    name: str


def samples() -> dict[str, tuple[Path, Path]]:
    """Bundled pairs: each sample_traces/ folder holding exactly two traces, AMD's first when named so."""
    pairs = {}
    if SAMPLES_DIR.is_dir():
        for folder in sorted(p for p in SAMPLES_DIR.iterdir() if p.is_dir()):
            traces = [p for p in folder.iterdir() if p.name.endswith((".json", ".json.gz")) and _is_trace_name(p)]
            if len(traces) == 2:
                first, second = sorted(traces, key=lambda p: ("amd" not in p.name.lower(), p.name))
                pairs[folder.name] = (first, second)
    return pairs


def _is_trace_name(path: Path) -> bool:
    return not path.name.startswith(("ground_truth", "."))


def default_sample() -> str | None:
    names = samples()
    if DEFAULT_SAMPLE in names:
        return DEFAULT_SAMPLE
    return next(iter(names), None)


@st.cache_resource
def table_cache() -> TableCache:
    """Parsed kernel tables on disk (FUSION_CACHE_DIR), so a link reopens fast even after a restart."""
    return TableCache()


@st.cache_resource
def trace_store() -> TraceStore:
    """The server's one trace store (FUSION_STORE_DIR, FUSION_STORE_MAX_MB)."""
    return TraceStore()


def sources(view: View) -> tuple[list[Source | None], list[str | None]]:
    """Each side's source, or a message saying why that side has none."""
    if view.sample:
        pair = samples().get(view.sample)
        if pair is None:
            return [None, None], [f"There is no bundled sample named {view.sample!r}."] * 2
        files = [_file_source(path, f"{view.sample}/{path.name}") for path in pair]
        return (files[::-1] if view.swap else files), [None, None]
    found, errors = [], []
    for digest, path in ((view.t1, view.p1), (view.t2, view.p2)):
        source, error = _side_source(digest, path)
        found.append(source)
        errors.append(error)
    return found, errors


def _side_source(digest: str | None, path: str | None) -> tuple[Source | None, str | None]:
    if digest:
        if digest not in trace_store():
            return None, (
                f"The link names stored trace {digest[:12]}…, which this server does not have "
                "(it was evicted or uploaded elsewhere). Upload it again."
            )
        return Source(digest, trace_store().path(digest), f"uploaded trace {digest[:12]}"), None
    if path and not hosted():
        resolved = Path(path).expanduser()
        return _file_source(resolved, str(resolved)), None
    return None, None


def _file_source(path: Path, name: str) -> Source:
    """Key a file by path, size and mtime so an edited file is read again."""
    try:
        stat = path.stat()
        key: Hashable = ("file", str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    except OSError:
        key = ("missing", str(path), time.monotonic())
    return Source(key, path, name)


def accept_upload(side: int, upload: Any) -> tuple[str | None, bool]:
    """Parse and store an upload once per file_id: (its digest or None, whether this run ingested it).

    A failure is remembered and shown in place on every run, without parsing the file again.
    """
    seen = st.session_state.setdefault("uploads", {})
    fresh = upload.file_id not in seen
    if fresh:
        seen[upload.file_id] = _ingest(side, upload)
    outcome = seen[upload.file_id]
    if "error" in outcome:
        st.error(md_text(outcome["error"]))
        return None, fresh
    return outcome["digest"], fresh


def _ingest(side: int, upload: Any) -> dict[str, str]:
    limit = max_upload_mb()
    if limit and upload.size > limit * 1e6:
        return {"error": f"{upload.name}: {upload.size / 1e6:,.1f} MB is above this server's {limit:,g} MB upload limit."}
    data = upload.getvalue()
    progress = Progress(f"Reading trace {side} ({upload.name})")
    try:
        trace = load(data, name=upload.name, progress=progress.bytes_callback(f"Reading {upload.name}", 0, 1))
    except TraceError as exc:
        progress.fail(str(exc))
        return {"error": str(exc)}
    digest = trace_store().put(data)
    table_cache().store(trace_store().path(digest), trace)
    _traces().put(digest, trace)
    progress.done(f"Trace {side}: {upload.name} read ({trace.kernel_count:,} kernels)")
    return {"digest": digest}


# --- caches and progress -----------------------------------------------------------------------------


class Lru:
    """A small thread-safe LRU map, shared by all sessions of this server process."""

    def __init__(self, capacity: int) -> None:
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._capacity = max(1, capacity)
        self._lock = threading.Lock()

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


@st.cache_resource
def _traces() -> Lru:
    return Lru(CACHED_TRACES)


@st.cache_resource
def _comparisons() -> Lru:
    return Lru(CACHED_COMPARISONS)


class Progress:
    """An st.status with a progress bar, created only when there is work to show."""

    def __init__(self, label: str) -> None:
        self._label = label
        self._status: Any = None
        self._bar: Any = None
        self._last = (-1.0, "")

    def update(self, fraction: float, text: str) -> None:
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
            size = f"{done / 1e6:,.0f} / {total / 1e6:,.0f} MB" if total else f"{done / 1e6:,.0f} MB"
            text = f"{what}: {size}" if share < 1 else f"{what}: parsing and classifying kernels"
            self.update(start + (stop - start) * share, text)

        return report

    def done(self, label: str) -> None:
        if self._status is not None:
            self._status.update(label=label, state="complete", expanded=False)

    def fail(self, label: str) -> None:
        if self._status is not None:
            self._status.update(label=label, state="error", expanded=False)


COMPARE_STAGES = {"groups": "Finding kernel groups", "match": "Matching groups", "align": "Aligning kernels", "detect": "Detecting fusions"}


@dataclass
class Analysis:
    """Both sides' traces (or why not) and their comparison when both loaded."""

    traces: list[Trace | None]
    errors: list[str | None]
    comparison: Comparison | None


def analyse(view: View) -> Analysis:
    """Load both traces and compare them, from the caches when possible, else with visible progress."""
    found, errors = sources(view)
    progress = Progress("Analysing traces")
    traces = _load_sides(found, errors, progress)
    if traces[0] is None or traces[1] is None:
        progress.fail("Could not read both traces")
        return Analysis(traces, errors, None)
    comparison = _compare(traces[0], traces[1], view.mgs, progress)
    progress.done(f"Compared {comparison.trace1.kernel_count:,} and {comparison.trace2.kernel_count:,} kernels")
    return Analysis(traces, errors, relabel(comparison, view))


def _load_sides(found: list[Source | None], errors: list[str | None], progress: Progress) -> list[Trace | None]:
    """Each side's trace: from memory, else the on-disk table cache, else parsed (both at once when large)."""
    traces: list[Trace | None] = [_traces().get(s.key) if s is not None else None for s in found]
    todo = [i for i, source in enumerate(found) if source is not None and traces[i] is None]
    requests = [Request(found[i].path, name=found[i].name) for i in todo]  # type: ignore[union-attr]
    callbacks = {
        i + 1: progress.bytes_callback(f"Reading trace {i + 1} ({Path(found[i].name).name})", 0.35 * i, 0.35 * (i + 1))  # type: ignore[union-attr]
        for i in todo
    }

    def report(side: int, done: int, total: int) -> None:
        callbacks[todo[side - 1] + 1](done, total)

    for i, result in zip(todo, load_traces(requests, progress=report, cache=table_cache())):
        if isinstance(result, TraceError):
            errors[i] = str(result)
        else:
            traces[i] = result
            _traces().put(found[i].key, result)  # type: ignore[union-attr]
    return traces


def _compare(trace1: Trace, trace2: Trace, min_group_size: int, progress: Progress) -> Comparison:
    key = (trace1.digest, trace2.digest, min_group_size)
    comparison = _comparisons().get(key)
    if comparison is None:

        def report(stage: str, fraction: float) -> None:
            progress.update(0.7 + 0.3 * fraction, f"{COMPARE_STAGES.get(stage, stage)}…")

        comparison = compare(trace1, trace2, min_group_size=min_group_size, progress=report)
        _comparisons().put(key, comparison)
    return comparison


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


def require_comparison(view: View) -> Comparison:
    """For the analysis pages: the comparison, or a pointer to the home page and stop."""
    analysis = analyse(view)
    for side, error in enumerate(analysis.errors, start=1):
        if error:
            st.error(f"Trace {side}: {md_text(error)}")
    if analysis.comparison is None:
        st.info("Pick two traces on the home page first.")
        link(PAGES["home"], "Go to the home page", view)
        st.stop()
    return analysis.comparison


# --- page helpers --------------------------------------------------------------------------------------


def setup_page(title: str) -> None:
    st.set_page_config(layout="wide", page_title="Fusion Explorer", page_icon=":material/compare_arrows:")
    st.title(title)


@contextmanager
def page_guard() -> Iterator[None]:
    """Show a failure as a short message in place of a traceback; bad input keeps its own message."""
    try:
        yield
    except TraceError as exc:
        st.error(str(exc))
    except Exception as exc:
        log.exception("page failed")
        st.error(f"Something went wrong drawing this page: {type(exc).__name__}: {str(exc)[:300]}")


def link(page: str, label: str, view: View, **changes: Any) -> None:
    """A link to another page carrying the view (plus `changes`) in its query string."""
    params = view.with_(**changes).to_params()
    try:
        st.page_link(page, label=label, query_params=params)
    except st.errors.StreamlitAPIException:  # a page run on its own (tests) does not know its siblings
        st.markdown(f"[{label}](/{_url_path(page)}?{urlencode(params)})")


def _url_path(page: str) -> str:
    stem = Path(page).stem
    return "" if page == PAGES["home"] else stem.split("_", 1)[-1]


def sidebar(view: View, comparison: Comparison | None) -> None:
    """Which traces are shown and the link that reproduces this page."""
    with st.sidebar:
        if comparison is not None:
            for side in (1, 2):
                trace = comparison.trace(side)
                st.markdown(f":{side_badge(side)}[**Trace {side}**] {md_text(trace.label)}")
        st.caption("Link to this view")
        st.code(share_url(view), language=None, wrap_lines=True)


def finding(comparison: Comparison, mapping: FusionMapping) -> str:
    """One fusion mapping as a sentence (markdown): which side runs one kernel for which sequence."""
    fused, unfused = mapping.fused_trace, 3 - mapping.fused_trace
    sequence = " → ".join(f"`{t}`" for t in mapping.unfused_sequence)
    return (
        f":{side_badge(fused)}[**{md_text(comparison.trace(fused).label)}**] (trace {fused}) runs one "
        f"`{mapping.fused_kernel_type}` kernel where :{side_badge(unfused)}[**{md_text(comparison.trace(unfused).label)}**] "
        f"(trace {unfused}) runs {sequence}"
    )


def ink_on(colour: str) -> str:
    """Black or white text, whichever reads better on the hex `colour`."""
    r, g, b = (int(colour.lstrip("#")[i : i + 2], 16) for i in (0, 2, 4))
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "white"


def side_badge(side: int) -> str:
    """Streamlit colour name closest to the side colour, for inline markdown."""
    return "red" if side == 1 else "green"


def plot(fig: go.Figure, name: str, **kwargs: Any) -> Any:
    """Draw a plotly figure; the toolbar's camera saves it as `<name>.png`."""
    config = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "filename": name, "scale": 2}}
    return st.plotly_chart(fig, config=config, **kwargs)


def ms(us: float) -> str:
    """Microseconds as a readable millisecond figure."""
    return f"{us / 1000:,.3f} ms" if abs(us) < 10_000 else f"{us / 1000:,.1f} ms"


def ratio_text(value: float | None) -> str:
    return "—" if value is None or value != value else f"{value:.2f}×"
