"""Op-level comparison: both traces' op calls aligned (fusion.match.op_calls), their kernel-count differences
(fusion.detect.op_kernels), and the op table: every op's calls, kernels and time on both sides, ranked by the
time gap.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fusion.detect.op_kernels import OP_CALLS_SOURCE, op_findings, outside_ops_note, unaligned_notes
from fusion.detect.thresholds import Thresholds
from fusion.efficiency.rates import group_sums, top_by_time
from fusion.match.groups import unique_rows
from fusion.match.op_calls import OpCalls, align_calls, factorized, op_calls
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
    sides = [_side_rows(c) for c in calls]
    keys = sorted(set(sides[0][0]) | set(sides[1][0]))
    position = {key: i for i, key in enumerate(keys)}
    table: dict[str, Any] = {OP: np.array([op for op, _ in keys], dtype=object)}
    table[MODULE] = np.array([module for _, module in keys], dtype=object)
    names: list[list[list[str]]] = []
    for s, (side_keys, columns) in enumerate(sides, start=1):
        at = np.array([position[key] for key in side_keys], dtype=np.int64)
        for name, fill in ((CALLS, 0), (KERNELS_PER_CALL, np.nan), (TIME_US, 0.0), (TIME_PER_CALL_US, np.nan)):
            table[side_column(name, s)] = np.full(len(keys), fill, dtype=np.asarray(columns[name]).dtype)
            table[side_column(name, s)][at] = columns[name]
        for name, out in ((KERNEL_NAMES, side_column(KERNEL_NAMES, s)), (OP_NAMES, f"{OP_NAMES}{s}")):
            table[out] = [[] for _ in keys]
            for i, value in zip(at.tolist(), columns[name]):
                table[out][i] = value
        names.append(table.pop(f"{OP_NAMES}{s}"))
    table[OP_NAMES] = [sorted(set(a) | set(b)) for a, b in zip(*names)]
    time1, time2 = table[side_column(TIME_US, 1)], table[side_column(TIME_US, 2)]
    with np.errstate(invalid="ignore", divide="ignore"):
        table[TIME_RATIO] = np.where((time1 > 0) & (time2 > 0), time1 / time2, np.nan)
    table[TIME_GAP_US] = time1 - time2
    order = np.argsort(-np.abs(table[TIME_GAP_US]), kind="stable")
    return pd.DataFrame({c: _taken(table[c], order) for c in OP_TABLE_COLUMNS})


def _taken(values: Any, order: np.ndarray) -> Any:
    return [values[i] for i in order.tolist()] if isinstance(values, list) else values[order]


def op_times(trace: Trace) -> pd.DataFrame:
    """One trace's eager ops by kernel time: op, op_names, module and the OP_SIDE_COLUMNS (unprefixed)."""
    keys, columns = _side_rows(op_calls(trace, 1))
    table = pd.DataFrame(
        {
            OP: [op for op, _ in keys],
            MODULE: [module for _, module in keys],
            **{c: columns[c] for c in (OP_NAMES, *OP_SIDE_COLUMNS)},
        }
    )
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


def _side_rows(calls: OpCalls) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    """One side's (op, module) keys in sorted order, and per key its OP_NAMES and OP_SIDE_COLUMNS; the time sums
    in kernel order with pandas' compensated sum, as a groupby of the kernels by (op, module) gives them."""
    op, ops = factorized(calls.ops, calls.op_ids)
    module, modules = factorized(calls.modules, calls.module_ids)
    pairs, group, _ = unique_rows(np.column_stack([op, module]).astype(np.int64))
    keys = [(str(ops[o]), str(modules[m])) for o, m in pairs.tolist()]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    rank = np.empty(len(keys), dtype=np.int64)
    rank[order] = np.arange(len(keys))
    group = rank[group]
    per_row = np.repeat(group, calls.counts)
    dur = calls.dur[calls.rows]
    count = np.bincount(group, minlength=len(keys))
    time_us = group_sums(dur, per_row) if len(keys) else np.zeros(0)
    columns: dict[str, Any] = {
        OP_NAMES: _names_per_group(group, factorized(calls.raw_ops, calls.raw_op_ids), len(keys)),
        CALLS: count,
        KERNELS_PER_CALL: np.bincount(per_row, minlength=len(keys)) / count,
        KERNEL_NAMES: _top_names(per_row, calls, dur, len(keys)),
        TIME_US: time_us,
        TIME_PER_CALL_US: time_us / count,
    }
    return [keys[i] for i in order], columns


def _names_per_group(group: np.ndarray, names: tuple[np.ndarray, np.ndarray], groups: int) -> list[list[str]]:
    """Per group, the distinct `names` (factorized: a code per member, the distinct strings) of its members, sorted."""
    code, distinct = names
    found: list[set[str]] = [set() for _ in range(groups)]
    for g, c in unique_rows(np.column_stack([group, code]).astype(np.int64))[0].tolist():
        found[g].add(str(distinct[c]))
    return [sorted(f) for f in found]


def _top_names(group: np.ndarray, calls: OpCalls, dur: np.ndarray, groups: int) -> list[list[str]]:
    """Per group (of each kernel row of `calls`), its kernel names by summed time, at most TOP_OP_NAMES; ties by name."""
    used, inverse = np.unique(calls.names.codes[calls.rows], return_inverse=True)
    texts = [str(t) for t in calls.names.values[used]]
    distinct = sorted(set(texts))
    position = {t: i for i, t in enumerate(distinct)}
    name = np.array([position[t] for t in texts], dtype=np.int64)[inverse]
    out: list[list[str]] = [[] for _ in range(groups)]
    for g, n in top_by_time(group, name, dur, TOP_OP_NAMES):
        out[g].append(distinct[n])
    return out
