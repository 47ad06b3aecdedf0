"""The dashboard under Streamlit's AppTest: every page, from the default sample, from uploads and from links.

Uploads go through AppTest's file_uploader.set_value (supported in Streamlit 1.67), so the real
upload path (digest once per file_id, store, URL) is exercised here; test_e2e.py repeats it in a browser.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import os
import re
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from builders import SHARED_TRACES, shared_absent  # noqa: E402

from fusion.classify.trace import load  # noqa: E402
from fusion.comparison.pair import compare  # noqa: E402
from ui import charts as ui_charts  # noqa: E402
from ui import tables  # noqa: E402
from ui.state import NOT_ALLOWED  # noqa: E402
from ui.text import md as md_text  # noqa: E402
from ui.text import short_name  # noqa: E402
from ui.widgets import SELECT_FOR_FULL_NAME  # noqa: E402

SAMPLE = "vllm_moe_full_graph"
SAMPLE_DIR = ROOT / "sample_traces" / SAMPLE
PAGES = ["pages/1_Overview.py", "pages/2_Fusion.py", "pages/3_Groups.py", "pages/4_Kernels.py", "pages/8_Efficiency.py"]
SHARED = SHARED_TRACES

pytestmark = pytest.mark.skipif(not (SAMPLE_DIR / "amd.json.gz").exists(), reason="bundled sample pair missing")


@pytest.fixture(scope="module")
def components_scanned_once() -> Iterator[None]:
    """Streamlit's installed-components scan made once in the module, not at each AppTest's first run: the scan
    reads the metadata of every installed distribution (about 0.1 s of CPU; this module makes well over a hundred
    AppTests), and what is installed does not change during a run. Each AppTest still registers the scan's
    components in a registry of its own."""
    from streamlit.components.v2 import manifest_scanner

    scanned = functools.cache(manifest_scanner.scan_component_manifests)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manifest_scanner, "scan_component_manifests", lambda: list(scanned()))
        yield


@pytest.fixture(scope="module")
def runs_waited_for() -> Iterator[None]:
    """AppTest's wait for a script run to end, on the run's SHUTDOWN event instead of Streamlit's poll: every 1 ms
    the poll scans all the run's events so far (one per delta), in the test's thread, while the script runs in
    another and needs the same GIL. A run that outlasts its timeout is stopped with Streamlit's error."""
    from streamlit.runtime.scriptrunner import ScriptRunnerEvent
    from streamlit.testing.v1 import local_script_runner

    def waited(runner: local_script_runner.LocalScriptRunner, timeout: float = 3) -> None:
        ended = threading.Event()

        def heard(sender: object, event: ScriptRunnerEvent, **_: object) -> None:
            if event == ScriptRunnerEvent.SHUTDOWN:
                ended.set()

        runner.on_event.connect(heard, weak=False)
        try:
            if runner.script_stopped() or ended.wait(timeout):
                return
        finally:
            runner.on_event.disconnect(heard)
        runner.request_stop()
        runner.join()
        raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(local_script_runner, "require_widgets_deltas", waited)
        yield


@pytest.fixture(scope="module")
def disk_caches(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's on-disk table and result cache (FUSION_CACHE_DIR), kept from one server to the next as a
    restarted server keeps its own: a trace or pair another test analysed opens from it, verified (a cache hit
    equals the analysis: tests/cache/). Without it each test parsed and compared the sample again and wrote the
    result's entry again (about 0.2 s of CPU each, 10 s in all). A test about the first analysis of a pair takes
    cold_caches."""
    return tmp_path_factory.mktemp("tables")


@pytest.fixture
def cold_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's server has empty on-disk caches of its own: every trace it opens is parsed and compared."""
    monkeypatch.setenv("FUSION_CACHE_DIR", str(tmp_path / "tables"))


@pytest.fixture(autouse=True)
def fresh_server(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    components_scanned_once: None,
    runs_waited_for: None,
    disk_caches: Path,
) -> Iterator[Path]:
    """Each test is a freshly started server: its own empty store and no traces or comparisons in memory, the
    module's on-disk caches (disk_caches); it may open the shared traces and the tests' temporary files by path
    (FUSION_TRACE_ROOTS). What does not change from one server to the next on this machine (the installed
    components) is scanned once in the module; numba's cache is checked once per process by the app itself
    (ui.data.compiled_code)."""
    store = tmp_path / "store"
    monkeypatch.setenv("FUSION_STORE_DIR", str(store))
    monkeypatch.setenv("FUSION_CACHE_DIR", str(disk_caches))
    monkeypatch.setenv("FUSION_TRACE_ROOTS", os.pathsep.join([str(SHARED), str(tmp_path_factory.getbasetemp())]))
    for name in ("FUSION_HOSTED", "FUSION_MAX_UPLOAD_MB"):
        monkeypatch.delenv(name, raising=False)
    st.cache_resource.clear()
    yield store
    st.cache_resource.clear()


@pytest.fixture(scope="module")
def expected():
    """The comparison the app should show, computed straight from the library."""
    return compare(load(SAMPLE_DIR / "amd.json.gz"), load(SAMPLE_DIR / "nvidia.json.gz"), min_group_size=50)


def run(script: str, **params: str) -> AppTest:
    at = AppTest.from_file(str(ROOT / script), default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def ratio_picture(at: AppTest) -> str:
    """The SVG text of the home page's ratio picture (widgets.picture: an img with a base64 data URL, in st.html)."""
    (url,) = [
        found
        for element in at.get("html")
        for found in re.findall(r'src="data:image/svg\+xml;base64,([^"]+)"', element.proto.body)
    ]
    return base64.b64decode(url).decode()


def metrics(at: AppTest) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for metric in at.metric:
        found.setdefault(metric.label, []).append(metric.value)
    return found


def unescaped(markdown: str) -> str:
    """Markdown source as the reader sees it (backslash escapes removed)."""
    return re.sub(r"\\(.)", r"\1", markdown)


def sample_bytes(name: str) -> bytes:
    return (SAMPLE_DIR / name).read_bytes()


def upload_both(first: bytes, second: bytes) -> AppTest:
    at = run("app.py")
    at.radio(key="mode").set_value("Upload files").run()
    at.file_uploader[0].set_value(("amd.json.gz", first, "application/gzip")).run()
    at.file_uploader[1].set_value(("nvidia.json.gz", second, "application/gzip")).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_fresh_start_opens_the_sample_with_its_numbers(cold_caches: None, expected) -> None:
    at = run("app.py")
    assert at.query_params["sample"] == [SAMPLE] or at.query_params["sample"] == SAMPLE
    shown = metrics(at)
    assert shown["Kernels"] == [f"{expected.trace1.kernel_count:,}", f"{expected.trace2.kernel_count:,}"]
    compared = next(m.value for m in at.markdown if m.value.startswith("**Compared:**"))
    assert f"{expected.metadata['matched_groups']:,} matched pairs of graph\\-launch groups" in compared
    assert not at.error
    assert f"sample={SAMPLE}" in at.text_input(key="share_home").value


def test_rerun_uses_the_cache() -> None:
    at = run("app.py")
    started = time.perf_counter()
    at.run()
    assert time.perf_counter() - started < 1.5
    assert not at.exception


@pytest.mark.parametrize("page", PAGES)
def test_every_page_opens_directly_from_a_link(page: str) -> None:
    at = run(page, sample=SAMPLE)
    assert not at.error, [e.value for e in at.error]
    assert at.title[0].value in page


def test_overview_table_holds_the_type_stats(expected) -> None:
    at = run("pages/1_Overview.py", sample=SAMPLE)
    table = at.dataframe[0].value
    stats = expected.type_stats
    for kernel_type in table.index:
        assert table.loc[kernel_type, "trace 1 count"] == stats.loc[kernel_type, "trace1_count"]
        assert table.loc[kernel_type, "trace 2 count"] == stats.loc[kernel_type, "trace2_count"]


def test_fusion_page_shows_each_mapping(expected) -> None:
    at = run("pages/2_Fusion.py", sample=SAMPLE)
    confidences = metrics(at).get("Confidence", [])
    assert confidences == [f"{m.pattern_confidence:.0%}" for m in expected.mappings]
    text = " ".join(m.value for m in at.markdown)
    for mapping in expected.mappings:
        assert mapping.fused_kernel_type in text


def test_groups_page_opens_the_linked_pair(expected) -> None:
    pair = expected.pairs.iloc[min(1, len(expected.pairs) - 1)]
    ref = expected.mappings[0].evidence_refs[0]
    at = run(
        "pages/3_Groups.py",
        sample=SAMPLE,
        pair=str(int(pair["pair_id"])),
        w1=f"{ref.window1[0]}-{ref.window1[1]}",
        w2=f"{ref.window2[0]}-{ref.window2[1]}",
    )
    assert at.selectbox(key="pair_pick").value == int(pair["pair_id"])
    shown = metrics(at)
    assert shown["Kernels, trace 1"] == [f"{int(pair['size1']):,}"]
    assert shown["Kernels, trace 2"] == [f"{int(pair['size2']):,}"]


def test_groups_type_filter_lists_only_pairs_that_differ(expected) -> None:
    kernel_type = expected.opportunities[0].kernel_type
    at = run("pages/3_Groups.py", sample=SAMPLE, type=kernel_type)
    assert at.selectbox(key="type_filter").value == kernel_type
    listed = at.dataframe[0].value
    assert set(listed["pair"]) == set(expected.pairs_with_difference(kernel_type)["pair_id"])
    assert (listed["type count 1 − 2"] != 0).all()


@pytest.mark.parametrize("side", [1, 2])
def test_kernels_page_lists_every_name_and_draws_time_per_type(expected, side: int) -> None:
    at = run("pages/4_Kernels.py", sample=SAMPLE, tab=str(side))
    assert not at.error, [e.value for e in at.error]
    names = at.dataframe[0].value
    assert len(names) == len(expected.trace(side).names)
    other = names["type"] == "Other"
    assert not other.any() or other.iloc[: other.sum()].all()
    assert any("FUSION_RULES" in c.value for c in at.caption)
    (chart,) = at.get("plotly_chart")
    bars = orjson.loads(chart.proto.spec)["data"][0]
    per_type = expected.trace(side).names.groupby("type", observed=True)["time_us"].sum()
    assert bars["y"] == list(per_type.sort_values().index.astype(str))


def test_upload_stores_by_digest_and_the_link_reopens_on_a_fresh_server(expected, fresh_server: Path) -> None:
    first, second = sample_bytes("amd.json.gz"), sample_bytes("nvidia.json.gz")
    at = upload_both(first, second)
    digests = hashlib.sha256(first).hexdigest(), hashlib.sha256(second).hexdigest()
    params = {key: at.query_params[key] for key in ("t1", "t2")}
    assert [str(v[0] if isinstance(v, list) else v) for v in params.values()] == list(digests)
    assert sorted(p.name for p in fresh_server.iterdir()) == sorted(digests)
    assert metrics(at)["Kernels"][0] == f"{expected.trace1.kernel_count:,}"

    st.cache_resource.clear()
    groups = run("pages/3_Groups.py", t1=digests[0], t2=digests[1])
    assert not groups.error
    assert metrics(groups)["Kernels, trace 1"] == [f"{int(expected.pairs.iloc[0]['size1']):,}"]


@pytest.mark.parametrize(
    ("content", "problem"),
    [(b"this is not json", "json"), (b"", "empty"), (b"\x1f\x8b\x08\x00garbage", "gzip")],
)
def test_a_bad_upload_shows_its_message_in_place(content: bytes, problem: str) -> None:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.radio(key="mode").set_value("Upload files").run()
    at.file_uploader[0].set_value(("broken.json", content, "application/json")).run()
    assert not at.exception
    messages = [unescaped(e.value) for e in at.error]
    assert any("broken.json" in m and problem in m.lower() for m in messages), messages
    at.file_uploader[1].set_value(("nvidia.json.gz", sample_bytes("nvidia.json.gz"), "application/gzip")).run()
    assert not at.exception
    assert "t2" in at.query_params and "t1" not in at.query_params
    assert any("broken.json" in unescaped(e.value) for e in at.error)


def test_two_uploads_of_one_file_name_are_told_apart_by_gpu_and_digest() -> None:
    """Both vendors' traces are often <model>__<id>.json.gz: their chips look alike (issue 38 #5)."""
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.radio(key="mode").set_value("Upload files").run()
    for side, name in enumerate(("amd.json.gz", "nvidia.json.gz")):
        at.file_uploader[side].set_value(("Qwen__1016005.json.gz", sample_bytes(name), "application/gzip")).run()
    captions = [unescaped(c.value) for c in at.caption if "· stored " in c.value]
    assert len(captions) == 2 and captions[0] != captions[1]
    assert captions[0].startswith("Trace 1 · AMD Instinct MI300X · Qwen__1016005.json.gz · stored ")
    assert captions[1].startswith("Trace 2 · NVIDIA H100 80GB HBM3 · Qwen__1016005.json.gz · stored ")


def test_truncated_upload_is_reported() -> None:
    at = upload_both(sample_bytes("amd.json.gz")[:5000], sample_bytes("nvidia.json.gz"))
    assert any("amd.json.gz" in unescaped(e.value) and "truncated" in e.value for e in at.error), [
        e.value for e in at.error
    ]


def test_swap_and_min_group_size_go_into_the_link(expected) -> None:
    at = run("app.py")
    at.button[0].click().run()
    assert at.query_params["swap"] in ("1", ["1"])
    assert metrics(at)["Kernels"] == [f"{expected.trace2.kernel_count:,}", f"{expected.trace1.kernel_count:,}"]
    at.number_input(key="mgs").set_value(5).run()
    assert at.query_params["mgs"] in ("5", ["5"])
    smaller = compare(expected.trace2, expected.trace1, min_group_size=5)
    compared = next(m.value for m in at.markdown if m.value.startswith("**Compared:**"))
    assert f"{smaller.metadata['matched_groups']:,} matched pairs" in compared


def test_labels_are_editable_and_shared() -> None:
    at = run("app.py")
    at.text_input(key="label1").set_value("MI300X run").run()
    assert at.query_params["l1"] in ("MI300X run", ["MI300X run"])
    assert any("MI300X run" in m.value for m in at.markdown)


def test_server_paths_work_locally(eager_pair: tuple[str, str]) -> None:
    nvidia, amd = (Path(p) for p in eager_pair)
    at = run("app.py", p1=str(amd), p2=str(nvidia))
    assert at.radio(key="mode").value == "Server path"
    compared = compare(load(amd), load(nvidia))  # kernels without a launch event are left out by default
    assert metrics(at)["Kernels"] == [f"{compared.trace1.kernel_count:,}", f"{compared.trace2.kernel_count:,}"]
    missing = run("app.py", p1="/nonexistent/trace.json", p2=str(nvidia))
    assert any("/nonexistent/trace.json" in unescaped(e.value) for e in missing.error)


def test_the_verdict_says_what_was_left_out_and_a_toggle_keeps_it(eager_pair: tuple[str, str]) -> None:
    """Issue 39 #2: about 31% of each Qwen trace's kernel time has no launch event; the page warns naming it, and
    the toggle the warning names keeps those kernels (in the link too)."""
    nvidia, amd = (Path(p) for p in eager_pair)
    at = run("app.py", p1=str(amd), p2=str(nvidia))
    shown = "\n".join(unescaped(w.value) for w in at.warning)
    assert (
        "31% of trace 1's kernel time and 30% of trace 2's (463 and 509 kernels" in shown
    )  # H100: 436 kernels, 73 memsets
    assert "'Keep kernels without a launch event'" in shown
    at.toggle(key="keep").set_value(True).run()
    assert at.query_params["keep"] in ("1", ["1"])
    assert not any("max_left_out_share" in unescaped(w.value) for w in at.warning)
    kept = compare(load(amd), load(nvidia), keep_unlaunched=True)
    assert metrics(at)["Kernels"] == [f"{kept.trace1.kernel_count:,}", f"{kept.trace2.kernel_count:,}"]
    assert run("app.py", p1=str(amd), p2=str(nvidia), keep="1").toggle(key="keep").value is True


def test_local_mode_opens_no_server_path_outside_the_allowed_folders(tmp_path: Path, monkeypatch) -> None:
    """?p1=/etc/passwd&p2=/etc/shadow answered 'not valid JSON': both files were read (issue 40 #6). Now the answer
    is the same for a file that exists and one that does not, and nothing is opened."""
    opened = []
    monkeypatch.setattr("fusion.loader.reader._open_path", lambda path, label: opened.append(path))
    at = run("app.py", p1="/etc/passwd", p2="/etc/no-such-file")
    messages = sorted(unescaped(e.value) for e in at.error)
    assert messages == sorted(f"{p}: {NOT_ALLOWED}" for p in ("/etc/passwd", "/etc/no-such-file"))
    outside = tmp_path / "inside"
    outside.symlink_to("/etc/passwd")
    monkeypatch.setenv("FUSION_TRACE_ROOTS", str(tmp_path / "elsewhere"))
    monkeypatch.chdir(tmp_path)
    at = run("pages/4_Kernels.py", p1=str(outside), p2="inside")
    assert sorted(unescaped(e.value) for e in at.error) == sorted(
        f"Trace {s}: {p}: {NOT_ALLOWED}" for s, p in ((1, outside), (2, "inside"))
    )
    assert opened == []


def test_hosted_mode_hides_paths_and_ignores_path_links(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSION_HOSTED", "1")
    at = run("app.py", p1="/etc/passwd", p2="/etc/hostname")
    assert "Server path" not in at.radio(key="mode").options
    assert "p1" not in at.query_params and "p2" not in at.query_params
    assert not any("passwd" in e.value for e in at.error)
    page = run("pages/4_Kernels.py", p1="/etc/passwd", p2="/etc/hostname")
    assert not any("passwd" in str(e.value) for e in page.error)


@pytest.mark.parametrize("page", ["app.py", *PAGES])
def test_an_unknown_hosted_word_stops_the_app_with_one_line(monkeypatch: pytest.MonkeyPatch, page: str) -> None:
    """FUSION_HOSTED=enabled is neither on nor off: nothing is drawn, least of all a server-path input (issue 40 #5)."""
    monkeypatch.setenv("FUSION_HOSTED", "enabled")
    at = run(page, p1="/etc/passwd", p2="/etc/hostname")
    assert [unescaped(e.value) for e in at.error] == [
        "FUSION_HOSTED='enabled': must be one of 1, true, yes, on (on) or 0, false, no, off (off)"
    ]
    assert not at.radio and not at.text_input and not at.dataframe and not at.metric


def test_hosted_upload_cap_is_checked_before_parsing(monkeypatch: pytest.MonkeyPatch, fresh_server: Path) -> None:
    monkeypatch.setenv("FUSION_HOSTED", "1")
    monkeypatch.setenv("FUSION_MAX_UPLOAD_MB", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.radio(key="mode").set_value("Upload files").run()
    at.file_uploader[0].set_value(("amd.json", b" " * 1_100_000, "application/json")).run()
    assert any("upload limit" in e.value for e in at.error)
    assert not fresh_server.exists() or not any(fresh_server.iterdir())


def test_unknown_digest_and_sample_explain_themselves() -> None:
    at = run("pages/1_Overview.py", t1="0" * 64, t2="1" * 64)
    assert any("does not have" in e.value for e in at.error)
    at = run("app.py", sample="no_such_sample")
    assert any(md_text("no_such_sample") in e.value for e in at.error)


@pytest.mark.parametrize("label", ["**bold**lab", "[click](https://evil.example) <b>x</b> `tick` $x$ :red[r]"])
def test_labels_from_a_link_show_literally_and_inject_no_markup(label: str) -> None:
    """Every character the user typed is shown as typed (issue 40 #4), escaped for markdown."""
    at = run("app.py", sample=SAMPLE, l1=label)
    assert at.text_input(key="label1").value == label
    shown = [m.value for m in at.markdown if md_text(label) in m.value]
    assert len(shown) >= 2  # the headline and the sidebar
    assert not any(label in m for m in shown)
    kernels = run("pages/4_Kernels.py", sample=SAMPLE, l1=label)
    assert f"Trace 1: {md_text(label)}" in [option.content for option in kernels.get("button_group")[0].proto.options]


def test_names_from_an_uploaded_trace_are_shown_as_text() -> None:
    gpu = "[click](https://evil.example) :red[x]"
    data = gzip.decompress(sample_bytes("amd.json.gz")).replace(b'"AMD Instinct MI300X"', orjson.dumps(gpu), 1)
    at = upload_both(data, sample_bytes("nvidia.json.gz"))
    texts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    assert any(md_text(gpu) in text for text in texts)
    assert not any(gpu in text for text in texts)


# --- issue 12: eager pairs, selectors, links, exports; issue 10: links, folders, upload cap ------------

QWEN = ("tl_h100_qwen1.5-0.5b", "tl_mi300_qwen1.5-0.5b")


@pytest.fixture(scope="module")
def eager_pair() -> tuple[str, str]:
    """A real eager H100 vs MI300X pair (every kernel its own correlation id: only stream windows), H100 first; the
    test skips unless both traces are there."""
    paths = [next((SHARED / name).glob("*.json.gz"), None) if (SHARED / name).is_dir() else None for name in QWEN]
    if None in paths:
        pytest.skip(shared_absent(SHARED))
    return str(paths[0]), str(paths[1])


@pytest.fixture(scope="module")
def eager_expected(eager_pair: tuple[str, str]):
    """The eager pair's comparison (H100 first), straight from the library, made once for the tests that read it."""
    return compare(load(eager_pair[0]), load(eager_pair[1]))


def test_fusion_page_says_when_the_traces_run_different_workloads() -> None:
    """Two different shared models: the page leads with why, and lists no finding."""
    folders = [SHARED / "tl_h100_bert_small", SHARED / "tl_h100_timesformer"]
    if not all(f.is_dir() for f in folders):
        pytest.skip(shared_absent(SHARED))
    paths = [str(next(f.glob("*.json.gz"))) for f in folders]
    at = run("pages/2_Fusion.py", p1=paths[0], p2=paths[1])
    (warning,) = [unescaped(w.value) for w in at.warning if "not the same workload" in unescaped(w.value)]
    assert "BertLMHeadModel" in warning and "TimesformerForVideoClassification" in warning
    assert any("No fused kernel was found" in unescaped(i.value) for i in at.info)


def test_eager_pair_home_says_what_was_compared_and_shows_one_sided_kernels(eager_pair, eager_expected) -> None:
    at = run("app.py", p1=eager_pair[0], p2=eager_pair[1])
    expected = eager_expected
    text = " ".join(m.value for m in at.markdown)
    assert f"{expected.metadata['stream_windows']} stream windows" in text
    assert "Groups" not in metrics(at) and "Matched groups" not in metrics(at)
    assert expected.one_sided and "Kernels on one side only" in text
    for note in expected.one_sided:
        assert f"trace {note.side}: {note.count:,} × ` {note.kernel_type} `" in text
    assert not any("No fusion difference" in c.value for c in at.caption)
    picture = ratio_picture(at)
    for kernel_type, row in expected.type_stats.iterrows():
        assert f">{kernel_type}</text>" in picture
        assert (
            f">{row['count_ratio']:.2f}×</text>" in picture or f">only in trace {int(row['only_in'])}</text>" in picture
        )
    assert not at.get("plotly_chart"), "the home page loads no chart library"


def test_eager_pair_drill_down_from_a_type_to_aligned_names(eager_pair, eager_expected) -> None:
    expected = eager_expected
    kernel_type = next(
        t
        for t in expected.type_stats.index
        if expected.type_stats.loc[t, "trace1_count"] != expected.type_stats.loc[t, "trace2_count"]
    )
    at = run("pages/3_Groups.py", p1=eager_pair[0], p2=eager_pair[1], type=kernel_type)
    assert not any("No pair has" in i.value for i in at.info)
    listed = at.dataframe[0].value
    differing = expected.pairs_with_difference(kernel_type)
    assert len(differing) and set(listed["pair"]) == set(differing["pair_id"])
    assert set(listed["kind"]) == {"stream window"} and (listed["type count 1 − 2"] != 0).all()
    first = int(listed["pair"].iloc[0])
    assert at.selectbox(key="pair_pick").value == first
    aligned = at.dataframe[1].value
    columns = list(aligned.columns)
    assert columns.index("type 2") < columns.index("kernel name, trace 1") < columns.index("kernel name, trace 2")
    both = aligned[(aligned["kernel name, trace 1"] != "") & (aligned["kernel name, trace 2"] != "")]
    names1, names2 = ({short_name(n) for n in t.names.index} for t in (expected.trace1, expected.trace2))
    assert len(both) and set(both["kernel name, trace 1"]) <= names1 and set(both["kernel name, trace 2"]) <= names2
    assert any(name.count("…") for name in both["kernel name, trace 1"]), "long names are shortened"
    assert any(SELECT_FOR_FULL_NAME in c.value for c in at.caption)
    charts = len(at.get("plotly_chart"))
    assert not [r for r in at.radio if r.key == "time_axis"], "the timeline is drawn on request"
    at.toggle(key="show_timeline").set_value(True).run()
    assert at.radio(key="time_axis").value.startswith("kernels only")
    assert len(at.get("plotly_chart")) == charts + 1


def test_the_groups_timeline_has_a_legend_of_its_types() -> None:
    """Issue 39 #4: the timeline coloured its bars by type with no legend."""
    at = run("pages/3_Groups.py", sample=SAMPLE, pair="0")
    at.toggle(key="show_timeline").set_value(True).run()
    spec = orjson.loads(at.get("plotly_chart")[-1].proto.spec)
    bars = [t for t in spec["data"] if t["type"] == "bar"]
    legend = {t["name"]: t["marker"]["color"] for t in spec["data"] if t.get("showlegend")}
    colours = {c for bar in bars for c in bar["marker"]["color"]}
    assert legend and set(legend.values()) == colours  # every colour drawn is named, and no other
    assert legend == {t: ui_charts.type_color(t) for t in legend}


def test_type_filter_and_pair_pick_reset_by_the_view_rules(expected) -> None:
    at = run("pages/3_Groups.py", sample=SAMPLE, pair="3", w1="1-2", w2="1-2")
    kernel_type = expected.opportunities[0].kernel_type
    at.selectbox(key="type_filter").set_value(kernel_type).run()
    params = at.query_params
    assert params["type"] in (kernel_type, [kernel_type]) and "pair" not in params and "w1" not in params


def test_pair_table_and_pair_box_show_the_same_pair(expected) -> None:
    ref = expected.mappings[0].evidence_refs[0]
    at = run(
        "pages/3_Groups.py",
        sample=SAMPLE,
        pair=str(ref.pair_id),
        w1=f"{ref.window1[0]}-{ref.window1[1]}",
        w2=f"{ref.window2[0]}-{ref.window2[1]}",
    )
    listed = at.dataframe[0].value["pair"].tolist()
    assert at.session_state["pairs_table"]["selection"]["rows"] == [listed.index(ref.pair_id)]
    other = next(p for p in listed if p != ref.pair_id)
    at.selectbox(key="pair_pick").set_value(other).run()
    assert at.session_state["pairs_table"]["selection"]["rows"] == [listed.index(other)]
    assert at.query_params["pair"] in (str(other), [str(other)]) and "w1" not in at.query_params
    assert metrics(at)["Kernels, trace 1"] == [f"{int(expected.pairs.set_index('pair_id').loc[other, 'size1']):,}"]


def test_the_drill_down_from_a_type_lands_on_that_types_rows(expected) -> None:
    """Overview -> 'Memset -> pairs' opened the aligned kernels at row 0 with an empty evidence column (issue 38
    #2): the rows of the type are marked and shown first."""
    kernel_type = next(t for t in tables.differing_types(expected.type_stats) if t != "GEMM")
    at = run("pages/3_Groups.py", sample=SAMPLE, type=kernel_type)
    aligned = next(d.value for d in at.dataframe if "evidence" in d.value.columns)
    marked = aligned["evidence"] == "◆"
    assert marked.iloc[:6].any(), "the first marked row is shown after at most 5 rows of context"
    assert ((aligned["type 1"] == kernel_type) | (aligned["type 2"] == kernel_type))[marked].all()
    assert any("kernel on either side" in i.value for i in at.info)


def test_kernels_tab_and_filter_round_trip_through_the_link(expected) -> None:
    at = run("pages/4_Kernels.py", sample=SAMPLE, tab="2", q="gemm")
    assert [group.value for group in at.get("button_group")] == ["2"]
    assert at.text_input(key="name_filter").value == "gemm"
    shown = at.dataframe[0].value
    names = expected.trace2.names.index
    assert len(shown) == sum("gemm" in n.lower() for n in names) > 0
    at.text_input(key="name_filter").set_value("sort").run()
    assert at.query_params["q"] in ("sort", ["sort"]) and at.query_params["tab"] in ("2", ["2"])
    joined = run("pages/4_Kernels.py", sample=SAMPLE, q="sort").dataframe[0].value
    assert {"kernel name, trace 1", "kernel name, trace 2"} <= set(joined.columns) and len(joined)
    hit = joined["kernel name, trace 1"].str.contains("sort", case=False) | joined["kernel name, trace 2"].str.contains(
        "sort", case=False
    )
    assert hit.all()


def test_csv_zip_holds_one_sided_kernels_and_pairs_without_float_noise(expected) -> None:
    import io
    import re
    import zipfile

    archive = zipfile.ZipFile(io.BytesIO(tables.csv_zip(expected)))
    names = set(archive.namelist())
    assert {
        "one_sided_kernels.csv",
        "matched_pairs.csv",
        "type_stats.csv",
        "mappings.csv",
        "opportunities.csv",
    } <= names
    one_sided = archive.read("one_sided_kernels.csv").decode()
    assert all(note.kernel_type in one_sided for note in expected.one_sided)
    assert len(archive.read("matched_pairs.csv").decode().strip().splitlines()) == len(expected.pairs) + 1
    for name in names:
        assert not re.search(r"\d\.\d{4,}", archive.read(name).decode()), name


def test_the_dashboards_csv_zip_holds_no_cell_a_spreadsheet_would_evaluate(tmp_path: Path) -> None:
    import csv
    import io
    import zipfile

    from builders import FORMULAS, formula_cells, write_formula_pair

    comparison = compare(*(load(path) for path in write_formula_pair(tmp_path)), min_group_size=5)
    archive = zipfile.ZipFile(io.BytesIO(tables.csv_zip(comparison)))
    texts = {name: archive.read(name).decode() for name in archive.namelist()}
    assert len(texts) == 6 and all(formula_cells(text) == [] for text in texts.values())
    ops = csv.DictReader(io.StringIO(texts["ops.csv"], newline=""))
    assert sorted(row["op"] for row in ops) == sorted("'" + formula for formula in FORMULAS)


def test_a_damaged_link_says_so_and_echoes_nothing() -> None:
    at = run("pages/1_Overview.py", t1="not-a-digest", t2="1" * 64)
    assert any("damaged" in w.value and "t1" in w.value for w in at.warning)
    huge = "x" * 100_000
    at = run("app.py", sample=huge)
    shown = " ".join([e.value for e in at.error] + [w.value for w in at.warning] + [m.value for m in at.markdown])
    assert "damaged" in shown and "x" * 100 not in shown


def test_the_sample_is_served_with_unwritable_cache_and_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, expected
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv("FUSION_CACHE_DIR", str(blocked / "tables"))
    monkeypatch.setenv("FUSION_STORE_DIR", str(blocked / "store"))
    monkeypatch.setenv("FUSION_HOSTED", "1")
    at = run("app.py", sample=SAMPLE)
    assert metrics(at)["Kernels"] == [f"{expected.trace1.kernel_count:,}", f"{expected.trace2.kernel_count:,}"]
    notes = unescaped(" ".join(c.value for c in at.caption))
    assert "cannot be written" in notes and "results are unaffected" in notes and str(tmp_path) not in notes
    page = run("pages/3_Groups.py", sample=SAMPLE)
    assert not page.error


def test_the_configured_upload_cap_is_the_one_the_server_enforces(monkeypatch: pytest.MonkeyPatch) -> None:
    from streamlit import config

    before = config.get_option("server.maxUploadSize")
    monkeypatch.setenv("FUSION_MAX_UPLOAD_MB", "100")
    try:
        run("app.py")
        assert config.get_option("server.maxUploadSize") == 96  # 100 MB in MiB, rounded up
    finally:
        config.set_option("server.maxUploadSize", before)


def test_ratio_charts_of_a_close_pair_span_half_to_double(eager_pair) -> None:
    import json

    at = run("pages/1_Overview.py", p1=eager_pair[0], p2=eager_pair[1])
    specs = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    ratio_axes = [spec["layout"]["yaxis"] for spec in specs if "ticktext" in spec["layout"].get("yaxis", {})]
    assert len(ratio_axes) == 2
    for axis in ratio_axes:
        assert axis["range"][0] == -axis["range"][1] and axis["range"][1] >= 1
        assert {"1/2", "1×", "2×"} <= set(axis["ticktext"])


@pytest.fixture(scope="module")
def serving_pair(tmp_path_factory) -> tuple[str, str]:
    """A generated serving pair, 4 + 3 and 1 + 3 prefill + decode steps, a different fusion in each phase."""
    from fusion.synthetic.phases import ServingSpec, write_serving_pair

    paths = write_serving_pair(tmp_path_factory.mktemp("serving"), ServingSpec(schedule1="PPPPDDD", schedule2="PDDD"))
    return str(paths[0]), str(paths[1])


def test_the_phase_selector_compares_one_phase_and_the_link_keeps_it(serving_pair) -> None:
    at = run("app.py", p1=serving_pair[0], p2=serving_pair[1])
    pick = at.sidebar.selectbox(key="phase_pick")
    assert pick.options == ["prefill (4 vs 1 steps)", "decode (3 vs 3 steps)", "all phases (7 vs 4 steps)"]
    assert pick.value == "all" and not at.get("plotly_chart"), "the step timeline is drawn on request"
    at.toggle(key="show_steps").set_value(True).run()
    assert len(at.get("plotly_chart")) == 1
    pick.set_value("decode").run()
    assert at.query_params["phase"] == "decode"
    decode = compare(load(serving_pair[0]), load(serving_pair[1]), phase="decode")
    assert metrics(at)["Kernels"] == [f"{decode.trace1.kernel_count:,}", f"{decode.trace2.kernel_count:,}"]
    reopened = run("pages/2_Fusion.py", p1=serving_pair[0], p2=serving_pair[1], phase="decode")
    assert reopened.sidebar.selectbox(key="phase_pick").value == "decode"
    numbered = [m.value for m in reopened.markdown if m.value.startswith("**") and ".** " in m.value]
    assert len(decode.mappings) == len(numbered) == 1 and "RMSNorm" in numbered[0]


def test_findings_and_types_say_in_which_phase_they_differ(serving_pair) -> None:
    home = run("app.py", p1=serving_pair[0], p2=serving_pair[1])
    findings = [unescaped(m.value) for m in home.markdown if "confidence" in m.value]
    assert sorted(line.split("unfused extra time · in ")[1].split("\n")[0] for line in findings) == [
        "decode",
        "prefill",
    ]
    overview = run("pages/1_Overview.py", p1=serving_pair[0], p2=serving_pair[1])
    by_phase = overview.dataframe[1].value
    assert (
        list(by_phase.columns) == ["prefill", "decode"]
        and by_phase.loc["Attention", "prefill"] == "24 vs 6 · 1.00× per step"
    )


def test_a_linked_phase_the_pair_lacks_says_so_and_shows_all_phases(serving_pair) -> None:
    at = run("pages/1_Overview.py", p1=serving_pair[0], p2=serving_pair[1], phase="backward")
    assert any("cannot be compared on phase 'backward'" in unescaped(w.value) for w in at.warning)
    assert at.sidebar.selectbox(key="phase_pick").value == "all" and "phase" not in at.query_params


@pytest.fixture(scope="module")
def op_pair(tmp_path_factory) -> tuple[str, str]:
    """Eager traces with CPU ops whose layer_norm calls launch 2 kernels on trace 1 and 1 on trace 2."""
    from builders import write_op_pair

    return tuple(str(p) for p in write_op_pair(tmp_path_factory.mktemp("ops")))


def test_ops_page_lists_ops_and_the_op_view_shows_what_each_call_launched(op_pair) -> None:
    at = run("pages/5_Ops.py", p1=op_pair[0], p2=op_pair[1])
    listed = at.dataframe[0].value
    assert set(listed["op"]) == {"aten::layer_norm", "aten::mm"} and (listed[["calls 1", "calls 2"]] == 6).all().all()
    opener = next(b for b in at.button if unescaped(b.label).startswith("aten::layer_norm:"))
    opener.click().run()
    assert at.query_params["op"] == "aten::layer_norm"
    at = run("pages/5_Ops.py", p1=op_pair[0], p2=op_pair[1], op="aten::layer_norm")
    launched = [d.value for d in at.dataframe][1:]
    assert launched[0]["kernels, in launch order"].tolist() == ["layer_norm_stats → layer_norm_fwd"]
    assert launched[1]["kernels, in launch order"].tolist() == ["layer_norm_fwd"]
    assert [m.value for m in at.metric if m.label == "Calls"] == ["6", "6"]


def test_ops_page_lists_an_op_with_an_extra_zero_fill_as_extra_work(eager_pair) -> None:
    """On the real Qwen pair MI300X's attention op launches a Memset more per call: an op-level finding of kind
    extra work, never a fusion."""
    at = run("pages/5_Ops.py", p1=eager_pair[0], p2=eager_pair[1])
    (button,) = [b for b in at.button if unescaped(b.label).startswith("aten::scaled_dot_product_attention")]
    assert "(extra work)" in unescaped(button.label) and "fuse" not in unescaped(button.label)


def test_an_op_finding_whose_fused_side_runs_two_kernels_is_not_called_one_kernel(tmp_path: Path) -> None:
    """Trace 1's linear launches GEMM, add, add; trace 2's GEMM, add: trace 2 runs 2 kernels, not one."""
    from builders import EagerTrace, Launch, Op

    add = (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>,"
        " std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"
    )
    kernels = {
        "AMD": ["Cijk_Alik_Bljk_BBS_BH_MT256x128x64_MI16x16x8_SN_LDSB1_AFC1", add, add],
        "NVIDIA": ["sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_execute_kernel__5x_cublas", add],
    }
    paths = []
    for platform, names in kernels.items():
        builder = EagerTrace(platform)
        builder.run(*[Op("aten::linear", [Launch(name, 5.0) for name in names]) for _ in range(6)])
        paths.append(tmp_path / f"{platform}.json")
        paths[-1].write_bytes(builder.data())
    text = " ".join(m.value for m in run("app.py", p1=str(paths[0]), p2=str(paths[1])).markdown)
    assert "runs 2 kernels (` GEMM + Elementwise `) where" in text and "aten::linear" in text
    assert "runs one ` GEMM + Elementwise ` kernel" not in text


def test_fusion_and_ops_pages_list_ops_alike(op_pair) -> None:
    """One op list on both pages: canonical op and its spelling, both sides' calls and times in ms, no raw keys."""
    tables = [
        run(page, p1=op_pair[0], p2=op_pair[1]).dataframe[0].value for page in ("pages/2_Fusion.py", "pages/5_Ops.py")
    ]
    assert list(tables[0].columns) == list(tables[1].columns)
    assert {"op", "as spelled", "calls 1", "time 1 (ms)", "gap 1 − 2 (ms)"} <= set(tables[0].columns)
    assert not any(column.startswith("trace1_") for column in tables[0].columns)
    assert tables[0]["time 1 (ms)"].sum() == pytest.approx(6 * (1.0 + 4.0 + 9.0) / 1000)


def test_findings_link_to_their_op_and_an_unknown_op_is_said_as_text(op_pair) -> None:
    fusion = run("pages/2_Fusion.py", p1=op_pair[0], p2=op_pair[1])
    assert any("/Ops?" in m.value and "op=aten%3A%3Alayer_norm" in m.value for m in fusion.markdown)
    unknown = run("pages/5_Ops.py", p1=op_pair[0], p2=op_pair[1], op="<img src=x onerror=alert(1)>")
    assert [unescaped(w.value) for w in unknown.warning] == [
        "The op ` <img src=x onerror=alert(1)> ` is not among these traces' launching ops."
    ]


def test_ops_page_on_graph_replays_says_there_are_no_ops() -> None:
    at = run("pages/5_Ops.py", sample=SAMPLE)
    assert any("record no CPU ops" in i.value for i in at.info)


# --- issue 15: the Batch page ---------------------------------------------------------------------------

from urllib.parse import parse_qsl, urlsplit  # noqa: E402

import pandas as pd  # noqa: E402

BATCH_PAGE = "pages/6_Batch.py"


@pytest.fixture
def batches(batch_with_a_failure: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The server's batch folder holds the real batch result `run1`."""
    monkeypatch.setenv("FUSION_BATCH_DIR", str(batch_with_a_failure.parent))
    return batch_with_a_failure.parent


def pair_links(at: AppTest) -> dict[str, str | None]:
    table = at.dataframe[0].value
    return dict(zip(table["label"], table["comparison"]))


def open_link(href: str) -> AppTest:
    """Follow a row's link the way the browser does: './?query' from the Batch page is the home page."""
    parts = urlsplit(href)
    assert parts.path == "./"
    return run("app.py", **dict(parse_qsl(parts.query)))


def test_batch_page_lists_the_servers_batch_results(batches: Path) -> None:
    at = run(BATCH_PAGE)
    listed = [m.value for m in at.markdown if "run1" in m.value]
    assert listed and "5 pairs, 1 failed" in listed[0] and "batch=run1" in listed[0]


def test_batch_page_shows_each_pair_with_its_differences_and_the_findings_across_ranks(batches: Path) -> None:
    at = run(BATCH_PAGE, batch="run1")
    assert not at.error
    table = at.dataframe[0].value.set_index("label")
    assert list(table.index) == ["rank0", "rank1", "rank2", "rank3", "broken"]
    assert table.loc["broken", "status"] == "failed" and "broken.json" in table.loc["broken", "message"]
    assert table.loc["rank0", "findings"] > 0
    assert table.loc["rank0", "headline"].startswith("Trace 1 runs Sort as 4 kernels, Trace 2 as 1 x"), (
        "a split fuses nothing"
    )
    assert table.loc["rank3", "findings"] == 0 and pd.isna(table.loc["broken", "comparison"])
    findings = at.dataframe[1].value
    assert len(findings) and set(findings["holds on"]) == {"some ranks"}


def test_batch_filters_are_in_the_link(batches: Path) -> None:
    at = run(BATCH_PAGE, batch="run1", bs="failed")
    assert list(at.dataframe[0].value["label"]) == ["broken"]
    at = run(BATCH_PAGE, batch="run1")
    at.text_input(key="batch_filter").set_value("rank2").run()
    assert at.query_params["bq"] in ("rank2", ["rank2"]) and list(at.dataframe[0].value["label"]) == ["rank2"]


def test_a_row_link_opens_that_pairs_comparison(batches: Path, expected) -> None:
    at = run(BATCH_PAGE, batch="run1")
    home = open_link(pair_links(at)["rank0"])
    assert not home.error
    assert metrics(home)["Kernels"] == [
        f"{expected.trace1.kernel_count:,}",
        f"{expected.trace2.kernel_count:,}",
    ]


def test_hosted_a_row_link_names_the_batch_pair_and_every_page_opens_it(batches: Path, expected, monkeypatch) -> None:
    monkeypatch.setenv("FUSION_HOSTED", "1")
    at = run(BATCH_PAGE, batch="run1", bp="/etc")
    assert [t.key for t in at.text_input] == [
        "batch_filter"
    ] and "bp" not in at.query_params  # no server path when hosted
    href = pair_links(at)["rank1"]
    assert "p1" not in href and "bpair=1" in href and "batch=run1" in href
    home = open_link(href)
    back = [link.proto for link in home.get("page_link") if "back to the batch" in link.proto.label]
    assert [(b.page, b.query_string) for b in back] == [("Batch", "batch=run1&bpair=1")]
    assert metrics(home)["Kernels"] == [
        f"{expected.trace1.kernel_count:,}",
        f"{expected.trace2.kernel_count:,}",
    ]
    for page in [*PAGES, "pages/5_Ops.py"]:
        shown = run(page, batch="run1", bpair="1")
        assert not shown.error, (page, [e.value for e in shown.error])
    swapped = run("app.py", batch="run1", bpair="1", swap="1")
    assert metrics(swapped)["Kernels"] == [
        f"{expected.trace2.kernel_count:,}",
        f"{expected.trace1.kernel_count:,}",
    ]


def test_locally_a_batch_opens_by_its_server_path(batch_with_a_failure: Path) -> None:
    at = run(BATCH_PAGE)
    at.text_input(key="batch_path").set_value(str(batch_with_a_failure)).run()
    assert at.query_params["bp"] in (str(batch_with_a_failure), [str(batch_with_a_failure)])
    assert len(at.dataframe[0].value) == 5 and "p1=" in pair_links(at)["rank0"]


def test_a_batch_link_cannot_leave_the_batch_folder(batches: Path) -> None:
    at = run(BATCH_PAGE, batch="..")
    assert any("damaged" in w.value and "batch" in w.value for w in at.warning)
    assert not at.error and not any(".." in m.value for m in at.markdown if "batch=" in m.value)


def test_a_damaged_batch_folder_gives_one_message(
    batches: Path, batch_with_a_failure: Path, tmp_path: Path, monkeypatch
) -> None:
    import shutil

    monkeypatch.setenv("FUSION_BATCH_DIR", str(tmp_path))
    shutil.copytree(batch_with_a_failure, tmp_path / "damaged")
    (tmp_path / "damaged" / "summary.parquet").write_bytes(b"PAR1 cut short")
    at = run(BATCH_PAGE, batch="damaged")
    assert len(at.error) == 1 and not at.exception
    message = unescaped(at.error[0].value)
    assert message.startswith("batch damaged: summary.parquet cannot be read") and str(tmp_path) not in message
    (tmp_path / "damaged" / "batch.json").write_text("{")
    listing = run(BATCH_PAGE)
    assert any("damaged" in w.value and "batch.json cannot be read" in unescaped(w.value) for w in listing.warning)


def test_text_from_a_batch_record_is_shown_as_text(batch_with_a_failure: Path, tmp_path: Path, monkeypatch) -> None:
    import shutil

    hostile = "[click](https://evil.example) **bold** <b>"
    monkeypatch.setenv("FUSION_BATCH_DIR", str(tmp_path))
    monkeypatch.setenv("FUSION_HOSTED", "1")
    shutil.copytree(batch_with_a_failure, tmp_path / "remote")
    record = orjson.loads((tmp_path / "remote" / "batch.json").read_bytes())
    record["pairs"][0] |= {"label": hostile, "trace1": "s3://bucket/amd.json.gz"}
    (tmp_path / "remote" / "batch.json").write_bytes(orjson.dumps(record))
    at = run("app.py", batch="remote", bpair="0")
    errors = [e.value for e in at.error]
    assert errors and all(md_text(hostile) in e and "never opens" in e for e in errors)
    assert not any("[click]" in e or "<b>" in e for e in errors)


def test_the_timeline_opens_the_linked_pair_with_its_aligned_kernels(expected) -> None:
    pair = int(expected.pairs["pair_id"].iloc[-1])
    at = run("pages/7_Timeline.py", sample=SAMPLE, pair=str(pair))
    assert not at.error and at.selectbox(key="tl_pair").value == pair
    alignment = expected.alignment(pair)
    shown = metrics(at)
    assert shown["Kernels, trace 1"] == [f"{int((alignment['index1'] >= 0).sum()):,}"]
    assert shown["Aligned kernel pairs"] == [f"{int(alignment['op'].isin(['match', 'substitute']).sum()):,}"]
    assert at.get("plotly_chart"), "the timeline is drawn"


def test_the_timeline_choice_and_finding_go_into_the_link(expected) -> None:
    at = run("pages/7_Timeline.py", sample=SAMPLE)
    at.radio(key="tl_kind").set_value("finding").run()
    assert at.query_params["tl"] in ("finding", ["finding"]) and at.selectbox(key="tl_finding").value == 1
    at.selectbox(key="tl_finding").set_value(2).run()
    assert at.query_params["finding"] in ("2", ["2"])
    again = run("pages/7_Timeline.py", sample=SAMPLE, tl="finding", finding="2")
    refs = expected.mappings[1].evidence_refs
    assert metrics(again)["Units started together"] == [f"{len(refs):,}"]


def test_the_timeline_shows_one_aligned_call_of_an_op(op_pair) -> None:
    at = run("pages/7_Timeline.py", p1=op_pair[0], p2=op_pair[1], tl="call", op="aten::layer_norm", call="2")
    shown = metrics(at)
    assert (shown["Kernels, trace 1"], shown["Kernels, trace 2"], shown["Aligned kernel pairs"]) == (
        ["2"],
        ["1"],
        ["1"],
    )
    at.number_input(key="tl_call").set_value(6).run()
    assert at.query_params["call"] in ("6", ["6"])


def test_uploads_of_other_profilers_formats_compare(tmp_path: Path) -> None:
    """A rocprofv3 JSON and an Nsight Systems SQLite export, uploaded: the comparison opens on both."""
    sys.path.insert(0, str(ROOT / "tests"))
    from format_builders import NsysExport, RocprofRun

    run_, export = RocprofRun(), NsysExport()
    for step in range(60):
        run_.launch("Cijk_Alik_Bljk_HHS_BH_MT128x128x32.kd", cpu=step * 50_000, gpu=step * 50_000 + 5_000, dur=8_000)
        export.launch("sm90_xmma_gemm_f16f16_f32", cpu=step * 50_000, gpu=step * 50_000 + 5_000, dur=6_000)
    at = run("app.py")
    at.radio(key="mode").set_value("Upload files").run()
    at.file_uploader[0].set_value(("908_results.json", run_.data(), "application/json")).run()
    sqlite_bytes = export.write(tmp_path / "h100.sqlite").read_bytes()
    at.file_uploader[1].set_value(("h100.sqlite", sqlite_bytes, "application/octet-stream")).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert metrics(at)["Kernels"] == ["60", "60"]


# --- issue 35: the Efficiency page; issue 41: capture uploads ---------------------------------------------

EFFICIENCY_PAGE = "pages/8_Efficiency.py"
EAGER = "eager_prefill"


def test_efficiency_page_shows_both_gpus_the_roofline_and_the_sortable_table() -> None:
    at = run(EFFICIENCY_PAGE, sample=EAGER)
    assert not at.error
    found = metrics(at)
    assert len(found["Op calls rated"]) == 2 and len(found["Kernel time rated"]) == 2
    assert at.get("plotly_chart"), "the roofline is drawn"
    table = at.dataframe[0].value
    assert {"op", "shapes", "TFLOP/s 1", "TFLOP/s 2", "% of peak 1", "saving (ms)", "saved by"} <= set(table.columns)
    savings = table["saving (ms)"].dropna().tolist()
    assert savings == sorted(savings, reverse=True)


def test_efficiency_table_and_order_round_trip_through_the_link() -> None:
    at = run(EFFICIENCY_PAGE, sample=EAGER)
    at.selectbox(key="efficiency_sort").set_value("time1").run()
    assert at.query_params["esort"] in (["time1"], "time1")
    times = at.dataframe[0].value["time (ms) 1"].tolist()
    assert times == sorted(times, reverse=True)
    side = run(EFFICIENCY_PAGE, sample=EAGER, etab="2")
    assert side.radio(key="efficiency_tab").value == "2"
    assert {"counted op", "level", "FLOP/byte", "not rated because"} <= set(side.dataframe[0].value.columns)
    damaged = run(EFFICIENCY_PAGE, sample=EAGER, etab="bogus")
    assert any("etab" in w.value for w in damaged.warning)


def test_efficiency_page_on_graph_replays_says_there_is_nothing_to_rate() -> None:
    at = run(EFFICIENCY_PAGE, sample=SAMPLE)
    assert any("No op calls to rate" in i.value for i in at.info)


def test_overview_names_the_three_largest_efficiency_gaps() -> None:
    at = run("pages/1_Overview.py", sample=EAGER)
    assert "Largest efficiency gaps" in [s.value for s in at.subheader]
    (listed,) = [m.value for m in at.markdown if m.value.startswith("1. ")]
    assert listed.count("would save") == 3 and "3. " in listed


def _replay_and_capture() -> tuple[bytes, bytes]:
    from builders import Capture, Captured, EagerTrace, Graph, Op

    dims = {"Input Dims": [[32, 1024], [1024, 1024], []], "Input type": ["c10::BFloat16"] * 2 + [""]}
    execution = EagerTrace("AMD", gpu="AMD Instinct MI300X")
    execution.run(*[Graph(["gemm_kernel", "add_kernel"]) for _ in range(3)])
    capture = EagerTrace("AMD")
    capture.run(
        Capture([Op("aten::linear", [Captured("gemm_kernel")], args=dims), Op("aten::add", [Captured("add_kernel")])])
    )
    return execution.data(), capture.data()


def test_a_capture_upload_ties_the_replays_and_the_link_keeps_it(fresh_server: Path) -> None:
    execution, capture = _replay_and_capture()
    at = upload_both(execution, execution)
    at.file_uploader[2].set_value(("capture.json", capture, "application/json")).run()
    assert not at.exception and not at.error
    digest = hashlib.sha256(capture).hexdigest()
    assert at.query_params["c1"] in ([digest], digest)
    params = {k: str(v[0] if isinstance(v, list) else v) for k, v in at.query_params.items()}
    ops = run("pages/5_Ops.py", **params)
    table = ops.dataframe[0].value
    assert set(table["op"]) >= {"aten::mm", "aten::add"}
    assert ops.dataframe[0].value.set_index("op").loc["aten::mm", "calls 1"] == 3
    assert ops.dataframe[0].value.set_index("op").loc["aten::mm", "calls 2"] == 0


def test_an_upload_that_is_no_capture_says_so_in_place() -> None:
    execution, _ = _replay_and_capture()
    at = upload_both(execution, execution)
    at.file_uploader[3].set_value(("plain.json", execution, "application/json")).run()
    assert any("no graph capture in it" in e.value for e in at.error)
    assert "c2" not in at.query_params


def test_an_op_finding_says_what_its_calls_reach_on_the_fusion_and_ops_pages(tmp_path: Path) -> None:
    from builders import EagerTrace, Launch, Op

    norm = {"Input Dims": [[128, 1024], [], [1024], [1024], []], "Input type": ["c10::BFloat16", "ScalarList"] * 2}
    paths = {}
    for side, platform, gpu, kernels in (
        ("p1", "AMD", "AMD Instinct MI300X", [Launch("ln_stats", 1.0), Launch("ln_fwd", 4.0)]),
        ("p2", "NVIDIA", "NVIDIA H100 80GB HBM3", [Launch("ln_fwd", 3.0)]),
    ):
        builder = EagerTrace(platform, gpu=gpu)
        builder.run(*[Op("aten::layer_norm", kernels, args=norm) for _ in range(6)])
        paths[side] = str(tmp_path / f"{platform}.json")
        Path(paths[side]).write_bytes(builder.data())
    for page, extra in (("pages/2_Fusion.py", {}), ("pages/5_Ops.py", {"op": "aten::layer_norm"})):
        at = run(page, **paths, **extra)
        (reach,) = [unescaped(m.value) for m in at.markdown if "What its calls reach" in m.value]
        assert "AMD Instinct MI300X runs aten::layer_norm as 2 kernels per call at" in reach, page
        assert "TB/s" in reach


def test_a_swap_keeps_the_uploaded_files_in_view_each_under_its_new_side(expected) -> None:
    """Streamlit cannot refill an upload box: after a swap the boxes are empty, so each side's caption names the
    file it now holds and says it is still in use (issue 39 #5); going back to uploads keeps the swapped order."""
    at = upload_both(sample_bytes("amd.json.gz"), sample_bytes("nvidia.json.gz"))
    next(b for b in at.button if "Swap" in b.label).click().run()
    assert [u.value for u in at.file_uploader[:2]] == [None, None]
    captions = [unescaped(c.value) for c in at.caption if "· stored " in c.value]
    assert captions[0].startswith("Trace 1 · NVIDIA H100 80GB HBM3 · nvidia.json.gz · stored ")
    assert captions[1].startswith("Trace 2 · AMD Instinct MI300X · amd.json.gz · stored ")
    assert all("swapped in from trace" in c and "still in use" in c for c in captions), captions
    assert metrics(at)["Kernels"] == [f"{expected.trace2.kernel_count:,}", f"{expected.trace1.kernel_count:,}"]
    at.radio(key="mode").set_value("Sample pair").run()
    at.radio(key="mode").set_value("Upload files").run()
    captions = [unescaped(c.value) for c in at.caption if "· stored " in c.value]
    assert captions[0].startswith("Trace 1 · NVIDIA H100 80GB HBM3 · nvidia.json.gz")


def test_a_table_of_shortened_names_says_how_to_read_and_copy_a_full_name(expected) -> None:
    """Streamlit's table shows no per-cell hover text, so the way to a full name is said below it (issue 39 #1)."""
    at = run("pages/4_Kernels.py", sample=SAMPLE, tab="1")
    shown = at.dataframe[0].value["kernel name"]
    assert shown.str.contains("…").any()  # the sample has names long enough to be shortened
    captions = [unescaped(c.value) for c in at.caption]
    assert any("Select a row" in c and "Copy full name" in c for c in captions), captions
