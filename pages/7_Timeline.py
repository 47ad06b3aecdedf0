"""Timeline: a matched pair, an op call or a finding, both traces on one aligned time axis; a kernel opens its pair."""

from __future__ import annotations

import streamlit as st

import ui.widgets as ui
from fusion.comparison.result import Comparison
from fusion.report.render import headline
from fusion.report.timeline import Scope, ScopeError, Timeline, aligned_timeline
from ui import data, text
from ui import timeline as tl
from ui.state import PAGES, View

CHOICES = {"pair": "A matched pair", "call": "An op call", "finding": "A finding"}
MAX_PAIRS = 2000


def choose(view: View, comparison: Comparison) -> Scope:
    """The radio and the pickers of what to show; every choice goes into the link."""
    counts = data.derived(comparison, ("aligned op calls",), tl.aligned_calls)
    offered = ["pair"] + (["call"] if counts else []) + (["finding"] if comparison.mappings else [])
    kind = tl.shown(view, comparison)
    kind = kind if kind in offered else "pair"
    ui.bind("tl_kind", kind)
    st.radio(
        "Show",
        offered,
        key="tl_kind",
        horizontal=True,
        format_func=CHOICES.__getitem__,
        on_change=lambda: ui.set_view(ui.session_view().with_(tl=st.session_state["tl_kind"])),
    )
    if kind == "finding":
        return pick_finding(view, comparison)
    if kind == "call":
        return pick_call(view, comparison, counts)
    return pick_pair(view, comparison)


def pick_pair(view: View, comparison: Comparison) -> Scope:
    pairs = comparison.pairs.head(MAX_PAIRS)
    ids = pairs["pair_id"].astype(int).tolist()
    if not ids:
        st.info("No kernels could be paired between the traces.")
        st.stop()
    names = {
        p: f"pair {p} ({kind}): {a:,} vs {b:,} kernels, similarity {s:.2f}"
        for p, kind, a, b, s in zip(ids, pairs["kind"], pairs["size1"], pairs["size2"], pairs["similarity"])
    }
    if view.pair is not None and view.pair not in names:
        st.warning(
            f"The link names pair {view.pair}, which this comparison does not have (or lists past the first {MAX_PAIRS:,})."
        )
    ui.bind("tl_pair", view.pair if view.pair in names else ids[0])
    st.selectbox(
        "Pair",
        ids,
        key="tl_pair",
        format_func=names.__getitem__,
        on_change=lambda: ui.set_view(ui.session_view().with_pair(int(st.session_state["tl_pair"])).with_(tl="pair")),
    )
    return Scope("pair", int(st.session_state["tl_pair"]))


def pick_call(view: View, comparison: Comparison, counts: dict[str, int]) -> Scope:
    """An op (by time gap, as the Ops page lists them) and one of its aligned calls."""
    ops = list(dict.fromkeys(o for o in comparison.op_table["op"].astype(str) if o in counts)) or list(counts)
    op = view.op if view.op in counts else ops[0]
    ui.bind("tl_op", op)
    cells = st.columns([3, 1])
    cells[0].selectbox(
        "Op",
        ops,
        key="tl_op",
        format_func=lambda o: f"{o} ({counts[o]:,} aligned calls)",
        on_change=lambda: ui.set_view(ui.session_view().with_(op=st.session_state["tl_op"], call=1, tl="call")),
    )
    ui.bind("tl_call", min(view.call or 1, counts[op]))
    cells[1].number_input(
        "Call",
        min_value=1,
        max_value=counts[op],
        key="tl_call",
        on_change=lambda: ui.set_view(ui.session_view().with_(call=int(st.session_state["tl_call"]), tl="call")),
        help="The n-th aligned call of the op (in trace 1's order)",
    )
    return Scope("op", op, call=int(st.session_state["tl_call"]))


def pick_finding(view: View, comparison: Comparison) -> Scope:
    numbers = list(range(1, len(comparison.mappings) + 1))
    titles = {
        n: f"{n}. " + headline(m.detector, m.fused_trace, m.unfused_sequence, m.fused_kernel_type)
        for n, m in zip(numbers, comparison.mappings)
    }
    ui.bind("tl_finding", view.finding if view.finding in titles else 1)
    st.selectbox(
        "Finding",
        numbers,
        key="tl_finding",
        format_func=titles.__getitem__,
        on_change=lambda: ui.set_view(
            ui.session_view().with_(finding=int(st.session_state["tl_finding"]), tl="finding")
        ),
    )
    return Scope("finding", int(st.session_state["tl_finding"]))


def summary(timeline: Timeline) -> None:
    cells = st.columns(4)
    for side, cell in zip((1, 2), cells):
        cell.metric(f"Kernels, trace {side}", f"{len(timeline.lane(side).rows):,}")
    cells[2].metric("Aligned kernel pairs", f"{len(timeline.links):,}")
    cells[3].metric("Units started together", f"{len(timeline.units):,}")
    st.caption(
        text.md(
            f"{timeline.scope}. Each matched unit (group pair, op call or cited occurrence) starts at once on both "
            f"traces; between units each trace keeps its own clock, and the one that got there sooner waits "
            f"({len(timeline.gaps):,} waits, pale bars). Drag to zoom, double-click to reset; click a kernel to "
            "open it in its aligned pair."
        )
    )


def open_clicked(view: View, comparison: Comparison, state: object) -> None:
    """A click on a kernel opens its drill-down (its pair on the Groups page, else its name on the Kernels page)."""
    points = getattr(getattr(state, "selection", None), "points", None) or []
    kernel = next((k for k in map(tl.clicked, points) if k is not None), None)
    if kernel is None:
        return
    page, target = tl.drill_down(view, kernel, comparison)
    ui.set_view(target)
    st.switch_page(PAGES[page], query_params=target.to_params())


with ui.page("Timeline") as shown:
    view, comparison = shown.view, shown.comparison
    scope = choose(view, comparison)
    try:
        timeline = data.derived(comparison, ("aligned timeline", scope), lambda c: aligned_timeline(c, scope))
    except ScopeError as exc:
        st.warning(text.md(exc))
        st.stop()
    summary(timeline)
    figure = data.derived(comparison, ("timeline figure", scope), lambda c: tl.figure(timeline, c))
    state = ui.plot(figure, "aligned_timeline", key="timeline_chart", on_select="rerun", selection_mode="points")
    open_clicked(view, comparison, state)
    ui.perfetto_button(comparison, scope, "timeline_perfetto")
