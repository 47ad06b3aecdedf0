"""Batch: a batch result's pairs with their headline differences, each linked to its comparison, and the
findings across ranks (which hold on every rank, which only on some: stragglers)."""

from __future__ import annotations

from urllib.parse import urlencode

import streamlit as st

import ui.widgets as ui
from fusion import settings
from fusion.batch.results import BatchResult
from ui import batch, text
from ui.state import BATCH_STATUSES, View

ALL = "all"
MS = st.column_config.NumberColumn(format="%.3f")
PAIR_COLUMNS = (
    "label",
    "rank",
    "status",
    "comparison",
    "findings",
    "headline",
    "time ratio",
    "kernels 1",
    "kernels 2",
    "time 1 (ms)",
    "time 2 (ms)",
    "trace files",
    "message",
)


def pick_folder(view: View) -> None:
    """Locally, a batch folder anywhere on this server by its path (`bp` in the link)."""
    ui.bind("batch_path", view.bp or "")
    st.text_input(
        "Batch result folder on this server",
        key="batch_path",
        placeholder="/data/batch-out",
        on_change=lambda: ui.set_view(
            ui.session_view().with_(bp=st.session_state["batch_path"].strip() or None, batch=None)
        ),
    )


def show_listing(view: View) -> None:
    items = batch.listing()
    where = "" if settings.hosted() else f" ({text.md(settings.batch_dir())}, `FUSION_BATCH_DIR`)"
    st.caption(f"Results of `python -m fusion batch ... -o FOLDER` written into this server's batch folder{where}.")
    if not items:
        st.info("This server has no batch result yet.")
    for item in items:
        if item.record is None:
            st.warning(f"{text.md(item.name)}: {text.md(item.problem)}")
            continue
        record = item.record
        ui.link(
            "batch",
            f"{text.md(item.name)}: {len(record.pairs):,} pairs, {record.failures:,} failed, "
            f"written {batch.when(record.written)}",
            View(batch=item.name),
        )


def filters(view: View) -> tuple[str, str | None]:
    left, right = st.columns([3, 1], vertical_alignment="bottom")
    ui.bind("batch_filter", view.bq)
    query = left.text_input(
        "Filter pairs",
        key="batch_filter",
        placeholder="label, status, message or headline text",
        on_change=lambda: ui.set_view(ui.session_view().with_(bq=st.session_state["batch_filter"].strip()[:200])),
    )
    ui.bind("batch_status", view.bs or ALL)
    status = right.segmented_control(
        "Status",
        (ALL, *BATCH_STATUSES),
        key="batch_status",
        required=True,
        on_change=lambda: ui.set_view(
            ui.session_view().with_(
                bs=None if st.session_state["batch_status"] in (None, ALL) else st.session_state["batch_status"]
            )
        ),
    )
    return query.strip(), None if status in (None, ALL) else status


def comparison_link(view: View, result: BatchResult, index: int) -> str | None:
    """The row's link to its pair's comparison on the home page ('./' from this page is the app's root)."""
    opened = batch.pair_view(view, result.record, result.record.pairs[index])
    return None if opened is None else f"./?{urlencode(opened.to_params())}"


def show_pairs(view: View, result: BatchResult) -> list[str]:
    """The pair table, filtered by the link's filter; returns the labels shown."""
    record = result.record
    st.caption(
        f"{len(record.pairs):,} pairs, {record.failures:,} failed, compared with min group size {record.min_group_size} "
        f"on the {text.md(record.engine or 'local')} engine in {record.seconds:,.1f} s. "
        "Sort by a column's header; each pair's comparison opens from its link."
    )
    query, status = filters(view)
    every = batch.pair_table(result)
    changed = int((every["trace files"] != batch.AS_COMPARED).sum())
    if changed:
        st.warning(
            f"{changed:,} pairs' trace files changed since the batch ran (see the column *trace files*): their "
            "figures here are of the files as they were; their link compares the files as they are now."
        )
    table = batch.filtered(every, query, status)
    table.insert(1, "comparison", [comparison_link(view, result, int(i)) for i in table["pair"]])
    st.dataframe(
        table,
        hide_index=True,
        key="batch_pairs",
        column_order=PAIR_COLUMNS,
        column_config={
            "comparison": st.column_config.LinkColumn(display_text="open"),
            "time 1 (ms)": MS,
            "time 2 (ms)": MS,
            "time ratio": st.column_config.NumberColumn(format="%.2f×", help="trace 1 / trace 2 kernel time"),
            "message": st.column_config.TextColumn(width="medium"),
            "headline": st.column_config.TextColumn(width="large"),
        },
    )
    if len(table) < len(record.pairs):
        st.caption(f"Showing {len(table):,} of {len(record.pairs):,} pairs.")
    return table["label"].tolist()


def show_findings(result: BatchResult, labels: list[str]) -> None:
    st.subheader("Findings across ranks")
    st.caption(
        "A finding that holds on every rank of its group is a platform difference; one that holds on some ranks only "
        "is more likely a straggler than a fusion. Findings of the pairs listed above."
    )
    findings = result.findings[result.findings["label"].isin(labels)]
    st.dataframe(batch.finding_table(findings), hide_index=True, column_config={"time saved (ms)": MS})


with ui.page("Batch", analysed=False) as shown:
    view = shown.view
    if not settings.hosted():
        pick_folder(view)
    result = batch.load(view)
    if result is None:
        show_listing(view)
    else:
        show_findings(result, show_pairs(view, result))
