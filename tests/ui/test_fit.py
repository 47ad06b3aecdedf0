"""Issue 39 #1: every table fits a laptop screen (1280 and 1440 px): each numeric column's header is inside the
viewport without scrolling, and no Home metric label is cut off. Every page, for the shared Qwen pair (skipped
without ../shared) and a bundled sample, in a real browser (the server and browser of test_e2e)."""

from __future__ import annotations

import pytest
from test_e2e import _drawn, batches, browser, server, sweep_pairs  # noqa: F401  (fixtures)

WIDTHS = (1280, 1440)
VIEWS = ("", "Overview", "Fusion", "Groups?pair=0", "Kernels", "Kernels?tab=1", "Kernels?tab=2", "Ops")
"""Every page of a comparison (Batch has its own table test), Kernels in its three views."""
SAMPLE = "vllm_moe_full_graph"
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
  for (const frame of document.querySelectorAll("[data-testid='stDataFrame']")) {
    const table = frame.querySelector("table[role=grid]");
    const scroller = frame.querySelector(".dvn-scroller");
    if (!table || !scroller) continue;
    const box = frame.getBoundingClientRect();
    if (box.right > window.innerWidth + 1) out.push(`table ends at ${Math.round(box.right)} px, past the viewport`);
    scroller.scrollLeft = 0; await settle();
    const first = read(table);
    const overflow = scroller.scrollWidth > scroller.clientWidth + 1;
    let all = first;
    if (overflow) {
      scroller.scrollLeft = scroller.scrollWidth; await settle();
      const last = read(table);
      all = {heads: {...first.heads, ...last.heads}, cells: {...first.cells, ...last.cells}};
      scroller.scrollLeft = 0; await settle();
    }
    const shown = Object.keys(first.heads).map(Number);
    const lastShown = Math.max(...shown);
    for (const [i, cells] of Object.entries(all.cells)) {
      const name = all.heads[i];
      if (!name || identifier.test(name) || !cells.every(t => numeric.test(t))) continue;
      const inside = first.heads[i] !== undefined && (!overflow || +i < lastShown);
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
it draws): a column whose cells are all numbers (counts, times, ratios; not the ids pair, correlation, kernel,
trace) must be drawn with the grid scrolled to its left end, before the last column drawn when the grid scrolls
(so wholly visible), and the grid must end inside the viewport; a metric label must not end in an ellipsis."""


def fit_pairs() -> dict[str, str]:
    pairs = sweep_pairs()
    return {name: query for name, query in pairs.items() if name in (SAMPLE, "shared qwen1.5-0.5b")}


def test_tables_fit_1280_and_1440_px_on_every_page(server: str, browser: object) -> None:  # noqa: F811
    pairs = fit_pairs()
    if "shared qwen1.5-0.5b" not in pairs:
        pytest.skip("needs ../shared for the Qwen pair")
    context = browser.new_context(viewport={"width": WIDTHS[0], "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60_000)
    problems = []
    for pair, query in pairs.items():
        for view in VIEWS:
            page.goto(f"{server}/{view}{'&' if '?' in view else '?'}{query}")
            _drawn(page)
            page.wait_for_timeout(500)
            for width in WIDTHS:
                page.set_viewport_size({"width": width, "height": 1000})
                page.wait_for_timeout(400)
                problems += [f"{pair} /{view} at {width} px: {p}" for p in page.evaluate(FIND_CUT_OFF)]
    context.close()
    assert problems == []
