"""Ops: the PyTorch ops that launched the kernels, their kernels and time on both traces, and one op in detail."""

from __future__ import annotations

import streamlit as st

import ui.widgets as ui
from fusion.classify.names import canonical_op
from fusion.comparison.ops import op_sequences
from fusion.comparison.result import Comparison
from fusion.detect.op_kernels import OP_CALLS_SOURCE
from fusion.report.timeline import Scope
from fusion.result import OP, FusionMapping
from ui import data, tables, text, timeline
from ui.state import View

OP_ROWS = 500
"""Ops listed, largest time gap first (all of them are in the exports)."""
MS = {c: st.column_config.NumberColumn(format="%.3f") for c in ("time (ms)", "time per call (ms)")}


def op_findings(comparison: Comparison, op: str | None = None) -> list[FusionMapping]:
    """Op-level findings (all, or those of one canonical op)."""
    found = [m for m in comparison.mappings if m.evidence_source == OP_CALLS_SOURCE]
    return [m for m in found if op is None or canonical_op(m.op) == op]


def op_list(view: View, comparison: Comparison) -> None:
    """Every op with both sides' calls, kernels per call and time, ranked by time gap; a row opens the op."""
    found = op_findings(comparison)
    if found:
        st.subheader("Ops whose calls launch different kernels")
        for number, mapping in enumerate(found):
            op = canonical_op(mapping.op)
            st.button(
                text.label(
                    f"{mapping.op}: {mapping.fused_kernel_type} on trace {mapping.fused_trace}, "
                    f"{' → '.join(mapping.unfused_sequence)} on trace {3 - mapping.fused_trace}"
                    f" ({ui.kind_label(mapping.kind).lower()}) →"
                ),
                key=f"open_op_{number}",
                on_click=lambda o=op: ui.set_view(ui.session_view().with_(op=o)),
            )
    st.subheader("Ops by time gap")
    st.caption(
        "Top-level ops in each trace's eager launches, matched by op and module; pick a row to see what "
        "each call launched. Ratio and gap are trace 1 against trace 2."
    )
    listed = comparison.op_table.head(OP_ROWS)
    ops = listed[OP].astype(str).tolist()

    def picked() -> None:
        rows = st.session_state["ops_table"]["selection"]["rows"]
        if rows:
            ui.set_view(ui.session_view().with_(op=ops[rows[0]]))

    ui.op_rows(listed, key="ops_table", on_select=picked, selection_mode="single-row")
    if len(comparison.op_table) > OP_ROWS:
        st.caption(
            text.top_of(OP_ROWS, len(comparison.op_table), "ops", "with the largest time gap")
            + "; all are in the JSON and CSV exports."
        )
    ui.perfetto_button(comparison, Scope(), "ops_perfetto")
    if comparison.op_notes:
        st.markdown("**Notes on the op comparison**")
        st.caption("\n".join(f"- {text.md(note)}" for note in comparison.op_notes))


def op_detail(view: View, comparison: Comparison, op: str) -> None:
    """One op: both sides' totals, its op-level findings, and per side the distinct kernel sequences its calls launched."""
    st.button("← All ops", on_click=lambda: ui.set_view(ui.session_view().with_(op=None)))
    rows = comparison.op_table[comparison.op_table[OP] == op]
    if rows.empty:
        st.warning(f"The op {text.code(op)} is not among these traces' launching ops.")
        return
    st.subheader(text.md(op))
    totals = tables.op_rows(rows)
    for side, column in zip((1, 2), st.columns(2)):
        with column:
            st.markdown(ui.side_name(comparison, side))
            cells = st.columns(3)
            calls = int(totals[f"calls {side}"].sum())
            cells[0].metric("Calls", f"{calls:,}")
            cells[1].metric("Kernel time", text.ms(float(totals[f"time {side} (ms)"].sum()) * 1000))
            cells[2].metric(
                "Per call", text.ms(float(totals[f"time {side} (ms)"].sum()) * 1000 / calls) if calls else "—"
            )
    for mapping in op_findings(comparison, op):
        with st.container(border=True):
            st.markdown(text.md(mapping.evidence))
            names = ui.kernel_names(mapping)
            if names:
                st.markdown(names)
            st.caption(
                text.md(
                    f"{ui.kind_label(mapping.kind)} · detector: {mapping.detector} · found in matched op calls · "
                    f"{mapping.pattern_count:,} calls, {mapping.pattern_confidence:.0%} of the op's aligned calls"
                )
            )
    if op in data.derived(comparison, ("aligned op calls",), timeline.aligned_calls):
        cells = st.columns([2, 1], vertical_alignment="center")
        with cells[0]:
            ui.link(
                "timeline", "Its calls on the aligned timeline, one at a time →", view.with_(tl="call", op=op, call=1)
            )
        with cells[1]:
            ui.perfetto_button(comparison, Scope("op", op), "ops_perfetto")
    for link in comparison.efficiency.findings:
        if canonical_op(link.op) == op:
            st.markdown(f"**What its calls reach:** {text.md(link.text)}")
    rated = comparison.efficiency.aligned
    rated = rated[rated["op"] == op] if len(rated) else rated
    if len(rated):
        st.markdown("**Efficiency of its aligned calls**")
        st.caption("\n".join(f"- {text.md(line)}" for line in rated["text"].head(5)))
        ui.link("efficiency", "All ops on the roofline →", view)
    notes = [n for n in comparison.op_notes if n.startswith(f"{op}:")]
    if notes:
        st.caption(text.md(" ".join(notes)))
    st.markdown("**By module**")
    ui.op_rows(rows)
    for side in (1, 2):
        st.markdown(f"**What each call launched on** {ui.side_name(comparison, side)}")
        sequences = data.derived(comparison, ("op_sequences", side, op), lambda c, s=side: op_sequences(c.trace(s), op))
        if sequences.empty:
            st.caption("No call of this op on this trace.")
            continue
        st.caption("Kernel rows are positions in this comparison's kernel table, as in the evidence of the findings.")
        ui.table(tables.sequence_rows(sequences), hide_index=True, column_config=MS)


with ui.page("Ops") as shown:
    view, comparison = shown.view, shown.comparison
    if comparison.op_table.empty:
        st.info(
            "No op-level view: the traces record no CPU ops around eager kernel launches "
            "(graph replays have no ops inside, and traces without CPU events have none)."
        )
        if comparison.op_notes:
            st.caption(text.md(" ".join(comparison.op_notes)))
    elif view.op:
        op_detail(view, comparison, view.op)
    else:
        op_list(view, comparison)
