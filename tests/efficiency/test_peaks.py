"""Tests for the GPU peak table and its loader."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusion.efficiency.peaks import PEAK_KEYS, GpuPeaks, load_peaks

TABLE = load_peaks()

REAL_TRACE_NAMES = {
    "NVIDIA H100 80GB HBM3": "NVIDIA H100 SXM5 80GB",
    "AMD Instinct MI300X VF": "AMD Instinct MI300X",
    "AMD Instinct MI300X": "AMD Instinct MI300X",
    "AMD Instinct MI210": "AMD Instinct MI210",
    "NVIDIA A100-SXM4-80GB": "NVIDIA A100 SXM4 80GB",
    "NVIDIA A100 80GB PCIe": "NVIDIA A100 PCIe 80GB",
    "NVIDIA A100-PG509-200": "NVIDIA A100 SXM4 40GB",
    "NVIDIA B200": "NVIDIA B200 (HGX, 1000 W)",
    "AMD Instinct MI350X": "AMD Instinct MI350X",
}

RUNTIME_NAMES = [
    "NVIDIA H100 PCIe",
    "NVIDIA H100 NVL",
    "NVIDIA H200",
    "NVIDIA A100-SXM4-40GB",
    "NVIDIA A100-PCIE-40GB",
    "Tesla V100-SXM2-16GB",
    "Tesla V100-SXM2-32GB",
    "Tesla V100-PCIE-16GB",
    "Tesla V100-PCIE-32GB",
    "NVIDIA L40S",
    "AMD Instinct MI325X",
    "AMD Instinct MI325X VF",
    "AMD Instinct Mi325X VF",
    "AMD Instinct MI355X",
    "AMD Instinct MI250X",
    "AMD Instinct MI250",
]

GOOD_ROW = """
[[gpu]]
name = "Test GPU"
match = ["Test GPU 1"]
vendor = "NVIDIA"
arch = "sm_90"
bf16_matrix = 100.0
source = ["a datasheet"]
"""


def _row(name: str) -> GpuPeaks:
    row = next((r for r in TABLE if r.name == name), None)
    assert row is not None, name
    return row


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "peaks.toml"
    path.write_text(text)
    return path


# ---------------------------------------------------------------- the real table


def test_real_table_covers_required_models() -> None:
    assert len(TABLE) >= 22
    for name in [
        "NVIDIA H100 80GB HBM3",
        "NVIDIA H100 PCIe",
        "NVIDIA H100 NVL",
        "NVIDIA H200",
        "NVIDIA B200",
        "NVIDIA A100-SXM4-40GB",
        "NVIDIA A100-PCIE-40GB",
        "NVIDIA A100-SXM4-80GB",
        "NVIDIA A100 80GB PCIe",
        "Tesla V100-SXM2-16GB",
        "Tesla V100-SXM2-32GB",
        "Tesla V100-PCIE-16GB",
        "NVIDIA L40S",
        "AMD Instinct MI300X",
        "AMD Instinct MI300X VF",
        "AMD Instinct MI325X",
        "AMD Instinct MI355X",
        "AMD Instinct MI350X",
        "AMD Instinct MI250X",
        "AMD Instinct MI250",
        "AMD Instinct MI210",
    ]:
        assert TABLE.lookup(name) is not None, name


def test_every_row_has_sources_and_positive_peaks() -> None:
    for row in TABLE:
        assert row.sources and all(s.strip() for s in row.sources), row.name
        assert row.peaks and all(v > 0 for v in row.peaks.values()), row.name
        assert set(row.peaks) <= PEAK_KEYS
        assert row.hbm_tb_s and row.hbm_tb_s > 0, row.name
        assert row.vendor in ("AMD", "NVIDIA")


def test_dense_ratios_are_consistent() -> None:
    """Catches a sparse number left unhalved: fp8 = 2 x bf16, bf16 = fp16, matrix >= vector."""
    for row in TABLE:
        p = row.peaks
        if "fp8_matrix" in p and "bf16_matrix" in p:
            assert p["fp8_matrix"] / p["bf16_matrix"] == pytest.approx(2.0, rel=0.02), row.name
        if "bf16_matrix" in p and "fp16_matrix" in p:
            assert p["bf16_matrix"] == p["fp16_matrix"], row.name
        for kind in ("fp64", "fp32"):
            if f"{kind}_matrix" in p and f"{kind}_vector" in p:
                assert p[f"{kind}_matrix"] >= p[f"{kind}_vector"], row.name


def test_h100_sxm_known_values() -> None:
    h100 = TABLE.lookup("NVIDIA H100 80GB HBM3")
    assert h100 is not None and h100.name == "NVIDIA H100 SXM5 80GB"
    assert 989.4 <= h100.peaks["bf16_matrix"] <= 989.5
    assert h100.peak_tflops("c10::BFloat16", matrix=True) == h100.peaks["bf16_matrix"]
    assert h100.hbm_tb_s == pytest.approx(3.35)
    assert h100.arch == "sm_90" and h100.compute_units == 132


def test_mi300x_known_values() -> None:
    mi300x = TABLE.lookup("AMD Instinct MI300X")
    assert mi300x is not None
    assert mi300x is TABLE.lookup("AMD Instinct MI300X VF")
    assert mi300x.peaks["bf16_matrix"] == pytest.approx(1307.4)
    assert mi300x.hbm_tb_s == pytest.approx(5.3)
    assert mi300x.arch == "gfx942" and mi300x.compute_units == 304


# ---------------------------------------------------------------- lookup


@pytest.mark.parametrize("device, expected", REAL_TRACE_NAMES.items())
def test_real_trace_names(device: str, expected: str) -> None:
    row = TABLE.lookup(device)
    assert row is not None and row.name == expected


@pytest.mark.parametrize("device", RUNTIME_NAMES)
def test_runtime_names_resolve(device: str) -> None:
    assert TABLE.lookup(device) is not None


@pytest.mark.parametrize(
    "device",
    [
        "NVIDIA H100",
        "H100",
        "AMD Instinct MI300",
        "MI300X",
        "NVIDIA H100 80GB HBM3 (MIG 1g.10gb)",
        "",
        "NVIDIA RTX 9999",
    ],
)
def test_unknown_or_partial_names_give_none(device: str) -> None:
    assert TABLE.lookup(device) is None


def test_ambiguous_mi250_name_needs_compute_units() -> None:
    name = "AMD Instinct MI250X / MI250"
    assert TABLE.lookup(name) is None
    assert TABLE.lookup(name, compute_units=110) is _row("AMD Instinct MI250X (one GCD)")
    assert TABLE.lookup(name, compute_units=104) is _row("AMD Instinct MI250 (one GCD)")
    assert TABLE.lookup(name, compute_units=38) is None


@settings(database=None)
@given(data=st.data())
def test_lookup_ignores_case_and_surrounding_whitespace(data: st.DataObject) -> None:
    row = data.draw(st.sampled_from(TABLE.rows))
    name = data.draw(st.sampled_from(row.match))
    cased = "".join(c.upper() if data.draw(st.booleans()) else c.lower() for c in name)
    pad = data.draw(st.sampled_from(["", " ", "\t", "  \n"]))
    assert TABLE.lookup(pad + cased + pad) is row


# ---------------------------------------------------------------- dtype mapping


def test_fp32_matmul_uses_cuda_cores_unless_tf32_on_nvidia() -> None:
    h100 = _row("NVIDIA H100 SXM5 80GB")
    assert h100.peak_tflops("float", matrix=True) == 66.9
    assert h100.peak_tflops("float", matrix=True, allow_tf32=True) == 494.7
    assert h100.peak_tflops("float", matrix=False, allow_tf32=True) == 66.9


def test_fp32_matmul_on_amd_matrix_cores() -> None:
    mi300x = _row("AMD Instinct MI300X")
    assert mi300x.peak_tflops("float", matrix=True) == 163.4
    assert mi300x.peak_tflops("float", matrix=True, allow_tf32=True) == 653.7
    mi355x = _row("AMD Instinct MI355X")  # no TF32 on CDNA 4
    assert mi355x.peak_tflops("float", matrix=True, allow_tf32=True) == 157.3


@pytest.mark.parametrize(
    "dtype, matrix, key",
    [
        ("c10::Half", True, "fp16_matrix"),
        ("c10::BFloat16", True, "bf16_matrix"),
        ("double", True, "fp64_matrix"),
        ("double", False, "fp64_vector"),
        ("c10::Float8_e4m3fnuz", True, "fp8_matrix"),
        ("c10::Float8_e4m3fn", True, "fp8_matrix"),
        ("c10::Float8_e5m2", True, "fp8_matrix"),
        ("signed char", True, "int8_matrix"),
        ("int8", True, "int8_matrix"),
        (" FLOAT ", False, "fp32_vector"),
    ],
)
def test_dtype_names_map_to_keys(dtype: str, matrix: bool, key: str) -> None:
    mi300x = _row("AMD Instinct MI300X")
    assert mi300x.peak_tflops(dtype, matrix=matrix) == mi300x.peaks[key]


def test_missing_rates_give_none() -> None:
    v100 = _row("NVIDIA Tesla V100 SXM2 32GB")
    assert v100.peak_tflops("c10::BFloat16", matrix=True) is None  # no bf16 on Volta
    assert v100.peak_tflops("signed char", matrix=True) is None
    assert v100.peak_tflops("double", matrix=True) == 7.8  # FP64 GEMM runs on CUDA cores
    assert v100.peak_tflops("c10::Half", matrix=False) is None  # not on the datasheet
    assert v100.peak_tflops("long int", matrix=True) is None
    b200 = _row("NVIDIA B200 (HGX, 1000 W)")
    assert b200.peak_tflops("c10::Float4_e2m1fn_x2", matrix=True) == 9000


# ---------------------------------------------------------------- validation

BAD_ROWS = {
    "unknown key": (GOOD_ROW + "bf16_dense = 1.0\n", r"Test GPU.*unknown key.*bf16_dense"),
    "zero peak": (GOOD_ROW.replace("100.0", "0"), r"Test GPU.*bf16_matrix.*positive"),
    "negative bandwidth": (GOOD_ROW + "hbm_tb_s = -3.35\n", r"Test GPU.*hbm_tb_s.*positive"),
    "string peak": (GOOD_ROW.replace("100.0", '"100"'), r"Test GPU.*bf16_matrix.*positive"),
    "bool peak": (GOOD_ROW.replace("100.0", "true"), r"Test GPU.*bf16_matrix"),
    "float compute units": (GOOD_ROW + "compute_units = 1.5\n", r"Test GPU.*compute_units.*integer"),
    "no source": (GOOD_ROW.replace('source = ["a datasheet"]\n', ""), r"Test GPU.*source"),
    "empty source": (GOOD_ROW.replace('["a datasheet"]', "[]"), r"Test GPU.*source"),
    "blank source": (GOOD_ROW.replace('["a datasheet"]', '["  "]'), r"Test GPU.*source"),
    "bad vendor": (GOOD_ROW.replace('"NVIDIA"', '"Intel"'), r"Test GPU.*vendor"),
    "no match": (GOOD_ROW.replace('match = ["Test GPU 1"]\n', ""), r"Test GPU.*match"),
    "duplicate match": (
        GOOD_ROW + GOOD_ROW.replace('"Test GPU"', '"Other GPU"').replace("Test GPU 1", " test gpu 1 "),
        r"Other GPU.*test gpu 1.*Test GPU",
    ),
    "duplicate name": (GOOD_ROW + GOOD_ROW.replace("Test GPU 1", "Test GPU 2"), r"Test GPU.*duplicate name"),
    "unknown top level": (GOOD_ROW + "\n[gpus]\nx = 1\n", r"unknown top-level key.*gpus"),
    "bad ambiguous": (
        GOOD_ROW + '[[ambiguous]]\nmatch = ["X"]\ncandidates = ["Nope"]\nsource = ["s"]\n',
        r"ambiguous.*Nope",
    ),
    "invalid toml": ("[[gpu]\nname = ", r"invalid TOML"),
}


@pytest.mark.parametrize("text, message", BAD_ROWS.values(), ids=BAD_ROWS.keys())
def test_validation_rejects_bad_rows(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_peaks(_write(tmp_path, text))


def test_good_row_loads(tmp_path: Path) -> None:
    table = load_peaks(_write(tmp_path, GOOD_ROW))
    row = table.lookup("test gpu 1")
    assert row is not None and row.peaks == {"bf16_matrix": 100.0} and row.hbm_tb_s is None


def test_bad_extra_file_is_rejected_too(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Test GPU.*source"):
        load_peaks(extra=str(_write(tmp_path, GOOD_ROW.replace('["a datasheet"]', "[]"))))


# ---------------------------------------------------------------- user extra file


def test_extra_file_adds_a_gpu_in_one_line(tmp_path: Path) -> None:
    line = (
        'gpu = [{name = "RTX 4090", vendor = "NVIDIA", arch = "sm_89", '
        'match = ["NVIDIA GeForce RTX 4090"], bf16_matrix = 165.2, hbm_tb_s = 1.008, '
        'source = ["NVIDIA Ada whitepaper"]}]\n'
    )
    table = load_peaks(extra=str(_write(tmp_path, line)))
    row = table.lookup("NVIDIA GeForce RTX 4090")
    assert row is not None and row.peak_tflops("c10::BFloat16", matrix=True) == 165.2
    assert table.lookup("NVIDIA H100 80GB HBM3") is not None
    assert len(table) == len(TABLE) + 1


def test_extra_file_overrides_on_same_match_string(tmp_path: Path) -> None:
    text = GOOD_ROW.replace("Test GPU 1", "nvidia h100 80gb hbm3").replace("100.0", "900.0")
    table = load_peaks(extra=str(_write(tmp_path, text)))
    row = table.lookup("NVIDIA H100 80GB HBM3")
    assert row is not None and row.name == "Test GPU" and row.peaks["bf16_matrix"] == 900.0
    assert all(r.name != "NVIDIA H100 SXM5 80GB" for r in table)  # fully shadowed row dropped
    assert len(table) == len(TABLE)
