"""The Needleman-Wunsch DP of align.py in compiled code (numba), a row at a time in two passes (fill).

Kept apart from align.py so that numba is imported (and its compiled code loaded from numba's on-disk cache,
or compiled once, a few seconds) only by a process that aligns enough to need it (align._dp; dp_rows.py does
the same in numpy otherwise). The scores come in as an argument, so the compiled code holds no copy of
align.py's constants. On equal scores a diagonal move wins over an up move
(a gap on side 2), and that over a left move.
"""

from __future__ import annotations

import numpy as np

from fusion.compiled import compiled
from fusion.match.dp_rows import DIAG, GAP, LEFT, UP


@compiled
def fill(
    a: np.ndarray, b: np.ndarray, scores: np.ndarray, unknown: int, free_start: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The traceback directions of every cell, the last row's and the last column's scores.

    `scores`: match, mismatch, mismatch where a side carries the `unknown` bit, gap. With `free_start`,
    leading gaps cost nothing. A row is filled in two passes: the diagonal and up moves of all its cells, which
    depend on the row above only (a loop the compiler turns into vector instructions), then, cell after cell,
    a left move where it is strictly better than both."""
    match, mismatch, unknown_mismatch, gap = scores[0], scores[1], scores[2], scores[3]
    n, m = len(a), len(b)
    direction = np.empty((n + 1, m + 1), dtype=np.int8)
    row = np.empty(m + 1, dtype=np.int32)
    best = np.empty(m + 1, dtype=np.int32)
    last_col = np.empty(n + 1, dtype=np.int32)
    b_unknown = np.empty(m, dtype=np.bool_)
    for j in range(m):
        b_unknown[j] = (b[j] & unknown) != 0
    lead = 0 if free_start else gap
    for j in range(m + 1):
        row[j] = j * lead
        direction[0, j] = LEFT
    last_col[0] = row[m]
    for i in range(1, n + 1):
        ai = a[i - 1]
        other = unknown_mismatch if (ai & unknown) != 0 else mismatch
        moves = direction[i]
        for j in range(1, m + 1):
            step = match if ai == b[j - 1] else (unknown_mismatch if b_unknown[j - 1] else other)
            diag = row[j - 1] + step
            up = row[j] + gap
            better_up = up > diag
            best[j] = up if better_up else diag
            moves[j] = UP if better_up else DIAG
        best[0] = i * lead
        moves[0] = UP
        for j in range(1, m + 1):
            left = best[j - 1] + gap
            if left > best[j]:
                best[j] = left
                moves[j] = LEFT
        row, best = best, row
        last_col[i] = row[m]
    return direction, row, last_col


@compiled
def traceback(direction: np.ndarray, i: int, j: int) -> np.ndarray:
    """The (L, 2) path from cell (0, 0) to cell (i, j): positions into a and b, GAP for a gap."""
    out = np.empty((i + j, 2), dtype=np.int64)
    k = i + j
    while i > 0 or j > 0:
        k -= 1
        step = direction[i, j]
        if step == DIAG:
            i -= 1
            j -= 1
            out[k, 0], out[k, 1] = i, j
        elif step == UP:
            i -= 1
            out[k, 0], out[k, 1] = i, GAP
        else:
            j -= 1
            out[k, 0], out[k, 1] = GAP, j
    return out[k:].copy()


COMPILED = (fill, traceback)
"""What align.warm() compiles."""
