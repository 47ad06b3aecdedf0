"""Home page: pick two traces; then what was compared, what differs (findings and ratio chart), links and exports."""

from __future__ import annotations

import streamlit as st

import ui.widgets as ui
from fusion import settings
from fusion.comparison.result import Comparison
from fusion.model.phases import ALL as ALL_PHASES
from fusion.report import render as report
from fusion.result import COUNT_RATIO, TIME_US, side_column
from ui import charts, data, tables, text
from ui.state import View, clean_label

UPLOAD_FILES, SAMPLE_PAIR, SERVER_PATH = "Upload files", "Sample pair", "Server path"
UNKNOWN_SHARE_WARN = 0.10
TOP_FINDINGS = 5
KEEP_LABEL = "Keep kernels without a launch event"
"""The toggle the comparability warning on left-out kernels names (fusion.detect.comparability)."""


def modes() -> list[str]:
    return [SAMPLE_PAIR, UPLOAD_FILES] + ([] if settings.hosted() else [SERVER_PATH])


def mode_of(view: View) -> str:
    if view.sample:
        return SAMPLE_PAIR
    if view.t1 or view.t2:
        return UPLOAD_FILES
    if (view.p1 or view.p2) and not settings.hosted():
        return SERVER_PATH
    return st.session_state.get("mode") if st.session_state.get("mode") in modes() else UPLOAD_FILES


def on_mode() -> None:
    view = ui.session_view()
    mode = st.session_state["mode"]
    last = st.session_state.get("last_upload", {})
    if mode == SAMPLE_PAIR:
        ui.set_view(view.with_sources(sample=st.session_state.get("sample_pick") or data.default_sample()))
    elif mode == UPLOAD_FILES:
        ui.set_view(view.with_sources(t1=last.get(1), t2=last.get(2)))
    else:
        paths = [st.session_state.get(f"path{side}") or None for side in (1, 2)]
        ui.set_view(view.with_sources(p1=paths[0], p2=paths[1]))


def on_swap() -> None:
    """Swap the traces. Streamlit cannot put a file into an upload box, so the new boxes are empty: the files stay
    in use, and each side's caption says which one it now holds (stored_caption). The session's last uploads
    swap too, so going back to "Upload files" from another mode keeps the swapped order."""
    view = ui.session_view()
    ui.set_view(view.swapped())
    st.session_state["uploader_generation"] = st.session_state.get("uploader_generation", 0) + 1
    if view.t1 or view.t2:
        last = st.session_state.get("last_upload", {})
        st.session_state["last_upload"] = {3 - side: digest for side, digest in last.items()}
        st.session_state["swapped_in"] = {1, 2}


def pick_inputs(view: View) -> tuple[View, list]:
    """The input widgets; returns the (possibly changed) view and one container per side for messages."""
    if view.bpair is not None:
        ui.link("batch", f"Pair {view.bpair} of batch {text.md(view.batch)}: back to the batch →", view)
    ui.bind("mode", mode_of(view))
    mode = st.radio("Traces", modes(), key="mode", horizontal=True, on_change=on_mode, label_visibility="collapsed")
    if mode == SAMPLE_PAIR:
        pick_sample(view)
    columns = st.columns(2)
    for side, column in zip((1, 2), columns):
        with column:
            if mode == UPLOAD_FILES:
                view = upload_side(view, side)
            elif mode == SERVER_PATH:
                path_side(view, side)
    if mode == UPLOAD_FILES:
        capture_uploads(view)
    return view, columns


def capture_uploads(view: View) -> None:
    """An optional graph-capture trace per side: its replayed kernels are then tied to the captured ops."""
    generation = st.session_state.get("uploader_generation", 0)
    with st.expander("Graph-capture traces (optional)", expanded=bool(view.c1 or view.c2)):
        st.caption(
            "A trace of the run that captured a CUDA/HIP graph ties each replayed kernel to the op, module and "
            "shapes that launched it during capture (a server path finds a capture/ folder beside it by itself)."
        )
        for side, column in zip((1, 2), st.columns(2)):
            with column:
                upload = st.file_uploader(
                    f":{ui.side_badge(side)}[Capture trace] of trace {side}",
                    type=["json", "gz"],
                    key=f"capture{side}_{generation}",
                )
                if upload is not None:
                    fresh = upload.file_id not in st.session_state.get("uploads", {})
                    outcome = data.accept_capture(side, upload)
                    if "error" in outcome:
                        st.error(text.md(outcome["error"]))
                    elif fresh:
                        ui.set_view(view.with_(**{f"c{side}": outcome["digest"]}))
                        st.rerun()
                digest = getattr(view, f"c{side}")
                if digest:
                    st.caption(f"Stored capture `{digest[:16]}…`")
                    st.button(
                        "Remove the capture",
                        key=f"uncapture{side}",
                        on_click=lambda s=side: ui.set_view(ui.session_view().with_(**{f"c{s}": None})),
                    )


def pick_sample(view: View) -> None:
    names = list(data.samples())
    if not names:
        st.warning("No bundled sample pairs were found in sample_traces/.")
        return
    ui.bind("sample_pick", view.sample if view.sample in names else names[0])
    st.selectbox(
        "Bundled sample pair",
        names,
        key="sample_pick",
        on_change=lambda: ui.set_view(ui.session_view().with_sources(sample=st.session_state["sample_pick"])),
        help="Synthetic AMD and NVIDIA traces of the same workload (see sample_traces/README.md).",
    )


def upload_side(view: View, side: int) -> View:
    generation = st.session_state.get("uploader_generation", 0)
    limit = settings.max_upload_mb()
    upload = st.file_uploader(
        f":{ui.side_badge(side)}[Trace {side}] file" + (f" (up to {limit:,g} MB)" if limit else ""),
        type=ui.UPLOAD_TYPES,
        key=f"upload{side}_{generation}",
    )
    if upload is not None:
        fresh = upload.file_id not in st.session_state.get("uploads", {})
        outcome = data.accept_upload(side, upload)
        if "error" in outcome:
            st.error(text.md(outcome["error"]))
        elif fresh:
            st.session_state.setdefault("last_upload", {})[side] = outcome["digest"]
            st.session_state.get("swapped_in", set()).discard(side)
            other = 3 - side
            ui.set_view(view.with_sources(**{f"t{side}": outcome["digest"], f"t{other}": getattr(view, f"t{other}")}))
            st.rerun()
    digest = getattr(view, f"t{side}")
    if digest:
        moved = upload is None and side in st.session_state.get("swapped_in", set())
        st.caption(text.md(stored_caption(side, digest, moved)))
    return view


def stored_caption(side: int, digest: str, moved: bool = False) -> str:
    """What a side's stored upload is: its GPU, its file name and the start of its digest. Two uploads of one name
    (both vendors' traces are often <model>__<id>.json.gz) look alike in the uploader's chips; these do not.
    `moved`: the swap brought it here, and the box above is empty (Streamlit cannot refill it), so say it is in use."""
    known = next((o for o in st.session_state.get("uploads", {}).values() if o.get("digest") == digest), {})
    parts = (f"Trace {side}", known.get("label"), known.get("name"), f"stored {digest[:12]}…")
    where = f" · ⇄ swapped in from trace {3 - side}: still in use, no need to upload it again" if moved else ""
    return " · ".join(part for part in parts if part) + where


def path_side(view: View, side: int) -> None:
    ui.bind(f"path{side}", getattr(view, f"p{side}") or "")

    def changed() -> None:
        current = ui.session_view()
        paths = {f"p{s}": (st.session_state.get(f"path{s}") or "").strip() or getattr(current, f"p{s}") for s in (1, 2)}
        paths[f"p{side}"] = st.session_state[f"path{side}"].strip() or None
        ui.set_view(current.with_sources(**paths))

    st.text_input(
        f"Trace {side} path on this server", key=f"path{side}", on_change=changed, placeholder="/data/trace.json.gz"
    )


def controls(view: View, comparison: Comparison) -> None:
    """Labels, swap, the minimum group size and whether kernels without a launch event are kept."""
    label_cols = st.columns([2, 2, 1, 1], vertical_alignment="bottom")
    for side, column in zip((1, 2), label_cols):
        ui.bind(f"label{side}", view.label(side) or "")
        column.text_input(
            f"Label of trace {side}",
            key=f"label{side}",
            placeholder=comparison.trace(side).label,
            on_change=lambda s=side: ui.set_view(
                ui.session_view().with_(**{f"l{s}": clean_label(st.session_state[f"label{s}"])})
            ),
        )
    ui.bind("mgs", view.mgs)
    label_cols[2].number_input(
        "Min group size",
        min_value=1,
        step=10,
        key="mgs",
        on_change=lambda: ui.set_view(ui.session_view().with_min_group_size(int(st.session_state["mgs"]))),
        help="A correlation group (kernels of one graph launch) counts as significant from this many kernels.",
    )
    label_cols[3].button("⇄ Swap traces", on_click=on_swap, width="stretch")
    ui.bind("keep", view.keep)
    st.toggle(
        KEEP_LABEL,
        key="keep",
        on_change=lambda: ui.set_view(ui.session_view().with_keep(bool(st.session_state["keep"]))),
        help="Kernels with no runtime launch event in the trace (launched before the profiled CPU window opened, "
        "or not recorded) are left out by default: no op or phase can be told for them.",
    )


def headline(comparison: Comparison) -> None:
    """Each trace's totals, in a row of its own so both sides line up whatever the inputs above show."""
    for side, column in zip((1, 2), st.columns(2)):
        trace = comparison.trace(side)
        with column:
            st.markdown(ui.side_name(comparison, side))
            st.caption(text.md(f"{trace.platform} ({trace.platform_evidence}) · {trace.gpu} · {trace.source}"))
            cells = st.columns(3)
            compared = "Only the kernels compared: those with a launch event, in the phase chosen (the warnings say what was left out)"
            cells[0].metric("Kernels", f"{trace.kernel_count:,}", help=compared)
            cells[1].metric("Kernel time", text.ms(trace.kernel_time_us), help=compared)
            cells[2].metric(
                "Unclassified",
                f"{other_share(comparison, side):.1%}",
                help="Share of kernel time in names no rule matched (type Other)",
            )


def what_was_compared(comparison: Comparison) -> None:
    st.markdown("**Compared:** " + "; ".join(text.md(line) for line in tables.compared(comparison)) + ".")


def steps_and_phases(analysis: data.Analysis) -> None:
    """Each trace's recorded steps coloured by phase, and what a reader must know about the phases."""
    spans = tuple(data.trace_steps(trace) for trace in analysis.traces)
    phased = any(set(table["phase"]) - {ALL_PHASES} for table in spans)
    notes = analysis.comparison.phases.get("notes", [])
    if not phased and not notes:
        return
    with st.expander("Steps and phases", expanded=phased):
        if phased and st.toggle(
            "Draw each trace's steps on a time axis, coloured by phase",
            key="show_steps",
            help="Drawn on request: the chart library is loaded when a chart is first drawn.",
        ):
            labels = (analysis.comparison.trace1.label, analysis.comparison.trace2.label)
            ui.plot(charts.step_timeline(labels, spans), "steps")
        if notes:
            st.markdown("\n".join(f"- {text.md(note)}" for note in notes))


def other_share(comparison: Comparison, side: int) -> float:
    total = comparison.trace(side).kernel_time_us
    stats = comparison.type_stats
    if not total or charts.OTHER_TYPE not in stats.index:
        return 0.0
    return float(stats.loc[charts.OTHER_TYPE, side_column(TIME_US, side)]) / total


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
    if notes:
        show = st.error if comparison.comparability.level == "mismatch" else st.warning
        show("\n".join(f"- {text.md(note)}" for note in notes))


def findings(view: View, comparison: Comparison) -> None:
    """The fusion findings, largest unfused extra time first, then the kernels found on one side only."""
    st.subheader("Fusion findings")
    ranked = sorted(comparison.mappings, key=lambda m: m.time_saved_us, reverse=True)
    if not ranked:
        st.caption("No fused kernel was found standing for a sequence of kernels on the other trace.")
    for mapping in ranked[:TOP_FINDINGS]:
        names = ui.kernel_names(mapping, first=1)
        st.markdown(
            f"- {ui.finding(comparison, mapping)}: ×{mapping.pattern_count:,}, "
            f"{mapping.pattern_confidence:.0%} confidence, {text.ms(mapping.time_saved_us)} of unfused extra time"
            + tables.phases_text(tables.finding_phases(comparison, mapping))
            + ("\n" + "\n".join(f"  {line}" for line in names.splitlines()) if names else "")
        )
    if len(ranked) > TOP_FINDINGS:
        st.caption(f"…and {len(ranked) - TOP_FINDINGS} more.")
    if comparison.one_sided:
        st.markdown("**Kernels on one side only** (not explained as a fusion)")
        st.markdown(
            "\n".join(
                f"- trace {n.side}: {n.count:,} × {text.code(n.kernel_type)} — {text.md(n.reason)}"
                for n in comparison.one_sided
            )
        )
    ui.link("fusion", "All findings with their evidence →", view)


def differences(view: View, comparison: Comparison) -> None:
    """Findings next to the count-ratio chart: what differs, and where."""
    left, right = st.columns([3, 2])
    with left:
        findings(view, comparison)
    with right:
        st.subheader("Kernel count ratio per type")
        ui.picture(
            charts.ratio_svg(comparison.type_stats, COUNT_RATIO, "trace 1 / trace 2 kernels"),
            "Kernel count ratio per type",
        )
        ui.link("overview", "Counts and times per type →", view)


def explore(view: View) -> None:
    st.subheader("Explore")
    pages = [
        ("overview", "Kernel types"),
        ("fusion", "Fusion findings"),
        ("groups", "Pairs and aligned kernels"),
        ("kernels", "Kernel names"),
        ("ops", "Launching ops"),
    ]
    cells = st.columns(len(pages))
    for cell, (key, label) in zip(cells, pages):
        with cell:
            ui.link(key, f"{label} →", view)


def export(view: View, comparison: Comparison) -> None:
    st.subheader("Share and export")
    ui.share_box(view, "share_home")
    stem = tables.file_stem(comparison)
    cells = st.columns(3)
    cells[0].download_button(
        "Comparison (JSON)", lambda: report.to_json(comparison), f"{stem}.json", "application/json", on_click="ignore"
    )
    cells[1].download_button(
        "Tables (CSV, zip)", lambda: tables.csv_zip(comparison), f"{stem}_csv.zip", "application/zip", on_click="ignore"
    )
    cells[2].download_button(
        "Report (text)", lambda: report.to_text(comparison), f"{stem}.txt", "text/plain", on_click="ignore"
    )


with ui.page("Fusion Explorer", analysed=False) as shown:
    st.caption(
        "Two GPU profiler traces of the same workload, side by side: where one platform runs one fused "
        "kernel and the other runs several."
    )
    for note in data.folder_notes():
        st.caption(text.md(note))
    view, columns = pick_inputs(shown.view)
    analysis = data.analyse(view)
    view = ui.phase_fallback(view, analysis)
    for column, error in zip(columns, analysis.errors):
        if error:
            column.error(text.md(error))
    if analysis.comparison is None:
        st.info("Choose two traces to compare.")
    else:
        ui.sidebar(view, analysis)
        controls(view, analysis.comparison)
        headline(analysis.comparison)
        what_was_compared(analysis.comparison)
        steps_and_phases(analysis)
        warnings(analysis.comparison)
        differences(view, analysis.comparison)
        explore(view)
        export(view, analysis.comparison)
