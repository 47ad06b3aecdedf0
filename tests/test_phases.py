"""Kernel -> phase and step: the evidence order on plain range tables, views, and the real traces."""

import numpy as np
import pandas as pd
import pytest

from builders import kineto_trace
from fusion.phases import (
    ALL, BACKWARD, DECODE, FORWARD, MIXED, OPTIMIZER, PHASES, PREFILL, SOURCE_GRAPH, SOURCE_NONE,
    SOURCE_TRAINING_FORWARD, assign_phases, describe, phase_notes, phase_table, phase_view,
)
from fusion.trace import load

MAIN, AUTOGRAD = 11, 12


def ranges(*rows):
    """(name, ts, dur[, tid]) rows; tid defaults to the main thread."""
    return pd.DataFrame([(r[0], float(r[1]), float(r[2]), r[3] if len(r) > 3 else MAIN) for r in rows],
                        columns=["name", "ts", "dur", "tid"])


def kernels(*launches):
    """(launch ts or None, thread[, launch kind]) per kernel."""
    return pd.DataFrame({
        "launch_ts": [np.nan if ts is None else float(ts) for ts, *_ in launches],
        "thread": [rest[0] if rest else MAIN for _, *rest in launches],
        "launch": [rest[1] if len(rest) > 1 else ("none" if ts is None else "kernel") for ts, *rest in launches],
        "dur": 1.0,
    })


def phased(table, cpu):
    return table.join(assign_phases(table, cpu))


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


def training_trace():
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
    result = phased(*training_trace())
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
    assert any("mixed steps" in note for note in phase_notes(result))


def test_phase_view_keeps_one_phase_renumbered_with_its_own_name_counts():
    trace = load(kineto_trace("AMD", steps=4))
    phases = [DECODE] * 6 + [PREFILL] * 6
    trace.kernels = trace.kernels.assign(phase=pd.Categorical(phases, categories=list(PHASES)),
                                         step=[0] * 3 + [1] * 3 + [2] * 3 + [3] * 3, phase_source=SOURCE_NONE)
    assert phase_view(trace, ALL) is trace
    view = phase_view(trace, DECODE)
    assert view.kernel_count == 6 and list(view.kernels.index) == list(range(6))
    assert view.kernels["name"].tolist() == trace.kernels["name"].tolist()[:6]
    assert view.names["count"].sum() == 6 and view.names["time_us"].sum() == pytest.approx(view.kernel_time_us)
    assert "phase decode only: 6 of 12 kernels in 2 steps" in view.warnings[-1]
    assert phase_view(trace, OPTIMIZER).kernel_count == 0
    with pytest.raises(ValueError, match="unknown phase"):
        phase_view(trace, "warmup")
