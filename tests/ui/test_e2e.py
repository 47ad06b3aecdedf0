"""End to end in a real browser: upload two traces, drill into a group, reopen the shared link elsewhere.

Runs `streamlit run serve.py` (the app with its warm-up) with a temporary trace store and drives Debian's Chromium
(bench/chromium.py) through Playwright; with FUSION_SCREENSHOTS=1 (tools/screenshots.py) it also takes a screenshot
of each page into docs/screenshots (the README's pictures). It waits for conditions (a page's title, the URL a run
rewrites, the idle run state), never for a fixed time but where a chart animates. Under CI a missing browser fails
the test.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
from builders import SHARED_TRACES

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import chromium  # noqa: E402

SAMPLE = ROOT / "sample_traces" / "vllm_moe_full_graph"
README_SHOTS = ROOT / "docs" / "screenshots"
TIMEOUT_MS = 60_000

playwright_sync = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
if chromium.executable() is None:
    if os.environ.get("CI"):
        pytest.fail(f"Chromium is not installed; .ci/run installs it ({chromium.INSTALL})", pytrace=False)
    pytest.skip(f"Chromium is not installed ({chromium.INSTALL})", allow_module_level=True)
if not (SAMPLE / "amd.json.gz").exists():
    pytest.skip("the bundled sample pair is missing", allow_module_level=True)

expect = playwright_sync.expect
expect.set_options(timeout=TIMEOUT_MS)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_until_serving(url: str, server: subprocess.Popen, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"streamlit exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(f"streamlit did not serve {url} within {seconds} s")


@pytest.fixture(scope="module")
def batches(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server's FUSION_BATCH_DIR; the batch test writes its result here."""
    return tmp_path_factory.mktemp("batches")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, batches: Path) -> Iterator[str]:
    port = _free_port()
    env = {
        **os.environ,
        "FUSION_STORE_DIR": str(tmp_path_factory.mktemp("store")),
        "FUSION_CACHE_DIR": str(tmp_path_factory.mktemp("tables")),
        "FUSION_BATCH_DIR": str(batches),
        "FUSION_TRACE_ROOTS": os.pathsep.join([str(tmp_path_factory.getbasetemp()), str(SHARED_TRACES)]),
    }
    env.pop("FUSION_HOSTED", None)
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "serve.py",
        "--server.headless",
        "true",
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--browser.gatherUsageStats",
        "false",
    ]
    log = (tmp_path_factory.mktemp("log") / "streamlit.log").open("w")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_serving(url, process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_sync.sync_playwright() as driver:
        instance = driver.chromium.launch(**chromium.launch_options())
        yield instance
        instance.close()


VIEWPORT = {"width": 1500, "height": 1100}
_LISTENING: list[tuple[str, Callable]] = []
"""The handlers _listen gave the module's page in the running test (removed after it: the page fixture)."""


@pytest.fixture(scope="module")
def tab(browser: object) -> Iterator[object]:
    """The module's one browser page, in which every test opens its URLs (the share link's test also reads the
    clipboard). A page of its own would start a renderer process that compiles Streamlit's and Plotly's JavaScript
    afresh: a page load cost 4.5-5.5 s of the machine's CPU in a new page or context, 2.4-3.0 s in the same page."""
    with browser.new_context(viewport=VIEWPORT, permissions=["clipboard-read", "clipboard-write"]) as context:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        yield page


@pytest.fixture
def page(tab: object) -> Iterator[object]:
    """The module's page for one test, at the default viewport; after the test it is blank (which ends the test's
    Streamlit session and stops its charts' and grids' work) and keeps none of the test's handlers."""
    tab.set_viewport_size(VIEWPORT)
    yield tab
    while _LISTENING:
        tab.remove_listener(*_LISTENING.pop())
    tab.goto("about:blank")


def _listen(page: object, event: str, handler: Callable) -> None:
    """page.on for the running test only (the page fixture removes the handler after it)."""
    page.on(event, handler)
    _LISTENING.append((event, handler))


def _drawn(page: object) -> None:
    """Wait until a freshly opened page's script has run to its end and its output is drawn (no fixed pause: the
    title is the script's first output, and the run state turns 'notRunning' only after the last)."""
    page.wait_for_selector("[data-testid='stMain'] h1")
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']")
    page.wait_for_timeout(150)


def _titled(page: object, title: str) -> None:
    """Wait until the page shows `title` (a page link's client-side navigation has reached its page)."""
    page.wait_for_function(
        "title => (document.querySelector(\"[data-testid='stMain'] h1\")?.innerText || '').trim() === title", arg=title
    )


IDLE = (
    "() => document.querySelector(\"[data-testid='stApp']\")?.getAttribute('data-test-script-state') === 'notRunning'"
)
"""The app's script is not running. Right after a click the run may not have started yet, and a run quick enough is
never drawn as 'running' (React draws its start and end at once), so a wait for this alone must follow a change the
run itself makes (a new page title, a new URL)."""


def _navigated(page: object, act: Callable[[], None], title: str) -> None:
    """Do `act` (a click that opens another page) and wait until that page's script run has ended: its title is
    drawn (only the new run draws it) and no script runs."""
    act()
    _titled(page, title)
    page.wait_for_function(IDLE)


def _rerun(page: object, act: Callable[[], None]) -> None:
    """Do `act` (a widget click) and wait until the run it started has ended: the URL, which holds the view, has
    changed (the run writes it) and no script runs. No fixed pause."""
    before = page.url
    act()
    page.wait_for_url(lambda url: url != before)
    page.wait_for_function(IDLE)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = README_SHOTS if os.environ.get("FUSION_SCREENSHOTS") == "1" else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _sidebar_link(page: object, title: str) -> object:
    return page.get_by_test_id("stSidebar").get_by_role("link", name=title, exact=True)


def _kernels_tab(page: object, side: int) -> object:
    """The Kernels page's button of trace `side` (0: both side by side)."""
    return page.locator("[data-testid='stButtonGroup'] button").nth(side)


def _shot(page: object, shots: Path, name: str) -> None:
    """The whole page, for the README's screenshots (only when FUSION_SCREENSHOTS=1: a shot asserts nothing, and
    each costs a second). Streamlit scrolls inside its main block, so grow the viewport to the content first."""
    if os.environ.get("FUSION_SCREENSHOTS") != "1":
        return
    height = page.evaluate("document.querySelector('[data-testid=\\'stMain\\']').scrollHeight")
    page.set_viewport_size({"width": VIEWPORT["width"], "height": min(max(int(height), VIEWPORT["height"]), 5000)})
    page.wait_for_timeout(800)
    page.screenshot(path=str(shots / f"{name}.png"))
    page.set_viewport_size(VIEWPORT)


def _chart(page: object) -> object:
    chart = page.locator(".js-plotly-plot").first
    expect(chart).to_be_visible(timeout=TIMEOUT_MS)
    return chart


def _picture(page: object) -> object:
    """The first SVG picture the page drew itself (ui.charts' *_svg, shown with widgets.picture)."""
    picture = page.locator("[data-testid='stHtml'] img[src^='data:image/svg+xml']").first
    expect(picture).to_be_visible(timeout=TIMEOUT_MS)
    return picture


def _metric_values(page: object) -> list[str]:
    return page.get_by_test_id("stMetricValue").all_inner_texts()


def test_upload_drill_down_and_share(server: str, browser: object, page: object, shots: Path) -> None:
    page.goto(server)
    _drawn(page)
    _shot(page, shots, "home")
    expect(page.get_by_test_id("stMetricValue").first).to_be_visible()
    with page.expect_download() as download:
        page.get_by_role("button", name="Comparison (JSON)").click()
    exported = json.loads(Path(download.value.path()).read_text())
    assert exported["metadata"]["trace1_total_kernels"] == int(_metric_values(page)[0].replace(",", ""))

    page.get_by_text("Upload files", exact=True).click()
    uploaders = page.locator("[data-testid='stFileUploaderDropzoneInput']")
    expect(uploaders).to_have_count(4)  # the two traces, then the optional capture trace of each (collapsed)
    expect(page.get_by_text("Graph-capture traces (optional)")).to_be_visible()
    for side, name in enumerate(("amd.json.gz", "nvidia.json.gz")):  # each upload's run ends with its file stored
        uploaders.nth(side).set_input_files(str(SAMPLE / name))
        expect(page.get_by_text("· stored ", exact=False)).to_have_count(side + 1)
        page.wait_for_function(IDLE)
    metrics = _metric_values(page)
    assert metrics[0].replace(",", "").isdigit()

    _navigated(page, page.get_by_role("link", name="Kernel types →").click, "Overview")
    _chart(page)
    assert "t1=" in page.url and "t2=" in page.url
    _shot(page, shots, "overview")

    _navigated(page, page.get_by_role("link", name="Fusion", exact=True).click, "Fusion")
    _picture(page)
    _shot(page, shots, "fusion")
    _navigated(page, page.get_by_role("link", name="Open evidence").first.click, "Groups")
    expect(page.get_by_text("Aligned kernels")).to_be_visible()
    _picture(page)
    assert "pair=" in page.url
    _shot(page, shots, "groups")
    shared, seen = page.url, _metric_values(page)

    _navigated(page, page.get_by_role("link", name="Kernels", exact=True).click, "Kernels")
    expect(page.get_by_text("Each kernel name next to").first).to_be_visible()
    _shot(page, shots, "kernels")

    with browser.new_context(viewport=VIEWPORT) as elsewhere:  # a browser that never saw this session
        fresh = elsewhere.new_page()
        fresh.set_default_timeout(TIMEOUT_MS)
        fresh.goto(shared)
        _drawn(fresh)
        expect(fresh.get_by_text("Aligned kernels")).to_be_visible()
        _picture(fresh)
        expect(fresh.get_by_test_id("stMetricValue")).to_have_text(seen)


HOSTILE = "[l](https://evil.example/l) ![i](https://evil.example/i.png) <a href='https://evil.example/a'>a</a> <b>b</b> www.evil.example x@evil.example"
"""Link, image, HTML and autolink syntax; none of it may become an element on the page."""
HOSTILE_PAGES = ("Overview", "Fusion", "Groups", "Kernels")
FIND_INJECTED = """() => {
  const found = [];
  for (const a of document.querySelectorAll('a')) {
    const target = a.getAttribute('href') || a.getAttribute('xlink:href') || '';
    const external = /^(?:[a-z][a-z0-9+.-]*:|[/][/])/i.test(target);  // the app's own view links are relative
    if (target.includes('evil') && external) found.push(a.outerHTML.slice(0, 160));
  }
  for (const img of document.querySelectorAll('img')) {
    if ((img.getAttribute('src') || '').includes('evil')) found.push(img.outerHTML.slice(0, 160));
  }
  for (const bold of document.querySelectorAll('b, strong')) {
    if (bold.textContent === 'b') found.push('bold from trace text');
  }
  return found;
}"""


@pytest.fixture(scope="module")
def hostile_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sample pair with link, image and HTML syntax in the GPU name and in kernel names of both traces."""
    folder = tmp_path_factory.mktemp("hostile")
    out = []
    for name, gpu, kernel in (
        ("amd.json.gz", "AMD Instinct MI300X", "_topk_forward"),
        ("nvidia.json.gz", "NVIDIA H100 80GB HBM3", None),
    ):
        body = gzip.decompress((SAMPLE / name).read_bytes())
        body = body.replace(orjson.dumps(gpu), orjson.dumps(f"{gpu} {HOSTILE}"))
        if kernel:
            body = body.replace(orjson.dumps(kernel), orjson.dumps(f"{kernel} {HOSTILE}"))
        path = folder / name
        path.write_bytes(gzip.compress(body))
        out.append(path)
    return out[0], out[1]


def test_trace_text_never_becomes_a_link_an_image_or_markup(server: str, page: object, hostile_pair) -> None:
    """The hostile pair's pages, opened as a user moves: the home page from a link, the others through the
    sidebar, each trace's tab of the Kernels page by its button."""

    def unharmed(where: str) -> None:
        expect(page.get_by_text("evil.example", exact=False).first).to_be_attached()
        assert page.evaluate(FIND_INJECTED) == [], where

    page.goto(f"{server}/?p1={hostile_pair[0]}&p2={hostile_pair[1]}")
    _drawn(page)
    unharmed("Home")
    for title in HOSTILE_PAGES:
        _navigated(page, _sidebar_link(page, title).click, title)
        unharmed(title)
    for side in (1, 2):
        _rerun(page, _kernels_tab(page, side).click)
        unharmed(f"Kernels, trace {side}")


@pytest.fixture(scope="module")
def op_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Eager traces with CPU ops whose layer_norm calls launch 2 kernels on trace 1 and 1 on trace 2."""
    from builders import write_op_pair

    return write_op_pair(tmp_path_factory.mktemp("ops"))


def test_an_op_finding_opens_what_each_call_launched(server: str, page: object, op_pair, shots: Path) -> None:
    page.goto(f"{server}/Fusion?p1={op_pair[0]}&p2={op_pair[1]}")
    _drawn(page)
    _navigated(page, page.get_by_role("link", name="Open aten::layer_norm on the Ops page").click, "Ops")
    assert "op=aten" in page.url
    expect(page.get_by_text("What each call launched on", exact=False).first).to_be_visible()
    expect(page.locator("[data-testid='stDataFrame']").first).to_be_visible()  # grids mount after the run ends
    grid_text = page.locator("[data-testid='stDataFrame']").all_inner_texts()
    _shot(page, shots, "ops")
    _rerun(page, page.get_by_role("button", name="← All ops").click)
    assert "op=" not in page.url
    expect(page.get_by_text("Ops by time gap")).to_be_visible()
    assert grid_text, "the op's tables are drawn"
    _rerun(page, page.get_by_role("button", name="aten::layer_norm:").click)
    assert "op=aten%3A%3Alayer_norm" in page.url
    expect(page.get_by_text("What each call launched on", exact=False).first).to_be_visible()


def test_op_names_from_a_trace_never_become_markup_on_the_ops_page(server: str, page: object, tmp_path: Path) -> None:
    from builders import write_op_pair

    pair = write_op_pair(tmp_path, norm_op=f"custom::norm {HOSTILE}")
    page.goto(f"{server}/Ops?p1={pair[0]}&p2={pair[1]}")
    _drawn(page)
    expect(page.get_by_text("evil.example", exact=False).first).to_be_attached()
    assert page.evaluate(FIND_INJECTED) == []
    _rerun(page, page.get_by_role("button", name="custom::norm").click)
    expect(page.get_by_text("What each call launched on", exact=False).first).to_be_visible()
    assert page.evaluate(FIND_INJECTED) == []


def test_a_batch_result_opens_from_the_batch_list(server: str, page: object, batches: Path, shots: Path) -> None:
    """The Batch page in a browser (its row links live in the data grid's canvas; test_app follows them)."""
    from fusion.batch import run as batch

    jobs = [
        batch.Job(str(SAMPLE / "amd.json.gz"), str(SAMPLE / "nvidia.json.gz"), f"rank{rank}", rank=rank)
        for rank in range(2)
    ]
    batch.run_batch(jobs, batches / "nightly", workers=1)
    page.goto(f"{server}/Batch")
    _drawn(page)
    page.get_by_role("link", name="nightly").click()
    page.wait_for_url(lambda url: "batch=nightly" in url)  # the run the link starts writes it
    page.wait_for_function(IDLE)
    expect(page.get_by_text("Findings across ranks", exact=False).first).to_be_visible()
    expect(page.get_by_test_id("stDataFrame")).to_have_count(2)
    _shot(page, shots, "batch")


X_RANGE = "document.querySelector('.js-plotly-plot')._fullLayout.xaxis.range"


def _timeline(page: object) -> dict:
    """The Timeline page's chart, drawn: its legend's kernel types and how many kernel bars and link lines it has."""
    chart = _chart(page)
    expect(chart.locator(".barlayer .point").first).to_be_attached()
    return {
        "legend": chart.locator(".legend .legendtext").evaluate_all("texts => texts.map(t => t.textContent)"),
        "bars": chart.locator(".barlayer .point").count(),
        "lines": chart.locator(".scatterlayer .js-line").count(),
    }


def test_the_timeline_draws_a_graph_pair_aligned_and_a_kernel_opens_its_pair(
    server: str, page: object, shots: Path
) -> None:
    page.goto(f"{server}/Timeline?sample=vllm_moe_full_graph&pair=0")
    _drawn(page)
    drawn = _timeline(page)
    assert {"GEMM", "one-sided kernel (hatched)", "aligned, same type"} <= set(drawn["legend"])
    metrics = [int(v.replace(",", "")) for v in _metric_values(page)]
    assert drawn["bars"] >= metrics[0] + metrics[1] and drawn["lines"] >= 1
    before = page.evaluate(X_RANGE)
    plot = page.locator(".js-plotly-plot .nsewdrag").first.bounding_box()
    middle = plot["y"] + plot["height"] / 2
    page.mouse.move(plot["x"] + 2, middle)
    page.mouse.down()
    page.mouse.move(plot["x"] + plot["width"] * 0.18, middle, steps=8)
    page.mouse.up()
    page.wait_for_timeout(800)
    after = page.evaluate(X_RANGE)
    assert after[1] - after[0] < 0.3 * (before[1] - before[0]), "dragging across the chart zooms it"
    page.evaluate("document.querySelectorAll('.plotly-notifier').forEach(note => note.remove())")
    _shot(page, shots, "timeline")
    with page.expect_download() as download:
        page.get_by_role("button", name="Timeline for Perfetto (JSON)").click()
    exported = json.loads(Path(download.value.path()).read_text())
    assert exported["otherData"]["scope"] == "group pair 0"
    box = page.locator(".js-plotly-plot .barlayer .point").first.bounding_box()
    _navigated(page, lambda: page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2), "Groups")
    expect(page.get_by_text("Aligned kernels")).to_be_visible()
    assert "pair=0" in page.url and ("w1=" in page.url or "w2=" in page.url)


def test_the_timeline_draws_an_eager_pair_and_an_op_call(server: str, page: object) -> None:
    from builders import shared_trace

    h100, mi300 = shared_trace("tl_h100_qwen1.5-0.5b"), shared_trace("tl_mi300_qwen1.5-0.5b")
    page.goto(f"{server}/Timeline?p1={h100}&p2={mi300}")
    _drawn(page)
    drawn = _timeline(page)
    assert {"GEMM", "Memset", "one-sided kernel (hatched)"} <= set(drawn["legend"])
    page.goto(f"{server}/Timeline?p1={h100}&p2={mi300}&tl=call&op=aten%3A%3Amm&call=3")
    _drawn(page)
    drawn = _timeline(page)
    assert "GEMM" in drawn["legend"] and drawn["bars"] >= 2
    expect(page.get_by_text("aligned call 3 of", exact=False)).to_be_visible()


# --- the sweep: every page x every view x every bundled sample pair and one shared real pair (issue 38) -------------

SHARED_PAIR = ("tl_mi300_qwen1.5-0.5b", "tl_h100_qwen1.5-0.5b")
HAS_CONTENT = (
    "[data-testid='stDataFrame'], [data-testid='stTable'], .js-plotly-plot, "
    "[data-testid='stHtml'] img[src^='data:image/svg+xml']"
)
FIND_PROBLEMS = """() => [
  ...Array.from(document.querySelectorAll("[data-testid='stException']"), e => 'exception: ' + e.innerText.slice(0, 200)),
  ...Array.from(document.querySelectorAll("[data-testid='stAlertContentError']"), e => 'error: ' + e.innerText.slice(0, 200)),
]"""
STREAMLIT_BASE_PROBE = re.compile(r"/[^/]+/_stcore/(health|host-config)$")
"""Streamlit's frontend, opened at /Page, first looks for its server at /Page/_stcore/ (a 404), then at /_stcore/:
its own probe of where it is served (frontend PD(): the page path, then its parent), not a request of this app."""


FIT_WIDTHS = (1280, 1440)
"""Laptop widths every table must fit (issue 39 #1), checked on FIT_PAIRS at every view the sweep opens."""
FIT_PAIRS = ("vllm_moe_full_graph", "shared qwen1.5-0.5b")
FIND_CUT_OFF = r"""async () => {
  const settle = () => new Promise(r => requestAnimationFrame(() => setTimeout(r, 250)));
  const numeric = /^[-+−]?[\d,]*\.?\d+(e[-+]?\d+)?\s*(%|×|ms|µs)?$/i;
  const identifier = /^(pair|correlation \d|kernel \d|trace)$/;
  const out = [];
  const read = (table) => {
    const heads = {};
    for (const th of table.querySelectorAll("th[aria-colindex]")) heads[+th.getAttribute("aria-colindex")] = th.textContent.trim();
    const cells = {};
    for (const td of table.querySelectorAll("td[aria-colindex]")) {
      const i = +td.getAttribute("aria-colindex"); const t = td.textContent.trim();
      if (t && t !== "None" && t !== "—" && t !== "nan") (cells[i] = cells[i] || []).push(t);
    }
    return {heads, cells};
  };
  const grids = [];
  for (const frame of document.querySelectorAll("[data-testid='stDataFrame']")) {
    const table = frame.querySelector("table[role=grid]");
    const scroller = frame.querySelector(".dvn-scroller");
    if (table && scroller) grids.push({frame, table, scroller});
  }
  for (const g of grids) g.scroller.scrollLeft = 0;
  await settle();
  for (const g of grids) {
    g.first = read(g.table);
    g.overflow = g.scroller.scrollWidth > g.scroller.clientWidth + 1;
    if (g.overflow) g.scroller.scrollLeft = g.scroller.scrollWidth;
  }
  if (grids.some(g => g.overflow)) await settle();
  for (const g of grids) {
    const box = g.frame.getBoundingClientRect();
    if (box.right > window.innerWidth + 1) out.push(`table ends at ${Math.round(box.right)} px, past the viewport`);
    let all = g.first;
    if (g.overflow) {
      const last = read(g.table);
      all = {heads: {...g.first.heads, ...last.heads}, cells: {...g.first.cells, ...last.cells}};
      g.scroller.scrollLeft = 0;
    }
    const shown = Object.keys(g.first.heads).map(Number);
    const lastShown = Math.max(...shown);
    for (const [i, cells] of Object.entries(all.cells)) {
      const name = all.heads[i];
      if (!name || identifier.test(name) || !cells.every(t => numeric.test(t))) continue;
      const inside = g.first.heads[i] !== undefined && (!g.overflow || +i < lastShown);
      if (!inside) out.push(`numeric column '${name}' is not inside the viewport`);
    }
  }
  for (const label of document.querySelectorAll("[data-testid='stMetricLabel']")) {
    for (const el of [label, ...label.querySelectorAll("*")]) {
      if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).textOverflow === "ellipsis") {
        out.push(`metric label '${label.textContent.trim()}' is cut off`); break;
      }
    }
  }
  return out;
}"""
"""What does not fit, read from each table's accessible grid (Glide renders a header and cells only for the columns
it draws; all grids are scrolled at once, then read after one pause): a column whose cells are all numbers (counts, times, ratios; not the ids pair, correlation, kernel,
trace) must be drawn with the grid scrolled to its left end, before the last column drawn when the grid scrolls
(so wholly visible), and the grid must end inside the viewport; a metric label must not end in an ellipsis."""


def sweep_pairs() -> dict[str, str | tuple[Path, Path]]:
    """Each pair the sweep opens: a bundled sample by its name, and one shared real pair by its two files."""
    from ui.data import samples

    pairs: dict[str, str | tuple[Path, Path]] = {name: name for name in samples()}
    folders = [SHARED_TRACES / name for name in SHARED_PAIR]
    if all(folder.is_dir() for folder in folders):
        pairs["shared qwen1.5-0.5b"] = tuple(next(folder.glob("*.json.gz")) for folder in folders)
    return pairs


def _check(page: object, where: str, problems: list[str]) -> None:
    """The page holds a chart or a table (or says why it has none) and no error box or exception."""
    content = (
        page.locator(HAS_CONTENT)
        .or_(page.get_by_text("No op-level view", exact=False))
        .or_(page.get_by_text("No op calls to rate", exact=False))
    )
    try:
        content.first.wait_for(timeout=20_000)
    except playwright_sync.TimeoutError:
        problems.append(f"{where}: no chart or table")
    problems += [f"{where}: {found}" for found in page.evaluate(FIND_PROBLEMS)]


FIT_READS = 3
"""Reads of a view's fit at one width before what does not fit counts, FIT_REREAD_MS apart: the first read can
catch a grid still redrawing for the new width (a column reported outside at 1440 px and not at 1280, once in a
few runs on the loaded machine); a table that does not fit fails every read."""
FIT_REREAD_MS = 500


def _fits(page: object, where: str, problems: list[str]) -> None:
    """Every table and metric of the view fits each of FIT_WIDTHS (FIND_CUT_OFF); the sweep's width after."""
    for width in FIT_WIDTHS:
        page.set_viewport_size({"width": width, "height": 1000})  # FIND_CUT_OFF pauses before it reads
        found = page.evaluate(FIND_CUT_OFF)
        for _ in range(FIT_READS - 1):
            if not found:
                break
            page.wait_for_timeout(FIT_REREAD_MS)
            found = page.evaluate(FIND_CUT_OFF)
        problems += [f"{where} at {width} px: {line}" for line in found]
    page.set_viewport_size(VIEWPORT)


def pair_link(server: str, pair: str | tuple[Path, Path]) -> str:
    """The link that opens the pair's home page: a sample by its name, files by their two paths."""
    query = f"sample={pair}" if isinstance(pair, str) else f"p1={pair[0]}&p2={pair[1]}"
    return f"{server}/?{query}"


def open_from_home(page: object, pair: str | tuple[Path, Path]) -> None:
    """Open the pair as a user switching pairs in the same session would: back to the home page, then its sample
    picker, or its two server-path boxes."""
    _navigated(page, _sidebar_link(page, "Home").click, "Fusion Explorer")
    if isinstance(pair, str):
        page.get_by_test_id("stSelectbox").filter(has_text="Bundled sample pair").click()
        _rerun(page, page.get_by_role("option", name=pair, exact=True).click)
        return
    _rerun(page, page.get_by_test_id("stRadio").get_by_text("Server path", exact=True).click)
    for side, path in enumerate(pair, start=1):
        box = page.get_by_label(f"Trace {side} path on this server")
        box.fill(str(path))
        _rerun(page, lambda box=box: box.press("Enter"))
    expect(page.get_by_test_id("stMetricValue").first).to_be_visible()


def sweep_pair(page: object, pair: str, problems: list[str]) -> int:
    """From the pair's home page, open every other page through the sidebar's links (as a user moves), each tab
    of the Kernels page, and Groups both filtered (by the Overview's first 'TYPE → pairs' link: the drill-down)
    and for all types; on FIT_PAIRS, every view's fit too. Returns how many views it checked."""
    from ui.state import PAGE_TITLES

    def check(where: str) -> None:
        _check(page, f"{pair} {where}", problems)
        if pair in FIT_PAIRS:
            _fits(page, f"{pair} {where}", problems)

    check("Home")
    views = 1
    for key, title in PAGE_TITLES.items():
        if key in ("home", "batch"):
            continue
        _navigated(page, _sidebar_link(page, title).click, title)
        check(title)
        views += 1
        if key == "overview":
            _navigated(page, page.get_by_role("link", name=re.compile(r" → pairs$")).first.click, "Groups")
            assert "type=" in page.url
            check("Groups filtered by type")
            views += 1
        elif key == "groups":  # the sidebar's link keeps the filter: choose all types
            page.get_by_test_id("stMain").get_by_test_id("stSelectbox").first.click()
            _rerun(page, page.get_by_role("option", name="All kernel types").click)
            check("Groups, all types")
            views += 1
        elif key == "kernels":
            for side in (1, 2):
                _rerun(page, _kernels_tab(page, side).click)
                check(f"Kernels, trace {side}")
                views += 1
    return views


def test_every_page_view_and_pair_draws_without_an_error_or_a_foreign_request(
    server: str, page: object, summary_line
) -> None:
    """Every page x view of every sweep pair, in one browser session (the first pair opened by its link, the
    others from the home page's inputs: a fresh page costs the browser its scripts again, about 3 s of CPU): no
    error box, no exception, a chart or a table, no request to another host and no failed request (but
    Streamlit's own probe of its base path); every table fits a laptop's width on FIT_PAIRS. Prints how many
    combinations it opened of each pair."""
    own = server.split("//", 1)[1]
    foreign, failed, problems = [], [], []

    def requested(request: object) -> None:
        if not request.url.startswith(("data:", "blob:")) and request.url.split("//", 1)[-1].split("/", 1)[0] != own:
            foreign.append(request.url)

    def answered(response: object) -> None:
        if response.status >= 400 and not STREAMLIT_BASE_PROBE.search(response.url.split("?", 1)[0]):
            failed.append(f"{response.status} {response.url}")

    _listen(page, "request", requested)
    _listen(page, "response", answered)
    for number, (pair, source) in enumerate(sweep_pairs().items()):
        if number == 0:
            page.goto(pair_link(server, source))
            _drawn(page)
        else:
            try:
                open_from_home(page, source)
            except playwright_sync.Error as error:  # a broken page before it: say so with what that page showed
                problems.append(f"{pair}: not opened from the home page: {error.message.splitlines()[0]}")
                break
        combinations = sweep_pair(page, pair, problems)
        summary_line(f"browser sweep: {combinations} page x view combinations of pair {pair}")
    assert problems == [], "\n".join(problems)
    assert foreign == [] and failed == [], (foreign, failed)


def test_the_share_link_has_a_copy_button(server: str, page: object) -> None:
    """The share link was a text box to select by hand (issue 38 #3)."""
    page.goto(f"{server}/?sample=eager_prefill&l1=%3Cb%3Ex%22%27")
    _drawn(page)
    box = page.locator("[data-testid='stMain'] input[aria-label='Link to this view']")
    expect(box).to_have_value(re.compile(r"\?sample=eager_prefill"))
    shown = box.input_value()
    page.locator("[data-testid='stMain'] button.fx-copy").click()
    expect(page.locator("[data-testid='stMain'] button.fx-copy")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == shown and "l1=%3Cb%3Ex" in shown


def test_the_efficiency_page_draws_the_roofline_and_a_point_opens_its_op(
    server: str, page: object, shots: Path
) -> None:
    errors: list[str] = []
    _listen(page, "pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{server}/Efficiency?sample=eager_prefill")
    _drawn(page)
    chart = _chart(page)
    expect(page.get_by_text("Op calls rated").first).to_be_visible()
    expect(page.locator("[data-testid='stDataFrame']").first).to_be_visible()
    expect(chart.locator(".scatterlayer .trace .point").first).to_be_attached()
    assert page.locator("[data-testid='stException']").count() == 0
    assert page.locator("[data-testid='stAlertContentError']").count() == 0
    _shot(page, shots, "efficiency")
    _rerun(page, page.get_by_text("Trace 1's op signatures").click)
    assert "etab=1" in page.url
    chart = _chart(page)
    _navigated(page, lambda: chart.locator(".scatterlayer .trace .point").first.click(force=True), "Ops")
    assert "op=" in page.url and "/Ops" in page.url
    expect(page.get_by_text("What each call launched on", exact=False).first).to_be_visible()
    assert errors == []
