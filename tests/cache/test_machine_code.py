"""numba's machine code is made ready before a large pair is read: by the CLI in its own process, by a server in
a background process that holds the compile lock, meanwhile readers take their plain paths."""

from __future__ import annotations

import sys

from builders import kernel_event, trace_json

from fusion import compiled
from fusion.cache import machine_code
from fusion.cache.loading import Request, load_traces
from fusion.loader import events as events_module


def _trace_file(tmp_path, name: str):
    path = tmp_path / name
    path.write_bytes(trace_json([kernel_event(f"k{i % 3}", float(i), 1.0, i) for i in range(50)]))
    return path


def test_a_one_shot_load_of_a_large_file_fills_the_cache_first_and_a_small_one_does_not(monkeypatch, tmp_path):
    fills: list[str] = []
    monkeypatch.setattr(machine_code, "fill", lambda: fills.append("fill") or True)
    path = _trace_file(tmp_path, "t.json")
    for threshold, expected in ((path.stat().st_size + 1, []), (path.stat().st_size, ["fill"])):
        fills.clear()
        monkeypatch.setattr(events_module, "COMPILED_SCAN_MIN_BYTES", threshold)
        (trace,) = load_traces([Request(path)], isolated=False)
        assert trace.kernel_count == 50
        assert fills == expected


def test_an_isolated_load_leaves_the_fill_to_the_server(monkeypatch, tmp_path):
    monkeypatch.setattr(machine_code, "fill", lambda: (_ for _ in ()).throw(AssertionError("filled")))
    monkeypatch.setattr(events_module, "COMPILED_SCAN_MIN_BYTES", 0)
    (trace,) = load_traces([Request(_trace_file(tmp_path, "t.json"))], isolated=True)
    assert trace.kernel_count == 50


def test_no_second_background_fill_starts_while_one_holds_the_lock(monkeypatch, tmp_path):
    monkeypatch.setattr(compiled, "lock_path", lambda: tmp_path / "compile.lock")
    with compiled.compile_lock(wait=False) as held:
        assert held
        assert machine_code.fill_in_background() is None
        with compiled.compile_lock(wait=False) as second:
            assert not second


def test_the_background_fill_exits_once_the_cache_is_filled(monkeypatch, tmp_path):
    """The fill runs as a child process and leaves numba's cache filled (here it was filled already, by the
    tests before: the child only checks, loads nothing and exits)."""
    monkeypatch.setattr(compiled, "lock_path", lambda: tmp_path / "compile.lock")
    assert machine_code.fill()
    assert not machine_code.pending()
    child = machine_code.fill_in_background()
    assert child is not None and child.wait(timeout=120) == 0
    assert child.args == [sys.executable, "-m", "fusion.cache.machine_code"]
