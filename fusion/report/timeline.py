"""Both traces on one aligned time axis: the kernels of a scope, the second trace shifted so that matched units
start together, the links between aligned kernels and the findings over the kernels they cite.

What the Perfetto export (fusion.report.perfetto) writes and the dashboard's Timeline page draws. It reads a
Comparison: its pairs and their kernel alignments (Comparison.alignment), the traces' steps and, for eager
kernels, their op calls (aligned again within the scope: the Comparison keeps the op-level findings, not the
call pairs); every finding shown is one of Comparison.mappings or .one_sided, never recomputed.

A scope (Scope) is every compared kernel ('all'), one matched step, one pair of Comparison.pairs, an op (all its
aligned calls, or one), or one finding's cited windows; 'default' is the first matched step, else the first
matched group pair, else the first pair. Kernels cited by a finding that touches the scope are added to it, so
every finding shown spans all the kernels it cites.

The alignment is piecewise: the scope's matched units (group pairs and aligned op calls; else stream windows,
else steps) are taken in order on both sides, and unit k starts at the same aligned time A_k on both. From one
unit's start to the next, each side keeps its own clock; the side that reached the next unit sooner waits, and
its wait is a Gap. So a slow stretch on one side never pushes the rest out of line, each kernel keeps its
duration and every stream keeps its order. Units that would cross (not in execution order on both sides) are
left out of the alignment (the longest chain in order is kept).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

from fusion.classify.names import canonical_op
from fusion.comparison.result import Comparison
from fusion.match.op_calls import OpCalls, align_calls, op_calls
from fusion.model.phases import NO_STEP, step_spans
from fusion.report.render import headline
from fusion.result import EvidenceRef, FusionMapping, OneSidedNote

SCOPE_KINDS = ("default", "all", "step", "pair", "op", "finding")
STATUSES = ("matched", "aligned with another type", "one-sided", "not aligned")
"""Per kernel, what the pair alignments say of it: aligned with a kernel of its type, aligned with a kernel of
another type (an unknown type on either side), no counterpart, or in no pair (outside every compared pair)."""
MATCHED, OTHER_TYPE, ONE_SIDED, NOT_ALIGNED = range(len(STATUSES))
_STATUS_OF_OP = {"match": MATCHED, "substitute": OTHER_TYPE, "only1": ONE_SIDED, "only2": ONE_SIDED}
TIME_DECIMALS = 3
"""Aligned times are rounded to the nanosecond (trace times are microseconds with three decimals)."""
MIN_GAP_US = 0.001
"""A wait shorter than a nanosecond is rounding, not a gap."""


class ScopeError(ValueError):
    """A scope the comparison does not have (no such step, pair, op or finding); the message says what it has."""


@dataclass(frozen=True)
class Scope:
    """What to put on the timeline: `kind` (SCOPE_KINDS) and its value: a step or finding number (1 = the first),
    a pair id (Comparison.pairs), or an op (canonical, as in the op table; a raw op name is made canonical)."""

    kind: str = "default"
    value: int | str | None = None
    call: int | None = None
    """With kind 'op': only the call-th aligned call pair of the op (1 = the first); None: all of them."""


DEFAULT_SCOPE = Scope()


@dataclass(frozen=True)
class StepPair:
    """One matched step: the k-th step of a phase on trace 1 with the k-th step of that phase on trace 2."""

    phase: str
    step1: int
    step2: int


@dataclass
class Lane:
    """One side's kernels on the timeline, in start order (and so in kernel row order)."""

    side: int
    rows: np.ndarray
    """Kernel rows of Comparison.trace(side).kernels."""
    start: np.ndarray
    """Aligned start (µs from the start of the timeline)."""
    status: np.ndarray
    """Index into STATUSES."""
    pair: np.ndarray
    """The pair id whose alignment places the kernel, or -1."""
    fused: np.ndarray
    """Is the kernel the fused side of a finding's cited window."""

    def positions(self, rows: np.ndarray) -> np.ndarray:
        """Where kernel rows (all on this lane) sit in it."""
        return np.searchsorted(self.rows, rows)


@dataclass(frozen=True)
class Gap:
    """Time inserted on one side so that the next unit starts with its counterpart."""

    side: int
    start: float
    stop: float
    unit: str
    """The unit that starts at `stop` on both sides."""


@dataclass(frozen=True)
class FindingSpan:
    """One cited occurrence of a finding: its windows of kernel rows [start, stop) per side ((-1, -1): none) and
    the aligned time from the first cited kernel's start to the last one's end."""

    number: int
    """1-based position in Comparison.mappings, or in Comparison.one_sided for a one-sided note."""
    one_sided: bool
    title: str
    text: str
    windows: tuple[tuple[int, int], tuple[int, int]]
    start: float
    stop: float
    finding: FusionMapping | OneSidedNote


@dataclass
class Timeline:
    """A scope of a comparison on one aligned time axis (see module doc)."""

    scope: str
    """What the scope is, in words."""
    lanes: tuple[Lane, Lane]
    links: np.ndarray
    """(k, 2) kernel rows of aligned kernel pairs (trace 1, trace 2), both on the timeline."""
    same_type: np.ndarray
    """Per link: the two kernels are of one type ('matched'), else 'aligned with another type'."""
    units: list[str]
    unit_starts: np.ndarray
    """Aligned start of each unit the alignment used (both sides start it together)."""
    gaps: list[Gap]
    findings: list[FindingSpan] = field(default_factory=list)

    def lane(self, side: int) -> Lane:
        return self.lanes[side - 1]


def aligned_timeline(comparison: Comparison, scope: Scope = DEFAULT_SCOPE) -> Timeline:
    """The scope's kernels on both sides, aligned unit by unit; raises ScopeError for a scope it does not have."""
    label, selected, explicit = _select(comparison, scope)
    refs = _touching_refs(comparison, selected)
    rows = (_with_cited(selected[0], refs, 1), _with_cited(selected[1], refs, 2))
    pairs = _pairs_of(comparison, rows)
    units = explicit if explicit is not None else _units(comparison, rows, pairs)
    ts = [comparison.trace(s).kernels["ts"].to_numpy(np.float64) for s in (1, 2)]
    starts, unit_labels, unit_starts, gaps = _align(ts, rows, units)
    status, pair_of, links, same = _alignment_facts(comparison, rows, pairs)
    fused = _fused_rows(comparison, refs, rows)
    lanes = (
        Lane(1, rows[0], starts[0], status[0], pair_of[0], fused[0]),
        Lane(2, rows[1], starts[1], status[1], pair_of[1], fused[1]),
    )
    timeline = Timeline(label, lanes, links, same, unit_labels, unit_starts, gaps)
    timeline.findings = _finding_spans(comparison, timeline, refs)
    return timeline


# --- scopes ------------------------------------------------------------------------------------------------

_Units = list[tuple[int, int, str]]
"""Matched units as (first kernel row on trace 1, on trace 2, label)."""


def _select(comparison: Comparison, scope: Scope) -> tuple[str, tuple[np.ndarray, np.ndarray], _Units | None]:
    """The scope in words, its kernel rows per side, and its units when the scope names them (op calls, a
    finding's occurrences); None: found among the pairs and calls inside it."""
    kind = scope.kind
    if kind == "default":
        return _select(comparison, default_scope(comparison))
    if kind == "all":
        counts = [comparison.trace(s).kernel_count for s in (1, 2)]
        return "every compared kernel", (np.arange(counts[0]), np.arange(counts[1])), None
    if kind == "step":
        return _step(comparison, _number(scope))
    if kind == "pair":
        return _pair(comparison, _number(scope))
    if kind == "op":
        return _op(comparison, str(scope.value), scope.call)
    if kind == "finding":
        return _finding(comparison, _number(scope))
    raise ScopeError(f"unknown scope {kind!r}; scopes: {', '.join(SCOPE_KINDS)}")


def default_scope(comparison: Comparison) -> Scope:
    """The first matched step; else the first matched group pair; else the first pair; else everything."""
    if matched_steps(comparison):
        return Scope("step", 1)
    pairs = comparison.pairs
    if len(pairs):
        groups = pairs[pairs["kind"] == "group"]
        return Scope("pair", int((groups if len(groups) else pairs)["pair_id"].iloc[0]))
    return Scope("all")


def _number(scope: Scope) -> int:
    if isinstance(scope.value, bool) or not isinstance(scope.value, int):
        raise ScopeError(f"scope {scope.kind} needs a number, got {scope.value!r}")
    return scope.value


def matched_steps(comparison: Comparison) -> list[StepPair]:
    """Steps of both traces paired in order within each phase (the k-th prefill step with the k-th), in the order
    of trace 1."""
    spans = [step_spans(comparison.trace(s).kernels) for s in (1, 2)]
    found = []
    for phase in dict.fromkeys(spans[0]["phase"]):
        first, second = (table[table["phase"] == phase] for table in spans)
        for k in range(min(len(first), len(second))):
            found.append(
                (
                    float(first["start_us"].iat[k]),
                    StepPair(phase, int(first["step"].iat[k]), int(second["step"].iat[k])),
                )
            )
    return [pair for _, pair in sorted(found, key=lambda item: item[0])]


def _step(comparison: Comparison, number: int) -> tuple[str, tuple[np.ndarray, np.ndarray], None]:
    steps = matched_steps(comparison)
    if not 1 <= number <= len(steps):
        raise ScopeError(f"no step {number}: the traces have {len(steps)} matched steps")
    step = steps[number - 1]
    rows = []
    for side, recorded in ((1, step.step1), (2, step.step2)):
        kernels = comparison.trace(side).kernels
        mask = (kernels["step"].to_numpy() == recorded) & (kernels["phase"].astype(str).to_numpy() == step.phase)
        rows.append(np.flatnonzero(mask))
    label = f"matched step {number}: {step.phase} step {step.step1} of trace 1, {step.step2} of trace 2"
    return label, (rows[0], rows[1]), None


def _pair(comparison: Comparison, pair_id: int) -> tuple[str, tuple[np.ndarray, np.ndarray], None]:
    known = comparison.pairs["pair_id"].astype(int)
    if pair_id not in set(known) or comparison.pair_kernels is None:
        raise ScopeError(f"no pair {pair_id}: the comparison has pairs 0 to {len(known) - 1}")
    kind = str(comparison.pairs.set_index("pair_id").at[pair_id, "kind"])
    rows1, rows2 = comparison.pair_kernels.kernel_indices(pair_id)
    label = f"{'group pair' if kind == 'group' else 'stream window'} {pair_id}"
    return label, (np.sort(rows1).astype(np.int64), np.sort(rows2).astype(np.int64)), None


def _op(comparison: Comparison, op: str, call: int | None) -> tuple[str, tuple[np.ndarray, np.ndarray], _Units]:
    calls = (op_calls(comparison.trace1, 1), op_calls(comparison.trace2, 2))
    aligned = align_calls(*calls) if len(calls[0]) and len(calls[1]) else np.zeros((0, 2), dtype=np.int64)
    wanted = canonical_op(op)
    chosen = aligned[calls[0].ops[aligned[:, 0]] == wanted] if len(aligned) else aligned
    if not len(chosen):
        ops = sorted(set(calls[0].ops[aligned[:, 0]].tolist())) if len(aligned) else []
        shown = ", ".join(ops[:20]) + (", ..." if len(ops) > 20 else "")
        raise ScopeError(
            f"no aligned call of op {op!r}" + (f"; aligned ops: {shown}" if ops else ": no aligned op calls")
        )
    total = len(chosen)
    if call is not None:
        if not 1 <= call <= total:
            raise ScopeError(f"no call {call} of {wanted}: it has {total} aligned calls")
        chosen = chosen[call - 1 : call]
    rows = [np.sort(np.concatenate([calls[s].kernels(int(c)) for c in chosen[:, s]])) for s in (0, 1)]
    units = [
        (int(calls[0].kernels(int(a))[0]), int(calls[1].kernels(int(b))[0]), _call_label(calls[0], int(a)))
        for a, b in chosen
    ]
    named = f"op {op}" + (f" (as {wanted}, which equivalent ops share)" if wanted != op else "")
    label = f"{named}: " + (f"aligned call {call} of {total}" if call else f"{total} aligned calls")
    return label, (rows[0], rows[1]), units


def _call_label(calls: OpCalls, call: int) -> str:
    module = str(calls.modules[call])
    return f"{calls.raw_ops[call]} call" + (f" in {module}" if module else "")


def _finding(comparison: Comparison, number: int) -> tuple[str, tuple[np.ndarray, np.ndarray], _Units]:
    mappings = comparison.mappings
    if not 1 <= number <= len(mappings):
        raise ScopeError(f"no finding {number}: the comparison has {len(mappings)} findings")
    mapping = mappings[number - 1]
    refs = [r for r in mapping.evidence_refs if r.window1[0] >= 0 or r.window2[0] >= 0]
    if not refs:
        raise ScopeError(f"finding {number} cites no kernel windows")
    rows = tuple(_cited_rows(refs, side) for side in (1, 2))
    units = [
        (r.window1[0], r.window2[0], f"finding {number}, occurrence {k}")
        for k, r in enumerate(refs, start=1)
        if r.window1[0] >= 0 and r.window2[0] >= 0
    ]
    title = headline(mapping.detector, mapping.fused_trace, mapping.unfused_sequence, mapping.fused_kernel_type)
    return f"finding {number}: {title}", (rows[0], rows[1]), units


# --- findings in the scope ---------------------------------------------------------------------------------

_Ref = tuple[int, bool, EvidenceRef]
"""(1-based finding number, is it a one-sided note, the cited occurrence)."""


def _window(ref: EvidenceRef, side: int) -> tuple[int, int]:
    return ref.window1 if side == 1 else ref.window2


def _cited_rows(refs: list[EvidenceRef] | list[_Ref], side: int) -> np.ndarray:
    windows = [_window(r if isinstance(r, EvidenceRef) else r[2], side) for r in refs]
    parts = [np.arange(a, b, dtype=np.int64) for a, b in windows if 0 <= a < b]
    return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)


def _with_cited(rows: np.ndarray, refs: list[_Ref], side: int) -> np.ndarray:
    return np.union1d(rows, _cited_rows(refs, side)).astype(np.int64)


def _touching_refs(comparison: Comparison, rows: tuple[np.ndarray, np.ndarray]) -> list[_Ref]:
    """Every cited occurrence of a finding or one-sided note with a cited kernel in the scope."""
    cited = [(n, False, m.evidence_refs) for n, m in enumerate(comparison.mappings, start=1)]
    cited += [(n, True, note.evidence_refs) for n, note in enumerate(comparison.one_sided, start=1)]
    return [
        (number, one_sided, ref)
        for number, one_sided, refs in cited
        for ref in refs
        if any(_touches(rows[s - 1], _window(ref, s)) for s in (1, 2))
    ]


def _touches(rows: np.ndarray, window: tuple[int, int]) -> bool:
    start, stop = window
    if not 0 <= start < stop:
        return False
    at = int(np.searchsorted(rows, start))
    return at < len(rows) and rows[at] < stop


def _fused_rows(
    comparison: Comparison, refs: list[_Ref], rows: tuple[np.ndarray, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Per side and kernel of the timeline: is it in a finding's cited window on the finding's fused side."""
    fused = [np.zeros(len(r), dtype=bool) for r in rows]
    for number, one_sided, ref in refs:
        if not one_sided:
            side = comparison.mappings[number - 1].fused_trace
            start, stop = _window(ref, side)
            if 0 <= start < stop:
                fused[side - 1][np.searchsorted(rows[side - 1], np.arange(start, stop))] = True
    return fused[0], fused[1]


def _finding_spans(comparison: Comparison, timeline: Timeline, refs: list[_Ref]) -> list[FindingSpan]:
    spans = []
    for number, one_sided, ref in refs:
        finding = (comparison.one_sided if one_sided else comparison.mappings)[number - 1]
        extent = [_extent(comparison, timeline.lane(s), _window(ref, s)) for s in (1, 2)]
        present = [e for e in extent if e is not None]
        start, stop = min(e[0] for e in present), max(e[1] for e in present)
        title, text = _finding_text(number, finding)
        spans.append(FindingSpan(number, one_sided, title, text, (ref.window1, ref.window2), start, stop, finding))
    return spans


def _extent(comparison: Comparison, lane: Lane, window: tuple[int, int]) -> tuple[float, float] | None:
    """Aligned start of the window's first kernel and end of its last-ending one; None for no window."""
    start, stop = window
    if not 0 <= start < stop:
        return None
    at = lane.positions(np.arange(start, stop))
    dur = comparison.trace(lane.side).kernels["dur"].to_numpy(np.float64)[start:stop]
    return float(lane.start[at].min()), float((lane.start[at] + dur).max())


def _finding_text(number: int, finding: FusionMapping | OneSidedNote) -> tuple[str, str]:
    if isinstance(finding, OneSidedNote):
        return (
            f"one-sided {number}: {finding.kernel_type} on trace {finding.side} only ({finding.kind.replace('_', ' ')})",
            f"trace {finding.side}: {finding.count} x {finding.kernel_type} - {finding.reason}",
        )
    title = headline(
        finding.detector, finding.fused_trace, finding.unfused_sequence, finding.fused_kernel_type, finding.kind
    )
    return f"finding {number}: {title}", finding.evidence


# --- units and the shift -----------------------------------------------------------------------------------


def _pairs_of(comparison: Comparison, rows: tuple[np.ndarray, np.ndarray]) -> list[int]:
    """The pair ids with a kernel in the scope, in id order."""
    if comparison.pair_kernels is None or comparison.pairs.empty:
        return []
    masks = [_mask(comparison, s, rows[s - 1]) for s in (1, 2)]
    found = []
    for pid in comparison.pairs["pair_id"].astype(int).tolist():
        indices = comparison.pair_kernels.kernel_indices(pid)
        if masks[0][indices[0]].any() or masks[1][indices[1]].any():
            found.append(pid)
    return found


def _mask(comparison: Comparison, side: int, rows: np.ndarray) -> np.ndarray:
    mask = np.zeros(comparison.trace(side).kernel_count, dtype=bool)
    mask[rows] = True
    return mask


def _units(comparison: Comparison, rows: tuple[np.ndarray, np.ndarray], pairs: list[int]) -> _Units:
    """The scope's matched units: its group pairs and aligned op calls; else its stream windows; else its steps;
    else its first kernel on each side."""
    kinds = comparison.pairs.set_index("pair_id")["kind"]
    masks = [_mask(comparison, s, rows[s - 1]) for s in (1, 2)]
    by_kind: dict[str, _Units] = {"group": [], "stream": []}
    for pid in pairs:
        indices = comparison.pair_kernels.kernel_indices(pid) if comparison.pair_kernels else ()
        first = [_first_in(indices[s], masks[s]) for s in (0, 1)]
        if first[0] >= 0 and first[1] >= 0:
            kind = str(kinds.at[pid])
            by_kind[kind].append((first[0], first[1], f"{'group pair' if kind == 'group' else 'stream window'} {pid}"))
    units = by_kind["group"] + _call_units(comparison, rows)
    if not units:
        units = by_kind["stream"] or _step_units(comparison, rows)
    if not units and len(rows[0]) and len(rows[1]):
        units = [(int(rows[0][0]), int(rows[1][0]), "the scope's first kernels")]
    return units


def _first_in(indices: np.ndarray, mask: np.ndarray) -> int:
    """The first of a pair's kernel rows that is in the scope, or -1."""
    inside = indices[mask[indices]]
    return int(inside.min()) if len(inside) else -1


def _call_units(comparison: Comparison, rows: tuple[np.ndarray, np.ndarray]) -> _Units:
    """The op calls launched in the scope on both sides, aligned with each other (fusion.match.op_calls)."""
    eager = [_has_calls(comparison, s, rows[s - 1]) for s in (1, 2)]
    if not all(eager):
        return []
    calls = [_calls_within(op_calls(comparison.trace(s), s), rows[s - 1]) for s in (1, 2)]
    if not len(calls[0]) or not len(calls[1]):
        return []
    pairs = align_calls(calls[0], calls[1])
    return [
        (int(calls[0].kernels(int(a))[0]), int(calls[1].kernels(int(b))[0]), _call_label(calls[0], int(a)))
        for a, b in pairs
    ]


def _has_calls(comparison: Comparison, side: int, rows: np.ndarray) -> bool:
    kernels = comparison.trace(side).kernels
    return "op_call" in kernels.columns and bool((kernels["op_call"].to_numpy()[rows] >= 0).any())


def _calls_within(calls: OpCalls, rows: np.ndarray) -> OpCalls:
    """The calls whose first kernel is in `rows`."""
    heads = calls.rows[calls.offsets[:-1]] if len(calls) else np.zeros(0, dtype=np.int64)
    keep = np.flatnonzero(np.isin(heads, rows))
    counts = calls.counts[keep]
    starts = (
        np.repeat(calls.offsets[keep], counts)
        + np.arange(int(counts.sum()))
        - np.repeat(np.cumsum(counts) - counts, counts)
    )
    return OpCalls(
        calls.side,
        calls.trace,
        calls.ops[keep],
        calls.raw_ops[keep],
        calls.modules[keep],
        calls.threads[keep],
        calls.rows[starts],
        np.r_[0, np.cumsum(counts)].astype(np.int64),
        calls.names,
        calls.types,
        calls.dur,
        calls.correlation,
        calls.op_ids[keep],
        calls.raw_op_ids[keep],
        calls.module_ids[keep],
    )


def _step_units(comparison: Comparison, rows: tuple[np.ndarray, np.ndarray]) -> _Units:
    units = []
    steps = [comparison.trace(s).kernels["step"].to_numpy() for s in (1, 2)]
    phases = [comparison.trace(s).kernels["phase"].astype(str).to_numpy() for s in (1, 2)]
    for step in matched_steps(comparison):
        first = [
            _first_where(rows[s], (steps[s][rows[s]] == recorded) & (phases[s][rows[s]] == step.phase))
            for s, recorded in ((0, step.step1), (1, step.step2))
        ]
        if first[0] >= 0 and first[1] >= 0 and step.step1 != NO_STEP:
            units.append((first[0], first[1], f"{step.phase} step {step.step1} / {step.step2}"))
    return units


def _first_where(rows: np.ndarray, mask: np.ndarray) -> int:
    at = np.flatnonzero(mask)
    return int(rows[at[0]]) if len(at) else -1


def _in_order(units: _Units, ts: list[np.ndarray]) -> _Units:
    """The longest chain of units that starts in the same order on both sides (by trace 1's start, then trace 2's)."""
    ordered = sorted(units, key=lambda u: (ts[0][u[0]], ts[1][u[1]]))
    tails: list[float] = []
    tail_at: list[int] = []
    before = [-1] * len(ordered)
    for k, unit in enumerate(ordered):
        t = float(ts[1][unit[1]])
        at = bisect.bisect_right(tails, t)
        if at == len(tails):
            tails.append(t)
            tail_at.append(k)
        else:
            tails[at], tail_at[at] = t, k
        before[k] = tail_at[at - 1] if at else -1
    chain, k = [], tail_at[-1] if tail_at else -1
    while k >= 0:
        chain.append(ordered[k])
        k = before[k]
    return chain[::-1]


def _align(
    ts: list[np.ndarray], rows: tuple[np.ndarray, np.ndarray], units: _Units
) -> tuple[list[np.ndarray], list[str], np.ndarray, list[Gap]]:
    """Aligned starts of the scope's kernels per side, the units used, their aligned starts and the gaps."""
    chain = _in_order(units, ts)
    if not chain:
        starts = [
            np.round(ts[s][rows[s]] - (ts[s][rows[s][0]] if len(rows[s]) else 0.0), TIME_DECIMALS) for s in (0, 1)
        ]
        return starts, [], np.zeros(0), []
    first = [ts[s][chain[0][s]] for s in (0, 1)]
    unit_ts = [np.array([ts[s][u[s]] - first[s] for u in chain]) for s in (0, 1)]
    spans = [np.diff(t) for t in unit_ts]
    step = np.maximum(spans[0], spans[1])
    aligned = np.r_[0.0, np.cumsum(step)]
    starts = []
    for s in (0, 1):
        rel = ts[s][rows[s]] - first[s]
        unit = np.clip(np.searchsorted(unit_ts[s], rel, side="right") - 1, 0, None)
        starts.append(rel + (aligned - unit_ts[s])[unit])
    origin = min((float(x.min()) for x in starts if len(x)), default=0.0)
    starts = [np.round(x - origin, TIME_DECIMALS) for x in starts]
    aligned = np.round(aligned - origin, TIME_DECIMALS)
    gaps = [
        Gap(s + 1, float(aligned[k + 1] - wait), float(aligned[k + 1]), chain[k + 1][2])
        for s in (0, 1)
        for k, wait in enumerate(np.round(step - spans[s], TIME_DECIMALS).tolist())
        if wait >= MIN_GAP_US
    ]
    return starts, [u[2] for u in chain], aligned, sorted(gaps, key=lambda g: (g.side, g.start))


def _alignment_facts(
    comparison: Comparison, rows: tuple[np.ndarray, np.ndarray], pairs: list[int]
) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray, np.ndarray]:
    """Per side and kernel: its STATUSES code and pair id; the links between aligned kernels both in the scope
    and whether each joins kernels of one type."""
    status = [np.full(len(r), NOT_ALIGNED, dtype=np.int8) for r in rows]
    pair_of = [np.full(len(r), -1, dtype=np.int64) for r in rows]
    links, same = [], []
    for pid in pairs:
        table = comparison.alignment(pid)
        index = [table[f"index{s}"].to_numpy(np.int64) for s in (1, 2)]
        codes = np.array([_STATUS_OF_OP[op] for op in table["op"].tolist()], dtype=np.int8)
        inside = []
        for s in (0, 1):
            at = np.searchsorted(rows[s], index[s])
            ok = (
                (index[s] >= 0) & (at < len(rows[s])) & (rows[s][np.minimum(at, len(rows[s]) - 1)] == index[s])
                if len(rows[s])
                else np.zeros(len(index[s]), dtype=bool)
            )
            status[s][at[ok]] = codes[ok]
            pair_of[s][at[ok]] = pid
            inside.append(ok)
        both = inside[0] & inside[1]
        links.append(np.column_stack([index[0][both], index[1][both]]))
        same.append(codes[both] == MATCHED)
    return (
        status,
        pair_of,
        np.vstack(links) if links else np.zeros((0, 2), dtype=np.int64),
        np.concatenate(same) if same else np.zeros(0, dtype=bool),
    )
