"""On-disk cache of comparisons, so re-opening an analysed pair skips the analysis.

An entry is a sealed file (fusion.cache.sealed) beside the table cache's, keyed by both traces' content
digests, labels and sources, the parameters, the analysis fingerprint (the fusion package's code
and rules, the user's rules file) and FORMAT_VERSION. The Comparison's fields are written as
MessagePack plain data: DataFrames as Arrow IPC, arrays as dtype, shape and bytes (or a list of
strings), dataclasses as their fields; never pickle. The traces themselves are not in the entry:
the caller's, as compare() compares them (compared_views), are attached, also where a field refers to one of them.

A result is cached only when it reads back equal to itself, and an entry is used only when its
checksum and header verify; anything else is a miss (the analysis runs, one warning is logged).
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa

from fusion.cache.reopen import EXPORT_PART, FORMAT_VERSION, result_key_of
from fusion.cache.sealed import Damaged, frame_bytes, frame_from, seal
from fusion.cache.tables import RESULT_SUFFIX, CacheDir
from fusion.comparison import result as result_module
from fusion.comparison.pair import Progress, compare, compared_views
from fusion.comparison.result import Comparison
from fusion.model.phases import ALL
from fusion.model.trace import Trace
from fusion.report.render import to_json

log = logging.getLogger(__name__)

_FIELDS_PART = "fields"
_FRAME, _ARRAY, _STRINGS, _TRACE = 1, 2, 3, 4
_SKIPPED = ("trace1", "trace2")
_ALLOWED_PACKAGE = "fusion."


class ResultCache(CacheDir):
    """Comparisons keyed by what they were computed from; shares the table cache's directory and cap."""

    def get(self, trace1: Trace, trace2: Trace, params: dict[str, Any]) -> Comparison | None:
        """The cached comparison of these traces with these parameters, or None."""
        key = result_key(trace1, trace2, params)
        if key is None:
            return None
        entry = self.root / f"{key}{RESULT_SUFFIX}"
        found = self.read(entry, {"format": FORMAT_VERSION, "key": key})
        if found is None:
            return None
        views = compared_views(
            trace1, trace2, keep_unlaunched=bool(params.get("keep_unlaunched")), phase=params.get("phase", ALL)
        )
        try:
            return decode(found[1][_FIELDS_PART], *views)
        except (Damaged, AttributeError, KeyError, TypeError, ValueError, msgspec.MsgspecError) as exc:
            log.warning("%s: %s: ignored and rebuilt", self._name(entry), exc)
            return None

    def put(self, comparison: Comparison, params: dict[str, Any]) -> bool:
        """Write the comparison's entry; False when it cannot be cached exactly or the cache cannot take it."""
        if self.problem is not None:
            return False
        key = result_key(comparison.trace1, comparison.trace2, params)
        if key is None:
            return False
        try:
            data = encode(comparison)
            _check_round_trip(comparison, decode(memoryview(data), comparison.trace1, comparison.trace2))
            export = to_json(comparison)
        except (TypeError, ValueError, msgspec.MsgspecError, pa.ArrowException) as exc:
            log.warning("comparison not cached: %s", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            return False
        chunks = seal({"format": FORMAT_VERSION, "key": key}, {_FIELDS_PART: data, EXPORT_PART: export.encode()})
        return self.write(self.root / f"{key}{RESULT_SUFFIX}", chunks)


_default: dict[tuple[Path, int], ResultCache] = {}


def default_cache() -> ResultCache:
    """One ResultCache per configured directory and cap, so a problem with it is reported once per process."""
    cache = ResultCache()
    return _default.setdefault((cache.root, cache.max_bytes), cache)


def cached_compare(
    trace1: Trace, trace2: Trace, *, cache: ResultCache | None = None, progress: Progress | None = None, **params: Any
) -> Comparison:
    """compare(trace1, trace2, **params), from `cache` (default: the configured one) when computed before."""
    cache = cache if cache is not None else default_cache()
    found = cache.get(trace1, trace2, params)
    if found is not None:
        return found
    comparison = compare(trace1, trace2, progress=progress, **params)
    cache.put(comparison, params)
    return comparison


def result_key(trace1: Trace, trace2: Trace, params: dict[str, Any]) -> str | None:
    """What a comparison depends on: both traces' contents and names, the parameters and the analysis.

    None when a parameter is not plain JSON data: such a comparison is not cached."""
    return result_key_of(
        ((trace1.digest, trace1.label, trace1.source), (trace2.digest, trace2.label, trace2.source)), params
    )


def encode(comparison: Comparison) -> bytes:
    """The comparison's fields but the traces (and private caches) as MessagePack."""
    return msgspec.msgpack.encode(_fields(comparison, _frame_ext))


def _fields(comparison: Comparison, frame: Callable[[pd.DataFrame], Any]) -> dict[str, Any]:
    """The comparison's fields but the traces (and private caches) as plain data, each frame as `frame` makes it."""
    traces = (comparison.trace1, comparison.trace2)
    fields = {}
    for field in dataclasses.fields(comparison):
        if field.name in _SKIPPED or field.name.startswith("_"):
            continue
        value = getattr(comparison, field.name)
        fields[field.name] = {"class": _class_name(value), "value": _plain(value, traces, frame)}
    return fields


def decode(data: memoryview, trace1: Trace, trace2: Trace) -> Comparison:
    """The Comparison of `encode`, with the given traces attached."""
    traces = (trace1, trace2)
    raw = msgspec.msgpack.decode(data, ext_hook=lambda code, payload: _from_ext(code, payload, traces))
    hints = typing.get_type_hints(Comparison, globalns=vars(result_module))
    values: dict[str, Any] = {}
    for name, stored in raw.items():
        cls = _class_named(stored["class"]) if stored["class"] else hints[name]
        values[name] = msgspec.convert(stored["value"], cls, dec_hook=_decode_custom, strict=False)
    return Comparison(trace1=trace1, trace2=trace2, **values)


def _frame_ext(frame: pd.DataFrame) -> msgspec.msgpack.Ext:
    return msgspec.msgpack.Ext(_FRAME, frame_bytes(frame))


def _plain(value: Any, traces: tuple[Trace, Trace], frame: Callable[[pd.DataFrame], Any] = _frame_ext) -> Any:
    """Plain data for MessagePack: dataclasses by field, arrays and the compared traces as extensions, frames as
    `frame` makes them (default: an Arrow extension)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Trace):
        side = next((i for i, trace in enumerate(traces) if trace is value), None)
        if side is None:
            raise TypeError("a trace other than the two compared cannot be cached")
        return msgspec.msgpack.Ext(_TRACE, bytes([side]))
    if isinstance(value, pd.DataFrame):
        return frame(value)
    if isinstance(value, np.ndarray):
        return _array_ext(value)
    if isinstance(value, np.generic):
        return value.item()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        public = (f.name for f in dataclasses.fields(value) if not f.name.startswith("_"))
        return {name: _plain(getattr(value, name), traces, frame) for name in public}
    if isinstance(value, dict):
        return {key: _plain(item, traces, frame) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item, traces, frame) for item in value]
    raise TypeError(f"a {type(value).__name__} cannot be cached")


def _array_ext(array: np.ndarray) -> msgspec.msgpack.Ext:
    """Numbers as dtype, shape and bytes; object arrays only when they hold strings."""
    if not array.dtype.hasobject:
        array = np.ascontiguousarray(array)
        return msgspec.msgpack.Ext(_ARRAY, msgspec.msgpack.encode([array.dtype.str, array.shape, array.tobytes()]))
    items = array.ravel().tolist()
    if not all(isinstance(item, str) for item in items):
        raise TypeError("an array of Python objects other than strings cannot be cached")
    return msgspec.msgpack.Ext(_STRINGS, msgspec.msgpack.encode([array.shape, items]))


def _class_name(value: Any) -> str | None:
    """The class to rebuild a dataclass field value with, when its annotation does not say (a Protocol)."""
    cls = type(value)
    if dataclasses.is_dataclass(value) and cls.__module__.startswith(_ALLOWED_PACKAGE):
        return f"{cls.__module__}:{cls.__qualname__}"
    return None


def _class_named(name: str) -> type:
    """A dataclass of the fusion package by name; anything else is refused (no arbitrary imports)."""
    module, _, qualname = name.partition(":")
    if not module.startswith(_ALLOWED_PACKAGE) or not qualname.isidentifier():
        raise ValueError(f"class {name!r} is not one of ours")
    try:
        cls = getattr(importlib.import_module(module), qualname)
    except (ImportError, AttributeError):
        raise ValueError(f"there is no class {name!r}") from None
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise ValueError(f"{name!r} is not a dataclass")
    return cls


def _from_ext(code: int, data: memoryview, traces: tuple[Trace, Trace]) -> Any:
    if code == _FRAME:
        return frame_from(data)
    if code == _ARRAY:
        dtype, shape, raw = msgspec.msgpack.decode(data)
        return np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape).copy()
    if code == _STRINGS:
        shape, items = msgspec.msgpack.decode(data)
        array = np.empty(len(items), dtype=object)
        array[:] = items
        return array.reshape(shape)
    if code == _TRACE:
        return traces[data[0]]
    raise Damaged(f"unknown extension {code}")


def _decode_custom(cls: type, value: Any) -> Any:
    if isinstance(value, cls):
        return value
    raise TypeError(f"expected {cls.__name__}, found {type(value).__name__}")


class _SameFrame:
    """A frame that equals another with the same columns, index, dtypes and values (NaN where it has NaN; a list
    cell equals a tuple of the same items, as Arrow stores both and frame_from gives back tuples). The round-trip
    check compares frames this way instead of encoding the read-back frames to Arrow a second time."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _SameFrame):
            return NotImplemented
        mine, theirs = self.frame, other.frame
        if not (
            mine.columns.equals(theirs.columns)
            and mine.dtypes.equals(theirs.dtypes)
            and mine.index.dtype == theirs.index.dtype
            and mine.index.names == theirs.index.names
            and mine.index.equals(theirs.index)
        ):
            return False
        return mine.equals(theirs) or all(_same_cells(mine.iloc[:, i], theirs.iloc[:, i]) for i in range(mine.shape[1]))

    __hash__ = None  # type: ignore[assignment]


def _same_cells(mine: pd.Series, theirs: pd.Series) -> bool:
    if mine.equals(theirs):
        return True
    return mine.dtype == object and mine.map(_as_tuple).equals(theirs.map(_as_tuple))


def _as_tuple(cell: Any) -> Any:
    return tuple(cell) if isinstance(cell, list) else cell


def _check_round_trip(original: Comparison, again: Comparison) -> None:
    """ValueError unless the result reads back as it was: the same fields, frames with their dtypes (so the same
    export too: to_json reads only the fields)."""
    if _fields(again, _SameFrame) != _fields(original, _SameFrame):
        raise ValueError("the result does not read back equal")
