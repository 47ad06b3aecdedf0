"""Home page: pick two traces, see the headline numbers, share the link, export the comparison."""

from __future__ import annotations

import io
import re
import zipfile

import streamlit as st

import appstate as app
from fusion import report
from fusion.result import Comparison

MODES = ["Sample pair", "Upload files"] + ([] if app.hosted() else ["Server path"])
UNKNOWN_SHARE_WARN = 0.10
TOP_FINDINGS = 5


def mode_of(view: app.View) -> str:
    if view.sample:
        return "Sample pair"
    if view.t1 or view.t2:
        return "Upload files"
    if (view.p1 or view.p2) and not app.hosted():
        return "Server path"
    return st.session_state.get("mode") if st.session_state.get("mode") in MODES else "Upload files"


def on_mode() -> None:
    view: app.View = st.session_state["view"]
    mode = st.session_state["mode"]
    last = st.session_state.get("last_upload", {})
    if mode == "Sample pair":
        app.set_view(view.with_sources(sample=st.session_state.get("sample_pick") or app.default_sample()))
    elif mode == "Upload files":
        app.set_view(view.with_sources(t1=last.get(1), t2=last.get(2)))
    else:
        paths = [st.session_state.get(f"path{side}") or None for side in (1, 2)]
        app.set_view(view.with_sources(p1=paths[0], p2=paths[1]))


def on_swap() -> None:
    app.set_view(st.session_state["view"].swapped())
    st.session_state["uploader_generation"] = st.session_state.get("uploader_generation", 0) + 1


def pick_inputs(view: app.View) -> tuple[app.View, list]:
    """The input widgets; returns the (possibly changed) view and one container per side for messages."""
    app.bind("mode", mode_of(view))
    mode = st.radio("Traces", MODES, key="mode", horizontal=True, on_change=on_mode, label_visibility="collapsed")
    if mode == "Sample pair":
        view = pick_sample(view)
    columns = st.columns(2)
    for side, column in zip((1, 2), columns):
        with column:
            st.subheader(f":{app.side_badge(side)}[Trace {side}]")
            if mode == "Upload files":
                view = upload_side(view, side)
            elif mode == "Server path":
                path_side(view, side)
    return view, columns


def pick_sample(view: app.View) -> app.View:
    names = list(app.samples())
    if not names:
        st.warning("No bundled sample pairs were found in sample_traces/.")
        return view
    app.bind("sample_pick", view.sample if view.sample in names else names[0])
    st.selectbox(
        "Bundled sample pair",
        names,
        key="sample_pick",
        on_change=lambda: app.set_view(st.session_state["view"].with_sources(sample=st.session_state["sample_pick"])),
        help="Synthetic AMD and NVIDIA traces of the same workload (see sample_traces/README.md).",
    )
    return view


def upload_side(view: app.View, side: int) -> app.View:
    generation = st.session_state.get("uploader_generation", 0)
    limit = f" (up to {app.max_upload_mb():,g} MB)" if app.max_upload_mb() else ""
    upload = st.file_uploader(f"Trace {side} file{limit}", type=["json", "gz"], key=f"upload{side}_{generation}")
    if upload is not None:
        digest, fresh = app.accept_upload(side, upload)
        if digest and fresh:
            st.session_state.setdefault("last_upload", {})[side] = digest
            view = view.with_sources(**{f"t{side}": digest, f"t{3 - side}": getattr(view, f"t{3 - side}")})
            app.set_view(view)
    digest = getattr(view, f"t{side}")
    if digest:
        st.caption(f"Stored trace `{digest[:16]}…`")
    return view


def path_side(view: app.View, side: int) -> None:
    app.bind(f"path{side}", getattr(view, f"p{side}") or "")

    def changed() -> None:
        current = st.session_state["view"]
        paths = {f"p{s}": (st.session_state.get(f"path{s}") or "").strip() or getattr(current, f"p{s}") for s in (1, 2)}
        paths[f"p{side}"] = st.session_state[f"path{side}"].strip() or None
        app.set_view(current.with_sources(**paths))

    st.text_input(f"Trace {side} path on this server", key=f"path{side}", on_change=changed, placeholder="/data/trace.json.gz")


def controls(view: app.View, comparison: Comparison) -> None:
    """Labels, swap and the minimum group size."""
    label_cols = st.columns([2, 2, 1, 1], vertical_alignment="bottom")
    for side, column in zip((1, 2), label_cols):
        app.bind(f"label{side}", view.label(side) or "")
        column.text_input(
            f"Label of trace {side}",
            key=f"label{side}",
            placeholder=comparison.trace(side).label,
            on_change=lambda s=side: app.update_view(**{f"l{s}": app.clean_label(st.session_state[f"label{s}"])}),
        )
    app.bind("mgs", view.mgs)
    label_cols[2].number_input(
        "Min group size",
        min_value=1,
        step=10,
        key="mgs",
        on_change=lambda: app.update_view(mgs=int(st.session_state["mgs"]), pair=None, w1=None, w2=None),
        help="A correlation group (kernels of one graph launch) counts as significant from this many kernels.",
    )
    label_cols[3].button("⇄ Swap traces", on_click=on_swap, width="stretch")


def headline(comparison: Comparison, columns: list) -> None:
    matched = int(comparison.metadata.get("matched_groups", 0))
    min_size = comparison.params.get("min_group_size", "?")
    for side, column in zip((1, 2), columns):
        trace = comparison.trace(side)
        groups = comparison.groups1 if side == 1 else comparison.groups2
        with column:
            st.markdown(f"**{app.md_text(trace.label)}**")
            st.caption(app.md_text(f"{trace.platform} ({trace.platform_evidence}) · {trace.gpu} · {trace.source}"))
            top = st.columns(3)
            top[0].metric("Kernels", f"{trace.kernel_count:,}")
            top[1].metric("Kernel time", app.ms(trace.kernel_time_us))
            top[2].metric("Unclassified time", f"{other_share(comparison, side):.1%}", help="Share of kernel time in names no rule matched (type Other)")
            bottom = st.columns(3)
            bottom[0].metric("Groups", f"{len(groups):,}", help=f"Correlation groups (one graph launch each) of at least {min_size} kernels")
            bottom[1].metric("Matched groups", f"{matched:,}", help="Groups paired with a group of the other trace")
            bottom[2].metric("Unmatched groups", f"{len(comparison.unmatched1 if side == 1 else comparison.unmatched2):,}")


def other_share(comparison: Comparison, side: int) -> float:
    total = comparison.trace(side).kernel_time_us
    stats = comparison.type_stats
    if not total or app.OTHER_TYPE not in stats.index:
        return 0.0
    return float(stats.loc[app.OTHER_TYPE, f"trace{side}_time_us"]) / total


def warnings(comparison: Comparison) -> None:
    """Comparability, trace quality (both already in comparison.warnings) and unclassified share."""
    notes = list(comparison.warnings)
    for side in (1, 2):
        share = other_share(comparison, side)
        if share > UNKNOWN_SHARE_WARN:
            notes.append(
                f"{share:.0%} of trace {side}'s kernel time is in unclassified (Other) kernels; "
                "the Kernels page lists them so rules can be added."
            )
    if not notes:
        st.success("The traces look comparable and no quality problems were found.")
        return
    show = st.error if comparison.comparability.level == "mismatch" else st.warning
    show("\n".join(f"- {app.md_text(note)}" for note in notes))


def findings(view: app.View, comparison: Comparison) -> None:
    """The fusion findings at a glance, largest unfused extra time first; details on the Fusion page."""
    st.subheader("Fusion findings")
    if not comparison.mappings:
        st.caption("No fusion difference was found between the two traces.")
        return
    ranked = sorted(comparison.mappings, key=lambda m: m.time_saved_us, reverse=True)
    for mapping in ranked[:TOP_FINDINGS]:
        st.markdown(
            f"- {app.finding(comparison, mapping)}: ×{mapping.pattern_count:,}, "
            f"{mapping.pattern_confidence:.0%} confidence, {app.ms(mapping.time_saved_us)} of unfused extra time"
        )
    if len(ranked) > TOP_FINDINGS:
        st.caption(f"…and {len(ranked) - TOP_FINDINGS} more.")
    app.link(app.PAGES["fusion"], "All findings with their evidence", view)


def export(comparison: Comparison) -> None:
    stem = file_stem(comparison)
    cols = st.columns(3)
    cols[0].download_button("Comparison (JSON)", lambda: report.to_json(comparison), f"{stem}.json", "application/json", on_click="ignore")
    cols[1].download_button("Tables (CSV, zip)", lambda: csv_zip(comparison), f"{stem}_csv.zip", "application/zip", on_click="ignore")
    cols[2].download_button("Report (text)", lambda: report.to_text(comparison), f"{stem}.txt", "text/plain", on_click="ignore")


def csv_zip(comparison: Comparison) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in report.to_csv(comparison).items():
            archive.writestr(f"{name}.csv", text)
    return buffer.getvalue()


def file_stem(comparison: Comparison) -> str:
    labels = f"{comparison.trace1.label}_vs_{comparison.trace2.label}"
    return "fusion_" + re.sub(r"[^A-Za-z0-9._-]+", "_", labels).strip("_")[:100]


def page() -> None:
    view = app.current_view()
    st.caption(
        "Two GPU profiler traces of the same workload, side by side: where one platform runs one fused "
        "kernel and the other runs several."
    )
    view, columns = pick_inputs(view)
    analysis = app.analyse(view)
    for column, error in zip(columns, analysis.errors):
        if error:
            column.error(app.md_text(error))
    comparison = analysis.comparison
    app.sidebar(view, comparison)
    if comparison is None:
        st.info("Choose two traces to compare.")
        return
    controls(view, comparison)
    headline(comparison, columns)
    warnings(comparison)
    findings(view, comparison)
    st.subheader("Explore")
    links = st.columns(4)
    for column, (key, label) in zip(links, [("overview", "Kernel types"), ("fusion", "Fusion findings"), ("groups", "Group pairs"), ("kernels", "Kernel names")]):
        with column:
            app.link(app.PAGES[key], label, view)
    st.subheader("Share and export")
    st.code(app.share_url(view), language=None, wrap_lines=True)
    export(comparison)


app.setup_page("Fusion Explorer")
with app.page_guard():
    page()
