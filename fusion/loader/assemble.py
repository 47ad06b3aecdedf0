"""The columns of the readers other than Kineto's (rocprofv3, Nsight Systems): GPU work rows and the CPU side,
collected part by part and handed over as the kernel table and CpuEvents that fusion.loader.kineto gives.

Names and threads are interned as they come, so memory follows the rows, not the distinct strings per row.
Timestamps arrive in nanoseconds (as these profilers record them) and are kept in microseconds, as Kineto's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fusion.loader.columns import used_categories
from fusion.loader.cpu_events import CpuEvents, Launches, RangeKind, Ranges
from fusion.loader.op_args import NO_ARGS

NS_PER_US = 1000.0


def intern(values: Iterable[Any], table: dict[Any, int]) -> np.ndarray:
    """The code of each value in `table` (int32), new values numbered in order of first appearance."""
    return np.fromiter((table.setdefault(v, len(table)) for v in values), dtype=np.int32)


def microseconds(start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ts and dur in µs from integer ns timestamps; the duration is taken in integers first (exact)."""
    start, end = np.asarray(start_ns, dtype=np.int64), np.asarray(end_ns, dtype=np.int64)
    return start / NS_PER_US, (end - start) / NS_PER_US


@dataclass
class GpuRows:
    """GPU work rows (kernels, copies, memsets) part by part: name codes into `names`, µs times, ids."""

    names: dict[str, int] = field(default_factory=dict)
    parts: list[tuple[np.ndarray, ...]] = field(default_factory=list)

    def add(
        self,
        names: np.ndarray,
        ts: np.ndarray,
        dur: np.ndarray,
        correlation: np.ndarray,
        stream: np.ndarray,
        device: np.ndarray,
    ) -> None:
        """Rows whose `names` are codes into self.names."""
        columns = (
            names.astype(np.int32),
            ts,
            dur,
            *(np.asarray(c, dtype=np.int64) for c in (correlation, stream, device)),
        )
        self.parts.append(columns)

    def table(self) -> pd.DataFrame:
        """The kernel table (reader columns), sorted by start time; the parts are handed over."""
        parts, self.parts = self.parts, []
        if parts:
            codes, ts, dur, correlation, stream, device = (np.concatenate(c) for c in zip(*parts))
        else:
            codes, ts, dur = np.zeros(0, np.int32), np.zeros(0), np.zeros(0)
            correlation = stream = device = np.zeros(0, np.int64)
        order = np.argsort(ts, kind="stable")
        table = pd.DataFrame(
            {
                "name": pd.Categorical.from_codes(codes[order], categories=list(self.names)),
                "ts": ts[order],
                "dur": dur[order],
                "correlation": correlation[order],
                "stream": stream[order],
                "device": device[order],
            }
        )
        table["name"] = used_categories(table["name"])
        return table


@dataclass
class CpuRows:
    """Runtime launches and CPU ranges part by part, as CpuEvents: names and (pid, tid) threads interned."""

    names: dict[str, int] = field(default_factory=dict)
    threads: dict[tuple[Any, Any], int] = field(default_factory=dict)
    launches: list[tuple[np.ndarray, ...]] = field(default_factory=list)
    ranges: list[tuple[np.ndarray, ...]] = field(default_factory=list)

    def thread_codes(self, pids: Iterable[Any], tids: Iterable[Any]) -> np.ndarray:
        return intern(zip(pids, tids), self.threads)

    def add_launches(
        self, correlation: np.ndarray, ts: np.ndarray, dur: np.ndarray, thread: np.ndarray, name: np.ndarray
    ) -> None:
        """Runtime calls; `thread` codes from thread_codes, `name` codes into self.names."""
        keep = np.asarray(correlation, dtype=np.int64) >= 0
        columns = (np.asarray(correlation, dtype=np.int64), ts, dur, thread.astype(np.int32), name.astype(np.int32))
        self.launches.append(tuple(c[keep] for c in columns))

    def add_ranges(
        self, kind: RangeKind, start: np.ndarray, end: np.ndarray, thread: np.ndarray, name: np.ndarray
    ) -> None:
        keep = end >= start
        kinds = np.full(int(keep.sum()), kind, dtype=np.int8)
        self.ranges.append((kinds, start[keep], end[keep], thread.astype(np.int32)[keep], name.astype(np.int32)[keep]))

    def events(self) -> CpuEvents:
        """The columns; these formats record no launched kernel's name and no op's shapes (NO_ARGS)."""
        launches = _concat(self.launches, (np.int64, np.float64, np.float64, np.int32, np.int32))
        ranges = _concat(self.ranges, (np.int8, np.float64, np.float64, np.int32, np.int32))
        launches.append(np.full(len(launches[0]), NO_ARGS, dtype=np.int32))
        ranges.append(np.full(len(ranges[0]), NO_ARGS, dtype=np.int32))
        return CpuEvents(Launches(*launches), Ranges(*ranges), list(self.names), list(self.threads))


def _concat(parts: list[tuple[np.ndarray, ...]], dtypes: tuple[type, ...]) -> list[np.ndarray]:
    if not parts:
        return [np.zeros(0, dtype) for dtype in dtypes]
    return [np.concatenate(columns).astype(dtype, copy=False) for columns, dtype in zip(zip(*parts), dtypes)]
