"""Op-level comparison: the top-level PyTorch op calls of two traces, aligned, and the kernels each call launched.

Where a trace records CPU ops, each eagerly launched kernel belongs to one top-level op call (the loader's
`op_call`). The two traces run the same op sequence, so aligning their op-call sequences (per thread,
Needleman-Wunsch on canonical op codes: equivalent ops are the same) pairs each call with its counterpart.
An op whose aligned calls repeatedly launch a different number of kernels is a finding named by the op;
the op table gives every op's calls, kernels and time on both sides, ranked by the time gap.

Kernels of graph replays (launch 'graph') and kernels without a runtime launch (launch 'none') have no op
call and are left to the kernel-type comparison.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fusion.match.align import GAP, align_codes, stream_windows
from fusion.classify.names import canonical_op
from fusion.detect.evidence import NON_FUSABLE_TYPES
from fusion.detect.mappings import PLATFORM_NAMES
from fusion.detect.thresholds import Thresholds
from fusion.model.ops import MODULE_SEPARATOR, OP_COLUMNS
from fusion.result import NO_PAIR, TIME_DECIMALS, TIME_RATIO, TIME_US, EvidenceRef, FusionMapping, side_column
from fusion.model.trace import Trace

OP_KERNELS_DETECTOR = "op_kernels"
OP_CALLS_SOURCE = "op_calls"
OP_EVIDENCE_PAIR = NO_PAIR
"""EvidenceRef.pair_id of op-call evidence: it is no Comparison pair; the windows cite the two calls' kernels
and correlation1/2 are the correlation ids of each call's first kernel."""
EAGER_LAUNCH = "kernel"
"""The loader's `launch` value of an eagerly launched kernel (ops.LAUNCH_KINDS)."""
NAME_CHARS = 100
"""Raw kernel names are cut to this many characters in evidence text (the mapping keeps them whole)."""

# Op table columns; per-side columns are side_column(<name>, side), e.g. 'trace1_calls'.
OP = "op"
"""Canonical top-level op (classify.canonical_op of op_top)."""
OP_NAMES = "op_names"
"""The top-level ops as the traces spell them (aten::linear and aten::matmul are both canonical aten::mm)."""
MODULE = "module"
"""nn.Module class path of the call where the trace records it ('Qwen2DecoderLayer/Qwen2MLP/Linear': instance
numbers dropped, so all layers' calls of one op in one kind of module form one row), else ''."""
CALLS = "calls"
KERNELS_PER_CALL = "kernels_per_call"
KERNEL_NAMES = "kernel_names"
"""The side's kernel names of this op, by total time, at most TOP_OP_NAMES."""
TIME_PER_CALL_US = "time_per_call_us"
TIME_GAP_US = "time_gap_us"
"""trace1 time - trace2 time; the table is ranked by its absolute value."""
SIDE_COLUMNS = (CALLS, KERNELS_PER_CALL, KERNEL_NAMES, TIME_US, TIME_PER_CALL_US)
TOP_OP_NAMES = 3
_INSTANCE = re.compile(rf"_\d+(?={re.escape(MODULE_SEPARATOR)}|$)")
"""The instance number the profiler appends to a module name (Linear_3)."""


OP_TABLE_COLUMNS = (OP, OP_NAMES, MODULE, *(side_column(c, s) for s in (1, 2) for c in SIDE_COLUMNS),
                    TIME_RATIO, TIME_GAP_US)


@dataclass
class OpComparison:
    """Op-level findings, the op table (see OP_TABLE_COLUMNS) and what was compared."""

    findings: list[FusionMapping]
    op_table: pd.DataFrame
    aligned_calls: int
    calls: tuple[int, int]
    notes: list[str] = field(default_factory=list)
    claimed: tuple[np.ndarray, np.ndarray] = field(default_factory=lambda: (np.zeros(0, dtype=bool),) * 2)
    """Per side, a mask over the kernel rows: launched by an op call of a finding."""

    def supersedes(self, mapping: FusionMapping) -> bool:
        """Does a mapping from groups or windows cite only kernels of this comparison's op-level findings?

        Op calls are the primary evidence: such a mapping describes the same kernels (a sample of its
        occurrences, its evidence refs, all lies in finding calls on both sides) and is reported once.
        """
        refs = mapping.evidence_refs
        return mapping.evidence_source != OP_CALLS_SOURCE and bool(refs) and all(
            _inside(self.claimed[0], ref.window1) and _inside(self.claimed[1], ref.window2) for ref in refs)


def _inside(mask: np.ndarray, window: tuple[int, int]) -> bool:
    start, stop = window
    return 0 <= start < stop <= len(mask) and bool(mask[start:stop].all())


@dataclass
class OpCalls:
    """One trace's top-level op calls in start order; call i launched kernel rows rows[offsets[i]:offsets[i+1]].

    names, types, dur and correlation are the trace's kernel columns (indexed by kernel row).
    """

    side: int
    trace: Trace
    ops: np.ndarray
    """Canonical op name per call (object array)."""
    raw_ops: np.ndarray
    """The call's op_top as the trace spells it."""
    modules: np.ndarray
    threads: np.ndarray
    rows: np.ndarray
    offsets: np.ndarray
    names: ByRow
    types: ByRow
    dur: np.ndarray
    correlation: np.ndarray

    def __len__(self) -> int:
        return len(self.ops)

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    def kernels(self, call: int) -> np.ndarray:
        return self.rows[self.offsets[call] : self.offsets[call + 1]]


def op_calls(trace: Trace, side: int) -> OpCalls:
    """The trace's eager op calls (none when it records no op context)."""
    kernels = trace.kernels
    if set(OP_COLUMNS) <= set(kernels.columns):
        call = kernels["op_call"].to_numpy(np.int64)
        rows = np.flatnonzero((call >= 0) & (kernels["launch"] == EAGER_LAUNCH).to_numpy())
    else:
        call, rows = np.zeros(len(kernels), dtype=np.int64), np.zeros(0, dtype=np.int64)
    rows = rows[np.argsort(call[rows], kind="stable")]
    _, first = np.unique(call[rows], return_index=True)
    heads = rows[first]
    return OpCalls(side, trace, _per_category(kernels, "op_top", heads, canonical_op),
                   _per_category(kernels, "op_top", heads, str), _modules(kernels, heads),
                   _column(kernels, "thread", heads), rows, np.r_[first, len(rows)].astype(np.int64),
                   _by_row(kernels, "name"), _by_row(kernels, "type"),
                   kernels["dur"].to_numpy(np.float64), kernels["correlation"].to_numpy(np.int64))


def _column(kernels: pd.DataFrame, name: str, rows: np.ndarray) -> np.ndarray:
    return kernels[name].to_numpy()[rows] if name in kernels.columns else np.zeros(0, dtype=np.int64)


def _modules(kernels: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """The module class path (see MODULE) of each row; each distinct path is rewritten once."""
    return _per_category(kernels, "module", rows, lambda path: _INSTANCE.sub("", path))


def _per_category(kernels: pd.DataFrame, column: str, rows: np.ndarray, rewrite: Callable[[str], str]) -> np.ndarray:
    """`rewrite` of a categorical column's value at `rows`, as an object array of shared strings (8 bytes a row);
    each distinct value is rewritten once."""
    return _by_row(kernels, column, rewrite)[rows]


@dataclass(frozen=True)
class ByRow:
    """A categorical kernel column read by kernel row (`column[rows]`, `column[row]`): only the rows asked for
    become strings."""

    values: np.ndarray
    """Object array: one string per category, then '' (code -1)."""
    codes: np.ndarray

    def __getitem__(self, rows: np.ndarray | int) -> np.ndarray | str:
        return self.values[self.codes[rows]]


def _by_row(kernels: pd.DataFrame, column: str, rewrite: Callable[[str], str] = str) -> ByRow:
    """The column (its values rewritten, each distinct one once) read by row; '' everywhere when it is absent."""
    if column not in kernels.columns:
        return ByRow(np.array([""], dtype=object), np.full(len(kernels), -1, dtype=np.int64))
    values = kernels[column].astype("category").cat
    return ByRow(np.array([rewrite(str(v)) for v in values.categories] + [""], dtype=object), values.codes.to_numpy())


def compare_ops(trace1: Trace, trace2: Trace, thresholds: Thresholds | None = None, *, with_table: bool = True) -> OpComparison:
    """Align the two traces' op calls and report op-level kernel-count differences and (with `with_table`) the op table."""
    limits = thresholds or Thresholds()
    calls = (op_calls(trace1, 1), op_calls(trace2, 2))
    table = op_table(calls) if with_table else pd.DataFrame(columns=list(OP_TABLE_COLUMNS))
    if not len(calls[0]) or not len(calls[1]):
        missing = [c.trace.label for c in calls if not len(c)]
        return OpComparison([], table, 0, (len(calls[0]), len(calls[1])),
                            [f"no eager op calls recorded in {', '.join(missing)}: no op-level comparison"])
    aligned = align_calls(*calls)
    findings, notes, shown = op_findings(calls, aligned, limits)
    notes += _unaligned_notes(calls, aligned) + [n for c in calls if (n := _outside_ops_note(c))]
    return OpComparison(findings, table, len(aligned), (len(calls[0]), len(calls[1])), notes,
                        tuple(_mask(c, [pair[c.side - 1] for pair in shown]) for c in calls))


def _mask(calls: OpCalls, chosen: list[int]) -> np.ndarray:
    mask = np.zeros(len(calls.trace.kernels), dtype=bool)
    if chosen:
        mask[np.concatenate([calls.kernels(c) for c in chosen])] = True
    return mask


def align_calls(calls1: OpCalls, calls2: OpCalls) -> np.ndarray:
    """(k, 2) indices of aligned calls with the same canonical op; threads paired by their number of calls."""
    vocabulary = {op: i for i, op in enumerate(sorted(set(calls1.ops) | set(calls2.ops)))}
    codes1 = np.array([vocabulary[op] for op in calls1.ops], dtype=np.int64)
    codes2 = np.array([vocabulary[op] for op in calls2.ops], dtype=np.int64)
    pairs = [_align_thread(codes1, codes2, t1, t2) for t1, t2 in zip(_threads(calls1), _threads(calls2))]
    return np.vstack(pairs) if pairs else np.zeros((0, 2), dtype=np.int64)


def _threads(calls: OpCalls) -> list[np.ndarray]:
    """Call indices of each launching thread, busiest thread first."""
    _, inverse, counts = np.unique(calls.threads, return_inverse=True, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    return [np.flatnonzero(inverse == t) for t in order]


def _align_thread(codes1: np.ndarray, codes2: np.ndarray, calls1: np.ndarray, calls2: np.ndarray) -> np.ndarray:
    """Aligned same-op call pairs of one thread pair, walked in corresponding windows like an eager stream."""
    a, b = codes1[calls1], codes2[calls2]
    out = []
    for s1, e1, s2, e2 in stream_windows(a, b, max(len(a), len(b))):
        path = align_codes(a[s1:e1], b[s2:e2])
        both = (path[:, 0] != GAP) & (path[:, 1] != GAP)
        i, j = path[both, 0] + s1, path[both, 1] + s2
        same = a[i] == b[j]
        out.append(np.column_stack([calls1[i[same]], calls2[j[same]]]))
    return np.vstack(out) if out else np.zeros((0, 2), dtype=np.int64)


@dataclass
class _Difference:
    """Aligned call pairs of one op whose kernel type sequences differ in length in one way."""

    op: str
    """Canonical op."""
    types1: tuple[str, ...]
    types2: tuple[str, ...]
    pairs: list[tuple[int, int]] = field(default_factory=list)

    def types(self, side: int) -> tuple[str, ...]:
        return self.types1 if side == 1 else self.types2

    @property
    def fused_side(self) -> int:
        return 1 if len(self.types1) < len(self.types2) else 2


def op_findings(calls: tuple[OpCalls, OpCalls], aligned: np.ndarray,
                limits: Thresholds) -> tuple[list[FusionMapping], list[str], list[tuple[int, int]]]:
    """Repeated, consistent kernel-count differences of aligned calls become findings; the others notes.

    Also returns the call pairs the findings stand on."""
    ops = calls[0].ops[aligned[:, 0]] if len(aligned) else np.zeros(0, dtype=object)
    per_op = Counter(ops.tolist())
    differing = np.flatnonzero(calls[0].counts[aligned[:, 0]] != calls[1].counts[aligned[:, 1]]) if len(aligned) else []
    groups: dict[tuple, _Difference] = {}
    for k in differing:
        i, j = (int(x) for x in aligned[k])
        key = (ops[k], tuple(calls[0].types[calls[0].kernels(i)]), tuple(calls[1].types[calls[1].kernels(j)]))
        groups.setdefault(key, _Difference(*key)).pairs.append((i, j))
    findings, notes, shown = [], [], []
    for diff in groups.values():
        share = len(diff.pairs) / per_op[diff.op]
        launch = (f"{diff.op}: {len(diff.pairs)} of {per_op[diff.op]} aligned calls launch"
                  f" {len(diff.types1)} vs {len(diff.types2)} kernels")
        if len(diff.pairs) < limits.op_min_calls or share < limits.op_min_consistency:
            notes.append(f"{launch}; below {limits.op_min_calls} calls or {limits.op_min_consistency:.0%} of the op's"
                         " calls, not reported")
            continue
        unfused = 3 - diff.fused_side
        extra = _extra_positions(diff.types(diff.fused_side), diff.types(unfused))
        non_compute = np.isin(np.array(diff.types(unfused), dtype=object)[extra], list(NON_FUSABLE_TYPES))
        idle, compute = extra[non_compute], extra[~non_compute]
        if len(idle):  # a memset or copy more does no compute: never part of a fusion (as the walk)
            idle_types = [diff.types(unfused)[p] for p in idle]
            kernels, do = ("kernel", "does") if len(idle) == 1 else ("kernels", "do")
            verdict = "left out of the finding" if len(compute) else "not a fusion"
            notes.append(f"{launch}; the extra {kernels} per call on {calls[unfused - 1].trace.label}"
                         f" ({' + '.join(idle_types)}, {_extra_time_us(diff, calls, idle) / 1000:.3f} ms in all)"
                         f" {do} no compute: {verdict}")
        if len(compute):
            findings.append(_finding(diff, share, calls, limits, _extra_time_us(diff, calls, compute), idle))
            shown += diff.pairs
    return sorted(findings, key=lambda m: -m.time_saved_us), notes, shown


def _extra_time_us(diff: _Difference, calls: tuple[OpCalls, OpCalls], extra: np.ndarray) -> float:
    """Kernel time of the unfused side's kernels at positions `extra` of each call, over all the difference's calls."""
    unfused = 3 - diff.fused_side
    rows = np.array([calls[unfused - 1].kernels(p[unfused - 1]) for p in diff.pairs])
    return round(float(calls[unfused - 1].dur[rows[:, extra]].sum()), TIME_DECIMALS)


def _finding(diff: _Difference, share: float, calls: tuple[OpCalls, OpCalls], limits: Thresholds,
             extra_us: float, idle: np.ndarray) -> FusionMapping:
    """The finding of a difference; `idle`: positions of the unfused call's non-compute extra kernels, which
    the mapping leaves out of what is fused."""
    fused, unfused = diff.fused_side, 3 - diff.fused_side
    left_out = set(idle.tolist())
    replaced = [t for k, t in enumerate(diff.types(unfused)) if k not in left_out]
    cited = _cited_pairs(diff, calls, limits.max_evidence_refs)
    kinds = {fused: set(diff.types(fused)), unfused: set(replaced)}
    names = {s: _cited_names(diff, calls[s - 1], [p[s - 1] for p in cited], limits.max_names, kinds[s]) for s in (1, 2)}
    components = _fused_components(calls[fused - 1].trace, names[fused])
    helpers = _helpers(calls[unfused - 1].trace, names[unfused])
    op = _op_name(diff, calls)
    return FusionMapping(
        detector=OP_KERNELS_DETECTOR,
        fused_trace=fused,
        fused_platform=PLATFORM_NAMES[fused],
        fused_kernel_type=" + ".join(diff.types(fused)),
        fused_count=len(diff.types(fused)) * len(diff.pairs),
        unfused_platform=PLATFORM_NAMES[unfused],
        unfused_sequence=replaced,
        unfused_count_per_type={t: n * len(diff.pairs) for t, n in Counter(replaced).items()},
        pattern_count=len(diff.pairs),
        pattern_confidence=share,
        evidence=_evidence_text(op, diff, calls, cited, components, helpers, replaced),
        evidence_refs=[_ref(calls, pair) for pair in cited],
        pairs_with_pattern=len(diff.pairs),
        time_saved_us=extra_us,
        fused_kernel_names=names[fused],
        unfused_kernel_names=names[unfused],
        fused_components=components,
        op=op,
        evidence_source=OP_CALLS_SOURCE,
    )


def _op_name(diff: _Difference, calls: tuple[OpCalls, OpCalls]) -> str:
    """The op as both traces spell it when every call of the finding has the same op_top, else the canonical op."""
    spelled = {calls[s].raw_ops[p[s]] for p in diff.pairs for s in (0, 1)}
    return spelled.pop() if len(spelled) == 1 else diff.op


def _cited_pairs(diff: _Difference, calls: tuple[OpCalls, OpCalls], limit: int) -> list[tuple[int, int]]:
    """One call pair per kernel-name combination, most frequent combination first, then further pairs."""
    first: dict[tuple, tuple[int, int]] = {}
    frequency: Counter = Counter()
    for pair in diff.pairs:
        key = tuple(tuple(calls[s].names[calls[s].kernels(pair[s])]) for s in (0, 1))
        frequency[key] += 1
        first.setdefault(key, pair)
    cited = [first[key] for key, _ in frequency.most_common(limit)]
    cited += [p for p in diff.pairs if p not in cited][: limit - len(cited)]
    return sorted(cited)


def _cited_names(diff: _Difference, calls: OpCalls, cited: list[int], per_type: int, kinds: set[str]) -> list[str]:
    """Raw names of the side's kernels of `kinds` in the cited calls, most frequent over all the op's calls first."""
    seen = {calls.names[r] for call in cited for r in calls.kernels(call)}
    side_calls = [p[calls.side - 1] for p in diff.pairs]
    rows = np.concatenate([calls.kernels(c) for c in side_calls])
    frequency = Counter(zip(calls.names[rows], calls.types[rows]))
    taken: Counter = Counter()
    out = []
    for (name, kind), _ in frequency.most_common():
        if name in seen and kind in kinds and taken[kind] < per_type:
            taken[kind] += 1
            out.append(name)
    return out


def _extra_positions(fused_types: tuple[str, ...], unfused_types: tuple[str, ...]) -> np.ndarray:
    """Positions in the unfused call's kernels with no counterpart in the fused call (type alignment)."""
    vocabulary = {t: i for i, t in enumerate(sorted(set(fused_types) | set(unfused_types)))}
    path = align_codes(np.array([vocabulary[t] for t in fused_types]), np.array([vocabulary[t] for t in unfused_types]))
    return path[path[:, 0] == GAP, 1]


def _name_facts(trace: Trace, names: list[str], column: str) -> dict[str, Any]:
    """Name -> the names table's `column` (present only when the classification provides it)."""
    if column not in trace.names.columns:
        return {}
    return {n: trace.names.at[n, column] for n in names if n in trace.names.index}


def _fused_components(trace: Trace, names: list[str]) -> list[str]:
    """Operation types the fewer-kernel side's kernels also perform, from the names table."""
    found = [t for value in _name_facts(trace, names, "fused_components").values() for t in (value or ())]
    return list(dict.fromkeys(found))


def _helpers(trace: Trace, names: list[str]) -> dict[str, str]:
    """Name -> helper role ('split_k_reduce', ...) of the cited kernels that are helpers of their operation."""
    return {n: str(role) for n, role in _name_facts(trace, names, "helper").items() if role}


def _ref(calls: tuple[OpCalls, OpCalls], pair: tuple[int, int]) -> EvidenceRef:
    rows = [c.kernels(p) for c, p in zip(calls, pair)]
    correlation = [int(c.correlation[r[0]]) for c, r in zip(calls, rows)]
    return EvidenceRef(OP_EVIDENCE_PAIR, correlation[0], correlation[1],
                       (int(rows[0].min()), int(rows[0].max()) + 1), (int(rows[1].min()), int(rows[1].max()) + 1))


def _evidence_text(op: str, diff: _Difference, calls: tuple[OpCalls, OpCalls], cited: list[tuple[int, int]],
                   components: list[str], helpers: dict[str, str], replaced: list[str]) -> str:
    fused, unfused = diff.fused_side, 3 - diff.fused_side
    sides = []
    for s in (1, 2):
        call = calls[s - 1]
        names = call.names[call.kernels(cited[0][s - 1])]
        count = len(diff.types(s))
        listed = ", ".join(f"`{_cut(str(n))}`" for n in names)
        sides.append(f"{call.trace.label} {count} kernel{'s' if count != 1 else ''} ({listed})")
    per_call = [sum(c.dur[c.kernels(p[c.side - 1])].sum() for p in diff.pairs) / len(diff.pairs) for c in calls]
    head = (f"{op}: {sides[0]}, {sides[1]}, {len(diff.pairs)} calls,"
            f" {per_call[0]:.1f} vs {per_call[1]:.1f} us of kernel time per call")
    fused_label, unfused_label = calls[fused - 1].trace.label, calls[unfused - 1].trace.label
    counts = f"{len(diff.types(unfused))} vs {len(diff.types(fused))} kernels"
    if helpers:
        roles = ", ".join(f"`{_cut(n)}` ({role})" for n, role in helpers.items())
        return f"{head}; {unfused_label} splits the op ({counts}): helper kernel {roles}"
    if set(replaced) <= set(diff.types(fused)) | set(components):
        what = " + ".join(replaced)
        fewer = diff.types(fused)
        into = f"one {fewer[0]} kernel" if len(fewer) == 1 else f"{len(fewer)} kernels"
        return f"{head}; {fused_label} fuses {what} into {into}"
    return f"{head}; the same op launches {counts} ({unfused_label} vs {fused_label})"


def _cut(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def _unaligned_notes(calls: tuple[OpCalls, OpCalls], aligned: np.ndarray) -> list[str]:
    notes = []
    for call in calls:
        left = len(call) - len(aligned)
        if left:
            notes.append(f"{call.trace.label}: {left} of {len(call)} op calls have no counterpart with the same op")
    return notes


def _outside_ops_note(calls: OpCalls) -> str:
    """How many eagerly launched kernels no op call encloses ('' when none): they are not compared by op."""
    kernels = calls.trace.kernels
    outside = (kernels["launch"] == EAGER_LAUNCH).to_numpy() & (kernels["op_call"].to_numpy() < 0)
    if not outside.any():
        return ""
    time_ms = float(kernels["dur"].to_numpy()[outside].sum()) / 1000
    return (f"{calls.trace.label}: eagerly launched kernels with no enclosing op: {int(outside.sum())}"
            f" ({time_ms:.3f} ms); not part of the op-level comparison")


def op_table(calls: tuple[OpCalls, OpCalls]) -> pd.DataFrame:
    """Per (canonical op, module): calls, kernels per call, top kernel names and time per side; by time gap."""
    sides = [_side_table(c).rename(columns={OP_NAMES: f"{OP_NAMES}{c.side}",
                                            **{name: side_column(name, c.side) for name in SIDE_COLUMNS}})
             for c in calls]
    table = sides[0].join(sides[1], how="outer")
    for s in (1, 2):
        table[side_column(CALLS, s)] = table[side_column(CALLS, s)].fillna(0).astype(np.int64)
        table[side_column(TIME_US, s)] = table[side_column(TIME_US, s)].fillna(0.0).astype(np.float64)
        for column in (side_column(KERNEL_NAMES, s), f"{OP_NAMES}{s}"):
            table[column] = table[column].apply(lambda v: v if isinstance(v, list) else [])
    table[OP_NAMES] = [sorted(set(a) | set(b)) for a, b in zip(table[f"{OP_NAMES}1"], table[f"{OP_NAMES}2"])]
    time1, time2 = table[side_column(TIME_US, 1)], table[side_column(TIME_US, 2)]
    table[TIME_RATIO] = (time1 / time2).where((time1 > 0) & (time2 > 0))
    table[TIME_GAP_US] = time1 - time2
    table = table.reset_index()
    order = np.argsort(-table[TIME_GAP_US].abs().to_numpy(), kind="stable")
    return table.iloc[order].reset_index(drop=True)[list(OP_TABLE_COLUMNS)]


def op_times(trace: Trace) -> pd.DataFrame:
    """One trace's eager ops by kernel time: op, op_names, module and the SIDE_COLUMNS (unprefixed)."""
    table = _side_table(op_calls(trace, 1)).reset_index()
    return table.sort_values(TIME_US, ascending=False, kind="stable").reset_index(drop=True)


SEQUENCE_COLUMNS = (MODULE, KERNEL_NAMES, "kernel_types", CALLS, TIME_US, "example_rows")
"""op_sequences: per distinct launch, the module, the kernel names and types in launch order, how many calls
launched exactly that, their kernel time, and the kernel rows [start, stop) of the first such call."""


def op_sequences(trace: Trace, op: str) -> pd.DataFrame:
    """What the calls of canonical `op` launched on one trace: one row per (module, kernel-name sequence), most calls first."""
    calls = op_calls(trace, 1)
    found: dict[tuple[str, tuple[str, ...]], list] = {}
    for call in np.flatnonzero(calls.ops == op):
        rows = calls.kernels(int(call))
        key = (str(calls.modules[call]), tuple(str(n) for n in calls.names[rows]))
        entry = found.setdefault(key, [tuple(str(t) for t in calls.types[rows]), 0, 0.0,
                                       (int(rows.min()), int(rows.max()) + 1)])
        entry[1] += 1
        entry[2] += float(calls.dur[rows].sum())
    table = pd.DataFrame([(module, names, *entry) for (module, names), entry in found.items()],
                         columns=list(SEQUENCE_COLUMNS))
    return table.sort_values([CALLS, TIME_US], ascending=False, kind="stable").reset_index(drop=True)


def _side_table(calls: OpCalls) -> pd.DataFrame:
    """One side's OP_NAMES and SIDE_COLUMNS, indexed by (op, module)."""
    call_of_row = np.repeat(np.arange(len(calls)), calls.counts)
    rows = pd.DataFrame({OP: calls.ops[call_of_row], MODULE: calls.modules[call_of_row], "call": call_of_row,
                         "name": calls.names[calls.rows], "dur": calls.dur[calls.rows]})
    keys = [OP, MODULE]
    grouped = rows.groupby(keys)
    table = pd.DataFrame({CALLS: grouped["call"].nunique(), "kernels": grouped.size(), TIME_US: grouped["dur"].sum()})
    if table.empty:
        table = pd.DataFrame(columns=[CALLS, "kernels", TIME_US],
                             index=pd.MultiIndex.from_arrays([[], []], names=keys))
    raw_ops = defaultdict(set)
    for op, module, raw in zip(calls.ops.tolist(), calls.modules.tolist(), calls.raw_ops.tolist()):
        raw_ops[(op, module)].add(raw)
    table[OP_NAMES] = [sorted(raw_ops[key]) for key in table.index]
    by_name = rows.groupby([*keys, "name"])["dur"].sum().sort_values(ascending=False, kind="stable")
    top = by_name.groupby(level=keys, sort=False).head(TOP_OP_NAMES).index.tolist()
    names = defaultdict(list)
    for op, module, name in top:
        names[(op, module)].append(name)
    table[KERNEL_NAMES] = [names[key] for key in table.index]
    table[KERNELS_PER_CALL] = table["kernels"] / table[CALLS]
    table[TIME_PER_CALL_US] = table[TIME_US] / table[CALLS]
    return table[[OP_NAMES, *SIDE_COLUMNS]]
