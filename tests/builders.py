"""Test helpers: where the real traces live, and small trace-file builders."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import orjson
import pytest

PROJECT = Path(__file__).resolve().parents[1]
SHARED_TRACES = PROJECT.parent / "shared" / "traces"
SAMPLES = PROJECT / "sample_traces"


def shared_trace(name: str) -> Path:
    """The trace file of one shared folder; skips the test when ../shared is absent."""
    folder = SHARED_TRACES / name
    if not folder.is_dir():
        pytest.skip(f"shared trace {name} not available ({SHARED_TRACES} is absent)")
    return next(p for p in sorted(folder.iterdir()) if p.name.endswith((".json", ".json.gz")))


def shared_trace_names() -> list[str]:
    if not SHARED_TRACES.is_dir():
        return []
    return sorted(p.name for p in SHARED_TRACES.iterdir() if (p / "kernel_names.txt").exists())


def kernel_event(name: str, ts: float, dur: float, correlation: int, cat: str = "kernel", **args: Any) -> dict:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": 7, "correlation": correlation, **args},
    }


def trace_json(events: list[dict], **top: Any) -> bytes:
    doc = {"schemaVersion": 1, **top, "traceEvents": events}
    return orjson.dumps(doc)


def write_trace(path: Path, events: list[dict], *, compress: bool = False, **top: Any) -> Path:
    data = trace_json(events, **top)
    path.write_bytes(gzip.compress(data) if compress else data)
    return path
