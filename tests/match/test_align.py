import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from kernels import make_trace

from fusion.match import dp, dp_rows
from fusion.match.align import (
    _SCORES,
    CODE_DTYPE,
    FOLDED,
    GAP,
    GAP_SCORE,
    MATCH,
    MATCH_SCORE,
    MISMATCH_SCORE,
    ONLY1,
    ONLY2,
    SUBSTITUTE,
    UNKNOWN,
    UNKNOWN_MISMATCH_SCORE,
    align_codes,
    alignment_table,
    clear_cache,
    kernel_helpers,
    ops,
    stream_windows,
    unit_codes,
)

ROOT = Path(__file__).resolve().parents[2]


def test_one_sided_run_beside_its_match():
    a, b = np.array([0, 1, 2, 2, 2, 2, 3]), np.array([0, 1, 2, 3])
    path = align_codes(a, b)
    assert ops(path, a, b).tolist() == [MATCH, MATCH, ONLY1, ONLY1, ONLY1, MATCH, MATCH]


def test_different_known_types_never_stand_for_each_other():
    a, b = np.array([5, 6, 8]), np.array([5, 9, 10, 8])
    path = align_codes(a, b)
    assert sorted(ops(path, a, b).tolist()) == sorted([MATCH, ONLY1, ONLY2, ONLY2, MATCH])


def test_a_kernel_of_unknown_type_may_stand_for_any_type():
    a, b = (
        unit_codes(np.array([5, 6, 8]), np.zeros(3, bool), 9),
        unit_codes(np.array([5, 9, 10, 8]), np.zeros(4, bool), 9),
    )
    assert b[1] == 9 | UNKNOWN
    path = align_codes(a, b)
    assert sorted(ops(path, a, b).tolist()) == sorted([MATCH, SUBSTITUTE, ONLY2, MATCH])
    assert path[0].tolist() == [0, 0] and path[-1].tolist() == [2, 3]


def test_empty_sides():
    assert ops(align_codes(np.array([1, 2]), np.array([], dtype=int)), [1, 2], []).tolist() == [ONLY1, ONLY1]
    assert len(align_codes(np.array([], dtype=int), np.array([], dtype=int))) == 0


def test_large_alignment_is_computed_once():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 20, 1500)
    b = np.delete(a, rng.choice(1500, 100, replace=False))
    path = align_codes(a, b)
    again = align_codes(a.copy(), b.copy())
    assert np.shares_memory(again, path) and np.array_equal(again, path)
    assert (ops(path, a, b) == MATCH).sum() == 1400


def test_swapped_sequences_give_the_mirrored_path():
    """Ties between equally good alignments must not depend on which trace is first."""
    a = np.array([1, 2, 2, 3, 4, 4, 5, 6], dtype=np.int32)
    b = np.array([1, 2, 3, 3, 4, 5, 5, 6, 6], dtype=np.int32)
    for free_end, free_start in ((False, False), (True, False), (True, True)):
        forward = align_codes(a, b, free_end, free_start)
        backward = align_codes(b, a, free_end, free_start)
        assert np.array_equal(backward, forward[:, ::-1])


def test_compiled_dp_marks_gaps_as_align_does():
    assert dp.GAP == GAP


def test_stream_windows_cover_streams_advancing_at_different_rates():
    step1, step2 = np.arange(300) % 17, np.delete(np.arange(300) % 17, np.arange(0, 300, 15))
    windows = stream_windows(np.tile(step1, 8), np.tile(step2, 6), budget=100000)
    assert windows[0][0] == 0 and windows[0][2] == 0
    assert windows[-1][1] == 2400 and windows[-1][3] == 6 * len(step2)
    for (_, e1, _, e2), nxt in zip(windows, windows[1:]):
        assert e1 == nxt[0] and e2 == nxt[2]


def test_alignment_table_uses_global_rows():
    t1 = make_trace([("x", "GEMM", 1.0, 1), ("add", "Elementwise", 1.0, 1), ("n", "RMSNorm", 1.0, 1)])
    t2 = make_trace([("y", "GEMM", 1.0, 5), ("fused_add_norm", "RMSNorm", 1.0, 5)])
    helpers = [kernel_helpers(t.kernels, t.names) for t in (t1, t2)]
    table = alignment_table(t1.kernels, t2.kernels, np.array([0, 1, 2]), np.array([0, 1]), *helpers)
    assert table["op"].tolist() == ["match", "only1", "match"]
    assert table["index2"].tolist() == [0, -1, 1]
    assert pd.isna(table["name2"].iloc[1]) and table["rel_ts1"].iloc[0] == 0.0


def test_helpers_fold_into_the_kernel_of_their_operation_next_to_them():
    codes = np.array([0, 0, 0, 1, 0, 2, 2, 3, 3, 3])
    helper = np.array([False, True, True, False, True, True, False, True, True, True])
    assert unit_codes(codes, helper).tolist() == [0, FOLDED, FOLDED, 1, 0, 2 | FOLDED, 2, 3, 3 | FOLDED, 3 | FOLDED]


def _unit_codes_by_run(codes: list[int], helper: list[bool], unknown: int, lengths: list[int]) -> list[int]:
    """unit_codes read kernel by kernel: each sequence split into runs of one code; a helper is folded when its
    run has a kernel that is no helper or when it is not the run's first kernel."""
    out, start = [], 0
    for length in lengths:
        sequence = list(range(start, start + length))
        start += length
        runs: list[list[int]] = []
        for i in sequence:
            if runs and codes[runs[-1][-1]] == codes[i]:
                runs[-1].append(i)
            else:
                runs.append([i])
        for run in runs:
            has_main = any(not helper[i] for i in run)
            for k, i in enumerate(run):
                code = codes[i] | (UNKNOWN if codes[i] == unknown else 0)
                out.append(code | (FOLDED if helper[i] and (has_main or k > 0) else 0))
    return out


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=40), st.data())
def test_unit_codes_fold_helpers_run_by_run(kernels, data):
    """Helpers are folded per run of one code, every sequence of `lengths` on its own, unknown-type kernels are
    flagged: as read kernel by kernel."""
    codes, helper = [c for c, _ in kernels], [h for _, h in kernels]
    cuts = sorted(data.draw(st.lists(st.integers(0, len(codes)), max_size=4)))
    lengths = np.diff([0, *cuts, len(codes)])
    expected = _unit_codes_by_run(codes, helper, 3, lengths.tolist())
    got = unit_codes(np.array(codes, dtype=np.int64), np.array(helper, dtype=bool), 3, lengths)
    assert got.dtype == CODE_DTYPE and got.tolist() == expected
    whole = unit_codes(np.array(codes, dtype=np.int64), np.array(helper, dtype=bool), 3)
    assert whole.tolist() == _unit_codes_by_run(codes, helper, 3, [len(codes)])


def test_free_end_tie_prefers_the_full_alignment():
    """Every call one kernel longer on side 2: stopping early scores the same and must not win."""
    a = np.tile([0, 2], 50)
    b = np.tile([0, 0 | FOLDED, 2], 50)
    path = align_codes(a, b, free_end=True)
    assert path[:, 0].max() == 99 and path[:, 1].max() == 149
    assert stream_windows(a, b, budget=1000) == [(0, 100, 0, 150)]


def test_alignment_table_keeps_a_split_k_reduce_one_sided():
    t1 = make_trace([("cijk", "GEMM", 1.0, 1), ("add", "Elementwise", 1.0, 1)])
    t2 = make_trace(
        [("cutlass", "GEMM", 1.0, 5), ("splitKreduce", "GEMM", 1.0, 5), ("add", "Elementwise", 1.0, 5)],
        helpers={"splitKreduce": "split_k_reduce"},
    )
    helpers = [kernel_helpers(t.kernels, t.names) for t in (t1, t2)]
    table = alignment_table(t1.kernels, t2.kernels, np.array([0, 1]), np.array([0, 1, 2]), *helpers)
    assert table["op"].tolist() == ["match", "only2", "match"]
    assert table["name1"].iloc[0] == "cijk" and table["name2"].iloc[0] == "cutlass"


def test_stream_windows_keep_a_helper_with_its_operation():
    step1 = np.array([5, 5] + [0, 2] * 300)
    step2 = np.array([5, 5] + [0, 0 | FOLDED, 2] * 300)
    windows = stream_windows(step1, step2, budget=100000)
    assert len(windows) > 1
    assert all(not step2[start] & FOLDED for _, _, start, stop in windows if start < len(step2))


def _optimal_score(a: list[int], b: list[int]) -> int:
    """Needleman-Wunsch optimum by the textbook recurrence, one cell at a time."""

    def pair(x: int, y: int) -> int:
        if x == y:
            return MATCH_SCORE
        return UNKNOWN_MISMATCH_SCORE if (x | y) & UNKNOWN else MISMATCH_SCORE

    row = [j * GAP_SCORE for j in range(len(b) + 1)]
    for i, x in enumerate(a, start=1):
        above, row = row, [i * GAP_SCORE] + [0] * len(b)
        for j, y in enumerate(b, start=1):
            row[j] = max(above[j - 1] + pair(x, y), above[j] + GAP_SCORE, row[j - 1] + GAP_SCORE)
    return row[-1]


def _path_score(path: np.ndarray, a: list[int], b: list[int]) -> int:
    score = 0
    for i, j in path.tolist():
        if i < 0 or j < 0:
            score += GAP_SCORE
        elif a[i] == b[j]:
            score += MATCH_SCORE
        else:
            score += UNKNOWN_MISMATCH_SCORE if (a[i] | b[j]) & UNKNOWN else MISMATCH_SCORE
    return score


_codes = st.lists(st.sampled_from([0, 1, 2, 3, 1 | FOLDED, 4 | UNKNOWN]), max_size=80)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(_codes, _codes)
def test_alignment_is_a_complete_path_with_the_optimal_score(a, b):
    """Across DP row blocks too: every kernel appears once, in order, and the score is the optimum."""
    path = align_codes(np.array(a, dtype=CODE_DTYPE), np.array(b, dtype=CODE_DTYPE))
    for side, codes in ((0, a), (1, b)):
        assert path[:, side][path[:, side] >= 0].tolist() == list(range(len(codes)))
    assert _path_score(path, a, b) == _optimal_score(a, b)


def test_alignment_works_where_numba_finds_no_writable_cache(tmp_path):
    """A read-only install without a writable home: numba has no cache location, so the compiled DP would compile
    in every process; the DP stays in numpy rows instead, however much it aligns."""
    script = """
import numpy as np
from numba.core import caching
caching.CacheImpl._locator_classes = []  # as if no folder numba could use were writable
from fusion.match import align, dp
align.ROWS_BUDGET_CELLS = 0
print(align.align_codes(np.array([1, 2, 3]), np.array([1, 3])).tolist(), dp.fill.signatures)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[[0, 0], [1, -1], [2, 1]] []"


def test_a_small_pair_aligns_without_numba_and_a_large_one_loads_the_compiled_dp():
    """numba is imported only once a process has aligned more cells than it takes to win back loading it."""
    script = """
import sys
import numpy as np
from fusion.match import align
codes = np.arange(40) % 7
align.align_codes(codes, codes[::-1])
print("numba" in sys.modules)
align.ROWS_BUDGET_CELLS = 2000
align.align_codes(codes, codes[1:])
from fusion.match import dp
print(bool(dp.fill.signatures))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


_flagged = st.lists(st.sampled_from([0, 1, 2, 3, 1 | FOLDED, 2 | FOLDED, 4 | UNKNOWN, 1 | UNKNOWN]), max_size=60)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(_flagged, _flagged, st.booleans(), st.data())
def test_numpy_rows_fill_the_same_cells_as_the_compiled_dp(a, b, free_start, data):
    """Directions, last row and last column cell for cell, and the path from any end cell: the tie-breaks too."""
    a, b = np.array(a, dtype=CODE_DTYPE), np.array(b, dtype=CODE_DTYPE)
    compiled = dp.fill(a, b, _SCORES, UNKNOWN, free_start)
    rows = dp_rows.fill(a, b, _SCORES, UNKNOWN, free_start)
    for got, expected in zip(rows, compiled):
        assert np.array_equal(got, expected)
    i, j = data.draw(st.integers(0, len(a))), data.draw(st.integers(0, len(b)))
    assert np.array_equal(dp_rows.traceback(rows[0], i, j), dp.traceback(compiled[0], i, j))


def test_distinct_large_codes_never_align_as_the_same():
    """Op alignment codes are vocabulary numbers; beyond 16 bits they must neither wrap nor carry flags."""
    a, b = np.array([0, 70_000, 5]), np.array([65_536, 70_000, 5])
    assert ops(align_codes(a, b), a, b).tolist().count(MATCH) == 2


_stream = st.lists(st.sampled_from([0, 1, 2, 3, 1 | FOLDED, 4 | UNKNOWN]), min_size=400, max_size=1500)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(_stream, _stream)
def test_windows_aligned_from_their_chunks_dp_align_as_on_their_own(a, b):
    """stream_windows caches a window's alignment from its chunk's DP where it can: each window's alignment is the
    one a fresh DP of the window gives, tie-breaks included."""
    a, b = np.array(a, dtype=CODE_DTYPE), np.array(b, dtype=CODE_DTYPE)
    clear_cache()
    windows = stream_windows(a, b, budget=100_000)
    seeded = [align_codes(a[s1:e1], b[s2:e2]) for s1, e1, s2, e2 in windows]
    clear_cache()
    for (s1, e1, s2, e2), path in zip(windows, seeded):
        assert np.array_equal(path, align_codes(a[s1:e1], b[s2:e2]))
