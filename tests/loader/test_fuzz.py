"""Fuzzing the loader and the analysis: whatever the bytes, the only failure is a TraceError.

Seeds are small real traces (when ../shared is present) and builder-made ones (always), mutated
at the byte level (flips, truncations, insertions, deletions, duplicated slices, gzip on top) and
at the JSON level (fields of random events deleted or retyped). A load that succeeds must give a
consistent kernel table; a structurally valid mutation must load, with the kernels an independent
reading of the JSON expects. Examples are derandomized, so every run tries the same inputs.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from contextlib import ExitStack
from typing import Any
from unittest import mock

import numpy as np
import pytest
from builders import SHARED_TRACES, kineto_trace
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fusion.classify.trace import load
from fusion.comparison.pair import compare
from fusion.errors import TraceError
from fusion.loader import events as events_module
from fusion.loader import reader
from fusion.model.columns import KERNEL_COLUMNS
from fusion.model.trace import Trace
from fusion.report import render as report

FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
SHARED_SEEDS = {
    "AMD": ("tl_mi300_bert_small", "tl_vllm_decode_full_exec"),
    "NVIDIA": ("tl_h100_bert_small",),
}


def _seeds(platform: str) -> list[bytes]:
    """Decompressed seed traces of one platform: the shared ones that exist, and a built one."""
    found = []
    for name in SHARED_SEEDS[platform]:
        folder = SHARED_TRACES / name
        found += [gzip.decompress(path.read_bytes()) for path in sorted(folder.glob("*.json.gz"))]
    return found + [kineto_trace(platform, steps=4)]


TRIMMED_EVENTS = 300
"""Events kept of each seed in its trimmed copy (evenly spaced, so every kind of event the seed has)."""


def _trimmed(doc: dict) -> dict:
    events = doc["traceEvents"]
    return {**doc, "traceEvents": events[:: -(-len(events) // TRIMMED_EVENTS)]}


SEEDS = {platform: _seeds(platform) for platform in SHARED_SEEDS}
ALL_SEEDS = SEEDS["AMD"] + SEEDS["NVIDIA"]
DOCS = [json.loads(seed) for seed in ALL_SEEDS]
TRIMMED = [_trimmed(doc) for doc in DOCS if len(doc["traceEvents"]) > TRIMMED_EVENTS]
DOCS += TRIMMED
"""The seeds as documents, and a trimmed copy of each large one: the JSON-level mutations' seeds."""
ALL_SEEDS += [json.dumps(doc).encode() for doc in TRIMMED]
"""The byte-level mutations' seeds: the real files' bytes, and the trimmed copies (for tiny pieces)."""
PIECE_SIZES = (None, 97, 4096, 1 << 16)
"""None keeps the real piece size; small ones make the loader cut inside every kind of value, and decode
the pieces with the compiled scan (which declines what msgspec must judge)."""
TINY_PIECE_MAX_BYTES = 1 << 17
"""The largest document loaded in pieces under 1 KiB: a 1 MB one takes ~2 s that way (12,000 pieces) and cuts
no kind of value its trimmed copy does not."""


def piece_sizes(data: bytes) -> st.SearchStrategy[int | None]:
    """The piece sizes to load `data` in: all of PIECE_SIZES for a small document, no tiny ones for a large."""
    small_enough = len(data) <= TINY_PIECE_MAX_BYTES
    return st.sampled_from([size for size in PIECE_SIZES if small_enough or size is None or size >= 1024])


def load_in_pieces(data: bytes, piece_size: int | None) -> Trace:
    with ExitStack() as stack:
        if piece_size:
            stack.enter_context(mock.patch.object(events_module, "PIECE_SIZE", piece_size))
            stack.enter_context(mock.patch.object(events_module, "COMPILED_SCAN_MIN_BYTES", 0))
            stack.enter_context(mock.patch.object(reader, "READ_SIZE", max(64, piece_size // 2)))
        return load(data, name="fuzzed.json")


def load_or_trace_error(data: bytes, piece_size: int | None = None) -> Trace | None:
    """The Trace, or None after a well-formed TraceError; anything else propagates and fails the test."""
    try:
        trace = load_in_pieces(data, piece_size)
    except TraceError as exc:
        assert exc.source == "fuzzed.json"
        assert exc.problem and "\n" not in exc.problem
        event(f"refused: {re.sub(r'[0-9(].*', '', exc.problem).strip()}")
        return None
    event("loaded")
    assert_consistent(trace)
    return trace


def assert_consistent(trace: Trace) -> None:
    table = trace.kernels
    assert tuple(table.columns) == KERNEL_COLUMNS
    ts, dur = table["ts"].to_numpy(), table["dur"].to_numpy()
    assert np.isfinite(ts).all() and np.isfinite(dur).all()
    assert (dur >= 0).all()
    assert (np.diff(ts) >= 0).all()
    assert table["type"].notna().all()
    assert int(trace.names["count"].sum()) == len(table) == trace.kernel_count
    assert math.isfinite(trace.kernel_time_us)
    assert all(isinstance(w, str) for w in trace.warnings)
    assert re.fullmatch(r"[0-9a-f]{64}(:device\d+)?", trace.digest)  # a multi-GPU trace's digest names its device


# -- byte-level mutations


@st.composite
def byte_mutations(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(ALL_SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "duplicate"]))
        at = draw(st.integers(0, len(data)))
        if kind == "flip" and at < len(data):
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "truncate":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(
                st.sampled_from([b",", b"}", b"]", b'"', b"\\", b"{", b"[", b"\xff", b"\x00", b"NaN"])
                | st.binary(min_size=1, max_size=16)
            )
        elif kind == "delete":
            del data[at : at + draw(st.integers(1, 64))]
        else:
            start = draw(st.integers(0, len(data)))
            data[at:at] = data[start : start + draw(st.integers(1, 4096))]
    return bytes(data)


@settings(FUZZ, max_examples=150)
@given(data=byte_mutations(), pieces=st.data())
def test_byte_mutations_raise_only_trace_error(data: bytes, pieces: st.DataObject) -> None:
    load_or_trace_error(data, pieces.draw(piece_sizes(data), label="piece_size"))


@st.composite
def gzip_mutations(draw: st.DrawFn) -> bytes:
    packed = bytearray(gzip.compress(draw(byte_mutations()), compresslevel=1))
    kind = draw(st.sampled_from(["intact", "flip", "truncate", "append"]))
    at = draw(st.integers(0, len(packed) - 1))
    if kind == "flip":
        packed[at] ^= draw(st.integers(1, 255))
    elif kind == "truncate":
        del packed[at:]
    elif kind == "append":
        packed += draw(st.binary(min_size=1, max_size=32))
    return bytes(packed)


@settings(FUZZ, max_examples=100)
@given(data=gzip_mutations())
def test_gzip_wrapped_mutations_raise_only_trace_error(data: bytes) -> None:
    load_or_trace_error(data)


# -- JSON-level mutations

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)
"""Any value strict JSON can hold, big integers included."""
EVENT_FIELDS = ["cat", "name", "ts", "dur", "args", "ph", "pid", "tid"]
ARG_FIELDS = ["correlation", "stream", "device", "External id"]
NON_JSON_NUMBERS = [math.nan, math.inf, -math.inf]
KERNEL_CATS = ["kernel", "Kernel", "cuda_runtime", "cpu_op", "gpu_memcpy"]


@st.composite
def field_mutations(draw: st.DrawFn, *, strict: bool) -> tuple[dict, bytes]:
    """A seed document with fields of random events deleted or retyped; strict: the result is valid JSON."""
    doc = dict(draw(st.sampled_from(DOCS)))
    events = list(doc["traceEvents"])
    for _ in range(draw(st.integers(1, 12))):
        at = draw(st.integers(0, len(events) - 1))
        events[at] = _mutate_event(draw, events[at])
    if draw(st.booleans()):
        doc[draw(st.sampled_from(["deviceProperties", "roctracer_version", "traceName"]))] = draw(JSON_VALUES)
    doc["traceEvents"] = events
    if not strict:
        _break(draw, doc)
    return doc, json.dumps(doc, allow_nan=not strict).encode()


def _break(draw: st.DrawFn, doc: dict) -> None:
    """Make `doc` something the loader must refuse: a NaN or Infinity, a non-object entry, no event list."""
    events = doc["traceEvents"]
    at = draw(st.integers(0, len(events) - 1))
    kind = draw(st.sampled_from(["constant", "entry", "events"]))
    if kind == "constant":
        events[at] = {**events[at], draw(st.sampled_from(EVENT_FIELDS)): draw(st.sampled_from(NON_JSON_NUMBERS))}
    elif kind == "entry":
        events[at] = draw(JSON_VALUES.filter(lambda value: not isinstance(value, dict)))
    elif draw(st.booleans()):
        doc["traceEvents"] = draw(JSON_VALUES.filter(lambda value: not isinstance(value, list)))
    else:
        del doc["traceEvents"]


def _mutate_event(draw: st.DrawFn, event: Any) -> Any:
    if not isinstance(event, dict):
        return event
    event = dict(event)
    key = draw(st.sampled_from(EVENT_FIELDS))
    action = draw(st.sampled_from(["delete", "retype", "args", "kernel"]))
    if action == "delete":
        event.pop(key, None)
    elif action == "retype":
        event[key] = draw(JSON_VALUES)
    elif action == "args" and isinstance(event.get("args"), dict):
        event["args"] = {**event["args"], draw(st.sampled_from(ARG_FIELDS)): draw(JSON_VALUES)}
    else:
        event["cat"] = draw(st.sampled_from(KERNEL_CATS))
    return event


def expected_kernels(doc: dict) -> int:
    """The kernel table's row count read straight from the JSON (kernels, copies and memsets, in today's and
    older Kineto's category names; of one GPU): the loader's rules, written independently."""
    rows = set()
    gpu_work = ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset")
    for entry in doc["traceEvents"]:
        if entry.get("cat") not in gpu_work or not isinstance(entry.get("name"), str):
            continue
        ts, dur = entry.get("ts"), entry.get("dur")
        if not (_usable_number(ts) and _usable_number(dur)) or dur < 0:
            continue
        args = entry.get("args")
        ids = tuple(_id(args.get(k)) if isinstance(args, dict) else -1 for k in ("correlation", "stream", "device"))
        rows.add((entry["name"], float(ts), float(dur), ids))
    return len(_one_device(rows))


def _one_device(rows: set[tuple]) -> list[tuple]:
    """The rows of the one GPU the loader reads a multi-GPU file as: the device with the most kernel time (the
    lowest number of a tie); rows of no device are left out then."""
    time: dict[int, float] = {}
    for _, _, dur, (_, _, device) in rows:
        if device >= 0:
            time[device] = time.get(device, 0.0) + dur
    if len(time) <= 1:
        return list(rows)
    chosen = max(sorted(time), key=time.__getitem__)
    return [row for row in rows if row[3][2] == chosen]


def _usable_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) < 1e300


def _id(value: Any) -> int:
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63
    return value if ok else -1


@settings(FUZZ, max_examples=100)
@given(case=field_mutations(strict=True), pieces=st.data())
def test_valid_json_with_odd_fields_loads_the_expected_kernels(case: tuple[dict, bytes], pieces: st.DataObject):
    doc, data = case
    trace = load_in_pieces(data, pieces.draw(piece_sizes(data), label="piece_size"))
    assert_consistent(trace)
    assert trace.kernel_count == expected_kernels(doc)


@settings(FUZZ, max_examples=100)
@given(case=field_mutations(strict=False), pieces=st.data())
def test_non_strict_json_is_refused_with_a_trace_error(case: tuple[dict, bytes], pieces: st.DataObject) -> None:
    _, data = case
    with pytest.raises(TraceError):
        load_in_pieces(data, pieces.draw(piece_sizes(data), label="piece_size"))


# -- the analysis on mutated pairs


def _refuse_constant(name: str) -> None:
    raise ValueError(f"non-strict JSON constant {name}")


@settings(FUZZ, max_examples=20)
@given(first=field_mutations(strict=True), second=field_mutations(strict=True), raw=byte_mutations())
def test_compare_of_mutated_traces_gives_strict_json(first, second, raw: bytes) -> None:
    traces = [load_or_trace_error(data) for data in (first[1], second[1], raw)]
    pairs = [(traces[0], traces[1]), (traces[2] or traces[1], traces[0])]
    for trace1, trace2 in pairs:
        if trace1 is None or trace2 is None:
            continue
        try:
            comparison = compare(trace1, trace2, min_group_size=2)
        except TraceError:
            continue
        json.loads(report.to_json(comparison), parse_constant=_refuse_constant)
        assert isinstance(report.to_text(comparison), str)
        assert all(isinstance(text, str) for text in report.to_csv(comparison).values())


# -- the structural scan against a plain reading of the grammar

TRICKY_TEXT = st.text(alphabet='"\\},{[]: ab\u00e9', max_size=12)
"""Strings made of the bytes that matter to cutting: quotes, backslashes, brackets, commas."""
TRICKY_VALUES = st.recursive(
    st.none() | st.integers() | TRICKY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TRICKY_TEXT, inner, max_size=3),
    max_leaves=8,
)


def reference_cuts(body: bytes) -> tuple[list[int], list[int], int]:
    """Byte by byte: the top-level commas of an array body, the brackets that close a top-level element,
    and the position of the array's closing bracket."""
    commas, closes, depth, inside, escaped = [], [], 0, False, False
    for at, byte in enumerate(body):
        if inside:
            escaped, inside = (not escaped and byte == 0x5C), inside and (escaped or byte != 0x22)
        elif byte == 0x22:
            inside = True
        elif byte in b"{[":
            depth += 1
        elif byte in b"}]":
            depth -= 1
            if depth < 0:
                return commas, closes, at
            if depth == 0:
                closes.append(at)
        elif byte == 0x2C and depth == 0:
            commas.append(at)
    raise AssertionError("no end")


@settings(FUZZ, max_examples=200)
@given(
    values=st.lists(TRICKY_VALUES, max_size=6), splits=st.lists(st.integers(0, 400), max_size=5), spaced=st.booleans()
)
def test_scan_finds_the_top_level_commas_and_the_end_wherever_blocks_split(values, splits, spaced: bool) -> None:
    text = json.dumps(values, ensure_ascii=False, indent=1 if spaced else None).encode()
    body = text[1:]
    commas, closes, end = reference_cuts(body)
    scan = events_module._ArrayScan()
    edges = sorted({0, len(body), *(s for s in splits if s < len(body))})
    boundaries = []
    for start, stop in zip(edges, edges[1:]):
        scan.feed(body[start:stop], start)
        boundaries.append(scan.boundary)
    assert scan.end == end
    assert scan.boundary == max([*commas, *(at + 1 for at in closes)], default=-1)
    assert boundaries == sorted(boundaries)


@settings(FUZZ, max_examples=60)
@given(names=st.lists(TRICKY_TEXT, min_size=1, max_size=30), piece_size=st.sampled_from([97, 256, 4096]))
def test_names_full_of_brackets_and_escapes_load_in_any_pieces(names: list[str], piece_size: int) -> None:
    events = [
        {"cat": "kernel", "name": name or "k", "ts": i, "dur": 1.0, "args": {"correlation": i}}
        for i, name in enumerate(names)
    ]
    trace = load_in_pieces(json.dumps({"traceEvents": events, "n": "]}"}).encode(), piece_size)
    assert list(trace.kernels["name"].astype(str)) == [e["name"] for e in events]
