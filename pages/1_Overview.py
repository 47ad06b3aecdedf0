"""Overview: per kernel type, count and time on both traces, and their ratios on a log scale."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

import appstate as app
from fusion.result import Comparison

ONE_SIDED_FACTOR = 4.0  # one-sided types sit this many times beyond the largest finite ratio


def side_by_side(comparison: Comparison, stats: pd.DataFrame, what: str, scale: float, unit: str) -> go.Figure:
    fig = go.Figure()
    for side in (1, 2):
        values = stats[f"trace{side}_{what}"] * scale
        fig.add_bar(
            x=stats.index,
            y=values,
            name=f"Trace {side}: {comparison.trace(side).label}",
            marker_color=app.SIDE_COLORS[side],
            hovertemplate=f"%{{x}}<br>trace {side}: %{{y:,.3f}} {unit}<extra></extra>",
        )
    fig.update_layout(barmode="group", yaxis_title=unit, legend=dict(orientation="h", y=1.12), margin=dict(t=40))
    return fig


def ratio_chart(stats: pd.DataFrame, column: str, title: str) -> go.Figure:
    """Trace 1 / trace 2 per type on a log axis; one-sided types sit at a capped value, labelled."""
    ratios = stats[column].astype(float)
    finite = ratios[np.isfinite(ratios) & (ratios > 0)]
    high = float(finite.max()) if len(finite) else 1.0
    low = float(finite.min()) if len(finite) else 1.0
    cap_high, cap_low = max(high, 1.0) * ONE_SIDED_FACTOR, min(low, 1.0) / ONE_SIDED_FACTOR
    only = stats["only_in"].astype(int)
    shown = ratios.where(only == 0, np.where(only == 1, cap_high, cap_low))
    notes = np.where(only == 1, "only in trace 1", np.where(only == 2, "only in trace 2", ""))
    fig = go.Figure()
    fig.add_hline(y=1.0, line_dash="dot", line_color="#888")
    fig.add_scatter(
        x=stats.index,
        y=shown,
        mode="markers+text",
        text=notes,
        textposition="top center",
        marker=dict(
            size=14,
            color=[app.TYPE_COLORS.get(t, "#999") for t in stats.index],
            symbol=np.where(only == 1, "triangle-up", np.where(only == 2, "triangle-down", "circle")),
            line=dict(width=1, color="#333"),
        ),
        customdata=np.stack([ratios.map(app.ratio_text), notes], axis=1),
        hovertemplate="%{x}<br>trace 1 / trace 2: %{customdata[0]} %{customdata[1]}<extra></extra>",
        showlegend=False,
        cliponaxis=False,
    )
    ticks = [2.0**k for k in range(int(np.floor(np.log2(cap_low))), int(np.ceil(np.log2(cap_high))) + 1)]
    fig.update_yaxes(type="log", title=title, tickvals=ticks, ticktext=[ratio_tick(v) for v in ticks])
    fig.update_layout(margin=dict(t=30, r=60))
    return fig


def ratio_tick(value: float) -> str:
    return f"{value:g}×" if value >= 1 else f"1/{1 / value:g}"


def table(comparison: Comparison, stats: pd.DataFrame) -> pd.DataFrame:
    out = pd.DataFrame(
        {
            "trace 1 count": stats["trace1_count"].astype(int),
            "trace 2 count": stats["trace2_count"].astype(int),
            "count ratio": stats["count_ratio"],
            "trace 1 time (ms)": stats["trace1_time_us"] / 1000,
            "trace 2 time (ms)": stats["trace2_time_us"] / 1000,
            "time ratio": stats["time_ratio"],
            "only in": stats["only_in"].map({0: "", 1: "trace 1", 2: "trace 2"}),
        },
        index=stats.index,
    )
    out.index.name = "kernel type"
    return out


def page() -> None:
    view = app.current_view()
    comparison = app.require_comparison(view)
    app.sidebar(view, comparison)
    stats = comparison.type_stats
    stats = stats[(stats["trace1_count"] > 0) | (stats["trace2_count"] > 0)]
    st.caption("Ratios are trace 1 / trace 2. Above 1: trace 1 launches more (or spends more time); one-sided types are pinned at the edge.")
    left, right = st.columns(2)
    with left:
        st.subheader("Kernel count per type")
        app.plot(side_by_side(comparison, stats, "count", 1.0, "kernels"), "kernel_count_per_type")
        st.subheader("Count ratio (log)")
        app.plot(ratio_chart(stats, "count_ratio", "count ratio"), "count_ratio")
    with right:
        st.subheader("Kernel time per type")
        app.plot(side_by_side(comparison, stats, "time_us", 1e-3, "ms"), "kernel_time_per_type")
        st.subheader("Time ratio (log)")
        app.plot(ratio_chart(stats, "time_ratio", "time ratio"), "time_ratio")
    st.subheader("Per type")
    st.dataframe(
        table(comparison, stats),
        column_config={
            "count ratio": st.column_config.NumberColumn(format="%.3f"),
            "time ratio": st.column_config.NumberColumn(format="%.3f"),
            "trace 1 time (ms)": st.column_config.NumberColumn(format="%.3f"),
            "trace 2 time (ms)": st.column_config.NumberColumn(format="%.3f"),
        },
    )
    differing = [t for t in stats.index if stats.loc[t, "trace1_count"] != stats.loc[t, "trace2_count"]]
    if differing:
        st.subheader("Where counts differ")
        cols = st.columns(min(len(differing), 6))
        for i, kernel_type in enumerate(differing):
            with cols[i % len(cols)]:
                app.link(app.PAGES["groups"], f"{kernel_type} → groups", view, type=kernel_type, pair=None, w1=None, w2=None)


app.setup_page("Overview")
with app.page_guard():
    page()
