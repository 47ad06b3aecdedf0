"""Rates of op calls on a GPU: hand-computed values on built traces, the GPU's peaks or a note, and the real
Hugging Face pairs (every GEMM, convolution and attention call rated on both sides, 90% of the time rated)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from builders import SAMPLES, SHARED_TRACES, EagerTrace, Launch, Op, shared_absent

from fusion import compare, load
from fusion.efficiency import rates
from fusion.efficiency.pair import SIDE_KEYS
from fusion.efficiency.rates import (
    BANDWIDTH_PCT,
    BOUND,
    COUNTED_OP,
    FAMILY,
    FLOPS,
    INNERMOST,
    LEVEL,
    MEMORY_BOUND,
    MODULE,
    OP,
    PEAK_PCT,
    REASON,
    ROOFLINE_PCT,
    TBPS,
    TFLOPS,
    TOP_LEVEL,
    WORK_COLUMNS,
    first_seen_groups,
    peak_table,
    signatures,
    trace_rates,
)
from fusion.errors import ConfigError

BF16, F32 = "c10::BFloat16", "float"
H100 = "NVIDIA H100 80GB HBM3"
LINEAR = {
    "Input Dims": [[128, 1024], [4096, 1024], [4096]],
    "Input type": [BF16, BF16, BF16],
    "Input Strides": [[1024, 1], [1024, 1], [1]],
    "Concrete Inputs": ["", "", ""],
}
LINEAR_FLOPS = 2 * 128 * 4096 * 1024 + 128 * 4096  # 2·M·N·K plus the bias add
LINEAR_BYTES = (128 * 1024 + 4096 * 1024 + 4096 + 128 * 4096) * 2  # x, W, b read, out written, bf16
COPY = {
    "Input Dims": [[128, 1024], [128, 1024], []],
    "Input type": [F32, BF16, "Scalar"],
    "Concrete Inputs": ["", "", "False"],
}
COPY_BYTES = 128 * 1024 * (2 + 4)  # read bf16, write fp32
HF_MODELS = ("bert_small", "falconsai_nsfw", "qwen1.5-0.5b", "timesformer")
MATRIX_FAMILIES = ("gemm", "conv", "attention")
MIN_RATED_SHARE = 0.90


def built(gpu: str | None = H100, platform: str = "NVIDIA", units: int | None = None, *, dur: float = 10.0):
    builder = EagerTrace(platform, gpu=gpu)
    if units is not None:
        builder.props[0]["numSms"] = units
    builder.run(
        Op("aten::linear", [Op("aten::addmm", [Launch("gemm", dur)])], args=LINEAR),
        Op("aten::to", [Op("aten::_to_copy", [Op("aten::copy_", [Launch("copy", 5.0)], args=COPY)])]),
        Op("my::custom", [Launch("a", 1.0), Launch("b", 1.0)], args={"Input Dims": [[4]]}),
    )
    return load(builder.data())


def test_linear_rates_by_hand() -> None:
    rates = trace_rates(built())
    linear = rates.calls.iloc[0]
    assert (linear[LEVEL], linear[COUNTED_OP], linear[FAMILY]) == (TOP_LEVEL, "aten::linear", "gemm")
    assert (linear[FLOPS], linear["bytes"]) == (LINEAR_FLOPS, LINEAR_BYTES)
    seconds = 10e-6
    assert math.isclose(linear[TFLOPS], LINEAR_FLOPS / seconds / 1e12)
    assert math.isclose(linear[TBPS], LINEAR_BYTES / seconds / 1e12)
    peak, bandwidth = 989.4, 3.35  # H100 SXM dense BF16 tensor peak, HBM3 (gpu_peaks.toml)
    assert math.isclose(linear[PEAK_PCT], 100 * linear[TFLOPS] / peak)
    assert math.isclose(linear[BANDWIDTH_PCT], 100 * linear[TBPS] / bandwidth)
    intensity = LINEAR_FLOPS / LINEAR_BYTES  # 110.7 FLOP/byte, under the ridge 989.4 / 3.35 = 295
    assert linear[BOUND] == MEMORY_BOUND
    assert math.isclose(linear[ROOFLINE_PCT], 100 * linear[TFLOPS] / (intensity * bandwidth))


def test_an_unmodelled_top_op_with_one_kernel_is_counted_at_its_innermost_op() -> None:
    rates = trace_rates(built())
    copy, custom = rates.calls.iloc[1], rates.calls.iloc[2]
    assert (copy[LEVEL], copy[COUNTED_OP], copy[FLOPS], copy["bytes"]) == (INNERMOST, "aten::copy_", 0.0, COPY_BYTES)
    assert math.isclose(copy[TBPS], COPY_BYTES / 5e-6 / 1e12) and math.isnan(copy[PEAK_PCT])
    assert copy[BOUND] == MEMORY_BOUND
    assert custom[LEVEL] == TOP_LEVEL and custom[REASON] == "op not modelled" and math.isnan(custom[TFLOPS])
    coverage = rates.coverage()
    assert coverage["rated_calls"] == 2 and math.isclose(coverage["rated_time_us"], 15.0)


def test_an_unknown_gpu_gets_rates_and_one_note() -> None:
    rates = trace_rates(built(gpu="NVIDIA H100"))
    linear = rates.calls.iloc[0]
    assert rates.gpu.peaks is None and "NVIDIA H100 is not in the peak table" in rates.gpu.note
    assert math.isclose(linear[TFLOPS], LINEAR_FLOPS / 10e-6 / 1e12)
    assert math.isnan(linear[PEAK_PCT]) and math.isnan(linear[ROOFLINE_PCT]) and linear[BOUND] == ""


def test_a_partition_with_fewer_compute_units_is_not_rated_against_the_whole_gpu() -> None:
    whole = trace_rates(built("AMD Instinct MI300X", "AMD", 304))
    part = trace_rates(built("AMD Instinct MI300X", "AMD", 38))
    assert whole.gpu.peaks is not None and not whole.gpu.note
    assert part.gpu.peaks is None and "38 compute units" in part.gpu.note


def test_a_user_peaks_file_adds_a_gpu_in_one_line(tmp_path: Path, monkeypatch) -> None:
    extra = tmp_path / "mine.toml"
    extra.write_text(
        'gpu = [{name = "H100 test", vendor = "NVIDIA", arch = "sm_90", match = ["NVIDIA H100"], '
        'bf16_matrix = 800.0, hbm_tb_s = 2.0, source = ["test"]}]\n'
    )
    monkeypatch.setenv("FUSION_GPU_PEAKS", str(extra))
    linear = trace_rates(built(gpu="NVIDIA H100")).calls.iloc[0]
    assert math.isclose(linear[PEAK_PCT], 100 * linear[TFLOPS] / 800.0)
    assert math.isclose(linear[BANDWIDTH_PCT], 100 * linear[TBPS] / 2.0)


def test_a_bad_peaks_file_is_a_config_error_naming_it(tmp_path: Path, monkeypatch) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('gpu = [{name = "x", vendor = "Intel", arch = "a", match = ["x"], source = ["s"]}]\n')
    monkeypatch.setenv("FUSION_GPU_PEAKS", str(bad))
    with pytest.raises(ConfigError, match="FUSION_GPU_PEAKS=.*bad.toml.*vendor"):
        peak_table()


def test_a_bad_built_in_table_names_its_file_not_the_unset_setting(tmp_path: Path, monkeypatch) -> None:
    bad = tmp_path / "gpu_peaks.toml"
    bad.write_text("gpu = [")
    monkeypatch.delenv("FUSION_GPU_PEAKS", raising=False)
    monkeypatch.setattr(rates, "DEFAULT_PATH", bad)
    rates._peak_table.cache_clear()  # the built-in table read by an earlier test
    with pytest.raises(ConfigError) as raised:
        peak_table()
    assert str(raised.value).startswith(f"{bad}: invalid TOML")


def test_signatures_sum_the_work_of_equal_calls() -> None:
    builder = EagerTrace("NVIDIA", gpu=H100)
    builder.run(*[Op("aten::linear", [Launch("gemm", dur)], args=LINEAR) for dur in (10.0, 30.0)])
    trace = load(builder.data())
    rates = trace_rates(trace)
    table = signatures(rates)
    assert len(table) == 1
    row = table.iloc[0]
    assert (row["calls"], row["time_us"], row[FLOPS]) == (2, 40.0, LINEAR_FLOPS)
    assert math.isclose(row[TFLOPS], 2 * LINEAR_FLOPS / 40e-6 / 1e12)


@pytest.mark.parametrize("side", ("amd", "nvidia"))
def test_calls_grouped_once_per_distinct_work_are_grouped_as_every_call(side: str) -> None:
    """TraceRates.groups compares the values of each distinct work once: it numbers the calls as grouping the values
    of every call does, also where different works share values (one op, several shapes)."""
    rates = trace_rates(load(SAMPLES / "eager_prefill" / f"{side}.json.gz"))
    assert len(np.unique(rates.work)) > len(np.unique(rates.groups((OP,)))) > 1
    for columns in ((OP,), (FLOPS, REASON), SIDE_KEYS, WORK_COLUMNS):
        assert np.array_equal(rates.groups(columns), first_seen_groups(rates.calls, columns))
    with pytest.raises(ValueError, match="module"):
        rates.groups((OP, MODULE))


def test_a_call_without_recorded_shapes_is_counted_without_shapes() -> None:
    """A kernel column's missing value (category code -1) is no shapes, not the column's last category."""
    builder = EagerTrace("NVIDIA", gpu=H100)
    builder.run(
        Op("aten::linear", [Launch("gemm", 10.0)], args=LINEAR), Op("aten::copy_", [Launch("copy", 5.0)], args=COPY)
    )
    trace = load(builder.data())
    kernels = trace.kernels
    first = np.flatnonzero(kernels["op_top"].astype(str).to_numpy() == "aten::linear")
    kernels["op_top_shapes"] = kernels["op_top_shapes"].mask(kernels.index.isin(first))
    assert (kernels["op_top_shapes"].cat.codes.to_numpy()[first] == -1).all()
    calls = trace_rates(trace).calls  # in start order: the linear first
    assert calls["dims"].tolist() == ["", "[[128,1024],[128,1024],[]]"] and math.isnan(calls[FLOPS].iloc[0])


def _hf_pair(model: str):
    folders = [SHARED_TRACES / f"tl_{gpu}_{model}" for gpu in ("h100", "mi300")]
    if not all(f.is_dir() for f in folders):
        pytest.skip(shared_absent(SHARED_TRACES))
    return [load(next(f.glob("*.json.gz"))) for f in folders]


@pytest.mark.parametrize("model", HF_MODELS)
def test_hf_pairs_rate_every_matrix_call_on_both_sides(model: str) -> None:
    comparison = compare(*_hf_pair(model))
    efficiency = comparison.efficiency
    for side in (1, 2):
        calls = efficiency.calls(side)
        matrix = calls[calls[FAMILY].isin(MATRIX_FAMILIES)]
        assert len(matrix) >= 30
        assert not matrix[[FLOPS, "bytes", TFLOPS, PEAK_PCT]].isna().any().any()
        coverage = efficiency.coverage[side - 1]
        assert coverage["rated_share"] >= MIN_RATED_SHARE
        assert efficiency.gpus[side - 1].peaks_row is not None and efficiency.gpus[side - 1].sources


def test_real_qwen_gemm_rates_follow_from_their_kernels() -> None:
    """The MLP's up/gate projections, derived independently: 2·(16·559)·2816·1024 FLOPs per call, and the time
    of the 48 calls summed straight from the kernel table (every eager kernel whose top-level op is that
    aten::linear call)."""
    mlp_dims = [[16, 559, 1024], [2816, 1024], []]
    flops = 2 * 16 * 559 * 2816 * 1024
    for trace in _hf_pair("qwen1.5-0.5b"):
        kernels = trace.kernels
        top = kernels["op_top"].astype(str)
        dims = [json.loads(s)[0] if s else None for s in kernels["op_top_shapes"].astype(str)]
        mine = (top == "aten::linear").to_numpy() & np.array([d == mlp_dims for d in dims])
        mine &= (kernels["launch"] == "kernel").to_numpy()
        seconds = float(kernels["dur"].to_numpy()[mine].sum()) * 1e-6
        assert kernels["op_call"].to_numpy()[mine].size and len(np.unique(kernels["op_call"].to_numpy()[mine])) == 48
        rates = trace_rates(trace)
        table = signatures(rates)
        table = table[table["dims"] == json.dumps(mlp_dims, separators=(",", ":"))]
        assert len(table) == 1 and table["calls"].iloc[0] == 48 and table[FLOPS].iloc[0] == flops
        assert math.isclose(float(table[TFLOPS].iloc[0]), 48 * flops / seconds / 1e12, rel_tol=1e-12)
