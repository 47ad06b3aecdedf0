import csv
import io
import json

from kernels import layer, make_trace, steps

from fusion.comparison.pair import compare
from fusion.report.render import headline, phase_lines, to_csv, to_json, to_text

FUSED_NORM = {"fused_add_rms_norm_kernel": ("Elementwise",)}


def comparison():
    unfused = [("fill", "Memset")] + layer(False)
    return compare(
        make_trace(steps(unfused, 6), label="AMD MI300X"),
        make_trace(steps(layer(True), 6), label="NVIDIA H100", fused=FUSED_NORM),
    )


def test_json_is_strict_and_reference_shaped():
    result = json.loads(to_json(comparison()), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert {"metadata", "global_counts", "fusion_opportunities", "fusion_mappings"} <= set(result)
    assert result["global_counts"]["Memset"]["ratio"] is None
    assert result["fusion_mappings"][0]["evidence_refs"][0]["window1"][1] > 0
    assert result["fusion_mappings"][0]["kind"] == "fusion" and result["one_sided_kernels"][0]["kind"] == "extra_work"


def test_text_report_has_traces_warnings_types_and_mappings():
    text = to_text(comparison())
    for expected in (
        "AMD MI300X",
        "NVIDIA H100",
        "Comparability:",
        "Kernel types",
        "Fusion opportunities",
        "[fusion · sequence] Trace 2 fuses Elementwise + RMSNorm -> RMSNorm",
        "6 x Memset [extra_work]",
        "fused kernel (trace 2): fused_add_rms_norm_kernel",
        "which also performs: Elementwise",
        "replaced kernels (trace 1): elementwise_add; rms_norm_kernel",
        "evidence from: groups",
    ):
        assert expected in text


def test_csv_tables():
    tables = to_csv(comparison())
    assert set(tables) == {"opportunities", "mappings", "one_sided_kernels", "type_stats", "matched_pairs", "ops"}
    mappings = list(csv.DictReader(io.StringIO(tables["mappings"])))
    assert mappings[0]["unfused_sequence"] == "Elementwise + RMSNorm" and mappings[0]["detector"] == "sequence"
    assert mappings[0]["fused_kernel_names"] == "fused_add_rms_norm_kernel"
    assert mappings[0]["unfused_kernel_names"] == "elementwise_add | rms_norm_kernel"
    assert mappings[0]["fused_components"] == "Elementwise" and mappings[0]["evidence_source"] == "groups"
    assert mappings[0]["kind"] == "fusion"
    notes = list(csv.DictReader(io.StringIO(tables["one_sided_kernels"])))
    assert {n["kind"] for n in notes} == {"extra_work"}
    types = list(csv.DictReader(io.StringIO(tables["type_stats"])))
    assert {"kernel_type", "trace1_count", "only_in"} <= set(types[0])


def test_split_is_reported_as_kernels_per_operation():
    one = [("Cijk_gemm", "GEMM"), ("add", "Elementwise")] * 30
    two = [("cutlass_gemm", "GEMM"), ("splitKreduce_kernel", "GEMM"), ("add", "Elementwise")] * 30
    c = compare(
        make_trace(steps(one, 3), label="AMD MI300X"),
        make_trace(steps(two, 3), label="NVIDIA H100", helpers={"splitKreduce_kernel": "split_k_reduce"}),
    )
    text = to_text(c)
    assert "[split · split_kernel] Trace 2 runs GEMM as 2 kernels, Trace 1 as 1  x90" in text
    assert "single kernel (trace 1): Cijk_gemm" in text
    assert "split into (trace 2): cutlass_gemm; splitKreduce_kernel" in text
    assert "fused kernel" not in text and "replaced kernels" not in text


def test_a_split_reads_as_a_split_wherever_a_finding_is_named():
    """The text report, the per-phase lines and the batch page name findings with one function: a split finding
    says which trace runs the operation as more kernels; it does not 'fuse GEMM + GEMM'."""
    assert headline("split_kernel", 2, ["GEMM", "GEMM"], "GEMM") == "Trace 1 runs GEMM as 2 kernels, Trace 2 as 1"
    assert (
        headline("sequence", 2, ["Elementwise", "RMSNorm"], "RMSNorm")
        == "Trace 2 fuses Elementwise + RMSNorm -> RMSNorm"
    )
    section = {
        "trace1": {"steps": 1, "kernels": 3, "time_us": 1.0},
        "trace2": {"steps": 1, "kernels": 2, "time_us": 1.0},
        "fusion_mappings": [
            {
                "detector": "split_kernel",
                "fused_trace": 2,
                "unfused_sequence": ["GEMM", "GEMM"],
                "fused_kernel_type": "GEMM",
                "pattern_count": 22,
            }
        ],
    }
    lines = phase_lines({"per_phase": {"forward": section, "backward": section}, "notes": []})
    assert "forward alone: Trace 1 runs GEMM as 2 kernels, Trace 2 as 1 x22" in lines
