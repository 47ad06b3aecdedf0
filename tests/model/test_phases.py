"""Kernel -> phase and step: the evidence order on plain range tables, views, and the real traces."""

import json
import threading

import numpy as np
import pandas as pd
import pytest
from builders import kernel_event, kineto_trace, shared_trace, write_trace

from fusion.__main__ import main
from fusion.classify.trace import load
from fusion.comparison.pair import analyze_fusion_differences, compare
from fusion.loader.cpu_events import Ranges
from fusion.model.phases import (
    ALL,
    BACKWARD,
    DECODE,
    FORWARD,
    MIXED,
    OPTIMIZER,
    PHASES,
    PREFILL,
    SOURCE_BETWEEN_REPLAYS,
    SOURCE_EAGER_FORWARD,
    SOURCE_GRAPH,
    SOURCE_NONE,
    SOURCE_STEP,
    SOURCE_TRAINING_FORWARD,
    assign_phases,
    describe,
    phase_notes,
    phase_table,
    phase_view,
)
from fusion.result import NO_PAIR
from fusion.settings import ANALYSIS_THREADS
from fusion.synthetic.phases import (
    ServingSpec,
    serving_truth,
    training_trace,
    training_truth,
    write,
    write_serving_pair,
)

MAIN, AUTOGRAD = 11, 12


def ranges(*rows):
    """(name, ts, dur[, thread]) rows as the loader's Ranges and name list; the thread defaults to the main one."""
    names = sorted({r[0] for r in rows})
    column = [np.array(values) for values in zip(*rows)] if rows else [np.zeros(0)] * 3
    threads = np.array([r[3] if len(r) > 3 else MAIN for r in rows], dtype=np.int32)
    start = column[1].astype(np.float64)
    table = Ranges(
        np.zeros(len(rows), np.int8),
        start,
        start + column[2].astype(np.float64),
        threads,
        np.array([names.index(r[0]) for r in rows], dtype=np.int32),
        np.full(len(rows), -1, dtype=np.int32),
    )
    return table, names


def kernels(*launches):
    """(launch ts or None, thread[, launch kind]) per kernel."""
    return pd.DataFrame(
        {
            "launch_ts": [np.nan if ts is None else float(ts) for ts, *_ in launches],
            "thread": [rest[0] if rest else MAIN for _, *rest in launches],
            "launch": [rest[1] if len(rest) > 1 else ("none" if ts is None else "kernel") for ts, *rest in launches],
            "dur": 1.0,
        }
    )


def phased(table, cpu):
    return table.join(assign_phases(table, *cpu))


def test_vllm_annotations_give_prefill_decode_mixed_and_number_the_steps():
    cpu = ranges(
        ("execute_2048_context_2(sq2048sk2048sqsq2097152sqsk2097152)_generation_0(sq0sk0sqsq0sqsk0)", 0, 100),
        ("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk5000sqsq32sqsk5000)", 200, 100),
        ("execute_context_1(888)_generation_3(3)", 400, 100),
        ("aten::mm", 10, 5),
    )
    result = phased(kernels((11, MAIN), (250, 99), (450, MAIN), (350, MAIN), (None,)), cpu)
    assert result["phase"].tolist() == [PREFILL, DECODE, MIXED, ALL, ALL]
    assert result["step"].tolist() == [0, 1, 2, -1, -1]
    assert result["phase_source"].tolist()[:3] == ["vLLM execute annotation"] * 3
    assert result["phase_source"].tolist()[3:] == [SOURCE_NONE] * 2


def test_an_idle_vllm_step_is_no_phase_signal():
    result = phased(kernels((5, MAIN)), ranges(("execute_context_0(0)_generation_0(0)", 0, 10)))
    assert result["phase"].tolist() == [ALL]


def test_sglang_step_spans_then_engine_functions_on_the_launching_thread():
    cpu = ranges(
        ("step[EXTEND bs=15 toks=15360]", 0, 100),
        ("step[DECODE bs=32]", 200, 100),
        ("step[IDLE bs=0]", 400, 100),
        ("sglang/srt/model_executor/model_runner.py(3003): forward_decode", 600, 100, 5),
        ("sglang/srt/layers/attention/aiter_backend.py(2039): forward_extend", 800, 100, 5),
    )
    result = phased(kernels((50, MAIN), (250, MAIN), (450, MAIN), (650, 5), (650, MAIN), (850, 5)), cpu)
    assert result["phase"].tolist() == [PREFILL, DECODE, ALL, DECODE, ALL, PREFILL]
    assert result["phase_source"].tolist()[3] == "SGLang forward function"
    assert result["step"].tolist() == [0, 1, -1, -1, -1, -1]


def test_vllm_annotation_outranks_an_sglang_span_inside_it():
    cpu = ranges(("execute_context_3(300)_generation_0(0)", 0, 100), ("step[DECODE bs=3]", 10, 50))
    result = phased(kernels((20, MAIN)), cpu)
    assert result["phase"].tolist() == [PREFILL] and result["phase_source"].tolist() == ["vLLM execute annotation"]


def training_tables():
    """Two ProfilerSteps: forward on the main thread, backward frames on the autograd thread, the optimizer."""
    rows = []
    for n, t0 in ((7, 0), (8, 1000)):
        rows += [
            (f"ProfilerStep#{n}", t0, 900),
            ("aten::linear", t0 + 10, 100),
            ("autograd::engine::evaluate_function: AddmmBackward0", t0 + 300, 200, AUTOGRAD),
            ("AddmmBackward0", t0 + 301, 150, AUTOGRAD),
            ("Optimizer.step#AdamW.step", t0 + 600, 200),
        ]
    launches = []
    for t0 in (0, 1000):
        launches += [(t0 + 20, MAIN), (t0 + 350, AUTOGRAD), (t0 + 360, MAIN), (t0 + 700, MAIN)]
    return kernels(*launches, (None,)), ranges(*rows)


def test_training_frames_give_forward_backward_optimizer_per_profiler_step():
    result = phased(*training_tables())
    per_step = [FORWARD, BACKWARD, FORWARD, OPTIMIZER]
    assert result["phase"].tolist() == per_step * 2 + [ALL]
    assert result["step"].tolist() == [7] * 4 + [8] * 4 + [-1]
    assert result["phase_source"].tolist()[0] == SOURCE_TRAINING_FORWARD
    table = phase_table(result)
    assert table.loc[FORWARD, "steps"] == 2 and table.loc[FORWARD, "kernels"] == 4
    assert table.loc[BACKWARD, "kernels"] == 2 and table.loc[OPTIMIZER, "steps"] == 2


def test_graph_replays_are_decode_only_when_nothing_else_says():
    table = kernels((5, MAIN, "graph"), (5, MAIN, "graph"), (50, MAIN, "kernel"))
    alone = phased(table, ranges(("aten::mm", 0, 100)))
    assert alone["phase"].tolist() == [DECODE, DECODE, ALL]
    assert alone["phase_source"].tolist()[0] == SOURCE_GRAPH
    assert any("assumed from graph replays" in n for n in phase_notes(alone))
    annotated = phased(table, ranges(("execute_context_1(10)_generation_0(0)", 40, 20)))
    assert annotated["phase"].tolist() == [ALL, ALL, PREFILL]


def test_nested_and_overlapping_ranges_take_the_outermost_and_count_it_once():
    cpu = ranges(("step[DECODE bs=1]", 0, 100), ("step[EXTEND bs=1 toks=4]", 10, 20), ("step[DECODE bs=2]", 200, 10))
    result = phased(kernels((15, MAIN), (90, MAIN), (205, MAIN), (150, MAIN)), cpu)
    assert result["phase"].tolist() == [DECODE, DECODE, DECODE, ALL]
    assert result["step"].tolist() == [0, 0, 1, -1]


def test_a_trace_without_signal_is_one_phase_all_with_a_note():
    result = phased(kernels((5, MAIN), (None,)), ranges(("aten::mm", 0, 10)))
    assert list(phase_table(result).index) == [ALL]
    assert describe(result)["notes"][0].startswith("no phase signal")


def test_empty_inputs():
    empty = phased(kernels(), ranges())
    assert empty.empty and list(phase_table(empty).index) == []
    no_ranges = phased(kernels((5, MAIN)), ranges())
    assert no_ranges["phase"].tolist() == [ALL]


def test_mixed_steps_are_flagged():
    result = phased(kernels((5, MAIN)), ranges(("execute_context_1(10)_generation_3(3)", 0, 10)))
    assert any(note.startswith("1 mixed step (") for note in phase_notes(result))


def test_phase_view_keeps_one_phase_renumbered_with_its_own_name_counts():
    trace = load(kineto_trace("AMD", steps=4))
    phases = [DECODE] * 6 + [PREFILL] * 6
    trace.kernels = trace.kernels.assign(
        phase=pd.Categorical(phases, categories=list(PHASES)),
        step=[0] * 3 + [1] * 3 + [2] * 3 + [3] * 3,
        phase_source=SOURCE_NONE,
    )
    assert phase_view(trace, ALL) is trace
    view = phase_view(trace, DECODE)
    assert view.kernel_count == 6 and list(view.kernels.index) == list(range(6))
    assert view.kernels["name"].tolist() == trace.kernels["name"].tolist()[:6]
    assert view.names["count"].sum() == 6 and view.names["time_us"].sum() == pytest.approx(view.kernel_time_us)
    assert "phase decode only: 6 of 12 kernels in 2 decode steps" in view.warnings[-1]
    assert phase_view(trace, OPTIMIZER).kernel_count == 0
    with pytest.raises(ValueError, match="unknown phase"):
        phase_view(trace, "warmup")


# --- on loaded traces: the loader calls assign_phases ---

REAL_PHASES = {
    # execute_8192_context_9(sq8155..)_generation_37(sq37..): 9 prompt and 37 generation requests
    "tl_vllm_pd_piecewise_exec": {MIXED: 1},
    # execute_32_context_0(sq0..)_generation_32(sq32..)
    "tl_vllm_decode_full_exec": {DECODE: 1},
    # execute_15360_context_15(..)_generation_0(..) around step[EXTEND bs=15 toks=15360]
    "tl_sglang_qwen3_8b_prefilldecode": {PREFILL: 1},
    # execute_context_1(888_788544)_generation_0(0): the older vLLM format
    "tl_b200_eager": {PREFILL: 1},
    # ProfilerStep#1 with autograd::engine frames and Optimizer.step#SGD.step
    "hta_mi250_minitoy": {FORWARD: 1, BACKWARD: 1, OPTIMIZER: 1},
}


@pytest.mark.parametrize("name", sorted(REAL_PHASES))
def test_real_traces_phases_and_steps_match_their_annotations(name):
    trace = load(shared_trace(name))
    table = phase_table(trace.kernels)
    assert table["steps"].to_dict() == REAL_PHASES[name]
    assert table["kernels"].sum() == trace.kernel_count


def test_real_training_trace_has_forward_backward_optimizer_in_every_profiler_step():
    trace = load(shared_trace("hta_trace_diff_control"))
    kernels = trace.kernels
    steps = set(kernels["step"]) - {-1}
    assert len(steps) > 1
    for phase in (FORWARD, BACKWARD, OPTIMIZER):
        assert set(kernels.loc[kernels["phase"] == phase, "step"]) == steps


def test_a_trace_without_phase_signal_is_all(tmp_path):
    trace = load(kineto_trace("NVIDIA"))
    assert set(trace.kernels["phase"]) == {ALL}
    assert describe(trace.kernels)["notes"][0].startswith("no phase signal")


@pytest.fixture(scope="module")
def serving_pair(tmp_path_factory):
    spec = ServingSpec()
    paths = write_serving_pair(tmp_path_factory.mktemp("serving"), spec)
    return spec, paths, [load(p) for p in paths]


def test_generated_serving_traces_have_the_scheduled_phases_and_steps(serving_pair):
    spec, _, traces = serving_pair
    truth = serving_truth(spec)["traces"]
    for side, trace in enumerate(traces, start=1):
        table = phase_table(trace.kernels)
        assert table[["steps", "kernels"]].to_dict(orient="index") == truth[f"trace{side}"]


def mapping_keys(mappings):
    return {(m["fused_trace"], m["fused_kernel_type"], tuple(m["unfused_sequence"])) for m in mappings}


def truth_key(fusions):
    return {(f["fused_trace"], f["fused_kernel_type"], tuple(f["unfused_sequence"])) for f in fusions}


@pytest.mark.parametrize("phase", [DECODE, PREFILL])
def test_compare_one_phase_reports_exactly_that_phases_fusion(serving_pair, phase, capsys):
    spec, paths, _ = serving_pair
    assert main(["compare", str(paths[0]), str(paths[1]), "--phase", phase, "--format", "json", "--no-cache"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert mapping_keys(result["fusion_mappings"]) == truth_key(serving_truth(spec)["fusions"][phase])
    assert result["phases"]["selected"] == phase and list(result["phases"]["per_phase"]) == [phase]


def test_comparing_all_phases_gives_each_phase_its_own_findings_and_notes(serving_pair):
    spec, _, traces = serving_pair
    truth = serving_truth(spec)
    result = analyze_fusion_differences(*traces)
    per_phase = result["phases"]["per_phase"]
    assert list(per_phase) == [PREFILL, DECODE]
    for phase in (PREFILL, DECODE):
        assert mapping_keys(per_phase[phase]["fusion_mappings"]) == truth_key(truth["fusions"][phase])
        for side in (1, 2):
            assert per_phase[phase][f"trace{side}"]["steps"] == truth["traces"][f"trace{side}"][phase]["steps"]
    attention = next(r for r in per_phase[DECODE]["type_stats"] if r["kernel_type"] == "Attention")
    assert attention["trace1_count"] == 3 * attention["trace2_count"] and attention["per_step_ratio"] == 1.0
    assert "trace 1 has 6 decode steps, trace 2 has 2" in " ".join(result["phases"]["notes"])


@pytest.fixture(scope="module")
def engine_pair(tmp_path_factory):
    """vLLM V1 steps: eager prefill, graph-replayed decode, eager preparation and sampler in every step, all inside
    gpu_model_runner ranges (no execute annotation). Five steps of each phase on each side: the sampler fusion
    repeats enough in each phase (detect.min_pattern_count)."""
    spec = ServingSpec(schedule1="PPDDDPPPDDDDDDD", schedule2="PPPPPDDDDD", engine_ranges=True)
    paths = write_serving_pair(tmp_path_factory.mktemp("engine"), spec)
    return spec, paths, [load(p) for p in paths]


def test_a_step_takes_one_phase_and_all_its_kernels_go_with_it(engine_pair):
    """Decode from the graph replays, prefill from the eager forward steps among them: the preparation and sampler
    kernels of each step are in its phase, none is left in 'all'."""
    spec, _, traces = engine_pair
    truth = serving_truth(spec)["traces"]
    for side, trace in enumerate(traces, start=1):
        table = phase_table(trace.kernels)
        assert table[["steps", "kernels"]].to_dict(orient="index") == truth[f"trace{side}"]
        assert set(table.loc[PREFILL, "sources"]) == {SOURCE_EAGER_FORWARD}
        assert set(table.loc[DECODE, "sources"]) == {SOURCE_GRAPH, SOURCE_STEP}
        notes = " ".join(phase_notes(trace.kernels))
        assert "token counts (the GEMMs' Input Dims) are not loaded" in notes
        assert "take the phase of their step" in notes


@pytest.mark.parametrize("phase", [DECODE, PREFILL])
def test_one_phase_of_engine_steps_finds_its_fusion_and_the_samplers(engine_pair, phase, capsys):
    """--phase decode finds the sampler fusion the whole comparison finds: the decode steps' samplers are decode."""
    spec, paths, traces = engine_pair
    expected = truth_key(serving_truth(spec)["fusions"][phase])
    assert main(["compare", str(paths[0]), str(paths[1]), "--phase", phase, "--format", "json", "--no-cache"]) == 0
    assert mapping_keys(json.loads(capsys.readouterr().out)["fusion_mappings"]) == expected
    whole = analyze_fusion_differences(*traces)
    assert mapping_keys(whole["phases"]["per_phase"][phase]["fusion_mappings"]) == expected
    assert truth_key([serving_truth(spec)["fusions"][DECODE][-1]]) <= mapping_keys(whole["fusion_mappings"])


def test_eager_kernels_between_decode_replays_go_with_decode_unless_they_are_a_forward():
    """No step annotation: a sampler between two replays of 3 kernels is decode; an eager run of 3 or more between
    them is an eager forward, prefill."""
    table = kernels(
        (0, MAIN, "graph"),
        (0, MAIN, "graph"),
        (0, MAIN, "graph"),
        (10, MAIN),
        (20, MAIN, "graph"),
        (20, MAIN, "graph"),
        (20, MAIN, "graph"),
        (30, MAIN),
        (31, MAIN),
        (32, MAIN),
        (40, MAIN, "graph"),
        (50, MAIN),
    )
    result = phased(table, ranges())
    assert list(result["phase"]) == [DECODE] * 7 + [PREFILL] * 3 + [DECODE, ALL]
    assert result["phase_source"].iloc[3] == SOURCE_BETWEEN_REPLAYS
    assert result["phase_source"].iloc[7] == SOURCE_EAGER_FORWARD


def test_a_profiler_step_takes_only_an_annotated_serving_phase():
    """A profiler step may hold a whole pipeline: its kernels take a phase that serving annotations decided, never
    one assumed from graph replays."""
    execute = "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk5000sqsq32sqsk5000)"
    cpu = ranges(("ProfilerStep#3", 0, 100), (execute, 10, 20))
    result = phased(kernels((15, MAIN), (50, MAIN)), cpu)
    assert list(result["phase"]) == [DECODE, DECODE] and list(result["step"]) == [0, 3]
    assert result["phase_source"].iloc[1] == SOURCE_STEP
    graphs = phased(kernels((15, MAIN, "graph"), (50, MAIN)), ranges(("ProfilerStep#3", 0, 100)))
    assert list(graphs["phase"]) == [DECODE, ALL]


def test_a_phase_findings_evidence_cites_rows_of_the_whole_traces(serving_pair):
    """The phase's own pairs are not kept: its refs name no pair, and their windows are rows of the compared
    traces (not of the phase's view) that hold kernels of that phase with the names the finding cites."""
    _, _, traces = serving_pair
    whole = compare(*traces)
    for phase in (PREFILL, DECODE):
        mappings = whole.phases["per_phase"][phase]["fusion_mappings"]
        assert mappings
        for mapping in mappings:
            cited = {*mapping["fused_kernel_names"], *mapping["unfused_kernel_names"]}
            for ref in mapping["evidence_refs"]:
                assert ref["pair_id"] == NO_PAIR
                for side, trace in ((1, whole.trace1), (2, whole.trace2)):
                    start, stop = ref[f"window{side}"]
                    ends = trace.kernels.iloc[[start, stop - 1]]
                    assert set(ends["phase"]) == {phase}
                    assert set(ends["name"].astype(str)) <= cited


def _compare_in_thread(traces) -> tuple[threading.Thread, list[BaseException]]:
    """compare() on a thread of its own, joined within JOIN_S: a hang fails the test instead of stalling the run."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            compare(*traces)
        except BaseException as error:  # the test inspects it
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(JOIN_S)
    return thread, errors


JOIN_S = 60
"""Far longer than comparing the serving pair takes (well under a second)."""


@pytest.mark.parametrize("categorical", [True, False])
def test_the_no_phase_note_counts_its_kernels_without_a_recorded_launch(categorical):
    """Of the kernels of phase 'all', those whose launch is 'none' or 'unrecorded'; a kernel with no launch value or
    of another phase is not counted, whether the columns are categorical or plain strings."""
    from fusion.model.columns import LAUNCH_KINDS
    from fusion.model.phases import NO_STEP, SOURCES

    phases = [DECODE, ALL, ALL, ALL, ALL, DECODE]
    launches = ["kernel", "none", "kernel", "unrecorded", None, "none"]
    kernels = pd.DataFrame(
        {
            "phase": pd.Categorical(phases, categories=list(PHASES)) if categorical else phases,
            "launch": pd.Categorical(launches, categories=list(LAUNCH_KINDS)) if categorical else launches,
            "step": np.full(len(phases), NO_STEP),
            "phase_source": pd.Categorical([SOURCE_NONE] * len(phases), categories=list(SOURCES)),
            "dur": np.ones(len(phases)),
        }
    )
    notes = phase_notes(kernels)
    assert "4 kernels have no phase signal (phase 'all'), 2 of them without a recorded launch" in notes


@pytest.fixture
def any_size_on_two_threads(monkeypatch):
    """Two analysis threads for a pair of any size (the serving pair is far below SECOND_THREAD_MIN_KERNELS)."""
    monkeypatch.setenv(ANALYSIS_THREADS, "2")
    monkeypatch.setattr("fusion.comparison.pair.SECOND_THREAD_MIN_KERNELS", 0)


def _second_thread_runs() -> bool:
    from fusion.comparison.pair import SECOND_THREAD

    return any(t.name.startswith(SECOND_THREAD) for t in threading.enumerate())


def test_an_error_before_the_groups_are_matched_ends_the_phases_thread(
    serving_pair, any_size_on_two_threads, monkeypatch
):
    """The phases' thread waits for the whole comparison's matched groups; when the whole comparison fails first,
    compare() raises that error and leaves no thread waiting."""
    import fusion.comparison.pair as pair

    def broken(*args, **kwargs):
        raise RuntimeError("grouping failed")

    monkeypatch.setattr(pair, "correlation_groups", broken)
    thread, errors = _compare_in_thread(serving_pair[2])
    assert not thread.is_alive()
    assert [str(e) for e in errors] == ["grouping failed"]
    assert not _second_thread_runs()


def test_an_error_in_the_phases_section_reaches_the_caller(serving_pair, any_size_on_two_threads, monkeypatch):
    """The phases' section is computed on its own thread: its error is raised by compare(), not lost."""
    import fusion.comparison.phases as phases

    def broken(*args, **kwargs):
        raise ValueError("phase view failed")

    monkeypatch.setattr(phases, "phase_view", broken)
    thread, errors = _compare_in_thread(serving_pair[2])
    assert not thread.is_alive()
    assert [str(e) for e in errors] == ["phase view failed"]


def test_the_phases_are_compared_beside_the_whole_comparison_or_after_it_alike(serving_pair, monkeypatch):
    """With two analysis threads and a pair of SECOND_THREAD_MIN_KERNELS or more, the phases' section is computed on
    a thread of its own while the whole comparison runs; with one thread, or a smaller pair, on the caller's thread
    after it. The comparison is the same."""
    kernels = sum(len(t.kernels) for t in serving_pair[2])

    def compared(threads: str, min_kernels: int) -> tuple[dict, set[bool]]:
        monkeypatch.setenv(ANALYSIS_THREADS, threads)
        monkeypatch.setattr("fusion.comparison.pair.SECOND_THREAD_MIN_KERNELS", min_kernels)
        beside: set[bool] = set()
        result = compare(*serving_pair[2], progress=lambda stage, fraction: beside.add(_second_thread_runs()))
        return result.to_dict(), beside

    runs = {(t, m): compared(t, m) for t, m in (("2", kernels), ("1", kernels), ("2", kernels + 1))}
    assert [beside for _, beside in runs.values()] == [{True}, {False}, {False}]
    dumps = {json.dumps(result, sort_keys=True) for result, _ in runs.values()}
    assert runs["2", kernels][0]["phases"]["per_phase"] and len(dumps) == 1


def test_a_batch_worker_compares_on_one_thread_unless_told(serving_pair, tmp_path, monkeypatch):
    """A pool worker's or Ray task's comparison runs on one thread (the pool runs one per core), unless
    FUSION_ANALYSIS_THREADS is set; its result is the pair's comparison either way."""
    from fusion.batch.run import BatchParams, _job, _run_pair_on_one_thread

    files, seen = serving_pair[1], []
    real = compare

    def watched(*args, **kwargs):
        kwargs["progress"] = lambda stage, fraction: seen.append(_second_thread_runs())
        return real(*args, **kwargs)

    monkeypatch.setattr("fusion.comparison.pair.compare", watched)
    monkeypatch.setattr("fusion.comparison.pair.SECOND_THREAD_MIN_KERNELS", 0)
    monkeypatch.setenv(ANALYSIS_THREADS, "2")  # recorded, so the worker's setting is undone after the test
    monkeypatch.delenv(ANALYSIS_THREADS)
    outcome = _run_pair_on_one_thread(_job(str(files[0]), str(files[1]), "one"), str(tmp_path / "one"), BatchParams())
    assert outcome.status == "ok" and seen and not any(seen)
    monkeypatch.setenv(ANALYSIS_THREADS, "2")
    seen.clear()
    outcome = _run_pair_on_one_thread(_job(str(files[0]), str(files[1]), "two"), str(tmp_path / "two"), BatchParams())
    assert outcome.status == "ok" and seen and all(seen)


@pytest.mark.parametrize("pair", ["serving_pair", "engine_pair"])
def test_a_phase_of_the_whole_comparison_finds_what_comparing_that_phase_alone_finds(pair, request):
    """Each phase's own comparison starts from the whole comparison's matched groups (where its view cuts none of
    them: the decode view keeps every graph, the prefill view none); its findings are those of comparing that
    phase alone, which groups and matches the phase's view anew."""
    _, _, traces = request.getfixturevalue(pair)
    whole = compare(*traces).to_dict()["phases"]["per_phase"]
    for phase in (PREFILL, DECODE):
        alone = compare(*traces, phase=phase).to_dict()
        section = whole[phase]
        assert section["fusion_mappings"]
        assert [_without_refs(m) for m in section["fusion_mappings"]] == [
            _without_refs(m) for m in alone["fusion_mappings"]
        ]
        assert section["fusion_opportunities"] == alone["fusion_opportunities"]
        assert section["comparability"]["level"] == alone["comparability"]["level"]


def _without_refs(mapping):
    return {k: v for k, v in mapping.items() if k != "evidence_refs"} | {"refs": len(mapping["evidence_refs"])}


def test_more_steps_of_the_same_workload_are_compared_per_step_not_called_another_workload(tmp_path):
    paths = write_serving_pair(tmp_path, ServingSpec(schedule1="PPPPDDD", schedule2="PDDD"))
    prefill = analyze_fusion_differences(*paths, phase=PREFILL)["comparability"]
    assert prefill["ok"] and prefill["level"] == "warn"
    assert prefill["warnings"] == [
        "step counts differ (4 vs 1): kernel counts are compared per step, and fusion"
        " opportunities only within matched groups, not over the whole traces"
    ]
    assert prefill["checks"]["GEMM_ratio"] == 1.0 and prefill["checks"]["per_step"]
    decode = analyze_fusion_differences(*paths, phase=DECODE)["comparability"]
    assert decode["level"] == "ok" and not decode["checks"]["per_step"] and decode["checks"]["steps1"] == 3


def test_whole_trace_counts_of_different_step_counts_make_no_fusion_opportunity(tmp_path):
    same = write_serving_pair(tmp_path / "same", ServingSpec(schedule1="PD", schedule2="PD", layers=12))
    longer = write_serving_pair(tmp_path / "longer", ServingSpec(schedule1="PPPPD", schedule2="PD", layers=12))
    assert analyze_fusion_differences(*same, phase=PREFILL)["fusion_opportunities"] == []
    assert analyze_fusion_differences(*longer, phase=PREFILL)["fusion_opportunities"] == []


def test_compare_a_phase_one_trace_lacks_is_bad_input(tmp_path, capsys):
    paths = write_serving_pair(tmp_path, ServingSpec(schedule1="PD", schedule2="D"))
    assert main(["compare", str(paths[0]), str(paths[1]), "--phase", "prefill", "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {paths[1]}: no prefill kernels; its phases: 1 decode step")


def test_mixed_steps_are_flagged_in_the_comparison(tmp_path):
    paths = write_serving_pair(tmp_path, ServingSpec(schedule1="PMD", schedule2="PD"))
    result = analyze_fusion_differences(*paths)
    assert any(note.startswith("trace 1: 1 mixed step (") for note in result["phases"]["notes"])


def test_generated_training_trace_has_forward_backward_optimizer_per_step(tmp_path):
    trace = load(write(tmp_path / "train.json", training_trace(steps=3)))
    table = phase_table(trace.kernels)
    assert table[["steps", "kernels"]].to_dict(orient="index") == training_truth(steps=3)


def test_summary_says_where_phases_came_from(serving_pair, capsys):
    _, paths, _ = serving_pair
    assert main(["summary", str(paths[1])]) == 0
    out = capsys.readouterr().out
    assert "decode           2       " in out and "vLLM execute annotation" in out


def test_the_loader_keeps_sglang_forward_frames_for_the_phase(tmp_path):
    frame = {"ph": "X", "cat": "python_function", "pid": 1, "tid": 2, "dur": 50.0, "args": {}}
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "dur": 2.0}
    events = [
        {**frame, "name": "sglang/srt/model_executor/model_runner.py(3003): forward_decode", "ts": 0.0},
        {**frame, "name": "sglang/srt/model_executor/model_runner.py(2968): forward_extend", "ts": 100.0},
        {**launch, "ts": 10.0, "args": {"correlation": 1}},
        {**launch, "ts": 110.0, "args": {"correlation": 2}},
        kernel_event("flash_fwd_splitkv_kernel", 20.0, 5.0, 1),
        kernel_event("flash_fwd_kernel", 120.0, 5.0, 2),
    ]
    trace = load(write_trace(tmp_path / "sglang.json", events))
    assert trace.kernels["phase"].tolist() == [DECODE, PREFILL]
    assert set(trace.kernels["phase_source"]) == {"SGLang forward function"}
