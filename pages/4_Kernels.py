"""Kernels: each kernel name next to its counterpart on the other trace, or one trace's names with type, count and time."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

import ui.widgets as ui
from fusion.comparison.result import Comparison
from fusion.model.trace import Trace
from ui import charts, data, tables, text
from ui.state import KERNEL_TABS, View

MAX_ROWS = 5000
TIME = st.column_config.NumberColumn(format="%.3f")


def tab_name(comparison: Comparison, tab: str) -> str:
    if tab == "joined":
        return "Side by side"
    return f"Trace {tab}: {text.label(comparison.trace(int(tab)).label)}"


def choose(view: View, comparison: Comparison) -> tuple[str, str]:
    """Which view and filter, both from and into the link."""
    ui.bind("kernel_tab", view.tab)
    tab = st.segmented_control(
        "Show",
        KERNEL_TABS,
        key="kernel_tab",
        required=True,
        format_func=lambda t: tab_name(comparison, t),
        on_change=lambda: ui.set_view(ui.session_view().with_(tab=st.session_state["kernel_tab"] or "joined")),
    )
    ui.bind("name_filter", view.q)
    query = st.text_input(
        "Filter names",
        key="name_filter",
        placeholder="substring, e.g. gemm",
        on_change=lambda: ui.set_view(ui.session_view().with_(q=st.session_state["name_filter"].strip()[:200])),
    )
    return tab or "joined", query.strip()


def type_share(trace: Trace, side: int) -> go.Figure:
    per_type = trace.names.groupby("type", observed=True)["time_us"].sum().sort_values()
    fig = go.Figure(
        go.Bar(
            x=per_type.to_numpy() / 1000,
            y=[text.plotly(t) for t in per_type.index],
            orientation="h",
            marker_color=[charts.type_color(t) for t in per_type.index],
            hovertemplate="%{y}: %{x:,.3f} ms<extra></extra>",
        )
    )
    fig.update_layout(height=120 + 22 * len(per_type), xaxis_title=f"trace {side} kernel time (ms)")
    return fig


def limited(table, what: str):
    if len(table) > MAX_ROWS:
        st.caption(f"Showing {MAX_ROWS:,} of {len(table):,} {what}.")
    return table.head(MAX_ROWS)


def show_joined(comparison: Comparison, query: str) -> None:
    table, read = data.derived(comparison, "counterparts", tables.counterparts)
    total = len(comparison.pairs)
    st.caption(
        "Each kernel name next to the name it is aligned with on the other trace, over "
        + (f"all {total:,} pairs" if read == total else f"the first {read:,} of {total:,} pairs")
        + "; most time first. Kernels outside any pair are listed per trace in the other views."
    )
    table = tables.name_filter(table, ["kernel name, trace 1", "kernel name, trace 2"], query)
    ui.name_table(
        limited(table, "name pairs").reset_index(drop=True),
        ["kernel name, trace 1", "kernel name, trace 2"],
        "joined_names",
        height=520,
        column_config={"time 1 (ms)": TIME, "time 2 (ms)": TIME},
    )


def show_side(comparison: Comparison, side: int, query: str) -> None:
    trace = comparison.trace(side)
    table = tables.name_table(trace)
    other = table[table["type"] == charts.OTHER_TYPE]
    st.markdown(
        f"{ui.side_name(comparison, side)} — {len(table):,} distinct names, {len(other):,} unclassified "
        f"({other['total time (ms)'].sum():,.3f} ms)"
    )
    ui.name_table(
        limited(tables.name_filter(table, ["kernel name"], query), "names").reset_index(drop=True),
        ["kernel name"],
        f"names{side}",
        height=460,
        column_config={
            "total time (ms)": TIME,
            "mean time (µs)": st.column_config.NumberColumn(format="%.2f"),
            "share of time": st.column_config.ProgressColumn(min_value=0.0, max_value=1.0, format="percent"),
        },
    )
    ui.plot(type_share(trace, side), f"trace{side}_time_per_type")


with ui.page("Kernels") as shown:
    view, comparison = shown.view, shown.comparison
    st.caption(
        "Names no rule matched have type Other and are listed first in each trace's view. To classify them, write a "
        "TOML rules file (same format as fusion/rules.toml) and point the FUSION_RULES environment variable at it "
        "before starting the app; user rules are tried before the built-in ones."
    )
    tab, query = choose(view, comparison)
    if tab == "joined":
        show_joined(comparison, query)
    else:
        show_side(comparison, int(tab), query)
