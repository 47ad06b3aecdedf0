"""Overview: per kernel type, count and time on both traces, and their ratios on a log scale."""

from __future__ import annotations

import streamlit as st

import ui.widgets as ui
from fusion.report.efficiency import top_gaps
from fusion.result import COUNT, COUNT_RATIO, TIME_RATIO, TIME_US
from ui import charts, tables, text

with ui.page("Overview") as shown:
    view, comparison = shown.view, shown.comparison
    stats = comparison.type_stats
    labels = (comparison.trace1.label, comparison.trace2.label)
    st.caption(
        "Ratios are trace 1 / trace 2 on a log axis from ½× to 2× at least: above 1, trace 1 launches more "
        "(or spends more time). Types found on one side only sit on the outermost tick."
    )
    left, right = st.columns(2)
    with left:
        st.subheader("Kernel count per type")
        ui.plot(charts.side_by_side(labels, stats, COUNT, 1.0, "kernels"), "kernel_count_per_type")
        st.subheader("Count ratio")
        ui.plot(charts.ratio_chart(stats, COUNT_RATIO, "trace 1 / trace 2 kernels"), "count_ratio")
    with right:
        st.subheader("Kernel time per type")
        ui.plot(charts.side_by_side(labels, stats, TIME_US, 1e-3, "ms"), "kernel_time_per_type")
        st.subheader("Time ratio")
        ui.plot(charts.ratio_chart(stats, TIME_RATIO, "trace 1 / trace 2 time"), "time_ratio")
    st.subheader("Per type")
    ui.table(
        tables.type_table(stats),
        column_config={
            c: st.column_config.NumberColumn(format="%.3f") for c in ("trace 1 time (ms)", "trace 2 time (ms)")
        },
    )
    by_phase = tables.phase_counts(comparison)
    if not by_phase.empty:
        st.subheader("Per type and phase")
        st.caption(
            "Each phase compared on its own: both traces' kernel counts and, where both record steps, "
            "the ratio per step (so 4 prefill steps compare with 1)."
        )
        ui.table(by_phase)
    gaps = top_gaps(comparison)
    if not gaps.empty:
        st.subheader("Largest efficiency gaps")
        st.caption("Aligned op calls where a side would save the most time at the other side's roofline efficiency.")
        st.markdown("\n".join(f"{n}. {text.md(line)}" for n, line in enumerate(gaps["text"], start=1)))
        ui.link("efficiency", "All ops on the roofline →", view)
    differing = tables.differing_types(stats)
    if differing:
        st.subheader("Where counts differ")
        st.caption("Each link lists the pairs (graph-launch groups or stream windows) where that type's count differs.")
        cells = st.columns(min(len(differing), 6))
        for i, kernel_type in enumerate(differing):
            with cells[i % len(cells)]:
                ui.link("groups", f"{kernel_type} → pairs", view.with_type(kernel_type))
