"""The verdict reflects what a comparison leaves out: kernels without a launch event (issue 39 #2)."""

from __future__ import annotations

from pathlib import Path

import orjson
from builders import EagerTrace, Launch, Op, shared_trace

from fusion.__main__ import main
from fusion.classify.trace import load
from fusion.comparison.pair import compare
from fusion.detect.thresholds import Thresholds
from fusion.report.render import to_text

LEFT_OUT = "left out of the comparison, more than the 10% allowed (max_left_out_share)"


def _pair(tmp_path: Path, tail_us: float) -> list[Path]:
    """Two eager traces of 10 GEMMs of 10 us each, the first with one unlaunched kernel of `tail_us` before them."""
    paths = []
    for platform in ("AMD", "NVIDIA"):
        trace = EagerTrace(platform, first_correlation=100)
        if platform == "AMD":
            trace.unlaunched("previous_step_tail", correlation=40, dur=tail_us)
        trace.run(*(Op("aten::mm", [Launch("gemm", dur=10.0)]) for _ in range(10)))
        paths.append(tmp_path / f"{platform}.json")
        paths[-1].write_bytes(trace.data())
    return paths


def test_more_than_the_threshold_left_out_is_warn_saying_how_much_and_why(tmp_path: Path) -> None:
    traces = [load(p) for p in _pair(tmp_path, tail_us=50.0)]  # 50 of 150 us: 33%
    result = compare(*traces)
    assert result.comparability.level == "warn" and result.comparability.ok
    (warning,) = [w for w in result.comparability.warnings if LEFT_OUT in w]
    assert warning.startswith("33% of trace 1's kernel time and 0% of trace 2's (1 and 0 kernels, 0.1 and 0.0 ms)")
    assert "no runtime launch event" in warning and "--keep-unlaunched" in warning
    assert round(result.comparability.checks["left_out_share1"], 3) == 0.333
    assert warning in to_text(result, warnings=False)  # the verdict's reasons stay with it on stdout
    kept = compare(*traces, keep_unlaunched=True)
    assert not any(LEFT_OUT in w for w in kept.comparability.warnings)
    assert kept.comparability.checks["left_out_share1"] == 0.0
    assert not any("max_left_out_share" in w for w in compare(*traces, max_left_out_share=0.5).comparability.warnings)


def test_a_small_share_left_out_stays_ok(tmp_path: Path) -> None:
    result = compare(*(load(p) for p in _pair(tmp_path, tail_us=5.0)))  # 5 of 105 us: 4.8%
    assert Thresholds().max_left_out_share == 0.1
    assert result.comparability.level == "ok", result.comparability.warnings


def test_the_cli_says_it_in_text_and_json(tmp_path: Path, capsys) -> None:
    paths = list(map(str, _pair(tmp_path, tail_us=50.0)))
    assert main(["compare", *paths, "--no-cache"]) == 0
    out = capsys.readouterr().out
    verdict = out[out.index("Comparability: ") :].split("\n\n")[0]
    assert verdict.startswith("Comparability: warn") and "\n  ! 33% of trace 1's kernel time" in verdict
    report = tmp_path / "report.json"
    assert main(["compare", *paths, "--no-cache", "--format", "json", "-o", str(report)]) == 0
    comparability = orjson.loads(report.read_bytes())["comparability"]
    assert comparability["level"] == "warn" and any(LEFT_OUT in w for w in comparability["warnings"])
    assert main(["compare", *paths, "--no-cache", "--keep-unlaunched"]) == 0
    assert "Comparability: ok" in capsys.readouterr().out


def test_the_qwen_pair_is_warn_naming_the_31_percent_left_out() -> None:
    amd, nvidia = shared_trace("tl_mi300_qwen1.5-0.5b"), shared_trace("tl_h100_qwen1.5-0.5b")
    result = compare(load(amd), load(nvidia))
    assert result.comparability.level == "warn"
    (warning,) = [w for w in result.comparability.warnings if LEFT_OUT in w]
    assert warning.startswith("31% of trace 1's kernel time and 30% of trace 2's (463 and 509 kernels"), (
        warning
    )  # H100: 436 kernels and 73 memsets
