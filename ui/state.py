"""The view state: everything that reproduces what a page shows, and its round trip through the URL.

No streamlit here (tested as plain Python). A link is parsed leniently but never silently: a value
that cannot be used is dropped and named in `Link.problems`, so the page can say the link is damaged.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusion import settings
from fusion.cache.store import is_digest
from fusion.classify.names import KERNEL_TYPES
from fusion.model.phases import ALL as ALL_PHASES
from fusion.model.phases import PHASES

DEFAULT_MIN_GROUP_SIZE = 50
SOURCE_KEYS = ("sample", "t1", "t2", "p1", "p2", "bpair")
"""`bpair` names a pair of the batch `batch`; the batch itself stays in the view, so its page can be reopened."""
EFFICIENCY_TABS = ("aligned", "1", "2")
"""The Efficiency page's tables: the aligned op calls side by side, or one trace's op signatures."""
EFFICIENCY_SORTS = ("saving", "gap", "time1", "time2")
"""How the Efficiency page's table is ordered: the time a side would save at the other's efficiency, the time
gap, or one side's time."""
KERNEL_TABS = ("joined", "1", "2")
"""The Kernels page's views: names side by side with their counterparts, or one trace's names."""
BATCH_STATUSES = ("ok", "failed")
"""The Batch page's status filter: pairs compared, or pairs that failed."""
TIMELINE_VIEWS = ("pair", "call", "finding")
"""What the Timeline page shows: a matched pair, one aligned call of an op, or one finding's cited windows."""
MAX_SAMPLE_NAME = 64
MAX_FILTER = 200
MAX_LABEL = 80
MAX_OP = 300
"""An op name in a link (aten::_scaled_dot_product_flash_attention_for_cpu is 48); longer is no op name."""
_SAMPLE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

PAGES = {
    "home": "app.py",
    "overview": "pages/1_Overview.py",
    "fusion": "pages/2_Fusion.py",
    "groups": "pages/3_Groups.py",
    "kernels": "pages/4_Kernels.py",
    "ops": "pages/5_Ops.py",
    "efficiency": "pages/8_Efficiency.py",
    "batch": "pages/6_Batch.py",
    "timeline": "pages/7_Timeline.py",
}
PAGE_TITLES = {
    "home": "Home",
    "overview": "Overview",
    "fusion": "Fusion",
    "groups": "Groups",
    "kernels": "Kernels",
    "ops": "Ops",
    "efficiency": "Efficiency",
    "batch": "Batch",
    "timeline": "Timeline",
}


SAMPLES_DIR = Path(__file__).resolve().parents[1] / "sample_traces"
NOT_ALLOWED = "not under an allowed folder (this server's working directory, sample_traces/ or FUSION_TRACE_ROOTS)"


def server_path(value: str) -> Path | None:
    """A server path a local user or a link names, resolved (symlinks followed), when it lies under an allowed folder:
    the working directory, the bundled samples, FUSION_TRACE_ROOTS; else None. Decided from the path's text and the
    folders alone, before anything is opened, so the answer never tells whether the file exists."""
    resolved = Path(os.path.realpath(Path(value).expanduser()))
    roots = [Path.cwd(), SAMPLES_DIR, *settings.trace_roots()]
    return resolved if any(resolved.is_relative_to(os.path.realpath(root)) for root in roots) else None


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
    tab: str = "joined"
    q: str = ""
    phase: str = ALL_PHASES
    """The phase compared (fusion.model.phases.PHASES); 'all' compares every kernel."""
    keep: bool = False
    """Keep the kernels without a launch event in the comparison (compare's keep_unlaunched)."""
    op: str | None = None
    """The op the Ops page shows (a canonical op as in the op table), only ever looked up and shown as text."""
    tl: str | None = None
    """What the Timeline page shows (TIMELINE_VIEWS); None: what the link names (a finding, an op), else a pair."""
    call: int | None = None
    """The aligned call of `op` the Timeline page shows (1 = the first)."""
    finding: int | None = None
    """The finding the Timeline page shows: its number in the comparison's findings (1 = the first)."""
    batch: str | None = None
    bp: str | None = None
    bpair: int | None = None
    bq: str = ""
    bs: str | None = None
    c1: str | None = None
    c2: str | None = None
    """Uploaded graph-capture traces of trace 1 and 2 (store digests, like t1/t2); they stay when a side's trace
    is uploaded again, and apply to uploads and server paths."""
    etab: str = EFFICIENCY_TABS[0]
    esort: str = EFFICIENCY_SORTS[0]

    def has_sources(self) -> bool:
        return any((self.sample, self.t1, self.t2, self.p1, self.p2)) or self.bpair is not None

    def label(self, side: int) -> str | None:
        return self.l1 if side == 1 else self.l2

    def with_(self, **changes: Any) -> View:
        return dataclasses.replace(self, **changes)

    def with_type(self, kernel_type: str | None) -> View:
        """A new type filter: the selected pair and evidence windows belonged to the old list, so they go."""
        return self.with_(type=kernel_type, pair=None, w1=None, w2=None)

    def with_pair(self, pair: int | None, w1: tuple[int, int] | None = None, w2: tuple[int, int] | None = None) -> View:
        """Another pair: evidence windows name kernels of one pair, so they are kept only when given with it."""
        return self.with_(pair=pair, w1=w1, w2=w2)

    def with_phase(self, phase: str) -> View:
        """Another phase is another comparison: its pair ids, kernel windows and findings differ, so they go."""
        return self.with_pair(None).with_(phase=phase, call=None, finding=None)

    def with_keep(self, keep: bool) -> View:
        """Keeping the unlaunched kernels is another comparison: its pair ids and kernel windows differ."""
        return self.with_pair(None).with_(keep=keep)

    def with_min_group_size(self, mgs: int) -> View:
        """Groups change with the size threshold, so pair ids, windows and findings no longer apply."""
        return self.with_pair(None).with_(mgs=mgs, finding=None)

    def with_sources(self, **changes: Any) -> View:
        """Only the given inputs; labels, selections and windows of the old comparison no longer apply."""
        cleared = dict.fromkeys((*SOURCE_KEYS, "l1", "l2", "op", "call", "finding")) | {
            "swap": False,
            "phase": ALL_PHASES,
        }
        return dataclasses.replace(self.with_type(None), **{**cleared, **changes})

    def swapped(self) -> View:
        """Trace 1 and trace 2 exchanged; a selected pair's ids refer to the old order, so it is dropped."""
        tab = {"1": "2", "2": "1"}.get(self.tab, self.tab)
        base = self.with_pair(None).with_(l1=self.l2, l2=self.l1, tab=tab, finding=None)
        if self.sample or self.bpair is not None:
            return base.with_(swap=not self.swap)
        return base.with_(t1=self.t2, t2=self.t1, p1=self.p2, p2=self.p1, c1=self.c2, c2=self.c1)

    def to_params(self) -> dict[str, str]:
        params: dict[str, str] = {}
        for key in (
            "sample",
            "t1",
            "t2",
            "p1",
            "p2",
            "l1",
            "l2",
            "type",
            "q",
            "op",
            "tl",
            "batch",
            "bp",
            "bq",
            "bs",
            "c1",
            "c2",
        ):
            value = getattr(self, key)
            if value:
                params[key] = value
        if self.mgs != DEFAULT_MIN_GROUP_SIZE:
            params["mgs"] = str(self.mgs)
        if self.swap:
            params["swap"] = "1"
        if self.keep:
            params["keep"] = "1"
        if self.pair is not None:
            params["pair"] = str(self.pair)
        if self.bpair is not None:
            params["bpair"] = str(self.bpair)
        for key in ("call", "finding"):
            number = getattr(self, key)
            if number is not None:
                params[key] = str(number)
        for key in ("w1", "w2"):
            window = getattr(self, key)
            if window:
                params[key] = f"{window[0]}-{window[1]}"
        if self.tab != "joined":
            params["tab"] = self.tab
        if self.phase != ALL_PHASES:
            params["phase"] = self.phase
        if self.etab != EFFICIENCY_TABS[0]:
            params["etab"] = self.etab
        if self.esort != EFFICIENCY_SORTS[0]:
            params["esort"] = self.esort
        return params


@dataclass(frozen=True)
class Link:
    """A parsed query string: the view, and the names of the values that had to be dropped."""

    view: View
    problems: tuple[str, ...] = ()


def parse(params: Mapping[str, str]) -> Link:
    """The view a query string names; a value that cannot be used is dropped and reported, never trusted."""
    problems: list[str] = []

    def keep(key: str, value: Any, ok: bool) -> Any:
        if params.get(key) and not ok:
            problems.append(key)
            return None
        return value

    digests = {key: keep(key, params.get(key) or None, is_digest(params.get(key))) for key in ("t1", "t2", "c1", "c2")}
    paths = {key: None if settings.hosted() else params.get(key) or None for key in ("p1", "p2", "bp")}
    sample = params.get("sample") or None
    batch = params.get("batch") or None
    batch = keep("batch", batch, batch is not None and is_sample_name(batch))
    bpair = _int(params.get("bpair"), 0, 10**9)
    windows = {key: keep(key, _window(params.get(key)), _window(params.get(key)) is not None) for key in ("w1", "w2")}
    view = View(
        sample=keep("sample", sample, sample is not None and is_sample_name(sample)),
        **digests,
        **paths,
        l1=clean_label(params.get("l1")),
        l2=clean_label(params.get("l2")),
        mgs=keep("mgs", _int(params.get("mgs"), 1, 1_000_000), _int(params.get("mgs"), 1, 1_000_000) is not None)
        or DEFAULT_MIN_GROUP_SIZE,
        swap=params.get("swap") == "1",
        keep=params.get("keep") == "1",
        type=keep("type", params.get("type"), params.get("type") in KERNEL_TYPES),
        pair=keep("pair", _int(params.get("pair"), 0, 10**9), _int(params.get("pair"), 0, 10**9) is not None),
        **windows,
        tab=keep("tab", params.get("tab"), params.get("tab") in KERNEL_TABS) or "joined",
        q=keep("q", params.get("q"), len(params.get("q") or "") <= MAX_FILTER) or "",
        phase=keep("phase", params.get("phase"), params.get("phase") in PHASES) or ALL_PHASES,
        op=keep("op", params.get("op") or None, is_op_name(params.get("op") or "")),
        tl=keep("tl", params.get("tl"), params.get("tl") in TIMELINE_VIEWS),
        call=keep("call", _int(params.get("call"), 1, 10**9), _int(params.get("call"), 1, 10**9) is not None),
        finding=keep(
            "finding", _int(params.get("finding"), 1, 10**6), _int(params.get("finding"), 1, 10**6) is not None
        ),
        batch=batch,
        bpair=keep("bpair", bpair, bpair is not None and batch is not None),
        bq=keep("bq", params.get("bq"), len(params.get("bq") or "") <= MAX_FILTER) or "",
        bs=keep("bs", params.get("bs"), params.get("bs") in BATCH_STATUSES),
        etab=keep("etab", params.get("etab"), params.get("etab") in EFFICIENCY_TABS) or EFFICIENCY_TABS[0],
        esort=keep("esort", params.get("esort"), params.get("esort") in EFFICIENCY_SORTS) or EFFICIENCY_SORTS[0],
    )
    return Link(view, tuple(problems))


def is_sample_name(name: str) -> bool:
    """A bundled sample's (or a batch result's) folder name can be this (short, plain characters, no path
    separator, not `..`); anything else is not echoed back."""
    return len(name) <= MAX_SAMPLE_NAME and _SAMPLE_NAME.fullmatch(name) is not None


def is_op_name(value: str) -> bool:
    """Could this be an op name (short, printable, no line breaks)? Anything else is dropped from a link."""
    return 0 < len(value) <= MAX_OP and value.isprintable()


def clean_label(value: str | None) -> str | None:
    """A label as the user typed it, markup characters included (every place that shows it escapes it for its
    syntax: ui.text); only control characters are dropped, and it is cut to MAX_LABEL characters."""
    if not value:
        return None
    return _CONTROL.sub("", value).strip()[:MAX_LABEL] or None


def _int(value: str | None, low: int, high: int) -> int | None:
    if value is None or not value.strip().isdigit():
        return None
    number = int(value)
    return number if low <= number <= high else None


def _window(value: str | None) -> tuple[int, int] | None:
    try:
        start, stop = (int(part) for part in (value or "").split("-"))
    except ValueError:
        return None
    return (start, stop) if 0 <= start <= stop else None
