"""The synthetic pair generator: format, structure, ground truth, size targeting, committed samples."""

from __future__ import annotations

import dataclasses
import gzip
from collections import Counter
from pathlib import Path

import orjson
import pytest

from fusion.classify.names import classify
from fusion.synthetic.pairs import (
    ALL_FUSIONS,
    CASES,
    PLATFORMS,
    SITES,
    PairSpec,
    ground_truth,
    kernel_counts,
    main,
    trace_passes,
    write_pair,
)

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
SMALL = PairSpec(layers=4, steps=3)


def _read(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()


def _load(path: Path) -> dict:
    return orjson.loads(_read(path))


def _kernels(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]


def _group_sizes(trace: dict) -> list[int]:
    """Kernels per correlation id, in order of first appearance."""
    return list(Counter(k["args"]["correlation"] for k in _kernels(trace)).values())


def _intended_types(spec: PairSpec, trace: int) -> dict[str, str]:
    return {k.name: k.ktype for _, launches in trace_passes(spec, trace) for _, ks in launches for k in ks}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, dict]:
    files = write_pair(tmp_path_factory.mktemp("pair"), SMALL)
    return _load(files.trace1), _load(files.trace2), orjson.loads(files.ground_truth.read_bytes())


def test_same_call_writes_identical_bytes(tmp_path: Path) -> None:
    first = write_pair(tmp_path / "a", SMALL)
    second = write_pair(tmp_path / "b", SMALL)
    for a, b in zip(dataclasses.astuple(first), dataclasses.astuple(second)):
        assert a.read_bytes() == b.read_bytes()
    other = write_pair(tmp_path / "c", dataclasses.replace(SMALL, seed=1))
    assert _read(other.trace1) != _read(first.trace1)


def test_kineto_structure(pair: tuple[dict, dict, dict]) -> None:
    amd, nvidia, _ = pair
    assert amd["schemaVersion"] == 1 and amd["roctracer_version"] == 4.1
    assert "roctracer_version" not in nvidia
    props = {t["deviceProperties"][0]["name"]: t["deviceProperties"][0] for t in (amd, nvidia)}
    assert props["AMD Instinct MI300X"]["warpSize"] == 64 and props["AMD Instinct MI300X"]["numSms"] == 304
    assert props["NVIDIA H100 80GB HBM3"]["warpSize"] == 32 and props["NVIDIA H100 80GB HBM3"]["numSms"] == 132
    for trace, launch in ((amd, "hipGraphLaunch"), (nvidia, "cudaGraphLaunch")):
        cats = Counter(e.get("cat") for e in trace["traceEvents"])
        assert {"kernel", "cpu_op", "cuda_runtime", "python_function", "ac2g"} <= set(cats)
        runtime_corrs = {e["args"]["correlation"] for e in trace["traceEvents"] if e.get("name") == launch}
        assert {k["args"]["correlation"] for k in _kernels(trace)} == runtime_corrs
        starts = [k["ts"] for k in _kernels(trace)]
        assert all(a < b for a, b in zip(starts, starts[1:])), "kernel ts must increase on the stream"
        assert all(k["ph"] == "X" and k["dur"] > 0 and k["args"]["stream"] == 7 for k in _kernels(trace))


@pytest.mark.parametrize("scenario", ["full_graph", "piecewise", "eager"])
def test_correlation_structure(tmp_path: Path, scenario: str) -> None:
    files = write_pair(tmp_path, PairSpec(scenario=scenario, layers=16, steps=2), gzip=False)
    sizes1, sizes2 = (_group_sizes(_load(p)) for p in (files.trace1, files.trace2))
    if scenario == "full_graph":
        assert len(sizes1) == len(sizes2) == 2
        assert min(sizes1 + sizes2) >= 200 and sizes1[0] > sizes2[0]
    elif scenario == "piecewise":
        graphs = [s for s in sizes1 + sizes2 if s > 1]
        assert graphs and all(4 <= s <= 15 for s in graphs)
        assert 1 in sizes1, "attention runs eagerly between the pieces"
    else:
        assert set(sizes1) == set(sizes2) == {1}


def test_group_cuts_and_piecewise_steps_give_many_distinct_groups(tmp_path: Path) -> None:
    """Issue 14's pair: graph launches cut into pieces of 50-149 kernels in several patterns per side,
    every 3rd step piecewise (eager attention), the kernels per type unchanged by the cuts."""
    spec = PairSpec(layers=16, steps=6, prefill=True, group_cuts=True, piecewise_every=3, prep_share=0.5)
    files = write_pair(tmp_path, spec, gzip=False)
    for trace, path in ((1, files.trace1), (2, files.trace2)):
        data = _load(path)
        sizes = _group_sizes(data)
        large = [s for s in sizes if s >= 50]
        assert all(s < 150 for s in large) and len(set(large)) > 4
        assert sizes.count(1) >= 2 * 16, "prefill and piecewise attention run eagerly"
        plain = dataclasses.replace(spec, group_cuts=False, piecewise_every=0)
        assert len(_kernels(data)) == sum(kernel_counts(plain, trace).values())


def test_steps2_and_prefill2_change_group_counts(tmp_path: Path) -> None:
    spec = PairSpec(layers=4, steps=3, steps2=5, prefill=True, prefill2=False)
    files = write_pair(tmp_path, spec)
    sizes1, sizes2 = (_group_sizes(_load(p)) for p in (files.trace1, files.trace2))
    assert sizes1.count(1) > 0 and len([s for s in sizes1 if s > 1]) == 3
    assert sizes2.count(1) == 0 and len(sizes2) == 5


def test_expected_counts_match_generated_kernels(pair: tuple[dict, dict, dict]) -> None:
    amd, nvidia, truth = pair
    for trace, data in ((1, amd), (2, nvidia)):
        types = _intended_types(SMALL, trace)
        actual = Counter(types[k["name"]] for k in _kernels(data))
        assert dict(sorted(actual.items())) == truth["expected_counts"][f"trace{trace}"]


def test_ground_truth_shape(pair: tuple[dict, dict, dict]) -> None:
    truth = pair[2]
    assert truth == orjson.loads(orjson.dumps(ground_truth(SMALL)))
    assert truth["trace1"] == {"platform": "AMD", "gpu": "AMD Instinct MI300X", "file": "amd.json.gz"}
    by_id = {f["id"]: f for f in truth["fusions"]}
    assert list(by_id) == list(ALL_FUSIONS)
    assert by_id["add_rmsnorm"]["fused_trace"] == 2 and by_id["add_rmsnorm"]["unfused_sequence"] == [
        "Elementwise",
        "RMSNorm",
    ]
    assert by_id["sort_chain"]["unfused_sequence"] == ["Sort"] * 4
    assert by_id["moe_swiglu"]["fused_trace"] == 1 and by_id["moe_swiglu"]["fused_kernel_type"] == "MoE_GEMM"
    assert {d["id"] for d in truth["non_fusion_differences"]} == {"gemm_library_names", "nccl_vs_rccl", "extra_memset"}


@pytest.mark.parametrize("fusion", ALL_FUSIONS)
def test_each_fusion_alone_explains_the_count_difference(fusion: str) -> None:
    """With one fusion and no distractors, the traces differ by exactly that fusion's kernels."""
    spec = PairSpec(layers=3, steps=2, fusions=(fusion,), non_fusion=False)
    site = SITES[fusion]
    unfused_trace = 2 if site.fused_platform == PLATFORMS[0] else 1
    fused_trace = 3 - unfused_trace
    delta = Counter(kernel_counts(spec, unfused_trace))
    delta.subtract(kernel_counts(spec, fused_trace))
    sites = spec.layers * spec.steps
    expected = Counter(k.ktype for k in site.unfused)
    expected.subtract({site.fused_type: 1})
    assert {t: n for t, n in delta.items() if n} == {t: n * sites for t, n in expected.items() if n}
    baseline = PairSpec(layers=3, steps=2, fusions=(), non_fusion=False)
    assert kernel_counts(baseline, 1) == kernel_counts(baseline, 2)


def test_fused_kernel_is_faster_than_its_parts() -> None:
    for site in SITES.values():
        assert site.fused.dur * 1.05 < 0.95 * sum(k.dur for k in site.unfused)


def test_target_bytes_within_tolerance(tmp_path: Path) -> None:
    target = 5_000_000
    files = write_pair(tmp_path, PairSpec(layers=8, steps2=12), gzip=False, target_bytes=target)
    for path in (files.trace1, files.trace2):
        assert abs(path.stat().st_size - target) < 0.1 * target
    spec = PairSpec.from_dict(orjson.loads(files.ground_truth.read_bytes())["spec"])
    assert spec.steps2 is not None and spec.steps2 > spec.steps


def test_cli_writes_plain_pair(tmp_path: Path) -> None:
    assert (
        main(
            [
                str(tmp_path),
                "--scenario",
                "eager",
                "--layers",
                "2",
                "--steps",
                "1",
                "--plain",
                "--fusions",
                "sort_chain",
            ]
        )
        == 0
    )
    truth = orjson.loads((tmp_path / "ground_truth.json").read_bytes())
    assert [f["id"] for f in truth["fusions"]] == ["sort_chain"] and truth["trace2"]["file"] == "nvidia.json"
    assert _load(tmp_path / "amd.json")["traceEvents"]


def _sample_dirs() -> list[Path]:
    return sorted(p.parent for p in SAMPLES.glob("*/ground_truth.json"))


def test_committed_samples_exist_and_are_small() -> None:
    names = {p.name for p in _sample_dirs()}
    assert "vllm_moe_full_graph" in names
    for directory in _sample_dirs():
        for trace in directory.glob("*.json.gz"):
            assert trace.stat().st_size < 2_000_000


@pytest.mark.parametrize("directory", _sample_dirs(), ids=lambda p: p.name)
def test_committed_samples_are_up_to_date(tmp_path: Path, directory: Path) -> None:
    truth = orjson.loads((directory / "ground_truth.json").read_bytes())
    gz = truth["trace1"]["file"].endswith(".gz")
    files = write_pair(tmp_path, PairSpec.from_dict(truth["spec"]), gzip=gz)
    assert files.ground_truth.read_bytes() == (directory / "ground_truth.json").read_bytes()
    for fresh in (files.trace1, files.trace2):
        assert _read(fresh) == _read(directory / fresh.name), f"regenerate {directory.name} (see README)"


def test_names_classify_as_intended() -> None:
    specs = [
        PairSpec(scenario="eager", layers=1, steps=1, prefill=True, fusions=f, cases=c)
        for f, c in ((ALL_FUSIONS, ()), ((), CASES))
    ]
    wrong = {}
    for spec in specs:
        for trace in (1, 2):
            for name, intended in _intended_types(spec, trace).items():
                got = classify(name, PLATFORMS[trace - 1]).kernel_type
                if got != intended:
                    wrong[name] = (intended, got)
    assert not wrong


def test_cases_change_only_what_they_inject() -> None:
    """Each case alone: the generator's counts differ from the baseline by exactly the case's kernels."""
    base = PairSpec(layers=2, steps=1, fusions=(), non_fusion=False)
    for case, trace, delta in (
        ("split_k", 2, {"GEMM": 3}),
        ("split_k_partial", 2, {"GEMM": 2}),
        ("gemm_silu_epilogue", 1, {"GEMM": 4, "SwiGLU": 2}),
        ("template_rmsnorm", 2, {"RMSNorm": -2}),
        ("unknown_attention", 2, {"Attention": -2, "Other": 2}),
    ):
        changed = Counter(kernel_counts(dataclasses.replace(base, cases=(case,)), trace))
        changed.subtract(kernel_counts(base, trace))
        assert {t: n for t, n in changed.items() if n} == delta, case
