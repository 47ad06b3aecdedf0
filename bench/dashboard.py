"""Dashboard server time per interaction on a large pair, after the analysis is cached.

    python bench/dashboard.py bench/out/1000mb_plain/amd.json bench/out/1000mb_plain/nvidia.json

Runs each page with Streamlit's AppTest in this process (the caches are process-wide, as on a
server), first once to load and analyse the pair, then each interaction --runs times, and prints
the median script time: what the server spends before the browser can redraw.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from streamlit.testing.v1 import AppTest  # noqa: E402

from ui.state import PAGES  # noqa: E402


def run_page(page: str, params: dict[str, str], timeout: float) -> float:
    """Seconds for one script run of `page` with `params` in its URL."""
    app = AppTest.from_file(str(PROJECT / PAGES[page]), default_timeout=timeout)
    for key, value in params.items():
        app.query_params[key] = value
    started = time.perf_counter()
    app.run()
    elapsed = time.perf_counter() - started
    if app.exception:
        raise SystemExit(f"{page} failed: {app.exception[0].message}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace1", type=Path)
    parser.add_argument("trace2", type=Path)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    base = {"p1": str(args.trace1.resolve()), "p2": str(args.trace2.resolve())}
    print(f"first run (load, classify, match, detect): {run_page('home', base, 600):.2f} s")
    interactions = {
        "home page": ("home", {}),
        "overview page": ("overview", {}),
        "fusion page": ("fusion", {}),
        "kernels page": ("kernels", {}),
        "groups page, pair 0": ("groups", {"pair": "0"}),
        "groups page, filtered by type Sort": ("groups", {"type": "Sort"}),
        "groups page, pair 1000 with an evidence window": ("groups", {"pair": "1000", "w1": "10-14", "w2": "10-12"}),
    }
    print(f"{'interaction':<50}{'median s':>10}{'max s':>8}")
    for what, (page, extra) in interactions.items():
        times = [run_page(page, {**base, **extra}, 120) for _ in range(args.runs)]
        print(f"{what:<50}{statistics.median(times):>10.3f}{max(times):>8.3f}")


if __name__ == "__main__":
    main()
