"""The result cache: a re-opened comparison is the comparison, keyed by everything it depends on."""

from __future__ import annotations

import dataclasses

import msgspec
import numpy as np
import pandas as pd
import pytest
from builders import SAMPLES

from fusion.cache import results as resultcache
from fusion.cache import tables as tablecache
from fusion.cache.results import ResultCache, cached_compare
from fusion.classify.trace import load
from fusion.comparison.pair import compare


@pytest.fixture(scope="module")
def traces():
    folder = SAMPLES / "vllm_moe_piecewise"
    return load(folder / "amd.json.gz"), load(folder / "nvidia.json.gz")


def _entries(cache: ResultCache) -> list:
    return sorted(cache.root.glob("*.fxr"))


def test_a_cached_comparison_is_the_comparison(traces, tmp_path) -> None:
    cache = ResultCache(tmp_path)
    fresh = compare(*traces, min_group_size=20)
    cached_compare(*traces, cache=cache, min_group_size=20)
    again = cached_compare(*traces, cache=cache, min_group_size=20)
    assert again is not fresh and again.to_dict() == fresh.to_dict()
    for field in dataclasses.fields(fresh):
        value = getattr(fresh, field.name)
        if isinstance(value, pd.DataFrame):
            pd.testing.assert_frame_equal(getattr(again, field.name), value)
    assert again.mappings == fresh.mappings and again.opportunities == fresh.opportunities
    for pair_id in range(len(fresh.pairs)):
        for side in (0, 1):
            np.testing.assert_array_equal(
                again.pair_kernels.kernel_indices(pair_id)[side], fresh.pair_kernels.kernel_indices(pair_id)[side]
            )
    pd.testing.assert_frame_equal(again.alignment(0), fresh.alignment(0))
    assert again.trace1 is traces[0] and again.trace2 is traces[1]


def test_a_reopened_comparison_carries_the_traces_as_compared(traces, tmp_path) -> None:
    """Evidence cites rows of the compared view (here the decode phase), so a re-opened comparison gets that view."""
    cache = ResultCache(tmp_path)
    fresh = cached_compare(*traces, cache=cache, min_group_size=20, phase="decode")
    again = cached_compare(*traces, cache=cache, min_group_size=20, phase="decode")
    assert fresh.trace1.kernel_count < traces[0].kernel_count
    for side in (1, 2):
        pd.testing.assert_frame_equal(again.trace(side).kernels, fresh.trace(side).kernels)
    pd.testing.assert_frame_equal(again.alignment(0), fresh.alignment(0))


def test_parameters_labels_and_rules_are_part_of_the_key(traces, tmp_path, monkeypatch) -> None:
    cache = ResultCache(tmp_path)
    cached_compare(*traces, cache=cache, min_group_size=20)
    cached_compare(*traces, cache=cache, min_group_size=21)
    cached_compare(*traces, cache=cache, min_group_size=20, min_ratio=3.0)
    relabelled = dataclasses.replace(traces[0], label="mine")
    cached_compare(relabelled, traces[1], cache=cache, min_group_size=20)
    cached_compare(traces[1], traces[0], cache=cache, min_group_size=20)
    assert len(_entries(cache)) == 5
    rules = tmp_path / "rules.toml"
    rules.write_text("# no rules\n")
    monkeypatch.setenv("FUSION_RULES", str(rules))
    assert cache.get(*traces, {"min_group_size": 20}) is None


def test_a_change_of_the_code_is_a_miss(traces, tmp_path, monkeypatch) -> None:
    cache = ResultCache(tmp_path)
    cached_compare(*traces, cache=cache)
    assert cache.get(*traces, {}) is not None
    monkeypatch.setattr(tablecache, "_code_fingerprint", lambda: "other code")
    assert cache.get(*traces, {}) is None


def test_a_result_that_would_not_read_back_equal_is_not_cached(traces, tmp_path, caplog) -> None:
    cache = ResultCache(tmp_path)
    comparison = compare(*traces)
    comparison.metadata["odd"] = {1, 2}
    assert not cache.put(comparison, {})
    assert _entries(cache) == [] and "comparison not cached" in caplog.text


def test_a_frame_that_would_read_back_with_another_dtype_is_not_cached(traces, tmp_path) -> None:
    """Arrow stores a column of Python ints as int64: the entry would give back int64 for object, so the
    comparison is not cached."""
    comparison = compare(*traces)
    rows = len(comparison.op_table)
    comparison.op_table = comparison.op_table.assign(
        odd=pd.Series(range(rows), dtype=object, index=comparison.op_table.index)
    )
    assert rows and not ResultCache(tmp_path).put(comparison, {})
    assert _entries(ResultCache(tmp_path)) == []


def test_the_round_trip_check_compares_frames_cell_by_cell() -> None:
    same = resultcache._SameFrame
    frame = pd.DataFrame({"names": [["a", "b"], []], "time": [1.5, np.nan]})
    assert same(frame) == same(frame.assign(names=[("a", "b"), ()]))
    assert same(frame) != same(frame.assign(names=[("a", "c"), ()]))
    assert same(frame) != same(frame.assign(time=[1.5, 2.0]))
    assert same(frame) != same(frame.set_axis([1, 2]))
    assert same(frame) != same(frame.astype({"time": np.float32}))


def test_list_cells_come_back_as_tuples_and_the_entry_is_used(tmp_path) -> None:
    """The eager sample's op table holds lists of names; the entry gives tuples (as the loader makes them), which
    the round-trip check takes as the same cells: the comparison is cached."""
    folder = SAMPLES / "eager_prefill"
    pair = load(folder / "amd.json.gz"), load(folder / "nvidia.json.gz")
    fresh = compare(*pair)
    assert isinstance(fresh.op_table["op_names"].iloc[0], list)
    cache = ResultCache(tmp_path)
    assert cache.put(fresh, {})
    again = cache.get(*pair, {})
    assert isinstance(again.op_table["op_names"].iloc[0], tuple)
    assert again.op_table["op_names"].map(list).tolist() == fresh.op_table["op_names"].tolist()


def test_only_our_dataclasses_are_rebuilt_from_an_entry() -> None:
    for name in ("os:system", "subprocess:Popen", "fusion.result:plain", "fusion.model.trace:np", "fusion.nothing:X"):
        with pytest.raises(ValueError):
            resultcache._class_named(name)
    assert resultcache._class_named("fusion.result:EvidenceRef").__name__ == "EvidenceRef"


def test_references_to_the_compared_traces_and_string_arrays_come_back(traces) -> None:
    value = {"who": [traces[1], traces[0]], "names": np.array([["a", "b"]], dtype=object), "n": np.int64(3)}
    data = msgspec.msgpack.encode(resultcache._plain(value, traces))
    back = msgspec.msgpack.decode(data, ext_hook=lambda code, raw: resultcache._from_ext(code, raw, traces))
    assert back["who"][0] is traces[1] and back["who"][1] is traces[0]
    assert back["names"].shape == (1, 2) and back["names"].tolist() == [["a", "b"]] and back["n"] == 3
    with pytest.raises(TypeError):
        resultcache._plain(dataclasses.replace(traces[0]), traces)
    with pytest.raises(TypeError):
        resultcache._plain(np.array([object()]), traces)


def test_parameters_that_are_not_plain_data_are_computed_not_cached(traces, tmp_path) -> None:
    cache = ResultCache(tmp_path)
    first = cached_compare(*traces, cache=cache, min_group_size=np.int64(20))
    assert _entries(cache) == []
    assert first.to_dict() == compare(*traces, min_group_size=20).to_dict()
