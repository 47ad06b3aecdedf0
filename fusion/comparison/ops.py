"""Op-level comparison: both traces' op calls aligned (fusion.match.op_calls), their kernel-count differences
(fusion.detect.op_kernels), and the op table: every op's calls, kernels and time on both sides, ranked by the
time gap.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fusion.detect.op_kernels import OP_CALLS_SOURCE, op_findings, outside_ops_note, unaligned_notes
from fusion.detect.thresholds import Thresholds
from fusion.match.op_calls import OpCalls, align_calls, op_calls
from fusion.model.trace import Trace
from fusion.result import (
    CALLS,
    KERNEL_NAMES,
    KERNELS_PER_CALL,
    MODULE,
    OP,
    OP_NAMES,
    OP_SIDE_COLUMNS,
    OP_TABLE_COLUMNS,
    TIME_GAP_US,
    TIME_PER_CALL_US,
    TIME_RATIO,
    TIME_US,
    FusionMapping,
    side_column,
)

TOP_OP_NAMES = 3
"""The op table names each side's kernels of an op by total time, at most this many."""


@dataclass
class OpComparison:
    """Op-level findings, the op table (see OP_TABLE_COLUMNS) and what was compared."""

    findings: list[FusionMapping]
    op_table: pd.DataFrame
    aligned_calls: int
    calls: tuple[int, int]
    notes: list[str] = field(default_factory=list)
    claimed: tuple[np.ndarray, np.ndarray] = field(default_factory=lambda: (np.zeros(0, dtype=bool),) * 2)
    """Per side, a mask over the kernel rows: launched by an op call of a finding."""
    op_calls: tuple[OpCalls, OpCalls] | None = None
    """Both sides' op calls, and below their alignment (k, 2): what the efficiency puts side by side."""
    aligned: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))

    def supersedes(self, mapping: FusionMapping) -> bool:
        """Does a mapping from groups or windows cite only kernels of this comparison's op-level findings?

        Op calls are the primary evidence: such a mapping describes the same kernels (a sample of its
        occurrences, its evidence refs, all lies in finding calls on both sides) and is reported once.
        """
        refs = mapping.evidence_refs
        return (
            mapping.evidence_source != OP_CALLS_SOURCE
            and bool(refs)
            and all(_inside(self.claimed[0], ref.window1) and _inside(self.claimed[1], ref.window2) for ref in refs)
        )


def _inside(mask: np.ndarray, window: tuple[int, int]) -> bool:
    start, stop = window
    return 0 <= start < stop <= len(mask) and bool(mask[start:stop].all())


def compare_ops(
    trace1: Trace, trace2: Trace, thresholds: Thresholds | None = None, *, with_table: bool = True
) -> OpComparison:
    """Align the two traces' op calls and report op-level kernel-count differences and (with `with_table`) the op table."""
    limits = thresholds or Thresholds()
    calls = (op_calls(trace1, 1), op_calls(trace2, 2))
    table = op_table(calls) if with_table else pd.DataFrame(columns=list(OP_TABLE_COLUMNS))
    if not len(calls[0]) or not len(calls[1]):
        missing = [c.trace.label for c in calls if not len(c)]
        return OpComparison(
            [],
            table,
            0,
            (len(calls[0]), len(calls[1])),
            [f"no eager op calls recorded in {', '.join(missing)}: no op-level comparison"],
            op_calls=calls,
        )
    aligned = align_calls(*calls)
    findings, notes, shown = op_findings(calls, aligned, limits)
    notes += unaligned_notes(calls, aligned) + [n for c in calls if (n := outside_ops_note(c))]
    return OpComparison(
        findings,
        table,
        len(aligned),
        (len(calls[0]), len(calls[1])),
        notes,
        tuple(_mask(c, [pair[c.side - 1] for pair in shown]) for c in calls),
        calls,
        aligned,
    )


def _mask(calls: OpCalls, chosen: list[int]) -> np.ndarray:
    mask = np.zeros(len(calls.trace.kernels), dtype=bool)
    if chosen:
        mask[np.concatenate([calls.kernels(c) for c in chosen])] = True
    return mask


def op_table(calls: tuple[OpCalls, OpCalls]) -> pd.DataFrame:
    """Per (canonical op, module): calls, kernels per call, top kernel names and time per side; by time gap."""
    sides = [
        _side_table(c).rename(
            columns={OP_NAMES: f"{OP_NAMES}{c.side}", **{name: side_column(name, c.side) for name in OP_SIDE_COLUMNS}}
        )
        for c in calls
    ]
    table = sides[0].join(sides[1], how="outer")
    for s in (1, 2):
        table[side_column(CALLS, s)] = table[side_column(CALLS, s)].fillna(0).astype(np.int64)
        table[side_column(TIME_US, s)] = table[side_column(TIME_US, s)].fillna(0.0).astype(np.float64)
        for column in (side_column(KERNEL_NAMES, s), f"{OP_NAMES}{s}"):
            table[column] = table[column].apply(lambda v: v if isinstance(v, list) else [])
    table[OP_NAMES] = [sorted(set(a) | set(b)) for a, b in zip(table[f"{OP_NAMES}1"], table[f"{OP_NAMES}2"])]
    time1, time2 = table[side_column(TIME_US, 1)], table[side_column(TIME_US, 2)]
    table[TIME_RATIO] = (time1 / time2).where((time1 > 0) & (time2 > 0))
    table[TIME_GAP_US] = time1 - time2
    table = table.reset_index()
    order = np.argsort(-table[TIME_GAP_US].abs().to_numpy(), kind="stable")
    return table.iloc[order].reset_index(drop=True)[list(OP_TABLE_COLUMNS)]


def op_times(trace: Trace) -> pd.DataFrame:
    """One trace's eager ops by kernel time: op, op_names, module and the OP_SIDE_COLUMNS (unprefixed)."""
    table = _side_table(op_calls(trace, 1)).reset_index()
    return table.sort_values(TIME_US, ascending=False, kind="stable").reset_index(drop=True)


SEQUENCE_COLUMNS = (MODULE, KERNEL_NAMES, "kernel_types", CALLS, TIME_US, "example_rows")
"""op_sequences: per distinct launch, the module, the kernel names and types in launch order, how many calls
launched exactly that, their kernel time, and the kernel rows [start, stop) of the first such call."""


def op_sequences(trace: Trace, op: str) -> pd.DataFrame:
    """What the calls of canonical `op` launched on one trace: one row per (module, kernel-name sequence), most calls first."""
    calls = op_calls(trace, 1)
    found: dict[tuple[str, tuple[str, ...]], list] = {}
    for call in np.flatnonzero(calls.ops == op):
        rows = calls.kernels(int(call))
        key = (str(calls.modules[call]), tuple(str(n) for n in calls.names[rows]))
        entry = found.setdefault(
            key, [tuple(str(t) for t in calls.types[rows]), 0, 0.0, (int(rows.min()), int(rows.max()) + 1)]
        )
        entry[1] += 1
        entry[2] += float(calls.dur[rows].sum())
    table = pd.DataFrame(
        [(module, names, *entry) for (module, names), entry in found.items()], columns=list(SEQUENCE_COLUMNS)
    )
    return table.sort_values([CALLS, TIME_US], ascending=False, kind="stable").reset_index(drop=True)


def _side_table(calls: OpCalls) -> pd.DataFrame:
    """One side's OP_NAMES and OP_SIDE_COLUMNS, indexed by (op, module)."""
    call_of_row = np.repeat(np.arange(len(calls)), calls.counts)
    rows = pd.DataFrame(
        {
            OP: calls.ops[call_of_row],
            MODULE: calls.modules[call_of_row],
            "call": call_of_row,
            "name": calls.names[calls.rows],
            "dur": calls.dur[calls.rows],
        }
    )
    keys = [OP, MODULE]
    grouped = rows.groupby(keys)
    table = pd.DataFrame({CALLS: grouped["call"].nunique(), "kernels": grouped.size(), TIME_US: grouped["dur"].sum()})
    if table.empty:
        table = pd.DataFrame(columns=[CALLS, "kernels", TIME_US], index=pd.MultiIndex.from_arrays([[], []], names=keys))
    raw_ops = defaultdict(set)
    for op, module, raw in zip(calls.ops.tolist(), calls.modules.tolist(), calls.raw_ops.tolist()):
        raw_ops[(op, module)].add(raw)
    table[OP_NAMES] = [sorted(raw_ops[key]) for key in table.index]
    by_name = rows.groupby([*keys, "name"])["dur"].sum().sort_values(ascending=False, kind="stable")
    top = by_name.groupby(level=keys, sort=False).head(TOP_OP_NAMES).index.tolist()
    names = defaultdict(list)
    for op, module, name in top:
        names[(op, module)].append(name)
    table[KERNEL_NAMES] = [names[key] for key in table.index]
    table[KERNELS_PER_CALL] = table["kernels"] / table[CALLS]
    table[TIME_PER_CALL_US] = table[TIME_US] / table[CALLS]
    return table[[OP_NAMES, *OP_SIDE_COLUMNS]]
