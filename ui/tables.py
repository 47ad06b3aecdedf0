"""The tables the pages show and export, built from a Comparison. No streamlit here.

Numbers stay numbers (the grid sorts them); a missing value is NaN, which the pages format as blank
or '—', never 'None'. Kernel names are the raw names of the trace.
"""

from __future__ import annotations

import io
import re
import zipfile

import numpy as np
import pandas as pd

from fusion.comparison.result import Comparison
from fusion.efficiency.rates import shapes_text
from fusion.model.phases import ALL as ALL_PHASES
from fusion.model.trace import Trace
from fusion.report import render as report
from fusion.result import (
    CALLS,
    COUNT,
    COUNT_RATIO,
    KERNEL_NAMES,
    KERNEL_TYPE,
    KERNELS_PER_CALL,
    MODULE,
    ONLY_IN,
    OP,
    OP_NAMES,
    TIME_GAP_US,
    TIME_RATIO,
    TIME_US,
    FusionMapping,
    Opportunity,
    side_column,
)
from ui import text
from ui.charts import OTHER_TYPE
from ui.state import View

COUNTERPART_BUDGET = 50_000
"""Aligned positions read to pair kernel names with their counterparts (all of them on ordinary pairs)."""
OP_LABELS = {
    "match": "same type",
    "substitute": "different type",
    "only1": "only in trace 1",
    "only2": "only in trace 2",
}


ROW_PX, HEADER_PX = 35, 38
"""A table row's and its header's height in Streamlit's dataframe."""


def fitted_height(rows: int, most: int) -> int:
    """A table's height in px: its rows (at least one), at most `most`, so a filtered table has no blank rows."""
    return min(most, HEADER_PX + ROW_PX * max(rows, 1) + 2)


def numeric_columns(frame: pd.DataFrame) -> list[str]:
    """The frame's numeric columns (counts, times, ratios), in its order."""
    return [c for c in frame.columns if pd.api.types.is_numeric_dtype(frame[c])]


def numbers_first(frame: pd.DataFrame) -> list[str]:
    """The frame's columns with the numeric ones first, each group in its own order, so the numbers stay on screen
    when long names follow."""
    numeric = numeric_columns(frame)
    return numeric + [c for c in frame.columns if c not in numeric]


def compared(comparison: Comparison) -> list[str]:
    """What the comparison put side by side, in a user's words (plain text)."""
    meta = comparison.metadata
    groups, windows = int(meta.get("matched_groups", 0)), int(meta.get("stream_windows", 0))
    outside = [int(meta.get(side_column("kernels_outside_groups", side), 0)) for side in (1, 2)]
    lines = []
    if groups:
        lines.append(
            f"{groups:,} matched pairs of graph-launch groups (one correlation id with at least "
            f"{comparison.params.get('min_group_size')} kernels on each side)"
        )
    realigned = int(meta.get("realigned_group_pairs", 0))
    if windows:
        what = (
            f"eager launches, and the groups of {realigned:,} pairs cut at different places"
            if realigned
            else "eager launches"
        )
        lines.append(
            f"{windows:,} stream windows: the {outside[0]:,} and {outside[1]:,} kernels outside such groups "
            f"({what}), walked in corresponding windows of each trace's kernel stream"
        )
    unmatched = len(comparison.unmatched1) + len(comparison.unmatched2)
    if unmatched:
        lines.append(f"{len(comparison.unmatched1):,} and {len(comparison.unmatched2):,} groups without a counterpart")
    if not lines:
        lines.append("no kernels could be put side by side")
    return lines


def type_table(stats: pd.DataFrame) -> pd.DataFrame:
    """Per type: counts, times and ratios; a one-sided type says so instead of a ratio."""
    only = stats[ONLY_IN].astype(int)
    side_only = only.map({0: "", 1: "only in trace 1", 2: "only in trace 2"})
    out = pd.DataFrame(
        {
            "trace 1 count": stats[side_column(COUNT, 1)].astype(int),
            "trace 2 count": stats[side_column(COUNT, 2)].astype(int),
            "count ratio": [text.ratio(r) if not o else n for r, o, n in zip(stats[COUNT_RATIO], only, side_only)],
            "trace 1 time (ms)": stats[side_column(TIME_US, 1)] / 1000,
            "trace 2 time (ms)": stats[side_column(TIME_US, 2)] / 1000,
            "time ratio": [text.ratio(r) if not o else n for r, o, n in zip(stats[TIME_RATIO], only, side_only)],
        },
        index=stats.index.astype(str),
    )
    out.index.name = "kernel type"
    return out


def split_phases(comparison: Comparison) -> dict[str, dict]:
    """The per-phase sections of a comparison of all phases that holds several: {} when there is nothing to split."""
    per_phase = (
        comparison.phases.get("per_phase", {}) if comparison.params.get("phase", ALL_PHASES) == ALL_PHASES else {}
    )
    return per_phase if len(per_phase) > 1 else {}


def phase_counts(comparison: Comparison) -> pd.DataFrame:
    """Per type (rows) and phase (columns): both sides' counts and the per-step ratio, as text; empty without phases."""
    columns = {}
    for phase, section in split_phases(comparison).items():
        cells = {}
        for row in section["type_stats"]:
            ratio = row["per_step_ratio"]
            per_step = f" · {ratio:.2f}× per step" if ratio is not None else ""
            cells[row[KERNEL_TYPE]] = f"{row[side_column(COUNT, 1)]:,} vs {row[side_column(COUNT, 2)]:,}{per_step}"
        columns["no phase signal" if phase == ALL_PHASES else phase] = pd.Series(cells, dtype=object)
    table = pd.DataFrame(columns).fillna("—")
    table.index.name = "kernel type"
    return table


def finding_phases(comparison: Comparison, mapping: FusionMapping) -> list[str] | None:
    """The phases whose own comparison reports this finding; None when the comparison was not split by phase."""
    per_phase = split_phases(comparison)
    if not per_phase:
        return None
    key = (mapping.detector, mapping.fused_trace, mapping.fused_kernel_type, tuple(mapping.unfused_sequence))
    return [
        phase
        for phase, section in per_phase.items()
        if any(
            (m["detector"], m["fused_trace"], m["fused_kernel_type"], tuple(m["unfused_sequence"])) == key
            for m in section.get("fusion_mappings", [])
        )
    ]


def phases_text(phases: list[str] | None) -> str:
    """' · in prefill, decode' for a finding's phases ('' when not split; 'in no single phase' when none)."""
    if phases is None:
        return ""
    return f" · in {', '.join(phases)}" if phases else " · in no single phase (only over all kernels)"


def differing_types(stats: pd.DataFrame) -> list[str]:
    """The types of a type_stats table whose kernel counts differ between the traces, in its order."""
    differ = stats[side_column(COUNT, 1)] != stats[side_column(COUNT, 2)]
    return [str(t) for t in stats.index[differ.to_numpy()]]


def name_table(trace: Trace) -> pd.DataFrame:
    """One row per distinct name; Other (no rule matched) first, then by total time."""
    names = trace.names
    table = pd.DataFrame(
        {
            "kernel name": names.index.astype(str),
            "type": names["type"].astype(str).to_numpy(),
            "implementation": names["implementation"].astype(str).to_numpy(),
            "fused components": [", ".join(c) for c in names["fused_components"]],
            "helper of its type": names["helper"].astype(str).to_numpy(),
            "single op": names["single_op"].to_numpy(bool),
            "rule": names["rule"].astype(str).to_numpy(),
            "count": names["count"].astype(int).to_numpy(),
            "total time (ms)": names["time_us"].to_numpy() / 1000,
            "mean time (µs)": (names["time_us"] / names["count"]).to_numpy(),
            "share of time": (names["time_us"] / (trace.kernel_time_us or 1.0)).to_numpy(),
        }
    )
    table["unclassified"] = table["type"] == OTHER_TYPE
    table = table.sort_values(["unclassified", "total time (ms)"], ascending=[False, False])
    return table.drop(columns="unclassified").reset_index(drop=True)


def counterparts(comparison: Comparison, budget: int = COUNTERPART_BUDGET) -> tuple[pd.DataFrame, int]:
    """Each kernel name next to the name it is aligned with on the other trace, and how often.

    Reads the alignments of the pairs in order until `budget` positions; returns the table (most
    time first) and how many pairs were read.
    """
    parts, seen, read = [], 0, 0
    for pair_id in comparison.pairs["pair_id"].astype(int):
        if seen >= budget:
            break
        rows = comparison.alignment(pair_id)
        parts.append(rows[["op", "name1", "type1", "dur1", "name2", "type2", "dur2"]])
        seen, read = seen + len(rows), read + 1
    if not parts:
        return _empty_counterparts(), 0
    rows = pd.concat(parts, ignore_index=True)
    keys = ["name1", "type1", "name2", "type2", "op"]
    table = (
        rows.fillna({k: "" for k in keys})
        .groupby(keys, sort=False, observed=True)
        .agg(times=("op", "size"), time1=("dur1", "sum"), time2=("dur2", "sum"))
        .reset_index()
    )
    out = pd.DataFrame(
        {
            "type 1": table["type1"],
            "type 2": table["type2"],
            "kernel name, trace 1": table["name1"],
            "kernel name, trace 2": table["name2"],
            "aligned": table["op"].map(OP_LABELS),
            "times": table["times"].astype(int),
            "time 1 (ms)": table["time1"] / 1000,
            "time 2 (ms)": table["time2"] / 1000,
        }
    )
    order = (out["time 1 (ms)"] + out["time 2 (ms)"]).sort_values(ascending=False).index
    return out.loc[order].reset_index(drop=True), read


def _empty_counterparts() -> pd.DataFrame:
    columns = [
        "type 1",
        "type 2",
        "kernel name, trace 1",
        "kernel name, trace 2",
        "aligned",
        "times",
        "time 1 (ms)",
        "time 2 (ms)",
    ]
    return pd.DataFrame(columns=columns)


def name_filter(table: pd.DataFrame, columns: list[str], query: str) -> pd.DataFrame:
    """Rows where any of `columns` contains `query` (case-insensitive, literal)."""
    if not query:
        return table
    hit = np.zeros(len(table), dtype=bool)
    for column in columns:
        hit |= table[column].astype(str).str.contains(query, case=False, regex=False).to_numpy()
    return table[hit]


def pair_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The pairs to pick from, with the filtered type's counts first when there is a type filter."""
    table = pd.DataFrame(
        {
            "pair": rows["pair_id"].astype(int),
            "kind": rows["kind"].map({"group": "group", "stream": "stream window"}),
            "kernels 1": rows["size1"],
            "kernels 2": rows["size2"],
            "time 1 (ms)": rows["time1_us"] / 1000,
            "time 2 (ms)": rows["time2_us"] / 1000,
            "similarity": rows["similarity"],
            "kernels differing": rows["kernels_differing"],
            "top differences (1 − 2)": rows["top_differences"],
            "correlation 1": rows["correlation1"],
            "correlation 2": rows["correlation2"],
        }
    )
    if "difference" in rows:
        for position, (column, source) in enumerate(
            (("type count 1", "count1"), ("type count 2", "count2"), ("type count 1 − 2", "difference"))
        ):
            table.insert(2 + position, column, rows[source])
    return table.reset_index(drop=True)


def aligned_table(rows: pd.DataFrame, marked: np.ndarray) -> pd.DataFrame:
    """Aligned kernels: types, durations and kernel indices first, then both names, so trace 2's name is on screen
    next to trace 1's and the numbers stay on screen."""
    return pd.DataFrame(
        {
            "evidence": np.where(marked, "◆", ""),
            "aligned": rows["op"].map(OP_LABELS),
            "type 1": rows["type1"].fillna(""),
            "type 2": rows["type2"].fillna(""),
            "dur 1 (µs)": rows["dur1"].map(duration),
            "dur 2 (µs)": rows["dur2"].map(duration),
            "kernel 1": rows["index1"].map(_identifier),
            "kernel 2": rows["index2"].map(_identifier),
            "kernel name, trace 1": rows["name1"].fillna(""),
            "kernel name, trace 2": rows["name2"].fillna(""),
        },
        index=rows.index,
    )


def _identifier(value: int) -> str:
    """A kernel index as text, blank where the row has no kernel on that side."""
    return str(int(value)) if value >= 0 else ""


def duration(us: float) -> str:
    """A kernel duration in µs as text, blank where there is no kernel (never 'None')."""
    return "" if us != us else f"{us:,.2f}"


def pair_rows(comparison: Comparison, kernel_type: str | None) -> pd.DataFrame:
    """The pairs to list: all, or those where `kernel_type`'s count differs (largest difference first)."""
    if kernel_type is None:
        return comparison.pairs
    rows = comparison.pairs_with_difference(kernel_type)
    return rows.reindex(rows["difference"].abs().sort_values(ascending=False, kind="stable").index)


def in_window(alignment: pd.DataFrame, view: View) -> np.ndarray:
    """Rows of the alignment inside the evidence windows named by the link."""
    marked = np.zeros(len(alignment), dtype=bool)
    for side, window in ((1, view.w1), (2, view.w2)):
        if window:
            index = alignment[f"index{side}"].to_numpy()
            marked |= (index >= window[0]) & (index < window[1])
    return marked


def of_type(alignment: pd.DataFrame, kernel_type: str | None) -> np.ndarray:
    """Rows of the alignment with a kernel of `kernel_type` on either side (none without a type)."""
    if kernel_type is None:
        return np.zeros(len(alignment), dtype=bool)
    return ((alignment["type1"] == kernel_type) | (alignment["type2"] == kernel_type)).to_numpy(bool)


def kernel_starts(rows: pd.DataFrame, side: int, kernels_only: bool) -> pd.Series:
    """Where each kernel's bar starts: its time since the first kernel, or the busy time before it (gaps removed)."""
    if not kernels_only:
        return rows[f"rel_ts{side}"]
    present = rows[f"dur{side}"].notna()
    durations = rows.loc[present, f"dur{side}"]
    order = rows.loc[present, f"rel_ts{side}"].sort_values(kind="stable").index
    starts = durations.loc[order].cumsum() - durations.loc[order]
    return starts.reindex(rows.index)


def composition(alignment: pd.DataFrame) -> pd.DataFrame:
    """Per-type kernel counts of the whole pair (not just the rows shown), largest difference first."""
    counts = (
        pd.DataFrame({f"trace {side}": alignment[f"type{side}"].value_counts() for side in (1, 2)})
        .fillna(0)
        .astype(int)
    )
    counts["1 − 2"] = counts["trace 1"] - counts["trace 2"]
    counts.index.name = "kernel type"
    return counts.iloc[np.argsort(-counts["1 − 2"].abs().to_numpy(), kind="stable")]


def opportunity_table(comparison: Comparison, opportunities: list[Opportunity]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "kernel type": [o.kernel_type for o in opportunities],
            "fused by": [f"trace {o.fused_trace}: {comparison.trace(o.fused_trace).label}" for o in opportunities],
            "time impact (ms)": [o.time_impact_ms for o in opportunities],
            "trace 1 kernels": [o.trace1_total for o in opportunities],
            "trace 2 kernels": [o.trace2_total for o in opportunities],
            "trace 1 per pair": [o.trace1_avg_per_group for o in opportunities],
            "trace 2 per pair": [o.trace2_avg_per_group for o in opportunities],
            "trace 1 time (ms)": [o.trace1_time_ms for o in opportunities],
            "trace 2 time (ms)": [o.trace2_time_ms for o in opportunities],
            "pairs affected": [f"{o.groups_affected} / {o.total_groups}" for o in opportunities],
            "counted in": [o.source for o in opportunities],
        }
    )


def csv_zip(comparison: Comparison) -> bytes:
    """Every CSV table of the comparison in one zip (the same tables as `fusion compare --format csv`)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, body in report.to_csv(comparison).items():
            archive.writestr(f"{name}.csv", body)
    return buffer.getvalue()


def file_stem(comparison: Comparison) -> str:
    labels = f"{comparison.trace1.label}_vs_{comparison.trace2.label}"
    return "fusion_" + re.sub(r"[^A-Za-z0-9._-]+", "_", labels).strip("_")[:100]


def op_rows(op_table: pd.DataFrame) -> pd.DataFrame:
    """The op table as shown: op (canonical, and as the traces spell it), module, both sides' calls, kernels per
    call and time, ratio and gap (ms)."""
    return pd.DataFrame(
        {
            "op": op_table[OP].astype(str),
            "as spelled": op_table[OP_NAMES].map(", ".join),
            "module": op_table[MODULE].astype(str),
            "calls 1": op_table[side_column(CALLS, 1)].astype(int),
            "calls 2": op_table[side_column(CALLS, 2)].astype(int),
            "kernels per call 1": op_table[side_column(KERNELS_PER_CALL, 1)].astype(float),
            "kernels per call 2": op_table[side_column(KERNELS_PER_CALL, 2)].astype(float),
            "time 1 (ms)": op_table[side_column(TIME_US, 1)] / 1000,
            "time 2 (ms)": op_table[side_column(TIME_US, 2)] / 1000,
            "time ratio": op_table[TIME_RATIO].astype(float),
            "gap 1 − 2 (ms)": op_table[TIME_GAP_US] / 1000,
        }
    )


def sequence_rows(sequences: pd.DataFrame) -> pd.DataFrame:
    """One side's op_sequences as shown: module, calls, kernels per call, the kernel names in order, times, rows."""
    return pd.DataFrame(
        {
            "module": sequences[MODULE].astype(str),
            "calls": sequences[CALLS].astype(int),
            "kernels per call": sequences[KERNEL_NAMES].map(len).astype(int),
            "kernels, in launch order": sequences[KERNEL_NAMES].map(" → ".join),
            "types": sequences["kernel_types"].map(" → ".join),
            "time (ms)": sequences[TIME_US] / 1000,
            "time per call (ms)": sequences[TIME_US] / sequences[CALLS].clip(lower=1) / 1000,
            "first call's kernels": sequences["example_rows"].map(lambda rows: f"{rows[0]}–{rows[1] - 1}"),
        }
    )


EFFICIENCY_RATE_LABELS = (
    ("TFLOP/s", "tflops"),
    ("TB/s", "tb_s"),
    ("% of peak", "peak_pct"),
    ("% of bandwidth", "bandwidth_pct"),
)
EFFICIENCY_SORT_COLUMNS = {"saving": "saving_us", "gap": "gap", "time1": "time_us1", "time2": "time_us2"}
"""state.EFFICIENCY_SORTS -> the aligned table's column it orders by, largest first."""


def efficiency_rows(aligned: pd.DataFrame, sort: str) -> pd.DataFrame:
    """The aligned op signatures as shown: op, shapes, dtype, calls, both sides' time, the saving and who would save
    it, then both sides' TFLOP/s, TB/s, % of peak, % of bandwidth and bound, each metric's two sides next to each
    other; ordered by `sort` (state.EFFICIENCY_SORTS)."""
    table = aligned.assign(gap=(aligned["time_us1"] - aligned["time_us2"]).abs())
    order = EFFICIENCY_SORT_COLUMNS.get(sort, "saving_us")
    table = table.sort_values(order, ascending=False, kind="stable", na_position="last")
    rates = {
        f"{what} {s}": table[f"{column}{s}"].astype(float) for what, column in EFFICIENCY_RATE_LABELS for s in (1, 2)
    }
    return pd.DataFrame(
        {
            "op": table["op"].astype(str),
            "counted op": table["counted_op1"].astype(str),
            "shapes": table["dims1"].map(lambda d: shapes_text(d or "")),
            "dtype": table["dtype1"].astype(str),
            "calls": table["calls"].astype(int),
            **{f"time (ms) {s}": table[f"time_us{s}"] / 1000 for s in (1, 2)},
            "saving (ms)": table["saving_us"] / 1000,
            "saved by": table["saving_side"].map(lambda s: f"trace {int(s)}" if s else ""),
            **rates,
            **{f"bound {s}": table[f"bound{s}"].astype(str) for s in (1, 2)},
        }
    ).reset_index(drop=True)


def signature_rows(signatures: pd.DataFrame) -> pd.DataFrame:
    """One trace's op signatures as shown, by time (the sort of a side's table is its time)."""
    table = signatures.sort_values("time_us", ascending=False, kind="stable")
    return pd.DataFrame(
        {
            "op": table["op"].astype(str),
            "counted op": table["counted_op"].astype(str),
            "level": table["level"].astype(str),
            "shapes": table["dims"].map(lambda d: shapes_text(d or "")),
            "dtype": table["dtype"].astype(str),
            "calls": table["calls"].astype(int),
            "time (ms)": table["time_us"] / 1000,
            "TFLOP/s": table["tflops"].astype(float),
            "TB/s": table["tb_s"].astype(float),
            "FLOP/byte": table["intensity"].astype(float),
            "% of peak": table["peak_pct"].astype(float),
            "% of bandwidth": table["bandwidth_pct"].astype(float),
            "bound": table["bound"].astype(str),
            "not rated because": table["reason"].astype(str),
            "kernels": table["kernel_names"].map(", ".join),
        }
    ).reset_index(drop=True)
