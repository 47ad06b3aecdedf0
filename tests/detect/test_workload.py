"""The workload identity check on real traces: every pair of two different shared models is not the same workload
(and gets no finding), the same workload on two vendors, a longer capture and the generated pairs are."""

from __future__ import annotations

import itertools

import pytest
from builders import SHARED_REPRO, SHARED_TRACES, shared_absent, shared_trace, shared_trace_names

from fusion.classify.trace import load
from fusion.comparison.pair import compare
from fusion.report.render import to_text
from fusion.synthetic.pairs import PairSpec, write_pair

CROSS_VENDOR = ("bert_small", "falconsai_nsfw", "qwen1.5-0.5b", "timesformer")
SAME_MODEL = {frozenset((f"tl_h100_{m}", f"tl_mi300_{m}")) for m in CROSS_VENDOR} | {
    frozenset(("tl_vllm_decode_full_exec", "tl_vllm_pd_piecewise_exec"))  # gpt-oss-20b: a decode and a mixed step
}
"""Pairs of shared traces that run the same model (MANIFEST.md); every other pair runs two different models."""
# shared_trace_names() is one skipped parameter (no name) when ../shared is absent: then no trace, and a skip.
KINETO = [n for n in shared_trace_names() if isinstance(n, str) and not n.startswith("tl_rocprofv3")]


@pytest.fixture(scope="module")
def traces(shared_comparisons, shared_loaded):
    """The shared Kineto traces by name, loaded once in the session (with the comparisons of every pairing)."""
    if not KINETO:
        pytest.skip(shared_absent(SHARED_TRACES))
    return {name: shared_loaded[shared_trace(name)] for name in KINETO}


def compared(traces, shared_comparisons, first: str, second: str):
    """compare(first, second): the session's comparison of that pairing where it made one (the same traces, in this
    order, with the default parameters), else made here."""
    found = shared_comparisons.get(f"shared/{first}~{second}")
    return found if found is not None else compare(traces[first], traces[second])


def test_every_pair_of_two_different_shared_models_is_not_the_same_workload(traces, shared_comparisons):
    """And compare reports no finding for them: no "fused by", no mapping, no one-sided note; the tables stay.
    The comparisons are the before/after check's (conftest.py's shared_comparisons: compare of each pairing)."""
    different = [p for p in itertools.combinations(KINETO, 2) if frozenset(p) not in SAME_MODEL]
    assert len(different) >= 180
    for first, second in different:
        comparison = shared_comparisons[f"shared/{first}~{second}"]
        check = comparison.comparability
        assert check.level == "not_same_workload" and not check.ok, (first, second, check.evidence)
        assert check.checks["workload_similarity"] is not None and check.evidence
        assert comparison.mappings == [] and comparison.opportunities == [] and comparison.one_sided == []
        text = to_text(comparison)
        assert "fused by" not in text and "Fusion mappings\n" not in text and "different workloads" in text
        assert not comparison.type_stats.empty


@pytest.mark.parametrize(
    ("first", "second", "signal", "evidence"),
    [
        ("tl_h100_bert_small", "tl_h100_timesformer", "model classes", "TimesformerForVideoClassification"),
        ("tl_xdit_flux_aiter_profile", "tl_vllm_decode_full_exec", "layers", "attention operations per forward step"),
        ("tl_b200_eager", "tl_vllm_pd_piecewise_exec", "layers", "36 vs 24 attention operations"),
        ("tl_mi210_gpu_only", "tl_h100_qwen1.5-0.5b", "operation mix", "no CPU side"),
        ("hta_sampled_rank0", "hta_trace_diff_control", "op-call sequences", "top-level op calls align"),
    ],
)
def test_the_deciding_signal_and_its_evidence(traces, shared_comparisons, first, second, signal, evidence):
    check = compared(traces, shared_comparisons, first, second).comparability
    assert check.level == "not_same_workload" and check.checks["workload_signal"] == signal
    deciding = next(w for w in check.warnings if w.startswith("not the same workload:"))
    assert evidence in deciding


@pytest.mark.parametrize("model", CROSS_VENDOR)
def test_the_same_model_on_two_vendors_is_the_same_workload(traces, model):
    check = compare(traces[f"tl_mi300_{model}"], traces[f"tl_h100_{model}"]).comparability
    assert check.checks["workload_signals"] == {"model classes": 1.0, "layers": 1.0}
    # ok, or warn only for kernels left out without a launch event (Qwen: 31% and 30%; tests/detect/test_left_out.py)
    assert check.level == "ok" or (check.level == "warn" and all("left out" in w for w in check.warnings))


def test_a_decode_and_a_mixed_step_of_one_model_are_the_same_workload(traces, shared_comparisons):
    check = compared(traces, shared_comparisons, "tl_vllm_decode_full_exec", "tl_vllm_pd_piecewise_exec").comparability
    assert check.level != "not_same_workload" and check.checks["workload_similarity"] == 1.0


@pytest.mark.parametrize("scenario", ["full_graph", "piecewise", "eager"])
def test_a_longer_capture_of_the_same_workload_without_step_markers_is_the_same_workload(tmp_path, scenario):
    files = write_pair(tmp_path, PairSpec(scenario=scenario, layers=4, steps=5, steps2=3))
    check = compare(load(files.trace1), load(files.trace2)).comparability
    assert check.level != "not_same_workload", check.evidence


@pytest.mark.parametrize("name", ["splitk_partial", "splitk_every_call"])
def test_the_repro_pairs_are_the_same_workload(name):
    folder = SHARED_REPRO / name
    if not folder.is_dir():
        pytest.skip(shared_absent(folder))
    check = compare(load(folder / "amd.json"), load(folder / "nvidia.json")).comparability
    assert check.level != "not_same_workload" and check.checks["workload_signal"] == "operation mix"
