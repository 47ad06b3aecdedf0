"""Streamlit widgets shared by the pages, and `page()`, the call every page starts with.

`page()` sets the page up (config, upload limit, style, title), reads the view from the URL (saying
so when the link is damaged), loads the comparison, draws the sidebar and turns any failure into a
short message, so the pages themselves only draw.
"""

from __future__ import annotations

import base64
import html
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from streamlit import config

from fusion import settings
from fusion.comparison.result import Comparison
from fusion.detect.op_kernels import OP_CALLS_SOURCE
from fusion.errors import ConfigError, TraceError
from fusion.model.phases import ALL as ALL_PHASES
from fusion.report import perfetto
from fusion.report import render as report
from fusion.report.timeline import Scope
from fusion.result import FusionMapping
from ui import charts, data, tables, text
from ui.state import PAGE_TITLES, PAGES, SOURCE_KEYS, View, parse

log = logging.getLogger("fusion.app")

UPLOAD_TYPES = ["json", "gz", "csv", "sqlite"]
"""File suffixes the uploaders offer: Kineto and rocprofv3 JSON (plain or .gz), rocprofv3's kernel_trace.csv,
an Nsight Systems SQLite export. The loader tells the format from the content (docs/formats.md)."""

PAGE_ICON = "🔀"
"""An emoji: the browser draws it from an inline SVG. A `:material/...:` icon is fetched from a font CDN on every
page load (a request to a third party that fails offline)."""

STYLE = """
<style>
/* Links to other views look like links (Streamlit draws page links as plain text). */
[data-testid="stMain"] [data-testid="stPageLink-NavLink"] {
  border: 1px solid #c9d3e3; border-radius: 0.4rem; padding: 0.15rem 0.6rem; background: #f3f6fb;
}
[data-testid="stMain"] [data-testid="stPageLink-NavLink"] p { color: #1f5fbf; text-decoration: underline; }
.fx-copy { border: 1px solid #c9d3e3; border-radius: 0.4rem; padding: 0.2rem 0.7rem; background: #f3f6fb; cursor: pointer; }
</style>
"""


COPY_BUTTON = """<button type="button" class="fx-copy" data-url="{url}">{label}</button>
<script>
if (!window.fxCopyLinks) {{
  window.fxCopyLinks = true;
  document.addEventListener("click", (event) => {{
    const button = event.target.closest("button.fx-copy");
    if (!button) return;
    const done = () => {{ button.textContent = "Copied"; }};
    if (navigator.clipboard && window.isSecureContext) {{
      navigator.clipboard.writeText(button.dataset.url).then(done);
    }} else {{
      const box = document.createElement("textarea");
      box.value = button.dataset.url;
      document.body.appendChild(box);
      box.select();
      document.execCommand("copy");
      box.remove();
      done();
    }}
  }});
}}
</script>"""
"""The share link's copy button: the link travels in an escaped attribute, never in the script, which one listener on
the document serves for every button (outside a secure context, where the clipboard API is missing, it copies
through a selected text area)."""


@dataclass(frozen=True)
class Shown:
    """What a page draws: the view from the URL and, on analysis pages, its comparison."""

    view: View
    comparison: Comparison | None


@contextmanager
def page(title: str, *, analysed: bool = True) -> Iterator[Shown]:
    """Every page's first call: `with page("Groups") as shown:` then draw from shown.view and shown.comparison.

    With `analysed` the comparison is loaded (or the page says why not and stops); the home page
    passes False, picks its inputs first and calls `data.analyse` itself.
    """
    st.set_page_config(layout="wide", page_title="Fusion Explorer", page_icon=PAGE_ICON)
    st.html(STYLE)
    st.title(title)
    shown = None
    with guard():
        settings.check()
        enforce_upload_limit()
        view = current_view()
        navigation(view)
        comparison = None
        if analysed:
            analysis = require_analysis(view)
            view, comparison = phase_fallback(view, analysis), analysis.comparison
            sidebar(view, analysis)
        shown = Shown(view, comparison)
    if shown is None:  # a bad setting or a failure before the page could start: its one message is shown
        st.stop()
    with guard():
        yield shown


@contextmanager
def guard() -> Iterator[None]:
    """Show a failure as a short message in place of a traceback; bad input keeps its own message."""
    try:
        yield
    except (TraceError, ConfigError) as exc:
        st.error(text.md(exc))
    except Exception as exc:
        log.exception("page failed")
        st.error(text.md(f"Something went wrong drawing this page: {type(exc).__name__}"))


def enforce_upload_limit() -> None:
    """Make FUSION_MAX_UPLOAD_MB (or the hosted default) the cap Streamlit's server enforces while receiving.

    The server reads server.maxUploadSize (MiB) on each upload request, so setting it here, before
    any uploader exists, stops an oversized upload while it streams instead of after it is buffered.
    """
    limit = settings.max_upload_mb()
    if limit is None:
        return
    mib = max(1, math.ceil(limit * 1e6 / (1 << 20)))
    if config.get_option("server.maxUploadSize") != mib:
        config.set_option("server.maxUploadSize", mib, "FUSION_MAX_UPLOAD_MB")


# --- the view in the URL ---------------------------------------------------------------------------


def current_view() -> View:
    """The view from the URL; else this session's last view (sidebar navigation drops the query); else the sample."""
    params = st.query_params.to_dict()
    if any(params.get(key) for key in params):
        link = parse(params)
        if link.problems:
            st.warning(
                "This link is damaged: the value of "
                + ", ".join(f"`{key}`" for key in link.problems)
                + " could not be used and was left out."
            )
        view = link.view
        if not view.has_sources():
            view = view.with_(**_remembered_sources(view))
    elif "view" in st.session_state:
        view = st.session_state["view"]
    else:
        view = View(sample=data.default_sample())
    set_view(view)
    return view


def _remembered_sources(view: View) -> dict[str, Any]:
    """The inputs of this session's last view, else the default sample (a link without inputs still opens).

    A remembered batch pair comes with its batch, unless the link names another batch (its pairs differ).
    """
    last = st.session_state.get("view")
    if last is None:
        return {"sample": data.default_sample()}
    kept = {key: getattr(last, key) for key in (*SOURCE_KEYS, "swap")}
    if last.bpair is not None:
        kept |= {"bpair": None} if view.batch not in (None, last.batch) else {"batch": last.batch}
    return kept


def set_view(view: View) -> None:
    """Remember the view in the session and mirror it into the URL (safe inside widget callbacks)."""
    st.session_state["view"] = view
    params = view.to_params()
    if params != st.query_params.to_dict():
        st.query_params.from_dict(params)


def session_view() -> View:
    """The view of this session's last run (for widget callbacks)."""
    return st.session_state["view"]


def bind(key: str, value: Any) -> None:
    """Make the keyed widget created next show `value` (taken from the URL) on this run."""
    st.session_state[key] = value


def share_box(view: View, key: str) -> None:
    """The link to this view in a box, with a button that copies it. A text box rather than st.code: the code
    block's highlighter is 1.5 MB of script a fresh browser fetches and compiles before the page is usable."""
    url = share_url(view)
    bind(key, url)
    st.text_input("Link to this view", key=key, help="The link that reopens this view; editing it changes nothing.")
    copy_button(url, "Copy link")


def copy_button(value: str, label: str) -> None:
    """A button that copies `value` (COPY_BUTTON); `label` is our own text."""
    st.html(COPY_BUTTON.format(url=html.escape(value, quote=True), label=label), unsafe_allow_javascript=True)


NAME_HELP = "Long names are shortened in the middle; select a row for the full name and a 'Copy full name' button."
SELECT_FOR_FULL_NAME = (
    "Names marked … are shortened in the middle. Select a row (the box at its left) to read its full name here, "
    "with a **Copy full name** button."
)
"""Said below a table with shortened names: Streamlit's table has no per-cell hover text (1.67: column help is the
header's tooltip only; streamlit/streamlit#7564), so a selected row is the way to the full name."""


NUMBER_WIDTH = "small"
"""The width of a numeric column: a count, time or ratio needs no more, so a dozen fit a laptop's screen."""


def table(frame: pd.DataFrame, **options: Any) -> Any:
    """st.dataframe with the numbers (counts, times, ratios) before the names (tables.numbers_first), each in a
    NUMBER_WIDTH column unless its column_config sets a width; a given height is an upper bound, so a filtered table of a few rows shows no blank rows
    below them."""
    if "height" in options:
        options["height"] = tables.fitted_height(len(frame), options["height"])
    config = dict(options.pop("column_config", None) or {})
    for column in tables.numeric_columns(frame):
        given = config.get(column, st.column_config.NumberColumn())
        if given is not None:  # None hides the column; a text is its label
            given = {"label": given} if isinstance(given, str) else given
            config[column] = {**given, "width": given.get("width") or NUMBER_WIDTH}
    return st.dataframe(frame, column_order=tables.numbers_first(frame), column_config=config, **options)


def name_table(frame: pd.DataFrame, names: list[str], key: str, **options: Any) -> None:
    """A table whose kernel-name columns `names` show text.short_name, after the numbers; a selected row's full
    names are shown below it, with a button that copies them."""
    shown = frame.assign(**{c: frame[c].astype(str).map(_short_names(frame[c])) for c in names})
    config = options.pop("column_config", {}) | {c: st.column_config.TextColumn(help=NAME_HELP) for c in names}
    event = table(
        shown, key=key, on_select="rerun", selection_mode="single-row", column_config=config, hide_index=True, **options
    )
    rows = event.selection.rows if event is not None else []
    if rows:
        full = "\n".join(str(frame[c].iloc[rows[0]]) for c in names)
        st.text_area("Full name" if len(names) == 1 else "Full names", full, key=f"{key}_full", disabled=True)
        copy_button(full, "Copy full name")
    elif any((shown[c] != frame[c].astype(str)).any() for c in names):
        st.caption(SELECT_FOR_FULL_NAME)


def _short_names(column: pd.Series) -> dict[str, str]:
    """Each distinct name of the column, shortened once."""
    return {name: text.short_name(name) for name in column.astype(str).unique()}


def share_url(view: View) -> str:
    """The full link to this page and view when the browser's URL is known, else a relative one."""
    query = urlencode(view.to_params())
    try:
        base = st.context.url
    except Exception:  # not every runtime (e.g. AppTest) has a browser URL
        base = None
    return f"{base}?{query}" if base else f"?{query}"


# --- links and the sidebar ---------------------------------------------------------------------------


def link(key: str, label: str, view: View) -> None:
    """A link to page `key` showing `view`; `label` is our own text (it may hold markdown)."""
    params = view.to_params()
    try:
        st.page_link(PAGES[key], label=label, query_params=params)
    except st.errors.StreamlitAPIException:  # a page run on its own (tests) does not know its siblings
        st.markdown(f"[{label}](/{page_url(key, urlencode(params))})")


def page_url(key: str, query: str = "") -> str:
    """Page `key`'s path on the server (no leading slash), with `query`: how Streamlit names a page file's URL."""
    path = "" if key == "home" else Path(PAGES[key]).stem.split("_", 1)[-1]
    return f"{path}?{query}" if query else path


def navigation(view: View) -> None:
    """The sidebar's page list (Streamlit's own is hidden: it would call the home page 'app' and drop the view)."""
    with st.sidebar:
        for key, title in PAGE_TITLES.items():
            link(key, title, view)


def sidebar(view: View, analysis: data.Analysis) -> None:
    """The phase compared, which traces are shown and the link that reproduces this page."""
    comparison = analysis.comparison
    with st.sidebar:
        st.divider()
        phase_selector(view, analysis.phases)
        for side in (1, 2):
            st.markdown(f":{side_badge(side)}[**Trace {side}**] {text.md(comparison.trace(side).label)}")
        share_box(view, "share_sidebar")


def phase_selector(view: View, phases: dict[str, tuple[int, int]]) -> None:
    """Which phase is compared: only phases both traces have kernels in, each with its steps per side."""

    def label(phase: str) -> str:
        steps = phases[phase]
        counted = f"{steps[0]:,} vs {steps[1]:,} steps" if any(steps) else "no steps recorded"
        return f"{'all phases' if phase == ALL_PHASES else phase} ({counted})"

    bind("phase_pick", view.phase if view.phase in phases else ALL_PHASES)
    st.selectbox(
        "Phase",
        list(phases),
        key="phase_pick",
        format_func=label,
        on_change=lambda: set_view(session_view().with_phase(st.session_state["phase_pick"])),
        help="Compare only the kernels of one phase (prefill, decode, forward, …), read from the traces' "
        "annotations; phases only one trace has cannot be compared.",
    )


def require_analysis(view: View) -> data.Analysis:
    """For the analysis pages: both traces and their comparison, or a pointer to the home page and stop."""
    for note in data.folder_notes():
        st.caption(text.md(note))
    analysis = data.analyse(view)
    for side, error in enumerate(analysis.errors, start=1):
        if error:
            st.error(f"Trace {side}: {text.md(error)}")
    if analysis.comparison is None:
        st.info("Pick two traces on the home page first.")
        link("home", "Go to the home page", view)
        st.stop()
    return analysis


def phase_fallback(view: View, analysis: data.Analysis) -> View:
    """The view of what is shown: when the link's phase could not be compared, say so and show all phases."""
    if analysis.phase_problem is None:
        return view
    st.warning(text.md(analysis.phase_problem))
    shown = view.with_phase(ALL_PHASES)
    set_view(shown)
    return shown


# --- drawing helpers ----------------------------------------------------------------------------------


def side_badge(side: int) -> str:
    """Streamlit colour name closest to the side colour, for inline markdown."""
    return "red" if side == 1 else "green"


def side_name(comparison: Comparison, side: int) -> str:
    """':red[**Trace 1**] label' as markdown."""
    return f":{side_badge(side)}[**{text.md(comparison.trace(side).label)}**] (trace {side})"


def picture(svg: str, alt: str, *, stretch: bool = False) -> None:
    """Draw an SVG picture of ui.charts as an image (so it can hold no link or script) through st.html, whose
    code every page has loaded for STYLE: st.image makes a fresh browser fetch and start its own image code
    first (on a shared link's home page about 0.1 s until usable and 0.25 s until idle). `stretch`: as wide
    as the page."""
    data_url = "data:image/svg+xml;base64," + base64.b64encode(svg.encode()).decode("ascii")
    width = "width:100%" if stretch else "max-width:100%"
    st.html(f'<img alt="{text.svg(alt)}" style="{width};height:auto" src="{data_url}">')


def plot(fig: go.Figure, name: str, **kwargs: Any) -> Any:
    """Draw a plotly figure with room for its toolbar; the toolbar's camera saves it as `<name>.png`."""
    config_ = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "filename": name, "scale": 2}}
    return st.plotly_chart(charts.clear_toolbar(fig), config=config_, **kwargs)


def perfetto_button(comparison: Comparison, scope: Scope, key: str) -> None:
    """Download the scope's aligned timeline (fusion.report.perfetto), written when clicked."""
    st.download_button(
        "Timeline for Perfetto (JSON)",
        lambda: perfetto.to_json(comparison, scope),
        f"{tables.file_stem(comparison)}_timeline.json",
        "application/json",
        key=key,
        on_click="ignore",
        help="Both traces on one aligned time axis, aligned kernels joined by flows, findings on their own track: "
        "opens in ui.perfetto.dev and chrome://tracing as it is.",
    )


def finding(comparison: Comparison, mapping: FusionMapping) -> str:
    """One fusion mapping as a sentence (markdown): which side runs one kernel (or, for an op's calls, fewer
    kernels) for which sequence, and where from."""
    fused, unfused = mapping.fused_trace, 3 - mapping.fused_trace
    sequence = " → ".join(text.code(t) for t in mapping.unfused_sequence)
    also = (
        f" (also doing {', '.join(text.md(c) for c in mapping.fused_components)})" if mapping.fused_components else ""
    )
    where = f" in {text.code(mapping.op)}" if mapping.op else ""
    per_call = mapping.fused_count // mapping.pattern_count if mapping.evidence_source == OP_CALLS_SOURCE else 1
    runs = (
        f"one {text.code(mapping.fused_kernel_type)} kernel"
        if per_call == 1
        else f"{per_call} kernels ({text.code(mapping.fused_kernel_type)})"
    )
    kind = f"**{kind_label(mapping.kind)}**: " if mapping.kind else ""
    return (
        f"{kind}{side_name(comparison, fused)} runs {runs}{also} where {side_name(comparison, unfused)} runs"
        f" {sequence}{where}"
    )


def kind_label(kind: str) -> str:
    """A finding's kind as a word for a page: 'extra_work' -> 'Extra work'."""
    return kind.replace("_", " ").capitalize()


def kernel_names(mapping: FusionMapping, first: int | None = None) -> str:
    """The raw kernel names behind a finding (the `first` of each side), as markdown list lines; '' when none."""
    lines = []
    labels = report.name_labels(mapping)
    for label, side, names in (
        (labels[0], mapping.fused_trace, mapping.fused_kernel_names),
        (labels[1], 3 - mapping.fused_trace, mapping.unfused_kernel_names),
    ):
        if names:
            more = f" and {len(names) - first} more" if first is not None and len(names) > first else ""
            lines.append(f"- {label} (trace {side}): " + ", ".join(text.code(n) for n in names[:first]) + more)
    return "\n".join(lines)


EVIDENCE_SOURCES = {
    "op_calls": "matched op calls",
    "groups": "matched graph-launch groups",
    "windows": "stream windows of eager kernels",
}


OP_ROW_FORMATS = {
    **{
        column: st.column_config.NumberColumn(format="%.3f")
        for column in ("time 1 (ms)", "time 2 (ms)", "gap 1 − 2 (ms)")
    },
    "time ratio": st.column_config.NumberColumn(format="%.2f"),
}


def op_rows(op_table: pd.DataFrame, **selection: Any) -> None:
    """Ops as the Fusion and Ops pages list them (tables.op_rows), with their number formats; `selection`: the
    dataframe's key, on_select and selection_mode where a row opens the op."""
    table(tables.op_rows(op_table), hide_index=True, column_config=OP_ROW_FORMATS, **selection)
