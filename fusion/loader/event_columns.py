"""The events of one piece that the loader keeps, as columns: what every decoding path hands the collectors.

A piece is decoded either by the compiled scan (piece_scan.py) or by msgspec (events.py); both end
here, so the kernel table and the CPU-side columns are built one way whatever decoded the bytes.
Names and threads are codes into small per-piece lists of distinct values: the collectors intern
those few values, not one Python object per event.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from itertools import repeat
from typing import Any

import numpy as np
import pandas as pd

from fusion.loader.columns import id_column, id_fields, numbers
from fusion.loader.op_args import ArgValues, EventArgs, ValueMasks, arg_codes

NOT_A_STRING = -1
"""The name code of an event whose name is absent or not a string."""
DROPPED = -1
"""The bucket of an event of a category nobody asked for."""


@dataclass
class EventColumns:
    """Kept events in file order; `bucket` is the caller's number for the event's category."""

    bucket: np.ndarray
    """int8 per event."""
    name: np.ndarray
    """int32 code into `names`; NOT_A_STRING where the name is absent or not a string."""
    names: list[str]
    ts: np.ndarray
    """float64; NaN where the value is not a plain finite number (columns.numbers)."""
    dur: np.ndarray
    thread: np.ndarray
    """int32 code into `threads`."""
    threads: list[tuple[Any, Any]]
    """Distinct (pid, tid) as recorded; None for an absent value, a list or an object."""
    correlation: np.ndarray
    """int64 ids from args; MISSING_ID where unusable (columns.id_column)."""
    stream: np.ndarray
    device: np.ndarray
    has_args: np.ndarray
    """bool: the event's args is an object."""
    args: np.ndarray
    """int32 code into `arg_values` (op_args: the shapes of a cpu_op, the kernel of a launch); NO_ARGS for none."""
    arg_values: list[ArgValues]
    events: int
    """Events in the piece, dropped ones included."""

    def rows(self, selector: np.ndarray | slice) -> EventColumns:
        """The same columns at some rows (the lists of distinct values are shared)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in _ROW_COLUMNS:
            values[name] = values[name][selector]
        return EventColumns(**values)

    def by_bucket(self, count: int) -> list[EventColumns]:
        """The rows of each bucket 0..count-1, in file order."""
        order = np.argsort(self.bucket, kind="stable")
        sizes = np.bincount(self.bucket, minlength=count)[:count]
        ends = np.cumsum(sizes)
        return [self.rows(order[end - size : end]) for size, end in zip(sizes.tolist(), ends.tolist())]

    def __len__(self) -> int:
        return len(self.bucket)


_ROW_COLUMNS = ("bucket", "name", "ts", "dur", "thread", "correlation", "stream", "device", "has_args", "args")


def of_events(events: list[Any], bucket_of: dict[str, int], value_masks: ValueMasks | None = None) -> EventColumns:
    """The columns of msgspec-decoded events (events.Event), with the same values the compiled scan gives;
    `value_masks`: per bucket, the op_args values its events keep.

    Each step looks values up at C speed (map, dict.fromkeys, numpy) where every value has the usual type,
    and tests each value only where one does not."""
    cats = [e.cat for e in events]
    try:
        bucket = np.fromiter(map(bucket_of.get, cats, repeat(DROPPED)), dtype=np.int8, count=len(cats))
    except TypeError:  # a category that is a list or an object: not one of ours
        bucket = np.array([bucket_of.get(c, DROPPED) if type(c) is str else DROPPED for c in cats], dtype=np.int8)
    rows = np.flatnonzero(bucket != DROPPED)
    kept = list(map(events.__getitem__, rows.tolist()))
    name, names = _name_codes([e.name for e in kept])
    thread, threads = _thread_codes([e.pid for e in kept], [e.tid for e in kept])
    args: list[EventArgs | None] = [e.args for e in kept]
    correlation, stream, device = (id_column(values)[0] for values in id_fields(args))
    codes, values = arg_codes(args, bucket[rows], value_masks or {})
    return EventColumns(
        bucket=bucket[rows],
        name=name,
        names=names,
        ts=numbers([e.ts for e in kept]),
        dur=numbers([e.dur for e in kept]),
        thread=thread,
        threads=threads,
        correlation=correlation,
        stream=stream,
        device=device,
        has_args=np.fromiter(map(_is_not_none, args), dtype=bool, count=len(args)),
        args=codes,
        arg_values=values,
        events=len(events),
    )


def _is_not_none(value: Any) -> bool:
    return value is not None


def _name_codes(values: list[Any]) -> tuple[np.ndarray, list[str]]:
    """Codes into the distinct string names, in order of first appearance; NOT_A_STRING for other values."""
    if set(map(type, values)) <= {str}:
        code_of = {name: code for code, name in enumerate(dict.fromkeys(values))}
        return np.fromiter(map(code_of.__getitem__, values), dtype=np.int32, count=len(values)), list(code_of)
    code_of = {}
    codes = [code_of.setdefault(v, len(code_of)) if type(v) is str else NOT_A_STRING for v in values]
    return np.array(codes, dtype=np.int32), list(code_of)


def _thread_codes(pids: list[Any], tids: list[Any]) -> tuple[np.ndarray, list[tuple[Any, Any]]]:
    """Codes into the distinct (pid, tid) pairs as recorded (a list or an object counts as None)."""
    if set(map(type, pids)) <= {int} and set(map(type, tids)) <= {int}:
        try:
            first, second = np.array(pids, dtype=np.int64), np.array(tids, dtype=np.int64)
        except OverflowError:
            pass
        else:
            every = np.ones(len(pids), dtype=bool)
            return distinct_pairs(first, every, second, every)
    code_of: dict[tuple[Any, Any], int] = {}
    codes = [code_of.setdefault((_hashable(p), _hashable(t)), len(code_of)) for p, t in zip(pids, tids)]
    return np.array(codes, dtype=np.int32), list(code_of)


def _hashable(value: Any) -> Any:
    return None if isinstance(value, (list, dict)) else value


def distinct_pairs(
    first: np.ndarray, first_set: np.ndarray, second: np.ndarray, second_set: np.ndarray
) -> tuple[np.ndarray, list[tuple[Any, Any]]]:
    """Codes of (first, second) int64 pairs, numbered in order of first appearance, and the distinct pairs;
    a value whose `set` flag is False is None."""
    keys = [
        pd.factorize(np.where(is_set, values, 0))[0] * 2 + is_set
        for values, is_set in ((first, first_set), (second, second_set))
    ]
    width = int(keys[1].max()) + 1 if len(keys[1]) else 1
    codes, distinct = pd.factorize(keys[0] * width + keys[1])
    rows = np.unique(codes, return_index=True)[1]  # the first row of each pair
    pairs = [
        (a if has_a else None, b if has_b else None)
        for a, has_a, b, has_b in zip(
            first[rows].tolist(), first_set[rows].tolist(), second[rows].tolist(), second_set[rows].tolist()
        )
    ]
    return codes.astype(np.int32), pairs
