"""The on-disk table cache and parallel pair loading."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
from builders import SAMPLES, kernel_event, write_trace

from fusion import tablecache
from fusion.errors import TraceError
from fusion.parallel import load_pair
from fusion.tablecache import TableCache
from fusion.trace import Trace, load


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


def test_parallel_and_sequential_loads_agree(tmp_path) -> None:
    seen: set[int] = set()
    parallel = load_pair(*_sample_pair(), parallel=True, progress=lambda side, done, total: seen.add(side))
    sequential = load_pair(*_sample_pair(), parallel=False)
    for a, b in zip(parallel, sequential):
        _assert_same_trace(a, b)
    assert seen == {1, 2}


def test_a_bad_file_in_a_child_names_that_file(tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TraceError, match="bad.json: not valid JSON"):
        load_pair(_sample_pair()[0], bad, parallel=True)


def test_load_pair_fills_and_uses_the_cache(tmp_path) -> None:
    cache = TableCache(tmp_path / "cache")
    first = load_pair(*_sample_pair(), cache=cache, labels=("A", "B"))
    assert all(cache.lookup(path) is not None for path in _sample_pair())
    again = load_pair(*_sample_pair(), cache=cache, labels=("A", "B"))
    for a, b in zip(first, again):
        _assert_same_trace(a, b)
