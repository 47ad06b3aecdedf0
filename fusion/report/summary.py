"""One trace's summary: platform, GPU, per-type counts and times, and the names no rule matched."""

from __future__ import annotations

from typing import Any

import pandas as pd

from fusion.comparison.ops import op_times
from fusion.efficiency.rates import trace_rates
from fusion.match.op_calls import op_calls
from fusion.model.capture import capture_text
from fusion.model.ops import unlaunched_note
from fusion.model.phases import describe
from fusion.model.trace import Trace
from fusion.report.efficiency import trace_efficiency, trace_efficiency_text
from fusion.result import CALLS, KERNELS_PER_CALL, MODULE, OP, OP_NAMES, TIME_US
from fusion.vocabulary import GPU_KERNEL

UNCLASSIFIED_TYPE = "Other"
TOP_OPS = 10


def summarize(trace: Trace, top_unclassified: int = 20) -> dict[str, Any]:
    """The `summary` CLI's JSON: per-type count and time, what typed the kernels, launches, unclassified names."""
    kernels = trace.kernels
    other = trace.names[trace.names["type"] == UNCLASSIFIED_TYPE].head(top_unclassified)
    with_op = kernels[(kernels["op"] != "").to_numpy()]
    calls = op_calls(trace, 1)
    return {
        "format": trace.format,
        "platform": trace.platform,
        "gpu": trace.gpu,
        "kernels": trace.kernel_count,
        "gpu_work": _gpu_work(trace),
        "kernel_time_us": round(trace.kernel_time_us, 3),
        "types": _breakdown(kernels, "type"),
        "type_routes": _breakdown(kernels, "type_route"),
        "launches": _breakdown(kernels, "launch"),
        "with_op": {"count": len(with_op), "time_us": round(float(with_op["dur"].sum()), 3)},
        "unlaunched": unlaunched_note(kernels),
        "phases": describe(kernels),
        "ops": _top_ops(trace, TOP_OPS),
        "capture": trace.capture,
        "op_efficiency": trace_efficiency(trace_rates(trace, calls), calls),
        "unclassified": [
            {"name": str(name), "count": int(row["count"]), "time_us": round(float(row["time_us"]), 3)}
            for name, row in other.iterrows()
        ],
    }


def _gpu_work(trace: Trace) -> dict[str, dict[str, float]]:
    """Count and time of the kernels proper and of the copies and memsets among the kernel table's rows."""
    table = trace.names.groupby("gpu_work")[["count", "time_us"]].sum()
    return {
        str(work): {"count": int(row["count"]), "time_us": round(float(row["time_us"]), 3)}
        for work, row in table.iterrows()
    }


def _top_ops(trace: Trace, limit: int) -> list[dict[str, Any]]:
    """The eager top-level ops (and module class paths) with the most kernel time."""
    return [
        {
            "op": ", ".join(row[OP_NAMES]) or row[OP],
            "module": row[MODULE],
            "calls": int(row[CALLS]),
            "kernels_per_call": round(float(row[KERNELS_PER_CALL]), 3),
            "time_us": round(float(row[TIME_US]), 3),
        }
        for _, row in op_times(trace).head(limit).iterrows()
    ]


def _breakdown(kernels: pd.DataFrame, column: str) -> dict[str, dict[str, float]]:
    """Kernel count and time per value of `column`, largest time first; values without kernels left out."""
    table = kernels.groupby(column, observed=True)["dur"].agg(count="size", time_us="sum")
    table = table.sort_values("time_us", ascending=False, kind="stable")
    return {
        str(value): {"count": int(row["count"]), "time_us": round(float(row["time_us"]), 3)}
        for value, row in table.iterrows()
    }


def summary_text(trace: Trace, summary: dict[str, Any]) -> str:
    """The summary as a table a person reads (the trace's warnings are not in it: the CLI prints them on stderr)."""
    total = summary["kernel_time_us"] or 1.0
    lines = [
        f"trace     {trace.source}",
        f"format    {summary['format']}",
        f"platform  {summary['platform']}  ({trace.platform_evidence})",
        f"gpu       {summary['gpu']}",
        f"kernels   {summary['kernels']:,}   kernel time {summary['kernel_time_us'] / 1e3:,.3f} ms{_work_text(summary)}",
        "",
        *phase_text(summary["phases"]),
        "",
        f"{'type':<20}{'count':>10}{'time ms':>14}{'share':>8}",
    ]
    for kernel_type, row in summary["types"].items():
        share = 100 * row["time_us"] / total
        lines.append(f"{kernel_type:<20}{row['count']:>10,}{row['time_us'] / 1e3:>14,.3f}{share:>7.1f}%")
    lines += ["", _shares("typed by", summary["type_routes"], total), _shares("launch", summary["launches"], total)]
    with_op = summary["with_op"]
    lines.append(f"with op    {with_op['count']:,} kernels, {100 * with_op['time_us'] / total:.1f}% of kernel time")
    if summary["unlaunched"]:
        lines.append(f"no launch  {summary['unlaunched']}")
    if summary["capture"] is not None:
        lines.append(f"capture    {capture_text(summary['capture'])}")
    if summary["ops"]:
        tied = " and graph replays tied to their capture" if summary["capture"] else ""
        lines += ["", f"top ops by kernel time (eager launches{tied}):"]
        for entry in summary["ops"]:
            lines.append(
                f"  {entry['time_us'] / 1e3:>10,.3f} ms  {entry['calls']:>7,} calls  {entry['kernels_per_call']:>5.2f}"
                f" kernels/call  {entry['op']}  {entry['module']}"
            )
    if summary["op_efficiency"]["coverage"]["op_calls"]:
        lines += ["", *trace_efficiency_text(summary["op_efficiency"])]
    if summary["unclassified"]:
        lines += ["", "unclassified kernel names by total time (add a rule for them, see FUSION_RULES):"]
        for entry in summary["unclassified"]:
            lines.append(f"  {entry['time_us'] / 1e3:>10,.3f} ms  {entry['count']:>7,}x  {entry['name'][:160]}")
    return "\n".join(lines)


def _work_text(summary: dict[str, Any]) -> str:
    """'   (1,465 kernels, 241 memsets, 1 memcpy)' when the rows hold copies or memsets besides kernels."""
    work = summary["gpu_work"]
    if set(work) <= {GPU_KERNEL}:
        return ""
    parts = [f"{row['count']:,} {kind}{'s' if row['count'] != 1 else ''}" for kind, row in work.items()]
    return f"   ({', '.join(parts)})"


def phase_text(phases: dict[str, Any]) -> list[str]:
    """One line per phase: steps, kernels, time and where the phase came from; then the notes."""
    lines = [f"{'phase':<11}{'steps':>7}{'kernels':>10}{'time ms':>14}  from"]
    for phase, row in phases["per_phase"].items():
        sources = ", ".join(f"{source} ({count:,})" for source, count in row["sources"].items())
        lines.append(f"{phase:<11}{row['steps']:>7,}{row['kernels']:>10,}{row['time_us'] / 1e3:>14,.3f}  {sources}")
    return lines + [f"phase note: {note}" for note in phases["notes"]]


def _shares(title: str, breakdown: dict[str, dict[str, float]], total: float) -> str:
    """'launch     kernel: 1,053 kernels, 69.1% of time; none: 463 kernels, 30.9% of time' on one line."""
    parts = [
        f"{value}: {row['count']:,} kernels, {100 * row['time_us'] / total:.1f}% of time"
        for value, row in breakdown.items()
    ]
    return f"{title:<11}" + "; ".join(parts)
