"""What a person waits for: browser time until the dashboard is idle, with real Chromium.

    python bench/browser.py                                   # the bundled sample pair
    python bench/browser.py bench/out/300mb/amd.json.gz bench/out/300mb/nvidia.json.gz
    python bench/browser.py --restarts 5                      # first visits after a server start (issue 39)

Starts `streamlit run serve.py` (the app with its warm-up) on a free port, opens the pair's shared link once so the server has
analysed it (as it has for a link a teammate shares), then --runs times, each in a fresh browser
context: open the shared link, go to Groups, change the type filter, open another pair, go to
Fusion and follow an evidence link, go home and swap the traces. For each step it prints the
median and maximum time from the action's last click (a select box's option, a link, a
button; for the shared link, the start of the navigation) until the page is usable (the script has finished and
its output is drawn) and until it is idle (also no request in flight, such as chart code loaded
on first use, and no change for QUIET_MS; the quiet window itself is not counted). The machine's
load average is printed too: on a shared machine every figure grows with it.

The last row is the floor: a bare Streamlit page (one line of text, its own server) opened the same way
after each run. Any Streamlit app waits that long in a fresh browser context (its JavaScript loads and
starts, the session connects) before its script's output can show; the rest of a step's time is the
dashboard's.

--restarts N measures instead what a first visit after a server start costs, N times, each on a fresh server
process (the disk caches kept, as a restart keeps them): `serve.py` is started and, once its warm-up is done
(GET /fusion/warm-up), the sample's Home link is opened (the first visit), then again (a warm visit), then the
Groups link and the Home link once more, each in a fresh browser context; beside it `app.py` without the warm-up,
opened the same way (its first visit is what a restart cost before). It prints the medians side by side, the
differences first - warm and Groups - Home (goals <= 1.0 s and <= 0.5 s), how long the warm-up took after the
server answered, and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode

from playwright.sync_api import Page, sync_playwright

PROJECT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(PROJECT), str(PROJECT / "tests"), str(PROJECT / "tests" / "ui")]  # ui, builders, test_e2e

import chromium  # noqa: E402
from test_e2e import _free_port, _wait_until_serving  # noqa: E402

from ui.warmup import PATH as WARM_UP_PATH  # noqa: E402
from ui.widgets import page_url  # noqa: E402

QUIET_MS = 300
TIMEOUT_MS = 600_000
FIRST_VISIT_GOAL_S = 1.0
"""A first visit after a server start is usable within this much of a warm visit (issue 39)."""
GROUPS_LINK_GOAL_S = 1.0 / 2
"""A link to the Groups view is usable within this much of the Home link (issue 39)."""
WARM_UP_TIMEOUT_S = 120
WATCH_CHANGES = """
window.__changed = performance.now();
window.__clicked = 0;
new MutationObserver(() => { window.__changed = performance.now(); })
  .observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
window.addEventListener('click', () => { window.__clicked = performance.now(); }, true);
"""
"""Records when the DOM last changed and when the person last clicked (the last click of an action, such as
the option of an opened select box, is where their wait begins)."""
STATE = """([started, quiet]) => {
  const app = document.querySelector("[data-testid='stApp']");
  const done = Boolean(app && app.getAttribute('data-test-script-state') === 'notRunning' && window.__changed > started);
  return {done, quiet: done && performance.now() - window.__changed >= quiet, now: performance.now(), changed: window.__changed};
}"""


BARE_PAGE = 'import streamlit as st\n\nst.write("A bare Streamlit page.")\n'
"""The floor's script."""


@contextmanager
def server(env: dict[str, str], script: str = "serve.py") -> Iterator[str]:
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        script,
        "--server.headless",
        "true",
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--browser.gatherUsageStats",
        "false",
    ]
    process = subprocess.Popen(command, cwd=PROJECT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_until_serving(url, process)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


class Requests:
    """HTTP requests of a page still in flight (lazily loaded chart and table code, media)."""

    def __init__(self, page: Page) -> None:
        self.open = 0
        page.on("request", lambda _: self._count(1))
        page.on("requestfinished", lambda _: self._count(-1))
        page.on("requestfailed", lambda _: self._count(-1))

    def _count(self, change: int) -> None:
        self.open += change


def idle_after(
    page: Page, requests: Requests, action: Callable[[], None], *, navigation: bool = False
) -> tuple[float, float]:
    """Seconds from the action's last click (or the start of a navigation) until the page is usable (the script
    has finished and its output is drawn) and until it is idle (also nothing loading, e.g. chart code, and no
    change for QUIET_MS, which is not counted). The time Playwright takes to find and open widgets before
    that click is no wait of the person's."""
    before = 0.0 if navigation else page.evaluate("performance.now()")
    action()
    started = before if navigation else max(before, page.evaluate("window.__clicked"))
    usable = None
    deadline = time.monotonic() + TIMEOUT_MS / 1000
    while time.monotonic() < deadline:
        page.wait_for_timeout(50)
        state = page.evaluate(STATE, [started, QUIET_MS])
        if state["done"] and usable is None:
            usable = (state["now"] - started) / 1000
        if state["quiet"] and requests.open == 0:
            return usable, (state["changed"] - started) / 1000
    raise TimeoutError("the page did not become idle")


@contextmanager
def fresh_page(browser: object) -> Iterator[tuple[Page, Requests]]:
    """A page in a fresh browser context (nothing cached), watched for changes and requests."""
    context = browser.new_context(viewport={"width": 1500, "height": 1100})
    context.add_init_script(WATCH_CHANGES)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        yield page, Requests(page)
    finally:
        context.close()


def session(browser: object, base: str, query: str) -> dict[str, tuple[float, float]]:
    """One teammate's walk through the app in a fresh browser context."""
    with fresh_page(browser) as (page, requests):

        def step(action: Callable[[], object], **kwargs: bool) -> tuple[float, float]:
            return idle_after(page, requests, action, **kwargs)

        times = {"open the shared link": step(lambda: page.goto(f"{base}/?{query}"), navigation=True)}
        times["go to Groups"] = step(lambda: page.get_by_role("link", name="Groups", exact=True).click())
        box = page.locator(".st-key-type_filter [data-testid='stSelectbox']")
        times["change the type filter"] = step(lambda: (box.click(), page.get_by_role("option").nth(1).click()))
        pair_box = page.locator(".st-key-pair_pick [data-testid='stSelectbox']")
        times["open another pair"] = step(lambda: (pair_box.click(), page.get_by_role("option").last.click()))
        times["go to Fusion"] = step(lambda: page.get_by_role("link", name="Fusion", exact=True).click())
        times["follow an evidence link"] = step(lambda: page.get_by_role("link", name="Open evidence").first.click())
        times["go home"] = step(lambda: page.get_by_role("link", name="Home", exact=True).click())
        times["swap the traces"] = step(lambda: page.get_by_role("button", name="Swap traces").click())
        return times


def bare_page(browser: object, base: str) -> tuple[float, float]:
    """Opening a bare Streamlit page in a fresh browser context: the floor of every shared link."""
    with fresh_page(browser) as (page, requests):
        return idle_after(page, requests, lambda: page.goto(base), navigation=True)


def wait_for_warm_up(base: str) -> float:
    """Seconds until the server's warm-up (ui.warmup) says it is done; raises when it failed or took too long."""
    started = time.monotonic()
    while time.monotonic() - started < WARM_UP_TIMEOUT_S:
        with urllib.request.urlopen(base + WARM_UP_PATH, timeout=10) as response:
            state = json.load(response)
        if state["status"] == "done":
            return time.monotonic() - started
        if state["status"] == "failed":
            raise RuntimeError(f"the warm-up failed: {state['error']}")
        time.sleep(0.05)
    raise TimeoutError(f"the warm-up was not done within {WARM_UP_TIMEOUT_S} s")


def visit(browser: object, url: str) -> float:
    """Seconds until a link opened in a fresh browser context is usable."""
    with fresh_page(browser) as (page, requests):
        return idle_after(page, requests, lambda: page.goto(url), navigation=True)[0]


def restart(browser: object, env: dict[str, str], query: str, script: str) -> dict[str, float]:
    """A fresh server process: its first visit (after its warm-up, for serve.py), a warm one, the Groups link and
    the Home link again."""
    with server(env, script) as base:
        times = {"warm-up after serving": wait_for_warm_up(base) if script == "serve.py" else 0.0}
        home = f"{base}/?{query}"
        times["first visit"] = visit(browser, home)
        times["warm visit"] = visit(browser, home)
        times["Groups link"] = visit(browser, f"{base}/{page_url('groups', query)}")
        times["Home link"] = visit(browser, home)
    times["first - warm"] = times["first visit"] - times["warm visit"]
    times["Groups - Home"] = times["Groups link"] - times["Home link"]
    return times


def restarts(browser: object, env: dict[str, str], query: str, count: int) -> None:
    """--restarts: first visits after a server start, with and without the warm-up, interleaved."""
    load = f"{os.getloadavg()[0]:.1f}"
    for script in ("app.py", "serve.py"):  # not counted: the disk caches are filled, as before any restart
        restart(browser, env, query, script)
    runs: dict[str, list[dict[str, float]]] = {"serve.py": [], "app.py": []}
    for _ in range(count):
        for script in runs:
            runs[script].append(restart(browser, env, query, script))
    print(f"browser: {chromium.executable()}; load average before and after: {load} -> {os.getloadavg()[0]:.1f}")
    print(f"median of {count} server starts, usable (s){'serve.py (warm-up)':>22}{'app.py (none)':>15}   goal")
    goals = {"first - warm": FIRST_VISIT_GOAL_S, "Groups - Home": GROUPS_LINK_GOAL_S}
    for step in ("first - warm", "Groups - Home", "first visit", "warm visit", "Groups link", "Home link"):
        with_, without = (statistics.median(run[step] for run in runs[script]) for script in runs)
        goal = f"<= {goals[step]:.1f}" if step in goals else ""
        print(f"{step:<38}{with_:>22.2f}{without:>15.2f}   {goal}")
    seconds = [run["warm-up after serving"] for run in runs["serve.py"]]
    print(f"the warm-up done after serving: median {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace1", type=Path, nargs="?")
    parser.add_argument("trace2", type=Path, nargs="?")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--restarts", type=int, default=0, help="measure first visits after N server starts")
    args = parser.parse_args()
    pair = (
        {"p1": str(args.trace1.resolve()), "p2": str(args.trace2.resolve())}
        if args.trace1
        else {"sample": "vllm_moe_full_graph"}
    )
    query = urlencode(pair)
    load = f"{os.getloadavg()[0]:.1f}"
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "FUSION_STORE_DIR": f"{folder}/store", "FUSION_CACHE_DIR": f"{folder}/tables"}
        env.pop("FUSION_HOSTED", None)
        if args.restarts:
            with sync_playwright() as driver:
                browser = driver.chromium.launch(**chromium.launch_options())
                restarts(browser, env, query, args.restarts)
                browser.close()
            return
        bare_script = Path(folder) / "bare_page.py"
        bare_script.write_text(BARE_PAGE)
        with server(env) as base, server(env, str(bare_script)) as bare_base, sync_playwright() as driver:
            browser = driver.chromium.launch(**chromium.launch_options())
            started = time.perf_counter()
            session(browser, base, query)
            print(f"first analysis and walk-through (not counted): {time.perf_counter() - started:.1f} s")
            bare_page(browser, bare_base)
            runs, bare = [], []
            for _ in range(args.runs):  # side by side: each run of the dashboard, then the floor
                runs.append(session(browser, base, query))
                bare.append(bare_page(browser, bare_base))
            browser.close()
    print(f"browser: {chromium.executable()}; load average before and after: {load} -> {os.getloadavg()[0]:.1f}")
    print(
        f"{'step (fresh browser context each run)':<32}{'usable: median':>16}{'max':>6}{'idle: median':>14}{'max':>6}"
    )
    for step in runs[0]:
        usable, idle = ([run[step][i] for run in runs] for i in (0, 1))
        _row(step, usable, idle)
    _row("floor: a bare Streamlit page", [b[0] for b in bare], [b[1] for b in bare])


def _row(step: str, usable: list[float], idle: list[float]) -> None:
    print(
        f"{step:<32}{statistics.median(usable):>16.2f}{max(usable):>6.2f}{statistics.median(idle):>14.2f}{max(idle):>6.2f}"
    )


if __name__ == "__main__":
    main()
