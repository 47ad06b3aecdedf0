"""The on-disk table cache and parallel pair loading."""

from __future__ import annotations

import dataclasses
import errno
import os
import subprocess
import tempfile
import threading
from pathlib import Path

import pandas as pd
import pytest
import xxhash
from builders import SAMPLES, kernel_event, write_trace

from fusion.cache import tables as tablecache
from fusion.cache.loading import Request, load_pair, load_traces
from fusion.cache.tables import TableCache
from fusion.classify.trace import load
from fusion.errors import TraceError
from fusion.model.trace import Trace


def _sample_pair() -> tuple[Path, Path]:
    folder = SAMPLES / "vllm_moe_full_graph"
    return folder / "amd.json.gz", folder / "nvidia.json.gz"


def _assert_same_trace(a: Trace, b: Trace) -> None:
    pd.testing.assert_frame_equal(a.kernels, b.kernels)
    pd.testing.assert_frame_equal(a.names, b.names)
    for name in ("label", "platform", "platform_evidence", "gpu", "gpu_recorded", "device_properties", "digest"):
        assert getattr(a, name) == getattr(b, name), name


def test_a_stored_trace_comes_back_identical(tmp_path) -> None:
    cache = TableCache(tmp_path / "cache")
    path = _sample_pair()[0]
    trace = load(path)
    cache.store(path, trace)
    again = cache.lookup(path)
    assert again is not None
    _assert_same_trace(trace, again)


def test_a_changed_file_misses(tmp_path) -> None:
    cache = TableCache(tmp_path / "cache")
    path = write_trace(tmp_path / "t.json", [kernel_event("k", 1.0, 2.0, 1)])
    cache.store(path, load(path))
    write_trace(path, [kernel_event("k", 1.0, 2.0, 1), kernel_event("k", 3.0, 2.0, 2)])
    os.utime(path, ns=(1, 1))
    assert cache.lookup(path) is None


def test_new_format_version_or_rules_invalidate(tmp_path, monkeypatch) -> None:
    cache = TableCache(tmp_path / "cache")
    path = _sample_pair()[1]
    cache.store(path, load(path))
    monkeypatch.setattr(tablecache, "FORMAT_VERSION", tablecache.FORMAT_VERSION + 1)
    assert cache.lookup(path) is None
    monkeypatch.undo()
    assert cache.lookup(path) is not None
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nid = "mine"\ntype = "GEMM"\npattern = "zzz_never"\nnote = "test"\n')
    monkeypatch.setenv("FUSION_RULES", str(rules))
    assert cache.lookup(path) is None


def test_a_corrupt_entry_counts_as_absent(tmp_path) -> None:
    cache = TableCache(tmp_path / "cache")
    path = _sample_pair()[0]
    trace = load(path)
    cache.store(path, trace)
    for entry in (tmp_path / "cache").glob("*.fxt"):
        entry.write_bytes(b"not parquet")
    assert cache.lookup(path) is None


def test_least_recently_used_entries_are_evicted(tmp_path) -> None:
    cache = TableCache(tmp_path / "cache", max_bytes=1)
    first, second = _sample_pair()
    cache.store(first, load(first))
    cache.store(second, load(second))
    assert cache.lookup(first) is None
    assert cache.lookup(second) is not None


ISOLATED_OR_NOT = pytest.mark.parametrize("isolated", [True, False], ids=["in a child", "in this process"])
"""Loading at once, in threads of a child process or (a one-shot caller) of this process."""


@ISOLATED_OR_NOT
def test_parallel_and_sequential_loads_agree(isolated: bool) -> None:
    seen: set[int] = set()
    parallel = load_pair(
        *_sample_pair(), parallel=True, progress=lambda side, done, total: seen.add(side), isolated=isolated
    )
    sequential = load_pair(*_sample_pair(), parallel=False)
    for a, b in zip(parallel, sequential):
        _assert_same_trace(a, b)
    assert seen == {1, 2}


def test_threads_start_no_process_and_report_progress_in_the_calling_thread(monkeypatch) -> None:
    def no_process(*args, **kwargs):
        raise AssertionError("a loader process was started")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    callers: set[str] = set()
    load_pair(
        *_sample_pair(),
        parallel=True,
        isolated=False,
        progress=lambda side, done, total: callers.add(threading.current_thread().name),
    )
    assert callers == {threading.current_thread().name}


@ISOLATED_OR_NOT
def test_meanwhile_runs_once_after_a_loader_has_finished(isolated: bool) -> None:
    read: dict[int, tuple[int, int]] = {}
    finished_when_called: list[set[int]] = []

    def meanwhile() -> None:
        finished_when_called.append({side for side, (done, total) in read.items() if done == total})

    load_pair(
        *_sample_pair(),
        parallel=True,
        progress=lambda side, *done_total: read.update({side: done_total}),
        meanwhile=meanwhile,
        isolated=isolated,
    )
    assert len(finished_when_called) == 1 and finished_when_called[0]
    load_pair(*_sample_pair(), parallel=False, meanwhile=meanwhile)
    assert len(finished_when_called) == 1  # one loader at a time: nothing to fill the wait with


@ISOLATED_OR_NOT
def test_a_bad_file_loaded_at_once_names_that_file(tmp_path, isolated: bool) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TraceError, match="bad.json: not valid JSON"):
        load_pair(_sample_pair()[0], bad, parallel=True, isolated=isolated)


def test_a_bug_in_a_loader_thread_is_raised_in_the_calling_thread(monkeypatch) -> None:
    from fusion.classify import trace as trace_module

    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(trace_module, "load", broken)
    with pytest.raises(ZeroDivisionError, match="a bug"):
        load_pair(*_sample_pair(), parallel=True, isolated=False)


def test_a_loader_thread_out_of_memory_gives_that_sides_error(monkeypatch) -> None:
    from fusion.classify import trace as trace_module

    real_load = trace_module.load

    def load_or_run_out(source, *args, **kwargs):
        if Path(source) == _sample_pair()[1]:
            raise MemoryError
        return real_load(source, *args, **kwargs)

    monkeypatch.setattr(trace_module, "load", load_or_run_out)
    first, second = load_traces([Request(path) for path in _sample_pair()], parallel=True, isolated=False)
    assert isinstance(first, Trace)
    assert isinstance(second, TraceError) and second.problem == "out of memory while loading"


def test_load_pair_fills_and_uses_the_cache(tmp_path) -> None:
    cache = TableCache(tmp_path / "cache")
    first = load_pair(*_sample_pair(), cache=cache, labels=("A", "B"))
    assert all(cache.lookup(path) is not None for path in _sample_pair())
    again = load_pair(*_sample_pair(), cache=cache, labels=("A", "B"))
    for a, b in zip(first, again):
        _assert_same_trace(a, b)


def test_every_column_of_the_kernel_and_name_tables_persists(tmp_path) -> None:
    """Columns other steps add (op, op_call, launch, fused_components, ...) need no change here."""
    path = _sample_pair()[0]
    trace = load(path)
    rows = len(trace.kernels)
    trace.kernels["op"] = pd.Categorical(["aten::mm", ""] * (rows // 2) + [""] * (rows % 2))
    trace.kernels["op_call"] = pd.Series(range(rows), dtype="int64")
    trace.kernels["launch"] = pd.Categorical(["graph"] * rows, categories=["kernel", "graph", "none", "unrecorded"])
    trace.names["fused_components"] = [("SwiGLU",) if i % 2 else () for i in range(len(trace.names))]
    trace.names["implementation"] = "CUTLASS"
    cache = TableCache(tmp_path / "cache")
    cache.store(path, trace)
    again = cache.lookup(path)
    assert again is not None
    _assert_same_trace(trace, again)
    assert list(again.kernels["launch"].cat.categories) == ["kernel", "graph", "none", "unrecorded"]
    assert again.names["fused_components"].iloc[1] == ("SwiGLU",)


def test_a_field_that_would_not_come_back_is_not_cached(tmp_path, caplog) -> None:
    path = _sample_pair()[0]
    trace = load(path)
    trace.warnings = [("a tuple", 1)]  # type: ignore[list-item]
    cache = TableCache(tmp_path / "cache")
    cache.store(path, trace)
    assert cache.lookup(path) is None
    assert "not cached" in caplog.text


def test_a_file_changed_while_it_loaded_is_not_served_the_old_trace(tmp_path) -> None:
    """The entry holds the hash of the bytes parsed; the file's new bytes do not have it."""
    path = write_trace(tmp_path / "t.json", [kernel_event("k", 1.0, 2.0, 1)])
    trace = load(path)
    write_trace(path, [kernel_event("k", 1.0, 2.0, 1), kernel_event("other", 3.0, 2.0, 2)])
    cache = TableCache(tmp_path / "cache")
    cache.store(path, trace)
    assert cache.lookup(path) is None and cache.header(path) is None


def test_the_file_hash_is_the_readers_and_a_trace_without_one_is_not_cached(tmp_path) -> None:
    path = _sample_pair()[0]
    trace = load(path)
    assert trace.file_hash == tablecache.file_hash(path) == xxhash.xxh3_128(path.read_bytes()).hexdigest()
    cache = TableCache(tmp_path / "cache")
    cache.store(path, dataclasses.replace(trace, file_hash=""))
    assert cache.lookup(path) is None and not list((tmp_path / "cache").glob("*.fxt"))


def test_a_file_named_by_its_digest_hits_without_a_remembered_stamp(tmp_path) -> None:
    source = _sample_pair()[0]
    trace = load(source)
    blob = tmp_path / trace.digest
    blob.write_bytes(source.read_bytes())
    cache = TableCache(tmp_path / "cache")
    cache.store(blob, trace)
    os.utime(blob)
    (tmp_path / "cache" / "digests.json").unlink()
    assert cache.lookup(blob) is not None
    impostor = tmp_path / "other" / trace.digest
    impostor.parent.mkdir()
    impostor.write_bytes(_sample_pair()[1].read_bytes())
    assert cache.lookup(impostor) is None


def test_an_unwritable_cache_still_serves_its_entries_and_says_why_once(tmp_path, monkeypatch, caplog) -> None:
    first, second = _sample_pair()
    TableCache(tmp_path / "cache").store(first, load(first))

    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    cache = TableCache(tmp_path / "cache")
    assert cache.lookup(first) is not None
    cache.store(second, load(second))
    cache.store(second, load(second))
    assert cache.problem is not None and "Read-only file system" in cache.problem
    assert cache.lookup(second) is None
    assert caplog.text.count("without caching") == 1


def test_entries_of_the_old_format_count_in_the_cap_and_go_first(tmp_path) -> None:
    root = tmp_path / "cache"
    root.mkdir()
    legacy = root / ("0" * 64 + ".parquet")
    legacy.write_bytes(b"PAR1" + b"\0" * 400_000)
    os.utime(legacy, (1000, 1000))
    cache = TableCache(root, max_bytes=400_000)
    path = _sample_pair()[1]
    cache.store(path, load(path))
    assert not legacy.exists() and cache.lookup(path) is not None
