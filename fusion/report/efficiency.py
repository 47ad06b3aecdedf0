"""The efficiency of op calls as text: one trace's op signatures (summary), two traces' aligned calls side by side."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from fusion.comparison.result import Comparison
from fusion.efficiency.pair import TEXT
from fusion.efficiency.rates import (
    CALLS,
    COUNTED_OP,
    DTYPE,
    REASON,
    TIME_US,
    TraceRates,
    percent_text,
    rate_text,
    shapes_text,
    signatures,
)
from fusion.match.op_calls import OpCalls
from fusion.result import plain

TOP_SIGNATURES = 15
TOP_ALIGNED = 20


def trace_efficiency(rates: TraceRates, calls: OpCalls, top: int = TOP_SIGNATURES) -> dict[str, Any]:
    """The summary's `op_efficiency`: the GPU and its peaks row, the coverage, the `top` signatures by time."""
    table = signatures(rates, calls)
    gpu = rates.gpu
    return plain(
        {
            "gpu": gpu.name,
            "peaks_row": gpu.peaks.name if gpu.peaks else None,
            "note": gpu.note,
            "coverage": rates.coverage(),
            "signatures": table.head(top).astype(object).where(table.head(top).notna(), None).to_dict("records"),
        }
    )


def trace_efficiency_text(section: dict[str, Any]) -> list[str]:
    """The summary's per-op efficiency table: time, calls, op and shapes, dtype, rate and bound."""
    coverage = section["coverage"]
    lines = [
        f"op efficiency on {section['gpu']}" + (f" (peaks: {section['peaks_row']})" if section["peaks_row"] else "")
    ]
    if section["note"]:
        lines.append(f"  note: {section['note']}")
    if coverage["kernel_time_us"] and coverage["op_call_time_us"]:
        lines.append(
            f"  {coverage['rated_calls']:,} of {coverage['op_calls']:,} op calls rated:"
            f" {percent_text(100 * coverage['rated_share'])} of kernel time,"
            f" {percent_text(100 * coverage['rated_share_of_op_calls'])} of op-call time"
        )
    for row in section["signatures"]:
        what = " ".join(p for p in (row[COUNTED_OP], shapes_text(row["dims"] or ""), row[DTYPE]) if p)
        rate = rate_text(_floats(row)) if row["tflops"] is not None else f"not rated: {row[REASON] or 'no time'}"
        lines.append(f"  {row[TIME_US] / 1e3:>10,.3f} ms  {row[CALLS]:>6,}x  {what}  {rate}")
    return lines


def _floats(row: dict[str, Any]) -> dict[str, Any]:
    """A JSON row with None as NaN, as rate_text reads a table row."""
    return {k: (math.nan if v is None else v) for k, v in row.items()}


def efficiency_text(comparison: Comparison, top: int = TOP_ALIGNED) -> str:
    """`fusion efficiency A B`: each side's GPU and coverage, the aligned op signatures by saving, finding links."""
    section = comparison.efficiency
    labels = (comparison.trace1.label, comparison.trace2.label)
    lines = ["Op efficiency, side by side"]
    for gpu, coverage in zip(section.gpus, section.coverage):
        peaks = f"peaks: {gpu.peaks_row}, {gpu.hbm_tb_s} TB/s" if gpu.peaks_row else "no peaks"
        share = coverage["rated_share"]
        rated = f"{percent_text(100 * share)} of kernel time in rated op calls" if share is not None else "no kernels"
        lines.append(f"  Trace {gpu.side}: {labels[gpu.side - 1]} ({gpu.gpu}; {peaks}); {rated}")
    aligned = section.aligned
    if aligned.empty:
        lines.append("\nNo aligned op calls: the traces record no CPU ops around eager launches (or none align).")
    else:
        lines += ["", f"Aligned op calls, largest saving first (of {len(aligned):,}):"]
        lines += [f"  {text}" for text in aligned[TEXT].head(top)]
    if section.findings:
        lines += ["", "Findings and what their calls reach:"]
        lines += [f"  finding {link.finding + 1}: {link.text}" for link in section.findings]
    lines += [f"note: {note}" for note in section.notes]
    return "\n".join(lines) + "\n"


def top_gaps(comparison: Comparison, count: int = 3) -> pd.DataFrame:
    """The `count` aligned op signatures with the largest saving (the Overview page names them)."""
    aligned = comparison.efficiency.aligned
    if aligned.empty:
        return aligned
    return aligned[aligned["saving_us"] > 0].head(count)
