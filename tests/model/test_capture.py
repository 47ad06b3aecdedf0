"""Graph replays tied to their capture: the shared vLLM pairs fully, generated replays that differ from their
capture (reordered, missing, extra kernels) reported and never tied where names disagree, the CLI's inputs."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from builders import SHARED_TRACES, Capture, Captured, EagerTrace, Graph, Launch, Module, Op, shared_absent

from fusion import compare, load
from fusion.__main__ import main
from fusion.match.op_calls import op_calls
from fusion.model.capture import read_captures, tie_captures
from fusion.model.capture_files import resolve_input
from fusion.report.render import to_json

SHARED_PAIRS = ("tl_vllm_decode_full_exec", "tl_vllm_pd_piecewise_exec")
MIN_TIED = 0.99
DIMS = {"Input Dims": [[32, 1024], [1024, 1024], []], "Input type": ["c10::BFloat16"] * 2 + [""]}
NORM = {"Input Dims": [[32, 1024], [], [1024], [1024], []], "Input type": ["c10::BFloat16", "ScalarList"] * 2}
LAYER = [("aten::layer_norm", ["ln_stats", "ln_fwd"], NORM), ("aten::linear", ["gemm"], DIMS)]


def capture_of(layers: list[list[tuple[str, list[str], dict]]], graphs: int = 1) -> bytes:
    """A capture trace: `graphs` capture windows, each of `layers` module frames of ops around captured launches."""
    builder = EagerTrace("AMD")
    windows = []
    for _ in range(graphs):
        body = [
            Module(f"Layer_{n}", [Op(op, [Captured(k) for k in kernels], args=args) for op, kernels, args in layer])
            for n, layer in enumerate(layers)
        ]
        windows.append(Capture(body))
    builder.run(*windows)
    return builder.data()


def replay_of(*sequences: list[str], eager: bool = False) -> bytes:
    """An execution trace: one graph launch per sequence (and an eager op before each, if asked)."""
    builder = EagerTrace("AMD", gpu="AMD Instinct MI300X")
    items = []
    for sequence in sequences:
        if eager:
            items.append(Op("aten::add", [Launch("add_kernel", 2.0)]))
        items.append(Graph(list(sequence)))
    builder.run(*items)
    return builder.data()


def tied(execution: bytes, *captures: bytes):
    return tie_captures(load(execution), read_captures(list(captures)))


@pytest.mark.parametrize("name", SHARED_PAIRS)
def test_shared_replays_are_tied_to_ops_with_input_dims(name: str) -> None:
    folder = SHARED_TRACES / name
    if not folder.is_dir():
        pytest.skip(shared_absent(folder))
    trace, captures, found = resolve_input(str(folder))
    assert found == str(folder / "capture") and captures
    report = tie_captures(load(trace), read_captures(captures, found)).capture
    assert report is not None and report["replayed_kernels"] > 300
    assert report["tied_with_input_dims"] >= MIN_TIED * report["replayed_kernels"]
    assert report["not_tied"] == 0 and report["first_mismatch"] is None


def test_shared_full_decode_graph_kernels_carry_op_names_and_shapes() -> None:
    folder = SHARED_TRACES / SHARED_PAIRS[0]
    if not folder.is_dir():
        pytest.skip(shared_absent(folder))
    trace, captures, found = resolve_input(str(folder))
    kernels = tie_captures(load(trace), read_captures(captures, found)).kernels
    graph = kernels[(kernels["launch"] == "graph").to_numpy()]
    assert len(graph) == 421
    assert (graph["op"] != "").all() and (graph["op_top"] != "").all() and (graph["op_call"] >= 0).all()
    assert graph["op_top_shapes"].astype(str).map(lambda s: json.loads(s)[0] is not None).all()
    gemms = graph[graph["op_top"] == "vllm::rocm_unquantized_gemm"]  # 24 layers: qkv, o and router projections
    assert len(gemms) == 24 * 3 and gemms["module"].astype(str).str.startswith("GptOssForCausalLM").all()


def test_the_shared_replays_tied_each_to_its_capture_align_their_ops_across_traces() -> None:
    """The full decode graph against the piecewise step, each with its own capture: the MoE layers' calls inside
    the graph replays are op calls on both sides, aligned in the op table and rated; untied, the full graph's
    replay has no op at all."""
    traces = []
    for name in SHARED_PAIRS:
        if not (SHARED_TRACES / name).is_dir():
            pytest.skip(shared_absent(SHARED_TRACES / name))
        trace, captures, found = resolve_input(str(SHARED_TRACES / name))
        traces.append((load(trace), read_captures(captures, found)))
    comparison = compare(*(tie_captures(trace, captures) for trace, captures in traces))
    moe = comparison.op_table[comparison.op_table["op"] == "vllm::moe_forward"]
    assert len(moe) == 1 and int(moe["trace1_calls"].iloc[0]) == int(moe["trace2_calls"].iloc[0]) == 24
    rated = comparison.efficiency.calls(1)
    gemms = rated[rated["counted_op"] == "vllm::rocm_unquantized_gemm"]  # 24 layers x 3 in the graph, lm_head
    assert len(gemms) == 73 and gemms["flops"].notna().all() and gemms["tflops"].notna().all()
    untied = compare(traces[0][0], tie_captures(*traces[1]))
    assert untied.op_table.loc[untied.op_table["op"] == "vllm::moe_forward", "trace1_calls"].sum() == 0


def test_an_exact_replay_is_tied_whole_with_module_and_shapes() -> None:
    trace = tied(replay_of(["ln_stats", "ln_fwd", "gemm"] * 2), capture_of([LAYER, LAYER]))
    kernels = trace.kernels
    assert trace.capture["tied"] == 6 and trace.capture["not_tied"] == 0
    assert kernels["op_top"].astype(str).tolist() == ["aten::layer_norm"] * 2 + ["aten::linear"] + [
        "aten::layer_norm"
    ] * 2 + ["aten::linear"]
    assert kernels["module"].astype(str).tolist()[2:4] == ["Layer_0", "Layer_1"]
    calls = op_calls(trace, 1)
    assert calls.counts.tolist() == [2, 1, 2, 1]  # one call per captured op call in the replay
    assert json.loads(str(kernels["op_top_shapes"].iloc[2]))[0] == DIMS["Input Dims"]


def test_a_reordered_replay_ties_only_where_names_agree() -> None:
    trace = tied(replay_of(["ln_fwd", "ln_stats", "gemm"]), capture_of([LAYER]))
    report = trace.capture
    assert (report["tied"], report["not_tied"], report["mismatched_replays"]) == (1, 2, 1)
    assert report["first_mismatch"]["position"] == 0 and report["first_mismatch"]["replayed"] == "ln_fwd"
    assert report["first_mismatch"]["captured"] == "ln_stats"
    assert trace.kernels["op_top"].astype(str).tolist() == ["", "", "aten::linear"]
    assert any("2 of 3 replayed kernels not tied" in w for w in trace.warnings)


def test_the_report_is_in_compares_json_and_every_field_is_documented() -> None:
    trace = tied(replay_of(["ln_fwd", "ln_stats", "gemm"]), capture_of([LAYER]))
    document = json.loads(to_json(compare(trace, trace)))
    report = document["metadata"]["trace1_capture"]
    assert report == document["metadata"]["trace2_capture"] and report["first_mismatch"]["replayed"] == "ln_fwd"
    documented = (Path(__file__).parents[2] / "docs" / "formats.md").read_text()
    assert "`metadata.trace1_capture`" in documented
    for key in [*report, *report["first_mismatch"]]:
        assert f"`{key}`" in documented or f'"{key}"' in documented, key


def test_a_missing_kernel_ties_only_what_comes_before_it() -> None:
    trace = tied(replay_of(["ln_stats", "gemm", "ln_stats", "ln_fwd", "gemm"]), capture_of([LAYER, LAYER]))
    report = trace.capture
    assert (report["tied"], report["not_tied"]) == (1, 4)
    first = report["first_mismatch"]
    assert (first["position"], first["replayed"], first["captured"]) == (1, "gemm", "ln_fwd")
    assert first["capture"] == "<bytes> graph 1"


def test_after_a_missing_kernel_equal_names_at_equal_places_are_not_tied() -> None:
    """Captured k1, k2, k2, k3; the replay lacks k1: its k2 at place 2 meets the captured second k2 by chance."""
    ops = [("op_a", ["k1"], DIMS), ("op_b", ["k2", "k2"], DIMS), ("op_c", ["k3"], DIMS)]
    trace = tied(replay_of(["k2", "k2", "k3"]), capture_of([ops]))
    assert (trace.capture["tied"], trace.capture["not_tied"]) == (0, 3)
    assert (trace.kernels["op_top"] == "").all()


def test_an_extra_kernel_is_reported_not_tied() -> None:
    trace = tied(replay_of(["ln_stats", "ln_fwd", "gemm", "memset"]), capture_of([LAYER]))
    report = trace.capture
    assert (report["tied"], report["not_tied"]) == (3, 1)
    assert report["first_mismatch"]["position"] == 3 and report["first_mismatch"]["captured"] == ""


def test_a_replay_no_capture_starts_like_is_not_tied() -> None:
    trace = tied(replay_of(["other", "gemm"]), capture_of([LAYER]))
    assert trace.capture["tied"] == 0 and trace.capture["not_tied"] == 2
    assert (trace.kernels["op_call"] == -1).all()


def test_identical_captures_are_taken_in_order() -> None:
    """A piecewise model captures one graph per layer, all alike: the k-th replay takes the k-th capture."""
    builder = EagerTrace("AMD")
    windows = [Capture([Module(f"Layer_{n}", [Op("aten::linear", [Captured("gemm")], args=DIMS)])]) for n in range(3)]
    builder.run(*windows)
    trace = tied(replay_of(["gemm"], ["gemm"], ["gemm"], ["gemm"]), builder.data())
    assert trace.kernels["module"].astype(str).tolist() == ["Layer_0", "Layer_1", "Layer_2", "Layer_0"]


def test_replayed_calls_join_the_op_level_comparison_with_op_names() -> None:
    """Each side's replays tied to its own capture: the layer norm's calls launch 2 vs 1 kernels, an op-level
    finding named by the op (without the captures, the replays have no op at all)."""
    one = ["ln_stats", "ln_fwd", "gemm"]
    other_layer = [("aten::layer_norm", ["ln_fwd"], NORM), ("aten::linear", ["gemm"], DIMS)]
    first = tied(replay_of(one, one, one, one, eager=True), capture_of([LAYER]))
    second = tied(
        replay_of(["ln_fwd", "gemm"] * 1, ["ln_fwd", "gemm"], ["ln_fwd", "gemm"], ["ln_fwd", "gemm"], eager=True),
        capture_of([other_layer]),
    )
    comparison = compare(first, second)
    ops = [m.op for m in comparison.mappings if m.op]
    assert "aten::layer_norm" in ops
    plain = compare(
        load(replay_of(one, one, one, one, eager=True)), load(replay_of(*[["ln_fwd", "gemm"]] * 4, eager=True))
    )
    assert "aten::layer_norm" not in [m.op for m in plain.mappings]
    rated = comparison.efficiency.calls(1)
    assert set(rated["counted_op"]) >= {"aten::layer_norm", "aten::linear"}


def test_the_cli_finds_the_capture_folder_and_says_so(tmp_path: Path, capsys) -> None:
    (tmp_path / "capture").mkdir()
    (tmp_path / "graph_execution.json").write_bytes(replay_of(["ln_stats", "ln_fwd", "gemm"]))
    (tmp_path / "capture" / "graph_capture.json").write_bytes(capture_of([LAYER]))
    assert main(["summary", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "tied 3 of 3 replayed kernels (100.0%)" in out and f"found by itself in {tmp_path / 'capture'}" in out
    assert main(["summary", str(tmp_path / "graph_execution.json"), "--format", "json"]) == 0
    capture = orjson.loads(capsys.readouterr().out)["capture"]
    assert capture["tied_with_input_dims"] == 3 and capture["found_in"] == str(tmp_path / "capture")


def test_the_cli_takes_a_capture_by_name(tmp_path: Path, capsys) -> None:
    execution = tmp_path / "exec.json"
    execution.write_bytes(replay_of(["ln_stats", "ln_fwd", "gemm"]))
    capture = tmp_path / "elsewhere.json"
    capture.write_bytes(capture_of([LAYER]))
    assert main(["compare", str(execution), str(execution), "--capture1", str(capture), "--format", "json"]) == 0
    document = orjson.loads(capsys.readouterr().out)
    assert document["op_efficiency"]["coverage"][0]["op_calls"] == 2
    assert document["op_efficiency"]["coverage"][1]["op_calls"] == 0


def test_a_capture_that_is_no_trace_is_one_error_line(tmp_path: Path, capsys) -> None:
    execution = tmp_path / "exec.json"
    execution.write_bytes(replay_of(["gemm"]))
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"[1, 2]")
    assert main(["summary", str(execution), "--capture1", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {bad}: ")
