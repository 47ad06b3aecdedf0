"""Fusion: opportunities ranked by time impact, and fusion mappings as findings linked to their evidence."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import ui.widgets as ui
from fusion.classify.names import canonical_op
from fusion.comparison.result import Comparison
from fusion.detect.op_kernels import OP_EVIDENCE_PAIR
from fusion.report.timeline import Scope
from fusion.result import NOT_SAME_WORKLOAD, EvidenceRef, FusionMapping, Opportunity
from ui import charts, tables, text
from ui.state import View

EVIDENCE_LINKS = 5
OP_ROWS = 10


def impact_chart(opportunities: list[Opportunity]) -> str:
    """The opportunities' time impact as bars, largest first, each with its kernel counts written out."""
    notes = [
        f"{o.time_impact_ms:,.3f} ms · kernels {o.trace1_total:,} vs {o.trace2_total:,} · fused by trace {o.fused_trace}"
        for o in opportunities
    ]
    return charts.bars_svg(
        [o.kernel_type for o in opportunities],
        [o.time_impact_ms for o in opportunities],
        [charts.type_color(o.kernel_type) for o in opportunities],
        notes,
        "|trace 1 time − trace 2 time| (ms)",
    )


def evidence_label(ref: EvidenceRef) -> str:
    return (
        f"Open evidence — pair {ref.pair_id}: kernels {ref.window1[0]}–{ref.window1[1] - 1} (trace 1) · "
        f"{ref.window2[0]}–{ref.window2[1] - 1} (trace 2)"
    )


def show_mapping(view: View, comparison: Comparison, mapping: FusionMapping, number: int) -> None:
    with st.container(border=True):
        st.markdown(f"**{number}.** {ui.finding(comparison, mapping)}")
        cells = st.columns(4)
        cells[0].metric("Confidence", f"{mapping.pattern_confidence:.0%}")
        cells[1].metric("Occurrences", f"{mapping.pattern_count:,}")
        cells[2].metric(
            "Pairs with the pattern",
            f"{mapping.pairs_with_pattern:,}",
            help="Matched pairs (groups, stream windows or op calls) in which this pattern occurs",
        )
        cells[3].metric("Unfused extra time", text.ms(mapping.time_saved_us))
        counts = ", ".join(f"{t} × {n}" for t, n in mapping.unfused_count_per_type.items())
        source = ui.EVIDENCE_SOURCES.get(mapping.evidence_source, mapping.evidence_source)
        st.caption(
            text.md(
                f"Detector: {mapping.detector}"
                + (f" · found in {source}" if source else "")
                + f" · fused kernels: {mapping.fused_count:,} · unfused kernels per type: {counts}"
                + tables.phases_text(tables.finding_phases(comparison, mapping))
            )
        )
        names = ui.kernel_names(mapping)
        if names:
            st.markdown(names)
        st.markdown(text.md(mapping.evidence))
        ui.link(
            "timeline",
            "On the aligned timeline: both traces, the cited kernels marked →",
            view.with_(tl="finding", finding=number),
        )
        for link in comparison.efficiency.findings:
            if link.finding == number - 1:
                st.markdown(f"**What its calls reach:** {text.md(link.text)}")
                ui.link("efficiency", "The op calls on the roofline →", view)
        if mapping.op:
            ui.link(
                "ops",
                f"Open {mapping.op} on the Ops page: what each of its calls launched →",
                view.with_(op=canonical_op(mapping.op)),
            )
        for ref in mapping.evidence_refs[:EVIDENCE_LINKS]:
            if ref.pair_id == OP_EVIDENCE_PAIR:
                st.caption(
                    f"op call: kernels {ref.window1[0]}–{ref.window1[1] - 1} (trace 1) · "
                    f"{ref.window2[0]}–{ref.window2[1] - 1} (trace 2)"
                )
            else:
                ui.link(
                    "groups",
                    evidence_label(ref),
                    view.with_type(None).with_pair(ref.pair_id, tuple(ref.window1), tuple(ref.window2)),
                )
        if len(mapping.evidence_refs) > EVIDENCE_LINKS:
            st.caption(f"…and {len(mapping.evidence_refs) - EVIDENCE_LINKS} more cited occurrences in the JSON export.")


def op_table(view: View, comparison: Comparison) -> None:
    """The ops with the largest time gap (eager traces with CPU ops only), as the Ops page lists them."""
    table = comparison.op_table
    st.subheader("Ops by time gap")
    if table.empty:
        st.info(
            "No op-level comparison: the traces record no CPU ops around eager launches "
            "(graph replays have no ops inside)."
        )
        return
    ui.op_rows(table.head(OP_ROWS))
    if len(table) > OP_ROWS:
        st.caption(text.top_of(OP_ROWS, len(table), "ops", "with the largest time gap") + ".")
    ui.link("ops", "Every op, and what each op's calls launched on both traces →", view)


def one_sided(comparison: Comparison) -> None:
    if not comparison.one_sided:
        return
    st.subheader("Kernels on one side only, not explained as fusion")
    ui.table(
        pd.DataFrame(
            {
                "trace": [n.side for n in comparison.one_sided],
                "kind": [ui.kind_label(n.kind) for n in comparison.one_sided],
                "kernel type": [n.kernel_type for n in comparison.one_sided],
                "count": [n.count for n in comparison.one_sided],
                "why": [n.reason for n in comparison.one_sided],
            }
        ),
        hide_index=True,
    )


with ui.page("Fusion") as shown:
    view, comparison = shown.view, shown.comparison
    if comparison.comparability.level == NOT_SAME_WORKLOAD:
        st.warning(text.md(next(w for w in comparison.warnings if w.startswith("not the same workload"))))
    opportunities = sorted(comparison.opportunities, key=lambda o: o.time_impact_ms, reverse=True)
    st.subheader("Fusion opportunities by time impact")
    if opportunities:
        ui.picture(impact_chart(opportunities), "Fusion opportunities by time impact")
        ui.table(
            tables.opportunity_table(comparison, opportunities),
            hide_index=True,
            column_config={
                c: st.column_config.NumberColumn(format="%.3f")
                for c in (
                    "time impact (ms)",
                    "trace 1 time (ms)",
                    "trace 2 time (ms)",
                    "trace 1 per pair",
                    "trace 2 per pair",
                )
            },
        )
        cells = st.columns(min(len(opportunities), 6))
        for i, opportunity in enumerate(opportunities):
            with cells[i % len(cells)]:
                ui.link("groups", f"{opportunity.kernel_type} → pairs", view.with_type(opportunity.kernel_type))
    else:
        st.info("No kernel type's count differs enough between the traces to count as an opportunity.")
    st.subheader("Fusion mappings")
    if not comparison.mappings:
        st.info("No fused kernel was found standing for a sequence of kernels on the other trace.")
    for number, mapping in enumerate(comparison.mappings, start=1):
        show_mapping(view, comparison, mapping, number)
    op_table(view, comparison)
    one_sided(comparison)
    st.subheader("Timeline")
    st.caption("The first matched step (else group pair) of both traces on one aligned axis, with every finding in it.")
    ui.perfetto_button(comparison, Scope(), "fusion_perfetto")
