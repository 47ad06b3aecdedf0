"""The loader: platform and GPU detection, the kernel table, chunked decoding, bad input."""

from __future__ import annotations

import gzip
import io
import json

import numpy as np
import orjson
import pandas as pd
import pytest
from builders import kernel_event, shared_trace, shared_trace_names, trace_json, write_trace
from hypothesis import given, settings
from hypothesis import strategies as st

from fusion.classify.trace import load
from fusion.errors import TraceError
from fusion.loader import events as events_module
from fusion.loader import reader
from fusion.loader.columns import taken, used_categories
from fusion.loader.kineto import GPU_WORK_CATEGORIES
from fusion.model.columns import KERNEL_COLUMNS
from fusion.vocabulary import GPU_KERNEL

# name: (platform, GPU as reported, kernels) — checked by hand against MANIFEST.md.
SHARED_EXPECTED = {
    "hta_mi250_minitoy": ("AMD", "AMD Radeon Graphics", 14),
    "hta_negative_queue_rank0": ("NVIDIA", "NVIDIA A100-SXM4-80GB", 6080),
    "hta_sampled_rank0": ("NVIDIA", "NVIDIA GPU, name not recorded", 1154),
    "hta_trace_diff_control": ("NVIDIA", "NVIDIA A100-PG509-200", 8568),
    "switchtransformer_a100": ("NVIDIA", "NVIDIA A100 80GB PCIe", 484),
    "tl_b200_eager": ("NVIDIA", "NVIDIA B200", 768),
    "tl_h100_qwen1.5-0.5b": ("NVIDIA", "NVIDIA H100 80GB HBM3", 1465),
    "tl_mi210_gpu_only": ("AMD", "AMD Instinct MI210", 562),
    "tl_mi300_qwen1.5-0.5b": ("AMD", "AMD Instinct MI300X VF", 1516),
    "tl_vllm_decode_full_exec": ("AMD", "AMD GPU, name not recorded", 425),
    "tl_vllm_pd_piecewise_exec": ("AMD", "AMD GPU, name not recorded", 413),
    "tl_xdit_flux_aiter_profile": ("AMD", "AMD Instinct MI300X", 5549),
}


def kernel_rows(trace) -> tuple[int, float]:
    """Count and time of the kernels proper: the rows that are not memory copies or memsets."""
    names = trace.names[(trace.names["gpu_work"] == GPU_KERNEL).to_numpy()]
    return int(names["count"].sum()), float(names["time_us"].sum())


@pytest.mark.parametrize("name", sorted(SHARED_EXPECTED))
def test_platform_gpu_and_kernel_count_on_shared_traces(name: str) -> None:
    platform, gpu, kernels = SHARED_EXPECTED[name]
    trace = load(shared_trace(name))
    assert (trace.platform, trace.gpu, kernel_rows(trace)[0]) == (platform, gpu, kernels)
    assert trace.gpu_recorded == ("not recorded" not in gpu)


def test_amd_without_roctracer_version_is_told_by_warp_size() -> None:
    trace = load(shared_trace("hta_mi250_minitoy"))
    assert trace.platform_evidence == "deviceProperties warpSize 64"


def test_no_device_properties_uses_runtime_events() -> None:
    trace = load(shared_trace("hta_sampled_rank0"))
    assert trace.device_properties == []
    assert trace.platform_evidence == "cuda* runtime events"


def test_graph_launch_shares_one_correlation() -> None:
    trace = load(shared_trace("tl_vllm_decode_full_exec"))
    assert trace.kernels["correlation"].value_counts().max() == 421


def test_kernel_table_columns_and_dtypes() -> None:
    trace = load(shared_trace("tl_mi300_qwen1.5-0.5b"))
    table = trace.kernels
    assert tuple(table.columns) == KERNEL_COLUMNS
    assert isinstance(table["name"].dtype, pd.CategoricalDtype)
    assert isinstance(table["type"].dtype, pd.CategoricalDtype)
    assert table["ts"].is_monotonic_increasing
    assert (table["correlation"] >= 0).all()
    assert trace.names["count"].sum() == len(table)
    for column in ("op", "op_top", "module", "launch"):
        assert isinstance(table[column].dtype, pd.CategoricalDtype)
    assert table["op_call"].dtype == table["thread"].dtype == "int64"


@pytest.mark.parametrize("name", shared_trace_names())
def test_every_shared_trace_matches_its_kernel_names_file(name: str) -> None:
    path = shared_trace(name)
    trace = load(path)
    listing = path.parent / "kernel_names.txt"
    listed = pd.read_csv(
        listing,
        sep="\t",
        comment=None,
        skiprows=1 if listing.read_text().startswith("# ") else 0,
        header=None,
        names=["count", "total_dur_us", "name"],
        quoting=3,
        keep_default_na=False,
    )
    count, time_us = kernel_rows(trace)
    assert count == listed["count"].sum()
    assert time_us == pytest.approx(listed["total_dur_us"].sum(), rel=1e-3)


def test_json_and_gzip_give_identical_tables(tmp_path) -> None:
    data = gzip.decompress(shared_trace("tl_vllm_pd_piecewise_exec").read_bytes())
    plain = tmp_path / "trace.json"
    plain.write_bytes(data)
    packed = tmp_path / "trace.json.gz"
    packed.write_bytes(gzip.compress(data))
    pd.testing.assert_frame_equal(load(plain).kernels, load(packed).kernels)


def test_gzip_is_told_by_magic_bytes_not_suffix(tmp_path) -> None:
    events = [kernel_event("Cijk_Alik_Bljk_HHS_BH_MT128x128x32", 1.0, 5.0, 1)]
    wrong_suffix = write_trace(tmp_path / "trace.json", events, compress=True)
    plain_as_gz = write_trace(tmp_path / "trace.json.gz", events)
    assert load(wrong_suffix).kernel_count == 1
    assert load(plain_as_gz).kernel_count == 1


def test_bytes_and_file_objects_are_accepted() -> None:
    data = trace_json([kernel_event("k", 1.0, 2.0, 5)])
    assert load(data, name="upload.json").source == "upload.json"
    assert load(io.BytesIO(gzip.compress(data))).kernel_count == 1


def test_legacy_capitalised_kernel_category() -> None:
    events = [
        kernel_event("void at::native::vectorized_elementwise_kernel<4>", 10.0, 2.0, 1, cat="Kernel"),
        kernel_event("ampere_sgemm_128x64_tn", 20.0, 9.0, 2, cat="Kernel"),
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "ts": 9.0, "dur": 1.0},
    ]
    trace = load(trace_json(events, deviceProperties=[{"id": 0, "name": "Tesla V100", "warpSize": 32}]))
    assert trace.kernel_count == 2
    assert trace.platform == "NVIDIA"
    assert list(trace.kernels["name"]) == [events[0]["name"], events[1]["name"]]


def _reference_kernels(data: bytes) -> list[tuple]:
    doc = orjson.loads(data)
    rows = [
        (e["name"], float(e["ts"]), float(e["dur"]), e["args"]["correlation"])
        for e in doc["traceEvents"]
        if e.get("cat") in GPU_WORK_CATEGORIES
    ]
    return sorted(rows, key=lambda row: row[1])


SCAN_OR_NOT = pytest.mark.parametrize("scan_from", [0, 1 << 62], ids=["compiled scan", "msgspec"])
"""Pieces from this size on are decoded by the compiled scan: every piece, or none."""


@SCAN_OR_NOT
@pytest.mark.parametrize("piece_size", [64, 1000, 50_000])
def test_small_pieces_decode_exactly_like_a_whole_parse(monkeypatch, piece_size: int, scan_from: int) -> None:
    data = gzip.decompress(shared_trace("tl_vllm_pd_piecewise_exec").read_bytes())
    monkeypatch.setattr(events_module, "PIECE_SIZE", piece_size)
    monkeypatch.setattr(events_module, "COMPILED_SCAN_MIN_BYTES", scan_from)
    monkeypatch.setattr(reader, "READ_SIZE", 4096)
    table = load(data).kernels
    got = list(zip(table["name"].astype(str), table["ts"], table["dur"], table["correlation"]))
    assert got == _reference_kernels(data)


@SCAN_OR_NOT
def test_cut_inside_strings_that_look_like_boundaries(monkeypatch, scan_from: int) -> None:
    monkeypatch.setattr(events_module, "COMPILED_SCAN_MIN_BYTES", scan_from)
    tricky = 'fake}, {"cat": "kernel", "name": "x"}] , "traceName": "y"'
    events = [kernel_event(f"{tricky}_{i}", float(i), 1.0, i) for i in range(300)]
    data = trace_json(events, deviceProperties=[{"id": 0, "name": "", "warpSize": 64}])
    data = data[:-1] + b', "extra": [1, {"a": [2]}], "traceName": "t]"}'
    monkeypatch.setattr(events_module, "PIECE_SIZE", 97)
    trace = load(data)
    assert list(trace.kernels["name"].astype(str)) == [e["name"] for e in events]
    assert trace.platform == "AMD"


def test_top_level_keys_after_the_events_are_read() -> None:
    events = [kernel_event("k", 1.0, 1.0, 1)]
    data = orjson.dumps({"traceEvents": events, "deviceProperties": [{"name": "AMD Instinct MI250X", "warpSize": 64}]})
    trace = load(data)
    assert (trace.platform, trace.gpu) == ("AMD", "AMD Instinct MI250X")


def test_progress_reports_bytes_read(tmp_path) -> None:
    path = write_trace(tmp_path / "t.json", [kernel_event("k", float(i), 1.0, i) for i in range(2000)])
    seen: list[tuple[int, int]] = []
    load(path, progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (path.stat().st_size, path.stat().st_size)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_no_kernel_events_is_a_warning_not_an_error() -> None:
    data = trace_json([{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1.0, "dur": 3.0}])
    trace = load(data, name="cpu.json")
    assert trace.kernel_count == 0
    assert any("no kernel events" in w for w in trace.warnings)


def test_incomplete_kernel_events_are_skipped_with_a_warning() -> None:
    events = [
        kernel_event("ok", 1.0, 2.0, 1),
        {"cat": "kernel", "ts": 2.0, "dur": 1.0},
        {"cat": "kernel", "name": "no_ts", "dur": 1.0},
        {"cat": "kernel", "name": "str_dur", "ts": 3.0, "dur": "1.0"},
        {"cat": "kernel", "name": "no_args", "ts": 4.0, "dur": 1.0},
    ]
    trace = load(trace_json(events))
    assert list(trace.kernels["name"]) == ["ok", "no_args"]
    assert trace.kernels["correlation"].tolist() == [1, -1]
    text = " ".join(trace.warnings)
    assert "no name" in text and "no numeric ts" in text and "no numeric dur" in text and "args" in text


def test_duplicate_kernel_events_are_dropped_with_a_warning() -> None:
    event = kernel_event("k", 1.0, 2.0, 1)
    trace = load(trace_json([event, event, kernel_event("k", 5.0, 2.0, 2)]))
    assert trace.kernel_count == 2
    assert any("duplicate" in w for w in trace.warnings)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "empty"),
        (b"hello, world", "not valid JSON"),
        (b'{"traceEvents": [{"cat": "kernel", "name": "k", "ts": 1', "truncated"),
        (b'{"traceEvents": [{"cat": "kernel"}, {"cat"', "truncated"),
        (b"[1, 2, 3]", "array at the top level"),
        (b'{"schemaVersion": 1}', "without a traceEvents list"),
        (b'{"traceEvents": {"a": 1}}', "traceEvents is not a list"),
        (b'{"traceEvents": [1, 2]}', "entry 0 is not an object"),
        (b'{"traceEvents": [{"cat": "kernel"}, "x"]}', "entry 1 is not an object"),
        (b"\x1f\x8b\x08\x00garbage", "gzip data is truncated or corrupt"),
        (b"\x1f\x8b\x08\x00" + bytes(range(200)), "corrupt gzip"),
        (gzip.compress(b'{"traceEvents": []}', mtime=0)[:-12], "truncated"),
        (b'{"traceEvents": [{"cat": "kernel", "name": "\xff\xfe"}]}', "UTF-8"),
    ],
)
def test_bad_input_names_the_file_and_the_problem(data: bytes, problem: str) -> None:
    with pytest.raises(TraceError) as caught:
        load(data, name="bad.json")
    assert str(caught.value).startswith("bad.json: ")
    assert problem in str(caught.value)


def test_missing_file(tmp_path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        load(tmp_path / "nope.json")


def test_gzip_bomb_stops_at_the_limit() -> None:
    bomb = gzip.compress(b'{"traceEvents": [' + b" " * (50 << 20) + b"]}")
    with pytest.raises(TraceError, match="limit"):
        load(bomb, name="bomb.json.gz", max_bytes=10 << 20)


def test_a_traceevents_key_nested_before_the_real_one() -> None:
    event = kernel_event("k", 1.0, 2.0, 1)
    data = orjson.dumps({"meta": {"traceEvents": 1}, "traceEvents": [event]})
    trace = load(data)
    assert trace.kernel_count == 1


def test_a_text_mode_file_is_refused_with_a_message() -> None:
    with pytest.raises(TraceError, match="text mode"):
        load(io.StringIO("{}"))


ODD_EVENTS = [
    {
        "cat": "kernel",
        "name": "k",
        "ts": 1,
        "dur": 2,
        "pid": 0,
        "tid": 7,
        "args": {"correlation": 5, "stream": 7, "device": 0, "grid": [1, 2, 3]},
    },
    {"cat": "kernel", "name": "k", "ts": 1.5, "dur": 2},
    {"cat": "kernel", "name": 3, "ts": "x", "dur": None, "args": None},
    {"cat": "cpu_op", "name": "aten::mm", "ts": 1e301, "pid": [1], "tid": {"a": 1}, "args": {"correlation": True}},
    {
        "cat": ["kernel"],
        "name": "k",
        "args": {"correlation": 2**70, "stream": "7", "device": -1.5, "nested": {"x": []}},
    },
    {"ph": "M", "args": {}},
]


@pytest.mark.parametrize("odd_args", [None, [1, 2], "text", 3])
def test_events_decode_the_same_in_one_pass_and_with_raw_args(odd_args: object) -> None:
    """The one-pass decode (args' ids decoded with the event) gives what decoding args separately gives;
    a piece with args that are not objects falls back, and those args carry no ids."""
    events = ODD_EVENTS + ([{"cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": odd_args}] if odd_args else [])
    data = json.dumps(events).encode()
    decoded = events_module._decode_events("x", data, 1, 0)
    raw = events_module._decode_raw_events("x", data, 1, 0)
    assert [(e.cat, e.name, e.ts, e.dur, e.pid, e.tid) for e in decoded] == [
        (e.cat, e.name, e.ts, e.dur, e.pid, e.tid) for e in raw
    ]
    ids = [None if a is None else (a.correlation, a.stream, a.device) for a in (e.args for e in decoded)]
    assert ids[:5] == [(5, 7, 0), None, None, (True, None, None), (2**70, "7", -1.5)]
    assert ids[5:] == [(None, None, None)] + ([None] if odd_args else [])


def test_kernel_table_unchanged_when_a_piece_falls_back_to_raw_args(tmp_path) -> None:
    """A kernel whose args are not an object changes no other kernel's row, and has no ids itself."""
    events = [kernel_event(f"k{i % 3}", float(i), 1.0, i, stream=7, device=0) for i in range(200)]
    plain = load(write_trace(tmp_path / "plain.json", events)).kernels
    odd = {"cat": "kernel", "name": "odd", "ts": 500.0, "dur": 1.0, "args": ["not", "an", "object"]}
    mixed = load(write_trace(tmp_path / "mixed.json", [*events, odd])).kernels
    assert mixed.iloc[-1][["name", "correlation", "stream", "device"]].tolist() == ["odd", -1, -1, -1]
    left = mixed.iloc[:-1].reset_index(drop=True)
    left["name"] = left["name"].cat.remove_unused_categories()
    pd.testing.assert_frame_equal(
        left[["name", "ts", "dur", "correlation", "stream", "device"]],
        plain[["name", "ts", "dur", "correlation", "stream", "device"]],
    )


def test_thread_pairs_are_numbered_in_order_of_first_appearance() -> None:
    """distinct_pairs numbers (pid, tid) pairs as a dict of tuples numbers them; an unset value is None."""
    import random

    from fusion.loader.event_columns import distinct_pairs

    draw = random.Random(7)
    for size in (0, 1, 7, 500):
        pid = np.array([draw.choice([0, 5, -3, 2**62]) for _ in range(size)], dtype=np.int64)
        tid = np.array([draw.randrange(4) for _ in range(size)], dtype=np.int64)
        pid_set, tid_set = (np.array([draw.random() < 0.8 for _ in range(size)], dtype=bool) for _ in range(2))
        codes, pairs = distinct_pairs(pid, pid_set, tid, tid_set)
        expected: dict = {}
        keys = [
            (p if ps else None, t if ts else None) for p, ps, t, ts in zip(pid.tolist(), pid_set, tid.tolist(), tid_set)
        ]
        assert codes.tolist() == [expected.setdefault(key, len(expected)) for key in keys]
        assert pairs == list(expected)


def test_interning_codes_follows_first_appearance_across_pieces() -> None:
    """intern_coded enters values in the order a dict of the values would, and merges codes of equal values."""
    from fusion.loader.columns import intern_coded

    table: dict = {}
    first = intern_coded(np.array([2, 0, 2, 1], dtype=np.int32), ["a", "b", "c"], table)
    second = intern_coded(np.array([1, 0, 2, 1], dtype=np.int32), ["c", "d", "c"], table)
    assert intern_coded(np.array([], dtype=np.int32), ["x"], table).tolist() == []
    assert table == {"c": 0, "a": 1, "b": 2, "d": 3}
    assert first.tolist() == [0, 1, 0, 2] and second.tolist() == [3, 0, 0, 3]


def test_small_unique_is_numpy_unique() -> None:
    from fusion.model.ops import small_unique

    for values in (
        np.array([4, -1, 4, 0, 9, -1], dtype=np.int64),
        np.array([2, 2], dtype=np.int32),
        np.zeros(0, np.int64),
    ):
        distinct, inverse = small_unique(values)
        expected, expected_inverse = np.unique(values, return_inverse=True)
        assert distinct.tolist() == expected.tolist() and distinct.dtype == expected.dtype
        assert inverse.tolist() == expected_inverse.reshape(-1).tolist()


def test_duplicates_found_among_equal_ts_are_pandas_duplicated() -> None:
    """_duplicated checks only rows sharing a ts, and marks exactly what DataFrame.duplicated marks."""
    from fusion.loader.kineto import _duplicated

    rng = np.random.default_rng(0)
    table = pd.DataFrame(
        {
            "name": pd.Categorical.from_codes(rng.integers(0, 3, 400), categories=["a", "b", "c"]),
            "ts": rng.choice([0.0, -0.0, 1.5, 2.0, 3.25, *range(10, 300)], 400),
            "dur": rng.choice([1.0, 2.0], 400),
            "correlation": rng.integers(-1, 3, 400),
        }
    )
    expected = table.duplicated().to_numpy()
    assert expected.any() and not expected.all()
    assert _duplicated(table).tolist() == expected.tolist()


def test_used_categories_drops_unused_names_keeping_order_and_missing_values():
    column = pd.Series(pd.Categorical(["c", None, "a", "c"], categories=["c", "b", "a", "d"]))
    trimmed = used_categories(column)
    assert list(trimmed.categories) == ["c", "a"]
    assert trimmed.codes.tolist() == [0, -1, 1, 0]


@settings(max_examples=40, derandomize=True, deadline=None)
@given(st.lists(st.sampled_from(["c", "b", "a", None]), min_size=1, max_size=30), st.data())
def test_taken_rows_and_used_categories_equal_pandas(names, data):
    """taken is pandas' take and renumbering, dtypes and categories included; used_categories is pandas'
    remove_unused_categories; on categorical (with missing values), float, int, bool and string columns."""
    size = len(names)
    table = pd.DataFrame(
        {
            "name": pd.Categorical(names, categories=["d", "c", "b", "a"]),
            "ordered": pd.Categorical(names, categories=["a", "b", "c"], ordered=True),
            "dur": np.arange(size, dtype=np.float64) / 3,
            "stream": np.arange(size, dtype=np.int64) - 2,
            "flag": np.arange(size) % 2 == 0,
            "text": pd.array([str(n) for n in names], dtype="str"),
        },
        index=np.arange(size) * 7,
    )
    rows = np.array(data.draw(st.lists(st.integers(0, size - 1), max_size=40)), dtype=np.int64)
    expected = table.take(rows).reset_index(drop=True)
    got = taken(table, rows)
    pd.testing.assert_frame_equal(got, expected, check_exact=True)
    for column in ("name", "ordered"):
        trimmed = pd.Series(used_categories(got[column]))
        pd.testing.assert_series_equal(trimmed, got[column].cat.remove_unused_categories(), check_names=False)


def test_a_subset_keeps_its_rows_in_order_and_recounts_the_names_table():
    from kernels import make_trace

    trace = make_trace(
        [("gemm", "GEMM", 4.0, 1), ("add", "Elementwise", 1.0, 1), ("gemm", "GEMM", 6.0, 2), ("fill", "Memset", 2.0, 3)]
    )
    part = trace.subset(np.array([0, 2, 3]), "two steps only")
    assert part.kernels["dur"].tolist() == [4.0, 6.0, 2.0] and part.kernels.index.tolist() == [0, 1, 2]
    assert list(part.kernels["name"].cat.categories) == ["fill", "gemm"]
    assert part.names[["count", "time_us"]].to_dict("index") == {
        "gemm": {"count": 2, "time_us": 10.0},
        "fill": {"count": 1, "time_us": 2.0},
    }
    assert list(part.names.index) == ["gemm", "fill"] and part.names.loc["gemm", "type"] == "GEMM"
    assert part.warnings == [*trace.warnings, "two steps only"] and trace.kernel_count == 4
