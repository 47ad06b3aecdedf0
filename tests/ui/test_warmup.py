"""The server's warm-up (ui.warmup, started by serve.py): it fills the caches a first visit reads."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import streamlit as st
from streamlit import config
from streamlit.web.server.app_discovery import discover_asgi_app

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fusion.model.phases import ALL as ALL_PHASES  # noqa: E402
from ui import data, warmup  # noqa: E402
from ui.state import DEFAULT_MIN_GROUP_SIZE, View  # noqa: E402


def test_the_warm_up_leaves_the_default_sample_compared_in_the_servers_caches(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FUSION_CACHE_DIR", str(tmp_path / "tables"))
    monkeypatch.setenv("FUSION_STORE_DIR", str(tmp_path / "store"))
    st.cache_resource.clear()  # what a fresh server process has
    monkeypatch.setattr(warmup, "STATE", warmup.State())
    warmup.run()
    assert warmup.STATE.status == "done", warmup.STATE.error
    found, _ = data.sources(View(sample=data.default_sample()))
    traces = [data._traces().get(source.key) for source in found]
    assert all(trace is not None for trace in traces)
    key = (traces[0].digest, traces[1].digest, DEFAULT_MIN_GROUP_SIZE, ALL_PHASES, False)
    comparison = data._comparisons().get(key)
    assert comparison is not None
    assert int(comparison.pairs["pair_id"].iloc[0]) in comparison._alignments


def test_serve_py_is_an_app_streamlit_run_starts_and_it_reports_the_warm_up(monkeypatch) -> None:
    assert discover_asgi_app(ROOT / "serve.py").is_asgi_app
    monkeypatch.setattr(config, "_main_script_path", config._main_script_path)  # st.App sets it for the process
    import serve

    monkeypatch.setattr(warmup, "STATE", warmup.State("failed", None, "OSError: no room"))
    response = asyncio.run(serve.warm_up_state(None))
    assert json.loads(response.body) == {"status": "failed", "seconds": None, "error": "OSError: no room"}


def test_a_visit_during_the_warm_up_waits_for_its_analysis_instead_of_repeating_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("FUSION_CACHE_DIR", str(tmp_path / "tables"))
    monkeypatch.setenv("FUSION_STORE_DIR", str(tmp_path / "store"))
    st.cache_resource.clear()
    monkeypatch.setattr(warmup, "STATE", warmup.State())
    loads, compares = _counted(monkeypatch, "load_traces"), _counted(monkeypatch, "cached_compare")
    warming = threading.Thread(target=warmup.run)
    warming.start()
    visit = data.analyse(View(sample=data.default_sample()), shown=False)
    warming.join()
    assert warmup.STATE.status == "done", warmup.STATE.error
    assert visit.comparison is not None
    assert (len(loads), len(compares)) == (1, 1), loads


def test_one_make_per_key_however_many_threads_ask_at_once() -> None:
    cache, made = data.Lru(4), []
    release = threading.Event()

    def make() -> str:
        made.append(1)
        release.wait(5)
        return "value"

    with ThreadPoolExecutor(6) as pool:
        asked = [pool.submit(cache.made, "key", make) for _ in range(6)]
        time.sleep(0.2)  # all six are asking before the first make returns
        release.set()
        assert [future.result() for future in asked] == ["value"] * 6
    assert len(made) == 1


def test_a_failed_make_is_not_kept_and_the_next_ask_makes_it_again() -> None:
    cache = data.Lru(4)

    def fail() -> str:
        raise OSError("no room")

    with pytest.raises(OSError):
        cache.made("key", fail)
    assert cache.made("key", lambda: "value") == "value"


def _counted(monkeypatch, name: str) -> list[tuple]:
    """Calls of ui.data's `name`, which still does its work."""
    calls: list[tuple] = []
    real = getattr(data, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(data, name, counted)
    return calls
