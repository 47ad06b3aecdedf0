"""The formats beside Kineto: rocprofv3 JSON and CSV, Nsight Systems SQLite; told apart by content; one GPU each."""

from __future__ import annotations

import gzip
import sqlite3

import numpy as np
import pandas as pd
import pytest
from builders import EagerTrace, Launch, Op, shared_trace
from format_builders import COPY_DTOD, DEVICE_TO_DEVICE, MEMORY_DEVICE, NsysExport, RocprofRun

from fusion.__main__ import main
from fusion.classify.trace import load
from fusion.comparison.pair import compare
from fusion.errors import TraceError
from fusion.loader import json_walk, reader
from fusion.loader.formats import KINETO, ROCPROF_CSV, ROCPROF_JSON, SQLITE, sniff

GEMM = "_ZN7ck_tile6kentryILi2ENS_10GemmKernelEEEvv.kd"
ELEMENTWISE = "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5arrayIPcLm3EEEEviT0_T1_.kd"
FILL = "__amd_rocclr_fillBufferAligned.kd"


def rocprof_run() -> RocprofRun:
    """Two eager launches, a graph replay of three kernels, a blit fill, a copy and a roctx step range."""
    run = RocprofRun()
    run.marker("execute_context_0(0)_generation_4(4)", 0, 90_000)
    run.launch(GEMM, cpu=1_000, gpu=10_000, dur=8_000)
    run.launch(ELEMENTWISE, cpu=4_000, gpu=20_000, dur=2_000)
    run.graph([GEMM, ELEMENTWISE, GEMM], cpu=6_000, gpu=30_000, dur=3_000)
    run.launch(FILL, cpu=8_000, gpu=50_000, dur=1_000)
    run.copy(DEVICE_TO_DEVICE, 60_000, 4_000, src=100, dst=100)
    return run


def test_rocprof_json_kernels_launches_graph_copies_and_gpu() -> None:
    trace = load(rocprof_run().data(), name="run.json")
    kernels = trace.kernels
    assert (trace.format, trace.platform, trace.gpu, trace.gpu_recorded) == (
        "rocprofv3 JSON",
        "AMD",
        "AMD Instinct MI350X (gfx950)",
        True,
    )
    assert list(kernels["name"]) == [
        "void ck_tile::kentry<2, ck_tile::GemmKernel>()",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
        "void ck_tile::kentry<2, ck_tile::GemmKernel>()",
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
        "void ck_tile::kentry<2, ck_tile::GemmKernel>()",
        "__amd_rocclr_fillBufferAligned",
        "Memcpy DtoD (Device -> Device)",
    ]
    assert kernels["ts"].tolist()[:2] == [10.0, 20.0] and kernels["dur"].tolist()[0] == 8.0
    assert list(kernels["launch"]) == ["kernel", "kernel", "graph", "graph", "graph", "kernel", "kernel"]
    assert kernels.loc[kernels["launch"] == "graph", "correlation"].nunique() == 1
    assert list(kernels["type"]) == ["GEMM", "Elementwise", "GEMM", "Elementwise", "GEMM", "Memset", "MemCopy"]
    assert set(kernels["phase"]) == {"decode"} and set(kernels["phase_source"]) == {"vLLM execute annotation"}
    names = trace.names
    assert names.at["void ck_tile::kentry<2, ck_tile::GemmKernel>()", "raw_name"] == GEMM
    assert names.at["__amd_rocclr_fillBufferAligned", "raw_name"] == FILL
    assert names.at["Memcpy DtoD (Device -> Device)", "gpu_work"] == "memcpy"
    assert names.at["__amd_rocclr_fillBufferAligned", "gpu_work"] == "kernel"
    assert [w for w in trace.warnings if "op records" in w] == [
        "this trace has no op records (cpu_op events): kernels are tied to their runtime launches only, so no "
        "kernel has an op and there are no op-level findings"
    ]


def test_rocprof_json_without_hip_trace_says_it_has_no_op_records() -> None:
    run = RocprofRun()
    run.dispatch(GEMM, 10_000, 5_000, correlation=1)
    trace = load(run.data())
    assert list(trace.kernels["launch"]) == ["unrecorded"]
    assert trace.warnings == [
        "this trace has no op records and no runtime launches (GPU activity only), so no kernel has an op and "
        "there are no op-level findings"
    ]


@pytest.mark.parametrize("piece_size", [64, 500, 1 << 20])
@pytest.mark.parametrize("read_size", [7, 100, 8 << 20])
def test_rocprof_json_streams_to_the_same_table_in_any_pieces(monkeypatch, piece_size: int, read_size: int) -> None:
    data = gzip.compress(rocprof_run().data())
    whole = load(data).kernels
    monkeypatch.setattr(json_walk, "PIECE_SIZE", piece_size)
    monkeypatch.setattr(reader, "READ_SIZE", read_size)
    pd.testing.assert_frame_equal(load(data).kernels, whole)


def test_rocprof_json_multi_gpu_takes_the_busiest_and_device_chooses() -> None:
    run = RocprofRun(agents=[(100, 0, "AMD Instinct MI350X", "gfx950"), (101, 1, "AMD Instinct MI355X", "gfx950")])
    run.launch(GEMM, cpu=1_000, gpu=10_000, dur=2_000, agent=100)
    run.launch(GEMM, cpu=2_000, gpu=10_000, dur=9_000, agent=101)
    run.launch(ELEMENTWISE, cpu=3_000, gpu=20_000, dur=1_000, agent=101)
    data = run.data()
    busiest = load(data)
    assert (busiest.kernel_count, busiest.gpu) == (2, "AMD Instinct MI355X (gfx950)")
    assert set(busiest.kernels["device"]) == {1}
    note = next(w for w in busiest.warnings if "GPUs" in w)
    assert note.startswith("the file records kernels of 2 GPUs (devices 0, 1); this trace is device 1, the one with")
    assert "--device N" in note
    first = load(data, device=0)
    assert (first.kernel_count, first.gpu, set(first.kernels["device"])) == (1, "AMD Instinct MI350X (gfx950)", {0})
    assert first.digest != busiest.digest == load(data, device=1).digest
    with pytest.raises(TraceError) as caught:
        load(data, name="node.json", device=5)
    assert str(caught.value) == "node.json: no kernels on device 5; its devices with kernels: 0, 1"


def test_truncated_rocprof_json_is_one_clear_error() -> None:
    data = rocprof_run().data()
    with pytest.raises(TraceError) as caught:
        load(data[: len(data) // 2], name="cut.json")
    message = str(caught.value)
    assert message.startswith("cut.json: truncated: the file ends inside rocprofiler-sdk-tool.0.")
    assert message.endswith("before the JSON document closes")


def test_rocprof_json_wrong_field_type_names_the_entry() -> None:
    data = rocprof_run().data().replace(b'"start_timestamp":20000', b'"start_timestamp":"late"', 1)
    with pytest.raises(TraceError) as caught:
        load(data, name="bad.json")
    assert str(caught.value).startswith("bad.json: rocprofv3 buffer_records/kernel_dispatch entry 1 cannot be read")


def test_rocprof_csv_with_its_siblings_reads_as_the_json(tmp_path) -> None:
    run = rocprof_run()
    from_json = load(run.data())
    kernel_csv = run.write_csv(tmp_path)
    from_csv = load(kernel_csv)
    assert (from_csv.format, from_csv.gpu) == ("rocprofv3 CSV", "AMD Instinct MI350X (gfx950)")
    columns = ["name", "ts", "dur", "correlation", "device", "type", "launch", "phase"]
    pd.testing.assert_frame_equal(from_csv.kernels[columns], from_json.kernels[columns], check_categorical=False)


def test_rocprof_csv_alone_has_no_launches_and_says_so(tmp_path) -> None:
    kernel_csv = rocprof_run().write_csv(tmp_path, siblings=False)
    trace = load(kernel_csv)
    assert trace.kernel_count == 6 and set(trace.kernels["launch"]) == {"unrecorded"}
    assert any("no hip_api_trace.csv beside it" in w for w in trace.warnings)
    assert load(kernel_csv.read_bytes(), name="upload.csv").kernel_count == 6


def nsys_export() -> NsysExport:
    export = NsysExport()
    export.range("ProfilerStep#3", 0, 100_000)
    export.launch("ampere_sgemm_128x64_tn", cpu=1_000, gpu=10_000, dur=8_000)
    export.graph(
        ["flash_fwd_kernel", "void at::native::vectorized_elementwise_kernel<4>"], cpu=5_000, gpu=20_000, dur=2_000
    )
    export.copy(40_000, 3_000)
    export.copy(45_000, 1_000, kind=COPY_DTOD, src=MEMORY_DEVICE, dst=MEMORY_DEVICE)
    export.memset(50_000, 500)
    return export


def test_nsys_sqlite_kernels_launches_graph_nvtx_and_gpu(tmp_path) -> None:
    path = nsys_export().write(tmp_path / "report.sqlite")
    trace = load(path)
    kernels = trace.kernels
    assert (trace.format, trace.platform, trace.gpu) == ("Nsight Systems SQLite", "NVIDIA", "NVIDIA H100 80GB HBM3")
    assert list(kernels["name"]) == [
        "ampere_sgemm_128x64_tn",
        "flash_fwd_kernel",
        "void at::native::vectorized_elementwise_kernel<4>",
        "Memcpy HtoD (Pinned -> Device)",
        "Memcpy DtoD (Device -> Device)",
        "Memset (Device)",
    ]
    assert list(kernels["launch"]) == ["kernel", "graph", "graph", "kernel", "kernel", "kernel"]
    assert list(kernels["type"]) == ["GEMM", "Attention", "Elementwise", "MemCopy", "MemCopy", "Memset"]
    assert set(kernels["step"]) == {3} and kernels["thread"].tolist()[0] == 4243
    assert kernels["ts"].tolist()[0] == 10.0 and kernels["dur"].tolist()[0] == 8.0
    assert trace.names.at["ampere_sgemm_128x64_tn", "raw_name"] == "_Z22ampere_sgemm_128x64_tnv"
    assert list(trace.names.loc[["Memset (Device)", "flash_fwd_kernel"], "gpu_work"]) == ["memset", "kernel"]
    assert any("no op records" in w for w in trace.warnings)


def test_nsys_graph_replays_recorded_whole_are_named_missing(tmp_path) -> None:
    export = nsys_export()
    export.whole_graph(70_000, 9_000)
    trace = load(export.write(tmp_path / "graphs.sqlite"))
    assert any(w.startswith("1 CUDA graph replays are recorded as whole graphs") for w in trace.warnings)


def test_nsys_export_with_only_the_lazy_minimum(tmp_path) -> None:
    """Tables are created lazily: kernels and strings alone are a trace (no launches, no GPU name)."""
    path = nsys_export().write(tmp_path / "min.sqlite", tables=("StringIds", "CUPTI_ACTIVITY_KIND_KERNEL"))
    trace = load(path)
    assert trace.kernel_count == 3 and trace.gpu == "NVIDIA GPU, name not recorded"
    assert set(trace.kernels["launch"]) == {"unrecorded"}


def test_nsys_multi_gpu_and_bytes_upload(tmp_path) -> None:
    export = NsysExport(gpus=[(0, "NVIDIA H100 80GB HBM3"), (1, "NVIDIA H200")])
    export.launch("ampere_sgemm_128x64_tn", cpu=1_000, gpu=10_000, dur=1_000, device=0)
    export.launch("ampere_sgemm_128x64_tn", cpu=2_000, gpu=10_000, dur=5_000, device=1)
    path = export.write(tmp_path / "node.sqlite")
    assert load(path).gpu == "NVIDIA H200"
    assert load(path.read_bytes(), name="node.sqlite", device=0).gpu == "NVIDIA H100 80GB HBM3"
    assert load(gzip.compress(path.read_bytes()), device=0).kernel_count == 1


def test_sqlite_that_is_no_nsys_export_truncated_or_rocpd_is_one_line(tmp_path) -> None:
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE results (x INTEGER)")
    db.close()
    with pytest.raises(TraceError, match=r"no Nsight Systems export \(no StringIds table; its tables: results\)"):
        load(other)
    rocpd = tmp_path / "results.db"
    with sqlite3.connect(rocpd) as db:
        db.execute("CREATE TABLE rocpd_kernel_dispatch_0123 (id INTEGER)")
    db.close()
    with pytest.raises(TraceError, match="a rocpd database .* is not read yet"):
        load(rocpd)
    full = nsys_export().write(tmp_path / "full.sqlite").read_bytes()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(full[: len(full) // 2])
    with pytest.raises(TraceError, match="cut.sqlite: the SQLite file cannot be read"):
        load(cut)


def test_format_is_told_by_content_not_by_name(tmp_path) -> None:
    sqlite_named_json = nsys_export().write(tmp_path / "trace.json")
    assert load(sqlite_named_json).format == "Nsight Systems SQLite"
    rocprof_named_sqlite = tmp_path / "trace.sqlite"
    rocprof_named_sqlite.write_bytes(rocprof_run().data())
    assert load(rocprof_named_sqlite).format == "rocprofv3 JSON"
    assert sniff(b"SQLite format 3\x00...") == SQLITE
    assert sniff(b' \n{ "rocprofiler-sdk-tool": [') == ROCPROF_JSON
    assert sniff(b'{"schemaVersion": 1, "traceEvents": [') == KINETO
    assert sniff(b'"Kind","Agent_Id","Kernel_Name","Start_Timestamp","End_Timestamp"\n') == ROCPROF_CSV


def test_nsys_report_itself_gets_the_export_command(tmp_path) -> None:
    report = tmp_path / "run.nsys-rep"
    report.write_bytes(b"\x00\x01NSYS binary report")
    with pytest.raises(TraceError, match=r"run.nsys-rep: an Nsight Systems report .* `nsys export --type sqlite"):
        load(report)


def test_cross_format_pair_compares_like_any_pair(tmp_path) -> None:
    """A rocprofv3 trace against an nsys export of the same work: the same types pair up."""
    run, export = RocprofRun(), NsysExport()
    for step in range(60):
        run.launch("Cijk_Alik_Bljk_HHS_BH_MT128x128x32.kd", cpu=step * 50_000, gpu=step * 50_000 + 5_000, dur=8_000)
        run.launch(ELEMENTWISE, cpu=step * 50_000 + 2_000, gpu=step * 50_000 + 15_000, dur=2_000)
        export.launch("sm90_xmma_gemm_f16f16_f32", cpu=step * 50_000, gpu=step * 50_000 + 5_000, dur=6_000)
        export.launch(
            "void at::native::vectorized_elementwise_kernel<4>",
            cpu=step * 50_000 + 2_000,
            gpu=step * 50_000 + 15_000,
            dur=2_000,
        )
    comparison = compare(load(run.data()), load(export.write(tmp_path / "h100.sqlite")))
    table = comparison.type_stats
    assert table.loc["GEMM", ["trace1_count", "trace2_count"]].tolist() == [60, 60]
    assert table.loc["Elementwise", ["trace1_count", "trace2_count"]].tolist() == [60, 60]


def test_cli_summary_and_compare_take_device(tmp_path, capsys) -> None:
    run = RocprofRun(agents=[(100, 0, "AMD Instinct MI350X", "gfx950"), (101, 1, "AMD Instinct MI350X", "gfx950")])
    run.launch(GEMM, cpu=1_000, gpu=10_000, dur=2_000, agent=100)
    run.launch(GEMM, cpu=2_000, gpu=10_000, dur=9_000, agent=101)
    path = tmp_path / "node.json"
    path.write_bytes(run.data())
    assert main(["summary", str(path), "--device", "0", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert '"kernels": 1' in out and "device 0, as chosen" in err
    assert main(["compare", str(path), str(path), "--device", "0", "1", "--format", "json", "--no-cache"]) == 0
    assert main(["summary", str(path), "--device", "3"]) == 2
    assert capsys.readouterr().err.endswith("no kernels on device 3; its devices with kernels: 0, 1\n")


def test_old_kineto_categories_give_ops_and_steps() -> None:
    """PyTorch 1.8-era files: Operator / Runtime / Kernel / Memcpy / Memset, ProfilerStep#N as an Operator, string tids."""
    events = [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#5", "pid": 13721, "tid": "456", "ts": 50, "dur": 400},
        {"ph": "X", "cat": "Operator", "name": "aten::addmm", "pid": 13721, "tid": "456", "ts": 100, "dur": 100},
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaLaunchKernel",
            "pid": 13721,
            "tid": "456",
            "ts": 120,
            "dur": 5,
            "args": {"correlation": 7},
        },
        {
            "ph": "X",
            "cat": "Kernel",
            "name": "volta_sgemm_128x64_nn",
            "pid": 0,
            "tid": "stream 7",
            "ts": 130,
            "dur": 15,
            "args": {"correlation": 7, "device": 0, "stream": 7},
        },
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaMemsetAsync",
            "pid": 13721,
            "tid": "456",
            "ts": 150,
            "dur": 5,
            "args": {"correlation": 8},
        },
        {
            "ph": "X",
            "cat": "Memset",
            "name": "Memset (Device)",
            "pid": 0,
            "tid": "stream 7",
            "ts": 160,
            "dur": 2,
            "args": {"correlation": 8, "stream": 7},
        },
        {
            "ph": "X",
            "cat": "Runtime",
            "name": "cudaMemcpyAsync",
            "pid": 13721,
            "tid": "456",
            "ts": 180,
            "dur": 5,
            "args": {"correlation": 9},
        },
        {
            "ph": "X",
            "cat": "Memcpy",
            "name": "Memcpy HtoD (Pageable -> Device)",
            "pid": 0,
            "tid": "stream 7",
            "ts": 190,
            "dur": 3,
            "args": {"correlation": 9, "stream": 7},
        },
    ]
    import orjson

    trace = load(orjson.dumps({"schemaVersion": 1, "traceEvents": events}))
    kernels = trace.kernels
    assert list(kernels["type"]) == ["GEMM", "Memset", "MemCopy"]
    assert set(kernels["op"]) == {"aten::addmm"} and set(kernels["op_top"]) == {"aten::addmm"}
    assert set(kernels["step"]) == {5}
    assert not any("op records" in w or "tied" in w for w in trace.warnings)


def test_a_cpu_side_that_cannot_be_linked_gets_one_warning() -> None:
    trace = EagerTrace()
    trace.run(Op("aten::mm", [Launch("gemm_kernel")]))
    data = trace.data().replace(b'"correlation":', b'"correlation_":')
    warnings = [w for w in load(data).warnings if "no kernel has an op" in w]
    assert len(warnings) == 1 and "no runtime launch" in warnings[0]


def test_kineto_memsets_and_copies_count_as_gpu_work() -> None:
    trace = load(shared_trace("tl_h100_qwen1.5-0.5b"))
    names = trace.names
    memsets = names[(names["gpu_work"] == "memset").to_numpy()]
    assert memsets.index.tolist() == ["Memset (Device)"] and int(memsets["count"].iloc[0]) == 241
    rows = trace.kernels[(trace.kernels["name"] == "Memset (Device)").to_numpy()]
    assert set(rows["type"]) == {"Memset"} and (rows["op"] != "").mean() > 0.5
    assert np.isclose(trace.kernel_time_us, names["time_us"].sum())


def test_shared_rocprofv3_trace_done_when() -> None:
    """Issue 37: 43,915 kernels, the MI350X, kernel time per type from the names file, >= 95% classified."""
    path = shared_trace("tl_rocprofv3_mi3xx_train")
    trace = load(path)
    assert (trace.kernel_count, trace.gpu, trace.format) == (43_915, "AMD Instinct MI350X (gfx950)", "rocprofv3 JSON")
    listed = pd.read_csv(
        path.parent / "kernel_names.txt", sep="\t", header=None, names=["count", "time_us", "raw"], quoting=3
    )
    by_raw = trace.names.set_index("raw_name")
    assert by_raw.loc[listed["raw"], "count"].tolist() == listed["count"].tolist()
    assert np.allclose(by_raw.loc[listed["raw"], "time_us"].to_numpy(), listed["time_us"].to_numpy(), atol=0.002)
    typed = trace.kernels.groupby("type", observed=True)["dur"].sum()
    assert typed.get("Other", 0.0) / typed.sum() < 0.05
    assert typed["Communication"] == pytest.approx(
        listed.loc[listed["raw"].str.startswith("_Z23ncclDevKernel"), "time_us"].sum()
    )


def _kineto_of_size(kernels: pd.DataFrame, size: int) -> bytes:
    """A Kineto trace of these kernels (a runtime launch each), padded with python_function events the loader
    drops to `size` bytes of JSON."""
    import orjson

    events = []
    for i, (name, ts, dur) in enumerate(zip(kernels["name"].astype(str), kernels["ts"], kernels["dur"])):
        args = {"correlation": i, "stream": 7, "device": 0}
        events.append(
            {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur, "args": args}
        )
        launch = {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "hipLaunchKernel",
            "pid": 1,
            "tid": 1,
            "ts": ts - 5,
            "dur": 2,
        }
        events.append({**launch, "args": {"correlation": i}})
    pad = {"ph": "X", "cat": "python_function", "name": "train.py(12): step", "pid": 1, "tid": 1, "ts": 1.0, "dur": 1.0}
    short = size - len(orjson.dumps({"traceEvents": events}))
    events += [pad] * max(0, short // (len(orjson.dumps(pad)) + 1))
    return orjson.dumps({"traceEvents": events})


def _peak_bytes(source) -> int:
    import tracemalloc

    from fusion.model.build import read

    read(source)  # imports and compiled code loaded: only the read itself is measured
    tracemalloc.start()
    try:
        read(source)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_shared_rocprofv3_trace_reads_streamed_within_a_kineto_traces_memory(tmp_path) -> None:
    """The 37 MB rocprofv3 file is read in pieces: its peak stays within that of a Kineto trace of its size and
    kernels (bench/formats.py measures the same at 20x the size, in fresh processes)."""
    path = shared_trace("tl_rocprofv3_mi3xx_train")
    size = len(gzip.decompress(path.read_bytes()))
    kineto = tmp_path / "kineto.json.gz"
    kineto.write_bytes(gzip.compress(_kineto_of_size(load(path).kernels, size), 1))
    assert abs(len(gzip.decompress(kineto.read_bytes())) - size) < size // 100
    rocprof_peak, kineto_peak = _peak_bytes(path), _peak_bytes(kineto)
    assert rocprof_peak <= kineto_peak
    assert rocprof_peak < 3 * size


def test_graph_replays_launched_outside_every_op_get_their_own_warning() -> None:
    from builders import Graph

    trace = EagerTrace()
    trace.run(Op("aten::zeros", []), Graph(["g0", "g1", "g2"]))
    warnings = [w for w in load(trace.data()).warnings if "no kernel has an op" in w]
    assert warnings == [
        "every launched kernel runs in a graph replay, whose launch lies outside every recorded op, so no kernel "
        "has an op and there are no op-level findings"
    ]
