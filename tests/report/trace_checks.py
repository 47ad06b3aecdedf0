"""Reading an exported timeline back as a viewer would, and checking it against the comparison it came from.

Used by tests/report/test_perfetto.py and by bench/perfetto_export.py (on the 1 GB pair). Independent of the
writer: it reads the file, the Chrome trace event format's schema (chrome_trace_event.schema.json, written from
the format's document) and the Comparison, never fusion.report.timeline.
"""

from __future__ import annotations

import gzip
from collections import defaultdict
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import orjson

from fusion.comparison.result import Comparison

SCHEMA = Path(__file__).with_name("chrome_trace_event.schema.json")
HALF_NS = 0.0005
"""Times are microseconds to the nanosecond: closer than half a nanosecond is the same time."""
ALIGNED_OPS = ("match", "substitute")


def read(path: Path) -> dict[str, Any]:
    data = Path(path).read_bytes()
    return orjson.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


def schema_problems(doc: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(orjson.loads(SCHEMA.read_bytes()))
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)][:20]


def viewer_problems(doc: dict[str, Any]) -> list[str]:
    """What would make a viewer misdraw the file: unnamed processes or threads, slices of one thread that overlap
    without nesting, flows without exactly one start and one end."""
    events = doc["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    named = {(e["pid"], e.get("tid")) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    processes = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    problems = [f"process {p} has no name" for p in sorted({e["pid"] for e in slices} - processes)]
    problems += [f"thread {t} has no name" for t in sorted({(e["pid"], e["tid"]) for e in slices} - named)]
    by_thread: dict[tuple[int, int], list[dict]] = defaultdict(list)
    for event in slices:
        by_thread[(event["pid"], event["tid"])].append(event)
    for thread, found in by_thread.items():
        open_ends: list[float] = []
        for event in sorted(found, key=lambda e: (e["ts"], -e["dur"])):
            start, end = event["ts"], event["ts"] + event["dur"]
            while open_ends and open_ends[-1] <= start + HALF_NS:
                open_ends.pop()
            if open_ends and end > open_ends[-1] + HALF_NS:
                problems.append(f"thread {thread}: {event['name'][:60]!r} at {start} overlaps without nesting")
                break
            open_ends.append(end)
    flows: dict[Any, list[str]] = defaultdict(list)
    for event in slices:
        if "bind_id" in event:
            flows[event["bind_id"]].append("out" if event.get("flow_out") else "in" if event.get("flow_in") else "?")
    problems += [f"flow {k}: {sorted(v)}" for k, v in flows.items() if sorted(v) != ["in", "out"]]
    return problems


def kernels_by_process(doc: dict[str, Any]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = defaultdict(list)
    for event in doc["traceEvents"]:
        if event["ph"] == "X" and event["cat"] == "kernel":
            out[event["pid"]].append(event)
    return out


def check_against(doc: dict[str, Any], comparison: Comparison) -> dict[str, int]:
    """The file says what the comparison says: each kernel is the comparison's kernel (name, duration, start in
    its trace), each flow joins two kernels the pair alignment aligns and every such pair of exported kernels
    has one, one-sided kernels are the alignment's, and each finding slice covers every kernel it cites and is
    one of the comparison's findings. Returns the counts."""
    kernels = kernels_by_process(doc)
    rows = {}
    for side in (1, 2):
        table = comparison.trace(side).kernels
        events = kernels[side]
        at = np.array([e["args"]["kernel row"] for e in events], dtype=np.int64)
        assert len(np.unique(at)) == len(at), f"trace {side}: a kernel exported twice"
        assert [e["name"] for e in events] == table["name"].astype(str).to_numpy()[at].tolist()
        np.testing.assert_allclose([e["dur"] for e in events], table["dur"].to_numpy()[at], atol=HALF_NS)
        np.testing.assert_allclose(
            [e["args"]["ts in trace (us)"] for e in events], table["ts"].to_numpy()[at], atol=HALF_NS
        )
        rows[side] = {int(r): e for r, e in zip(at.tolist(), events)}
    flows = _flows(kernels)
    aligned, one_sided = _alignments(comparison, rows)
    assert flows == aligned, f"{len(flows ^ aligned)} flows differ from the pair alignments"
    for side in (1, 2):
        marked = {r for r, e in rows[side].items() if e["args"]["alignment"] == "one-sided"}
        assert marked == one_sided[side], f"trace {side}: one-sided kernels differ from the alignments"
    findings = _check_findings(doc, comparison, rows)
    gaps = sum(1 for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "alignment")
    return {"kernels1": len(rows[1]), "kernels2": len(rows[2]), "flows": len(flows), "findings": findings, "gaps": gaps}


def _flows(kernels: dict[int, list[dict]]) -> set[tuple[int, int]]:
    ends: dict[Any, dict[int, int]] = defaultdict(dict)
    for side in (1, 2):
        for event in kernels[side]:
            if "bind_id" in event:
                assert event.get("flow_out" if side == 1 else "flow_in"), "flows run from trace 1 to trace 2"
                ends[event["bind_id"]][side] = event["args"]["kernel row"]
    assert all(len(e) == 2 for e in ends.values()), "a flow without both ends"
    return {(e[1], e[2]) for e in ends.values()}


def _alignments(comparison: Comparison, rows: dict[int, dict[int, dict]]) -> tuple[set, dict[int, set]]:
    """Aligned pairs of exported kernels and each side's one-sided exported kernels, per the pairs they name."""
    pairs = {e["args"]["pair"] for side in (1, 2) for e in rows[side].values()} - {-1}
    aligned: set[tuple[int, int]] = set()
    one_sided: dict[int, set[int]] = {1: set(), 2: set()}
    for pid in sorted(pairs):
        table = comparison.alignment(pid)
        for op, a, b in zip(table["op"], table["index1"], table["index2"]):
            if op in ALIGNED_OPS and a in rows[1] and b in rows[2]:
                aligned.add((int(a), int(b)))
            elif op == "only1" and a in rows[1]:
                one_sided[1].add(int(a))
            elif op == "only2" and b in rows[2]:
                one_sided[2].add(int(b))
    return aligned, one_sided


def _check_findings(doc: dict[str, Any], comparison: Comparison, rows: dict[int, dict[int, dict]]) -> int:
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "finding"]
    for found in slices:
        kind, number = found["name"].split(":", 1)[0].rsplit(" ", 1)
        finding = (comparison.one_sided if kind == "one-sided" else comparison.mappings)[int(number) - 1]
        windows = []
        for side in (1, 2):
            cited = found["args"].get(f"trace {side} kernel rows")
            if cited is None:
                windows.append((-1, -1))
                continue
            start, last = (int(x) for x in cited.split(".."))
            windows.append((start, last + 1))
            events = [rows[side][r] for r in range(start, last + 1)]
            assert min(e["ts"] for e in events) >= found["ts"] - HALF_NS, found["name"]
            assert max(e["ts"] + e["dur"] for e in events) <= found["ts"] + found["dur"] + HALF_NS, found["name"]
            assert found["args"][f"trace {side} cited kernels"][: len(events)] == [e["name"] for e in events][:20]
        assert any((tuple(r.window1), tuple(r.window2)) == tuple(windows) for r in finding.evidence_refs)
    return len(slices)


def round_trip(path: Path, doc: dict[str, Any]) -> dict[int, int]:
    """Load the file with this project's loader, one device per process: each must read as that side's kernels."""
    from fusion.classify.trace import load

    kernels = kernels_by_process(doc)
    counts = {}
    for side in (1, 2):
        if not kernels[side]:
            continue
        loaded = load(path, device=side).kernels
        counts[side] = len(loaded)
        assert sorted(loaded["name"].astype(str)) == sorted(e["name"] for e in kernels[side])
    return counts
