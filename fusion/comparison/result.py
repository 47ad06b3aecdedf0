"""The Comparison: everything a comparison of two traces found, with both traces and the tables behind the
findings. Built by fusion.comparison.pair; read by the CLI, the JSON/CSV export and the pages.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd

from fusion.efficiency.pair import OpEfficiency
from fusion.match.align import alignment_table, kernel_helpers
from fusion.model.trace import Trace
from fusion.result import (
    COUNT,
    COUNT_RATIO,
    ONLY_IN,
    OP_TABLE_COLUMNS,
    Comparability,
    FusionMapping,
    OneSidedNote,
    Opportunity,
    plain,
    side_column,
)


class PairKernels(Protocol):
    """Gives the global kernel row numbers (in trace.kernels) of both sides of one pair."""

    def kernel_indices(self, pair_id: int) -> tuple[np.ndarray, np.ndarray]: ...


def no_op_table() -> pd.DataFrame:
    """The op table of a comparison without op context: its columns, no rows."""
    return pd.DataFrame(columns=list(OP_TABLE_COLUMNS))


@dataclass
class Comparison:
    """Everything the analysis found; see module doc. DataFrames:

    - type_stats: index kernel_type; trace1_count, trace2_count, trace1_time_us, trace2_time_us,
      count_ratio, time_ratio (NaN when a side is 0), only_in (0, 1 or 2)
    - groups1/groups2: compared groups (significant ones, and smaller ones paired with a significant one);
      correlation, size, start_us, end_us, kernel_time_us, first_index, order, kind, significant
    - group_types1/group_types2: index correlation, one column per kernel type (counts)
    - pairs: pair_id, kind ('group' or 'stream'), correlation1, correlation2, size1, size2, time1_us,
      time2_us, similarity, kernels_differing, top_differences
    """

    trace1: Trace
    trace2: Trace
    params: dict[str, Any]
    type_stats: pd.DataFrame
    groups1: pd.DataFrame
    groups2: pd.DataFrame
    group_types1: pd.DataFrame
    group_types2: pd.DataFrame
    pairs: pd.DataFrame
    unmatched1: list[int]
    unmatched2: list[int]
    opportunities: list[Opportunity]
    mappings: list[FusionMapping]
    one_sided: list[OneSidedNote]
    comparability: Comparability
    warnings: list[str]
    metadata: dict[str, Any]
    phases: dict[str, Any] = field(default_factory=dict)
    """The per-phase section (phase_compare.phase_summary); empty until it is computed."""
    op_table: pd.DataFrame = field(default_factory=no_op_table)
    """Per op and module on both sides (opcompare.OP_TABLE_COLUMNS); empty without op context."""
    op_notes: list[str] = field(default_factory=list)
    """What the op-level comparison compared, and the op-level differences it did not report."""
    efficiency: OpEfficiency = field(default_factory=OpEfficiency)
    """FLOPs, bytes and rates of the op calls, side by side (fusion.efficiency); in the JSON export as
    `op_efficiency` (report.render.to_json), not in to_dict, which holds the findings and their tables."""
    pair_kernels: PairKernels | None = field(default=None, repr=False)
    _alignments: dict[int, pd.DataFrame] = field(default_factory=dict, repr=False)
    _helpers: list[np.ndarray] = field(default_factory=list, repr=False)
    """Per side, kernel_helpers of its whole kernel table: computed once, not once per pair aligned."""

    def trace(self, side: int) -> Trace:
        return self.trace1 if side == 1 else self.trace2

    def alignment(self, pair_id: int) -> pd.DataFrame:
        """Aligned kernels of one pair: index1/index2 (global rows or -1), name, type, dur, rel_ts, op."""
        if pair_id not in self._alignments:
            idx1, idx2 = self.pair_kernels.kernel_indices(pair_id)
            if not self._helpers:
                self._helpers = [kernel_helpers(t.kernels, t.names) for t in (self.trace1, self.trace2)]
            self._alignments[pair_id] = alignment_table(
                self.trace1.kernels, self.trace2.kernels, idx1, idx2, *self._helpers
            )
        return self._alignments[pair_id]

    def pairs_with_difference(self, kernel_type: str) -> pd.DataFrame:
        """Matched pairs (groups and stream windows) where `kernel_type`'s count differs, with both counts and the difference."""
        if self.pairs.empty:
            return self.pairs.iloc[0:0].assign(count1=0, count2=0, difference=0)
        count1, count2 = self._type_counts(1, kernel_type), self._type_counts(2, kernel_type)
        out = self.pairs.assign(count1=count1, count2=count2, difference=count1 - count2)
        return out[out["difference"] != 0].reset_index(drop=True)

    def _type_counts(self, side: int, kernel_type: str) -> np.ndarray:
        """Per pair, `side`'s kernels of `kernel_type`: from the group counts, counted in the rows of a stream window."""
        group_types = self.group_types1 if side == 1 else self.group_types2
        counts = np.zeros(len(self.pairs), dtype=np.int64)
        if kernel_type in group_types.columns:
            counts = group_types[kernel_type].reindex(self.pairs[f"correlation{side}"]).fillna(0).to_numpy(np.int64)
        windows = np.flatnonzero((self.pairs["kind"] == "stream").to_numpy())
        if len(windows):
            is_type = (self.trace(side).kernels["type"] == kernel_type).to_numpy()
            for row in windows:
                rows = self.pair_kernels.kernel_indices(int(self.pairs["pair_id"].iat[row]))[side - 1]
                counts[row] = int(is_type[rows].sum())
        return counts

    def to_dict(self) -> dict[str, Any]:
        """The reference-compatible dict plus ours; strict JSON types (None for NaN/inf)."""
        return plain(
            {
                "metadata": self.metadata,
                "global_counts": global_counts(self.type_stats),
                "fusion_opportunities": [asdict(o) for o in self.opportunities],
                "fusion_mappings": [asdict(m) for m in self.mappings],
                "one_sided_kernels": [asdict(n) for n in self.one_sided],
                "comparability": asdict(self.comparability),
                "type_stats": self.type_stats.reset_index().to_dict(orient="records"),
                "matched_pairs": self.pairs.to_dict(orient="records"),
                "unmatched_groups": {"trace1": self.unmatched1, "trace2": self.unmatched2},
                "params": self.params,
                "warnings": self.warnings,
                "phases": self.phases,
                "op_table": self.op_table.to_dict(orient="records"),
                "op_notes": self.op_notes,
            }
        )


def global_counts(type_stats: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Reference `global_counts`: ratio = trace1/trace2, None with only_in when a side has none."""
    out = {}
    for kernel_type, row in type_stats.iterrows():
        out[str(kernel_type)] = {
            **{side_column(COUNT, side): int(row[side_column(COUNT, side)]) for side in (1, 2)},
            "ratio": row[COUNT_RATIO],
            ONLY_IN: int(row[ONLY_IN]) or None,
        }
    return out
