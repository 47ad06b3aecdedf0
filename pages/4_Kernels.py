"""Kernels: every kernel name per trace with its type, count and time; unclassified names first."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import appstate as app
from fusion.result import Comparison
from fusion.trace import Trace

MAX_ROWS = 5000


def name_table(trace: Trace) -> pd.DataFrame:
    """One row per distinct name; Other (no rule matched) first, then by total time."""
    names = trace.names
    table = pd.DataFrame(
        {
            "kernel name": names.index.astype(str),
            "type": names["type"].astype(str).to_numpy(),
            "rule": names["rule"].astype(str).to_numpy(),
            "count": names["count"].astype(int).to_numpy(),
            "total time (ms)": names["time_us"].to_numpy() / 1000,
            "mean time (µs)": (names["time_us"] / names["count"]).to_numpy(),
            "share of time": (names["time_us"] / (trace.kernel_time_us or 1.0)).to_numpy(),
        }
    )
    table["unclassified"] = table["type"] == app.OTHER_TYPE
    table = table.sort_values(["unclassified", "total time (ms)"], ascending=[False, False])
    return table.drop(columns="unclassified").reset_index(drop=True)


def type_share(trace: Trace, side: int) -> go.Figure:
    per_type = trace.names.groupby("type", observed=True)["time_us"].sum().sort_values()
    fig = go.Figure(
        go.Bar(
            x=per_type.to_numpy() / 1000,
            y=per_type.index.astype(str),
            orientation="h",
            marker_color=[app.TYPE_COLORS.get(str(t), "#999") for t in per_type.index],
            hovertemplate="%{y}: %{x:,.3f} ms<extra></extra>",
        )
    )
    fig.update_layout(height=120 + 22 * len(per_type), margin=dict(t=10), xaxis_title=f"trace {side} kernel time (ms)")
    return fig


def show_side(comparison: Comparison, side: int) -> None:
    trace = comparison.trace(side)
    table = name_table(trace)
    other = table[table["type"] == app.OTHER_TYPE]
    st.markdown(f":{app.side_badge(side)}[**Trace {side}**] {app.md_text(trace.label)} — {len(table):,} distinct names, {len(other):,} unclassified ({other['total time (ms)'].sum():,.3f} ms)")
    search = st.text_input("Filter names", key=f"name_filter{side}", placeholder="substring, e.g. gemm")
    if search:
        table = table[table["kernel name"].str.contains(search, case=False, regex=False)]
    if len(table) > MAX_ROWS:
        st.caption(f"Showing {MAX_ROWS:,} of {len(table):,} names.")
    st.dataframe(
        table.head(MAX_ROWS),
        hide_index=True,
        height=460,
        column_config={
            "total time (ms)": st.column_config.NumberColumn(format="%.3f"),
            "mean time (µs)": st.column_config.NumberColumn(format="%.2f"),
            "share of time": st.column_config.ProgressColumn(min_value=0.0, max_value=1.0, format="percent"),
        },
    )
    app.plot(type_share(trace, side), f"trace{side}_time_per_type")


def page() -> None:
    view = app.current_view()
    comparison = app.require_comparison(view)
    app.sidebar(view, comparison)
    st.caption(
        "Names no rule matched have type Other and are listed first. To classify them, write a TOML rules file "
        "(same format as fusion/rules.toml) and point the FUSION_RULES environment variable at it before starting the app; "
        "user rules are tried before the built-in ones."
    )
    tabs = st.tabs([f"Trace {side}: {comparison.trace(side).label}" for side in (1, 2)])
    for side, tab in zip((1, 2), tabs):
        with tab:
            show_side(comparison, side)


app.setup_page("Kernels")
with app.page_guard():
    page()
