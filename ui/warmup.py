"""The server's warm-up: what the landing page needs, prepared once when the server starts (serve.py).

A first visit after a restart used to pay for the dashboard's imports (pandas, plotly, pyarrow, the app's modules
and Streamlit's emoji catalogue, which the page icon's check loads: about 0.6 s of regular expressions), the
default sample's load and comparison, the first pair's alignment and the compiled code's start, while a warm
visit found them all in the process's caches (bench/browser.py measures both). The warm-up fills the same
process-wide caches the pages read (ui.data) in a daemon thread started from the server's lifespan, so the server
accepts sessions at once; a visit during the warm-up does the remaining work itself, as before.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

LOG = logging.getLogger(__name__)
PATH = "/fusion/warm-up"
"""Where serve.py answers how the warm-up went (JSON of STATE)."""


@dataclass
class State:
    """How the warm-up went: not started, running, done (with its seconds) or failed (with its error)."""

    status: str = "not started"
    seconds: float | None = None
    error: str | None = None


STATE = State()


def warm() -> float:
    """Import the pages' modules, start the compiled code's fill, analyse the default sample pair and draw what
    its landing page and its first Groups pair show; the seconds it took."""
    started = time.perf_counter()
    import plotly.graph_objects as go
    import pyarrow  # noqa: F401  (st.dataframe's serialisation)
    import streamlit.emojis  # noqa: F401  (st.set_page_config's check of the page icon)

    import ui.widgets  # noqa: F401  (ui.data, ui.tables, ui.charts, pandas, plotly)
    from fusion.result import COUNT_RATIO
    from ui import charts, data
    from ui.state import View

    sample = data.default_sample()
    if sample is not None:
        comparison = data.analyse(View(sample=sample), shown=False).comparison
        if comparison is not None:
            charts.ratio_svg(comparison.type_stats, COUNT_RATIO, "trace 1 / trace 2 kernels")
            if not comparison.pairs.empty:
                comparison.alignment(int(comparison.pairs["pair_id"].iloc[0]))
    go.Figure().to_json()  # plotly's validators and JSON encoder load on first use
    return time.perf_counter() - started


def run() -> None:
    """warm(), recorded in STATE; a failure is logged, never raised: the warm-up is an optimisation, and a visit
    does the same work and reports its errors."""
    STATE.status = "running"
    try:
        STATE.seconds = warm()
        STATE.status = "done"
        LOG.info("warm-up done in %.1f s", STATE.seconds)
    except Exception as exc:
        STATE.status, STATE.error = "failed", f"{type(exc).__name__}: {exc}"
        LOG.exception("warm-up failed; the first visit does its work instead")


@asynccontextmanager
async def lifespan(_app: Any) -> AsyncIterator[None]:
    """st.App's lifespan hook: start the warm-up beside the server, which serves meanwhile."""
    threading.Thread(target=run, name="fusion-warm-up", daemon=True).start()
    yield
