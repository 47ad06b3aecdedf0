"""Per-type statistics and fusion opportunities: types whose counts differ enough between the traces."""

from __future__ import annotations

import numpy as np
import pandas as pd

from fusion.detect.evidence import NON_FUSABLE_TYPES, Side
from fusion.detect.mappings import PLATFORM_NAMES
from fusion.detect.thresholds import Thresholds
from fusion.match.align import UNKNOWN_TYPE
from fusion.result import (
    COUNT,
    COUNT_RATIO,
    GROUPS_AFFECTED,
    KERNEL_TYPE,
    ONLY_IN,
    TIME_RATIO,
    TIME_US,
    Opportunity,
    side_column,
)


def type_stats(sides: tuple[Side, Side], types: list[str]) -> pd.DataFrame:
    """Per kernel type present on either side: counts, times, ratios (NaN with a zero side), only_in."""
    n = len(types)
    data = {}
    for side in sides:
        data[side_column(COUNT, side.number)] = side.type_counts(n)
        data[side_column(TIME_US, side.number)] = np.bincount(side.codes, weights=side.dur, minlength=n)
    table = pd.DataFrame(data, index=pd.Index(types, name=KERNEL_TYPE))
    table = table[(table[side_column(COUNT, 1)] > 0) | (table[side_column(COUNT, 2)] > 0)].copy()
    c1, c2 = table[side_column(COUNT, 1)], table[side_column(COUNT, 2)]
    table[COUNT_RATIO] = (c1 / c2).where((c1 > 0) & (c2 > 0))
    table[TIME_RATIO] = (table[side_column(TIME_US, 1)] / table[side_column(TIME_US, 2)]).where(
        (table[side_column(TIME_US, 1)] > 0) & (table[side_column(TIME_US, 2)] > 0)
    )
    table[ONLY_IN] = np.where(c2 == 0, 1, np.where(c1 == 0, 2, 0))
    return table.sort_values([side_column(TIME_US, 1), side_column(TIME_US, 2)], ascending=False)


def fusion_opportunities(
    type_table: pd.DataFrame,
    group_counts: pd.DataFrame,
    total_groups: int,
    limits: Thresholds,
    whole_trace: bool = True,
) -> list[Opportunity]:
    """Types whose counts differ enough, from matched groups and then whole-trace counts; by time impact.

    `group_counts` is indexed by kernel_type with columns trace{1,2}_count, trace{1,2}_time_us and
    groups_affected, summed over matched group pairs. A difference that the side with fewer kernels of
    the type could hide among its kernels of the unknown type is no opportunity (they could be any type).
    Without `whole_trace` (the traces hold different numbers of steps, so every whole-trace count
    differs by that factor) only matched groups are compared.
    """
    out = []
    for kernel_type, row in group_counts.iterrows():
        if _candidate(kernel_type, row, group_counts) and _significant(row, limits):
            out.append(_opportunity(kernel_type, row, total_groups, "groups"))
    seen = {o.kernel_type for o in out}
    for kernel_type, row in type_table.iterrows() if whole_trace else ():
        if kernel_type in seen or not _candidate(kernel_type, row, type_table):
            continue
        c1, c2 = row[side_column(COUNT, 1)], row[side_column(COUNT, 2)]
        if c1 + c2 > limits.min_global_total and max(c1, c2) > limits.min_ratio * min(c1, c2):
            out.append(_opportunity(kernel_type, row, total_groups, "global"))
    return sorted(out, key=lambda o: -o.time_impact_ms)


def _candidate(kernel_type: str, row: pd.Series, table: pd.DataFrame) -> bool:
    if kernel_type in NON_FUSABLE_TYPES or kernel_type == UNKNOWN_TYPE:
        return False
    return not unknown_could_hide(
        int(row[side_column(COUNT, 1)]), int(row[side_column(COUNT, 2)]), _unknown_counts(table)
    )


def _unknown_counts(table: pd.DataFrame) -> tuple[int, int]:
    if UNKNOWN_TYPE not in table.index:
        return 0, 0
    return int(table.at[UNKNOWN_TYPE, side_column(COUNT, 1)]), int(table.at[UNKNOWN_TYPE, side_column(COUNT, 2)])


def unknown_could_hide(count1: int, count2: int, unknown: tuple[int, int]) -> bool:
    """Could the side with fewer kernels of a type have the missing ones among its extra unclassified kernels?"""
    if count1 == count2:
        return False
    fewer = 0 if count1 < count2 else 1
    return unknown[fewer] - unknown[1 - fewer] >= abs(count1 - count2)


def _significant(row: pd.Series, limits: Thresholds) -> bool:
    low, high = sorted((row[side_column(COUNT, 1)], row[side_column(COUNT, 2)]))
    if high > limits.one_sided_ratio * low:
        return True
    return high > limits.min_ratio * low and low + high > limits.min_group_total


def _opportunity(kernel_type: str, row: pd.Series, total_groups: int, source: str) -> Opportunity:
    c1, c2 = int(row[side_column(COUNT, 1)]), int(row[side_column(COUNT, 2)])
    t1, t2 = float(row[side_column(TIME_US, 1)]) / 1000, float(row[side_column(TIME_US, 2)]) / 1000
    fused_trace = 2 if c2 < c1 else 1
    low, high = min(c1, c2), max(c1, c2)
    return Opportunity(
        kernel_type=str(kernel_type),
        trace1_total=c1,
        trace2_total=c2,
        trace1_avg_per_group=c1 / total_groups if total_groups else 0.0,
        trace2_avg_per_group=c2 / total_groups if total_groups else 0.0,
        trace1_time_ms=t1,
        trace2_time_ms=t2,
        time_ratio=t1 / t2 if t1 > 0 and t2 > 0 else None,
        ratio=high / low if low else None,
        fused_by=PLATFORM_NAMES[fused_trace],
        fused_trace=fused_trace,
        groups_affected=int(row.get(GROUPS_AFFECTED, 0)),
        total_groups=total_groups,
        source=source,
        time_impact_ms=abs(t1 - t2),
        only_in=0 if low else (1 if c2 == 0 else 2),
    )
