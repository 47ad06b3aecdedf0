"""The Perfetto export read back: by the trace event format's schema and a viewer's rules (trace_checks), by this
project's loader, and against the comparison it came from; the alignment of matched units; the CLI."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from builders import SAMPLES, Annotation, EagerTrace, Launch, Op, shared_trace

sys.path.insert(0, str(Path(__file__).parent))

import trace_checks as checks  # noqa: E402

from fusion.__main__ import main  # noqa: E402
from fusion.classify.trace import load  # noqa: E402
from fusion.comparison.pair import compare  # noqa: E402
from fusion.match.op_calls import align_calls, op_calls  # noqa: E402
from fusion.report import perfetto  # noqa: E402
from fusion.report.timeline import Scope, ScopeError, aligned_timeline, default_scope, matched_steps  # noqa: E402

SAMPLE_PAIRS = ("vllm_moe_full_graph", "vllm_moe_piecewise", "eager_prefill")
SHARED_MODELS = ("bert_small", "falconsai_nsfw", "qwen1.5-0.5b", "timesformer")


def _exported(comparison, scope: Scope, path: Path) -> tuple[dict, dict[str, int]]:
    """Write the scope, read it back every way, and return the document and its counts."""
    perfetto.write(comparison, scope, path)
    doc = checks.read(path)
    assert checks.schema_problems(doc) == []
    assert checks.viewer_problems(doc) == []
    counts = checks.check_against(doc, comparison)
    assert checks.round_trip(path, doc) == {s: counts[f"kernels{s}"] for s in (1, 2) if counts[f"kernels{s}"]}
    return doc, counts


def _exported_rows(doc: dict, side: int) -> set[int]:
    return {e["args"]["kernel row"] for e in checks.kernels_by_process(doc)[side]}


def _cited(comparison, side: int) -> set[int]:
    windows = [
        r.window1 if side == 1 else r.window2
        for f in (*comparison.mappings, *comparison.one_sided)
        for r in f.evidence_refs
    ]
    return {row for start, stop in windows for row in range(start, stop)}


def _default_rows(comparison, side: int) -> set[int]:
    """The kernels of the default scope, found without the timeline module: the first matched step (the first step
    of the trace's first phase here), else the first group pair, else the first pair."""
    kernels = comparison.trace(side).kernels
    steps = kernels["step"].to_numpy()
    if (steps >= 0).any() and (comparison.trace(3 - side).kernels["step"].to_numpy() >= 0).any():
        first = kernels[steps >= 0].iloc[0]
        same = (steps == first["step"]) & (kernels["phase"].astype(str).to_numpy() == str(first["phase"]))
        return set(np.flatnonzero(same).tolist())
    groups = comparison.pairs[comparison.pairs["kind"] == "group"]
    pair = int((groups if len(groups) else comparison.pairs)["pair_id"].iloc[0])
    return set(comparison.pair_kernels.kernel_indices(pair)[side - 1].tolist())


def _check_default(comparison, tmp_path: Path) -> dict[str, int]:
    doc, counts = _exported(comparison, Scope(), tmp_path / "default.json")
    for side in (1, 2):
        rows, scope = _exported_rows(doc, side), _default_rows(comparison, side)
        assert scope <= rows and rows - scope <= _cited(comparison, side), f"trace {side}: not the default scope"
        assert counts[f"kernels{side}"] == len(rows)
    return counts


@pytest.mark.parametrize("name", SAMPLE_PAIRS)
def test_a_sample_pair_exports_its_default_scope(name: str, tmp_path: Path) -> None:
    folder = SAMPLES / name
    comparison = compare(load(folder / "amd.json.gz"), load(folder / "nvidia.json.gz"))
    counts = _check_default(comparison, tmp_path)
    assert counts["flows"] > 0


@pytest.mark.parametrize("model", SHARED_MODELS)
def test_a_shared_real_pair_exports_its_default_scope(model: str, tmp_path: Path) -> None:
    comparison = compare(load(shared_trace(f"tl_h100_{model}")), load(shared_trace(f"tl_mi300_{model}")))
    assert default_scope(comparison) == Scope("step", 1)
    counts = _check_default(comparison, tmp_path)
    assert counts["flows"] > 0 and counts["gaps"] > 0


@pytest.fixture(scope="module")
def graph_pair():
    folder = SAMPLES / "vllm_moe_full_graph"
    return compare(load(folder / "amd.json.gz"), load(folder / "nvidia.json.gz"))


def test_every_finding_and_pair_scope_exports(graph_pair, tmp_path: Path) -> None:
    for number, mapping in enumerate(graph_pair.mappings, start=1):
        doc, counts = _exported(graph_pair, Scope("finding", number), tmp_path / f"finding{number}.json")
        titles = {e["name"] for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "finding"}
        assert f"finding {number}" in {t.split(":")[0] for t in titles}
        windows = [r.window1 for r in mapping.evidence_refs if r.window1[0] >= 0]
        assert {row for a, b in windows for row in range(a, b)} <= _exported_rows(doc, 1)
    last = int(graph_pair.pairs["pair_id"].iloc[-1])
    doc, _ = _exported(graph_pair, Scope("pair", last), tmp_path / "pair.json")
    assert set(graph_pair.pair_kernels.kernel_indices(last)[0].tolist()) <= _exported_rows(doc, 1)


def test_one_sided_and_fused_kernels_are_marked(graph_pair, tmp_path: Path) -> None:
    doc, _ = _exported(graph_pair, Scope("finding", 1), tmp_path / "marked.json")
    mapping = graph_pair.mappings[0]
    side = mapping.fused_trace
    events = checks.kernels_by_process(doc)[side]
    cited = {e["args"]["kernel row"] for e in events if "finding 1" in e["args"].get("findings", "").split(", ")}
    windows = [r.window1 if side == 1 else r.window2 for r in mapping.evidence_refs]
    assert cited == {row for a, b in windows for row in range(a, b)}
    assert cited <= {e["args"]["kernel row"] for e in events if e["args"].get("fused")}
    markers = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "one-sided"]
    one_sided = [e for s in (1, 2) for e in checks.kernels_by_process(doc)[s] if e["args"]["alignment"] == "one-sided"]
    assert len(markers) == len(one_sided) > 0
    assert sorted(m["name"] for m in markers) == sorted(f"one-sided: {e['name']}" for e in one_sided)


def _steps_pair(folder: Path, slow_gemm: float = 5.0) -> tuple[Path, Path]:
    """Eager traces of two recorded steps (ProfilerStep#5, #6 on AMD; #10, #11 on NVIDIA), each step an mm then
    two adds; AMD's mm kernel takes `slow_gemm` µs, NVIDIA's 5."""
    paths = []
    for platform, first, gemm in (("AMD", 5, slow_gemm), ("NVIDIA", 10, 5.0)):
        builder = EagerTrace(platform)
        now = 0.0
        for step in (first, first + 1):
            body = [
                Op("aten::mm", [Launch("gemm_kernel", gemm)]),
                Op("aten::add", [Launch("add_kernel", 2.0)]),
                Op("aten::add", [Launch("add_kernel", 2.0)]),
            ]
            now = builder.run(Annotation(f"ProfilerStep#{step}", body), start=now) + 100.0
        paths.append(folder / f"{platform.lower()}.json")
        paths[-1].write_bytes(builder.data())
    return paths[0], paths[1]


def test_steps_pair_by_order_and_one_exports_alone(tmp_path: Path) -> None:
    amd, nvidia = _steps_pair(tmp_path)
    comparison = compare(load(amd), load(nvidia))
    assert [(s.step1, s.step2) for s in matched_steps(comparison)] == [(5, 10), (6, 11)]
    doc, counts = _exported(comparison, Scope("step", 2), tmp_path / "step2.json")
    assert counts["kernels1"] == counts["kernels2"] == 3
    steps = comparison.trace1.kernels["step"].to_numpy()
    assert _exported_rows(doc, 1) == set(np.flatnonzero(steps == 6).tolist())
    with pytest.raises(ScopeError, match="no step 3: the traces have 2 matched steps"):
        aligned_timeline(comparison, Scope("step", 3))


def test_matched_op_calls_start_together_and_a_slow_call_delays_only_itself(tmp_path: Path) -> None:
    """AMD's mm kernel takes 50 µs, NVIDIA's 5: every aligned call still starts on both sides at once, NVIDIA waits
    45 µs after its mm (a gap), and each kernel keeps its duration."""
    amd, nvidia = _steps_pair(tmp_path, slow_gemm=50.0)
    comparison = compare(load(amd), load(nvidia))
    timeline = aligned_timeline(comparison, Scope("all"))
    calls = (op_calls(comparison.trace1, 1), op_calls(comparison.trace2, 2))
    pairs = align_calls(*calls)
    assert len(pairs) == 6
    for a, b in pairs:
        first = [int(calls[s].kernels(int(c))[0]) for s, c in ((0, a), (1, b))]
        starts = [timeline.lane(s + 1).start[timeline.lane(s + 1).positions(np.array([first[s]]))][0] for s in (0, 1)]
        assert starts[0] == pytest.approx(starts[1], abs=1e-9)
    waits = [round(g.stop - g.start, 3) for g in timeline.gaps if g.side == 2]
    assert 45.0 in waits
    doc, _ = _exported(comparison, Scope("all"), tmp_path / "all.json")
    gaps = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "alignment" and e["pid"] == 2]
    assert any(e["dur"] == pytest.approx(45.0) for e in gaps)


def test_an_op_scope_exports_its_aligned_calls(tmp_path: Path) -> None:
    from builders import write_op_pair

    amd, nvidia = write_op_pair(tmp_path)
    comparison = compare(load(amd), load(nvidia))
    doc, counts = _exported(comparison, Scope("op", "aten::layer_norm"), tmp_path / "op.json")
    assert (counts["kernels1"], counts["kernels2"]) == (12, 6)
    doc, counts = _exported(comparison, Scope("op", "aten::layer_norm", call=2), tmp_path / "call.json")
    assert (counts["kernels1"], counts["kernels2"], counts["flows"]) == (2, 1, 1)
    with pytest.raises(ScopeError, match="no aligned call of op 'aten::conv2d'"):
        aligned_timeline(comparison, Scope("op", "aten::conv2d"))


def test_the_checks_reject_what_a_viewer_would_misdraw(graph_pair, tmp_path: Path) -> None:
    """Each check fails on a file broken the way it guards against (so a passing check means something)."""
    perfetto.write(graph_pair, Scope(), tmp_path / "ok.json")
    doc = checks.read(tmp_path / "ok.json")
    kernels = checks.kernels_by_process(doc)[1]
    broken = {**doc, "traceEvents": [*doc["traceEvents"], {**kernels[0], "colour": "red"}]}
    assert checks.schema_problems(broken)
    overlapping = {**kernels[1], "ts": kernels[0]["ts"] + kernels[0]["dur"] / 2, "dur": kernels[0]["dur"] * 4}
    assert any(
        "overlaps" in p for p in checks.viewer_problems({**doc, "traceEvents": [*doc["traceEvents"], overlapping]})
    )
    dangling = [e for e in doc["traceEvents"] if not (e.get("flow_in") and e.get("bind_id") == 1)]
    assert any(p.startswith("flow 1") for p in checks.viewer_problems({**doc, "traceEvents": dangling}))
    shifted = [{**e, "dur": e["dur"] + 1.0} if e is kernels[0] else e for e in doc["traceEvents"]]
    with pytest.raises(AssertionError):
        checks.check_against({**doc, "traceEvents": shifted}, graph_pair)


def test_the_cli_writes_the_export_and_names_a_bad_scope(tmp_path: Path, capsys) -> None:
    folder = SAMPLES / "vllm_moe_full_graph"
    out = tmp_path / "timeline.json.gz"
    assert main(["export", str(folder / "amd.json.gz"), str(folder / "nvidia.json.gz"), "--perfetto", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"{out}: group pair 0;") and "aligned pairs linked" in printed
    doc = checks.read(out)
    assert checks.schema_problems(doc) == [] and checks.round_trip(out, doc)
    assert (
        main(
            [
                "export",
                str(folder / "amd.json.gz"),
                str(folder / "nvidia.json.gz"),
                "--perfetto",
                str(out),
                "--pair",
                "100000",
            ]
        )
        == 2
    )
    assert capsys.readouterr().err.startswith("error: no pair 100000: the comparison has pairs 0 to")
    assert (
        main(
            [
                "export",
                str(folder / "amd.json.gz"),
                str(folder / "nvidia.json.gz"),
                "--perfetto",
                str(out),
                "--call",
                "2",
            ]
        )
        == 2
    )
    assert capsys.readouterr().err == "error: --call needs --op\n"
