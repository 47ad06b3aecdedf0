"""The bad-input corpus: each hostile or broken input, and the one line a user gets for it.

A rejected input makes the CLI print `error: <file>: <problem>` on stderr and exit 2. An input the
analysis can still use runs (exit 0) with the stated warning on stderr. The ids read as the corpus;
docs/bad_inputs.md lists the same table.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import sqlite3
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
from builders import PROJECT, gzip_bomb, kernel_event, kineto_trace, trace_json
from format_builders import NsysExport, RocprofRun

from fusion.__main__ import main
from fusion.classify.trace import load
from fusion.errors import TraceError
from fusion.loader import events as events_module
from fusion.loader import kineto as kineto_module
from fusion.loader import reader
from fusion.match.pair_checks import pair_warnings
from fusion.model.linking import NO_OP_FINDINGS

Maker = Callable[[Path], Path]

KERNEL = b'{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":2,"args":{"correlation":1,"stream":7,"device":0}}'
BASE = trace_json(
    [kernel_event("k1", 1.0, 2.0, 1), kernel_event("k2", 5.0, 3.0, 2)],
    deviceProperties=[{"id": 0, "name": "AMD Instinct MI300X", "warpSize": 64}],
)
"""A valid two-kernel trace; the truncation cases cut it at named places."""


def doc(*events: bytes, tail: bytes = b"") -> bytes:
    return b'{"traceEvents":[' + b",".join(events) + b"]" + tail + b"}"


def with_kernel(event: bytes) -> bytes:
    """One good kernel and `event`: the good one keeps the summary meaningful."""
    return doc(KERNEL, event)


def kernel_with(fields: bytes) -> Maker:
    """A trace of one good kernel and one of cat 'kernel' with these other `fields`."""
    return content(with_kernel(b'{"cat":"kernel",' + fields + b"}"))


def at(marker: bytes, after: int = 0) -> bytes:
    """BASE cut just before `marker` (plus `after` bytes)."""
    return BASE[: BASE.index(marker) + after]


def content(data: bytes | Callable[[], bytes], suffix: str = ".json") -> Maker:
    def make(folder: Path) -> Path:
        path = folder / f"trace{suffix}"
        path.write_bytes(data() if callable(data) else data)
        return path

    return make


def directory(folder: Path) -> Path:
    (folder / "traces.json").mkdir()
    return folder / "traces.json"


def missing(folder: Path) -> Path:
    return folder / "nope.json"


def unreadable(folder: Path) -> Path:
    if os.geteuid() == 0:
        pytest.skip("root reads any file, so permission cannot be denied")
    path = content(BASE)(folder)
    path.chmod(0)
    return path


def deep(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def distinct_names(count: int) -> bytes:
    rows = (
        b'{"ph":"X","cat":"kernel","name":"kernel_%d","ts":%d,"dur":1.5,"args":{"correlation":%d}}' % (i, i, i)
        for i in range(count)
    )
    return b'{"traceEvents":[' + b",".join(rows) + b"]}"


BAD_GZIP = gzip.compress(BASE)


def nsys(tables: tuple[str, ...] | None = None, cut: float = 1.0, name: str = "trace.sqlite") -> Maker:
    """An Nsight Systems export of two kernels (only `tables` of the schema; the first `cut` of its bytes)."""

    def make(folder: Path) -> Path:
        export = NsysExport()
        export.launch("ampere_sgemm_128x64_tn", 1_000, 10_000, 5_000)
        export.launch("flash_fwd_kernel", 2_000, 20_000, 5_000)
        path = export.write(folder / f"full-{name}", tables=tables)
        data = path.read_bytes()
        target = folder / name
        target.write_bytes(data[: int(len(data) * cut)])
        return target

    return make


def sqlite_of(statement: str, name: str = "trace.sqlite") -> Maker:
    def make(folder: Path) -> Path:
        path = folder / name
        with sqlite3.connect(path) as db:
            db.execute(statement)
        db.close()
        return path

    return make


def rocprof(cut: float = 1.0, replace: tuple[bytes, bytes] = (b"", b"")) -> bytes:
    run = RocprofRun()
    run.launch("_Z6gemm_kv.kd", 1_000, 10_000, 5_000)
    run.launch("_Z6relu_kv.kd", 2_000, 20_000, 1_000)
    data = run.data().replace(*replace, 1) if replace[0] else run.data()
    return data[: int(len(data) * cut)]


REJECTED = [
    # -- not JSON at all
    pytest.param(content(b""), "the file is empty", id="empty-file"),
    pytest.param(content(b" \n\t\n"), "the file holds only whitespace, no JSON value", id="only-whitespace"),
    pytest.param(content(b"\xef\xbb\xbf"), "the file is empty", id="only-a-byte-order-mark"),
    pytest.param(content(b"hello, world"), "not valid JSON: invalid character (byte 0)", id="not-json-text"),
    pytest.param(content(b"\x00\x01\x02\x03" * 64), "not valid JSON: invalid character (byte 0)", id="binary-noise"),
    pytest.param(
        content(BASE.decode().encode("utf-16")),
        "UTF-16 text; a trace is UTF-8 JSON (save it as UTF-8)",
        id="utf-16-text",
    ),
    # -- truncated at several points
    pytest.param(
        content(at(b'"warpSize"')),
        "truncated JSON: the file ends in the middle of a value",
        id="truncated-inside-header",
    ),
    pytest.param(
        content(at(b'"traceEvents":', 14)),
        "truncated: the file ends right after the traceEvents key",
        id="truncated-after-traceEvents-key",
    ),
    pytest.param(
        content(at(b'"k2"')),
        "truncated: the file ends before the traceEvents list is closed",
        id="truncated-inside-an-event",
    ),
    pytest.param(
        content(at(b'},{"ph"', 2)),
        "truncated: the file ends before the traceEvents list is closed",
        id="truncated-between-events",
    ),
    pytest.param(
        content(BASE[:-1]),
        "truncated: the file ends after the traceEvents list, before the closing }",
        id="truncated-after-the-array",
    ),
    pytest.param(
        content(BASE[:-1] + b',"traceName":"run'),
        "truncated: the file ends after the traceEvents list, before the closing }",
        id="truncated-inside-tail",
    ),
    pytest.param(
        content(BASE + b"\nGARBAGE"),
        f"after the traceEvents list: not valid JSON: trailing characters (byte {len(BASE) + 1})",
        id="garbage-after-the-trace",
    ),
    pytest.param(
        content(BASE[:-1] + b',"traceName":}'),
        f"after the traceEvents list: not valid JSON: invalid character (byte {len(BASE) + 12})",
        id="bad-key-after-the-array",
    ),
    # -- the wrong shape
    pytest.param(
        content(b"[1, 2, 3]"), "the JSON holds an array at the top level, not a trace object", id="top-level-array"
    ),
    pytest.param(content(b"42"), "the JSON holds a number at the top level, not a trace object", id="top-level-number"),
    pytest.param(
        content(b'"trace"'), "the JSON holds a string at the top level, not a trace object", id="top-level-string"
    ),
    pytest.param(
        content(b'{"schemaVersion": 1, "displayTimeUnit": "ms"}'),
        "JSON object without a traceEvents list; not a Chrome/Kineto trace",
        id="traceEvents-missing",
    ),
    pytest.param(
        content(b'{"traceEvents": {"0": {}}}'),
        "traceEvents is not a list (it holds an object)",
        id="traceEvents-an-object",
    ),
    pytest.param(
        content(b'{"traceEvents": "none"}'), "traceEvents is not a list (it holds a string)", id="traceEvents-a-string"
    ),
    pytest.param(content(b'{"traceEvents": null}'), "traceEvents is not a list (it holds null)", id="traceEvents-null"),
    pytest.param(
        content(doc(b"1", b"2")),
        "traceEvents entry 0 is not an object (Expected `object`, got `int`)",
        id="traceEvents-of-numbers",
    ),
    pytest.param(
        content(doc(KERNEL, KERNEL, b'"x"')),
        "traceEvents entry 2 is not an object (Expected `object`, got `str`)",
        id="traceEvents-with-a-string",
    ),
    pytest.param(
        content(doc(KERNEL, b"null")),
        "traceEvents entry 1 is not an object (Expected `object`, got `null`)",
        id="traceEvents-with-null",
    ),
    pytest.param(
        content(doc(KERNEL, tail=b',"traceEvents":[]')),
        "two traceEvents keys; which one is meant is unclear",
        id="two-traceEvents-keys",
    ),
    # -- numbers JSON does not have
    pytest.param(
        kernel_with(b'"name":"n","ts":NaN,"dur":1'),
        "not valid JSON: NaN or Infinity at byte 147 (JSON has no such numbers)",
        id="NaN-literal",
    ),
    pytest.param(
        kernel_with(b'"name":"n","ts":1,"dur":Infinity'),
        "not valid JSON: NaN or Infinity at byte 155 (JSON has no such numbers)",
        id="Infinity-literal",
    ),
    pytest.param(
        kernel_with(b'"name":"n","ts":-Infinity,"dur":1'),
        "not valid JSON: NaN or Infinity at byte 148 (JSON has no such numbers)",
        id="minus-Infinity-literal",
    ),
    pytest.param(
        kernel_with(b'"name":"n","ts":1,"dur":1e400'),
        "traceEvents entry 1 holds a value that cannot be read (Number out of range)",
        id="dur-1e400",
    ),
    # -- text encoding and nesting
    pytest.param(
        kernel_with(b'"name":"k\xff\xfe","ts":1,"dur":1'), "not UTF-8 text (bad byte at 140)", id="non-utf8-in-a-name"
    ),
    pytest.param(
        content(b'{"caf\xe9": 1, "traceEvents": []}'), "not UTF-8 text (bad byte at 5)", id="non-utf8-in-header"
    ),
    pytest.param(  # the args that describe an op's operands are kept undecoded by the event's decode
        content(with_kernel(b'{"cat":"cpu_op","name":"mm","ts":1,"dur":1,"args":{"Concrete Inputs":["\xb0"]}}')),
        "not UTF-8 text (bad byte at 186)",
        id="non-utf8-in-op-args",
    ),
    pytest.param(
        kernel_with(b'"name":"k\\ud800","ts":1,"dur":1'),
        "not valid JSON: unexpected end of escaped utf-16 surrogate pair (byte 146)",
        id="lone-surrogate-escape",
    ),
    pytest.param(
        content(with_kernel(b'{"cat":"kernel","name":"k","ts":1,"dur":1,"args":' + deep(5000) + b"}")),
        "JSON nested too deeply (over a thousand levels; trace events are a few levels deep)",
        id="args-nested-5000-deep",
    ),
    pytest.param(
        content(b'{"meta":' + deep(5000) + b',"traceEvents":[]}'),
        "JSON nested too deeply (over a thousand levels; trace events are a few levels deep)",
        id="header-nested-5000-deep",
    ),
    # -- gzip
    pytest.param(
        content(b"\x1f\x8b\x08\x00" + bytes(range(200)), ".json.gz"),
        "corrupt gzip data (Error -3 while decompressing data: invalid block type)",
        id="corrupt-gzip",
    ),
    pytest.param(
        content(BAD_GZIP[: len(BAD_GZIP) // 2], ".json.gz"),
        "gzip data is truncated or corrupt (the compressed stream ends early)",
        id="truncated-gzip",
    ),
    pytest.param(
        content(b"\x1f\x8b", ".json.gz"),
        "gzip data is truncated or corrupt (the compressed stream ends early)",
        id="gzip-magic-only",
    ),
    pytest.param(
        content(BAD_GZIP + b"junk!", ".json.gz"),
        "corrupt gzip data after gzip member 1 (junk appended to the file?) "
        "(Error -3 while decompressing data: incorrect header check)",
        id="junk-after-gzip",
    ),
    pytest.param(
        content(gzip.compress(b"hello, world"), ".json.gz"),
        "not valid JSON: invalid character (byte 0)",
        id="gzip-of-text",
    ),
    # -- sizes
    pytest.param(
        content(b'{"traceEvents": [' + b"\x00" * (1 << 20) + b"]}"),
        "not valid JSON: invalid character (byte 17)",
        id="a-MB-of-NUL-in-the-array",
    ),
    # -- SQLite and the other profilers' formats
    pytest.param(
        nsys(cut=0.5),
        "the SQLite file cannot be read (database disk image is malformed); truncated or damaged?",
        id="truncated-nsys-sqlite",
    ),
    pytest.param(
        content(b"SQLite format 3\x00" + b"\x01" * 200, ".sqlite"),
        "the SQLite file cannot be read (file is not a database); truncated or damaged?",
        id="sqlite-magic-then-garbage",
    ),
    pytest.param(
        nsys(tables=("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME")),
        "an SQLite file that is no Nsight Systems export (no StringIds table; its tables: CUPTI_ACTIVITY_KIND_KERNEL,"
        " CUPTI_ACTIVITY_KIND_RUNTIME); export a report with `nsys export --type sqlite`",
        id="nsys-sqlite-without-StringIds",
    ),
    pytest.param(
        sqlite_of("CREATE TABLE sales (id INTEGER, amount REAL)"),
        "an SQLite file that is no Nsight Systems export (no StringIds table; its tables: sales); export a report"
        " with `nsys export --type sqlite`",
        id="some-other-sqlite-database",
    ),
    pytest.param(
        sqlite_of("CREATE TABLE rocpd_kernel_dispatch_00ab (id INTEGER)", "results.db"),
        "a rocpd database (rocprofv3's SQLite output) is not read yet; write JSON instead (rocprofv3 --output-format"
        " json) or convert it (rocpd convert --output-format csv)",
        id="rocpd-database",
    ),
    pytest.param(
        content(b"\x00\x01NSYS report body", ".nsys-rep"),
        "an Nsight Systems report (.nsys-rep) is NVIDIA's own format, not read here; export it to SQLite with "
        "`nsys export --type sqlite -o trace.sqlite report.nsys-rep` and give the .sqlite file",
        id="nsys-rep-report",
    ),
    pytest.param(
        content(lambda: rocprof(cut=0.6)),
        "truncated: the file ends inside rocprofiler-sdk-tool.0.buffer_records.kernel_dispatch, before the JSON document"
        " closes",
        id="truncated-rocprofv3-json",
    ),
    pytest.param(
        content(lambda: rocprof(replace=(b'"start_timestamp":20000', b'"start_timestamp":null'))),
        "rocprofv3 buffer_records/kernel_dispatch entry 1 cannot be read (Expected `int`, got `null`)",
        id="rocprofv3-json-null-timestamp",
    ),
    pytest.param(
        content(b'"Domain","Function","Process_Id","Thread_Id","Correlation_Id","Start_Timestamp","End_Timestamp"\n'),
        "a rocprofv3 API trace (hip_api_trace.csv); give its kernel_trace.csv instead",
        id="rocprofv3-api-csv-given",
    ),
    pytest.param(
        content(b'"Kind","Kernel_Name","Start_Timestamp","End_Timestamp"\n"KERNEL_DISPATCH","k",10,"late"\n', ".csv"),
        "no usable Start_Timestamp and End_Timestamp columns",
        id="rocprofv3-csv-bad-timestamp",
    ),
    # -- not a file
    pytest.param(directory, "is a directory, not a trace file", id="a-directory"),
    pytest.param(missing, "no such file", id="missing-file"),
    pytest.param(unreadable, "permission denied", id="no-read-permission"),
]


@pytest.mark.parametrize(("make", "problem"), REJECTED)
def test_rejected_input_gets_one_line_naming_the_file_and_problem(tmp_path, capsys, make: Maker, problem: str) -> None:
    path = make(tmp_path)
    started = time.monotonic()
    assert main(["summary", str(path)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"error: {path}: {problem}\n")
    assert time.monotonic() - started < 30


def test_too_many_distinct_kernel_names_are_refused(tmp_path, capsys, monkeypatch) -> None:
    """Scaled: the limit at 20,000 and 100,000 names (the real limit, 200,000, and a million names took 14 s)."""
    monkeypatch.setattr(kineto_module, "MAX_KERNEL_NAMES", 20_000)
    path = content(distinct_names(100_000))(tmp_path)
    assert main(["summary", str(path)]) == 2
    expected = f"error: {path}: more than 20,000 distinct kernel names; a GPU profile has thousands; refused\n"
    assert capsys.readouterr() == ("", expected)


LARGE_NAME = "k" * (10 << 20)


def big_nested_event() -> bytes:
    """A 40 MB event (more than a decoding piece) whose args hold `},` boundaries that are not event ends."""
    nested = b'{"a":{"b":1},"c":[1]},' * 2_000_000
    big = KERNEL.replace(b'"ts":1', b'"ts":2').replace(b'"device":0}', b'"device":0,"n":[' + nested + b"{}]}")
    return doc(KERNEL, big, KERNEL.replace(b'"ts":1', b'"ts":3'))


NO_KERNELS = "{path}: no kernel events (cat 'kernel'); a CPU-only trace or not a GPU profile"
ACCEPTED = [
    # -- works, no warning
    pytest.param(content(BASE, ".json.gz"), 2, None, id="plain-json-with-gz-suffix"),
    pytest.param(content(BAD_GZIP, ".json"), 2, None, id="gzip-with-json-suffix"),
    pytest.param(
        content(gzip.compress(BASE[:60]) + gzip.compress(BASE[60:]), ".json.gz"),
        2,
        None,
        id="two-concatenated-gzip-members",
    ),
    pytest.param(content(BAD_GZIP + bytes(4096), ".json.gz"), 2, None, id="zero-padding-after-gzip"),
    pytest.param(
        content(BASE.replace(b"},{", b"}," + b" " * (20 << 20) + b"{")), 2, None, id="20-MB-of-blanks-between-events"
    ),
    pytest.param(
        content(lambda: trace_json([kernel_event(LARGE_NAME, 1.0, 2.0, 1), kernel_event("k", 3.0, 1.0, 2)])),
        2,
        None,
        id="a-10-MB-kernel-name",
    ),
    pytest.param(content(big_nested_event), 3, None, id="a-40-MB-event-with-nested-args"),
    pytest.param(
        content(with_kernel(b'{"cat":["kernel"],"name":"k","ts":1,"dur":1}')), 1, None, id="cat-a-list-is-not-a-kernel"
    ),
    pytest.param(
        content(b'{"deviceProperties":[{"warpSize":[64],"name":7}],"traceEvents":[' + KERNEL + b"]}"),
        1,
        None,
        id="deviceProperties-of-wrong-types",
    ),
    # -- works, with a warning
    pytest.param(
        content(b"\xef\xbb\xbf" + BASE),
        2,
        "the file starts with a UTF-8 byte-order mark; it was skipped",
        id="byte-order-mark",
    ),
    pytest.param(
        content(trace_json([{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1.0, "dur": 3.0}])),
        0,
        NO_KERNELS,
        id="cpu-only-trace",
    ),
    pytest.param(content(b'{"traceEvents":[]}'), 0, NO_KERNELS, id="empty-traceEvents"),
    pytest.param(kernel_with(b'"ts":1,"dur":1'), 1, "1 kernel events skipped: no name", id="kernel-without-name"),
    pytest.param(
        kernel_with(b'"name":{"a":1},"ts":1,"dur":1'), 1, "1 kernel events skipped: no name", id="kernel-name-an-object"
    ),
    pytest.param(
        kernel_with(b'"name":"n","dur":1'), 1, "1 kernel events skipped: no numeric ts", id="kernel-without-ts"
    ),
    pytest.param(
        kernel_with(b'"name":"n","ts":"abc","dur":1'), 1, "1 kernel events skipped: no numeric ts", id="ts-abc"
    ),
    pytest.param(
        kernel_with(b'"name":"n","ts":1'), 1, "1 kernel events skipped: no numeric dur", id="kernel-without-dur"
    ),
    pytest.param(
        kernel_with(b'"name":"n","ts":1,"dur":true'), 1, "1 kernel events skipped: no numeric dur", id="dur-true"
    ),
    pytest.param(
        kernel_with(b'"name":"n","ts":1,"dur":-5'), 1, "1 kernel events skipped: negative dur", id="dur-negative"
    ),
    pytest.param(
        kernel_with(b'"name":"n","ts":1,"dur":1e308'), 1, "1 kernel events skipped: no numeric dur", id="dur-1e308"
    ),
    pytest.param(
        kernel_with(b'"name":"n","ts":1,"dur":1'), 2, "1 kernel events have no usable args", id="kernel-without-args"
    ),
    pytest.param(
        kernel_with(b'"name":"n","ts":1,"dur":1,"args":"x"'),
        2,
        "1 kernel events have no usable args",
        id="args-a-string",
    ),
    pytest.param(
        kernel_with(b'"name":"n","ts":1,"dur":1,"args":{"stream":7,"device":0}'),
        2,
        "1 kernel events have no usable correlation",
        id="kernel-without-correlation",
    ),
    pytest.param(
        kernel_with(b'"name":"n","ts":1,"dur":1,"args":{"correlation":1.5,"stream":7,"device":0}'),
        2,
        "1 kernel events have no usable correlation",
        id="correlation-1.5",
    ),
    pytest.param(
        kernel_with(b'"name":"n","ts":1,"dur":1,"args":{"correlation":%d,"stream":7,"device":0}' % 2**70),
        2,
        "1 kernel events have no usable correlation",
        id="correlation-2**70",
    ),
    pytest.param(
        kernel_with(b'"name":"n","ts":1,"dur":1,"args":{"correlation":"7","stream":7,"device":0}'),
        2,
        "1 kernel events have no usable correlation",
        id="correlation-string-7",
    ),
    pytest.param(
        content(doc(KERNEL, KERNEL, KERNEL)),
        1,
        "2 duplicate kernel events (same name, ts, dur and ids) were dropped",
        id="duplicate-events",
    ),
    pytest.param(
        content(
            trace_json(
                [kernel_event("k1", 1.0, 2.0, 1), kernel_event("k2", 5.0, 1e15, 2), kernel_event("k3", 9.0, 1.0, 3)]
            )
        ),
        3,
        "{path}: 1 kernel events last longer than the trace's whole span (8.0 µs from the first kernel start to the "
        "last; the longest lasts 1,000,000,000,000,000.0 µs): their durations are suspect and every time total that "
        "holds them is off",
        id="dur-longer-than-the-trace",
    ),
]


@pytest.mark.parametrize(("make", "kernels", "warning"), ACCEPTED)
def test_usable_input_runs_with_the_stated_warning(tmp_path, capsys, make: Maker, kernels: int, warning: str | None):
    path = make(tmp_path)
    assert main(["summary", str(path), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["kernels"] == kernels
    stated = [line for line in err.splitlines() if NO_OP_FINDINGS not in line]  # these traces record kernels only
    assert stated == ([] if warning is None else [f"warning: {warning.format(path=path)}"])


def test_zero_kernels_summary_text_exits_0_with_the_warning_on_stderr(tmp_path, capsys) -> None:
    """Warnings go to stderr in every format (issue 38 #12), the report to stdout."""
    path = content(b'{"traceEvents":[]}')(tmp_path)
    assert main(["summary", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "kernels   0" in out and "warning" not in out
    assert err == f"warning: {NO_KERNELS.format(path=path)}\n"


@pytest.fixture(scope="module")
def bomb(tmp_path_factory) -> Path:
    """5 MB of gzip that expands to 5 GiB of blanks inside the traceEvents list."""
    return gzip_bomb(tmp_path_factory.mktemp("bomb") / "bomb.json.gz", 5 << 30)


def test_gzip_bomb_stops_at_max_bytes_quickly_in_bounded_memory(bomb: Path) -> None:
    assert bomb.stat().st_size < 8 << 20
    tracemalloc.start()
    started = time.monotonic()
    with pytest.raises(TraceError) as caught:
        load(bomb, max_bytes=512 << 20)
    elapsed = time.monotonic() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert str(caught.value) == f"{bomb}: decompresses to more than the 0.54 GB limit; refused"
    assert elapsed < 30
    assert peak < 128 << 20


def test_gzip_bomb_cli_obeys_the_environment_limit(bomb: Path) -> None:
    result = run_cli("summary", str(bomb), env={"FUSION_MAX_TRACE_BYTES": str(100 << 20)})
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == f"error: {bomb}: decompresses to more than the 0.10 GB limit; refused\n"


def test_a_large_file_that_is_no_object_is_refused_from_its_start(tmp_path) -> None:
    """300 MB of an array: the first byte tells it is no trace; the file is not read through."""
    array = gzip_bomb(tmp_path / "array.json.gz", 300 << 20, prefix=b"[", suffix=b"]")
    raw = reader.open_input(array)
    with pytest.raises(TraceError) as caught:
        events_module.read_events(raw)
    assert str(caught.value) == f"{array}: the JSON holds an array at the top level, not a trace object"
    assert sum(len(chunk) for chunk in raw.chunks) > 250 << 20


def test_the_size_limit_is_read_from_the_environment_at_each_load(monkeypatch) -> None:
    monkeypatch.setenv("FUSION_MAX_TRACE_BYTES", "100")
    with pytest.raises(TraceError) as caught:
        load(BASE, name="base.json")
    assert str(caught.value) == "base.json: file is 0.00 GB, above the 0.00 GB limit"
    monkeypatch.delenv("FUSION_MAX_TRACE_BYTES")
    assert load(BASE, name="base.json").kernel_count == 2


def test_plain_file_above_the_limit_is_refused_before_reading(tmp_path) -> None:
    path = content(BASE)(tmp_path)
    result = run_cli("summary", str(path), env={"FUSION_MAX_TRACE_BYTES": "100"})
    assert result.stderr == f"error: {path}: file is 0.00 GB, above the 0.00 GB limit\n"


def test_an_event_without_end_stops_at_the_event_limit(monkeypatch) -> None:
    monkeypatch.setattr(events_module, "MAX_EVENT_BYTES", 1 << 20)
    monkeypatch.setattr(events_module, "PIECE_SIZE", 64 << 10)
    monkeypatch.setattr(reader, "READ_SIZE", 64 << 10)
    data = b'{"traceEvents":[{"cat":"kernel","name":"' + b"x" * (4 << 20) + b'"}]}'
    with pytest.raises(TraceError) as caught:
        load(data, name="huge.json")
    assert str(caught.value) == "huge.json: no end of an event within 1 MB after byte 16; too large, refused"


CRAFTED_SIZE = 5 << 20
SCALE_PIECE = 64 << 10
"""Pieces and reads of 64 KB: a 5 MB input is cut as often as a 1.3 GB one with the real 16 MB pieces."""
MAX_CRAFTED_RATIO = 10


def crafted_kernel(i: int, name: bytes = b"k", args: bytes = b"") -> bytes:
    return (
        b'{"ph":"X","cat":"kernel","name":"%s","pid":0,"tid":7,"ts":%d,"dur":2.5,'
        b'"args":{"correlation":%d,"stream":7,"device":0%s}}' % (name, i, i, args)
    )


def cpu_op(i: int) -> bytes:
    return b'{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":%d,"dur":4,"args":{"Input Dims":[[8,16],[16,32]]}}' % i


def events_of(make: Callable[[int], bytes], size: int = CRAFTED_SIZE) -> bytes:
    """A trace of events `make(i)` filling about `size` bytes."""
    out, total = [], 0
    while total < size:
        out.append(make(len(out)))
        total += len(out[-1]) + 1
    return doc(*out)


def plain_trace() -> bytes:
    return events_of(lambda i: crafted_kernel(i) if i % 2 else cpu_op(i))


CRAFTED = [
    pytest.param(lambda: events_of(lambda i: crafted_kernel(i, b"},{" * 300)), id="names-full-of-},"),
    pytest.param(lambda: doc(crafted_kernel(0, b'},\\"' * (CRAFTED_SIZE // 4))), id="one-5-MB-string"),
    pytest.param(lambda: doc(*[b"{}"] * (CRAFTED_SIZE // 3)), id="many-tiny-events"),
    pytest.param(lambda: events_of(lambda i: crafted_kernel(i, args=b',"x":' + deep(500))), id="args-500-deep"),
    pytest.param(
        lambda: events_of(lambda i: crafted_kernel(i, b'\\\\\\"},\\\\' * 100)),
        id="runs-of-backslashes-and-escaped-quotes",
    ),
    pytest.param(lambda: events_of(lambda i: crafted_kernel(i, b"]}[{" * 200)), id="brackets-in-names"),
    pytest.param(lambda: doc(crafted_kernel(0, b"]" * CRAFTED_SIZE)), id="a-5-MB-name-of-]"),
    pytest.param(
        lambda: (
            b'{"m":{'
            + b",".join(b'"traceEvents":%d' % i for i in range(CRAFTED_SIZE // 20))
            + b'},"traceEvents":['
            + KERNEL
            + b"]}"
        ),
        id="header-with-nested-traceEvents-keys",
    ),
    pytest.param(
        lambda: (
            b'{"m":[' + b",".join([b'"traceEvents"'] * (CRAFTED_SIZE // 14)) + b'],"traceEvents":[' + KERNEL + b"]}"
        ),
        id="header-with-traceEvents-strings",
    ),
    pytest.param(lambda: doc(KERNEL + b" " * CRAFTED_SIZE), id="5-MB-of-blanks-before-the-end"),
]


def best_load_time(data: bytes) -> float:
    """The fastest of three loads (the machine is shared); every crafted input is valid JSON and loads."""
    times = []
    for _ in range(3):
        started = time.perf_counter()
        load(data, name="crafted.json")
        times.append(time.perf_counter() - started)
    return min(times)


@pytest.fixture(scope="module")
def plain_load() -> tuple[int, float]:
    """The plain trace's size and best load time with SCALE_PIECE pieces and reads, measured once for the module:
    every crafted case compares with the same plain trace (about 0.45 s of CPU for its three loads; the crafted
    inputs' ratios are 0.2-1.6 of the allowed 10)."""
    plain = plain_trace()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(events_module, "PIECE_SIZE", SCALE_PIECE)
        patch.setattr(reader, "READ_SIZE", SCALE_PIECE)
        return len(plain), best_load_time(plain)


@pytest.mark.parametrize("make", CRAFTED)
def test_crafted_input_costs_at_most_ten_plain_traces_of_its_size(
    monkeypatch, plain_load: tuple[int, float], make: Callable[[], bytes]
) -> None:
    monkeypatch.setattr(events_module, "PIECE_SIZE", SCALE_PIECE)
    monkeypatch.setattr(reader, "READ_SIZE", SCALE_PIECE)
    crafted, (plain_size, plain_time) = make(), plain_load
    assert abs(len(crafted) - plain_size) < plain_size // 10
    assert best_load_time(crafted) < MAX_CRAFTED_RATIO * plain_time


def test_strings_of_cut_marks_longer_than_a_piece_load(monkeypatch) -> None:
    """Three events of 600 KB strings full of `},`, with a 1 MB event limit: valid JSON, so it loads (with the
    full names, as asked for by FUSION_MAX_NAME_CHARS)."""
    monkeypatch.setenv("FUSION_MAX_NAME_CHARS", str(1 << 20))
    monkeypatch.setattr(events_module, "MAX_EVENT_BYTES", 1 << 20)
    monkeypatch.setattr(events_module, "PIECE_SIZE", SCALE_PIECE)
    monkeypatch.setattr(reader, "READ_SIZE", SCALE_PIECE)
    names = [b"},{" * 200_000 + b"%d" % i for i in range(3)]
    trace = load(doc(*(crafted_kernel(i, name) for i, name in enumerate(names))), name="marks.json")
    assert list(trace.kernels["name"].astype(str)) == [name.decode() for name in names]


def test_an_event_of_cut_marks_above_the_limit_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(events_module, "MAX_EVENT_BYTES", 1 << 20)
    monkeypatch.setattr(events_module, "PIECE_SIZE", SCALE_PIECE)
    monkeypatch.setattr(reader, "READ_SIZE", SCALE_PIECE)
    data = doc(KERNEL, crafted_kernel(1, b"},{" * 700_000))
    with pytest.raises(TraceError) as caught:
        load(data, name="huge.json")
    assert (
        str(caught.value)
        == f"huge.json: no end of an event within 1 MB after byte {len(doc(KERNEL)) - 1}; too large, refused"
    )


def test_whitespace_only_gzip_is_refused_at_the_cost_of_reading_it(tmp_path) -> None:
    blanks = gzip_bomb(tmp_path / "blank.json.gz", 256 << 20, prefix=b"", suffix=b"")
    started = time.perf_counter()
    for _ in reader.open_input(blanks).chunks:
        pass
    reading = time.perf_counter() - started
    tracemalloc.start()
    started = time.perf_counter()
    with pytest.raises(TraceError) as caught:
        load(blanks)
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert str(caught.value) == f"{blanks}: the file holds only whitespace, no JSON value"
    assert elapsed < 2 * reading + 1
    assert peak < 64 << 20


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fusion", *args],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        pytest.param(content(b""), "the file is empty", id="empty-file"),
        pytest.param(
            content(at(b'"k2"')),
            "truncated: the file ends before the traceEvents list is closed",
            id="truncated-inside-an-event",
        ),
        pytest.param(directory, "is a directory, not a trace file", id="a-directory"),
    ],
)
def test_real_process_prints_one_line_and_no_traceback(tmp_path, make: Maker, problem: str) -> None:
    path = make(tmp_path)
    result = run_cli("summary", str(path))
    assert (result.returncode, result.stdout, result.stderr) == (2, "", f"error: {path}: {problem}\n")


def test_real_process_compare_names_the_bad_side(tmp_path) -> None:
    good = content(kineto_trace("AMD"))(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"[]")
    result = run_cli("compare", str(good), str(bad))
    expected = f"error: {bad}: the JSON holds an array at the top level, not a trace object\n"
    assert (result.returncode, result.stdout, result.stderr) == (2, "", expected)


# -- pairs: compare runs, and pair_warnings says what is odd about the pair


def built(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_compare_of_the_same_file_runs_and_warns(tmp_path, capsys) -> None:
    path = built(tmp_path, "amd.json", kineto_trace("AMD"))
    assert main(["compare", str(path), str(path), "--format", "json"]) == 0
    warning = "both sides are the same trace (identical content); every difference found will be zero"
    assert f"warning: {warning}\n" in capsys.readouterr().err
    assert pair_warnings(load(path), load(path)) == [warning]


def test_compare_of_one_platform_twice_runs_and_warns(tmp_path, capsys) -> None:
    first = built(tmp_path, "a.json", kineto_trace("NVIDIA", steps=3))
    second = built(tmp_path, "b.json", kineto_trace("NVIDIA", steps=4))
    assert main(["compare", str(first), str(second), "--format", "json"]) == 0
    warning = (
        "both traces are NVIDIA; the tool is made for AMD vs NVIDIA, but a same-vendor comparison "
        "(e.g. two software versions) still works"
    )
    assert f"warning: {warning}\n" in capsys.readouterr().err
    assert pair_warnings(load(first), load(second)) == [warning]


def test_compare_with_a_side_without_kernels_is_one_line_and_exit_2(tmp_path, capsys) -> None:
    amd = built(tmp_path, "amd.json", kineto_trace("AMD"))
    cpu = built(tmp_path, "cpu.json", trace_json([], deviceProperties=[{"name": "NVIDIA H100", "warpSize": 32}]))
    assert main(["compare", str(amd), str(cpu), "--format", "json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"error: {cpu}: no kernel events to compare (cat 'kernel'); not a GPU profile?\n"
    trace2 = load(cpu)
    warning = f"trace 2 ({trace2.label}) has no kernel events; nothing to compare on that side"
    assert pair_warnings(load(amd), trace2) == [warning]


def test_pair_warnings_for_an_unknown_platform_and_none_for_a_sound_pair() -> None:
    amd, nvidia = load(kineto_trace("AMD")), load(kineto_trace("NVIDIA"))
    assert pair_warnings(amd, nvidia) == []
    unknown = load(trace_json([kernel_event("k", 1.0, 1.0, 1)]), name="mystery.json")
    assert pair_warnings(amd, unknown) == [
        "trace 2 (mystery.json): platform unknown (no roctracer_version, warpSize or runtime events to tell); "
        "the kernel-name rules of both vendors are tried on it"
    ]


# -- issue 38: pipes, loops, devices, a huge name, impossible durations


def peak_rss_mb(command: list[str], shell: bool = False) -> tuple[subprocess.CompletedProcess, float]:
    """Run a command; its result and the peak resident memory (MB) of the process it started."""
    process = subprocess.Popen(
        command if not shell else ["bash", "-c", command[0]],
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "FUSION_CACHE_DIR": os.environ["FUSION_CACHE_DIR"]},
    )
    out, err = process.communicate(timeout=300)
    _, _, usage = os.wait4(process.pid, 0) if process.returncode is None else (0, 0, None)
    peak = (usage.ru_maxrss if usage else resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
    return subprocess.CompletedProcess(command, process.returncode, out, err), peak


def test_a_named_pipe_nothing_writes_to_is_refused_not_waited_for(tmp_path, capsys, monkeypatch) -> None:
    """`mkfifo f; fusion summary f` hung for ever (issue 38 #7)."""
    monkeypatch.setattr(reader, "PIPE_WAIT_SECONDS", 1)
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    started = time.monotonic()
    assert main(["summary", str(fifo)]) == 2
    assert time.monotonic() - started < 10
    assert capsys.readouterr() == (
        "",
        f"error: {fifo}: is a named pipe that nothing wrote to within 1 s; give a trace file, or write one into it\n",
    )


def test_a_named_pipe_with_a_writer_is_read_once(tmp_path, capsys) -> None:
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(BASE))
    writer.start()
    assert main(["summary", str(fifo), "--format", "json"]) == 0
    writer.join()
    assert json.loads(capsys.readouterr().out)["kernels"] == 2


def test_a_device_is_refused_without_reading_it(capsys) -> None:
    assert main(["summary", "/dev/zero"]) == 2
    assert capsys.readouterr().err == "error: /dev/zero: is a device or socket, not a trace file\n"


def test_a_symlink_loop_given_to_compare_is_one_line_and_exit_2(tmp_path, capsys) -> None:
    """compare said 'internal error: RuntimeError: Symlink loop' with exit 1 (issue 38 #8)."""
    loop, other = tmp_path / "a.json", tmp_path / "b.json"
    loop.symlink_to(other)
    other.symlink_to(loop)
    good = content(kineto_trace("NVIDIA"))(tmp_path)
    for argv in (["compare", str(loop), str(good)], ["compare", str(good), str(loop), "--format", "json"]):
        assert main(argv) == 2
        assert capsys.readouterr() == ("", f"error: {loop}: cannot be read (Too many levels of symbolic links)\n")


def test_process_substitution_is_read_once_in_bounded_memory(tmp_path) -> None:
    """`compare <(zcat a) <(zcat b)` said 'the file is empty' (issue 38 #9): now the files' own result, within
    3x the memory of comparing the files."""
    pair = [PROJECT / "sample_traces" / "vllm_moe_full_graph" / f"{side}.json.gz" for side in ("amd", "nvidia")]
    files, files_mb = peak_rss_mb([sys.executable, "-m", "fusion", "compare", *map(str, pair), "--format", "json"])
    piped, piped_mb = peak_rss_mb(
        [f"{sys.executable} -m fusion compare <(zcat {pair[0]}) <(zcat {pair[1]}) --format json"], shell=True
    )
    assert (piped.returncode, files.returncode) == (0, 0)
    assert piped.stderr == files.stderr  # the same warnings, and nothing else
    assert json.loads(piped.stdout)["metadata"] == json.loads(files.stdout)["metadata"]
    assert piped_mb < 3 * files_mb


HUGE_NAME_MB = 10
"""The corpus's huge name, scaled from issue 38's 200 MB (docs/bad_inputs.md has the full-size figures)."""


def test_a_huge_kernel_name_costs_bounded_memory_and_is_cut_in_every_report(tmp_path, capsys) -> None:
    """One 10 MB kernel name: within 3x the memory of a plain trace of the file's size, and every report names it
    by its first FUSION_MAX_NAME_CHARS characters, its length and a digest (issue 38 #10)."""
    events = [kernel_event("k" * (HUGE_NAME_MB << 20), 1.0, 2.0, 1)]
    huge = content(trace_json(events + [kernel_event("gemm", 5.0 + i, 1.0, 2 + i) for i in range(1000)]))(tmp_path)
    plain = tmp_path / "plain.json"
    plain.write_bytes(events_of(crafted_kernel, huge.stat().st_size))
    huge_run, huge_mb = peak_rss_mb([sys.executable, "-m", "fusion", "summary", str(huge)])
    plain_run, plain_mb = peak_rss_mb([sys.executable, "-m", "fusion", "summary", str(plain)])
    assert huge_run.returncode == plain_run.returncode == 0 and huge_mb < 3 * plain_mb, (huge_mb, plain_mb)
    (cut,) = [n for n in load(huge).names.index if n.startswith("k")]
    assert cut.startswith("k" * 16384 + f"…[{HUGE_NAME_MB << 20:,} characters; xxh3 ") and len(cut) < 16384 + 64
    assert cut[:160] in huge_run.stdout and len(huge_run.stdout) < 1 << 16
    assert main(["compare", str(huge), str(plain), "--format", "json", "--no-cache"]) == 0
    assert len(capsys.readouterr().out) < 1 << 20


def test_the_full_name_is_kept_where_asked_for(tmp_path, monkeypatch) -> None:
    name = "k" * 40_000
    path = content(trace_json([kernel_event(name, 1.0, 2.0, 1), kernel_event("gemm", 5.0, 1.0, 2)]))(tmp_path)
    assert name not in load(path).names.index
    monkeypatch.setenv("FUSION_MAX_NAME_CHARS", "50000")
    assert name in load(path).names.index


def test_two_long_names_with_one_beginning_stay_two_names(tmp_path) -> None:
    names = ["k" * 20_000 + "a", "k" * 20_000 + "b"]
    path = content(trace_json([kernel_event(n, float(i), 1.0, i) for i, n in enumerate(names)]))(tmp_path)
    assert len(load(path).names) == 2
