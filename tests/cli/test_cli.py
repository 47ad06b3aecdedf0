"""The command line: summary, classify and compare, their output formats and exit codes."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from builders import (
    FORMULAS,
    SHARED_REPRO,
    SHARED_TRACES,
    formula_cells,
    kernel_event,
    kineto_trace,
    shared_absent,
    shared_trace,
    write_formula_pair,
    write_trace,
)

import fusion
from fusion import settings
from fusion.__main__ import main, terminal_text
from fusion.classify.names import classify
from fusion.classify.trace import load
from fusion.report import summary as summary_module

ROOT = Path(__file__).resolve().parents[2]
SUMMARY_KEYS = [
    "format",
    "platform",
    "gpu",
    "kernels",
    "gpu_work",
    "kernel_time_us",
    "types",
    "type_routes",
    "launches",
    "with_op",
    "unlaunched",
    "phases",
    "ops",
    "capture",
    "op_efficiency",
    "unclassified",
]


def _refuse_constant(name: str) -> None:
    raise ValueError(f"non-strict JSON constant {name}")


def strict_json(text: str) -> object:
    return json.loads(text, parse_constant=_refuse_constant)


@pytest.fixture(params=["tl_mi300_bert_small", "tl_h100_bert_small", "built"])
def trace_path(request, tmp_path) -> Path:
    """A shared trace (skipped when ../shared is absent), or a built one that is always there."""
    if request.param != "built":
        return shared_trace(request.param)
    path = tmp_path / "built.json"
    path.write_bytes(kineto_trace("AMD"))
    return path


@pytest.fixture
def pair(tmp_path) -> tuple[Path, Path]:
    """AMD and NVIDIA traces: the shared bert pair when present, else built ones."""
    shared = [SHARED_TRACES / name for name in ("tl_mi300_bert_small", "tl_h100_bert_small")]
    if all(folder.is_dir() for folder in shared):
        return shared_trace(shared[0].name), shared_trace(shared[1].name)
    paths = (tmp_path / "amd.json", tmp_path / "nvidia.json")
    for path, platform in zip(paths, ("AMD", "NVIDIA")):
        path.write_bytes(kineto_trace(platform))
    return paths


def test_summary_json_has_the_documented_keys_and_the_loaded_counts(trace_path: Path, capsys) -> None:
    assert main(["summary", str(trace_path), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    summary = strict_json(out)
    trace = load(trace_path)
    assert list(summary) == SUMMARY_KEYS
    assert (summary["platform"], summary["gpu"], summary["kernels"]) == (trace.platform, trace.gpu, trace.kernel_count)
    assert summary["kernel_time_us"] == pytest.approx(trace.kernel_time_us, abs=1e-3)
    by_type = trace.kernels.groupby("type", observed=True)["dur"].agg(["size", "sum"])
    assert {t: v["count"] for t, v in summary["types"].items()} == by_type["size"].to_dict()
    for kernel_type, entry in summary["types"].items():
        assert list(entry) == ["count", "time_us"]
        assert entry["time_us"] == pytest.approx(by_type.loc[kernel_type, "sum"], abs=1e-3)
    other = trace.names[trace.names["type"] == "Other"]
    for entry in summary["unclassified"]:
        assert list(entry) == ["name", "count", "time_us"]
        assert entry["count"] == other.loc[entry["name"], "count"]
    assert err == "".join(f"warning: {w}\n" for w in trace.warnings)


def test_summary_text_names_the_trace_platform_gpu_and_types(trace_path: Path, capsys) -> None:
    assert main(["summary", str(trace_path)]) == 0
    out, err = capsys.readouterr()
    trace = load(trace_path)
    lines = out.splitlines()
    assert lines[0] == f"trace     {trace_path}"
    assert lines[1] == "format    Kineto JSON"
    assert lines[2].startswith(f"platform  {trace.platform}  ({trace.platform_evidence})")
    assert lines[3] == f"gpu       {trace.gpu}"
    assert lines[4].startswith(f"kernels   {trace.kernel_count:,}")
    for kernel_type in trace.kernels["type"].unique():
        assert any(line.startswith(str(kernel_type)) for line in lines[6:])
    assert err == ""


@pytest.mark.parametrize(
    ("name", "platform"),
    [
        ("Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8", "AMD"),
        ("sm90_xmma_gemm_f16f16_f32_tn_n_tilesize128x128x64", "NVIDIA"),
        ("void at::native::vectorized_elementwise_kernel<4>", "unknown"),
        ("definitely_not_a_known_kernel", "unknown"),
    ],
)
def test_classify_prints_the_type_and_the_rule(name: str, platform: str, capsys) -> None:
    assert main(["classify", name, "--platform", platform]) == 0
    out, err = capsys.readouterr()
    expected = classify(name, platform)
    assert out.splitlines()[0] == f"{expected.kernel_type}\trule: {expected.rule}"
    assert err == ""


def test_classify_lists_the_aten_ops_of_a_fused_kernel(capsys) -> None:
    assert main(["classify", "triton_poi_fused_add_mul_silu_0"]) == 0
    assert capsys.readouterr().out == (
        "SwiGLU\trule: inductor_swiglu\nfused aten ops: add, mul, silu\nfused components: Elementwise\n"
        "implementation: Inductor\n"
    )


def test_classify_names_a_helper_kernel(capsys) -> None:
    assert main(["classify", "void splitKreduce_kernel<float>(cublasSplitKParams<float>)", "--platform", "NVIDIA"]) == 0
    assert capsys.readouterr().out == (
        "GEMM\trule: cublas_split_k_reduce\nhelper of GEMM: split_k_reduce\nimplementation: cuBLAS\n"
    )


def test_compare_json_is_strict_and_describes_both_traces(pair, capsys) -> None:
    assert main(["compare", str(pair[0]), str(pair[1]), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    result = strict_json(out)
    metadata = result["metadata"]
    for side, path in zip((1, 2), pair):
        trace = load(path)
        assert metadata[f"trace{side}_platform"] == trace.platform
        assert metadata[f"trace{side}_total_kernels"] == trace.kernel_count
    assert all(line.startswith("warning: ") for line in err.splitlines())


def test_compare_text_names_both_traces(pair, capsys) -> None:
    assert main(["compare", str(pair[0]), str(pair[1])]) == 0
    out, _ = capsys.readouterr()
    assert str(pair[0]) in out and str(pair[1]) in out


def test_compare_csv_prints_each_table_as_csv(pair, capsys) -> None:
    assert main(["compare", str(pair[0]), str(pair[1]), "--format", "csv"]) == 0
    out, _ = capsys.readouterr()
    sections = out.split("# ")[1:]
    assert [section.split("\n", 1)[0] for section in sections] == [
        "opportunities",
        "mappings",
        "one_sided_kernels",
        "type_stats",
        "matched_pairs",
        "ops",
    ]
    for section in sections:
        rows = list(csv.reader(io.StringIO(section.split("\n", 1)[1].strip())))
        assert rows and all(len(row) == len(rows[0]) for row in rows)


def test_no_csv_table_holds_a_cell_a_spreadsheet_would_evaluate(tmp_path) -> None:
    """Op and kernel names spelled like formulas are written with a leading ' (issue 40 #3), in every table."""
    pair = write_formula_pair(tmp_path)
    assert (
        main(
            [
                "compare",
                str(pair[0]),
                str(pair[1]),
                "--format",
                "csv",
                "--min-group-size",
                "5",
                "-o",
                str(tmp_path / "t.csv"),
            ]
        )
        == 0
    )
    tables = {path.name: path.read_bytes().decode() for path in tmp_path.glob("t_*.csv")}
    assert len(tables) == 6 and all(formula_cells(text) == [] for text in tables.values())
    ops = list(csv.DictReader(io.StringIO(tables["t_ops.csv"], newline="")))
    assert sorted(row["op"] for row in ops) == sorted("'" + formula for formula in FORMULAS)
    assert "'=HYPERLINK(" in tables["t_mappings.csv"]


def test_compare_output_file_for_json_and_csv(pair, tmp_path, capsys) -> None:
    report = tmp_path / "report.json"
    assert main(["compare", str(pair[0]), str(pair[1]), "--format", "json", "-o", str(report)]) == 0
    assert capsys.readouterr().out == ""
    strict_json(report.read_text())
    assert main(["compare", str(pair[0]), str(pair[1]), "--format", "csv", "-o", str(tmp_path / "tables.csv")]) == 0
    names = sorted(p.name for p in tmp_path.glob("tables_*.csv"))
    assert names == [
        "tables_mappings.csv",
        "tables_matched_pairs.csv",
        "tables_one_sided_kernels.csv",
        "tables_opportunities.csv",
        "tables_ops.csv",
        "tables_type_stats.csv",
    ]


def test_compare_to_an_unwritable_output_is_one_error_line(pair, tmp_path, capsys) -> None:
    target = tmp_path / "missing-folder" / "report.json"
    assert main(["compare", str(pair[0]), str(pair[1]), "--format", "json", "-o", str(target)]) == 2
    assert capsys.readouterr().err == f"error: {target}: No such file or directory\n"


def test_compare_with_a_bad_second_trace_names_it(pair, tmp_path, capsys) -> None:
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00")
    assert main(["compare", str(pair[0]), str(bad)]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", f"error: {bad}: gzip data is truncated or corrupt (the compressed stream ends early)\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param([], "the following arguments are required: COMMAND", id="no-command"),
        pytest.param(["explain"], "invalid choice: 'explain'", id="unknown-command"),
        pytest.param(["summary"], "the following arguments are required: trace", id="summary-without-trace"),
        pytest.param(
            ["summary", "t.json", "--format", "xml"], "argument --format: invalid choice: 'xml'", id="bad-format"
        ),
        pytest.param(["compare", "a.json"], "the following arguments are required: trace2", id="compare-one-trace"),
        pytest.param(
            ["compare", "a", "b", "--min-group-size", "0"],
            "argument --min-group-size: must be at least 1",
            id="min-group-size-0",
        ),
        pytest.param(
            ["compare", "a", "b", "--min-group-size", "abc"],
            "argument --min-group-size: must be a whole number, got 'abc'",
            id="min-group-size-abc",
        ),
        pytest.param(["classify"], "the following arguments are required: name", id="classify-without-name"),
        pytest.param(
            ["classify", "k", "--platform", "INTEL"],
            "argument --platform: invalid choice: 'INTEL'",
            id="classify-bad-platform",
        ),
    ],
)
def test_usage_errors_exit_2_with_argparse_message(argv: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and message in err and err.startswith("usage: fusion")


def test_help_exits_0(capsys) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["--help"])
    assert caught.value.code == 0
    assert "summary" in capsys.readouterr().out


def test_an_internal_error_is_one_line_and_exit_1(trace_path: Path, monkeypatch, capsys) -> None:
    def broken(trace):
        raise KeyError("boom")

    monkeypatch.setattr(summary_module, "summarize", broken)
    monkeypatch.delenv("FUSION_DEBUG", raising=False)
    assert main(["summary", str(trace_path)]) == 1
    err = capsys.readouterr().err
    assert err == "internal error: KeyError: 'boom' (set FUSION_DEBUG=1 for a traceback)\n"


HOSTILE = {
    "ESC CSI colour": "\x1b[31mred\x1b[0m",
    "OSC 8 link": "\x1b]8;;http://host/\x07click\x1b]8;;\x07",
    "C1 CSI": "\x9b2J",
    "bell and backspace": "a\x07\x08b",
    "carriage return": "shown\rhidden",
    "bidi override": "abc\u202edcba",
    "zero width": "a\u200bb",
    "line separator": "a\u2028b",
    "tag character": "a\U000e0041b",
}
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\u2028\u202e\U000e0041]")


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_terminal_text_makes_every_control_character_visible(text: str) -> None:
    safe = terminal_text(text)
    assert not _CONTROL.search(safe)
    assert json.loads(f'"{safe}"') == text, "the escape keeps the value inside a JSON string"


def test_terminal_text_keeps_printable_text_newlines_and_tabs() -> None:
    text = "GEMM\tÅ 中文 µs ±\nvoid at::native::kernel<float, 4>()"
    assert terminal_text(text) == text


@pytest.fixture
def hostile_pair(tmp_path) -> tuple[Path, Path]:
    """Two traces whose GPU names and kernel names carry every hostile sequence."""
    names = list(HOSTILE.values())
    paths = []
    for platform, gpu in (("AMD", "MI300X\x1b]0;owned\x07"), ("NVIDIA", "H100\x9b31m")):
        events = [kernel_event(f"{name}_{i}", 10.0 * i, 2.0, 1) for i, name in enumerate(names * 20)]
        props = [{"id": 0, "name": gpu, "warpSize": 64 if platform == "AMD" else 32}]
        paths.append(write_trace(tmp_path / f"{platform}\x1b[2J.json", events, deviceProperties=props))
    return paths[0], paths[1]


@pytest.mark.parametrize("argv", [["--format", "json"], ["--format", "csv"], [], ["--no-cache"]])
def test_compare_never_writes_control_characters_to_the_terminal(hostile_pair, argv, capsys) -> None:
    assert main(["compare", str(hostile_pair[0]), str(hostile_pair[1]), "--min-group-size", "5", *argv]) == 0
    out, err = capsys.readouterr()
    assert not _CONTROL.search(out) and not _CONTROL.search(err)
    if argv == ["--format", "json"]:
        assert strict_json(out)["metadata"]["trace1_gpu"] == "MI300X\x1b]0;owned\x07"


def test_summary_and_errors_never_write_control_characters(hostile_pair, tmp_path, capsys) -> None:
    assert main(["summary", str(hostile_pair[0])]) == 0
    out, err = capsys.readouterr()
    assert not _CONTROL.search(out) and not _CONTROL.search(err)
    bad = tmp_path / "bad\x1b]52;c;aGk=\x07.json"
    bad.write_text("{not json")
    assert main(["compare", str(hostile_pair[0]), str(bad)]) == 2
    out, err = capsys.readouterr()
    assert not _CONTROL.search(out) and not _CONTROL.search(err)
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "\\u001b]52" in err


@pytest.mark.parametrize("value", ["lots", "-1", "nan"])
def test_a_bad_setting_is_one_line_and_exit_2(pair, value, monkeypatch, capsys) -> None:
    monkeypatch.setenv("FUSION_CACHE_MAX_MB", value)
    assert main(["compare", str(pair[0]), str(pair[1])]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"error: FUSION_CACHE_MAX_MB={value!r}: must be a number of at least 0\n"


@pytest.mark.parametrize("value", ["0", "two", "1.5"])
def test_a_bad_thread_count_is_one_line_and_exit_2(pair, value, monkeypatch, capsys) -> None:
    monkeypatch.setenv("FUSION_ANALYSIS_THREADS", value)
    assert main(["compare", str(pair[0]), str(pair[1])]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"error: FUSION_ANALYSIS_THREADS={value!r}: must be a whole number of at least 1\n"


@pytest.mark.parametrize("name", ["FUSION_HOSTED", "FUSION_DEBUG"])
@pytest.mark.parametrize("value", ["2", "enabled", "ja", "tru"])
def test_a_boolean_setting_fails_closed_on_an_unknown_word(pair, name, value, monkeypatch, capsys) -> None:
    """Only the documented words turn a switch on or off; anything else stops the command (issue 40 #5)."""
    monkeypatch.setenv(name, value)
    assert main(["summary", str(pair[0])]) == 2
    out, err = capsys.readouterr()
    assert (
        out == ""
        and err == f"error: {name}={value!r}: must be one of 1, true, yes, on (on) or 0, false, no, off (off)\n"
    )


@pytest.mark.parametrize(("value", "on"), [("1", True), (" TRUE ", True), ("Yes", True), ("off", False), ("", False)])
def test_boolean_settings_read_the_documented_words(value, on, monkeypatch) -> None:
    monkeypatch.setenv("FUSION_HOSTED", value)
    assert settings.hosted() is on


def test_thresholds_set_on_the_command_line_reach_the_detectors_and_the_output(capsys) -> None:
    pair = [str(SHARED_REPRO / "splitk_partial" / f"{side}.json") for side in ("amd", "nvidia")]
    if not Path(pair[0]).is_file():
        pytest.skip(shared_absent(SHARED_REPRO))
    assert main(["compare", *pair, "--format", "json", "--no-cache"]) == 0
    assert len(json.loads(capsys.readouterr().out)["fusion_mappings"]) == 1
    assert main(["compare", *pair, "--format", "json", "--threshold", "min_pattern_count=16"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["fusion_mappings"] == [] and result["params"]["min_pattern_count"] == 16


@pytest.mark.parametrize(
    ("item", "problem"),
    [
        ("min_ratio=lots", "min_ratio takes a number"),
        ("max_names=2.5", "max_names takes a whole number"),
        ("min_pattern_count=0", "must be greater than 0"),
        ("no_such=1", "not a threshold; one of one_sided_ratio,"),
    ],
)
def test_a_bad_threshold_is_one_line_and_exit_2(pair, item, problem, capsys) -> None:
    assert main(["compare", str(pair[0]), str(pair[1]), "--threshold", item]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"error: --threshold {item}: {problem}") and err.count("\n") == 1


def test_compare_with_a_side_without_kernels_is_one_line_and_exit_2(pair, tmp_path, capsys) -> None:
    cpu_op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2}
    empty = write_trace(tmp_path / "cpu_only.json", [cpu_op])
    assert main(["compare", str(pair[0]), str(empty)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"error: {empty}: no kernel events to compare (cat 'kernel'); not a GPU profile?\n"
    assert main(["summary", str(empty), "--format", "json"]) == 0
    assert "no kernel events" in capsys.readouterr().err


def test_an_unwritable_cache_is_one_warning_naming_it_and_the_same_result(pair, monkeypatch, capsys) -> None:
    assert main(["compare", str(pair[0]), str(pair[1]), "--format", "json", "--no-cache"]) == 0
    expected = capsys.readouterr()

    def refuse(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    assert main(["compare", str(pair[0]), str(pair[1]), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert out == expected.out
    cache_lines = err.removesuffix(expected.err).splitlines()
    assert cache_lines == [
        f"warning: the cache directory {settings.cache_dir()} cannot be written (Read-only file system);"
        " carrying on without caching"
    ]


def test_preparing_the_analysis_imports_it_and_loads_the_compiled_alignment() -> None:
    """What the CLI does on the core a finished loader process frees; checked in a new interpreter."""
    code = (
        "import sys\n"
        "from fusion.__main__ import _prepare_analysis\n"
        "assert 'fusion.comparison.pair' not in sys.modules and 'numba' not in sys.modules\n"
        "_prepare_analysis()\n"
        "from fusion.match import dp\n"
        "assert {'fusion.comparison.pair', 'fusion.report.render'} <= set(sys.modules)\n"
        "assert dp.fill.signatures and dp.traceback.signatures\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("argv", [[], ["compare"], ["summary"], ["classify"], ["batch"]])
def test_version_is_printed_by_every_command(argv: list[str], capsys) -> None:
    """`fusion compare --version` said 'the following arguments are required' (issue 38 #13)."""
    with pytest.raises(SystemExit) as done:
        main([*argv, "--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"fusion {fusion.__version__}\n"


def test_compare_help_describes_every_argument_with_an_example(capsys) -> None:
    """compare --help described none of its arguments (issue 38 #13)."""
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = capsys.readouterr().out
    for said in (
        "trace1                the first trace",
        "trace2                the second trace",
        "--min-group-size N    a correlation group",
        "text: a report for a person",
        "compare only the kernels of one phase",
        "write here",
        "change a detection threshold",
    ):
        assert said in text, said
    assert "fusion compare " in text.split("example:")[1]


def test_one_sided_notes_name_their_kernels_and_time(capsys) -> None:
    """Notes gave type, count and reason, no kernel (issue 38 #14): each now lists its kernels by raw name, with
    how many and how long, adding up to the note's count."""
    pair = [str(ROOT / "sample_traces" / "eager_prefill" / f"{side}.json.gz") for side in ("amd", "nvidia")]
    assert main(["compare", *pair, "--format", "json", "--no-cache"]) == 0
    notes = json.loads(capsys.readouterr().out)["one_sided_kernels"]
    trace1 = load(pair[0])
    assert notes and all(sum(k["count"] for k in n["kernels"]) == n["count"] for n in notes)
    for note in notes:
        for kernel in note["kernels"]:
            assert kernel["name"] in trace1.names.index or kernel["name"] in load(pair[1]).names.index
            assert kernel["time_us"] > 0
    assert main(["compare", *pair]) == 0
    text = capsys.readouterr().out
    assert f"kernels: {notes[0]['kernels'][0]['name']} ×{notes[0]['kernels'][0]['count']}" in text


def test_text_warnings_go_to_stderr_not_into_the_report(tmp_path, capsys) -> None:
    """In text format the warnings were printed inside the report on stdout (issue 38 #12)."""
    first = write_trace(tmp_path / "a.json", [kernel_event("k", 1.0, 2.0, 1), kernel_event("k", 5.0, 2.0, 2)])
    second = write_trace(tmp_path / "b.json", [kernel_event("k", 1.0, 2.0, 1), kernel_event("k", 5.0, 2.0, 2)])
    report = tmp_path / "report.json"
    assert main(["compare", str(first), str(second), "--no-cache", "--format", "json", "-o", str(report)]) == 0
    capsys.readouterr()
    found = json.loads(report.read_bytes())
    warnings, reasons = found["warnings"], found["comparability"]["warnings"]
    assert reasons and set(reasons) <= set(warnings)
    assert main(["compare", str(first), str(second), "--no-cache"]) == 0
    out, err = capsys.readouterr()
    assert all(line.startswith("warning: ") for line in err.splitlines())
    on_stderr = [line.removeprefix("warning: ") for line in err.splitlines()]
    assert on_stderr == [w for w in warnings if w not in reasons]  # the verdict's reasons are in the report (issue 39)
    assert all(f"  ! {reason}" in out for reason in reasons) and not any(line in out for line in on_stderr)
