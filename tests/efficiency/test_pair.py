"""Aligned op calls side by side: the saving at the other side's efficiency by hand, the ranking, the links of
findings to the rates of the calls they cite, and the `op_efficiency` section of compare's JSON."""

from __future__ import annotations

import json
import math

from builders import PROJECT, EagerTrace, Launch, Op

from fusion import compare, load
from fusion.efficiency.pair import ALIGNED_COLUMNS, SAVING_SIDE, SAVING_US, TEXT
from fusion.efficiency.rates import CALL_COLUMNS, ROOFLINE_PCT, SIGNATURE_COLUMNS
from fusion.report.render import to_json

BF16 = "c10::BFloat16"
H100, MI300X = "NVIDIA H100 80GB HBM3", "AMD Instinct MI300X"
LINEAR = {"Input Dims": [[128, 1024], [4096, 1024], [4096]], "Input type": [BF16] * 3}
SMALL = {"Input Dims": [[8, 1024], [4096, 1024], [4096]], "Input type": [BF16] * 3}
NORM = {"Input Dims": [[128, 1024], [], [1024], [1024], []], "Input type": [BF16, "ScalarList", BF16, BF16, "Scalar"]}
CALLS = 4


def pair(norm_kernels: dict[str, list[Launch]] | None = None):
    """MI300X (trace 1) and H100 (trace 2): big linears 20 vs 10 µs, small ones 2 vs 4 µs, and layer norms."""
    norm_kernels = norm_kernels or {"AMD": [Launch("ln", 3.0)], "NVIDIA": [Launch("ln", 3.0)]}
    traces = []
    for platform, gpu, big, small in (("AMD", MI300X, 20.0, 2.0), ("NVIDIA", H100, 10.0, 4.0)):
        builder = EagerTrace(platform, gpu=gpu)
        items = []
        for _ in range(CALLS):
            items += [
                Op("aten::linear", [Launch("gemm", big)], args=LINEAR),
                Op("aten::linear", [Launch("gemm_small", small)], args=SMALL),
                Op("aten::layer_norm", norm_kernels[platform], args=NORM),
            ]
        builder.run(*items)
        traces.append(load(builder.data()))
    return compare(*traces)


def test_saving_at_the_other_sides_efficiency_by_hand() -> None:
    aligned = pair().efficiency.aligned
    big = aligned[aligned["dims1"] == json.dumps(LINEAR["Input Dims"], separators=(",", ":"))].iloc[0]
    assert big["calls"] == CALLS and big["time_us1"] == CALLS * 20.0 and big["time_us2"] == CALLS * 10.0
    eff1, eff2 = big[f"{ROOFLINE_PCT}1"], big[f"{ROOFLINE_PCT}2"]
    assert eff1 < eff2  # MI300X is slower on a faster GPU
    assert big[SAVING_SIDE] == 1
    assert math.isclose(big[SAVING_US], CALLS * 20.0 * (1 - eff1 / eff2))
    assert "AMD Instinct MI300X would save" in big[TEXT] and "at NVIDIA H100 80GB HBM3's efficiency" in big[TEXT]
    small = aligned[aligned["dims1"] == json.dumps(SMALL["Input Dims"], separators=(",", ":"))].iloc[0]
    assert small[SAVING_SIDE] == 2  # the H100 is the less efficient side there


def test_rows_rank_by_saving() -> None:
    savings = pair().efficiency.aligned[SAVING_US].tolist()
    known = [s for s in savings if not math.isnan(s)]
    assert known == sorted(known, reverse=True) and len(known) >= 2


def test_a_finding_links_to_what_its_calls_reach() -> None:
    two = {"AMD": [Launch("ln_stats", 1.0), Launch("ln_fwd", 4.0)], "NVIDIA": [Launch("ln_fwd", 3.0)]}
    comparison = pair(two)
    op_level = [i for i, m in enumerate(comparison.mappings) if m.op == "aten::layer_norm"]
    assert op_level
    links = {link.finding: link for link in comparison.efficiency.findings}
    link = links[op_level[0]]
    assert link.op == "aten::layer_norm" and link.calls1 == link.calls2 > 0
    assert "AMD Instinct MI300X runs aten::layer_norm as 2 kernels per call at" in link.text
    assert "NVIDIA H100 80GB HBM3 runs aten::layer_norm as 1 kernel per call at" in link.text
    assert "TB/s" in link.text


def test_the_json_section_holds_what_docs_say() -> None:
    comparison = pair()
    document = json.loads(to_json(comparison))
    section = document["op_efficiency"]
    assert set(section) == {"gpus", "coverage", "signatures", "aligned", "findings", "notes"}
    assert [g["gpu"] for g in section["gpus"]] == [MI300X, H100]
    assert all(g["peaks_row"] and g["sources"] and g["hbm_tb_s"] for g in section["gpus"])
    assert set(section["coverage"][0]) == {
        "side",
        "op_calls",
        "rated_calls",
        "kernel_time_us",
        "op_call_time_us",
        "rated_time_us",
        "rated_share",
        "rated_share_of_op_calls",
    }
    assert set(section["signatures"]) == {"trace1", "trace2"}
    assert list(section["signatures"]["trace1"][0]) == list(SIGNATURE_COLUMNS)
    assert list(section["aligned"][0]) == list(ALIGNED_COLUMNS)
    assert "op_efficiency" not in comparison.to_dict()  # the findings' dict, which the golden check digests
    documented = (PROJECT / "docs" / "efficiency.md").read_text()
    per_side = {c[:-1] for c in ALIGNED_COLUMNS if c[-1].isdigit()}
    for name in {*SIGNATURE_COLUMNS, *CALL_COLUMNS, *(c for c in ALIGNED_COLUMNS if not c[-1].isdigit()), *per_side}:
        assert f"`{name}`" in documented, name
