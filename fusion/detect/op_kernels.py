"""Op-level findings: an op whose aligned calls launch a different number of kernels.

A difference that is repeated (op_min_calls) and consistent (op_min_consistency of the op's aligned calls), or that
every aligned call of its op shows however few, is a finding named by the op, one per kernel-name pattern on each
side; its kind says what it is: a split (a split-K reduce), a fusion (the fewer kernels perform the others' work),
extra work (the extra kernels do no compute) or a decomposition (the same op by another algorithm). Rarer or
inconsistent differences are notes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fusion.classify.names import name_family
from fusion.detect.cited_ops import name_ops
from fusion.detect.evidence import NON_FUSABLE_TYPES
from fusion.detect.mappings import PLATFORM_NAMES
from fusion.detect.thresholds import Thresholds
from fusion.match.align import GAP, align_codes
from fusion.match.op_calls import EAGER_LAUNCH, OpCalls
from fusion.model.trace import Trace
from fusion.result import DECOMPOSITION, EXTRA_WORK, FUSION, NO_PAIR, SPLIT, TIME_DECIMALS, EvidenceRef, FusionMapping
from fusion.vocabulary import SPLIT_ROLES

OP_KERNELS_DETECTOR = "op_kernels"
OP_CALLS_SOURCE = "op_calls"
OP_EVIDENCE_PAIR = NO_PAIR
"""EvidenceRef.pair_id of op-call evidence: it is no Comparison pair; the windows cite the two calls' kernels
and correlation1/2 are the correlation ids of each call's first kernel."""
NAME_CHARS = 100
"""Raw kernel names are cut to this many characters in evidence text (the mapping keeps them whole)."""


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


def op_findings(
    calls: tuple[OpCalls, OpCalls], aligned: np.ndarray, limits: Thresholds
) -> tuple[list[FusionMapping], list[str], list[tuple[int, int]]]:
    """Kernel-count differences of aligned calls that are repeated and consistent, or shown by every aligned call of
    their op however few, become findings (one per pair of kernel-name patterns); the others notes.

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
    families = (_families(calls[0].trace), _families(calls[1].trace))
    for diff in groups.values():
        calls_of_op = per_op[diff.op]
        launch = (
            f"{diff.op}: {len(diff.pairs)} of {calls_of_op} aligned calls launch"
            f" {len(diff.types1)} vs {len(diff.types2)} kernels"
        )
        if not _reported(len(diff.pairs), calls_of_op, limits):
            notes.append(
                f"{launch}; below {limits.op_min_calls} calls or {limits.op_min_consistency:.0%} of the op's"
                " calls, and not in every call of the op: not reported"
            )
            continue
        unfused = 3 - diff.fused_side
        extra = _extra_positions(diff.types(diff.fused_side), diff.types(unfused))
        non_compute = np.isin(np.array(diff.types(unfused), dtype=object)[extra], list(NON_FUSABLE_TYPES))
        idle, compute = extra[non_compute], extra[~non_compute]
        if len(idle) and len(compute):  # a memset or copy more does no compute: never part of a fusion (as the walk)
            idle_types = [diff.types(unfused)[p] for p in idle]
            kernels, do = ("kernel", "does") if len(idle) == 1 else ("kernels", "do")
            notes.append(
                f"{launch}; the extra {kernels} per call on {calls[unfused - 1].trace.label}"
                f" ({' + '.join(idle_types)}, {_extra_time_us(diff, calls, idle) / 1000:.3f} ms in all)"
                f" {do} no compute: left out of the finding"
            )
        for part in _by_name_pattern(diff, calls, families, extra):
            extra_us = _extra_time_us(part, calls, compute if len(compute) else idle)
            findings.append(_finding(part, len(part.pairs) / calls_of_op, calls, limits, extra_us, idle, compute))
        shown += diff.pairs
    name_ops(findings, [], (calls[0].trace, calls[1].trace), limits.max_names)
    return sorted(findings, key=lambda m: -m.time_saved_us), notes, shown


def _reported(differing: int, calls_of_op: int, limits: Thresholds) -> bool:
    """A difference is a finding when it is repeated and consistent, or when every aligned call of its op shows it
    (an op called once, with 6 vs 5 kernels in that call)."""
    share = differing / calls_of_op
    return differing == calls_of_op or (differing >= limits.op_min_calls and share >= limits.op_min_consistency)


def _families(trace: Trace) -> dict[str, str]:
    """Kernel name -> its name family (classify.name_family)."""
    table = trace.names
    if "rule" not in table.columns:
        return {}
    return {
        str(name): name_family(str(name), str(rule), tuple(fused))
        for name, rule, fused in zip(table.index, table["rule"], table["fused_components"])
    }


def _by_name_pattern(
    diff: _Difference,
    calls: tuple[OpCalls, OpCalls],
    families: tuple[dict[str, str], dict[str, str]],
    extra: np.ndarray,
) -> list[_Difference]:
    """The difference's call pairs split by kernel-name pattern, most pairs first: the name families of the
    fewer-kernel call's kernels and of the other call's extra kernels (_extra_kernels). A GEMM + split-K reduce
    and a GEMV + its two-pass reduce are two findings; split-K reduces after GEMMs of two tile families are one."""
    fused, unfused = diff.fused_side - 1, 2 - diff.fused_side
    roles = _name_table(calls[unfused].trace)
    parts: dict[tuple, _Difference] = {}
    for pair in diff.pairs:
        fused_names = calls[fused].names[calls[fused].kernels(pair[fused])]
        extra_names, _ = _extra_kernels(diff, calls[unfused], pair[unfused], extra, roles)
        key = (
            tuple(families[fused].get(str(n), str(n)) for n in fused_names),
            tuple(families[unfused].get(n, n) for n in extra_names),
        )
        parts.setdefault(key, _Difference(diff.op, diff.types1, diff.types2)).pairs.append(pair)
    return sorted(parts.values(), key=lambda part: -len(part.pairs))


def _extra_kernels(
    diff: _Difference, calls: OpCalls, call: int, extra: np.ndarray, table: dict[str, tuple[str, tuple[str, ...], bool]]
) -> tuple[list[str], list[str]]:
    """The names of the kernels that stand for one call's extra kernels (positions `extra` of the type alignment),
    and the types of those that are no split helper. Where the call has a split helper (a split-K reduce) of an
    extra kernel's type, the helper stands for it: which of a GEMM and its reduce the alignment left over does not
    matter."""
    names = [str(n) for n in calls.names[calls.kernels(call)]]
    types = diff.types(calls.side)
    helpers = [n for n, t in zip(names, types) if table.get(n, ("", (), False))[0] in SPLIT_ROLES]
    helper_types = [t for n, t in zip(names, types) if n in helpers]
    standing, rest = [], []
    for position in extra.tolist():
        kernel_type = types[position]
        if kernel_type in helper_types:
            at = helper_types.index(kernel_type)
            standing.append(helpers.pop(at))
            helper_types.pop(at)
        else:
            standing.append(names[position])
            rest.append(kernel_type)
    return standing, rest


def _extra_time_us(diff: _Difference, calls: tuple[OpCalls, OpCalls], extra: np.ndarray) -> float:
    """Kernel time of the unfused side's kernels at positions `extra` of each call, over all the difference's calls."""
    unfused = 3 - diff.fused_side
    rows = np.array([calls[unfused - 1].kernels(p[unfused - 1]) for p in diff.pairs])
    return round(float(calls[unfused - 1].dur[rows[:, extra]].sum()), TIME_DECIMALS)


def _finding(
    diff: _Difference,
    share: float,
    calls: tuple[OpCalls, OpCalls],
    limits: Thresholds,
    extra_us: float,
    idle: np.ndarray,
    compute: np.ndarray,
) -> FusionMapping:
    """The finding of a difference: its unfused call's extra kernels are at positions `idle` (non-compute) and
    `compute`. With compute extras the idle ones are left out of what is fused; without, it is extra work."""
    fused, unfused = diff.fused_side, 3 - diff.fused_side
    left_out = set(idle.tolist()) if len(compute) else set()
    replaced = [t for k, t in enumerate(diff.types(unfused)) if k not in left_out]
    cited = _cited_pairs(diff, calls, limits.max_evidence_refs)
    kinds = {fused: set(diff.types(fused)), unfused: set(replaced)}
    names = {s: _cited_names(diff, calls[s - 1], [p[s - 1] for p in cited], limits.max_names, kinds[s]) for s in (1, 2)}
    components = _fused_components(calls[fused - 1].trace, names[fused])
    kind = _kind(diff, calls, cited[0], compute)
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
        evidence=_evidence_text(op, diff, calls, cited, kind, compute if len(compute) else idle),
        evidence_refs=[_ref(calls, pair) for pair in cited],
        pairs_with_pattern=len(diff.pairs),
        time_saved_us=extra_us,
        fused_kernel_names=names[fused],
        unfused_kernel_names=names[unfused],
        fused_components=components,
        op=op,
        evidence_source=OP_CALLS_SOURCE,
        kind=kind,
    )


def _kind(diff: _Difference, calls: tuple[OpCalls, OpCalls], pair: tuple[int, int], compute: np.ndarray) -> str:
    """extra_work without compute extras; split when split helpers (a split-K reduce) stand for every compute extra
    (_extra_kernels); fusion when the fewer-kernel call's kernels perform the rest (fused components, or their own
    type in a kernel whose name does not say it computes one operation only); else decomposition: the op by
    another algorithm. A compute kernel of the fewer-kernel call with no counterpart on the other side (an
    Elementwise there, a layout conversion here) makes it a decomposition whatever the extras are."""
    fused, unfused = diff.fused_side, 3 - diff.fused_side
    own = _unmatched(diff.types(fused), diff.types(unfused))[0]
    if not np.isin(np.array(diff.types(fused), dtype=object)[own], list(NON_FUSABLE_TYPES)).all():
        return DECOMPOSITION
    if not len(compute):
        return EXTRA_WORK
    _, rest = _extra_kernels(
        diff, calls[unfused - 1], pair[unfused - 1], compute, _name_table(calls[unfused - 1].trace)
    )
    if not rest:
        return SPLIT
    fused_table = _name_table(calls[fused - 1].trace)
    fused_names = calls[fused - 1].names[calls[fused - 1].kernels(pair[fused - 1])]
    performs: set[str] = set()
    for name, kernel_type in zip(fused_names, diff.types(fused)):
        _, fused_components, single_op = fused_table.get(str(name), ("", (), False))
        performs |= set(fused_components) | (set() if single_op else {kernel_type})
    return FUSION if set(rest) <= performs else DECOMPOSITION


def _name_table(trace: Trace) -> dict[str, tuple[str, tuple[str, ...], bool]]:
    """Name -> (helper role, fused components, single_op) from the trace's names table (empty without one)."""
    table = trace.names
    if not {"helper", "fused_components", "single_op"} <= set(table.columns):
        return {}
    return {
        str(n): (str(role), tuple(fused), bool(single))
        for n, role, fused, single in zip(table.index, table["helper"], table["fused_components"], table["single_op"])
    }


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
    return _unmatched(fused_types, unfused_types)[1]


def _unmatched(fused_types: tuple[str, ...], unfused_types: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Positions in each call's kernels with no counterpart in the other call (type alignment): (fused, unfused)."""
    vocabulary = {t: i for i, t in enumerate(sorted(set(fused_types) | set(unfused_types)))}
    path = align_codes(np.array([vocabulary[t] for t in fused_types]), np.array([vocabulary[t] for t in unfused_types]))
    return path[path[:, 1] == GAP, 0], path[path[:, 0] == GAP, 1]


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
    """Name -> split role ('split_k_reduce', ...) of the cited kernels that are helpers of their operation."""
    return {n: str(role) for n, role in _name_facts(trace, names, "helper").items() if role in SPLIT_ROLES}


def _ref(calls: tuple[OpCalls, OpCalls], pair: tuple[int, int]) -> EvidenceRef:
    rows = [c.kernels(p) for c, p in zip(calls, pair)]
    correlation = [int(c.correlation[r[0]]) for c, r in zip(calls, rows)]
    return EvidenceRef(
        OP_EVIDENCE_PAIR,
        correlation[0],
        correlation[1],
        (int(rows[0].min()), int(rows[0].max()) + 1),
        (int(rows[1].min()), int(rows[1].max()) + 1),
    )


def _evidence_text(
    op: str,
    diff: _Difference,
    calls: tuple[OpCalls, OpCalls],
    cited: list[tuple[int, int]],
    kind: str,
    extra: np.ndarray,
) -> str:
    """Both sides' kernels of the first cited call pair, the calls and time per call, and what the difference is
    (`extra`: positions of the unfused call's kernels without a counterpart)."""
    fused, unfused = diff.fused_side, 3 - diff.fused_side
    sides = []
    for s in (1, 2):
        call = calls[s - 1]
        names = call.names[call.kernels(cited[0][s - 1])]
        count = len(diff.types(s))
        listed = ", ".join(f"`{_cut(str(n))}`" for n in names)
        sides.append(f"{call.trace.label} {count} kernel{'s' if count != 1 else ''} ({listed})")
    per_call = [sum(c.dur[c.kernels(p[c.side - 1])].sum() for p in diff.pairs) / len(diff.pairs) for c in calls]
    head = (
        f"{op}: {sides[0]}, {sides[1]}, {len(diff.pairs)} call{'s' if len(diff.pairs) != 1 else ''},"
        f" {per_call[0]:.1f} vs {per_call[1]:.1f} us of kernel time per call"
    )
    fused_label, unfused_label = calls[fused - 1].trace.label, calls[unfused - 1].trace.label
    counts = f"{len(diff.types(unfused))} vs {len(diff.types(fused))} kernels"
    unfused_call = calls[unfused - 1]
    extra_names = unfused_call.names[unfused_call.kernels(cited[0][unfused - 1])][extra]
    listed = ", ".join(f"`{_cut(str(n))}`" for n in extra_names)
    what = " + ".join(diff.types(unfused)[p] for p in extra.tolist())
    if kind == SPLIT:
        call_names = unfused_call.names[unfused_call.kernels(cited[0][unfused - 1])]
        roles = _helpers(unfused_call.trace, [str(n) for n in call_names])
        shown = ", ".join(f"`{_cut(n)}` ({role})" for n, role in roles.items())
        return f"{head}; {unfused_label} splits the op ({counts}): helper kernel {shown}"
    if kind == FUSION:
        fewer = diff.types(fused)
        into = f"one {fewer[0]} kernel" if len(fewer) == 1 else f"{len(fewer)} kernels"
        return f"{head}; {fused_label} fuses {' + '.join(diff.types(unfused))} into {into}"
    if kind == EXTRA_WORK:
        return f"{head}; {unfused_label} runs {what} more per call ({listed}), which does no compute: extra work"
    return (
        f"{head}; two decompositions of the same op ({counts}): {unfused_label} runs"
        f" {' + '.join(diff.types(unfused))}, {fused_label} {' + '.join(diff.types(fused))}; {what} ({listed})"
        f" without a counterpart in {fused_label}'s call"
    )


def _cut(name: str) -> str:
    return name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 1] + "…"


def unaligned_notes(calls: tuple[OpCalls, OpCalls], aligned: np.ndarray) -> list[str]:
    notes = []
    for call in calls:
        left = len(call) - len(aligned)
        if left:
            notes.append(f"{call.trace.label}: {left} of {len(call)} op calls have no counterpart with the same op")
    return notes


def outside_ops_note(calls: OpCalls) -> str:
    """How many eagerly launched kernels no op call encloses ('' when none): they are not compared by op."""
    kernels = calls.trace.kernels
    outside = (kernels["launch"] == EAGER_LAUNCH).to_numpy() & (kernels["op_call"].to_numpy() < 0)
    if not outside.any():
        return ""
    time_ms = float(kernels["dur"].to_numpy()[outside].sum()) / 1000
    return (
        f"{calls.trace.label}: eagerly launched kernels with no enclosing op: {int(outside.sum())}"
        f" ({time_ms:.3f} ms); not part of the op-level comparison"
    )
