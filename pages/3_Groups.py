"""Pairs: matched graph-launch groups and stream windows, filterable by kernel type; one pair's aligned kernels.

The drill-down: a type -> the pairs where its count differs -> that pair's kernels aligned side by side.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import ui.widgets as ui
from fusion.classify.names import KERNEL_TYPES
from fusion.comparison.result import Comparison
from fusion.report.timeline import Scope
from ui import charts, data, tables, text
from ui.state import View

ALL_TYPES = "All kernel types"
MAX_PAIR_ROWS = 2000
PAGE_SIZE = 500
EVIDENCE_CONTEXT = 5
KERNELS_ONLY, WALL_CLOCK = "kernels only (idle gaps removed)", "wall clock"
LEGEND = "".join(
    f'<span style="display:inline-block;width:0.9em;height:0.9em;background:{charts.OP_COLORS[op]};border:1px solid #999;'
    f'margin:0 0.3em 0 1em;vertical-align:middle"></span>{tables.OP_LABELS[op]}'
    for op in charts.OP_COLORS
)


def choose_type(view: View, comparison: Comparison) -> str | None:
    stats = comparison.type_stats
    differing = [t for t in KERNEL_TYPES if t in tables.differing_types(stats)]
    options = [ALL_TYPES] + differing + [t for t in KERNEL_TYPES if t in stats.index and t not in differing]
    ui.bind("type_filter", view.type if view.type in options else ALL_TYPES)

    def changed() -> None:
        choice = st.session_state["type_filter"]
        ui.set_view(ui.session_view().with_type(None if choice == ALL_TYPES else choice))

    choice = st.selectbox(
        "Show pairs where this kernel type's count differs",
        options,
        key="type_filter",
        on_change=changed,
        help="Types whose total count differs between the traces are listed first.",
    )
    return None if choice == ALL_TYPES else choice


def choose_pair(view: View, comparison: Comparison, rows: pd.DataFrame) -> int | None:
    """The pair table and the pair box: both show the view's pair (else the first listed) and both change it."""
    listed = rows["pair_id"].head(MAX_PAIR_ROWS).astype(int).tolist()
    known = set(comparison.pairs["pair_id"].astype(int))
    if view.pair is not None and view.pair not in known:
        st.warning(f"The link names pair {view.pair}, which this comparison does not have.")
    shown = view.pair if view.pair in known else (listed[0] if listed else None)
    ui.bind(
        "pairs_table",
        {"selection": {"rows": [listed.index(shown)] if shown in listed else [], "columns": [], "cells": []}},
    )

    def ticked() -> None:
        picked = st.session_state["pairs_table"]["selection"]["rows"]
        if picked:
            ui.set_view(ui.session_view().with_pair(listed[picked[0]]))

    ui.table(
        tables.pair_table(rows.head(MAX_PAIR_ROWS)),
        key="pairs_table",
        on_select=ticked,
        selection_mode="single-row",
        hide_index=True,
        height=320,
        column_config={
            "time 1 (ms)": st.column_config.NumberColumn(format="%.3f"),
            "time 2 (ms)": st.column_config.NumberColumn(format="%.3f"),
            "similarity": st.column_config.ProgressColumn(min_value=0.0, max_value=1.0, format="%.2f"),
        },
    )
    if len(rows) > MAX_PAIR_ROWS:
        st.caption(f"Showing the first {MAX_PAIR_ROWS:,} of {len(rows):,} pairs; filter by type to narrow down.")
    options = listed + ([shown] if shown is not None and shown not in listed else [])
    if not options:
        return None
    sizes = comparison.pairs.set_index("pair_id").loc[options]
    names = {
        int(p): f"pair {p} ({kind}): {a:,} vs {b:,} kernels, similarity {s:.2f}"
        for p, kind, a, b, s in zip(options, sizes["kind"], sizes["size1"], sizes["size2"], sizes["similarity"])
    }
    ui.bind("pair_pick", shown)
    return st.selectbox(
        "Pair",
        options,
        key="pair_pick",
        format_func=names.__getitem__,
        on_change=lambda: ui.set_view(ui.session_view().with_pair(int(st.session_state["pair_pick"]))),
    )


def visible_rows(alignment: pd.DataFrame, marked: np.ndarray) -> slice:
    """The slice of the alignment to draw: the evidence window with some context, or one page."""
    if marked.any() and st.toggle("Only the marked rows (and a few around them)", value=True, key="evidence_only"):
        where = np.flatnonzero(marked)
        start = max(0, int(where[0]) - EVIDENCE_CONTEXT)
        return slice(start, min(len(alignment), int(where[-1]) + 1 + EVIDENCE_CONTEXT, start + PAGE_SIZE))
    pages = -(-len(alignment) // PAGE_SIZE)
    if pages <= 1:
        return slice(0, len(alignment))
    number = st.number_input(
        f"Page of aligned rows (of {pages})", min_value=1, max_value=pages, value=1, key="align_page"
    )
    start = (int(number) - 1) * PAGE_SIZE
    st.caption(
        f"Rows {start:,}–{min(start + PAGE_SIZE, len(alignment)) - 1:,} of {len(alignment):,} aligned positions."
    )
    return slice(start, start + PAGE_SIZE)


def timeline(rows: pd.DataFrame, comparison: Comparison, kernels_only: bool) -> go.Figure:
    """Both sides on a time axis relative to the pair's first kernel; one bar per kernel, coloured by type.

    One Plotly trace per side (colours per bar), since each trace costs the server and the browser time.
    """
    fig = go.Figure()
    for side in (1, 2):
        part = rows[rows[f"dur{side}"].notna()]
        types = part[f"type{side}"].astype(str)
        fig.add_bar(
            base=tables.kernel_starts(rows, side, kernels_only).loc[part.index],
            x=part[f"dur{side}"],
            y=np.full(len(part), f"trace {side}: {text.plotly(comparison.trace(side).label)}"),
            orientation="h",
            marker_color=[charts.type_color(t) for t in types],
            customdata=np.stack(
                [
                    [text.plotly(n[:120]) for n in part[f"name{side}"]],
                    [text.plotly(t) for t in types],
                    part[f"index{side}"],
                ],
                axis=1,
            ),
            hovertemplate="%{customdata[0]}<br>%{customdata[1]} · %{x:,.2f} µs · starts %{base:,.1f} µs<br>kernel %{customdata[2]}<extra></extra>",
            showlegend=False,
        )
    axis = "µs of kernel time before it (idle gaps removed)" if kernels_only else "µs from the pair's first kernel"
    present = sorted({str(t) for side in (1, 2) for t in rows[f"type{side}"].dropna()})
    charts.type_legend(fig, present)
    fig.update_layout(barmode="overlay", height=260 + 22 * (len(present) // 6), xaxis_title=axis)
    fig.update_yaxes(autorange="reversed")
    return fig


def show_pair(view: View, comparison: Comparison, pair_id: int) -> None:
    pair = comparison.pairs.set_index("pair_id").loc[pair_id]
    alignment = comparison.alignment(pair_id)
    cells = st.columns(5)
    cells[0].metric("Kernels, trace 1", f"{int(pair['size1']):,}")
    cells[1].metric("Kernels, trace 2", f"{int(pair['size2']):,}")
    cells[2].metric("Time, trace 1", text.ms(float(pair["time1_us"])))
    cells[3].metric("Time, trace 2", text.ms(float(pair["time2_us"])))
    cells[4].metric("Positions not matched", f"{int((alignment['op'] != 'match').sum()):,}")
    marked = tables.in_window(alignment, view)
    if marked.any():
        st.info(f"◆ marks the {int(marked.sum())} aligned rows of the evidence window from the link.")
    elif view.type:  # the drill-down from a type: land on that type's rows
        marked = tables.of_type(alignment, view.type)
        if marked.any():
            st.info(
                f"◆ marks the {int(marked.sum())} aligned rows with a {text.code(view.type)} kernel on either side."
            )
    window = visible_rows(alignment, marked)
    rows = alignment.iloc[window]
    st.subheader("Aligned kernels")
    shown = (pair_id, window.start, window.stop)
    ui.picture(
        data.derived(comparison, ("alignment strip", *shown), lambda _: charts.alignment_svg(rows)),
        "Aligned kernels: each side's types and how they align",
        stretch=True,
    )
    st.html(
        f'<div style="font-size:0.85em">Middle lane: {LEGEND}. Top and bottom lanes: each kernel\'s type (the legend below the strip); '
        "blank: no kernel on that side. The axis numbers the rows of the table below, which names each kernel.</div>"
    )
    ui.name_table(
        tables.aligned_table(rows, marked[window]),
        ["kernel name, trace 1", "kernel name, trace 2"],
        key="aligned_names",
        height=420,
    )
    st.subheader("Timeline")
    if st.toggle(
        f"Draw the {len(rows):,} aligned rows' kernels on a time axis",
        key="show_timeline",
        help="One bar per kernel. Drawn on request: redrawing it for every pair costs the browser time.",
    ):
        axis = st.radio(
            "Time axis",
            [KERNELS_ONLY, WALL_CLOCK],
            index=0 if pair["kind"] == "stream" else 1,
            horizontal=True,
            key="time_axis",
        )
        kernels_only = axis == KERNELS_ONLY
        figure = data.derived(comparison, ("timeline", *shown, kernels_only), lambda c: timeline(rows, c, kernels_only))
        ui.plot(figure, f"pair_{pair_id}_timeline")
    cells = st.columns([2, 1], vertical_alignment="center")
    with cells[0]:
        ui.link("timeline", "This pair on the aligned timeline, with its findings →", view.with_(tl="pair"))
    with cells[1]:
        ui.perfetto_button(comparison, Scope("pair", pair_id), "groups_perfetto")
    st.subheader("Composition")
    ui.table(tables.composition(alignment))


with ui.page("Groups") as shown:
    view, comparison = shown.view, shown.comparison
    if comparison.pairs.empty:
        st.info("No kernels could be paired between the traces (try a smaller minimum group size on the home page).")
    else:
        st.caption(
            "A pair is either two matched graph-launch groups (one correlation id per side) or a stream window: "
            "corresponding stretches of the kernels outside such groups (eager launches; correlation shown as -1)."
        )
        kernel_type = choose_type(view, comparison)
        rows = tables.pair_rows(comparison, kernel_type)
        if rows.empty:
            st.info(f"No pair has a different number of {kernel_type} kernels; showing all pairs.")
            rows = comparison.pairs
        elif kernel_type:
            st.caption(
                f"{len(rows):,} pairs where the number of {kernel_type} kernels differs; largest difference first."
            )
        pair_id = choose_pair(view, comparison, rows)
        if pair_id is not None:
            show_pair(view, comparison, int(pair_id))
