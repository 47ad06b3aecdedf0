"""Kernel -> phase and step, from what the trace records; most reliable evidence first.

A kernel is placed by the CPU ranges around its runtime launch (the launch's start time, on the
launching thread where the range is thread-bound):

1. serving step annotations: vLLM `execute_[T_]context_N(..)_generation_M(..)` (N context and M
   generation requests: prefill, decode or mixed), SGLang `step[EXTEND ...]` / `step[DECODE ...]`;
2. serving engine functions (Python frames) on the launching thread: SGLang `forward_extend` / `forward_decode`;
3. training frames on the launching thread: `Optimizer.step#...` (optimizer),
   `autograd::engine::evaluate_function: ...` (backward); any other launched kernel of a trace with
   such frames is forward;
4. graph replays are decode, but only in a trace with none of the above;
5. anything else is phase 'all' (no signal).

Then phases by step, not by kernel: a serving step takes one phase and all its kernels go with it
(preparation, samplers, copies). Steps are vLLM V1's engine ranges (`gpu_model_runner: preprocess`, `forward`,
`sample`: one cycle of them is a step), profiler steps (`ProfilerStep#N`: only a phase from serving
annotations spreads over one, since a profiler step may hold a whole pipeline) and, in a trace without
annotations, the spans between graph replays of decode. An eager forward step among graph-replayed decode
steps is prefill: its token counts (the GEMMs' `Input Dims`) are not loaded, so the structure decides (it
launches at least the largest replay's kernels eagerly), and the phase notes say so.

Of nested ranges of one kind the outermost counts (ops.Nesting). The step is the ordinal of the
serving annotation, else of the engine step, else the N of the enclosing `ProfilerStep#N`, else -1.
`phase_source` names the evidence of each kernel, so a summary can say where phases came from. The loader
calls phase_columns after op resolution; assign_phases works on plain columns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from fusion.errors import TraceError
from fusion.loader.cpu_events import CpuEvents, Ranges
from fusion.model.columns import LAUNCH_KINDS
from fusion.model.ops import Nesting, launch_rows
from fusion.model.trace import Trace
from fusion.vocabulary import ALL, BACKWARD, DECODE, FORWARD, MIXED, OPTIMIZER, PHASES, PREFILL

NO_STEP = -1
UNLAUNCHED = LAUNCH_KINDS[2:]
"""'none' and 'unrecorded': kernels whose launch time is not known, so no range can place them."""

SOURCE_TRAINING_FORWARD = "training trace, outside backward and optimizer frames"
SOURCE_GRAPH = "graph replay, assumed decode"
SOURCE_STEP = "the phase of its step"
SOURCE_EAGER_FORWARD = "eager forward step among graph-replayed decode steps, assumed prefill"
SOURCE_BETWEEN_REPLAYS = "between graph replays of decode steps"
SOURCE_NONE = "no phase signal"
SERVING_PHASES = (PREFILL, DECODE, MIXED)
"""The phases a step of a serving engine takes as a whole: all its kernels (preparation, samplers, copies) go with
it. Training steps hold several phases (forward, backward, optimizer) and keep them per kernel."""
ENGINE_STEP = re.compile(r"^gpu_model_runner: ")
"""vLLM V1's ranges of one engine step (gpu_model_runner: preprocess, forward, sample, ...): a step runs from the
start of one cycle of them to the start of the next (a range name seen again starts the next step)."""

SGLANG_MODES = {
    "EXTEND": PREFILL,
    "SPLIT_PREFILL": PREFILL,
    "DLLM_EXTEND": PREFILL,
    "PREBUILT": PREFILL,
    "DECODE": DECODE,
    "TARGET_VERIFY": DECODE,
    "DRAFT_EXTEND": DECODE,
    "DRAFT_EXTEND_V2": DECODE,
    "MIXED": MIXED,
}
"""SGLang ForwardMode -> phase. Speculative verify and draft passes belong to decoding; IDLE has none."""
SGLANG_FUNCTIONS = {"forward_extend": PREFILL, "forward_split_prefill": PREFILL, "forward_decode": DECODE}
ENGINE_FRAME_SUFFIXES = tuple(f": {function}" for function in SGLANG_FUNCTIONS)
"""The python_function frames (`path(line): function`) the loader keeps for the engine-frame markers."""


def _batch_phase(match: re.Match[str]) -> str | None:
    """prefill, decode or mixed from the numbers of context (prompt) and generation requests."""
    context, generation = int(match["context"]), int(match["generation"])
    if context and generation:
        return MIXED
    return PREFILL if context else DECODE if generation else None


def _mode_phase(modes: Mapping[str, str]) -> Callable[[re.Match[str]], str | None]:
    return lambda match: modes.get(match["mode"])


def _constant(phase: str) -> Callable[[re.Match[str]], str | None]:
    return lambda match: phase


@dataclass(frozen=True)
class Marker:
    """A kind of CPU range that tells a phase: its name pattern, how the match gives the phase, and
    whether it only covers launches of its own thread (frames) or of any thread (step annotations)."""

    source: str
    pattern: re.Pattern[str]
    phase_of: Callable[[re.Match[str]], str | None] = field(compare=False)
    by_thread: bool = False
    numbers_steps: bool = False

    def phase(self, name: str) -> str | None:
        match = self.pattern.search(name)
        return self.phase_of(match) if match else None


SERVING_STEPS = (
    Marker(
        "vLLM execute annotation",
        re.compile(r"^execute_(?:\d+_)?context_(?P<context>\d+)\(.*\)_generation_(?P<generation>\d+)\("),
        _batch_phase,
        numbers_steps=True,
    ),
    Marker(
        "SGLang step annotation",
        re.compile(r"^step\[(?P<mode>[A-Z][A-Z0-9_]*)[ \]]"),
        _mode_phase(SGLANG_MODES),
        numbers_steps=True,
    ),
)
ENGINE_FRAMES = (
    Marker(
        "SGLang forward function",
        re.compile(rf": (?P<mode>{'|'.join(SGLANG_FUNCTIONS)})$"),
        _mode_phase(SGLANG_FUNCTIONS),
        by_thread=True,
    ),
)
TRAINING_FRAMES = (
    Marker(
        "optimizer annotation", re.compile(r"^Optimizer\.(?:step|zero_grad)#"), _constant(OPTIMIZER), by_thread=True
    ),
    Marker(
        "autograd engine frame",
        re.compile(r"^autograd::engine::evaluate_function: "),
        _constant(BACKWARD),
        by_thread=True,
    ),
)
MARKERS = SERVING_STEPS + ENGINE_FRAMES + TRAINING_FRAMES
PROFILER_STEP = re.compile(r"^ProfilerStep#(?P<step>\d+)$")
SOURCES = tuple(m.source for m in MARKERS) + (
    SOURCE_TRAINING_FORWARD,
    SOURCE_GRAPH,
    SOURCE_STEP,
    SOURCE_EAGER_FORWARD,
    SOURCE_BETWEEN_REPLAYS,
    SOURCE_NONE,
)
_SERVING_MARKERS = frozenset(SOURCES.index(m.source) for m in SERVING_STEPS + ENGINE_FRAMES)


def phase_columns(kernels: pd.DataFrame, cpu: CpuEvents) -> dict[str, np.ndarray | pd.Categorical]:
    """PHASE_COLUMNS of loaded kernels (with `correlation` and `launch`), from `cpu`'s launches and ranges."""
    launches = cpu.launches
    correlation = kernels["correlation"].to_numpy()
    row = launch_rows(correlation, launches.correlation) if len(launches.correlation) else np.full(len(correlation), -1)
    launched = row >= 0
    launch_ts = np.full(len(row), np.nan)
    launch_ts[launched] = launches.ts[row[launched]]
    thread = np.full(len(row), -1, dtype=np.int64)
    thread[launched] = launches.thread[row[launched]]
    table = kernels[["launch"]].assign(launch_ts=launch_ts, thread=thread)
    return dict(assign_phases(table, cpu.ranges, cpu.names).items())


def no_phase_columns(count: int) -> dict[str, pd.Categorical | np.ndarray]:
    """PHASE_COLUMNS of `count` kernels of a trace with no phase signal (one phase, 'all')."""
    return {
        "phase": pd.Categorical.from_codes(np.full(count, PHASES.index(ALL), dtype=np.int8), categories=list(PHASES)),
        "step": np.full(count, NO_STEP, dtype=np.int64),
        "phase_source": pd.Categorical.from_codes(
            np.full(count, SOURCES.index(SOURCE_NONE), dtype=np.int8), categories=list(SOURCES)
        ),
    }


def assign_phases(kernels: pd.DataFrame, ranges: Ranges, names: list[str]) -> pd.DataFrame:
    """Columns phase, step and phase_source for `kernels` (same rows), see the module doc.

    kernels: launch_ts (float µs, NaN without a recorded launch), thread (the launch's thread code, as in
    `ranges`), launch ('kernel', 'graph', 'none' or 'unrecorded'); ranges: CPU ranges whose `name` codes
    index `names`. Each distinct name is matched against the markers once.
    """
    launch_ts = kernels["launch_ts"].to_numpy(np.float64)
    thread = kernels["thread"].to_numpy(np.int64)
    phase = np.full(len(kernels), -1, dtype=np.int8)
    source = np.full(len(kernels), -1, dtype=np.int8)
    step = np.full(len(kernels), NO_STEP, dtype=np.int64)
    found: set[str] = set()
    by_name = _per_name(names, ranges.name)
    for number, marker in enumerate(MARKERS):
        phase_of = by_name(lambda name: PHASES.index(p) if (p := marker.phase(name)) else -1)  # noqa: B023 (called here)
        hits = ranges.where(phase_of[ranges.name] >= 0)
        if not len(hits.start):
            continue
        found.add(marker.source)
        name, ordinal = outermost(hits, launch_ts, thread if marker.by_thread else None)
        new = (name >= 0) & (phase < 0)
        phase[new] = phase_of[name[new]]
        source[new] = number
        if marker.numbers_steps:
            step[new] = ordinal[new]
    graph = (kernels["launch"] == "graph").to_numpy(bool)
    _fallbacks(phase, source, found, launch_ts, graph)
    engine = engine_steps(ranges, by_name(lambda name: 1 if ENGINE_STEP.match(name) else -1), launch_ts)
    unnumbered = step == NO_STEP
    step[unnumbered] = engine[unnumbered]
    profiler = profiler_steps(ranges, by_name(_step_number), launch_ts)
    steps = _Steps(phase, source, launch_ts, graph)
    steps.whole(engine, serving_only=False)
    steps.whole(np.where(engine == NO_STEP, profiler, NO_STEP), serving_only=True)
    if not found:
        steps.between_replays(engine == NO_STEP)
    step = np.where(step == NO_STEP, profiler, step)
    return pd.DataFrame(
        {
            "phase": pd.Categorical.from_codes(phase, categories=list(PHASES)),
            "step": step,
            "phase_source": pd.Categorical.from_codes(source, categories=list(SOURCES)),
        },
        index=kernels.index,
    )


def _per_name(names: list[str], codes: np.ndarray) -> Callable[[Callable[[str], int]], np.ndarray]:
    """A function giving value_of(name) per name code (int64, -1 for names no range has), calling
    value_of only for the names the ranges use."""
    used = np.unique(codes)

    def by_name(value_of: Callable[[str], int]) -> np.ndarray:
        values = np.full(len(names), -1, dtype=np.int64)
        values[used] = [value_of(names[c]) for c in used]
        return values

    return by_name


def _fallbacks(
    phase: np.ndarray, source: np.ndarray, found: set[str], launch_ts: np.ndarray, graph_launched: np.ndarray
) -> None:
    """Training forward, graph replays as decode, and 'all' for kernels no range placed."""
    open_ = phase < 0
    if found & {m.source for m in TRAINING_FRAMES}:
        forward = open_ & ~np.isnan(launch_ts)
        phase[forward], source[forward] = PHASES.index(FORWARD), SOURCES.index(SOURCE_TRAINING_FORWARD)
    elif not found:
        graph = open_ & graph_launched
        phase[graph], source[graph] = PHASES.index(DECODE), SOURCES.index(SOURCE_GRAPH)
    rest = phase < 0
    phase[rest], source[rest] = PHASES.index(ALL), SOURCES.index(SOURCE_NONE)


def engine_steps(ranges: Ranges, is_engine: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Per point, the ordinal of the engine step around it (ENGINE_STEP; `is_engine` >= 0 per name code of such a
    range), NO_STEP outside every step. A step starts where a range name of the cycle comes again."""
    hits = ranges.where(is_engine[ranges.name] >= 0)
    if not len(hits.start):
        return np.full(len(points), NO_STEP, dtype=np.int64)
    order = np.argsort(hits.start, kind="stable")
    starts: list[float] = []
    seen: set[int] = set()
    for name, start in zip(hits.name[order].tolist(), hits.start[order].tolist()):
        if not starts or name in seen:
            starts.append(start)
            seen = set()
        seen.add(name)
    ordinal = np.searchsorted(np.array(starts), np.nan_to_num(points, nan=-np.inf), side="right") - 1
    inside = (ordinal >= 0) & (np.nan_to_num(points, nan=np.inf) <= hits.end.max())
    return np.where(inside, ordinal, NO_STEP).astype(np.int64)


@dataclass
class _Steps:
    """A serving step takes one phase, and all its kernels go with it: the phase columns, updated in place."""

    phase: np.ndarray
    source: np.ndarray
    launch_ts: np.ndarray
    graph: np.ndarray

    @cached_property
    def largest_replay(self) -> int:
        """Kernels of the largest graph replay (the kernels of one replay share its launch): a forward step of the
        same model launches at least as many."""
        if not self.graph.any():
            return 0
        return int(np.unique(self.launch_ts[self.graph], return_counts=True)[1].max())

    def whole(self, step: np.ndarray, serving_only: bool) -> None:
        """Each step whose kernels with a serving phase agree on one gives it to its kernels with none; with
        `serving_only`, only phases from serving annotations and engine frames count (a profiler step may hold a
        whole pipeline, so a graph replay does not decide it). A step without a serving phase and without graph
        replays that launches at least the largest replay's kernels eagerly, in a trace whose other steps replay
        decode graphs, is an eager forward: prefill (its token counts are not loaded)."""
        serving = np.isin(self.phase, [PHASES.index(p) for p in SERVING_PHASES])
        deciding = serving & (np.isin(self.source, list(_SERVING_MARKERS)) if serving_only else True)
        replayed_decode = bool((self.graph & (self.phase == PHASES.index(DECODE))).any())
        largest = self.largest_replay
        none = SOURCES.index(SOURCE_NONE)
        stepped = np.flatnonzero(step != NO_STEP)
        stepped = stepped[np.argsort(step[stepped], kind="stable")]
        bounds = np.flatnonzero(np.diff(step[stepped])) + 1
        for rows in np.split(stepped, bounds) if len(stepped) else []:
            phases = np.unique(self.phase[rows[deciding[rows]]])
            open_ = rows[self.source[rows] == none]
            if len(phases) == 1:
                self._set(open_, int(phases[0]), SOURCE_STEP)
            elif not len(phases) and not serving_only and replayed_decode and not self.graph[rows].any():
                if len(rows) >= largest:
                    self._set(open_, PHASES.index(PREFILL), SOURCE_EAGER_FORWARD)

    def between_replays(self, candidates: np.ndarray) -> None:
        """In a trace without step annotations: eager kernels launched between two graph replays of decode go with
        decode (preparation, samplers, piecewise attention), unless the span is an eager forward (as many kernels
        as the largest replay, or more): prefill."""
        decode = self.graph & (self.phase == PHASES.index(DECODE))
        if not decode.any():
            return
        replays = np.unique(self.launch_ts[decode])
        open_ = np.flatnonzero(candidates & (self.source == SOURCES.index(SOURCE_NONE)) & ~np.isnan(self.launch_ts))
        span = np.searchsorted(replays, self.launch_ts[open_], side="right")
        inside = (span > 0) & (span < len(replays))
        open_, span = open_[inside], span[inside]
        sizes = np.bincount(span, minlength=len(replays) + 1)
        forward = sizes[span] >= self.largest_replay
        self._set(open_[~forward], PHASES.index(DECODE), SOURCE_BETWEEN_REPLAYS)
        self._set(open_[forward], PHASES.index(PREFILL), SOURCE_EAGER_FORWARD)

    def _set(self, rows: np.ndarray, phase: int, source: str) -> None:
        self.phase[rows] = phase
        self.source[rows] = SOURCES.index(source)


def outermost(ranges: Ranges, points: np.ndarray, threads: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """For each point, the name code of the outermost range around it and that range's ordinal among
    all outermost ranges in start order (-1, -1 where none); with `threads`, only ranges on the point's
    thread count, else ranges of every thread."""
    if not len(ranges.start):
        return np.full(len(points), -1, dtype=np.int64), np.full(len(points), -1, dtype=np.int64)
    if threads is None:
        ranges = replace(ranges, thread=np.zeros_like(ranges.thread))
        threads = np.zeros(len(points), dtype=np.int64)
    nesting = Nesting.of(ranges)
    row = nesting.innermost(threads, np.nan_to_num(points, nan=-np.inf))
    top = nesting.top()[row]
    inside = row >= 0
    return np.where(inside, nesting.name[top], -1), np.where(inside, nesting.call_ids()[top], -1)


def profiler_steps(ranges: Ranges, numbers: np.ndarray, points: np.ndarray) -> np.ndarray:
    """N of the `ProfilerStep#N` range around each point (any thread; `numbers`: N per name code, -1 for
    other names), -1 outside every step."""
    steps = ranges.where(numbers[ranges.name] >= 0)
    name, _ = outermost(steps, points)
    return np.append(numbers, NO_STEP)[name]  # name -1 picks the appended NO_STEP


def _step_number(name: str) -> int:
    match = PROFILER_STEP.match(name)
    return int(match["step"]) if match else -1


def phase_table(kernels: pd.DataFrame) -> pd.DataFrame:
    """Per phase present: steps (distinct step numbers), kernels, time_us and sources ({source: kernels}).

    Counted on the category codes (bincount), in linear time: no per-phase copy of the kernels."""
    phase, source = (kernels[c].astype("category").cat for c in ("phase", "phase_source"))
    codes, step, dur = phase.codes.to_numpy(), kernels["step"].to_numpy(), kernels["dur"].to_numpy(np.float64)
    source_codes = source.codes.to_numpy()
    if (codes < 0).any():  # kernels without a phase are not counted
        known = codes >= 0
        codes, step, dur, source_codes = codes[known], step[known], dur[known], source_codes[known]
    codes = codes.astype(np.int64)
    width = len(phase.categories)
    times = np.bincount(codes, weights=dur, minlength=width)
    stepped = step != NO_STEP
    steps = np.bincount(
        _distinct_pairs(codes, step) if stepped.all() else _distinct_pairs(codes[stepped], step[stepped]),
        minlength=width,
    )
    per_source = codes * len(source.categories)
    per_source += source_codes
    sources = np.bincount(per_source, minlength=width * len(source.categories)).reshape(width, -1)
    counts = sources.sum(axis=1)
    rows = {
        str(phase.categories[c]): {
            "steps": int(steps[c]),
            "kernels": int(counts[c]),
            "time_us": float(times[c]),
            "sources": {
                str(name): int(n) for name, n in sorted(zip(source.categories, sources[c]), key=lambda x: -x[1]) if n
            },
        }
        for c in np.flatnonzero(counts).tolist()  # the phases present, in category order
    }
    return pd.DataFrame.from_dict(rows, orient="index", columns=["steps", "kernels", "time_us", "sources"])


def _distinct_pairs(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """`first` (non-negative ints) of each distinct (first, second) pair: bincount of it counts the distinct
    seconds per first. Hashed, in linear time; only the first pair of each run of equal pairs is hashed (a
    step's kernels are mostly contiguous)."""
    if not len(first):
        return first
    second = second - second.min()
    width = int(second.max()) + 1
    keys = first * width + second
    return pd.unique(keys[np.r_[True, keys[1:] != keys[:-1]]]) // width


def phase_notes(kernels: pd.DataFrame, table: pd.DataFrame | None = None) -> list[str]:
    """What a reader must know about one trace's phases: no signal at all, mixed batches, assumptions.
    `table` is the kernels' phase_table when the caller has it."""
    table = phase_table(kernels) if table is None else table
    notes = []
    if list(table.index) == [ALL]:
        notes.append(
            "no phase signal (serving step annotations, engine or training frames, graph replays): one phase 'all'"
        )
    elif ALL in table.index:
        unlaunched = int((_holds(kernels["phase"], (ALL,)) & _holds(kernels["launch"], UNLAUNCHED)).sum())
        notes.append(
            f"{table.loc[ALL, 'kernels']:,} kernels have no phase signal (phase 'all'), "
            f"{unlaunched:,} of them without a recorded launch"
        )
    if MIXED in table.index:
        notes.append(
            f"{step_count(table.loc[MIXED, 'steps'], MIXED)} (prefill and decode requests in one batch): "
            "their kernels are in neither prefill nor decode"
        )
    if DECODE in table.index and SOURCE_GRAPH in table.loc[DECODE, "sources"]:
        notes.append("decode is assumed from graph replays: the trace has no serving annotation or training frame")
    sources = {phase: table.loc[phase, "sources"] for phase in table.index}
    stepped = sum(found.get(SOURCE_STEP, 0) for found in sources.values())
    if stepped:
        notes.append(
            f"{stepped:,} kernels (preparation, samplers, copies) take the phase of their step, which its other"
            " kernels decided"
        )
    between = sources.get(DECODE, {}).get(SOURCE_BETWEEN_REPLAYS, 0)
    if between:
        notes.append(f"{between:,} eager kernels launched between graph replays of decode steps are decode")
    eager = sources.get(PREFILL, {}).get(SOURCE_EAGER_FORWARD, 0)
    if eager:
        notes.append(
            f"prefill is assumed for {eager:,} kernels of eager forward steps among graph-replayed decode steps:"
            " their token counts (the GEMMs' Input Dims) are not loaded, so the structure decides (a step that"
            " launches at least the largest replay's kernels eagerly, where the decode steps replay graphs)"
        )
    return notes


def _holds(column: pd.Series, values: tuple[str, ...]) -> np.ndarray:
    """Per kernel: its value is one of `values`, decided on category codes (a missing value, code -1, picks the
    appended False)."""
    coded = column.astype("category").cat
    return np.append(coded.categories.isin(values), False)[coded.codes.to_numpy()]


def phase_view(trace: Trace, phase: str, table: pd.DataFrame | None = None) -> Trace:
    """The trace restricted to one phase's kernels (renumbered), with a note; 'all' is the trace itself.
    `table` is the trace's phase_table when the caller has it."""
    if phase not in PHASES:
        raise ValueError(f"unknown phase {phase!r}; one of {', '.join(PHASES)}")
    if phase == ALL:
        return trace
    kernels = trace.kernels
    rows = view_rows(kernels, phase)
    if len(rows) == len(kernels):
        return trace
    table = phase_table(trace.kernels) if table is None else table
    steps = int(table.loc[phase, "steps"]) if phase in table.index else 0
    return trace.subset(
        rows,
        f"phase {phase} only: {len(rows):,} of {len(kernels):,} kernels in"
        f" {step_count(steps, phase)}; kernel indices refer to this view",
    )


def view_rows(kernels: pd.DataFrame, phase: str) -> np.ndarray:
    """The row in `kernels` of each kernel of phase_view(trace, phase), in order (every row for 'all')."""
    if phase == ALL:
        return np.arange(len(kernels))
    return np.flatnonzero((kernels["phase"] == phase).to_numpy())


def describe(kernels: pd.DataFrame) -> dict[str, Any]:
    """JSON-ready phases of one trace: per phase steps, kernels, time and sources, and the notes."""
    table = phase_table(kernels)
    return {
        "per_phase": {
            str(p): {
                "steps": int(r["steps"]),
                "kernels": int(r["kernels"]),
                "time_us": round(float(r["time_us"]), 3),
                "sources": r["sources"],
            }
            for p, r in table.iterrows()
        },
        "notes": phase_notes(kernels, table),
    }


def step_count(count: int, phase: str) -> str:
    """'1 prefill step', '4 decode steps'."""
    return f"{count} {phase} step" + ("" if count == 1 else "s")


def require_phase(traces: tuple[Trace, Trace], phase: str) -> tuple[Trace, Trace]:
    """Both traces' views of `phase`; a TraceError naming the file when one has kernels but none in it."""
    views = (phase_view(traces[0], phase), phase_view(traces[1], phase))
    for trace, view in zip(traces, views):
        if trace.kernel_count and not view.kernel_count:
            found = ", ".join(step_count(int(r["steps"]), p) for p, r in phase_table(trace.kernels).iterrows())
            raise TraceError(trace.source, f"no {phase} kernels; its phases: {found}")
    return views


def pair_steps(traces: tuple[Trace, Trace]) -> dict[str, tuple[int, int]]:
    """The phases both traces have kernels in (PHASES order, 'all' last: every kernel), each with both sides' steps."""
    tables = [phase_table(t.kernels) for t in traces]
    shared = [p for p in PHASES if p != ALL and all(p in table.index for table in tables)]
    steps = {p: (int(tables[0].loc[p, "steps"]), int(tables[1].loc[p, "steps"])) for p in shared}
    return steps | {ALL: (recorded_steps(traces[0].kernels), recorded_steps(traces[1].kernels))}


def recorded_steps(kernels: pd.DataFrame) -> int:
    """Steps the kernels record (ProfilerStep, serving steps); 0 when they record none."""
    step = kernels["step"].to_numpy()
    return len(pd.unique(step[step != NO_STEP]))  # hashing: linear in the kernels


STEP_SPAN_COLUMNS = ("step", "phase", "start_us", "end_us", "kernels", "time_us")


def step_spans(kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per recorded step: its phase, first kernel start, last kernel end, kernels and kernel time.

    Kernels without a step (NO_STEP) are left out; a trace without steps gives no rows."""
    stepped = kernels[(kernels["step"] != NO_STEP).to_numpy()]
    if stepped.empty:
        return pd.DataFrame(columns=list(STEP_SPAN_COLUMNS))
    ends = stepped["ts"] + stepped["dur"]
    spans = (
        stepped.assign(end=ends)
        .groupby(["step", "phase"], observed=True, sort=False)
        .agg(start_us=("ts", "min"), end_us=("end", "max"), kernels=("dur", "size"), time_us=("dur", "sum"))
    )
    spans = spans.reset_index().sort_values("start_us", kind="stable").reset_index(drop=True)
    spans["phase"] = spans["phase"].astype(str)
    return spans[list(STEP_SPAN_COLUMNS)]
