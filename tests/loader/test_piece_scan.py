"""The compiled scan of a piece gives exactly the columns msgspec's decode gives, or declines the piece.

Declining is always safe (events.py then decodes with msgspec, which names any problem); accepting
a piece msgspec refuses, or giving other values, would not be. So every test compares the two paths
row by row, and checks that the scan accepts what real traces hold.
"""

from __future__ import annotations

import gzip
import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest import mock

import msgspec
import numpy as np
import pandas as pd
import pytest
from builders import SHARED_TRACES, kernel_event, shared_absent, trace_json
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fusion import compiled
from fusion.__main__ import main
from fusion.classify.trace import load
from fusion.errors import TraceError
from fusion.loader import events as events_module
from fusion.loader import piece_scan
from fusion.loader.cpu_events import RangeKind
from fusion.loader.event_columns import EventColumns, of_events
from fusion.loader.kineto import _BUCKET, read_kineto, value_masks
from fusion.loader.op_args import SHAPE_KEYS
from fusion.loader.piece_scan import category_table, scan_piece, value_mask_table

TABLE = category_table(_BUCKET)
CHECKS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def msgspec_columns(data: bytes, launch_kernels: bool = False) -> EventColumns | None:
    """What events.py gets from msgspec for a piece; None where msgspec refuses it."""
    try:
        return of_events(events_module._decode_events("piece", data, 1, 0), _BUCKET, value_masks(launch_kernels))
    except TraceError:
        return None


def _float(value: float) -> str:
    return "nan" if math.isnan(value) else value.hex()  # tells -0.0 from 0.0


ROW_FIELDS = ("bucket", "name", "ts", "dur", "thread", "correlation", "stream", "device", "has_args", "args")


def rows(columns: EventColumns) -> list[tuple]:
    """Each kept event with its name and thread resolved: codes may differ, values may not. (Plain lists: a
    DataFrame per piece cost more than the scan, in thousands of table cases.)"""
    names, threads, arg_values = columns.names, columns.threads, columns.arg_values
    return [
        (
            bucket,
            None if name < 0 else names[name],
            _float(ts),
            _float(dur),
            threads[thread],
            correlation,
            stream,
            device,
            has_args,
            None if args < 0 else arg_values[args],
        )
        for bucket, name, ts, dur, thread, correlation, stream, device, has_args, args in zip(
            *(getattr(columns, field).tolist() for field in ROW_FIELDS), strict=True
        )
    ]


def assert_same_or_declined(data: bytes, launch_kernels: bool = False) -> EventColumns | None:
    scanned = scan_piece(data, TABLE, value_mask_table(value_masks(launch_kernels)))
    expected = msgspec_columns(data, launch_kernels)
    if scanned is not None:
        assert expected is not None, "the scan accepted a piece msgspec refuses"
        assert scanned.events == expected.events
        assert rows(scanned) == rows(expected)
    return scanned


# -- specific values


KERNEL = {
    "ph": "X",
    "cat": "kernel",
    "name": "k",
    "pid": 0,
    "tid": 7,
    "ts": 5.5,
    "dur": 1.25,
    "args": {"correlation": 3, "stream": 7, "device": 0, "grid": [1, 2, 3]},
}


def piece(*events: Any, raw: dict[str, str] | None = None) -> bytes:
    """A piece of these events; `raw` replaces quoted placeholders with literal JSON text."""
    text = json.dumps(list(events), ensure_ascii=False)
    for placeholder, literal in (raw or {}).items():
        text = text.replace(json.dumps(placeholder), literal)
    return text.encode()


@pytest.mark.parametrize(
    "literal",
    [
        "0",
        "-0",
        "-0.0",
        "0.5",
        "1e3",
        "1E+2",
        "2.5e-3",
        "1428625731000.123",
        "6016997148018.571",
        "9007199254740993",
        "9007199254740993.5",
        "123456789012345678901234567890",
        "1" + "0" * 400,
        "1e-400",
        "1e299",
        "0.1234567890123456789012",
        "-3.0e22",
        "0.0000000000000000000000000001",
    ],
)
def test_numbers_convert_exactly(literal: str) -> None:
    data = piece({**KERNEL, "ts": "TS", "dur": "TS"}, raw={"TS": literal})
    assert assert_same_or_declined(data) is not None


@pytest.mark.parametrize("literal", ["1e400", "-1e400", "1e305", "17976931348623157e292"])
@pytest.mark.parametrize("cat", ["kernel", "ac2g"])
def test_a_float_near_the_end_of_float64_is_left_to_msgspec(literal: str, cat: str) -> None:
    """msgspec refuses a float beyond float64 in any event, kept or dropped."""
    data = piece({**KERNEL, "cat": cat, "ts": "TS"}, raw={"TS": literal})
    assert scan_piece(data, TABLE) is None


OP = {
    "ph": "X",
    "cat": "cpu_op",
    "name": "aten::linear",
    "pid": 1,
    "tid": 1,
    "ts": 1.0,
    "dur": 9.0,
    "args": {
        "External id": 4,
        "Input Dims": [[16, 559, 1024], [1024, 1024], [1024]],
        "Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"],
        "Input Strides": [[572416, 1024, 1], [1024, 1], [1]],
        "Concrete Inputs": ["", "", ""],
    },
}
LAUNCH = {**KERNEL, "cat": "cuda_runtime", "name": "cudaLaunchKernel", "args": {"correlation": 3, "kernel": "k"}}


def test_op_shapes_are_kept_once_per_distinct_set() -> None:
    other = {**OP, "args": {**OP["args"], "External id": 5, "Input Dims": [[8, 1024], [1024, 1024], [1024]]}}
    data = piece(OP, KERNEL, {**OP, "args": {**OP["args"], "External id": 9}}, other)
    scanned = assert_same_or_declined(data)
    assert scanned is not None
    assert scanned.args.tolist() == [0, -1, 0, 1] and len(scanned.arg_values) == 2
    assert json.loads(scanned.arg_values[0].shapes) == [OP["args"][key] for key in SHAPE_KEYS]


def test_shapes_text_is_the_same_however_the_file_spaces_it() -> None:
    spaced = piece(OP).replace(b"[[16, 559, 1024]", b"[ [16,559 ,1024 ]")
    masks = value_mask_table(value_masks(False))
    assert rows(scan_piece(spaced, TABLE, masks))[0][-1] == rows(scan_piece(piece(OP), TABLE, masks))[0][-1]


@pytest.mark.parametrize(
    "args",
    [
        {"Input Dims": [[4]]},  # one key of four
        {"Concrete Inputs": ["", "[16, 16]", "True"], "Input type": ["float", "ScalarList", "Scalar"]},
        {"Input Dims": "not a list", "Input type": 7, "Input Strides": None, "Concrete Inputs": {"a": [1]}},
        {"Input Dims": []},
    ],
)
def test_odd_shapes_args_read_the_same_on_both_paths(args: dict) -> None:
    assert assert_same_or_declined(piece({**OP, "args": args})) is not None


def test_a_repeated_shapes_key_is_left_to_msgspec() -> None:
    data = b'[{"cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "args": {"Input Dims": [[1]], "Input Dims": [[2]]}}]'
    assert scan_piece(data, TABLE, value_mask_table(value_masks(False))) is None
    decoded = msgspec_columns(data)
    assert decoded is not None and json.loads(decoded.arg_values[0].shapes)[0] == [[2]]  # the last, as msgspec


@pytest.mark.parametrize("launch_kernels", [False, True])
def test_launch_kernel_names_only_when_asked(launch_kernels: bool) -> None:
    data = piece(LAUNCH, {**LAUNCH, "args": {"correlation": 4, "kernel": "k2"}}, KERNEL)
    scanned = assert_same_or_declined(data, launch_kernels)
    assert scanned is not None
    kernels = [scanned.arg_values[c].kernel if c >= 0 else None for c in scanned.args.tolist()]
    assert kernels == (["k", "k2", None] if launch_kernels else [None, None, None])


@pytest.mark.parametrize(
    "literal",
    [
        "0",
        "-0",
        "-1",
        "7.0",
        "1e2",
        "9223372036854775807",
        "9223372036854775808",
        "99999999999999999999",
        "true",
        "null",
        '"7"',
        "[7]",
        "{}",
    ],
)
def test_ids_follow_id_column(literal: str) -> None:
    data = piece({**KERNEL, "args": {"correlation": "ID", "stream": "ID", "device": "ID"}}, raw={"ID": literal})
    assert assert_same_or_declined(data) is not None


@pytest.mark.parametrize("literal", ["-9223372036854775808", "9223372036854775807", "0", "null"])
def test_integer_threads_are_kept(literal: str) -> None:
    data = piece({**KERNEL, "cat": "cpu_op", "pid": "P", "tid": "P"}, raw={"P": literal})
    assert assert_same_or_declined(data) is not None


@pytest.mark.parametrize(
    "event",
    [
        {**KERNEL, "pid": "host"},  # a thread that is not an integer
        {**KERNEL, "tid": 1.0},
        {**KERNEL, "pid": 2**63},
        {**KERNEL, "name": "caf\u00e9"},  # not ASCII
    ],
)
def test_what_the_scan_does_not_model_is_declined(event: dict) -> None:
    assert scan_piece(piece(event), TABLE) is None
    assert msgspec_columns(piece(event)) is not None


@pytest.mark.parametrize(
    "text",
    [
        '[{"cat": "kernel", "cat": "cpu_op"}]',  # a repeated field: msgspec keeps the last
        '[{"cat": "kernel", "args": {"stream": 1, "stream": 2}}]',
        '[{"c\\u0061t": "kernel"}]',  # an escaped key
        '[{"cat": "k\\u0065rnel"}]',
        '[{"cat": "kernel", "name": "\\ud83d\\ude00"}]',
        '[{"x": ' + "[" * 70 + "]" * 70 + "}]",  # deeper than the scan goes
    ],
)
def test_valid_pieces_outside_the_envelope_are_declined(text: str) -> None:
    assert scan_piece(text.encode(), TABLE) is None
    assert msgspec_columns(text.encode()) is not None


@pytest.mark.parametrize(
    "text",
    [
        "[{}]",
        "[ ]",
        "[]",
        ' [ {"x": [ ] , "y" : { } } ] ',
        '[{"cat": "kernel", "name": "a\\"b\\\\c\\/d\\n"}]',
        '[{"cat": "kernel", "name": 5}]',
        '[{"cat": 5, "name": "k"}]',
        '[{"cat": "kernel", "args": null}]',
        '[{"cat": "kernel", "args": [1]}]',
        '[{"cat": "kernel", "args": "text"}]',
        '[{"cat": "kernel", "ts": "5"}]',
        '[{"cat": "kernel", "ts": true, "dur": null}]',
        '[{"cat": "Runtime", "name": "hipLaunchKernel"}]',
        '[{"cat": "kernel", "args": {"grid": [ 1 , -2 , 3.5e2 ], "block": [], "x": [1, "a", [2]], "y": -0, "z": [1e2]}}]',
    ],
)
def test_valid_odd_pieces_match(text: str) -> None:
    assert assert_same_or_declined(text.encode()) is not None


@pytest.mark.parametrize(
    "text",
    [
        "[",
        "[{}",
        "[{},]",
        "[{}}]",
        '[{"a" 1}]',
        '[{"a": 01}]',
        '[{"a": 1.}]',
        '[{"a": .5}]',
        '[{"a": -}]',
        '[{"a": 1e}]',
        '[{"a": tru}]',
        '[{"a": nul}]',
        '[{"a": "\x01"}]',
        '[{"a": "\\q"}]',
        '[{"a": "x}]',
        '[{"a": 1}] x',
        "[1]",
        '[{"a": [1,]}]',
        '[{"a": {"b"}}]',
        "[{a: 1}]",
        '[{"a": 1}\x0b]',
        '[{"a": NaN}]',
        '[{"cat": "kernel", "ts": 1x}]',
        '[{"cat": "kernel", "args": {"correlation": 1 2}}]',
        '[{"cat": "kernel", "args": {"grid": [1,]}}]',
        '[{"cat": "kernel", "args": {"grid": [1 2]}}]',
        '[{"cat": "kernel", "args": {"grid": [01]}}]',
        '[{"cat": "kernel", "args": {"grid": [-]}}]',
        '[{"cat": "kernel", "args": {"grid": [1}}]',
        '[{"cat": "kernel", "args": {"queued": 1x}}]',
    ],
)
def test_invalid_pieces_are_declined(text: str) -> None:
    assert scan_piece(text.encode(), TABLE) is None
    assert msgspec_columns(text.encode()) is None


def test_names_are_deduplicated_by_their_bytes() -> None:
    names = [f"kernel_{i % 7}_" + "x" * (i % 3) for i in range(5000)]
    events = [{**KERNEL, "name": name, "ts": float(i)} for i, name in enumerate(names)]
    scanned = assert_same_or_declined(piece(*events))
    assert scanned is not None and len(scanned.names) == len(set(names))


@pytest.mark.parametrize("shift", range(8))
def test_long_names_that_differ_in_one_byte_stay_apart(shift: int) -> None:
    """Names are hashed and compared 8 bytes at a time: a difference at any byte, at any alignment of the
    name in the piece, and in the last bytes of the piece (read one at a time), keeps two names apart.
    Thousands of names of one length make the table's probes compare many of them byte for byte."""
    base = "void gemm_kernel<float, 128, 64>(Params&, int)"  # 46 bytes: 5 words and 6 more
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    names = [base, base + "x", base[:-1]] + [base[:i] + "#" + base[i + 1 :] for i in range(len(base))]
    names += [base[:-2] + a + b for a in letters for b in letters]
    events = [{**KERNEL, "name": name, "ts": float(i)} for i, name in enumerate(names * 2)]
    data = (" " * shift).encode() + piece(*events)
    scanned = assert_same_or_declined(data)
    assert scanned is not None and len(scanned.names) == len(set(names))
    last = data[:-1] + b', {"cat": "kernel", "name": "' + base[: 9 + shift].encode() + b'"}]'
    scanned = assert_same_or_declined(last)
    assert scanned is not None and scanned.names[scanned.name[-1]] == base[: 9 + shift]


# -- generated pieces


@dataclass(frozen=True)
class Literal:
    """JSON text put into a piece as it is (numbers json.dumps would not write)."""

    text: str


def encode(value: Any) -> str:
    if isinstance(value, Literal):
        return value.text
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(encode(v) for v in value) + "]"
    return json.dumps(value)


NUMBER_TEXT = st.from_regex(r"\A-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,24})?([eE][+-]?[0-9]{1,3})?\Z").map(Literal)
TEXT = st.text(st.characters(max_codepoint=127), max_size=6) | st.text(max_size=3)
"""Mostly ASCII, which the scan reads; other text it declines."""
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    NUMBER_TEXT,
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3), max_leaves=6
)
NAMES = st.sampled_from(["k", "gemm", "aten::mm", "nn.Module: Linear_1", 'a"b', "tab\there", "x/y"]) | TEXT
IDS = st.integers(-3, 2**64) | st.sampled_from([Literal("-0"), Literal("1.0"), Literal("1e2")]) | VALUES
EVENTS = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.sampled_from(["X", "f", "s"]),
        "cat": st.sampled_from([*_BUCKET, "ac2g", "gpu_memcpy"]) | VALUES,
        "name": NAMES | VALUES,
        "ts": NUMBER_TEXT | st.floats(allow_nan=False, allow_infinity=False) | VALUES,
        "dur": NUMBER_TEXT | st.integers(-5, 10**6) | VALUES,
        "pid": st.integers(-(2**63), 2**63 - 1) | VALUES,
        "tid": st.integers(-(2**63), 2**63 - 1) | st.none(),
        "args": st.fixed_dictionaries(
            {},
            optional={
                "correlation": IDS,
                "stream": IDS,
                "device": IDS,
                "External id": VALUES,
                "grid": st.lists(NUMBER_TEXT | st.integers(-9, 2**40), max_size=4),
            },
        )
        | VALUES,
        "extra": VALUES,
    },
)


@settings(CHECKS, max_examples=400)
@given(st.lists(EVENTS, max_size=8))
def test_generated_pieces_match_or_are_declined(events: list[dict]) -> None:
    assert_same_or_declined(("[" + ",\n".join(encode(e) for e in events) + "]").encode())


@settings(CHECKS, max_examples=300)
@given(st.lists(EVENTS, min_size=1, max_size=6), st.data())
def test_mutated_pieces_match_or_are_declined(events: list[dict], data: st.DataObject) -> None:
    text = bytearray(("[" + ",".join(encode(e) for e in events) + "]").encode())
    at = data.draw(st.integers(0, len(text) - 1))
    action = data.draw(st.sampled_from(["flip", "delete", "insert"]))
    byte = data.draw(st.sampled_from(b'"\\{}[],:0-.e tn\x00\x1f\x80'))
    if action == "flip":
        text[at] = byte
    elif action == "delete":
        del text[at]
    else:
        text.insert(at, byte)
    assert_same_or_declined(bytes(text))


PLAIN_EVENTS = st.builds(
    lambda cat, name, ts, dur, corr, pid: {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": pid,
        "ts": ts,
        "dur": dur,
        "args": {"correlation": corr, "stream": 7},
    },
    st.sampled_from(sorted(_BUCKET)),
    st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
    st.floats(0, 1e13).map(lambda v: round(v, 3)),
    st.floats(0, 1e4).map(lambda v: round(v, 3)),
    st.integers(0, 2**40),
    st.integers(0, 2**31),
)


@settings(CHECKS, max_examples=200)
@given(st.lists(PLAIN_EVENTS, max_size=10))
def test_plain_kineto_events_are_accepted(events: list[dict]) -> None:
    """What Kineto writes (ASCII names, integer threads, µs with three decimals) never falls back."""
    assert assert_same_or_declined(piece(*events)) is not None


# -- whole traces


SHARED = ["tl_mi300_qwen1.5-0.5b", "tl_h100_qwen1.5-0.5b", "hta_negative_queue_rank0", "tl_vllm_pd_piecewise_exec"]


@pytest.mark.parametrize("name", SHARED)
def test_real_traces_load_the_same_with_the_scan(monkeypatch, name: str) -> None:
    """Every piece scanned (the last one too), against every piece decoded by msgspec."""
    paths = sorted((SHARED_TRACES / name).glob("*.json*")) if SHARED_TRACES.is_dir() else []
    if not paths:
        pytest.skip(shared_absent(SHARED_TRACES / name))
    data = paths[0].read_bytes()
    data = gzip.decompress(data) if paths[0].suffix == ".gz" else data
    monkeypatch.setattr(events_module, "PIECE_SIZE", 1 << 18)
    declined: list[str] = []
    monkeypatch.setattr(events_module, "COMPILED_SCAN_MIN_BYTES", 0)
    with mock.patch.object(piece_scan, "scan_piece", _counting(declined)):
        scanned = load(data)
    monkeypatch.setattr(events_module, "COMPILED_SCAN_MIN_BYTES", 1 << 62)
    decoded = load(data)
    pd.testing.assert_frame_equal(scanned.kernels, decoded.kernels)
    pd.testing.assert_frame_equal(scanned.names, decoded.names)
    assert scanned.warnings == decoded.warnings
    assert set(declined) <= {"a wrong guess at the end of the array"}


def test_a_real_capture_trace_reads_the_same_with_the_scan(monkeypatch) -> None:
    """A graph capture's launches name their kernels (launch_kernels) and its ops their shapes: both paths agree."""
    paths = sorted((SHARED_TRACES / "tl_vllm_decode_full_exec" / "capture").glob("*.json.gz"))
    if not paths:
        pytest.skip(shared_absent(SHARED_TRACES / "tl_vllm_decode_full_exec" / "capture"))
    data = gzip.decompress(paths[0].read_bytes())
    monkeypatch.setattr(events_module, "PIECE_SIZE", 1 << 20)
    read = []
    for minimum in (0, 1 << 62):
        monkeypatch.setattr(events_module, "COMPILED_SCAN_MIN_BYTES", minimum)
        cpu = read_kineto(data, launch_kernels=True).cpu
        kernels = [cpu.names[c] if c >= 0 else None for c in cpu.launches.kernel.tolist()]
        ops = cpu.ranges.of_kind(RangeKind.OP)
        read.append((kernels, [cpu.shapes[c] if c >= 0 else None for c in ops.shapes.tolist()]))
    assert read[0] == read[1]
    assert sum(k is not None for k in read[0][0]) == 428 and sum(s is not None for s in read[0][1]) > 3700


def _counting(declined: list[str]):
    """scan_piece, noting each piece it declines and whether msgspec refuses that piece too."""
    original = piece_scan.scan_piece

    def counting(piece_data: bytes, table, masks=None):
        result = original(piece_data, table, masks)
        if result is None:
            try:
                msgspec.json.decode(piece_data)
            except msgspec.DecodeError:
                declined.append("a wrong guess at the end of the array")
            else:
                declined.append("a valid piece")
        return result

    return counting


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip"])
def test_a_large_trace_is_scanned_and_a_small_one_is_not(monkeypatch, gzipped: bool) -> None:
    """Every piece of a trace of COMPILED_SCAN_MIN_BYTES of JSON goes to the scan, none of a smaller one (in a
    process without the scan loaded); for gzip, the size its trailer records counts, not the compressed size."""
    events = [kernel_event(f"k{i % 5}", float(i), 1.0, i) for i in range(20_000)]
    data = trace_json(events)
    paths = _paths_taken(monkeypatch, len(data) // 3)
    stored = gzip.compress(data) if gzipped else data
    monkeypatch.setattr(piece_scan, "loaded", lambda: False)
    for threshold, path in ((len(data), "scan"), (len(data) + 1, "msgspec")):
        paths.clear()
        monkeypatch.setattr(events_module, "COMPILED_SCAN_MIN_BYTES", threshold)
        table = load(stored).kernels
        assert len(paths) > 1 and set(paths) == {path}
        assert np.array_equal(table["correlation"].to_numpy(), np.arange(len(events)))


def test_a_small_trace_is_scanned_where_the_scan_is_loaded_already() -> None:
    """Once a process has the scan's machine code, a trace of any size is scanned (nothing is left to pay); a
    process that never imported the scan does not import it, nor numba, for a small trace."""
    piece_scan.warm()
    assert piece_scan.loaded() and events_module.scans(1)
    code = (
        "import sys; from fusion.loader import events; "
        "assert not events.scans(events.COMPILED_SCAN_MIN_BYTES - 1) and 'numba' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])


def test_a_small_trace_scanned_reads_as_msgspec_reads_it(monkeypatch) -> None:
    events = [kernel_event(f"k{i % 5}", float(i), 1.0, i) for i in range(5_000)]
    data = trace_json(events)
    paths = _paths_taken(monkeypatch, len(data) // 3)
    piece_scan.warm()
    scanned = load(data).kernels
    assert set(paths) == {"scan"}
    monkeypatch.setattr(piece_scan, "loaded", lambda: False)
    paths.clear()
    pd.testing.assert_frame_equal(scanned, load(data).kernels)
    assert set(paths) == {"msgspec"}


def _paths_taken(monkeypatch, piece_size: int) -> list[str]:
    """The decoder each piece goes to ("scan" or "msgspec"), noted as pieces of `piece_size` bytes are read."""
    paths: list[str] = []
    scan, decode = piece_scan.scan_piece, events_module._decode_events
    monkeypatch.setattr(piece_scan, "scan_piece", lambda *a: paths.append("scan") or scan(*a))
    monkeypatch.setattr(events_module, "_decode_events", lambda *a: paths.append("msgspec") or decode(*a))
    monkeypatch.setattr(events_module, "PIECE_SIZE", piece_size)
    return paths


def _summary_with_the_scan(monkeypatch, tmp_path: Path, runs: int) -> None:
    """`runs` CLI summaries of a built trace whose every piece goes to the compiled scan."""
    path = tmp_path / "trace.json"
    path.write_bytes(trace_json([kernel_event(f"k{i % 5}", float(i), 1.0, i) for i in range(2_000)]))
    monkeypatch.setattr(events_module, "COMPILED_SCAN_MIN_BYTES", 0)
    monkeypatch.setattr(events_module, "PIECE_SIZE", path.stat().st_size // 3)
    for _ in range(runs):
        assert main(["summary", str(path), "--format", "json"]) == 0


COMPILE_NOTE = f"note: {compiled.COMPILE_NOTE}"


@pytest.mark.parametrize(
    ("pending", "terminal", "expected"),
    [
        (True, True, [COMPILE_NOTE]),
        (False, True, []),
        (True, False, []),
    ],
)
def test_a_scan_not_yet_compiled_is_announced_once_on_a_terminal(
    monkeypatch, tmp_path, capsys, pending: bool, terminal: bool, expected: list[str]
) -> None:
    """A new install compiles the scan on its first large trace (about 20 s): the CLI says so in one note line,
    however many pieces and loads follow in the process; not when the scan is cached, and not when stderr is no
    terminal (a script's stderr does not depend on what the machine compiled before)."""
    monkeypatch.setattr(compiled, "compile_pending", lambda function: pending)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: terminal)
    compiled.announce_compile.cache_clear()
    try:
        _summary_with_the_scan(monkeypatch, tmp_path, runs=2)
        err = capsys.readouterr().err
    finally:
        compiled.announce_compile.cache_clear()
    assert [line for line in err.splitlines() if not line.startswith("warning:")] == expected


def test_compile_pending_follows_numbas_index_file(monkeypatch, tmp_path) -> None:
    """The check reads where numba keeps the scan's cache index: missing means the next call compiles (unless
    this process has the scan compiled or loaded already)."""
    cache_file = piece_scan._scan._cache._cache_file
    index = tmp_path / "piece_scan._scan.nbi"
    monkeypatch.setattr(cache_file, "_index_path", str(index))
    monkeypatch.setattr(piece_scan._scan, "overloads", {})  # as in a process that has not run it yet
    assert piece_scan.compile_pending()
    index.write_bytes(b"")
    assert not piece_scan.compile_pending()


def test_a_large_trace_read_while_another_process_compiles_takes_the_msgspec_path(monkeypatch, tmp_path) -> None:
    """A dashboard's background fill holds the compile lock: a large trace is read meanwhile, by msgspec, not
    after a wait; the same columns."""
    monkeypatch.setattr(compiled, "lock_path", lambda: tmp_path / "compile.lock")
    data = trace_json([kernel_event(f"k{i % 5}", float(i), 1.0, i) for i in range(2_000)])
    monkeypatch.setattr(events_module, "COMPILED_SCAN_MIN_BYTES", 0)
    monkeypatch.setattr(events_module, "PIECE_SIZE", len(data) // 3)
    scanned = load(data).kernels
    monkeypatch.setattr(compiled, "compile_pending", lambda function: True)
    with mock.patch.object(piece_scan, "scan_piece", side_effect=AssertionError("scanned")):
        with compiled.compile_lock(wait=False) as held:
            assert held and compiled.compiling_elsewhere()
            assert not events_module.scan_compile_pending(0)
            decoded = load(data).kernels
    pd.testing.assert_frame_equal(scanned, decoded)
    assert not compiled.compiling_elsewhere()


def test_only_a_read_large_enough_for_the_scan_waits_for_its_compile(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(compiled, "lock_path", lambda: tmp_path / "compile.lock")
    monkeypatch.setattr(piece_scan, "compile_pending", lambda: True)
    assert events_module.scan_compile_pending(events_module.COMPILED_SCAN_MIN_BYTES)
    assert not events_module.scan_compile_pending(events_module.COMPILED_SCAN_MIN_BYTES - 1)
    monkeypatch.setattr(piece_scan, "compile_pending", lambda: False)
    assert not events_module.scan_compile_pending(events_module.COMPILED_SCAN_MIN_BYTES)
