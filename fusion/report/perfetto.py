"""An aligned timeline (fusion.report.timeline) as one trace file for the Perfetto UI and chrome://tracing.

The file is Chrome trace-event JSON (the JSON Object Format: `traceEvents`, `displayTimeUnit`, `otherData`),
which both viewers open as it is and this project's loader reads back like a Kineto trace; docs/timeline.md
says why not Perfetto's protobuf format (bench/perfetto_export.py measures both). In it:

- one process per trace, named by its GPU and file, with one thread per GPU stream ('stream 7'; a stream whose
  kernels overlap in time gets more threads, since a viewer nests slices of one thread); each kernel a complete
  event ('X') with its raw name and duration, on the aligned time axis; its args carry the operation type, fused
  components, implementation, launching op, module, phase and step, what the alignment says of it, its row in
  the comparison's kernel table and its start in its own trace. `args.device` is the process (1 or 2), so the
  loader keeps the two traces apart; the kernel's device in its own trace is `device in trace`;
- a flow (v2: `bind_id` with `flow_out` on trace 1's kernel and `flow_in` on trace 2's) from each kernel to the
  kernel it is aligned with;
- per trace an 'aligned: gaps' thread, one slice per wait inserted so that the next unit starts together, and
  'one-sided kernels' threads marking each kernel without a counterpart;
- a 'Findings' process: one slice per cited occurrence of a finding or one-sided note, from the first cited
  kernel's start to the last one's end, with its text and the cited kernels' names.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from fusion import __version__
from fusion.comparison.result import Comparison
from fusion.report.timeline import (
    DEFAULT_SCOPE,
    ONE_SIDED,
    STATUSES,
    FindingSpan,
    Lane,
    Scope,
    Timeline,
    aligned_timeline,
)
from fusion.result import FusionMapping

FINDINGS_PID = 3
"""Processes 1 and 2 are the traces."""
DISPLAY_TIME_UNIT = "ns"
"""Durations are shown to the nanosecond (trace times are microseconds with three decimals)."""
KERNEL_CATEGORY = "kernel"
"""As in Kineto traces, so that the loader reads the kernels back."""
GAP_CATEGORY, ONE_SIDED_CATEGORY, FINDING_CATEGORY = "alignment", "one-sided", "finding"
MAX_CITED_NAMES = 20
"""A finding slice names at most this many cited kernels per side (in kernel order), and says how many more."""
Event = dict[str, Any]


def chrome_trace(comparison: Comparison, timeline: Timeline) -> dict[str, Any]:
    """The timeline as a Chrome trace-event JSON document (see module doc)."""
    events: list[Event] = []
    for lane in timeline.lanes:
        events += _trace_events(comparison, timeline, lane)
    events += _finding_events(comparison, timeline)
    traces = {f"trace {s}": comparison.trace(s).source for s in (1, 2)}
    return {
        "traceEvents": events,
        "displayTimeUnit": DISPLAY_TIME_UNIT,
        "otherData": {
            "exported by": f"fusion export (Fusion Explorer {__version__})",
            "scope": timeline.scope,
            **traces,
            "aligned": f"{len(timeline.units)} matched units start together on both sides; "
            f"{len(timeline.gaps)} waits inserted (the 'aligned: gaps' threads)",
        },
    }


def to_json(comparison: Comparison, scope: Scope = DEFAULT_SCOPE) -> bytes:
    """The scope's aligned timeline as Chrome trace-event JSON bytes."""
    return orjson.dumps(chrome_trace(comparison, aligned_timeline(comparison, scope)))


def write(comparison: Comparison, scope: Scope, path: str | Path) -> Timeline:
    """Write the scope's aligned timeline to `path` (gzip-compressed when it ends in .gz); returns the timeline."""
    timeline = aligned_timeline(comparison, scope)
    data = orjson.dumps(chrome_trace(comparison, timeline))
    Path(path).write_bytes(gzip.compress(data, compresslevel=6) if str(path).endswith(".gz") else data)
    return timeline


def process_name(comparison: Comparison, side: int) -> str:
    """'AMD Instinct MI300X — amd.json': the GPU and the file."""
    trace = comparison.trace(side)
    return f"{trace.label} — {Path(trace.source).name}"


# --- one trace's process -----------------------------------------------------------------------------------


def _trace_events(comparison: Comparison, timeline: Timeline, lane: Lane) -> list[Event]:
    side, pid = lane.side, lane.side
    kernels = comparison.trace(side).kernels
    picked = kernels.iloc[lane.rows]
    dur = picked["dur"].to_numpy(np.float64)
    streams = picked["stream"].to_numpy(np.int64)
    tids, thread_names = _stream_threads(streams, lane.start, dur)
    next_tid = max(tids, default=0) + 1
    events = [
        _meta("process_name", pid, 0, name=process_name(comparison, side)),
        _meta("process_sort_index", pid, 0, sort_index=side),
    ]
    events += [_meta("thread_name", pid, tid, name=name) for tid, name in thread_names.items()]
    events += [_meta("thread_sort_index", pid, tid, sort_index=tid) for tid in thread_names]
    names = picked["name"].astype(str).tolist()
    args = _kernel_args(comparison, timeline, lane, picked, pid)
    flows = _flow_ids(timeline, lane)
    for name, start, length, tid, kernel_args, flow in zip(names, lane.start.tolist(), dur.tolist(), tids, args, flows):
        event: Event = {
            "ph": "X",
            "cat": KERNEL_CATEGORY,
            "name": name,
            "pid": pid,
            "tid": tid,
            "ts": start,
            "dur": length,
            "args": kernel_args,
        }
        if flow:
            event["bind_id"] = flow
            event["flow_out" if side == 1 else "flow_in"] = True
        events.append(event)
    gaps_tid, one_sided_tid = next_tid, next_tid + 1
    events += _gap_events(timeline, side, pid, gaps_tid)
    events += _one_sided_events(lane, dur, names, pid, one_sided_tid)
    return events


def _kernel_args(
    comparison: Comparison, timeline: Timeline, lane: Lane, picked: pd.DataFrame, pid: int
) -> list[dict[str, Any]]:
    """Per kernel of the lane, the args its slice carries (see module doc)."""
    facts = _name_facts(comparison, lane.side)
    columns: dict[str, list[str] | list[int]] = {
        "type": _strings(picked, "type"),
        "op": _strings(picked, "op"),
        "module": _strings(picked, "module"),
        "phase": _strings(picked, "phase"),
        "step": _ints(picked, "step"),
    }
    names = picked["name"].astype(str).tolist()
    ts = picked["ts"].to_numpy(np.float64).tolist()
    device, stream, correlation = (_ints(picked, c) for c in ("device", "stream", "correlation"))
    status, pair, rows, fused = lane.status.tolist(), lane.pair.tolist(), lane.rows.tolist(), lane.fused.tolist()
    found = _citing_findings(timeline, lane)
    out = []
    for k, name in enumerate(names):
        args = {column: values[k] for column, values in columns.items()} | facts.get(name, {})
        args |= {
            "alignment": STATUSES[status[k]],
            "pair": pair[k],
            "kernel row": rows[k],
            "ts in trace (us)": ts[k],
            "device": pid,
            "device in trace": device[k],
            "stream": stream[k],
            "correlation": correlation[k],
        }
        if found[k]:
            args["findings"] = found[k]
        if fused[k]:
            args["fused"] = True
        out.append(args)
    return out


def _meta(kind: str, pid: int, tid: int, **args: Any) -> Event:
    """A metadata event: process_name, process_sort_index, thread_name or thread_sort_index."""
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": args}


def _strings(frame: pd.DataFrame, column: str) -> list[str]:
    return frame[column].astype(str).tolist() if column in frame.columns else [""] * len(frame)


def _ints(frame: pd.DataFrame, column: str) -> list[int]:
    return frame[column].to_numpy(np.int64).tolist() if column in frame.columns else [-1] * len(frame)


def _name_facts(comparison: Comparison, side: int) -> dict[str, dict[str, Any]]:
    """Per kernel name: its fused components and implementation, where the classification names them."""
    names = comparison.trace(side).names
    out: dict[str, dict[str, Any]] = {}
    for name, components, implementation in zip(names.index, names["fused_components"], names["implementation"]):
        facts: dict[str, Any] = {}
        if len(components):
            facts["fused components"] = list(components)
        if implementation:
            facts["implementation"] = implementation
        out[str(name)] = facts
    return out


def _stream_threads(streams: np.ndarray, start: np.ndarray, dur: np.ndarray) -> tuple[list[int], dict[int, str]]:
    """A thread id per kernel: one per stream (in stream order), more for a stream whose kernels overlap."""
    tids = np.zeros(len(streams), dtype=np.int64)
    names: dict[int, str] = {}
    for stream in np.unique(streams).tolist():
        at = np.flatnonzero(streams == stream)
        lanes = stacked(start[at], start[at] + dur[at])
        for lane in range(int(lanes.max()) + 1 if len(lanes) else 0):
            tid = len(names) + 1
            names[tid] = f"stream {stream}" + (f" (overlapping kernels, {lane + 1})" if lane else "")
            tids[at[lanes == lane]] = tid
    return tids.tolist(), names


def stacked(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """A lane per interval (given in start order) such that intervals of one lane never overlap: each takes the
    first lane free at its start. All 0 when none overlaps."""
    if len(starts) < 2 or not (starts[1:] < np.maximum.accumulate(ends)[:-1]).any():
        return np.zeros(len(starts), dtype=np.int64)
    free: list[float] = []
    lanes = np.zeros(len(starts), dtype=np.int64)
    for k, (begin, end) in enumerate(zip(starts.tolist(), ends.tolist())):
        lane = next((i for i, until in enumerate(free) if until <= begin), len(free))
        if lane == len(free):
            free.append(end)
        else:
            free[lane] = end
        lanes[k] = lane
    return lanes


def _flow_ids(timeline: Timeline, lane: Lane) -> list[int]:
    """Per kernel of the lane: the flow id (1-based link number) joining it to its counterpart, or 0."""
    ids = np.zeros(len(lane.rows), dtype=np.int64)
    if len(timeline.links):
        ids[lane.positions(timeline.links[:, lane.side - 1])] = np.arange(1, len(timeline.links) + 1)
    return ids.tolist()


def _citing_findings(timeline: Timeline, lane: Lane) -> list[str]:
    """Per kernel of the lane: the findings whose cited windows hold it ('finding 2, one-sided 1'), or ''."""
    found: dict[int, list[str]] = {}
    for span in timeline.findings:
        start, stop = span.windows[lane.side - 1]
        if 0 <= start < stop:
            label = span.title.split(":", 1)[0]
            for at in lane.positions(np.arange(start, stop)).tolist():
                if label not in found.setdefault(at, []):
                    found[at].append(label)
    return [", ".join(found.get(k, [])) for k in range(len(lane.rows))]


def _gap_events(timeline: Timeline, side: int, pid: int, tid: int) -> list[Event]:
    gaps = [g for g in timeline.gaps if g.side == side]
    if not gaps:
        return []
    events = [
        _meta("thread_name", pid, tid, name="aligned: gaps"),
        _meta("thread_sort_index", pid, tid, sort_index=tid),
    ]
    for gap in gaps:
        wait = round(gap.stop - gap.start, 3)
        events.append(
            {
                "ph": "X",
                "cat": GAP_CATEGORY,
                "name": f"aligned: waits {wait:,.3f} µs",
                "pid": pid,
                "tid": tid,
                "ts": gap.start,
                "dur": wait,
                "args": {
                    "why": f"{wait:.3f} µs inserted here so that {gap.unit} starts together on both traces: trace "
                    f"{side} reached it sooner than trace {3 - side}",
                    "next unit": gap.unit,
                },
            }
        )
    return events


def _one_sided_events(lane: Lane, dur: np.ndarray, names: list[str], pid: int, first_tid: int) -> list[Event]:
    at = np.flatnonzero(lane.status == ONE_SIDED)
    if not len(at):
        return []
    starts = lane.start[at]
    lanes = stacked(starts, starts + dur[at])
    events = []
    for k in range(int(lanes.max()) + 1):
        tid = first_tid + k
        events += [
            _meta("thread_name", pid, tid, name="one-sided kernels" + (f" ({k + 1})" if k else "")),
            _meta("thread_sort_index", pid, tid, sort_index=tid),
        ]
    for position, stack in zip(at.tolist(), lanes.tolist()):
        events.append(
            {
                "ph": "X",
                "cat": ONE_SIDED_CATEGORY,
                "name": f"one-sided: {names[position]}",
                "pid": pid,
                "tid": first_tid + stack,
                "ts": float(lane.start[position]),
                "dur": float(dur[position]),
                "args": {
                    "why": f"no kernel of trace {3 - lane.side} is aligned with it",
                    "kernel row": int(lane.rows[position]),
                },
            }
        )
    return events


# --- the findings process ----------------------------------------------------------------------------------


def _finding_events(comparison: Comparison, timeline: Timeline) -> list[Event]:
    spans = timeline.findings
    if not spans:
        return []
    order = np.argsort([s.start for s in spans], kind="stable")
    lanes_in_order = stacked(np.array([spans[k].start for k in order]), np.array([spans[k].stop for k in order]))
    lanes = np.empty(len(spans), dtype=np.int64)
    lanes[order] = lanes_in_order
    events = [
        _meta("process_name", FINDINGS_PID, 0, name="Findings"),
        _meta("process_sort_index", FINDINGS_PID, 0, sort_index=FINDINGS_PID),
    ]
    for k in range(int(lanes.max()) + 1):
        events += [
            _meta("thread_name", FINDINGS_PID, k + 1, name=f"findings ({k + 1})"),
            _meta("thread_sort_index", FINDINGS_PID, k + 1, sort_index=k + 1),
        ]
    for span, lane in zip(spans, lanes.tolist()):
        events.append(
            {
                "ph": "X",
                "cat": FINDING_CATEGORY,
                "name": span.title,
                "pid": FINDINGS_PID,
                "tid": lane + 1,
                "ts": span.start,
                "dur": round(span.stop - span.start, 3),
                "args": _finding_args(comparison, span),
            }
        )
    return events


def _finding_args(comparison: Comparison, span: FindingSpan) -> dict[str, Any]:
    finding = span.finding
    args: dict[str, Any] = {"text": span.text, "kind": finding.kind}
    if isinstance(finding, FusionMapping):
        args |= {
            "detector": finding.detector,
            "evidence source": finding.evidence_source,
            "fused trace": finding.fused_trace,
            "fused kernel names": finding.fused_kernel_names,
            "replaced kernel names": finding.unfused_kernel_names,
        }
        if finding.op:
            args["op"] = finding.op
    for side, (start, stop) in zip((1, 2), span.windows):
        if 0 <= start < stop:
            args[f"trace {side} kernel rows"] = f"{start}..{stop - 1}"
            args[f"trace {side} cited kernels"] = list(_cited_names(comparison, side, start, stop))
    return args


def _cited_names(comparison: Comparison, side: int, start: int, stop: int) -> Iterator[str]:
    names = comparison.trace(side).kernels["name"].iloc[start : min(stop, start + MAX_CITED_NAMES)].astype(str)
    yield from names.tolist()
    if stop - start > MAX_CITED_NAMES:
        yield f"... and {stop - start - MAX_CITED_NAMES} more"
