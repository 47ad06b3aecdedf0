"""Render a Comparison as strict JSON, a readable text report, or CSV tables."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

import orjson
import pandas as pd

from fusion.comparison.result import Comparison
from fusion.detect.mappings import SPLIT_DETECTOR
from fusion.detect.op_kernels import OP_CALLS_SOURCE, OP_KERNELS_DETECTOR
from fusion.model.capture import capture_text
from fusion.model.ops import MODULE_SEPARATOR
from fusion.model.phases import ALL
from fusion.result import (
    CALLS,
    COUNT,
    COUNT_RATIO,
    DECOMPOSITION,
    EXTRA_WORK,
    KERNEL_NAMES,
    KERNELS_PER_CALL,
    MISMATCH,
    MODULE,
    NOT_SAME_WORKLOAD,
    ONLY_IN,
    OP,
    OP_NAMES,
    SPLIT,
    TIME_RATIO,
    TIME_US,
    EvidenceRef,
    FusionMapping,
    OneSidedNote,
    Opportunity,
    field_names,
    plain,
    side_column,
)

TOP_OPPORTUNITIES = 10
NAME_LABELS = {
    SPLIT_DETECTOR: ("single kernel", "split into"),
    OP_KERNELS_DETECTOR: ("the op launches", "the op launches"),
    None: ("fused kernel", "replaced kernels"),
}
"""How a mapping's two name lists read: a split's one side runs one kernel, not a fused one; an op-level
difference is two launches of the same op, which read as a fusion only through its evidence text."""


def name_labels(mapping: FusionMapping) -> tuple[str, str]:
    """The labels of the fused side's and the other side's kernel names (NAME_LABELS)."""
    return NAME_LABELS.get(mapping.detector, NAME_LABELS[None])


TOP_OPS = 10
TOP_NOTE_KERNELS = 5
"""Kernel names the text report lists per one-sided note (the JSON and CSV list all)."""
NAME_COLUMNS = ("fused_kernel_names", "unfused_kernel_names", "fused_components", "fused_ops", "unfused_ops")
"""List fields of a mapping written as one CSV cell each."""
NAME_SEPARATOR = " | "
"""Between raw kernel names in a CSV cell (names contain commas and semicolons, never ' | ')."""
CSV_DECIMALS = 3
"""Decimals of the floats in CSV tables (µs and ms to the nanosecond, ratios to 0.1 %): no float noise."""
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""A text cell starting with one of these is read as a formula by spreadsheets (CSV injection): it gets a leading
' (OWASP's advice), which spreadsheets show as text. Numbers are written as numbers (a negative one is no formula)."""


def to_json(comparison: Comparison) -> str:
    """The reference-compatible dict and `op_efficiency` as strict JSON: to_dict already turned NaN/inf into null."""
    document = {**comparison.to_dict(), "op_efficiency": comparison.efficiency.to_dict()}
    return orjson.dumps(document, option=orjson.OPT_INDENT_2).decode()


DIFFERENT_WORKLOADS = "the traces run different workloads"
"""What a section of a not_same_workload comparison says instead of findings, and beside its tables."""


def different_workloads(comparison: Comparison) -> bool:
    return comparison.comparability.level == NOT_SAME_WORKLOAD


def to_text(comparison: Comparison, *, warnings: bool = True) -> str:
    """A report for a person: traces, comparability, type table, top opportunities, op-level findings,
    mappings, the ops with the largest time gap, one-sided notes. For traces that run different workloads the
    finding sections say so and the tables are labelled as two workloads side by side. `warnings=False` leaves
    out the warnings but the verdict's own reasons (the CLI prints the others on stderr, as in every format)."""
    apart = different_workloads(comparison)
    ops = op_table_text(comparison.op_table, (comparison.trace1.label, comparison.trace2.label))
    sections = [
        _header(comparison),
        _comparability(comparison, warnings),
        _phases(comparison),
        _type_table(comparison),
        _opportunities(comparison),
        op_findings_text(comparison.mappings, comparison.op_notes),
        f"Fusion mappings: none ({DIFFERENT_WORKLOADS})"
        if apart
        else _mappings([m for m in comparison.mappings if m.evidence_source != OP_CALLS_SOURCE]),
        ops.replace("Top ops by time gap", f"Top ops by time gap ({DIFFERENT_WORKLOADS})", 1) if apart else ops,
        _notes(comparison),
    ]
    return "\n\n".join(s for s in sections if s) + "\n"


def to_csv(comparison: Comparison) -> dict[str, str]:
    """File stem -> CSV text for the opportunities, mappings, one-sided kernels, type stats, matched pairs and ops (the op table)."""
    return {
        "opportunities": _rows_csv(field_names(Opportunity), [asdict(o) for o in comparison.opportunities]),
        "mappings": _rows_csv(field_names(FusionMapping), [_flat_mapping(m) for m in comparison.mappings]),
        "one_sided_kernels": _rows_csv(field_names(OneSidedNote), [_flat_note(n) for n in comparison.one_sided]),
        "type_stats": frame_csv(comparison.type_stats.round(CSV_DECIMALS).reset_index()),
        "matched_pairs": frame_csv(comparison.pairs.round(CSV_DECIMALS)),
        "ops": op_table_csv(comparison.op_table),
    }


def spreadsheet_safe(value: Any) -> Any:
    """A text cell as a spreadsheet must read it: with a leading ' when it starts like a formula (FORMULA_STARTS)."""
    return "'" + value if isinstance(value, str) and value.startswith(FORMULA_STARTS) else value


def frame_csv(frame: pd.DataFrame) -> str:
    """A table as CSV (no index); see write_csv."""
    return write_csv(list(frame.columns), frame.itertuples(index=False, name=None))


def write_csv(columns: list[str], rows: Iterable[Iterable[Any]]) -> str:
    """The one way this package writes CSV: a header and rows, one per line; text cells spreadsheet-safe, missing
    values empty. A cell holding a line break (CR or LF) is quoted (RFC 4180), so it never splits its row."""
    out, line = io.StringIO(), io.StringIO()
    writer = csv.writer(line, lineterminator="\r\n")  # CR and LF both count as special, so both get quoted
    for row in (columns, *rows):
        line.seek(0)
        line.truncate()
        writer.writerow(["" if _missing(v) else spreadsheet_safe(v) for v in row])
        out.write(line.getvalue()[:-2] + "\n")
    return out.getvalue()


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _flat_mapping(mapping: FusionMapping) -> dict:
    row = asdict(mapping)
    row["unfused_sequence"] = " + ".join(mapping.unfused_sequence)
    row["unfused_count_per_type"] = "; ".join(f"{t}={n}" for t, n in mapping.unfused_count_per_type.items())
    for column in NAME_COLUMNS:
        row[column] = NAME_SEPARATOR.join(getattr(mapping, column))
    row["evidence_refs"] = _refs_text(mapping.evidence_refs)
    return row


def _flat_note(note: OneSidedNote) -> dict:
    return {
        **asdict(note),
        "evidence_refs": _refs_text(note.evidence_refs),
        "kernels": note_kernels_text(note),
        "ops": NAME_SEPARATOR.join(note.ops),
    }


def note_kernels_text(note: OneSidedNote, limit: int | None = None) -> str:
    """A one-sided note's kernels as 'name ×count (ms)', most time first; the first `limit` and how many more."""
    shown = note.kernels if limit is None else note.kernels[:limit]
    text = "; ".join(f"{k.name} ×{k.count} ({k.time_us / 1000:.3f} ms)" for k in shown)
    more = len(note.kernels) - len(shown)
    return text + (f"; and {more} more names" if more else "")


def _refs_text(refs: list[EvidenceRef]) -> str:
    return "; ".join(
        f"pair {r.pair_id} kernels {r.window1[0]}-{r.window1[1]} / {r.window2[0]}-{r.window2[1]}" for r in refs
    )


def _rows_csv(columns: list[str], rows: list[dict]) -> str:
    flat = (plain(row) for row in rows)
    rounded = ([round(v, CSV_DECIMALS) if isinstance(v, float) else v for v in (r[c] for c in columns)] for r in flat)
    return write_csv(columns, rounded)


def _header(c: Comparison) -> str:
    m = c.metadata
    lines = ["Fusion comparison"]
    for side in (1, 2):
        trace = c.trace(side)
        lines.append(
            f"  Trace {side}: {trace.label} [{trace.platform}] {trace.source} - {trace.kernel_count} kernels,"
            f" {trace.kernel_time_us / 1000:.2f} ms, {m[f'trace{side}_correlation_groups']} significant groups"
        )
        if trace.capture is not None:
            lines.append(f"    capture: {capture_text(trace.capture)}")
    lines.append(
        f"  matched group pairs: {m['matched_groups']}, stream windows: {m['stream_windows']},"
        f" min_group_size {c.params['min_group_size']}"
    )
    return "\n".join(lines)


def _comparability(c: Comparison, warnings: bool = True) -> str:
    """The verdict with its reasons (the comparability warnings), and the other warnings when `warnings`."""
    head = f"Comparability: {c.comparability.level}"
    similarity = c.comparability.checks.get("workload_similarity")
    if similarity is not None:
        head += f" (workload similarity {similarity:.0%}, {c.comparability.checks.get('workload_signal', '')})"
    evidence = [f"  = {line}" for line in c.comparability.evidence]
    shown = c.warnings if warnings else c.comparability.warnings
    return "\n".join([head, *evidence] + [f"  ! {w}" for w in shown])


def _type_table(c: Comparison) -> str:
    milliseconds = {side_column("ms", s): c.type_stats[side_column(TIME_US, s)] / 1000 for s in (1, 2)}
    table = c.type_stats.assign(**milliseconds)[
        [side_column(COUNT, 1), side_column(COUNT, 2), COUNT_RATIO, *milliseconds, ONLY_IN]
    ]
    title = (
        f"Kernel types ({DIFFERENT_WORKLOADS}: counts side by side, not differences)"
        if different_workloads(c)
        else "Kernel types"
    )
    with pd.option_context("display.width", 120, "display.max_rows", 200):
        return f"{title}\n" + table.to_string(float_format=lambda v: f"{v:.3f}", na_rep="-")


def _opportunities(c: Comparison) -> str:
    opportunities = c.opportunities
    if different_workloads(c):
        return f"Fusion opportunities: none ({DIFFERENT_WORKLOADS})"
    if not opportunities and c.comparability.level == MISMATCH and not c.params.get("opportunities_on_mismatch"):
        return (
            "Fusion opportunities: withheld (comparability mismatch: the counts do not look like the same workload;"
            " --opportunities-on-mismatch shows them, each with its warning)"
        )
    if not opportunities:
        return "Fusion opportunities: none"
    lines = [f"Fusion opportunities (top {min(len(opportunities), TOP_OPPORTUNITIES)} by time impact)"]
    for o in opportunities[:TOP_OPPORTUNITIES]:
        ratio = f"{o.ratio:.1f}x" if o.ratio is not None else f"only on trace {o.only_in}"
        lines.append(
            f"  {o.kernel_type:<18} {o.trace1_total:>8} vs {o.trace2_total:<8} {ratio:<16}"
            f" {o.trace1_time_ms:.3f} vs {o.trace2_time_ms:.3f} ms  fused by {o.fused_by} [{o.source}]"
        )
        if o.warning:
            lines.append(f"      ! {o.warning}")
    return "\n".join(lines)


def _mappings(mappings: list[FusionMapping]) -> str:
    if not mappings:
        return "Fusion mappings: none"
    lines = ["Fusion mappings"]
    for m in mappings:
        title = headline(m.detector, m.fused_trace, m.unfused_sequence, m.fused_kernel_type, m.kind)
        lines.append(
            f"  [{m.kind} · {m.detector}] {title}  x{m.pattern_count}, confidence {m.pattern_confidence:.0%},"
            f" {m.time_saved_us / 1000:.3f} ms extra"
        )
        lines.append(f"      {m.evidence}")
        if m.op:
            lines.append(f"      op: {ops_text(m)}")
        one, several = name_labels(m)
        lines.append(f"      {one} (trace {m.fused_trace}): {'; '.join(m.fused_kernel_names) or '-'}")
        if m.fused_components:
            lines.append(f"      which also performs: {', '.join(m.fused_components)}")
        lines.append(f"      {several} (trace {3 - m.fused_trace}): {'; '.join(m.unfused_kernel_names) or '-'}")
        lines.append(f"      evidence from: {m.evidence_source}")
        for ref in m.evidence_refs[:3]:
            lines.append(
                f"      pair {ref.pair_id}: trace1 kernels {ref.window1[0]}..{ref.window1[1] - 1},"
                f" trace2 kernels {ref.window2[0]}..{ref.window2[1] - 1}"
            )
    return "\n".join(lines)


def _notes(c: Comparison) -> str:
    if not c.one_sided:
        return ""
    return "\n".join(
        ["One-sided kernels (not fusions)"]
        + [
            f"  trace {n.side}: {n.count} x {n.kernel_type} [{n.kind}] - {n.reason}"
            + (f" (ops: {', '.join(n.ops)})" if n.ops else "")
            + (f"\n      kernels: {note_kernels_text(n, TOP_NOTE_KERNELS)}" if n.kernels else "")
            for n in c.one_sided
        ]
    )


def _phases(c: Comparison) -> str:
    lines = phase_lines(c.phases)
    selected = c.phases.get("selected", "all") if c.phases else "all"
    return "\n".join([f"Phases (compared: {selected})", *(f"  {line}" for line in lines)]) if lines else ""


def op_findings_text(mappings: list[FusionMapping], notes: list[str]) -> str:
    """The op-level findings (evidence_source 'op_calls'): each op, both sides' kernels, the cited calls; notes."""
    found = [m for m in mappings if m.evidence_source == OP_CALLS_SOURCE]
    lines = ["Op-level findings (same op call, different kernels)" if found else "Op-level findings: none"]
    for m in found:
        lines.append(f"  [{m.kind}] {m.evidence}")
        lines.append(f"      op: {ops_text(m)}")
        lines.append(
            f"      {m.pattern_confidence:.0%} of the op's aligned calls; {m.time_saved_us / 1000:.3f} ms"
            f" in Trace {3 - m.fused_trace}'s kernels without a same-type counterpart"
        )
        for ref in m.evidence_refs[:3]:
            lines.append(
                f"      op call: trace1 kernels {ref.window1[0]}..{ref.window1[1] - 1},"
                f" trace2 kernels {ref.window2[0]}..{ref.window2[1] - 1}"
            )
    lines += [f"  note: {note}" for note in notes]
    return "\n".join(lines)


def op_table_text(table: pd.DataFrame, labels: tuple[str, str], limit: int = TOP_OPS) -> str:
    """The ops with the largest time gap: calls, kernels per call and time on each side."""
    if table.empty:
        return ""
    lines = [
        f"Top ops by time gap (trace 1: {labels[0]}, trace 2: {labels[1]})",
        f"  {'op':<40} {'module':<30} {'calls':>11} {'kernels/call':>13} {'ms':>17} {'ratio':>6}",
    ]
    for _, row in table.head(limit).iterrows():
        calls, per_call, ms = ([row[side_column(c, s)] for s in (1, 2)] for c in (CALLS, KERNELS_PER_CALL, TIME_US))
        ratio = "-" if pd.isna(row[TIME_RATIO]) else f"{row[TIME_RATIO]:.2f}"
        op = ", ".join(row[OP_NAMES]) or row[OP]
        lines.append(
            f"  {op[:40]:<40} {_path_tail(row[MODULE], 30):<30} {calls[0]:>5} {calls[1]:>5}"
            f" {_per_call(per_call[0]):>6} {_per_call(per_call[1]):>6}"
            f" {ms[0] / 1000:>8.3f} {ms[1] / 1000:>8.3f} {ratio:>6}"
        )
    return "\n".join(lines)


def _path_tail(path: str, width: int) -> str:
    """The innermost whole segments of a module path that fit in `width` characters."""
    parts = path.split(MODULE_SEPARATOR)
    while len(parts) > 1 and len("…" + MODULE_SEPARATOR.join(["", *parts])) > width:
        parts.pop(0)
    tail = MODULE_SEPARATOR.join(parts)
    return tail if tail == path else "…" + MODULE_SEPARATOR + tail


def _per_call(value: float) -> str:
    return "-" if pd.isna(value) else f"{value:.2f}"


def op_table_csv(table: pd.DataFrame) -> str:
    """The op table as CSV; lists (op names, each side's kernel names) joined by ' | '."""
    names = [OP_NAMES, *(side_column(KERNEL_NAMES, s) for s in (1, 2))]
    return frame_csv(table.assign(**{c: table[c].map(NAME_SEPARATOR.join) for c in names}))


def headline(detector: str, fused_trace: int, unfused_sequence: list[str], fused_type: str, kind: str = "") -> str:
    """A finding in a few words, by its kind: 'Trace 2 fuses GEMM + SwiGLU -> GEMM'; a split 'Trace 1 runs GEMM as
    2 kernels, Trace 2 as 1' (the fused trace runs one kernel; it fuses nothing); a decomposition 'Trace 1 runs
    GEMM + Elementwise, Trace 2 Convolution: another algorithm'; extra work 'Trace 1 runs Memset + Attention,
    Trace 2 Attention: extra work'."""
    if detector == SPLIT_DETECTOR or kind == SPLIT:
        runs = len(unfused_sequence)
        return f"Trace {3 - fused_trace} runs {fused_type} as {runs} kernels, Trace {fused_trace} as {len(fused_type.split(' + '))}"
    other = f"Trace {3 - fused_trace} runs {' + '.join(unfused_sequence)}, Trace {fused_trace} {fused_type}"
    if kind == DECOMPOSITION:
        return f"{other}: another algorithm for the same op"
    if kind == EXTRA_WORK:
        return f"{other}: extra work on Trace {3 - fused_trace}"
    return f"Trace {fused_trace} fuses {' + '.join(unfused_sequence)} -> {fused_type}"


def ops_text(mapping: FusionMapping) -> str:
    """The finding's op and, per side, the launching ops of the kernels it cites."""
    inner = f" (innermost {mapping.inner_op})" if mapping.inner_op and mapping.inner_op != mapping.op else ""
    sides = {mapping.fused_trace: mapping.fused_ops, 3 - mapping.fused_trace: mapping.unfused_ops}
    listed = "; ".join(f"trace {s}: {', '.join(sides[s])}" for s in (1, 2) if sides[s])
    return f"{mapping.op or '-'}{inner}" + (f"; {listed}" if listed else "")


def phase_lines(summary: dict[str, Any]) -> list[str]:
    """The section as text: one line per phase (steps, kernels, ms on each side), then the notes."""
    if not summary or list(summary["per_phase"]) == [ALL]:
        return [f"note: {note}" for note in summary.get("notes", [])] if summary else []
    lines = [f"{'phase':<11}{'steps 1':>9}{'steps 2':>9}{'kernels 1':>11}{'kernels 2':>11}{'ms 1':>11}{'ms 2':>11}"]
    for phase, section in summary["per_phase"].items():
        one, two = section["trace1"], section["trace2"]
        lines.append(
            f"{phase:<11}{one['steps']:>9}{two['steps']:>9}{one['kernels']:>11,}{two['kernels']:>11,}"
            f"{one['time_us'] / 1e3:>11,.3f}{two['time_us'] / 1e3:>11,.3f}"
        )
    for phase, section in summary["per_phase"].items():
        if "fusion_mappings" in section:
            found = [
                headline(
                    m["detector"], m["fused_trace"], m["unfused_sequence"], m["fused_kernel_type"], m.get("kind", "")
                )
                + f" x{m['pattern_count']}"
                for m in section["fusion_mappings"]
            ]
            lines.append(f"{phase} alone: " + ("; ".join(found) or "no fusion"))
    return lines + [f"note: {note}" for note in summary["notes"]]
