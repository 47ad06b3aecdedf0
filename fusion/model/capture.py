"""Graph replays tied to their capture: the ops, module paths and shapes of the kernels a CUDA/HIP graph replays.

An execution trace records a graph replay as one runtime call (cudaGraphLaunch / hipGraphLaunch) whose kernels
share its correlation id, with no cpu_op over them. A trace of the run that captured the graph (vLLM and SGLang
profile it when asked) holds, between cudaStreamBeginCapture and cudaStreamEndCapture on a thread, the op calls
with their shapes and the launch calls made inside them, each naming its kernel (`args.kernel`), in the order
the graph replays them.

Each replay (the kernels of one graph launch, in start order) is matched to a captured graph by its sequence of
kernel names: the graphs we hold record no graph id on either side. Among captured graphs with exactly that
sequence (a piecewise model captures one graph per layer, all alike), the k-th replay of a sequence takes the
k-th such graph in capture order, cycling. A replay that no captured graph spells exactly is matched to the one
sharing its longest first run of names; then only kernels whose name agrees with the captured launch at the
same position are tied, and where the two differ in length only those before the first disagreement (after a
missing or extra kernel, equal names at equal positions are chance). A tied kernel takes the captured launch's
op (innermost and top-level), module path and shapes; kernels of one captured top-level op call in one replay
form one op call. The report counts tied and untied kernels and names the first disagreement. Phases, steps and
types stay as the execution trace gave them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fusion.loader.kineto import read_kineto
from fusion.loader.reader import TraceSource
from fusion.model.capture_files import DETAILS_FILE
from fusion.model.columns import LAUNCH_KINDS
from fusion.model.ops import NO_ROW, launch_context
from fusion.model.phases import ENGINE_FRAME_SUFFIXES
from fusion.model.trace import Trace

BEGIN_CAPTURE = re.compile(r"StreamBeginCapture")
END_CAPTURE = re.compile(r"StreamEndCapture")
TIED_COLUMNS = ("op", "op_top", "module", "op_shapes", "op_top_shapes")
"""What a tied kernel takes from its captured launch."""


@dataclass
class CapturedGraph:
    """One capture window: per launch inside it, in launch order, the kernel and what launched it."""

    source: str
    number: int
    """Its place among the file's capture windows (from 0)."""
    batch_size: int | None
    """From execution_details.json, where it names the file."""
    kernels: list[str]
    values: dict[str, list[str]]
    """TIED_COLUMNS per launch ('' where the launch had no op or module around it)."""
    call: np.ndarray
    """Per launch, the captured top-level op call's id; NO_ROW outside any op."""

    def label(self) -> str:
        batch = f", batch size {self.batch_size}" if self.batch_size is not None else ""
        return f"{Path(self.source).name} graph {self.number + 1}{batch}"


@dataclass
class Captures:
    """The captured graphs of one side's capture traces, and where they were found."""

    graphs: list[CapturedGraph]
    sources: list[str]
    digests: list[str]
    found_in: str | None = None
    """The folder the traces were found in by themselves (None: given by name)."""
    notes: list[str] = field(default_factory=list)


def read_captures(sources: list[TraceSource], found_in: str | None = None, names: list[str] | None = None) -> Captures:
    """The captured graphs of capture traces (paths, bytes or streams; `names` names in-memory ones in messages);
    TraceError naming a file that is not one."""
    graphs: list[CapturedGraph] = []
    read, digests, notes = [], [], []
    given: list[str | None] = [*names] if names else [None] * len(sources)
    for source, name in zip(sources, given):
        records = read_kineto(source, name=name, frame_suffixes=ENGINE_FRAME_SUFFIXES, launch_kernels=True)
        found = _graphs(records.cpu, records.source, _batch_sizes(source))
        if not found:
            notes.append(f"{records.source}: no capture window (StreamBeginCapture .. StreamEndCapture) with launches")
        graphs += found
        read.append(records.source)
        digests.append(records.digest)
    return Captures(graphs, read, digests, found_in, notes)


def _batch_sizes(source: TraceSource) -> dict[str, int]:
    """execution_details.json beside a capture trace: file name -> batch size ({} when absent or unreadable)."""
    if not isinstance(source, (str, Path)):
        return {}
    details = Path(source).parent / DETAILS_FILE
    try:
        entries = json.loads(details.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(entries, list):
        return {}
    return {
        str(e["file"]): e["batch_size"]
        for e in entries
        if isinstance(e, dict) and isinstance(e.get("file"), str) and isinstance(e.get("batch_size"), int)
    }


def _graphs(cpu: Any, source: str, batch_sizes: dict[str, int]) -> list[CapturedGraph]:
    """The capture windows of one trace's CPU side, each with its launches in launch order."""
    launches = cpu.launches
    code_kind = {c: (bool(BEGIN_CAPTURE.search(n)), bool(END_CAPTURE.search(n))) for c, n in enumerate(cpu.names)}
    begins = np.array([code_kind[c][0] for c in launches.name.tolist()], dtype=bool)
    ends = np.array([code_kind[c][1] for c in launches.name.tolist()], dtype=bool)
    windows = _windows(launches.thread, launches.ts, begins, ends)
    out = []
    batch = batch_sizes.get(Path(source).name)
    for number, (thread, start, end) in enumerate(windows):
        inside = np.flatnonzero(
            (launches.thread == thread) & (launches.ts > start) & (launches.ts < end) & (launches.kernel >= 0)
        )
        inside = inside[np.argsort(launches.ts[inside], kind="stable")]
        if not len(inside):
            continue
        around = launch_context(cpu, launches.thread[inside], launches.ts[inside])
        values = {
            "op": _strings(around.op, cpu.names),
            "op_top": _strings(around.op_top, cpu.names),
            "module": _strings(around.module, around.paths),
            "op_shapes": _strings(around.op_shapes, cpu.shapes),
            "op_top_shapes": _strings(around.op_top_shapes, cpu.shapes),
        }
        kernels = [cpu.names[c] for c in launches.kernel[inside].tolist()]
        out.append(CapturedGraph(source, number, batch, kernels, values, around.call))
    return out


def _windows(
    thread: np.ndarray, ts: np.ndarray, begins: np.ndarray, ends: np.ndarray
) -> list[tuple[int, float, float]]:
    """(thread, begin ts, end ts) of each capture window: a begin and the first end after it on its thread."""
    out = []
    for row in np.flatnonzero(begins)[np.argsort(ts[begins], kind="stable")].tolist():
        later = np.flatnonzero(ends & (thread == thread[row]) & (ts > ts[row]))
        if len(later):
            out.append((int(thread[row]), float(ts[row]), float(ts[later].min())))
    return out


def _strings(codes: np.ndarray, values: list[str]) -> list[str]:
    return ["" if c < 0 else values[c] for c in codes.tolist()]


@dataclass
class _Tie:
    """Which kernel rows of the execution trace take which captured launch: whole replays per captured graph, and
    the tied positions of partial ones."""

    whole: dict[int, list[np.ndarray]] = field(default_factory=dict)
    """Per captured graph, the rows of each replay tied whole."""
    partial: list[tuple[int, np.ndarray, np.ndarray]] = field(default_factory=list)
    """(captured graph, rows, their positions in it) of each replay tied in part."""
    untied: int = 0
    ambiguous: int = 0
    mismatch: dict[str, Any] | None = None
    mismatched_replays: int = 0

    def blocks(self) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
        """(captured graph, rows, their positions in it, the replay each belongs to, numbered from 0 per block)."""
        out = []
        for graph, replays in self.whole.items():
            size = len(replays[0])
            positions = np.tile(np.arange(size), len(replays))
            out.append((graph, np.concatenate(replays), positions, np.repeat(np.arange(len(replays)), size)))
        out += [(g, rows, at, np.zeros(len(rows), dtype=np.int64)) for g, rows, at in self.partial]
        return out

    def rows(self) -> np.ndarray:
        blocks = self.blocks()
        return np.concatenate([b[1] for b in blocks]) if blocks else np.zeros(0, dtype=np.int64)


def tie_captures(trace: Trace, captures: Captures) -> Trace:
    """The trace with its replayed kernels tied to the captured launches (module doc), and `capture`, the report."""
    kernels = trace.kernels
    replays = _replays(kernels)
    tie = _match(kernels, replays, captures.graphs)
    columns = _tied_columns(kernels, tie, captures.graphs)
    tied_rows = tie.rows()
    with_op = int((np.asarray(columns["op"].categories)[columns["op"].codes[tied_rows]] != "").sum())
    shapes = columns["op_top_shapes"]
    has_dims = np.array([bool(s) and json.loads(s)[0] is not None for s in shapes.categories] + [False])
    with_dims = int(has_dims[shapes.codes[tied_rows]].sum())
    replayed = sum(len(rows) for _, rows in replays)
    report = {
        "sources": captures.sources,
        "found_in": captures.found_in,
        "captured_graphs": len(captures.graphs),
        "replays": len(replays),
        "replayed_kernels": replayed,
        "tied": int(len(tied_rows)),
        "not_tied": replayed - int(len(tied_rows)),
        "tied_with_op": with_op,
        "tied_with_input_dims": with_dims,
        "mismatched_replays": tie.mismatched_replays,
        "ambiguous_replays": tie.ambiguous,
        "first_mismatch": tie.mismatch,
        "notes": captures.notes,
    }
    digest = hashlib.sha256(":".join([trace.digest, "capture", *captures.digests]).encode()).hexdigest()
    warnings = [*trace.warnings, *([capture_warning(report)] if report["not_tied"] else [])]
    return dataclasses.replace(
        trace, kernels=kernels.assign(**columns), digest=digest, capture=report, warnings=warnings
    )


def capture_text(report: dict[str, Any]) -> str:
    """'tied 421 of 421 replayed kernels (100.0%) to captured ops, 421 with Input Dims; found by itself in DIR'."""
    replayed = report["replayed_kernels"]
    share = f" ({100 * report['tied'] / replayed:.1f}%)" if replayed else ""
    where = f"; found by itself in {report['found_in']}" if report["found_in"] else ""
    return (
        f"tied {report['tied']:,} of {replayed:,} replayed kernels{share} to captured launches"
        f" ({report['tied_with_op']:,} with an op, {report['tied_with_input_dims']:,} with Input Dims) in"
        f" {report['replays']:,} replays, from {report['captured_graphs']:,} captured graphs{where}"
    )


def capture_warning(report: dict[str, Any]) -> str:
    """One line on the replayed kernels that stayed untied, and why the first did."""
    first = report["first_mismatch"]
    why = ""
    if first is not None:
        captured = f"`{first['captured'][:80]}`" if first["captured"] else "nothing (the captured graph is shorter)"
        why = (
            f"; first in the replay of correlation {first['correlation']}: kernel {first['position'] + 1} is"
            f" `{first['replayed'][:80]}` where {first['capture']} has {captured}"
        )
    return f"{report['not_tied']:,} of {report['replayed_kernels']:,} replayed kernels not tied to a captured op{why}"


def _replays(kernels: pd.DataFrame) -> list[tuple[int, np.ndarray]]:
    """(correlation, kernel rows in start order) of each graph launch, in order of its first kernel."""
    graph = np.flatnonzero((kernels["launch"] == LAUNCH_KINDS[1]).to_numpy())
    if not len(graph):
        return []
    correlation = kernels["correlation"].to_numpy()[graph]
    order = np.argsort(correlation, kind="stable")  # rows are in start order, so each launch's stay in order
    ids, starts = np.unique(correlation[order], return_index=True)
    groups = np.split(graph[order], starts[1:])
    firsts = np.argsort(graph[order][starts], kind="stable")
    return [(int(ids[i]), groups[i]) for i in firsts.tolist()]


def _match(kernels: pd.DataFrame, replays: list[tuple[int, np.ndarray]], graphs: list[CapturedGraph]) -> _Tie:
    """Each replay's captured graph and the positions tied (module doc)."""
    names = kernels["name"].cat
    code_of = {str(name): code for code, name in enumerate(names.categories)}
    captured = [np.array([code_of.get(k, -1) for k in g.kernels], dtype=np.int64) for g in graphs]
    exact: dict[bytes, list[int]] = {}
    for index, codes in enumerate(captured):
        exact.setdefault(codes.tobytes(), []).append(index)
    used: Counter[bytes] = Counter()
    tie = _Tie()
    row_codes = names.codes.to_numpy().astype(np.int64)
    for correlation, rows in replays:
        codes = row_codes[rows]
        key = codes.tobytes()
        candidates = exact.get(key)
        if candidates:
            graph = candidates[used[key] % len(candidates)]
            used[key] += 1
            tie.ambiguous += len({graphs[c].batch_size for c in candidates}) > 1
            tie.whole.setdefault(graph, []).append(rows)
            continue
        _partial(tie, correlation, rows, codes, captured, graphs, kernels)
    return tie


def _partial(
    tie: _Tie,
    correlation: int,
    rows: np.ndarray,
    codes: np.ndarray,
    captured: list[np.ndarray],
    graphs: list[CapturedGraph],
    kernels: pd.DataFrame,
) -> None:
    """A replay no captured graph spells exactly: tie what the best one agrees on, note the first disagreement."""
    tie.mismatched_replays += 1
    best, prefix = -1, -1
    for index, other in enumerate(captured):
        length = min(len(other), len(codes))
        differ = np.flatnonzero(other[:length] != codes[:length])
        common = int(differ[0]) if len(differ) else length
        if common > prefix or (
            common == prefix and abs(len(other) - len(codes)) < abs(len(captured[best]) - len(codes))
        ):
            best, prefix = index, common
    if best < 0:
        tie.untied += len(rows)
        if tie.mismatch is None:
            name = str(kernels["name"].iloc[int(rows[0])])
            tie.mismatch = {"correlation": int(correlation), "position": 0, "replayed": name, "captured": ""}
            tie.mismatch["capture"] = "no captured graph"
        return
    other = captured[best]
    if len(other) == len(codes):
        positions = np.flatnonzero(other == codes)
    else:
        positions = np.arange(prefix)
    tie.partial.append((best, rows[positions], positions))
    tie.untied += len(rows) - len(positions)
    if tie.mismatch is None:
        name = kernels["name"].iloc[int(rows[prefix])] if prefix < len(rows) else ""
        tie.mismatch = {
            "correlation": int(correlation),
            "position": prefix,
            "replayed": str(name),
            "captured": graphs[best].kernels[prefix] if prefix < len(graphs[best].kernels) else "",
            "capture": graphs[best].label(),
        }


def _tied_columns(kernels: pd.DataFrame, tie: _Tie, graphs: list[CapturedGraph]) -> dict[str, Any]:
    """TIED_COLUMNS and op_call of the kernel table with the tied rows' values from their captured launches."""
    out: dict[str, Any] = {}
    blocks = tie.blocks()
    for column in TIED_COLUMNS:
        values = kernels[column].cat
        code_of = {str(c): i for i, c in enumerate(values.categories)}
        per_graph = [np.array([code_of.setdefault(v, len(code_of)) for v in g.values[column]]) for g in graphs]
        codes = values.codes.to_numpy().astype(np.int64)
        for graph, rows, positions, _ in blocks:
            codes[rows] = per_graph[graph][positions]
        out[column] = pd.Categorical.from_codes(codes, categories=list(code_of))
    out["op_call"] = _op_calls(kernels, blocks, graphs)
    return out


def _op_calls(
    kernels: pd.DataFrame, blocks: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]], graphs: list[CapturedGraph]
) -> np.ndarray:
    """op_call with every tied kernel in the call of its captured top-level op in its replay, and all calls
    numbered again in order of their first kernel (the table is in start order): eager and replayed calls in
    one order."""
    call = kernels["op_call"].to_numpy().astype(np.int64)
    next_id = int(call.max()) + 1 if len(call) else 0
    for graph, rows, positions, replay in blocks:
        captured = graphs[graph].call[positions]
        span = int(graphs[graph].call.max()) + 1
        call[rows] = np.where(captured >= 0, next_id + replay * span + captured, NO_ROW)
        next_id += (int(replay.max()) + 1) * span if len(replay) else 0
    present = call >= 0
    call[present] = pd.factorize(call[present])[0]
    return call
