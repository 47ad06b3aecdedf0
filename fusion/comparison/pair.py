"""The comparison pipeline: groups -> matching -> alignment -> detectors -> Comparison.

Kernels in significant groups are compared pair by pair (matched groups). All other kernels (eager
launches, small piecewise graphs) form one stream per trace, walked in corresponding windows
(align.stream_windows) so that eager traces get kernel-level evidence too; those windows are pairs of
kind "stream" (correlations -1).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from functools import cached_property, partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fusion import settings
from fusion.classify.names import KERNEL_TYPES
from fusion.classify.trace import load
from fusion.comparison.ops import OpComparison, compare_ops
from fusion.comparison.phases import phase_summary
from fusion.comparison.result import Comparison
from fusion.detect import (
    Evidence,
    Segment,
    Side,
    Thresholds,
    collect_evidence,
    comparability,
    fusion_mappings,
    fusion_opportunities,
    group_imbalance,
    type_stats,
)
from fusion.detect.cited_ops import name_ops
from fusion.detect.workload import workload_identity
from fusion.efficiency.pair import op_efficiency
from fusion.match.align import UNKNOWN_TYPE, stream_windows, unit_codes
from fusion.match.cut_pairs import CutPairs, cut_differently
from fusion.match.groups import Groups, View, correlation_groups, type_codes, unique_rows
from fusion.match.pairing import Matching, candidate_size, keep_pairs, match_across_threshold, similarity
from fusion.model.ops import LeftOut, launched_only, unlaunched_share
from fusion.model.phases import ALL, phase_view
from fusion.model.trace import Trace
from fusion.result import (
    COUNT,
    GROUPS_AFFECTED,
    KERNEL_TYPE,
    MISMATCH,
    NOT_SAME_WORKLOAD,
    TIME_US,
    Comparability,
    EvidenceRef,
    FusionMapping,
    OneSidedNote,
    Opportunity,
    side_column,
)

Progress = Callable[[str, float], None]


@dataclass
class PairIndex:
    """Pair ids: matched group pairs first (in execution order), then stream windows."""

    groups: tuple[Groups, Groups]
    group_pairs: np.ndarray
    windows: list[tuple[int, int, int, int]]
    stream_codes: tuple[np.ndarray, np.ndarray]
    """Alignment codes (align.unit_codes) of each side's stream of kernels outside groups."""

    def __len__(self) -> int:
        return len(self.group_pairs) + len(self.windows)

    def kernel_indices(self, pair_id: int) -> tuple[np.ndarray, np.ndarray]:
        if pair_id < len(self.group_pairs):
            g1, g2 = self.group_pairs[pair_id]
            return self.groups[0].rows(int(g1)), self.groups[1].rows(int(g2))
        s1, e1, s2, e2 = self.windows[pair_id - len(self.group_pairs)]
        return self.groups[0].residual_rows[s1:e1], self.groups[1].residual_rows[s2:e2]

    def correlations(self, pair_id: int) -> tuple[int, int]:
        c1, c2 = self.correlation_table[pair_id].tolist()
        return c1, c2

    @cached_property
    def correlation_table(self) -> np.ndarray:
        """(pairs, 2) correlation ids of each pair's groups; -1 for stream windows."""
        out = np.full((len(self), 2), -1, dtype=np.int64)
        for s in (0, 1):
            out[: len(self.group_pairs), s] = self.groups[s].correlations[self.group_pairs[:, s]]
        return out

    def alignment_codes(self, pair_ids: np.ndarray, sides: tuple[Side, Side], types: list[str]) -> list[CodePair]:
        """What the alignment of each pair compares: type codes with helpers folded into their operation; the group
        pairs' coded in one pass per side."""
        groups = pair_ids[pair_ids < len(self.group_pairs)]
        coded = [_group_codes(sides[s], self.groups[s], self.group_pairs[groups, s], types) for s in (0, 1)]
        found = dict(zip(groups.tolist(), zip(coded[0], coded[1])))
        out = []
        for pair_id in pair_ids.tolist():
            if pair_id in found:
                out.append(found[pair_id])
                continue
            s1, e1, s2, e2 = self.windows[pair_id - len(self.group_pairs)]
            out.append((self.stream_codes[0][s1:e1], self.stream_codes[1][s2:e2]))
        return out


CodePair = tuple[np.ndarray, np.ndarray]


def _unit_codes(side: Side, rows: np.ndarray, types: list[str], lengths: np.ndarray | None = None) -> np.ndarray:
    """align.unit_codes of the kernels at `rows` (with `lengths`, several sequences end to end)."""
    return unit_codes(side.codes[rows], side.helpers(rows), types.index(UNKNOWN_TYPE), lengths)


def _group_codes(side: Side, groups: Groups, ids: np.ndarray, types: list[str]) -> list[np.ndarray]:
    """_unit_codes of the kernels of each group `ids` of one side, all coded in one pass."""
    starts, lengths = groups.offsets[ids], np.diff(groups.offsets)[ids]
    ends = np.cumsum(lengths)
    positions = np.arange(int(ends[-1]) if len(ends) else 0) + np.repeat(starts - (ends - lengths), lengths)
    return np.split(_unit_codes(side, groups.kernel_rows[positions], types, lengths), ends[:-1])


def compare(
    trace1: Trace,
    trace2: Trace,
    *,
    min_group_size: int = 50,
    progress: Progress | None = None,
    keep_unlaunched: bool = False,
    phase: str = ALL,
    opportunities_on_mismatch: bool = False,
    **thresholds: Any,
) -> Comparison:
    """Compare two loaded traces; `thresholds` are detect.Thresholds fields (reference defaults).

    Kernels without a launch event (launch 'none') are left out, with a warning, unless `keep_unlaunched`;
    only the kernels of `phase` are compared (phases.PHASES; 'all': every kernel). The result's `phases`
    section compares each phase on its own as well. Traces whose counts do not look like the same workload
    (comparability 'mismatch') get no count-based opportunity unless `opportunities_on_mismatch`, and then each
    carries the reason as its warning; traces that run different workloads get no finding at all."""
    left_out = (LeftOut(), LeftOut())
    if not keep_unlaunched:
        left_out = (unlaunched_share(trace1.kernels), unlaunched_share(trace2.kernels))
    trace1, trace2 = compared_views(trace1, trace2, keep_unlaunched=keep_unlaunched, phase=phase)
    limits = Thresholds(**thresholds)
    params: dict[str, Any] = {"min_group_size": min_group_size, **asdict(limits)}
    params.update(keep_unlaunched=keep_unlaunched, phase=phase)
    if opportunities_on_mismatch:
        params["opportunities_on_mismatch"] = True
    whole: Future[_Matched] = Future()
    op_level = partial(compare_ops, trace1, trace2, limits)
    section = partial(phase_summary, (trace1, trace2), params, phase, partial(_compare_phase, whole=whole))
    compare_whole = partial(_compare_kernels, trace1, trace2, params, progress, limits, left_out, whole)
    if settings.analysis_threads() < 2 or len(trace1.kernels) + len(trace2.kernels) < SECOND_THREAD_MIN_KERNELS:
        result = compare_whole(op_level)
        result.phases = section()
        return result
    return _on_two_threads(compare_whole, op_level, section, whole)


def _on_two_threads(
    compare_whole: Callable[[Callable[[], OpComparison]], Comparison],
    op_level: Callable[[], OpComparison],
    section: Callable[[], dict[str, Any]],
    whole: Future[_Matched],
) -> Comparison:
    """The whole comparison on this thread; on a second (SECOND_THREAD), the op-level comparison it reads once its
    kernels are walked, then its phases' `section`, which waits for the whole comparison's matched groups (`whole`)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=SECOND_THREAD) as pool:
        ops, phases = pool.submit(op_level), pool.submit(section)
        try:
            result = compare_whole(ops.result)
        except BaseException as error:
            if not whole.done():
                whole.set_exception(error)  # the second thread stops waiting
            raise
        result.phases = phases.result()
    return result


SECOND_THREAD_MIN_KERNELS = 250_000
"""Kernels of both traces below which a comparison stays on one thread: the work of a smaller pair is mostly Python
that holds the GIL, so a second thread only takes turns with the first (the 190 shared pairs, 1,000 to 30,000
kernels each, took 26 s on two threads against 20 s on one); the many-kernel pair (2.1 M kernels) gains 15-25 %."""
SECOND_THREAD = "fusion-compare"
"""The second thread of a comparison (FUSION_ANALYSIS_THREADS 2 or more): the op-level comparison of the whole
traces, then the `phases` section, whose views it makes at once and compares as soon as the whole comparison's groups
are matched (they are the views' own). Much of the work on both threads is numpy and pandas code that releases the
GIL, so on two free cores the two overlap."""


COMPARE_OPTIONS = ("keep_unlaunched", "phase", "opportunities_on_mismatch")
"""compare() parameters that are no threshold (Comparison.params holds them beside the thresholds)."""


def compared_views(
    trace1: Trace, trace2: Trace, *, keep_unlaunched: bool = False, phase: str = ALL
) -> tuple[Trace, Trace]:
    """The traces as compare() compares them (its Comparison's trace1 and trace2, whose kernel rows its evidence
    cites): without kernels of launch 'none' unless `keep_unlaunched`, restricted to `phase`."""
    if not keep_unlaunched:
        trace1, trace2 = launched_only(trace1), launched_only(trace2)
    return phase_view(trace1, phase), phase_view(trace2, phase)


def _compare_phase(
    trace1: Trace,
    trace2: Trace,
    *,
    rows: tuple[np.ndarray, np.ndarray],
    whole: Future[_Matched],
    min_group_size: int,
    **params: Any,
) -> Findings:
    """One phase's views compared with the parameters of the whole comparison: its findings only (no tables,
    no nested phase split). `rows`: each view's kernels as rows of the whole comparison's traces, whose matched
    groups (`whole`, waited for) are the views' own when the views cut none of them."""
    limits = Thresholds(**{k: v for k, v in params.items() if k not in COMPARE_OPTIONS})
    walked = _walk(
        trace1, trace2, min_group_size, None, limits, whole.result().within(rows, trace1, trace2, min_group_size)
    )
    op_level = compare_ops(trace1, trace2, limits, with_table=False)
    return _findings(walked, op_level, params.get("opportunities_on_mismatch", False))


@dataclass
class _Matched:
    """A comparison's groups as matched across the size threshold (match_across_threshold), before cut pairs are
    taken out: the candidate groups (candidate_size kernels or more) of each side, the groups kept and their
    matching, the type list whose codes counted them and the minimum size of a significant group; and the kept
    groups' name sequence ids (_sequence_ids) once computed."""

    candidates: tuple[Groups, Groups] | None
    """None for the matching of views (within): a phase's view is not restricted again."""
    groups: tuple[Groups, Groups]
    matching: Matching
    types: list[str]
    min_group_size: int
    sequences: tuple[np.ndarray, np.ndarray] | None = None

    def within(
        self, rows: tuple[np.ndarray, np.ndarray], trace1: Trace, trace2: Trace, min_group_size: int
    ) -> _Matched | None:
        """The matching of the views `trace1` and `trace2`, which keep only the kernels at `rows` of each side, from
        these groups when the views cut none of the candidates (View.holds): the views' candidates are then these
        groups in the views, and where every one is in, the matching is this one, renumbered (Groups.within); else
        the candidates in the views are matched again. None when a view may cut a candidate or the views' types
        differ (the views are then grouped anew)."""
        candidates = self.candidates
        if candidates is None or _types(trace1, trace2) != self.types or min_group_size != self.min_group_size:
            return None
        views = [
            View.of(r, len(c.kernel_rows) + len(c.residual_rows), t.kernels["correlation"].to_numpy())
            for r, c, t in zip(rows, candidates, (trace1, trace2))
        ]
        held = [v.holds(c) for v, c in zip(views, candidates)]
        if held[0] is None or held[1] is None:
            return None
        if held[0].all() and held[1].all():
            groups = [g.within(v) for g, v in zip(self.groups, views)]
            if groups[0] is not None and groups[1] is not None:  # always: they are candidates, all in the views
                return replace(self, candidates=None, groups=(groups[0], groups[1]))
        kept = [c.within(v) for c, v in zip(candidates, views)]
        if kept[0] is None or kept[1] is None:  # never: no view cuts a candidate
            return None
        first, second, matching = match_across_threshold(kept[0], kept[1], min_group_size)
        return _Matched(None, (first, second), matching, self.types, min_group_size)


@dataclass
class _Walked:
    """What a comparison computes before its findings: both sides, the matched groups, the pairs and the
    evidence of walking their alignments."""

    sides: tuple[Side, Side]
    groups: tuple[Groups, Groups]
    matching: Matching
    index: PairIndex
    evidence: Evidence
    types: list[str]
    limits: Thresholds
    stats: pd.DataFrame
    """detect.type_stats: per type, counts and times on both sides."""
    cut: CutPairs
    """Matched group pairs that ran different stretches of work (cut_pairs)."""


@dataclass
class Findings:
    """A comparison's findings and what decides them: all that a per-phase comparison keeps."""

    mappings: list[FusionMapping]
    one_sided: list[OneSidedNote]
    op_notes: list[str]
    opportunities: list[Opportunity]
    comparability: Comparability
    op_level: OpComparison


def _compare_kernels(
    trace1: Trace,
    trace2: Trace,
    params: dict[str, Any],
    progress: Progress | None,
    limits: Thresholds,
    left_out: tuple[LeftOut, LeftOut],
    matched: Future[_Matched],
    compared_ops: Callable[[], OpComparison],
) -> Comparison:
    """The whole comparison with compare()'s `params`; its matched groups are set in `matched` as soon as they
    are known, and `compared_ops` gives the op-level comparison of the traces (with the op table)."""
    min_group_size = params["min_group_size"]
    walked = _walk(trace1, trace2, min_group_size, progress, limits, on_matched=matched.set_result)
    found = _findings(walked, compared_ops(), params.get("opportunities_on_mismatch", False), left_out)
    result = _assemble(walked, found, params)
    op_level = found.op_level
    if op_level.op_calls is not None:
        labels = (result.trace1.label, result.trace2.label)
        result.efficiency = op_efficiency(op_level.op_calls, op_level.aligned, result.mappings, labels)
    if progress:
        progress("detect", 1.0)
    return result


def _walk(
    trace1: Trace,
    trace2: Trace,
    min_group_size: int,
    progress: Progress | None,
    limits: Thresholds,
    matched: _Matched | None = None,
    on_matched: Callable[[_Matched], None] | None = None,
) -> _Walked:
    """Both sides, their groups matched (`matched` when the caller has them for these traces; `on_matched` is
    given them once known), the pairs and the evidence of walking their alignments."""
    report = progress or (lambda stage, fraction: None)
    types = _types(trace1, trace2)
    sides = (
        Side.of(1, trace1, type_codes(trace1.kernels, types)),
        Side.of(2, trace2, type_codes(trace2.kernels, types)),
    )
    report("groups", 0.0)
    if matched is None:
        candidates = tuple(
            correlation_groups(s.trace.kernels, s.codes, len(types), candidate_size(min_group_size)) for s in sides
        )
        report("match", 0.2)
        first, second, matching = match_across_threshold(candidates[0], candidates[1], min_group_size)
        matched = _Matched((candidates[0], candidates[1]), (first, second), matching, types, min_group_size)
    first, second = matched.groups
    known = matched.sequences
    if known is None:
        known = (_sequence_ids(first, sides[0]), _sequence_ids(second, sides[1]))
        matched = replace(matched, sequences=known)
    if on_matched is not None:
        on_matched(matched)
    matching = matched.matching
    sequences = [known[0], known[1]]
    first, second, matching, cut = _without_cut_pairs((first, second), matching, sides, types, limits, sequences)
    groups = (first, second)
    if cut.realigned:
        sequences = [_sequence_ids(g, s) for g, s in zip(groups, sides)]
    report("align", 0.4)
    stream = tuple(_unit_codes(s, g.residual_rows, types) for s, g in zip(sides, groups))
    windows = stream_windows(stream[0], stream[1], limits.stream_budget)
    index = PairIndex(groups, matching.pairs, windows, stream)
    evidence = collect_evidence(_segments(index, sides, types, sequences), sides, types, limits)
    report("detect", 0.7)
    return _Walked(sides, groups, matching, index, evidence, types, limits, type_stats(sides, types), cut)


def _without_cut_pairs(
    groups: tuple[Groups, Groups],
    matching: Matching,
    sides: tuple[Side, Side],
    types: list[str],
    limits: Thresholds,
    sequences: list[np.ndarray],
) -> tuple[Groups, Groups, Matching, CutPairs]:
    """The matching without the pairs whose groups are not the same stretch of work (cut_pairs), within the
    stream budget; each distinct pair of kernel-name sequences (`sequences`: _sequence_ids) is judged once."""
    pairs = matching.pairs
    if not len(pairs):
        return groups[0], groups[1], matching, CutPairs()
    first, inverse = _distinct_pairs([sequences[s][pairs[:, s]] for s in (0, 1)])
    coded = [_group_codes(sides[s], groups[s], pairs[first, s], types) for s in (0, 1)]
    cut = np.array([cut_differently(a, b, limits.max_fused_run) for a, b in zip(*coded)], dtype=bool)[inverse]
    if not cut.any():
        return groups[0], groups[1], matching, CutPairs()
    stream = [len(g.residual_rows) + int(np.diff(g.offsets)[pairs[cut, s]].sum()) for s, g in enumerate(groups)]
    if max(stream) > limits.stream_budget:
        return groups[0], groups[1], matching, CutPairs(int(cut.sum()), realigned=False)
    return (*keep_pairs(groups[0], groups[1], matching, ~cut), CutPairs(int(cut.sum()), realigned=True))


def _findings(
    walked: _Walked,
    op_level: OpComparison,
    opportunities_on_mismatch: bool = False,
    left_out: tuple[LeftOut, LeftOut] = (LeftOut(), LeftOut()),
) -> Findings:
    """Mappings (op-level first, from `op_level`: compare_ops of the walked traces), one-sided notes, opportunities
    and comparability.

    The workload identity check comes first: traces that run different workloads get no finding (the tables
    stay); traces whose counts look too different (mismatch) get no count-based opportunity unless asked.
    `left_out`: what the comparison dropped from each trace (a phase's own findings are judged without it)."""
    sides, groups, matching, types, limits = walked.sides, walked.groups, walked.matching, walked.types, walked.limits
    counts1 = groups[0].type_counts[matching.pairs[:, 0]]
    counts2 = groups[1].type_counts[matching.pairs[:, 1]]
    check = comparability(
        sides,
        types,
        (len(groups[0]), len(groups[1])),
        len(matching.pairs),
        _attention_per_pair(counts1, counts2, types),
        limits,
        workload_identity(sides, types, op_level.aligned_calls, op_level.calls, limits),
        left_out,
    )
    if check.level == NOT_SAME_WORKLOAD:
        return Findings([], [], [DIFFERENT_WORKLOADS_NOTE], [], check, op_level)
    mappings, notes = fusion_mappings(walked.evidence, sides, limits, same_workload=check.ok)
    mappings += group_imbalance(
        walked.evidence, counts1, counts2, partial(_group_ref, walked.index), types, mappings, sides, limits
    )
    name_ops(mappings, notes, (sides[0].trace, sides[1].trace), limits.max_names)
    mappings, op_notes = _with_op_findings(mappings, op_level)
    opportunities = fusion_opportunities(
        walked.stats,
        _group_counts(groups, matching, types),
        len(matching.pairs),
        limits,
        whole_trace=not check.checks["per_step"],
    )
    return Findings(
        mappings, notes, op_notes, _on_mismatch(opportunities, check, opportunities_on_mismatch), check, op_level
    )


DIFFERENT_WORKLOADS_NOTE = (
    "the traces run different workloads (see comparability): their op calls are not compared, and the op table"
    " lists two different workloads side by side"
)


def _on_mismatch(opportunities: list[Opportunity], check: Comparability, shown: bool) -> list[Opportunity]:
    """Count-based opportunities of traces whose counts do not look like the same workload: none, unless `shown`;
    then each carries why it is doubtful."""
    if check.level != MISMATCH:
        return opportunities
    if not shown:
        return []
    reason = "; ".join(check.checks.get("mismatch_reasons", [])) or "comparability mismatch"
    for opportunity in opportunities:
        opportunity.warning = f"the traces may not run the same workload: {reason}"
    return opportunities


def analyze_fusion_differences(
    trace1: Trace | str | Path | bytes, trace2: Trace | str | Path | bytes, min_group_size: int = 50, phase: str = ALL
) -> dict[str, Any]:
    """The reference analyzer's entry point: Traces or paths/bytes in, its result dict (plus ours) out."""
    first = trace1 if isinstance(trace1, Trace) else load(trace1)
    second = trace2 if isinstance(trace2, Trace) else load(trace2)
    return compare(first, second, min_group_size=min_group_size, phase=phase).to_dict()


def _types(trace1: Trace, trace2: Trace) -> list[str]:
    present = set(trace1.kernels["type"].cat.categories) | set(trace2.kernels["type"].cat.categories)
    return list(KERNEL_TYPES) + sorted(present - set(KERNEL_TYPES))


def _segments(
    index: PairIndex, sides: tuple[Side, Side], types: list[str], sequences: list[np.ndarray]
) -> list[Segment]:
    """Pairs grouped by their pair of kernel-name sequences, so each distinct alignment is computed once.

    Segments are in order of their first pair: group pairs (`sequences`: per side and group, an id of its name
    sequence, so a pair's key is two ints), then stream windows (keyed by their name bytes).
    """
    members: list[np.ndarray] = []
    n_groups = len(index.group_pairs)
    if n_groups:
        first, inverse = _distinct_pairs([sequences[s][index.group_pairs[:, s]] for s in (0, 1)])
        by_segment = np.argsort(inverse, kind="stable")
        bounds = np.r_[0, np.cumsum(np.bincount(inverse))]
        members += [by_segment[bounds[k] : bounds[k + 1]] for k in np.argsort(first, kind="stable").tolist()]
    by_key: dict[tuple[bytes, bytes], list[int]] = {}
    for pid in range(n_groups, len(index)):
        rows1, rows2 = index.kernel_indices(pid)
        by_key.setdefault((sides[0].names[rows1].tobytes(), sides[1].names[rows2].tobytes()), []).append(pid)
    members += [np.array(pids) for pids in by_key.values()]
    codes = index.alignment_codes(np.array([int(pids[0]) for pids in members], dtype=np.int64), sides, types)
    correlations = index.correlation_table
    return [
        _segment(index, pair_codes, pids, correlations, "group" if pids[0] < n_groups else "stream")
        for pair_codes, pids in zip(codes, members)
    ]


def _distinct_pairs(ids: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """For pairs given as (side 1 id, side 2 id) columns: the first pair of each distinct (id, id), in order of
    the distinct keys, and each pair's index into those."""
    _, first, inverse = np.unique(ids[0] * (int(ids[1].max()) + 1) + ids[1], return_index=True, return_inverse=True)
    return first, inverse.ravel()


def _sequence_ids(groups: Groups, side: Side) -> np.ndarray:
    """Per group: an id shared by exactly the groups with the same sequence of kernel names."""
    names = side.names[groups.kernel_rows]
    data, width = names.tobytes(), names.itemsize
    ids: dict[bytes, int] = {}
    bounds = (groups.offsets * width).tolist()
    return np.array([ids.setdefault(data[a:b], len(ids)) for a, b in zip(bounds[:-1], bounds[1:])], dtype=np.int64)


def _segment(index: PairIndex, codes: CodePair, pids: np.ndarray, correlations: np.ndarray, kind: str) -> Segment:
    codes1, codes2 = codes
    return Segment(
        codes1=codes1,
        codes2=codes2,
        rows1=_pair_rows(index, pids, 0),
        rows2=_pair_rows(index, pids, 1),
        pair_ids=pids,
        correlations1=correlations[pids, 0],
        correlations2=correlations[pids, 1],
        kind=kind,
    )


def _pair_rows(index: PairIndex, pids: np.ndarray, side: int) -> np.ndarray:
    """(pairs, length) kernel rows of one side of pairs that share a name sequence."""
    length = len(index.kernel_indices(int(pids[0]))[side])
    if pids[0] >= len(index.group_pairs):
        return np.vstack([index.kernel_indices(int(p))[side] for p in pids]).reshape(len(pids), length)
    groups = index.groups[side]
    starts = groups.offsets[index.group_pairs[pids, side]]
    return groups.kernel_rows[starts[:, None] + np.arange(length)]


def _assemble(walked: _Walked, found: Findings, params: dict[str, Any]) -> Comparison:
    min_group_size = params["min_group_size"]
    sides, groups, matching, index, types = walked.sides, walked.groups, walked.matching, walked.index, walked.types
    trace1, trace2 = sides[0].trace, sides[1].trace
    stats = walked.stats
    present = list(stats.index)
    warnings = [f"{t.label}: {w}" for t in (trace1, trace2) for w in t.warnings] + found.comparability.warnings
    warnings += _budget_warnings(groups, walked.limits) + walked.cut.warnings(
        walked.limits.max_fused_run, walked.limits.stream_budget
    )
    return Comparison(
        trace1=trace1,
        trace2=trace2,
        params=dict(params),
        type_stats=stats,
        groups1=_with_kind(groups[0].table, matching.kinds1, min_group_size),
        groups2=_with_kind(groups[1].table, matching.kinds2, min_group_size),
        group_types1=_type_frame(groups[0], types, present),
        group_types2=_type_frame(groups[1], types, present),
        pairs=_pairs_table(index, sides, types),
        unmatched1=[int(c) for c in groups[0].correlations[matching.unmatched1]],
        unmatched2=[int(c) for c in groups[1].correlations[matching.unmatched2]],
        opportunities=found.opportunities,
        mappings=found.mappings,
        one_sided=found.one_sided,
        comparability=found.comparability,
        warnings=warnings,
        metadata=_metadata(sides, groups, matching, index, found.comparability, min_group_size, walked.cut)
        | _op_metadata(found.op_level),
        op_table=found.op_level.op_table,
        op_notes=found.op_notes,
        pair_kernels=index,
    )


def _with_op_findings(mappings: list[FusionMapping], op_level: OpComparison) -> tuple[list[FusionMapping], list[str]]:
    """Op-level findings first; a group or window mapping of the same kernels is reported once, by its op."""
    kept = [m for m in mappings if not op_level.supersedes(m)]
    notes = [
        f"{m.detector} ({' + '.join(m.unfused_sequence)} -> {m.fused_kernel_type}, from {m.evidence_source})"
        " cites only kernels of op-level findings: reported once, as the op-level finding"
        for m in mappings
        if op_level.supersedes(m)
    ]
    return op_level.findings + kept, op_level.notes + notes


def _op_metadata(op_level: OpComparison) -> dict[str, int]:
    return {
        "trace1_op_calls": op_level.calls[0],
        "trace2_op_calls": op_level.calls[1],
        "aligned_op_calls": op_level.aligned_calls,
    }


def _group_ref(index: PairIndex, pair_id: int) -> EvidenceRef:
    rows1, rows2 = index.kernel_indices(pair_id)
    c1, c2 = index.correlations(pair_id)
    return EvidenceRef(
        pair_id, c1, c2, (int(rows1.min()), int(rows1.max()) + 1), (int(rows2.min()), int(rows2.max()) + 1)
    )


def _group_counts(groups: tuple[Groups, Groups], matching: Matching, types: list[str]) -> pd.DataFrame:
    """Per type, summed over matched group pairs: counts, times, pairs whose counts differ."""
    g1, g2 = matching.pairs[:, 0], matching.pairs[:, 1]
    counts1, counts2 = groups[0].type_counts[g1], groups[1].type_counts[g2]
    table = pd.DataFrame(
        {
            side_column(COUNT, 1): counts1.sum(0),
            side_column(COUNT, 2): counts2.sum(0),
            side_column(TIME_US, 1): groups[0].type_time_us[g1].sum(0),
            side_column(TIME_US, 2): groups[1].type_time_us[g2].sum(0),
            GROUPS_AFFECTED: (counts1 != counts2).sum(0),
        },
        index=pd.Index(types, name=KERNEL_TYPE),
    )
    return table[(table[side_column(COUNT, 1)] > 0) | (table[side_column(COUNT, 2)] > 0)]


def _pairs_table(index: PairIndex, sides: tuple[Side, Side], types: list[str]) -> pd.DataFrame:
    """One row per pair: sizes, times, composition similarity and the types whose counts differ most."""
    counts = [np.zeros((len(index), len(types)), dtype=np.int64) for _ in sides]
    times = [np.zeros(len(index)) for _ in sides]
    n_groups = len(index.group_pairs)
    for s, (side, groups) in enumerate(zip(sides, index.groups)):
        matched = index.group_pairs[:, s] if n_groups else np.zeros(0, dtype=np.int64)
        counts[s][:n_groups] = groups.type_counts[matched]
        times[s][:n_groups] = groups.type_time_us[matched].sum(axis=1)
        for pid in range(n_groups, len(index)):
            rows = index.kernel_indices(pid)[s]
            counts[s][pid] = np.bincount(side.codes[rows], minlength=len(types))
            times[s][pid] = side.dur[rows].sum()
    correlations = index.correlation_table
    diff = counts[0] - counts[1]
    return pd.DataFrame(
        {
            "pair_id": np.arange(len(index)),
            "kind": ["group"] * n_groups + ["stream"] * (len(index) - n_groups),
            "correlation1": correlations[:, 0],
            "correlation2": correlations[:, 1],
            "size1": counts[0].sum(axis=1),
            "size2": counts[1].sum(axis=1),
            "time1_us": times[0],
            "time2_us": times[1],
            "similarity": similarity(counts[0], counts[1]),
            "kernels_differing": np.abs(diff).sum(axis=1),
            "top_differences": _top_differences(diff, types),
        }
    )


def _top_differences(diff: np.ndarray, types: list[str], limit: int = 3) -> list[str]:
    """Per pair, 'SwiGLU -32, Sort +48': trace1 minus trace2 for the types that differ most (each distinct
    row of differences is spelled once)."""
    if len(diff) == 0:
        return []
    distinct, inverse, _ = unique_rows(diff)
    order = np.argsort(-np.abs(distinct), axis=1, kind="stable")[:, :limit]
    texts = [", ".join(f"{types[t]} {int(row[t]):+d}" for t in top if row[t]) for row, top in zip(distinct, order)]
    return [texts[i] for i in inverse.tolist()]


def _attention_per_pair(counts1: np.ndarray, counts2: np.ndarray, types: list[str]) -> tuple[float, float] | None:
    if len(counts1) == 0:
        return None
    t = types.index("Attention")
    return float(np.median(counts1[:, t])), float(np.median(counts2[:, t]))


def _with_kind(table: pd.DataFrame, kinds: np.ndarray, min_group_size: int) -> pd.DataFrame:
    """Compared groups; `significant` is False for a smaller group paired with a significant one."""
    return table.assign(kind=kinds, significant=table["size"] >= min_group_size)


def _type_frame(groups: Groups, types: list[str], present: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame(groups.type_counts, index=pd.Index(groups.correlations, name="correlation"), columns=types)
    return frame[present]


def _budget_warnings(groups: tuple[Groups, Groups], limits: Thresholds) -> list[str]:
    longest = max(len(g.residual_rows) for g in groups)
    if longest <= limits.stream_budget:
        return []
    return [
        f"{longest} kernels lie outside significant groups; only the first {limits.stream_budget} per trace"
        " were aligned as a stream (raise stream_budget or lower min_group_size)"
    ]


def _metadata(
    sides: tuple[Side, Side],
    groups: tuple[Groups, Groups],
    matching: Matching,
    index: PairIndex,
    check: Any,
    min_group_size: int,
    cut: CutPairs,
) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for side, group in zip(sides, groups):
        s, trace = side.number, side.trace
        meta.update(
            {
                side_column("gpu", s): trace.gpu,
                side_column("total_kernels", s): trace.kernel_count,
                side_column("correlation_groups", s): int((group.table["size"] >= min_group_size).sum()),
                side_column("platform", s): trace.platform,
                side_column("label", s): trace.label,
                side_column("all_correlation_ids", s): group.total_groups,
                side_column("group_kinds", s): int(len(set((matching.kinds1 if s == 1 else matching.kinds2).tolist()))),
                side_column("kernels_outside_groups", s): int(len(group.residual_rows)),
            }
        )
        if trace.capture is not None:  # graph replays tied to a capture trace (fusion.model.capture)
            meta[side_column("capture", s)] = trace.capture
    meta["matched_groups"] = int(len(matching.pairs))
    meta["cut_group_pairs"] = cut.count
    meta["realigned_group_pairs"] = cut.count if cut.realigned else 0
    meta["stream_windows"] = len(index.windows)
    meta["comparable"] = check.ok
    meta["comparability_level"] = check.level
    return meta
