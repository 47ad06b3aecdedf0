"""Batch comparison: pairing, per-pair results, the summary tables, re-runs, failures, and both engines."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import orjson
import pandas as pd
import pytest
from builders import BATCH_RANKS as RANKS
from builders import FUSED_SAMPLE as FUSED
from builders import Capture, Captured, EagerTrace, Graph, Op, kineto_trace, write_trace

from fusion.__main__ import main
from fusion.batch import run as batch
from fusion.batch.results import BatchError, read_batch


@pytest.fixture(scope="module")
def local_run(rank_dirs, tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    out = tmp_path_factory.mktemp("batch-local")
    jobs = batch.jobs_from_directories(*rank_dirs)
    return out, batch.run_batch(jobs, out, engine="local", workers=2)


def test_directories_pair_by_rank_in_the_file_names(rank_dirs):
    jobs = batch.jobs_from_directories(*rank_dirs)
    assert [(j.label, j.rank) for j in jobs] == [(f"rank{r}", r) for r in range(RANKS)]
    assert all(Path(j.trace1).name == f"trace_rank{j.rank}.json.gz" for j in jobs)
    assert all(Path(j.trace2).name == f"trace-rank-{j.rank}.json.gz" for j in jobs)


def test_directories_pair_by_recorded_rank_when_names_have_none(tmp_path):
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        for rank, name in ((0, "first.json"), (1, "second.json")):
            write_trace(tmp_path / side / f"{side}{name}", [], distributedInfo={"rank": 1 - rank})
    jobs = batch.jobs_from_directories(tmp_path / "a", tmp_path / "b")
    assert [(j.rank, Path(j.trace1).name, Path(j.trace2).name) for j in jobs] == [
        (0, "asecond.json", "bsecond.json"),
        (1, "afirst.json", "bfirst.json"),
    ]


def test_directories_pair_by_name(tmp_path):
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        for name in ("llama.json", "qwen.json"):
            (tmp_path / side / name).write_bytes(kineto_trace())
    (tmp_path / "a" / "only_here.json").write_bytes(kineto_trace())
    jobs = batch.jobs_from_directories(tmp_path / "a", tmp_path / "b", pair_by="name")
    assert [j.label for j in jobs] == ["llama.json", "qwen.json"]
    assert batch.unpaired(tmp_path / "a", tmp_path / "b", jobs) == [str(tmp_path / "a" / "only_here.json")]


def test_manifest_rows_resolve_relative_paths_and_name_ranks(tmp_path):
    manifest = tmp_path / "pairs.csv"
    manifest.write_text(
        "trace1,trace2,label\nx/amd.json,/abs/nv.json,llama-tp8/rank3\ns3://b/a.json.gz,gs://b/n.json,\n"
    )
    jobs = batch.jobs_from_manifest(manifest)
    assert jobs[0] == batch.Job(str(tmp_path / "x/amd.json"), "/abs/nv.json", "llama-tp8/rank3", "llama-tp8", 3)
    assert (jobs[1].trace1, jobs[1].trace2, jobs[1].label) == ("s3://b/a.json.gz", "gs://b/n.json", "a vs n")


def test_a_manifest_capture_column_ties_the_replays(tmp_path):
    builder = EagerTrace("AMD", gpu="AMD Instinct MI300X")
    builder.run(*[Graph(["gemm_kernel"]) for _ in range(3)])
    (tmp_path / "exec.json").write_bytes(builder.data())
    capture = EagerTrace("AMD")
    dims = {"Input Dims": [[32, 1024], [1024, 1024], []], "Input type": ["c10::BFloat16"] * 2 + [""]}
    capture.run(Capture([Op("aten::linear", [Captured("gemm_kernel")], args=dims)]))
    (tmp_path / "cap.json").write_bytes(capture.data())
    manifest = tmp_path / "pairs.csv"
    manifest.write_text("trace1,trace2,label,capture1,capture2\nexec.json,exec.json,p,cap.json,\n")
    jobs = batch.jobs_from_manifest(manifest)
    assert (jobs[0].capture1, jobs[0].capture2) == ((str(tmp_path / "cap.json"),), ())
    summary = batch.run_batch(jobs, tmp_path / "out", engine="local", workers=1)
    result = orjson.loads(Path(summary["result_file"].iloc[0]).read_bytes())
    assert result["metadata"]["trace1_capture"]["tied_with_input_dims"] == 3
    assert "trace2_capture" not in result["metadata"] and result["batch"]["capture1"] == [str(tmp_path / "cap.json")]
    assert result["op_efficiency"]["coverage"][0]["rated_calls"] == 3


def test_each_pair_gets_its_compare_result_and_summary_rows(local_run, rank_dirs):
    out, summary = local_run
    assert set(summary["status"]) == {"ok"}
    assert sorted(summary["rank"].unique()) == list(range(RANKS))
    rank0 = summary[summary["rank"] == 0].set_index(["kernel_type", "side"])
    result = pd.read_json(summary.loc[summary["rank"] == 0, "result_file"].iloc[0], typ="series")
    stats = pd.DataFrame(result["type_stats"]).set_index("kernel_type")
    for kernel_type, row in stats.iterrows():
        assert rank0.loc[(kernel_type, 1), "count"] == row["trace1_count"]
        assert rank0.loc[(kernel_type, 2), "time_us"] == pytest.approx(row["trace2_time_us"])
    assert rank0["fused_findings"].sum() == len(result["fusion_mappings"]) > 0
    assert (out / batch.SUMMARY_FILE).exists() and (out / batch.FINDINGS_FILE).exists()
    pd.testing.assert_frame_equal(pd.read_parquet(out / batch.SUMMARY_FILE), summary)


def test_findings_say_on_which_ranks_they_hold(local_run):
    out, _ = local_run
    findings = pd.read_parquet(out / batch.FINDINGS_FILE)
    assert len(findings) > 0
    assert set(findings["rank"]) == {0, 1, 2}
    assert set(findings["ranks_with"]) == {3} and set(findings["ranks_in_group"]) == {RANKS}
    assert set(findings["holds_on"]) == {"some ranks"}


def test_rerun_skips_pairs_already_done_with_the_same_numbers(local_run, rank_dirs, tmp_path):
    first = local_run[1]
    out = shutil.copytree(local_run[0], tmp_path / "again")
    again = batch.run_batch(batch.jobs_from_directories(*rank_dirs), out, engine="local", workers=1)
    assert set(again["status"]) == {"skipped"}
    columns = ["label", "kernel_type", "side", "count", "time_us", "fused_findings"]
    pd.testing.assert_frame_equal(again[columns], first[columns])


def test_changed_parameters_recompute(local_run, rank_dirs, tmp_path):
    out = shutil.copytree(local_run[0], tmp_path / "again")
    jobs = batch.jobs_from_directories(*rank_dirs)[:1]
    again = batch.run_batch(jobs, out, engine="local", params=batch.BatchParams(min_group_size=40), workers=1)
    assert set(again["status"]) == {"ok"}


def test_a_failing_pair_is_recorded_and_the_batch_goes_on(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"traceEvents": [{"cat": "kernel",')
    manifest = tmp_path / "pairs.csv"
    manifest.write_text(
        f"{FUSED / 'amd.json.gz'},{FUSED / 'nvidia.json.gz'},good\n{broken},{FUSED / 'nvidia.json.gz'},bad\n"
    )
    summary = batch.run_batch(batch.jobs_from_manifest(manifest), tmp_path / "out", workers=2)
    statuses = summary.groupby("label")["status"].first()
    assert statuses.to_dict() == {"bad": "error", "good": "ok"}
    message = summary.loc[summary["label"] == "bad", "message"].iloc[0]
    assert message.startswith(f"{broken}: ") and "\n" not in message


def test_cli_batch_of_directories(rank_dirs, tmp_path, capsys):
    assert main(["batch", *map(str, rank_dirs), "-o", str(tmp_path / "out"), "--workers", "1"]) == 0
    captured = capsys.readouterr()
    assert f"{RANKS} pairs, 0 failed" in captured.out
    assert captured.err.count("\n") == RANKS and "[4/4]" in captured.err


def test_cli_batch_failure_exits_2_with_one_line_per_failed_pair(tmp_path, capsys):
    manifest = tmp_path / "pairs.csv"
    manifest.write_text(f"{tmp_path / 'missing.json'},{FUSED / 'nvidia.json.gz'},lost\n")
    assert main(["batch", "--manifest", str(manifest), "-o", str(tmp_path / "out")]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert errors == [f"error: lost: {tmp_path / 'missing.json'}: no such file"]


def test_cli_batch_needs_a_manifest_or_two_directories(tmp_path, capsys):
    assert main(["batch", str(tmp_path), "-o", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip() == "error: give either --manifest CSV or two directories"


def test_ray_memory_per_task_follows_the_traces(rank_dirs):
    job = batch.jobs_from_directories(*rank_dirs)[0]
    json_bytes = sum(batch.json_bytes(t) for t in (job.trace1, job.trace2))
    assert json_bytes > os.path.getsize(job.trace1) + os.path.getsize(job.trace2)
    assert batch.task_memory(job) == batch.TASK_BASE_BYTES + int(batch.TASK_BYTES_PER_JSON_BYTE * json_bytes)


def test_ray_engine_gives_the_same_summary(local_run, rank_dirs, tmp_path):
    try:
        import ray  # noqa: F401  (an optional extra: requirements-ray.txt)
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("Ray is not installed (pip install -r requirements-ray.txt)")
    _, local = local_run
    on_ray = batch.run_batch(batch.jobs_from_directories(*rank_dirs), tmp_path / "ray", engine="ray")
    columns = ["label", "rank", "status", "kernel_type", "side", "count", "time_us", "fused_findings"]
    pd.testing.assert_frame_equal(on_ray[columns], local[columns])
    findings = [
        pd.read_parquet(d / batch.FINDINGS_FILE).drop(columns=["result_file"]) for d in (local_run[0], tmp_path / "ray")
    ]
    pd.testing.assert_frame_equal(*findings)


# ---- reading a batch result back (the dashboard's Batch page) -------------------------------------


def test_a_batch_folder_reads_back_as_its_record_and_tables(local_run, rank_dirs):
    out, summary = local_run
    result = read_batch(out)
    assert [(p.index, p.label, p.rank, p.status) for p in result.record.pairs] == [
        (r, f"rank{r}", r, "ok") for r in range(RANKS)
    ]
    assert all(Path(p.trace1).is_absolute() and Path(p.trace1).parent == rank_dirs[0] for p in result.record.pairs)
    assert result.record.min_group_size == batch.BatchParams().min_group_size and result.record.failures == 0
    pd.testing.assert_frame_equal(result.summary, summary)
    assert set(result.findings["holds_on"]) == {"some ranks"}


def test_relative_directories_are_recorded_as_absolute_paths(rank_dirs, monkeypatch):
    monkeypatch.chdir(rank_dirs[0].parent)
    jobs = batch.jobs_from_directories(rank_dirs[0].name, rank_dirs[1].name)
    assert [Path(j.trace2) for j in jobs] == [rank_dirs[1] / f"trace-rank-{r}.json.gz" for r in range(RANKS)]


def _damage_record(folder: Path) -> None:
    (folder / batch.BATCH_FILE).write_text('{"format": 1, "params": {"min_group_size": 50}, "pairs": [{"label": 3}]}')


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda f: (f / batch.BATCH_FILE).unlink(), "no batch.json"),
        (lambda f: (f / batch.BATCH_FILE).write_text("{not json"), "batch.json cannot be read"),
        (lambda f: (f / batch.BATCH_FILE).write_text('{"format": 99, "pairs": []}'), "format 99"),
        (_damage_record, "pair 0: label is missing or not text"),
        (lambda f: (f / batch.SUMMARY_FILE).write_bytes(b"PAR1 truncated"), "summary.parquet cannot be read"),
        (lambda f: (f / batch.FINDINGS_FILE).unlink(), "no findings.parquet"),
        (
            lambda f: pd.DataFrame({"label": ["x"]}).to_parquet(f / batch.FINDINGS_FILE),
            "findings.parquet lacks the column(s)",
        ),
    ],
)
def test_a_damaged_batch_folder_gives_one_message_naming_it(local_run, tmp_path, damage, problem):
    folder = shutil.copytree(local_run[0], tmp_path / "damaged")
    damage(folder)
    with pytest.raises(BatchError) as caught:
        read_batch(folder)
    message = str(caught.value)
    assert message.startswith(f"{folder}: ") and problem in message and "\n" not in message


def test_a_folder_that_is_not_there_is_named(tmp_path):
    with pytest.raises(BatchError, match="not a folder"):
        read_batch(tmp_path / "missing")


def test_a_trace_changed_since_the_batch_ran_is_flagged_on_its_pair(rank_dirs, tmp_path):
    from ui.batch import AS_COMPARED, pair_table

    copies = [shutil.copytree(d, tmp_path / d.name) for d in rank_dirs]
    out = tmp_path / "out"
    batch.run_batch(batch.jobs_from_directories(*copies), out, workers=1)
    pairs = read_batch(out).record.pairs
    assert all(p.stamps[0] is not None and p.changed_sides() == [] for p in pairs)
    (copies[1] / "trace-rank-1.json.gz").write_bytes((copies[1] / "trace-rank-0.json.gz").read_bytes() + b"\n")
    (copies[0] / "trace_rank2.json.gz").unlink()
    states = pair_table(read_batch(out))["trace files"].tolist()
    assert states == [
        AS_COMPARED,
        "trace 2 changed since the batch ran",
        "trace 1 changed since the batch ran",
        AS_COMPARED,
    ]


def test_a_record_without_stamps_reads_as_unchanged(local_run, tmp_path):
    folder = shutil.copytree(local_run[0], tmp_path / "old")
    record = orjson.loads((folder / batch.BATCH_FILE).read_bytes())
    for pair in record["pairs"]:
        del pair["stamps"]
    (folder / batch.BATCH_FILE).write_bytes(orjson.dumps(record))
    assert [p.changed_sides() for p in read_batch(folder).record.pairs] == [[]] * RANKS
