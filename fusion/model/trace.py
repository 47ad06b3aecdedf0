"""The trace model: one loaded trace's facts and its kernel table (fusion.model.columns names the columns).

A Trace is built from a reader's TraceRecords by fusion.model.build (launching ops, phases, steps) and its
kernels are typed by fusion.classify; every later stage reads it and none changes it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fusion.loader.columns import taken, used_categories
from fusion.model.columns import NAME_STATS

_FRAME_FIELDS = ("kernels", "names")


@dataclass(frozen=True)
class FrameLoader:
    """A table not built yet: its row count, and how to build it (the table cache reads it on demand)."""

    rows: int
    build: Callable[[], pd.DataFrame]


def _frame_slot(name: str) -> str:
    return f"_{name}_frame"


class _Frame:
    """A DataFrame field of Trace that may be given a FrameLoader: the frame is built on first access and kept.

    A re-open whose comparison is cached never needs the kernel table, so it never converts it."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = _frame_slot(name)

    def __get__(self, trace: Trace | None, owner: type | None = None) -> pd.DataFrame:
        if trace is None:
            raise AttributeError(self.slot)  # no default value: the dataclass field is required
        value = trace.__dict__[self.slot]
        if isinstance(value, FrameLoader):
            value = trace.__dict__[self.slot] = value.build()
        return value

    def __set__(self, trace: Trace, value: pd.DataFrame | FrameLoader) -> None:
        trace.__dict__[self.slot] = value

    def rows(self, trace: Trace) -> int:
        value = trace.__dict__[self.slot]
        return value.rows if isinstance(value, FrameLoader) else len(value)


@dataclass
class Trace:
    """One loaded trace; `kernels` is sorted by start time and its row number is the kernel's index."""

    label: str
    source: str
    platform: str
    platform_evidence: str
    gpu: str
    gpu_recorded: bool
    device_properties: list[dict[str, Any]]
    kernels: pd.DataFrame = _Frame()  # type: ignore[assignment]
    names: pd.DataFrame = _Frame()  # type: ignore[assignment]
    digest: str
    warnings: list[str] = field(default_factory=list)
    format: str = "Kineto JSON"
    """The file format it was read from (fusion.loader.formats)."""
    file_hash: str = ""
    """xxh3-128 of the file's bytes as read ('' when not known): the table cache serves this trace for a file only
    when the file's bytes hash to it."""
    capture: dict[str, Any] | None = None
    """How the graph replays were tied to a capture trace (fusion.model.capture), None when none was given."""

    @property
    def kernel_count(self) -> int:
        return Trace.__dict__["kernels"].rows(self)

    def __getstate__(self) -> dict[str, Any]:
        """For pickling: every table built (a FrameLoader holds a reader, which does not pickle)."""
        return {**self.__dict__, **{_frame_slot(name): getattr(self, name) for name in _FRAME_FIELDS}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        """From __getstate__, or from a Trace pickled before its tables could be lazy (plain attributes)."""
        self.__dict__.update({_frame_slot(k) if k in _FRAME_FIELDS else k: v for k, v in state.items()})

    @property
    def kernel_time_us(self) -> float:
        return float(self.kernels["dur"].sum())

    def subset(self, rows: np.ndarray, warning: str) -> Trace:
        """The trace with only the kernels at `rows` (ascending, renumbered), its names table recounted over them,
        and `warning` added: what was left out and why. Rows that are one contiguous range are sliced, not
        copied (copy-on-write: the view shares the trace's columns until one of them is written)."""
        contiguous = len(rows) > 0 and int(rows[-1]) - int(rows[0]) + 1 == len(rows)
        if contiguous:
            kernels = self.kernels.iloc[int(rows[0]) : int(rows[-1]) + 1].reset_index(drop=True)
        else:
            kernels = taken(self.kernels, rows)
        kernels["name"] = used_categories(kernels["name"])
        stats = name_stats(kernels)
        names = self.names.drop(columns=list(NAME_STATS)).loc[stats.index].join(stats)
        return dataclasses.replace(
            self,
            kernels=kernels,
            names=names.sort_values("time_us", ascending=False),
            warnings=[*self.warnings, warning],
        )


def default_label(platform: str, gpu: str, recorded: bool, source: str) -> str:
    """'platform GPU' without repeating the vendor; unrecorded names fall back to the file name."""
    if not recorded:
        return f"{platform} GPU ({Path(source).name})" if platform != "unknown" else Path(source).name
    return gpu if gpu.upper().startswith(platform.upper()) else f"{platform} {gpu}"


def name_stats(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per distinct kernel name (a string index, in the categories' order): kernel count and total time.
    Grouped over all categories, the unused ones then dropped: observed=True costs pandas a hash of the codes."""
    stats = kernels.groupby("name", observed=False)["dur"].agg(count="size", time_us="sum")
    stats = stats[stats["count"].to_numpy() > 0]
    stats.index = stats.index.astype(str)
    stats.index.name = "name"
    return stats
