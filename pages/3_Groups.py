"""Groups: matched group pairs, filterable by kernel type; one pair's aligned kernels, timeline and composition."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import appstate as app
from fusion.classify import KERNEL_TYPES
from fusion.result import Comparison

ALL_TYPES = "All kernel types"
MAX_PAIR_ROWS = 2000
PAGE_SIZE = 500
EVIDENCE_CONTEXT = 5
OP_COLORS = {"match": "#E0E0E0", "substitute": "#F5A623", "only1": app.SIDE_COLORS[1], "only2": app.SIDE_COLORS[2]}
OP_LABELS = {"match": "same type", "substitute": "different type", "only1": "only in trace 1", "only2": "only in trace 2"}


def pair_rows(comparison: Comparison, kernel_type: str | None) -> pd.DataFrame:
    """The pairs to list: all, or those where `kernel_type`'s count differs (largest difference first)."""
    if kernel_type is None:
        return comparison.pairs
    rows = comparison.pairs_with_difference(kernel_type)
    return rows.reindex(rows["difference"].abs().sort_values(ascending=False).index)


def pair_table(rows: pd.DataFrame) -> pd.DataFrame:
    table = pd.DataFrame(
        {
            "pair": rows["pair_id"],
            "kind": rows["kind"],
            "correlation 1": rows["correlation1"],
            "correlation 2": rows["correlation2"],
            "kernels 1": rows["size1"],
            "kernels 2": rows["size2"],
            "time 1 (ms)": rows["time1_us"] / 1000,
            "time 2 (ms)": rows["time2_us"] / 1000,
            "similarity": rows["similarity"],
            "kernels differing": rows["kernels_differing"],
            "top differences": rows["top_differences"],
        }
    )
    if "difference" in rows:
        table.insert(6, "type count 1 − 2", rows["difference"])
    return table.reset_index(drop=True)


def on_table_select() -> None:
    rows = st.session_state["pairs_table"].selection.rows
    if rows:
        app.update_view(pair=int(st.session_state["listed_pairs"][rows[0]]), w1=None, w2=None)


def choose_type(view: app.View, comparison: Comparison) -> str | None:
    stats = comparison.type_stats
    differing = [t for t in KERNEL_TYPES if t in stats.index and stats.loc[t, "trace1_count"] != stats.loc[t, "trace2_count"]]
    options = [ALL_TYPES] + differing + [t for t in KERNEL_TYPES if t in stats.index and t not in differing]
    app.bind("type_filter", view.type if view.type in options else ALL_TYPES)
    choice = st.selectbox(
        "Show pairs where this kernel type's count differs",
        options,
        key="type_filter",
        on_change=lambda: app.update_view(type=None if st.session_state["type_filter"] == ALL_TYPES else st.session_state["type_filter"], pair=None, w1=None, w2=None),
        help="Types whose total count differs between the traces are listed first.",
    )
    return None if choice == ALL_TYPES else choice


def choose_pair(view: app.View, comparison: Comparison, rows: pd.DataFrame) -> int | None:
    listed = rows["pair_id"].head(MAX_PAIR_ROWS).astype(int).tolist()
    st.session_state["listed_pairs"] = listed
    st.dataframe(
        pair_table(rows.head(MAX_PAIR_ROWS)),
        key="pairs_table",
        on_select=on_table_select,
        selection_mode="single-row",
        hide_index=True,
        height=min(38 + 35 * len(listed), 320),
        column_config={
            "time 1 (ms)": st.column_config.NumberColumn(format="%.3f"),
            "time 2 (ms)": st.column_config.NumberColumn(format="%.3f"),
            "similarity": st.column_config.ProgressColumn(min_value=0.0, max_value=1.0, format="%.2f"),
        },
    )
    if len(rows) > MAX_PAIR_ROWS:
        st.caption(f"Showing the first {MAX_PAIR_ROWS:,} of {len(rows):,} pairs; filter by type to narrow down.")
    known = set(comparison.pairs["pair_id"].astype(int))
    if view.pair is not None and view.pair not in known:
        st.warning(f"The link names pair {view.pair}, which this comparison does not have.")
    options = listed + ([view.pair] if view.pair in known and view.pair not in listed else [])
    if not options:
        return None
    pairs = comparison.pairs
    names = {
        int(p): f"pair {p}: {a:,} vs {b:,} kernels, similarity {s:.2f}"
        for p, a, b, s in zip(pairs["pair_id"], pairs["size1"], pairs["size2"], pairs["similarity"])
    }
    app.bind("pair_pick", view.pair if view.pair in options else options[0])
    return st.selectbox(
        "Group pair",
        options,
        key="pair_pick",
        format_func=names.__getitem__,
        on_change=lambda: app.update_view(pair=int(st.session_state["pair_pick"]), w1=None, w2=None),
    )


def in_window(alignment: pd.DataFrame, view: app.View) -> np.ndarray:
    """Rows of the alignment inside the evidence windows named by the link."""
    marked = np.zeros(len(alignment), dtype=bool)
    for side, window in ((1, view.w1), (2, view.w2)):
        if window:
            index = alignment[f"index{side}"].to_numpy()
            marked |= (index >= window[0]) & (index < window[1])
    return marked


def visible_rows(alignment: pd.DataFrame, marked: np.ndarray) -> slice:
    """The slice of the alignment to draw: the evidence window with some context, or one page."""
    if marked.any() and st.toggle("Only the evidence window", value=True, key="evidence_only"):
        where = np.flatnonzero(marked)
        start = max(0, int(where[0]) - EVIDENCE_CONTEXT)
        return slice(start, min(len(alignment), int(where[-1]) + 1 + EVIDENCE_CONTEXT, start + PAGE_SIZE))
    pages = -(-len(alignment) // PAGE_SIZE)
    if pages <= 1:
        return slice(0, len(alignment))
    number = st.number_input(f"Page of aligned rows (of {pages})", min_value=1, max_value=pages, value=1, key="align_page")
    start = (int(number) - 1) * PAGE_SIZE
    st.caption(f"Rows {start:,}–{min(start + PAGE_SIZE, len(alignment)) - 1:,} of {len(alignment):,} aligned positions.")
    return slice(start, start + PAGE_SIZE)


def heat_strip(rows: pd.DataFrame) -> go.Figure:
    """Three lanes in one heatmap: trace 1's kernel types, the alignment op, trace 2's; blanks are gaps."""
    colours = [app.TYPE_COLORS[t] for t in KERNEL_TYPES] + list(OP_COLORS.values())
    code = {t: i for i, t in enumerate(KERNEL_TYPES)}
    op_code = {o: len(KERNEL_TYPES) + i for i, o in enumerate(OP_COLORS)}
    scale = [[v, colour] for i, colour in enumerate(colours) for v in (i / len(colours), (i + 1) / len(colours))]
    lane = [[code[t] if isinstance(t, str) else None for t in rows[f"type{side}"]] for side in (1, 2)]
    z = [lane[0], [op_code[o] for o in rows["op"]], lane[1]]
    text = [
        [hover_text(r, 1) for r in rows.itertuples()],
        [f"row {i}: {OP_LABELS[o]}" for i, o in zip(rows.index, rows["op"])],
        [hover_text(r, 2) for r in rows.itertuples()],
    ]
    fig = go.Figure(
        go.Heatmap(
            x=rows.index.to_numpy(), y=["trace 1", "alignment", "trace 2"], z=z, zmin=-0.5, zmax=len(colours) - 0.5,
            colorscale=scale, showscale=False, text=text, hovertemplate="%{text}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(height=210, margin=dict(t=10, b=30), xaxis_title="aligned position")
    return fig


def hover_text(row: object, side: int) -> str:
    name = getattr(row, f"name{side}")
    if not isinstance(name, str):
        return f"row {row.Index}: no kernel on trace {side} ({OP_LABELS[row.op]})"
    return (
        f"row {row.Index} · trace {side} kernel {getattr(row, f'index{side}')}<br>{getattr(row, f'type{side}')} · "
        f"{getattr(row, f'dur{side}'):,.2f} µs<br>{name[:120]}"
    )


def timeline(rows: pd.DataFrame, comparison: Comparison) -> go.Figure:
    """Both groups on a time axis relative to each group's first kernel; one bar per kernel."""
    fig = go.Figure()
    lanes = {side: f"trace {side}: {comparison.trace(side).label}" for side in (1, 2)}
    for kernel_type in KERNEL_TYPES:
        for side in (1, 2):
            part = rows[rows[f"type{side}"] == kernel_type]
            if part.empty:
                continue
            fig.add_bar(
                base=part[f"rel_ts{side}"],
                x=part[f"dur{side}"],
                y=[lanes[side]] * len(part),
                orientation="h",
                name=kernel_type,
                legendgroup=kernel_type,
                showlegend=side == 1 or not (rows["type1"] == kernel_type).any(),
                marker_color=app.TYPE_COLORS[kernel_type],
                customdata=np.stack([part[f"name{side}"].str.slice(0, 120), part[f"index{side}"]], axis=1),
                hovertemplate=f"%{{customdata[0]}}<br>{kernel_type} · %{{x:,.2f}} µs · starts %{{base:,.1f}} µs<br>kernel %{{customdata[1]}}<extra></extra>",
            )
    fig.update_layout(barmode="overlay", height=260, xaxis_title="µs from the group's first kernel", margin=dict(t=10), legend=dict(orientation="h", y=-0.35))
    fig.update_yaxes(categoryorder="array", categoryarray=[lanes[2], lanes[1]])
    return fig


def composition(alignment: pd.DataFrame, comparison: Comparison) -> go.Figure:
    """Per-type kernel counts of the whole pair (not just the page), stacked per side."""
    fig = go.Figure()
    lanes = [f"trace {side}: {comparison.trace(side).label}" for side in (1, 2)]
    counts = {side: alignment[f"type{side}"].value_counts() for side in (1, 2)}
    for kernel_type in KERNEL_TYPES:
        values = [int(counts[side].get(kernel_type, 0)) for side in (1, 2)]
        if any(values):
            fig.add_bar(
                y=lanes, x=values, orientation="h", name=kernel_type, marker_color=app.TYPE_COLORS[kernel_type],
                hovertemplate=f"{kernel_type}: %{{x:,}} kernels<extra>%{{y}}</extra>",
            )
    fig.update_layout(barmode="stack", height=220, xaxis_title="kernels", margin=dict(t=10), legend=dict(orientation="h", y=-0.5))
    fig.update_yaxes(categoryorder="array", categoryarray=lanes[::-1])
    return fig


def styled(rows: pd.DataFrame, marked: np.ndarray) -> object:
    table = pd.DataFrame(
        {
            "evidence": np.where(marked, "◆", ""),
            "op": rows["op"].map(OP_LABELS),
            "kernel 1": kernel_numbers(rows["index1"]),
            "type 1": rows["type1"].fillna(""),
            "dur 1 (µs)": rows["dur1"],
            "name 1": rows["name1"].fillna("").str.slice(0, 200),
            "kernel 2": kernel_numbers(rows["index2"]),
            "type 2": rows["type2"].fillna(""),
            "dur 2 (µs)": rows["dur2"],
            "name 2": rows["name2"].fillna("").str.slice(0, 200),
        },
        index=rows.index,
    )
    return (
        table.style.map(type_cell, subset=["type 1", "type 2"])
        .map(op_cell, subset=["op"])
        .format({"dur 1 (µs)": "{:,.2f}", "dur 2 (µs)": "{:,.2f}"}, na_rep="")
    )


def kernel_numbers(index: pd.Series) -> pd.Series:
    """Global kernel row numbers as text; blank where the kernel is on the other side only."""
    return index.map(lambda i: str(i) if i >= 0 else "")


def type_cell(value: object) -> str:
    if value not in app.TYPE_COLORS:
        return ""
    colour = app.TYPE_COLORS[value]
    return f"background-color: {colour}; color: {app.ink_on(colour)}"


def op_cell(value: object) -> str:
    colour = {OP_LABELS[k]: c for k, c in OP_COLORS.items()}.get(value)
    return f"background-color: {colour}; color: {app.ink_on(colour)}" if colour and value != OP_LABELS["match"] else ""


def show_pair(view: app.View, comparison: Comparison, pair_id: int) -> None:
    pair = comparison.pairs.set_index("pair_id").loc[pair_id]
    alignment = comparison.alignment(pair_id)
    cols = st.columns(5)
    cols[0].metric("Kernels, trace 1", f"{int(pair['size1']):,}")
    cols[1].metric("Kernels, trace 2", f"{int(pair['size2']):,}")
    cols[2].metric("Time, trace 1", app.ms(float(pair["time1_us"])))
    cols[3].metric("Time, trace 2", app.ms(float(pair["time2_us"])))
    cols[4].metric("Positions not matched", f"{int((alignment['op'] != 'match').sum()):,}")
    marked = in_window(alignment, view)
    if marked.any():
        st.info(f"◆ marks the {int(marked.sum())} aligned rows of the evidence window from the link.")
    st.subheader("Composition")
    app.plot(composition(alignment, comparison), f"pair_{pair_id}_composition")
    window = visible_rows(alignment, marked)
    rows = alignment.iloc[window]
    st.subheader("Aligned kernels")
    app.plot(heat_strip(rows), f"pair_{pair_id}_alignment")
    st.dataframe(styled(rows, marked[window]), height=420)
    st.subheader("Timeline")
    app.plot(timeline(rows, comparison), f"pair_{pair_id}_timeline")


def page() -> None:
    view = app.current_view()
    comparison = app.require_comparison(view)
    app.sidebar(view, comparison)
    if comparison.pairs.empty:
        st.info("No groups were matched between the traces (try a smaller minimum group size on the home page).")
        return
    kernel_type = choose_type(view, comparison)
    rows = pair_rows(comparison, kernel_type)
    if rows.empty:
        st.info(f"No matched pair has a different number of {kernel_type} kernels; showing all pairs.")
        rows = comparison.pairs
    st.caption(
        "Kind group: one correlation id (a graph launch) per side. Kind stream: kernels outside significant "
        "groups, compared in corresponding windows of each trace's kernel stream (no correlation id, shown as -1)."
    )
    pair_id = choose_pair(view, comparison, rows)
    if pair_id is not None:
        show_pair(view, comparison, int(pair_id))


app.setup_page("Groups")
with app.page_guard():
    page()
