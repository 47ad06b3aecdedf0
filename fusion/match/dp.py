"""The Needleman-Wunsch DP of align.py in compiled code (numba), one cell at a time.

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
    leading gaps cost nothing."""
    match, mismatch, unknown_mismatch, gap = scores[0], scores[1], scores[2], scores[3]
    n, m = len(a), len(b)
    direction = np.empty((n + 1, m + 1), dtype=np.int8)
    row = np.empty(m + 1, dtype=np.int32)
    last_col = np.empty(n + 1, dtype=np.int32)
    lead = 0 if free_start else gap
    for j in range(m + 1):
        row[j] = j * lead
        direction[0, j] = LEFT
    last_col[0] = row[m]
    for i in range(1, n + 1):
        ai = a[i - 1]
        a_unknown = (ai & unknown) != 0
        above_left = row[0]
        row[0] = i * lead
        direction[i, 0] = UP
        for j in range(1, m + 1):
            bj = b[j - 1]
            if ai == bj:
                diag = above_left + match
            elif a_unknown or (bj & unknown) != 0:
                diag = above_left + unknown_mismatch
            else:
                diag = above_left + mismatch
            above_left = row[j]
            up = above_left + gap
            left = row[j - 1] + gap
            if left > diag and left > up:
                row[j], direction[i, j] = left, LEFT
            elif up > diag:
                row[j], direction[i, j] = up, UP
            else:
                row[j], direction[i, j] = diag, DIAG
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
