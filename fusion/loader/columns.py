"""Event fields to numpy columns: numbers, ids and the args fields the loader reads; and trimming a
categorical column's categories.

Shared by the kernel table (trace.py) and the CPU-side events (cpu_events.py), so both treat odd
values (bools, strings, huge numbers, missing args) the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import xxhash

from fusion import settings

MISSING_ID = -1
"""Stored in an id column when the event does not carry that field."""
_INT64_MAX = 2**63 - 1
_NO_NUMBER = np.nan
_NUMBER_TYPES = frozenset({int, float})
_ID_TYPES = frozenset({int, type(None)})
_NONE_AS_MISSING: dict[Any, int] = {None: MISSING_ID}
"""dict.get(value, value) with this: MISSING_ID for None, the value itself for an int."""


class IdArgs(msgspec.Struct, gc=False):
    """The id fields of an event's `args` (untracked by the garbage collector, as events.Event is)."""

    correlation: Any = None
    stream: Any = None
    device: Any = None


_NO_ARGS = IdArgs()


def _is_plain_number(value: Any) -> bool:
    return (type(value) is float or type(value) is int) and abs(value) < 1e300


def numbers(values: list[Any]) -> np.ndarray:
    """A float64 column; NaN where a value is not a plain finite number (bools, strings, None, huge)."""
    if set(map(type, values)) <= _NUMBER_TYPES:
        try:
            column = np.array(values, dtype=np.float64)
        except OverflowError:
            pass
        else:
            column[~(np.abs(column) < 1e300)] = _NO_NUMBER
            return column
    return np.array([v if _is_plain_number(v) else _NO_NUMBER for v in values], dtype=np.float64)


def id_column(values: list[Any]) -> tuple[np.ndarray, int]:
    """An int64 id column with MISSING_ID where a value is not a non-negative int64; and how many were not.

    Ints and Nones (events without the field) are converted at C speed; other values one by one."""
    if set(map(type, values)) <= _ID_TYPES:
        try:
            column = np.fromiter(map(_NONE_AS_MISSING.get, values, values), dtype=np.int64, count=len(values))
        except OverflowError:
            pass
        else:
            column[column < 0] = MISSING_ID
            return column, int((column == MISSING_ID).sum())
    column = np.array([v if type(v) is int and 0 <= v <= _INT64_MAX else MISSING_ID for v in values], dtype=np.int64)
    return column, int((column == MISSING_ID).sum())  # every usable id is >= 0


def intern_coded(codes: np.ndarray, values: list[Any], table: dict[Any, int]) -> np.ndarray:
    """The code in `table` of each values[code], new values numbered in order of first appearance.

    `values` are a piece's distinct values (a name, a thread) and `codes` index them, so each distinct
    value is looked up once; two codes may hold equal values (a name spelled with and without escapes).
    A name longer than the FUSION_MAX_NAME_CHARS setting is kept as bounded_name of it."""
    order, distinct = pd.factorize(codes)
    limit = settings.max_name_chars()
    table_codes = [table.setdefault(bounded_name(values[code], limit), len(table)) for code in distinct.tolist()]
    return np.array(table_codes, dtype=np.int32)[order]


def bounded_name(value: Any, limit: int) -> Any:
    """A name of at most `limit` characters as it is; a longer one as its first `limit` characters, how long it was
    and a digest of all of it (so two long names with one beginning stay two names). The loader keeps no longer
    name, so a crafted 200 MB name costs its parse, not a copy in every table and report."""
    if not isinstance(value, str) or len(value) <= limit:
        return value
    digest = xxhash.xxh3_64_hexdigest(value.encode("utf-8", "surrogatepass"))
    return f"{value[:limit]}…[{len(value):,} characters; xxh3 {digest}]"


def id_fields(args: Sequence[IdArgs | None]) -> tuple[list[Any], list[Any], list[Any]]:
    """The correlation, stream and device of each event's args; None where the event has no args.

    Written out per field: a comprehension reads an attribute several times faster than getattr or attrgetter."""
    if None in args:
        args = [_NO_ARGS if a is None else a for a in args]
    return [a.correlation for a in args], [a.stream for a in args], [a.device for a in args]


def used_categories(column: pd.Series) -> pd.Categorical:
    """A categorical column without its unused categories (order kept), in linear time: pandas'
    remove_unused_categories sorts the codes."""
    values = column.cat
    codes = values.codes.to_numpy()
    present = codes >= 0
    every = bool(present.all())
    used = np.bincount(codes if every else codes[present], minlength=len(values.categories)) > 0
    if used.all():
        return column.array
    renumbered = (np.cumsum(used) - 1).astype(codes.dtype)
    new_codes = renumbered[codes] if every else np.where(present, renumbered[np.where(present, codes, 0)], -1)
    dtype = pd.CategoricalDtype(values.categories[used], ordered=values.ordered)
    return pd.Categorical.from_codes(new_codes, dtype=dtype, validate=False)


def taken(table: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """table.take(rows).reset_index(drop=True), taken column by column on the arrays (a categorical column on
    its codes): pandas' take of a categorical column costs about ten times a take of its codes."""
    columns: dict[str, Any] = {}
    for name, column in table.items():
        values = column.array
        if isinstance(values, pd.Categorical):
            columns[name] = pd.Categorical.from_codes(values.codes.take(rows), dtype=values.dtype, validate=False)
        elif isinstance(column.dtype, np.dtype):
            columns[name] = column.to_numpy().take(rows)
        else:
            columns[name] = values.take(rows)
    return pd.DataFrame(columns, index=pd.RangeIndex(len(rows)), columns=table.columns, copy=False)
