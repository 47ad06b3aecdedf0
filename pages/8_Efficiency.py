"""Efficiency: FLOPs, bytes, TFLOP/s, TB/s and % of peak of the op calls on both traces, on one roofline and side
by side; a point or a row opens the op on the Ops page."""

from __future__ import annotations

import streamlit as st

import ui.widgets as ui
from fusion.comparison.result import Comparison
from fusion.efficiency.rates import percent_text
from ui import charts, tables, text
from ui.state import EFFICIENCY_SORTS, EFFICIENCY_TABS, PAGES, View

TABLE_ROWS = 500
NUMBERS = {
    c: st.column_config.NumberColumn(format="%.3f")
    for c in ("time (ms)", "time (ms) 1", "time (ms) 2", "saving (ms)", "TB/s")
}
RATE_WIDTH = 56
"""Pixels per rate column of the aligned table, so both sides' twelve numbers fit a 1280 px screen."""
RATES = {
    f"{what} {side}": st.column_config.NumberColumn(
        label=f"{short} {side}", help=f"trace {side}'s {what}", width=RATE_WIDTH, format=number_format
    )
    for what, short, number_format in (
        ("% of peak", "% peak", None),
        ("% of bandwidth", "% BW", None),
        ("TFLOP/s", "TFLOP/s", None),
        ("TB/s", "TB/s", "%.3f"),
    )
    for side in (1, 2)
}
SORT_LABELS = {
    "saving": "time a side would save at the other's efficiency",
    "gap": "time gap",
    "time1": "trace 1's time",
    "time2": "trace 2's time",
}
TAB_LABELS = {
    "aligned": "Side by side (aligned op calls)",
    "1": "Trace 1's op signatures",
    "2": "Trace 2's op signatures",
}


def open_op(view: View, op: str) -> None:
    """The Ops page showing `op` (the link keeps every other part of the view)."""
    shown = view.with_(op=op)
    ui.set_view(shown)
    st.switch_page(PAGES["ops"], query_params=shown.to_params())


def gpus(comparison: Comparison) -> None:
    """Each side's GPU, the table row its peaks come from (or why there is none) and how much time is rated."""
    efficiency = comparison.efficiency
    for gpu, coverage, column in zip(efficiency.gpus, efficiency.coverage, st.columns(2)):
        with column:
            st.markdown(ui.side_name(comparison, gpu.side))
            peaks = f"peaks of {gpu.peaks_row}, {gpu.hbm_tb_s} TB/s" if gpu.peaks_row else "no peaks"
            st.caption(text.md(f"{gpu.gpu} · {peaks}"))
            share = coverage["rated_share"]
            cells = st.columns(2)
            cells[0].metric("Op calls rated", f"{coverage['rated_calls']:,} of {coverage['op_calls']:,}")
            cells[1].metric(
                "Kernel time rated",
                percent_text(100 * share) if share is not None else "—",
                help="Share of the compared kernel time in op calls whose FLOPs and bytes are counted",
            )
    for note in efficiency.notes:
        st.info(text.md(note))


def roofline(view: View, comparison: Comparison) -> None:
    efficiency = comparison.efficiency
    labels = (comparison.trace1.label, comparison.trace2.label)
    bandwidths = tuple(g.hbm_tb_s for g in efficiency.gpus)
    figure = charts.roofline(labels, (efficiency.signatures1, efficiency.signatures2), bandwidths)
    st.caption(
        "One point per op signature (op, shapes, dtypes), its area by kernel time; each GPU's ceilings: its "
        "bandwidth times the intensity, up to its matrix peak (solid) and vector peak (dotted). Zero-FLOP work "
        "(copies) has no place on it. Pick a point to open its op on the Ops page."
    )
    event = ui.plot(figure, "roofline", key="roofline", on_select="rerun", selection_mode="points")
    points = event.selection.points if event is not None else []
    if points and points[0].get("customdata"):
        open_op(view, str(points[0]["customdata"][0]))


def table(view: View, comparison: Comparison) -> None:
    efficiency = comparison.efficiency
    left, right = st.columns([2, 2])
    ui.bind("efficiency_tab", view.etab)
    left.radio(
        "Table",
        EFFICIENCY_TABS,
        key="efficiency_tab",
        format_func=TAB_LABELS.get,
        horizontal=True,
        on_change=lambda: ui.set_view(ui.session_view().with_(etab=st.session_state["efficiency_tab"])),
    )
    if view.etab == "aligned":
        ui.bind("efficiency_sort", view.esort)
        right.selectbox(
            "Order by",
            EFFICIENCY_SORTS,
            key="efficiency_sort",
            format_func=SORT_LABELS.get,
            on_change=lambda: ui.set_view(ui.session_view().with_(esort=st.session_state["efficiency_sort"])),
        )
        rows = tables.efficiency_rows(efficiency.aligned, view.esort)
    else:
        rows = tables.signature_rows(efficiency.signatures(int(view.etab)))
    shown = rows.head(TABLE_ROWS)
    ops = shown["op"].tolist()
    st.caption("Click a column to sort by it; pick a row to open its op on the Ops page.")
    picked_rows = ui.table(
        shown,
        hide_index=True,
        column_config=NUMBERS | RATES,
        key="efficiency_table",
        on_select="rerun",
        selection_mode="single-row",
    )
    if picked_rows.selection.rows:
        open_op(view, ops[picked_rows.selection.rows[0]])
    if len(rows) > TABLE_ROWS:
        st.caption(f"The first {TABLE_ROWS:,} of {len(rows):,} rows; all are in the JSON export (op_efficiency).")


def findings(comparison: Comparison) -> None:
    links = comparison.efficiency.findings
    if not links:
        return
    st.subheader("What the calls of the findings reach")
    for link in links:
        mapping = comparison.mappings[link.finding]
        st.markdown(f"- {ui.finding(comparison, mapping)}: {text.md(link.text)}")


with ui.page("Efficiency") as shown:
    view, comparison = shown.view, shown.comparison
    efficiency = comparison.efficiency
    if not efficiency.coverage or not any(c["op_calls"] for c in efficiency.coverage):
        st.info(
            "No op calls to rate: the traces record no CPU ops around their kernel launches (graph replays have "
            "none; a graph-capture trace ties them to their ops, see the home page)."
        )
    else:
        st.caption(
            "FLOPs and minimum bytes of each op call from the shapes its op recorded, over the kernel time of its "
            "kernels; conventions in docs/efficiency.md."
        )
        gpus(comparison)
        roofline(view, comparison)
        table(view, comparison)
        findings(comparison)
