"""The per-phase section of a comparison: steps, kernels and time per side, type counts per step, each
phase's own findings, and notes on what makes the phases hard to compare (missing phases, different
step counts, mixed batches, assumed phases)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

import numpy as np
import pandas as pd

from fusion.match.groups import joint_counts
from fusion.model.phases import ALL, MIXED, PHASES, phase_notes, phase_table, phase_view, step_count, view_rows
from fusion.model.trace import Trace
from fusion.result import (
    COUNT,
    KERNEL_TYPE,
    NO_PAIR,
    Comparability,
    EvidenceRef,
    FusionMapping,
    Opportunity,
    plain,
    side_column,
)


class PhaseFindings(Protocol):
    """What a phase's own comparison gives: its findings."""

    mappings: list[FusionMapping]
    opportunities: list[Opportunity]
    comparability: Comparability


Compare = Callable[..., PhaseFindings]
"""The findings of one phase's comparison: called as compare(view1, view2, rows=(rows1, rows2),
**params), where rows are each view's kernels as rows of the compared traces (view_rows)."""
PER_STEP = "per_step"
"""A side's count of a type divided by its steps in the phase (side_column(PER_STEP, side))."""


def phase_summary(
    traces: tuple[Trace, Trace], params: dict[str, Any], phase: str = ALL, compare: Compare | None = None
) -> dict[str, Any]:
    """The `phases` section of a comparison of `traces` with `params` (Comparison.params). With `compare`, a
    comparison of all phases also runs one comparison per phase present (when there is more than one) for that
    phase's findings."""
    tables = [phase_table(t.kernels) for t in traces]
    present = [p for p in PHASES if any(p in table.index for table in tables)]
    split = compare if phase == ALL and len(present) > 1 else None
    counts = (_TypeCounts.of(traces[0].kernels), _TypeCounts.of(traces[1].kernels))
    return plain(
        {
            "selected": phase,
            "notes": pair_notes(traces, tables),
            "per_phase": {p: _section(p, traces, tables, counts, params, split) for p in present},
        }
    )


def _section(
    phase: str,
    traces: tuple[Trace, Trace],
    tables: list[pd.DataFrame],
    counts: tuple[_TypeCounts, _TypeCounts],
    params: dict[str, Any],
    compare: Compare | None,
) -> dict[str, Any]:
    steps = [int(t.loc[phase, "steps"]) if phase in t.index else 0 for t in tables]
    section: dict[str, Any] = {f"trace{s}": _side(table, phase) for s, table in enumerate(tables, start=1)}
    section["type_stats"] = _type_stats(counts, phase, steps)
    if compare is not None and phase != ALL and all(phase in t.index for t in tables):
        views = (phase_view(traces[0], phase, tables[0]), phase_view(traces[1], phase, tables[1]))
        origins = (view_rows(traces[0].kernels, phase), view_rows(traces[1].kernels, phase))
        result = compare(*views, rows=origins, **params)
        section["fusion_mappings"] = [asdict(_in_trace_rows(m, origins)) for m in result.mappings]
        section["fusion_opportunities"] = [asdict(o) for o in result.opportunities]
        section["comparability"] = {"level": result.comparability.level, "warnings": result.comparability.warnings}
    return section


def _in_trace_rows(mapping: FusionMapping, origins: tuple[np.ndarray, np.ndarray]) -> FusionMapping:
    """A phase comparison's finding with its evidence cited in rows of the whole traces: windows mapped from
    the phase's view, pair_id NO_PAIR (the phase's own pairs are not kept)."""
    refs = [
        EvidenceRef(
            NO_PAIR,
            ref.correlation1,
            ref.correlation2,
            _window(ref.window1, origins[0]),
            _window(ref.window2, origins[1]),
        )
        for ref in mapping.evidence_refs
    ]
    return replace(mapping, evidence_refs=refs)


def _window(window: tuple[int, int], origin: np.ndarray) -> tuple[int, int]:
    start, stop = window
    return (int(origin[start]), int(origin[stop - 1]) + 1) if stop > start >= 0 else window


def _side(table: pd.DataFrame, phase: str) -> dict[str, Any]:
    if phase not in table.index:
        return {"steps": 0, "kernels": 0, "time_us": 0.0, "time_us_per_step": None, "sources": {}}
    row = table.loc[phase]
    steps = int(row["steps"])
    return {
        "steps": steps,
        "kernels": int(row["kernels"]),
        "time_us": round(float(row["time_us"]), 3),
        "time_us_per_step": round(float(row["time_us"]) / steps, 3) if steps else None,
        "sources": row["sources"],
    }


def _type_stats(counted: tuple[_TypeCounts, _TypeCounts], phase: str, steps: list[int]) -> list[dict[str, Any]]:
    """Per kernel type: count on each side and per step (None without steps), and the per-step ratio."""
    counts = (
        pd.DataFrame({side_column(COUNT, s): c.in_phase(phase) for s, c in enumerate(counted, start=1)})
        .fillna(0)
        .astype(int)
    )
    rows = []
    for kernel_type, row in counts.iterrows():
        per_step = [row[side_column(COUNT, s)] / n if n else None for s, n in enumerate(steps, start=1)]
        ratio = per_step[0] / per_step[1] if None not in per_step and per_step[1] else None
        rows.append(
            {
                KERNEL_TYPE: str(kernel_type),
                **{side_column(COUNT, s): int(row[side_column(COUNT, s)]) for s in (1, 2)},
                **{side_column(PER_STEP, s): per_step[s - 1] for s in (1, 2)},
                "per_step_ratio": ratio,
            }
        )
    return rows


@dataclass(frozen=True)
class _TypeCounts:
    """Kernels per (phase, type) of one trace, counted on the category codes in one pass."""

    phases: list[str]
    types: pd.Index
    counts: np.ndarray
    """(phases, types) kernel counts."""

    @classmethod
    def of(cls, kernels: pd.DataFrame) -> _TypeCounts:
        types, phases = kernels["type"].cat, kernels["phase"].astype("category").cat
        shape = (len(phases.categories), len(types.categories))
        counts = joint_counts(phases.codes.to_numpy(), types.codes.to_numpy(), shape)
        return cls([str(p) for p in phases.categories], types.categories, counts)

    def in_phase(self, phase: str) -> pd.Series:
        """Kernels per type (observed types, in category order) of one phase."""
        counts = self.counts[self.phases.index(phase)] if phase in self.phases else np.zeros(len(self.types), int)
        present = counts > 0
        index = pd.CategoricalIndex(self.types[present], categories=self.types, name="type")
        return pd.Series(counts[present], index=index)


def pair_notes(traces: tuple[Trace, Trace], tables: list[pd.DataFrame]) -> list[str]:
    """Each trace's own phase notes, then phases found on one side only and step counts that differ."""
    notes = [
        f"trace {s}: {note}"
        for s, (trace, table) in enumerate(zip(traces, tables), start=1)
        for note in phase_notes(trace.kernels, table)
    ]
    for phase in PHASES:
        if phase in (ALL, MIXED):
            continue
        have = [phase in table.index for table in tables]
        if have == [True, False] or have == [False, True]:
            side = have.index(True) + 1
            row = tables[side - 1].loc[phase]
            notes.append(
                f"{phase} only in trace {side} ({step_count(int(row['steps']), phase)}, "
                f"{int(row['kernels']):,} kernels): nothing to compare it with"
            )
        elif all(have):
            steps = [int(table.loc[phase, "steps"]) for table in tables]
            if steps[0] != steps[1]:
                notes.append(
                    f"trace 1 has {step_count(steps[0], phase)}, trace 2 has {steps[1]}: "
                    "compare its counts per step (phases.per_phase.*.type_stats)"
                )
    return notes
