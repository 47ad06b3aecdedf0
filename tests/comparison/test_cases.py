"""Findings that name the right kernels: generated cases with ground truth, and the hand-made repro pairs."""

from __future__ import annotations

import dataclasses

import pytest
from builders import SHARED_REPRO, shared_absent

from fusion.classify.trace import load
from fusion.comparison.pair import compare
from fusion.synthetic.pairs import CASES, SCENARIOS, PairSpec, ground_truth, write_pair

SMALL_MODEL = PairSpec(layers=3, steps=3, fusions=("add_rmsnorm", "sort_chain"), non_fusion=False)
"""Full-graph steps of 56 kernels on AMD and 44 on NVIDIA: they straddle min_group_size 50."""
SPECS = [PairSpec(scenario=s, layers=3, steps=3, cases=(c,)) for s in SCENARIOS for c in CASES]
SPECS += [dataclasses.replace(SMALL_MODEL, scenario=s) for s in SCENARIOS]
SPECS += [PairSpec(scenario=s, layers=3, steps=3, fusions=(), cases=("unknown_attention",)) for s in SCENARIOS]
SPECS += [PairSpec(scenario=s, layers=3, steps=3, fusions=(), cases=("split_k", "gemv_split")) for s in SCENARIOS]
"""A GEMM + split-K reduce and a GEMV + its two-pass reduce on NVIDIA: two kernel-name patterns, two findings."""


def _id(spec: PairSpec) -> str:
    return f"{spec.scenario}-{'+'.join(spec.cases) or 'small'}{'' if spec.fusions else '-no-fusion'}"


def test_two_split_patterns_are_two_findings_with_their_own_counts_and_ops(tmp_path):
    """The issue's merged split-K + GEMV line: one finding per kernel-name pattern, each naming its op."""
    spec = PairSpec(scenario="eager", layers=3, steps=3, fusions=(), cases=("split_k", "gemv_split"))
    files = write_pair(tmp_path, spec)
    comparison = compare(load(files.trace1), load(files.trace2))
    splits = sorted((m for m in comparison.mappings if m.kind == "split"), key=lambda m: m.pattern_count)
    assert [m.pattern_count for m in splits] == [9, 12]
    gemv, split_k = splits
    assert any("reduce_1Block_kernel" in n for n in gemv.unfused_kernel_names)
    assert not any("splitKreduce" in n for n in gemv.unfused_kernel_names)
    assert any("splitKreduce" in n for n in split_k.unfused_kernel_names)
    assert all(m.op == "aten::mm" and m.fused_ops == ["aten::mm"] for m in splits)


@pytest.fixture(scope="module", params=SPECS, ids=_id)
def scored(request, tmp_path_factory):
    spec = request.param
    files = write_pair(tmp_path_factory.mktemp("pair"), spec)
    return compare(load(files.trace1), load(files.trace2)), ground_truth(spec)


def _key(finding) -> tuple:
    """What a finding is, down to its kernel-name pattern (the other side's raw names)."""
    if isinstance(finding, dict):
        fields = finding["fused_trace"], finding["fused_kernel_type"], finding["unfused_sequence"]
        names = finding["unfused_kernel_names"]
    else:
        fields = finding.fused_trace, finding.fused_kernel_type, finding.unfused_sequence
        names = finding.unfused_kernel_names
    return fields[0], fields[1], tuple(fields[2]), tuple(sorted(names))


def precision_recall(found: set, expected: set) -> tuple[float, float]:
    hits = len(found & expected)
    return (hits / len(found) if found else 1.0), (hits / len(expected) if expected else 1.0)


def test_precision_and_recall_are_complete(scored):
    comparison, truth = scored
    found, expected = {_key(m) for m in comparison.mappings}, {_key(f) for f in truth["fusions"]}
    assert precision_recall(found, expected) == (1.0, 1.0), f"false: {found - expected}, missed: {expected - found}"


def test_every_finding_names_its_kernels(scored):
    comparison, truth = scored
    by_key = {_key(m): m for m in comparison.mappings}
    for fusion in truth["fusions"]:
        mapping = by_key[_key(fusion)]
        assert sorted(mapping.fused_kernel_names) == sorted(fusion["fused_kernel_names"]), fusion["id"]
        assert sorted(mapping.unfused_kernel_names) == sorted(fusion["unfused_kernel_names"]), fusion["id"]
        if fusion.get("detector"):
            assert mapping.detector == fusion["detector"]


def test_unknown_names_do_not_make_a_mismatch(scored):
    comparison, truth = scored
    if "unknown_attention" in truth["spec"]["cases"]:
        assert comparison.comparability.ok
        assert not [o for o in comparison.opportunities if o.kernel_type in ("Attention", "Other")]
        assert not [
            m for m in comparison.mappings if {"Attention", "Other"} & {m.fused_kernel_type, *m.unfused_sequence}
        ]


def test_small_model_groups_are_matched_across_the_threshold(tmp_path):
    files = write_pair(tmp_path, SMALL_MODEL)
    comparison = compare(load(files.trace1), load(files.trace2))
    assert comparison.metadata["matched_groups"] == SMALL_MODEL.steps
    assert comparison.metadata["trace2_correlation_groups"] == 0
    assert {m.evidence_source for m in comparison.mappings} == {"groups"}


def test_no_fusion_pair_has_no_mapping(tmp_path):
    for scenario in SCENARIOS:
        files = write_pair(tmp_path / scenario, PairSpec(scenario=scenario, layers=3, steps=3, fusions=()))
        assert compare(load(files.trace1), load(files.trace2)).mappings == []


def _repro(name: str):
    folder = SHARED_REPRO / name
    if not folder.is_dir():
        pytest.skip(shared_absent(folder))
    return compare(load(folder / "amd.json"), load(folder / "nvidia.json"))


def _only_split(comparison, count: int) -> None:
    assert [(m.detector, m.fused_trace, m.unfused_sequence) for m in comparison.mappings] == [
        ("split_kernel", 1, ["GEMM", "GEMM"])
    ]
    split = comparison.mappings[0]
    assert split.pattern_count == count and split.pattern_confidence == 1.0
    assert split.fused_kernel_names == ["Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT16x16x256_MI16x16x1_SN_LDSB1"]
    assert [n.split("<")[0] for n in split.unfused_kernel_names] == [
        "void cutlass::Kernel2",
        "void cublasLt::splitKreduce_kernel",
    ]
    assert "Trace 2" in split.evidence and "as 2 kernels" in split.evidence
    assert comparison.one_sided == []


def test_repro_split_k_on_some_calls():
    """NVIDIA runs 15 of 50 GEMMs as GEMM + splitKreduce; AMD one Tensile kernel name for every shape."""
    _only_split(_repro("splitk_partial"), 15)


def test_repro_split_k_on_every_call():
    """A reduce after every NVIDIA GEMM and an add after each GEMM on both sides: the adds correspond."""
    comparison = _repro("splitk_every_call")
    _only_split(comparison, 50)
    assert comparison.comparability.level == "ok" or all("GEMM" not in w for w in comparison.comparability.warnings)
