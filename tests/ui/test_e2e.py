"""End to end in a real browser: upload two traces, drill into a group, reopen the shared link elsewhere.

Runs `streamlit run app.py` with a temporary trace store and drives Debian's chromium through
Playwright, taking a screenshot of each page; with FUSION_SCREENSHOTS=1 they go to docs/screenshots
(the README's pictures), else to a temporary folder. Under CI a missing browser fails the test.
"""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
SAMPLE = ROOT / "sample_traces" / "vllm_moe_full_graph"
README_SHOTS = ROOT / "docs" / "screenshots"
TIMEOUT_MS = 60_000
BROWSER_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

playwright_sync = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
if not Path(CHROMIUM).exists():
    if os.environ.get("CI"):
        pytest.fail(f"{CHROMIUM} is not installed; .ci/run installs Debian's chromium", pytrace=False)
    pytest.skip(f"{CHROMIUM} is not installed", allow_module_level=True)
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
    }
    env.pop("FUSION_HOSTED", None)
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        "app.py",
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
        instance = driver.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS, headless=True)
        yield instance
        instance.close()


def _new_page(browser: object) -> object:
    context = browser.new_context(viewport={"width": 1500, "height": 1100})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    return page


def _settled(page: object) -> None:
    """Wait until the app's script run has finished and the page has drawn."""
    page.wait_for_timeout(400)
    page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']")
    page.wait_for_timeout(800)


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = README_SHOTS if os.environ.get("FUSION_SCREENSHOTS") == "1" else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _shot(page: object, shots: Path, name: str) -> None:
    """The whole page: Streamlit scrolls inside its main block, so grow the viewport to the content first."""
    height = page.evaluate("document.querySelector('[data-testid=\\'stMain\\']').scrollHeight")
    page.set_viewport_size({"width": 1500, "height": min(max(int(height), 1100), 5000)})
    page.wait_for_timeout(800)
    page.screenshot(path=str(shots / f"{name}.png"))
    page.set_viewport_size({"width": 1500, "height": 1100})


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


def test_upload_drill_down_and_share(server: str, browser: object, shots: Path) -> None:
    page = _new_page(browser)
    page.goto(server)
    _settled(page)
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
    uploaders.nth(0).set_input_files(str(SAMPLE / "amd.json.gz"))
    _settled(page)
    page.locator("[data-testid='stFileUploaderDropzoneInput']").nth(1).set_input_files(str(SAMPLE / "nvidia.json.gz"))
    _settled(page)
    expect(page.get_by_text("Stored trace", exact=False)).to_have_count(2)
    metrics = _metric_values(page)
    assert metrics[0].replace(",", "").isdigit()

    page.get_by_role("link", name="Kernel types →").click()
    _settled(page)
    _chart(page)
    assert "t1=" in page.url and "t2=" in page.url
    _shot(page, shots, "overview")

    page.get_by_role("link", name="Fusion", exact=True).click()
    _settled(page)
    _picture(page)
    _shot(page, shots, "fusion")
    page.get_by_role("link", name="Open evidence").first.click()
    _settled(page)
    expect(page.get_by_text("Aligned kernels")).to_be_visible()
    _picture(page)
    assert "pair=" in page.url
    _shot(page, shots, "groups")
    shared, seen = page.url, _metric_values(page)

    page.get_by_role("link", name="Kernels", exact=True).click()
    _settled(page)
    expect(page.get_by_text("Each kernel name next to").first).to_be_visible()
    _shot(page, shots, "kernels")

    fresh = _new_page(browser)
    fresh.goto(shared)
    _settled(fresh)
    expect(fresh.get_by_text("Aligned kernels")).to_be_visible()
    _picture(fresh)
    expect(fresh.get_by_test_id("stMetricValue")).to_have_text(seen)


HOSTILE = "[l](https://evil.example/l) ![i](https://evil.example/i.png) <a href='https://evil.example/a'>a</a> <b>b</b> www.evil.example x@evil.example"
"""Link, image, HTML and autolink syntax; none of it may become an element on the page."""
HOSTILE_PAGES = ["", "Overview", "Fusion", "Groups?pair=0", "Kernels", "Kernels?tab=1", "Kernels?tab=2"]
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


def test_trace_text_never_becomes_a_link_an_image_or_markup(server: str, browser: object, hostile_pair) -> None:
    page = _new_page(browser)
    query = f"p1={hostile_pair[0]}&p2={hostile_pair[1]}"
    for path in HOSTILE_PAGES:
        sep = "&" if "?" in path else "?"
        page.goto(f"{server}/{path}{sep}{query}")
        _settled(page)
        expect(page.get_by_text("evil.example", exact=False).first).to_be_attached()
        assert page.evaluate(FIND_INJECTED) == [], path


@pytest.fixture(scope="module")
def op_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Eager traces with CPU ops whose layer_norm calls launch 2 kernels on trace 1 and 1 on trace 2."""
    from builders import write_op_pair

    return write_op_pair(tmp_path_factory.mktemp("ops"))


def test_an_op_finding_opens_what_each_call_launched(server: str, browser: object, op_pair, shots: Path) -> None:
    page = _new_page(browser)
    page.goto(f"{server}/Fusion?p1={op_pair[0]}&p2={op_pair[1]}")
    _settled(page)
    page.get_by_role("link", name="Open aten::layer_norm on the Ops page").click()
    _settled(page)
    assert "op=aten" in page.url
    expect(page.get_by_text("What each call launched on", exact=False).first).to_be_visible()
    grid_text = page.locator("[data-testid='stDataFrame']").all_inner_texts()
    _shot(page, shots, "ops")
    page.get_by_role("button", name="← All ops").click()
    _settled(page)
    assert "op=" not in page.url
    expect(page.get_by_text("Ops by time gap")).to_be_visible()
    assert grid_text, "the op's tables are drawn"
    page.get_by_role("button", name="aten::layer_norm:").click()
    _settled(page)
    assert "op=aten%3A%3Alayer_norm" in page.url
    expect(page.get_by_text("What each call launched on", exact=False).first).to_be_visible()


def test_op_names_from_a_trace_never_become_markup_on_the_ops_page(
    server: str, browser: object, tmp_path: Path
) -> None:
    from builders import write_op_pair

    pair = write_op_pair(tmp_path, norm_op=f"custom::norm {HOSTILE}")
    page = _new_page(browser)
    page.goto(f"{server}/Ops?p1={pair[0]}&p2={pair[1]}")
    _settled(page)
    expect(page.get_by_text("evil.example", exact=False).first).to_be_attached()
    assert page.evaluate(FIND_INJECTED) == []
    page.get_by_role("button", name="custom::norm").click()
    _settled(page)
    expect(page.get_by_text("What each call launched on", exact=False).first).to_be_visible()
    assert page.evaluate(FIND_INJECTED) == []


def test_a_batch_result_opens_from_the_batch_list(server: str, browser: object, batches: Path, shots: Path) -> None:
    """The Batch page in a browser (its row links live in the data grid's canvas; test_app follows them)."""
    from fusion.batch import run as batch

    jobs = [
        batch.Job(str(SAMPLE / "amd.json.gz"), str(SAMPLE / "nvidia.json.gz"), f"rank{rank}", rank=rank)
        for rank in range(2)
    ]
    batch.run_batch(jobs, batches / "nightly", workers=1)
    page = _new_page(browser)
    page.goto(f"{server}/Batch")
    _settled(page)
    page.get_by_role("link", name="nightly").click()
    _settled(page)
    assert "batch=nightly" in page.url
    expect(page.get_by_text("Findings across ranks", exact=False).first).to_be_visible()
    expect(page.get_by_test_id("stDataFrame")).to_have_count(2)
    _shot(page, shots, "batch")


def test_the_efficiency_page_draws_the_roofline_and_a_point_opens_its_op(
    server: str, browser: object, shots: Path
) -> None:
    page = _new_page(browser)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(f"{server}/Efficiency?sample=eager_prefill")
    _settled(page)
    chart = _chart(page)
    expect(page.get_by_text("Op calls rated").first).to_be_visible()
    expect(page.locator("[data-testid='stDataFrame']").first).to_be_visible()
    expect(chart.locator(".scatterlayer .trace .point").first).to_be_attached()
    assert page.locator("[data-testid='stException']").count() == 0
    assert page.locator("[data-testid='stAlertContentError']").count() == 0
    _shot(page, shots, "efficiency")
    page.get_by_text("Trace 1's op signatures").click()
    _settled(page)
    assert "etab=1" in page.url
    chart = _chart(page)
    chart.locator(".scatterlayer .trace .point").first.click(force=True)
    _settled(page)
    assert "op=" in page.url and "/Ops" in page.url
    expect(page.get_by_text("What each call launched on", exact=False).first).to_be_visible()
    assert errors == []
