"""The dashboard's plain-Python parts: view state and links, escaping per sink, chart axes, tables, import layers."""

from __future__ import annotations

import html
import math
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from kernels import layer, make_trace, steps  # noqa: E402

from fusion.classify.trace import load  # noqa: E402
from fusion.comparison.pair import compare  # noqa: E402
from fusion.synthetic.pairs import PairSpec, write_pair  # noqa: E402
from ui import charts, tables, text  # noqa: E402
from ui.state import View, parse  # noqa: E402

DIGEST = "a" * 64


def test_a_view_round_trips_through_its_link() -> None:
    view = View(
        t1=DIGEST,
        t2="b" * 64,
        l1="MI300X",
        mgs=20,
        type="GEMM",
        pair=3,
        w1=(4, 9),
        w2=(5, 7),
        tab="2",
        q="gemm",
        phase="decode",
        op="aten::scaled_dot_product_attention",
        tl="call",
        call=3,
        finding=2,
    )
    assert parse(view.to_params()) == parse({**view.to_params()}) and parse(view.to_params()).view == view
    assert parse({}).view == View() and not parse({}).problems


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("t1", "zz"),
        ("t2", DIGEST[:-1]),
        ("pair", "-1"),
        ("pair", "x"),
        ("w1", "9-4"),
        ("mgs", "0"),
        ("type", "NoSuchType"),
        ("tab", "3"),
        ("sample", "x" * 100_000),
        ("sample", "../etc"),
        ("q", "q" * 1000),
        ("phase", "<b>warmup</b>"),
        ("op", "aten::mm\nevil"),
        ("op", "x" * 301),
        ("tl", "steps"),
        ("call", "0"),
        ("finding", "-2"),
    ],
)
def test_a_damaged_value_is_dropped_and_named(key: str, value: str) -> None:
    link = parse({"sample": "s", key: value} if key != "sample" else {key: value})
    assert link.problems == (key,)
    assert value not in "".join(str(v) for v in link.view.to_params().values())


def test_with_type_and_with_pair_reset_what_no_longer_applies() -> None:
    view = View(sample="s", type="GEMM", pair=2, w1=(1, 2), w2=(3, 4))
    assert view.with_type("Sort") == View(sample="s", type="Sort")
    assert view.with_pair(5) == View(sample="s", type="GEMM", pair=5)
    assert view.with_pair(5, (1, 3), (2, 4)).w2 == (2, 4)
    assert view.with_min_group_size(10) == View(sample="s", type="GEMM", mgs=10)
    assert View(sample="s", l1="a", tab="1", pair=1).swapped() == View(sample="s", l2="a", tab="2", swap=True)
    assert View(t1=DIGEST, type="GEMM", pair=1).with_sources(sample="x") == View(sample="x")
    assert view.with_phase("prefill") == View(sample="s", type="GEMM", phase="prefill")
    assert View(sample="s", finding=2, op="aten::mm", call=3).with_phase("decode") == View(
        sample="s", op="aten::mm", phase="decode"
    )
    assert View(sample="s", phase="decode", op="aten::mm").with_sources(sample="x") == View(sample="x")


HOSTILE = [
    "[l](https://evil.example)",
    "![x](http://evil.example/i.png)",
    "https://evil.example",
    "www.evil.example",
    "a@evil.example",
    "<b>bold</b>",
    ":red[x] :material/home:",
    "**x** _y_ `z`",
    "<a href='x'>a</a>",
    "\x1b]8;;x\x07",
]


@pytest.mark.parametrize("hostile", HOSTILE)
def test_markdown_escape_leaves_no_syntax(hostile: str) -> None:
    escaped = text.md(hostile)
    for character in "[]()<>*_`:.@!":
        assert all(escaped[i - 1] == "\\" for i, c in enumerate(escaped) if c == character)
    assert "\x1b" not in escaped and "\n" not in text.md("a\nb")
    assert text.label(hostile) == escaped


def test_code_span_cannot_be_closed_from_inside() -> None:
    span = text.code("a``b`c")
    assert span.startswith("``` ") and span.endswith(" ```") and "a``b`c" in span


@pytest.mark.parametrize("hostile", HOSTILE)
def test_plotly_escape_leaves_no_tags(hostile: str) -> None:
    escaped = text.plotly(hostile)
    assert (
        "<" not in escaped
        and ">" not in escaped
        and html.unescape(escaped).replace(" ", "") == hostile.replace("\x1b", "").replace("\x07", "").replace(" ", "")
    )


def test_numbers_never_read_none() -> None:
    assert text.ms(None) == text.ratio(None) == text.ratio(math.nan) == text.ms(math.inf) == "—"
    assert text.ratio(0.962) == "0.96×" and text.ms(1234.5) == "1.234 ms"


def _stats(ratios: list[float], only: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"count_ratio": ratios, "only_in": only}, index=[f"T{i}" for i in range(len(ratios))])


def test_ratio_axis_spans_at_least_half_to_double_and_is_symmetric() -> None:
    fig = charts.ratio_chart(_stats([0.962, 1.0, 0.98], [0, 0, 0]), "count_ratio", "r")
    low, high = fig.layout.yaxis.range
    assert low == -high and high >= 1
    assert list(fig.layout.yaxis.ticktext) == ["1/2", "1×", "2×"]
    assert abs(fig.data[0].y[0]) < 0.06  # 0.962 sits near the middle, not at the edge


def test_ratio_axis_grows_for_large_ratios_and_pins_one_sided_types_on_their_own_tick() -> None:
    fig = charts.ratio_chart(_stats([3.0, math.nan, math.nan], [0, 1, 2]), "count_ratio", "r")
    ticks = list(fig.layout.yaxis.tickvals)
    assert ticks == [-3, -2, -1, 0, 1, 2, 3] and ticks == [-t for t in reversed(ticks)]
    assert fig.layout.yaxis.ticktext[0] == "only trace 2" and fig.layout.yaxis.ticktext[-1] == "only trace 1"
    assert list(fig.data[0].y[1:]) == [3, -3]


def test_the_ratio_picture_has_the_same_axis_and_writes_each_value_out() -> None:
    picture = charts.ratio_svg(_stats([0.962, 3.0, math.nan], [0, 0, 1]), "count_ratio", "trace 1 / trace 2")
    ticks = re.findall(r'font-size="10">([^<]*)</text>', picture)
    assert ticks == ["only trace 2", "1/4", "1/2", "1×", "2×", "4×", "only trace 1"]
    rows = re.findall(r'text-anchor="end">([^<]*)</text>', picture)
    assert rows == ["T2", "T1", "T0"], "one-sided first, then the largest difference"
    assert ">0.96×</text>" in picture and ">3.00×</text>" in picture and ">only in trace 1</text>" in picture
    centre = float(re.search(r'<line x1="([\d.]+)"', picture)[1])
    dots = [float(x) for x in re.findall(r'<circle cx="([\d.]+)"', picture)]
    assert abs(dots[1] - centre) < 5 < dots[0] - centre  # 0.962 near 1×, 3× well to the right


def _aligned_rows(names1: list[object], names2: list[object], ops: list[str]) -> pd.DataFrame:
    rows = pd.DataFrame({"name1": names1, "name2": names2, "op": ops})
    for side, names in ((1, names1), (2, names2)):
        rows[f"type{side}"] = ["GEMM" if isinstance(n, str) else None for n in names]
        rows[f"dur{side}"] = [2.5 if isinstance(n, str) else math.nan for n in names]
        rows[f"index{side}"] = [i if isinstance(n, str) else -1 for i, n in enumerate(names)]
    return rows


def test_the_alignment_strip_has_one_cell_per_kernel_and_op() -> None:
    rows = _aligned_rows(["gemm_a", "gemm_b", None], ["nvjet_a", None, "nvjet_c"], ["match", "only1", "only2"])
    strip = charts.alignment_svg(rows)
    fills = re.findall(r'<rect [^>]*fill="([^"]+)" shape-rendering', strip)
    gemm, op = charts.type_color("GEMM"), charts.OP_COLORS
    assert fills == [gemm, op["match"], gemm, gemm, op["only1"], op["only2"], gemm], (
        "no cell where a side has no kernel"
    )
    assert re.findall(r'font-size="11">(\d+)</text>', strip) == ["0", "1", "2"]


def test_the_alignment_strip_has_a_legend_of_the_types_its_lanes_colour() -> None:
    """Its lanes colour each kernel by type, so it names each type it draws, in that colour (issue 39 #4)."""
    rows = _aligned_rows(["gemm_a", "copy_b", None], ["nvjet_a", None, "nvjet_c"], ["match", "only1", "only2"])
    rows.loc[1, "type1"] = "MemCopy"
    strip = charts.alignment_svg(rows)
    drawn = set(re.findall(r'<rect [^>]*fill="([^"]+)" shape-rendering', strip)) - set(charts.OP_COLORS.values())
    entries = dict(re.findall(r'<rect [^>]*fill="([^"]+)" stroke="#999"/><text [^>]*>([^<]+)</text>', strip))
    assert drawn == {charts.type_color("GEMM"), charts.type_color("MemCopy")}
    assert entries == {charts.type_color("GEMM"): "GEMM", charts.type_color("MemCopy"): "MemCopy"}
    assert 'height="' + str(3 * charts.STRIP_LANE + charts.STRIP_AXIS + charts.STRIP_LEGEND) + '"' in strip


def test_svg_pictures_escape_trace_text() -> None:
    hostile = "<a href='https://evil.example'>x</a> & <b>b</b>"
    bars = charts.bars_svg([hostile], [1.0], ["#000"], [hostile], hostile)
    ratios = charts.ratio_svg(
        pd.DataFrame({"count_ratio": [1.0], "only_in": [0]}, index=[hostile]), "count_ratio", hostile
    )
    for picture in (bars, ratios):
        assert (
            "<a" not in picture
            and "<b>" not in picture
            and "&lt;a href=&#x27;https://evil.example&#x27;&gt;" in picture
        )


def test_bars_keep_their_order_and_scale_to_the_largest() -> None:
    bars = charts.bars_svg(["GEMM", "Sort"], [4.0, 1.0], ["#111", "#222"], ["4 ms", "1 ms"], "ms")
    assert re.findall(r'text-anchor="end">([^<]*)</text>', bars) == ["GEMM", "Sort"]
    widths = [float(w) for w in re.findall(r'<rect [^>]*width="([\d.]+)"', bars)]
    assert widths == [charts.BAR_PLOT, charts.BAR_PLOT / 4]


def test_chart_text_from_traces_is_escaped() -> None:
    stats = pd.DataFrame({"trace1_count": [1], "trace2_count": [2]}, index=["GEMM"])
    fig = charts.side_by_side(("<a href='x'>l</a>", "ok"), stats, "count", 1.0, "kernels")
    assert "<a" not in fig.data[0].name and "&lt;a" in fig.data[0].name


@pytest.fixture(scope="module")
def eager() -> object:
    """Two eager traces where one side runs an extra norm per layer: only stream windows."""
    fused = steps(layer(True), 2, eager=True)
    unfused = steps(layer(False), 2, eager=True)
    return compare(make_trace(fused, "A"), make_trace(unfused, "B", "NVIDIA"))


def test_pairs_with_difference_counts_stream_windows(eager) -> None:
    assert set(eager.pairs["kind"]) == {"stream"}
    differing = eager.type_stats.index[eager.type_stats["trace1_count"] != eager.type_stats["trace2_count"]]
    assert len(differing)
    for kernel_type in differing:
        rows = eager.pairs_with_difference(kernel_type)
        total = eager.type_stats.loc[kernel_type, "trace1_count"] - eager.type_stats.loc[kernel_type, "trace2_count"]
        assert len(rows) and rows["difference"].sum() == total


def test_counterparts_pair_each_name_with_the_aligned_one(eager) -> None:
    table, read = tables.counterparts(eager)
    assert read == len(eager.pairs)
    both = table[table["aligned"] == "same type"]
    assert len(both) and (both["type 1"] == both["type 2"]).all()
    assert table["times"].sum() == sum(len(eager.alignment(p)) for p in eager.pairs["pair_id"])
    filtered = tables.name_filter(
        table, ["kernel name, trace 1", "kernel name, trace 2"], both["kernel name, trace 2"].iloc[0][:6]
    )
    assert 0 < len(filtered) <= len(table)


def test_what_was_compared_names_windows_for_eager_pairs(eager) -> None:
    lines = tables.compared(eager)
    assert any(f"{eager.metadata['stream_windows']} stream windows" in line for line in lines)
    assert not any("graph-launch groups" in line for line in lines if "matched" in line)


def test_what_was_compared_names_groups_realigned_as_a_stream(tmp_path: Path) -> None:
    spec = PairSpec(
        scenario="full_graph",
        layers=5,
        steps=4,
        steps2=6,
        fusions=("add_rmsnorm",),
        non_fusion=False,
        seed=32,
        group_cuts=True,
    )
    files = write_pair(tmp_path, spec)
    comparison = compare(load(files.trace1), load(files.trace2))
    realigned = comparison.metadata["realigned_group_pairs"]
    assert realigned
    assert any(
        f"the groups of {realigned} pairs cut at different places" in line for line in tables.compared(comparison)
    )


def test_type_table_says_one_sided_instead_of_none() -> None:
    stats = pd.DataFrame(
        {
            "trace1_count": [2, 0],
            "trace2_count": [1, 3],
            "trace1_time_us": [1.0, 0],
            "trace2_time_us": [2.0, 1],
            "count_ratio": [2.0, np.nan],
            "time_ratio": [0.5, np.nan],
            "only_in": [0, 2],
        },
        index=["GEMM", "Sort"],
    )
    table = tables.type_table(stats)
    assert table["count ratio"].tolist() == ["2.00×", "only in trace 2"]
    assert not table.isna().any().any()


def test_sample_pair_loads_for_the_tables() -> None:
    sample = ROOT / "sample_traces" / "vllm_moe_full_graph"
    comparison = compare(load(sample / "amd.json.gz"), load(sample / "nvidia.json.gz"))
    assert len(tables.pair_table(comparison.pairs)) == len(comparison.pairs)


def test_kernels_only_time_axis_removes_idle_gaps() -> None:
    rows = pd.DataFrame({"rel_ts1": [0.0, 100.0, np.nan, 500.0], "dur1": [10.0, 5.0, np.nan, 2.0]})
    assert tables.kernel_starts(rows, 1, kernels_only=False).tolist()[:2] == [0.0, 100.0]
    starts = tables.kernel_starts(rows, 1, kernels_only=True)
    assert starts.iloc[[0, 1, 3]].tolist() == [0.0, 10.0, 15.0] and np.isnan(starts.iloc[2])


def test_evidence_window_marks_the_rows_of_either_side() -> None:
    alignment = pd.DataFrame({"index1": [4, 5, -1, 7], "index2": [9, -1, 10, 11]})
    marked = tables.in_window(alignment, View(w1=(5, 6), w2=(11, 12)))
    assert marked.tolist() == [False, True, False, True]


@pytest.fixture(scope="module")
def serving(tmp_path_factory):
    """A generated serving pair: 4 + 3 and 1 + 3 prefill + decode steps, a different fusion in each phase."""
    from fusion.synthetic.phases import ServingSpec, write_serving_pair

    paths = write_serving_pair(tmp_path_factory.mktemp("serving"), ServingSpec(schedule1="PPPPDDD", schedule2="PDDD"))
    return [load(path) for path in paths]


def test_step_timeline_draws_each_traces_steps_coloured_by_phase(serving) -> None:
    from fusion.model.phases import step_spans

    spans = tuple(step_spans(trace.kernels) for trace in serving)
    assert [len(s) for s in spans] == [7, 4] and list(spans[1]["phase"]) == ["prefill", "decode", "decode", "decode"]
    fig = charts.step_timeline(("<b>MI300X</b>", "H100"), spans)
    bars = {(bar.y[0], bar.name): len(bar.x) for bar in fig.data}
    assert bars == {
        ("Trace 1: &lt;b&gt;MI300X&lt;/b&gt;", "prefill"): 4,
        ("Trace 1: &lt;b&gt;MI300X&lt;/b&gt;", "decode"): 3,
        ("Trace 2: H100", "prefill"): 1,
        ("Trace 2: H100", "decode"): 3,
    }
    assert {bar.marker.color for bar in fig.data if bar.name == "decode"} == {charts.PHASE_COLORS["decode"]}
    assert [bar.showlegend for bar in fig.data].count(True) == 2, "one legend entry per phase"
    assert min(min(bar.base) for bar in fig.data) == 0, "each row starts at its trace's first step"


def test_phase_colours_are_distinct_and_cover_every_phase() -> None:
    from fusion.model.phases import PHASES

    assert set(charts.PHASE_COLORS) == set(PHASES) and len(set(charts.PHASE_COLORS.values())) == len(PHASES)


def test_each_finding_says_in_which_phases_it_holds(serving) -> None:
    comparison = compare(*serving)
    where = {m.unfused_sequence[0]: tables.finding_phases(comparison, m) for m in comparison.mappings}
    assert where == {"Elementwise": ["decode"], "MoE_GEMM": ["prefill"]}
    assert tables.phases_text(["decode"]) == " · in decode"
    decode_only = compare(*serving, phase="decode")
    assert [tables.finding_phases(decode_only, m) for m in decode_only.mappings] == [None]


def test_per_type_counts_per_phase_compare_per_step(serving) -> None:
    table = tables.phase_counts(compare(*serving))
    assert list(table.columns) == ["prefill", "decode"]
    assert table.loc["Attention", "prefill"] == "24 vs 6 · 1.00× per step"
    assert tables.phase_counts(compare(*serving, phase="prefill")).empty


def test_op_sequences_list_what_each_call_of_an_op_launched() -> None:
    from builders import EagerTrace, Launch, Op

    builder = EagerTrace("AMD")
    builder.run(
        *[Op("aten::layer_norm", [Launch("fill", 1.0), Launch("ln_fwd", 4.0)]) for _ in range(3)],
        Op("aten::layer_norm", [Launch("ln_fwd", 4.0)]),
        Op("aten::mm", [Launch("gemm", 9.0)]),
    )
    trace = load(builder.data())
    from fusion.comparison.ops import op_sequences

    shown = tables.sequence_rows(op_sequences(trace, "aten::layer_norm"))
    assert shown[["calls", "kernels per call", "kernels, in launch order"]].values.tolist() == [
        [3, 2, "fill → ln_fwd"],
        [1, 1, "ln_fwd"],
    ]
    assert shown["time (ms)"].tolist() == [0.015, 0.004] and shown["first call's kernels"][0] == "0–1"
    assert op_sequences(trace, "aten::bmm").empty


# --- the Batch page: its link keys, which folders a link may open, its tables --------------------------

from fusion.batch.results import BatchError, read_batch  # noqa: E402
from ui import batch  # noqa: E402


def test_batch_keys_round_trip_and_a_batch_pair_is_a_source() -> None:
    view = View(batch="run-1.b", bpair=2, bq="rank", bs="failed", swap=True, mgs=40)
    assert parse(view.to_params()).view == view and not parse(view.to_params()).problems
    assert view.has_sources() and not View(batch="run1").has_sources()
    assert view.swapped() == view.with_(swap=False)
    assert view.with_sources(sample="s") == View(sample="s", batch="run-1.b", bq="rank", bs="failed", mgs=40)
    assert View(bp="/data/out").to_params() == {"bp": "/data/out"} and parse({"bp": "/data/out"}).view.bp == "/data/out"


@pytest.mark.parametrize(
    ("key", "value", "params"),
    [
        ("batch", "..", {}),
        ("batch", "a/b", {}),
        ("batch", "/etc", {}),
        ("batch", "x" * 100, {}),
        ("bs", "maybe", {"batch": "run1"}),
        ("bq", "q" * 1000, {"batch": "run1"}),
        ("bpair", "-1", {"batch": "run1"}),
        ("bpair", "1", {}),  # a pair of no batch
    ],
)
def test_a_damaged_batch_key_is_dropped_and_named(key: str, value: str, params: dict[str, str]) -> None:
    link = parse({**params, key: value})
    assert link.problems == (key,) and link.view.bpair is None
    assert value not in "".join(link.view.to_params().values())


def test_hosted_links_never_name_a_batch_by_path(monkeypatch) -> None:
    monkeypatch.setenv("FUSION_HOSTED", "1")
    assert parse({"bp": "/etc", "batch": "run1"}).view == View(batch="run1")
    assert batch.folder_of(View(bp="/etc")) is None


def test_a_named_batch_stays_inside_the_batch_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FUSION_BATCH_DIR", str(tmp_path / "batches"))
    (tmp_path / "batches").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "batches" / "link").symlink_to(tmp_path / "elsewhere")
    assert batch.named_folder("run1") == (tmp_path / "batches" / "run1").resolve()
    for name in ("link", "..", "a/b"):
        with pytest.raises(BatchError):
            batch.named_folder(name)


def test_batch_pair_files_are_the_recorded_local_files_and_never_a_url(
    batch_with_a_failure, tmp_path, monkeypatch
) -> None:
    import shutil

    import orjson

    monkeypatch.setenv("FUSION_BATCH_DIR", str(batch_with_a_failure.parent))
    record = read_batch(batch_with_a_failure).record
    pair, first, second = batch.pair_files("run1", 1)
    assert (pair.label, str(first), str(second)) == ("rank1", record.pairs[1].trace1, record.pairs[1].trace2)
    with pytest.raises(BatchError, match="has no pair 9"):
        batch.pair_files("run1", 9)
    monkeypatch.setenv("FUSION_BATCH_DIR", str(tmp_path))
    shutil.copytree(batch_with_a_failure, tmp_path / "remote")
    raw = orjson.loads((tmp_path / "remote" / "batch.json").read_bytes())
    raw["pairs"][0]["trace1"] = "s3://bucket/amd.json.gz"
    (tmp_path / "remote" / "batch.json").write_bytes(orjson.dumps(raw))
    with pytest.raises(BatchError, match="URL, which a link never opens"):
        batch.pair_files("remote", 0)
    remote = read_batch(tmp_path / "remote").record
    assert batch.pair_view(View(batch="remote"), remote, remote.pairs[0]) is None


def test_a_pair_opens_by_paths_locally_and_by_batch_pair_when_hosted(batch_with_a_failure, monkeypatch) -> None:
    record = read_batch(batch_with_a_failure).record
    view = View(batch="run1", bq="rank")
    local = batch.pair_view(view, record, record.pairs[0])
    assert (local.p1, local.p2, local.bpair, local.mgs) == (
        record.pairs[0].trace1,
        record.pairs[0].trace2,
        None,
        record.min_group_size,
    )
    monkeypatch.setenv("FUSION_HOSTED", "1")
    hosted = batch.pair_view(view, record, record.pairs[0])
    assert (hosted.p1, hosted.batch, hosted.bpair) == (None, "run1", 0)
    assert batch.pair_view(view, record, record.pairs[-1]) is None  # the failed pair has no comparison to open


def test_pair_table_has_one_row_per_pair_with_totals_and_headline(batch_with_a_failure) -> None:
    result = read_batch(batch_with_a_failure)
    table = batch.pair_table(result).set_index("label")
    summary = result.summary
    for side in (1, 2):
        expected = summary[(summary["label"] == "rank0") & (summary["side"] == side)]["count"].sum()
        assert table.loc["rank0", f"kernels {side}"] == expected
    assert table.loc["rank0", "findings"] == (result.findings["label"] == "rank0").sum() > 0
    assert (
        table.loc["rank0", "headline"].startswith("Trace 1 runs Sort as 4 kernels")
        and table.loc["rank3", "headline"] == "no difference found"
    )
    assert table.loc["broken", "status"] == "failed" and "broken" in table.loc["broken", "message"]
    assert list(batch.filtered(batch.pair_table(result), "RANK2", None)["label"]) == ["rank2"]
    assert list(batch.filtered(batch.pair_table(result), "", "failed")["label"]) == ["broken"]
    assert "broken" not in set(batch.filtered(batch.pair_table(result), "", "ok")["label"])


def test_finding_table_says_on_which_ranks_each_finding_holds(batch_with_a_failure) -> None:
    findings = read_batch(batch_with_a_failure).findings
    table = batch.finding_table(findings)
    assert len(table) == findings.groupby(batch.FINDING_KEY).ngroups > 0
    assert set(table["holds on"]) == {"some ranks"} and set(table["ranks"]) == {"0, 1, 2 (3 of 4)"}


def test_a_load_that_waits_for_the_scan_compile_says_so(monkeypatch) -> None:
    """The first large trace on a new server stalls while numba compiles the loader's scan: the progress line
    says why, and only then."""
    from ui import data

    monkeypatch.setattr(data, "scan_compile_pending", lambda size: size >= 10)
    assert data.reading_text("Reading a.json", 5, 20) == "Reading a.json: 0 / 0 MB" + data.COMPILE_HINT
    assert (
        data.reading_text("Reading a.json", 20, 20)
        == "Reading a.json: parsing and classifying kernels" + data.COMPILE_HINT
    )
    assert data.reading_text("Reading b.json", 2_000_000, 5) == "Reading b.json: parsing and classifying kernels"
    monkeypatch.setattr(data, "scan_compile_pending", lambda size: False)
    assert data.reading_text("Reading a.json", 1_500_000, 3_000_000) == "Reading a.json: 2 / 3 MB"
    assert data.reading_text("Reading a.json", 1_500_000, 0) == "Reading a.json: 2 MB"


def test_the_timeline_figure_draws_kernels_by_type_links_and_marks(eager) -> None:
    from fusion.report.timeline import ONE_SIDED, Scope, aligned_timeline
    from ui import timeline as tl

    timeline = aligned_timeline(eager, Scope("pair", 0))
    fig = tl.figure(timeline, eager)
    kernels = [t for t in fig.data if t.type == "bar" and t.customdata is not None and len(t.customdata[0]) == 7]
    by_type = [t for t in kernels if t.name in charts.TYPE_COLORS]
    assert len({t.name for t in by_type}) == len(by_type), "one legend entry per type"
    assert sum(len(t.x) for t in by_type) == sum(len(lane.rows) for lane in timeline.lanes)
    hatched = next(t for t in kernels if t.name.startswith("one-sided"))
    assert len(hatched.x) == sum(int((lane.status == ONE_SIDED).sum()) for lane in timeline.lanes) > 0
    lines = [t for t in fig.data if t.type == "scatter"]
    assert sum(int(np.isfinite(np.asarray(t.x, dtype=float)).sum()) // 2 for t in lines) == len(timeline.links) > 0


def test_a_clicked_kernel_opens_its_pair_or_else_its_name() -> None:
    from ui import timeline as tl

    view = View(sample="s", type="GEMM")
    point = {"customdata": [2, 17, 4, "k", "matched", "op", "GEMM"]}
    page, target = tl.drill_down(view, tl.clicked(point), comparison=None)
    assert (page, target) == ("groups", View(sample="s", pair=4, w2=(17, 18)))
    assert tl.clicked({"customdata": ["waits"]}) is None and tl.clicked({}) is None


def test_timeline_hover_text_escapes_trace_text() -> None:
    from fusion.report.timeline import aligned_timeline
    from ui import timeline as tl

    hostile = "<a href='https://evil.example'>k</a>"
    kernels = [(hostile, "GEMM", 5.0, 1), ("vectorized_elementwise_kernel", "Elementwise", 2.0, 2)]
    comparison = compare(make_trace(kernels, "A"), make_trace(kernels, "B", "NVIDIA"))
    fig = tl.figure(aligned_timeline(comparison), comparison)
    shown = " ".join(str(row[3]) for t in fig.data if t.customdata is not None for row in t.customdata if len(row) == 7)
    assert "<a" not in shown and "&lt;a href=" in shown
