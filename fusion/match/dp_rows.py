"""The DP of dp.py in numpy, a row at a time, for a process that has not loaded numba.

The same cells, directions and tie-breaks as dp.fill and dp.traceback (the tests check it), at 15-30 ns a
cell instead of 0.7, but with no import of numba and no machine code to load or compile: the alignments of a
trace of some tens of MB take less time here than loading the compiled DP would.

A row's cell takes the best of the diagonal and the up move (the diagonal on equal scores), then a left move
where it is strictly better: row[j] = max(best[j], row[j - 1] + gap), which unrolls to
row[j] = j * gap + max over k <= j of (best[k] - k * gap), one running maximum per row.
"""

from __future__ import annotations

import numpy as np

DIAG, UP, LEFT = 0, 1, 2
"""The traceback directions (dp.py uses the same; fill writes a comparison's bools as DIAG and UP)."""
GAP = -1
"""A gap in a path (align.GAP)."""


def fill(
    a: np.ndarray, b: np.ndarray, scores: np.ndarray, unknown: int, free_start: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """dp.fill: the traceback directions of every cell, the last row's and the last column's scores."""
    match, mismatch, unknown_mismatch, gap = (int(s) for s in scores[:4])
    n, m = len(a), len(b)
    b = np.asarray(b, dtype=np.int64)
    lead = 0 if free_start else gap
    codes, which = np.unique(np.asarray(a, dtype=np.int64), return_inverse=True)
    pair = np.where((codes[:, None] & unknown != 0) | (b & unknown != 0), unknown_mismatch, mismatch)
    step = np.where(codes[:, None] == b, match, pair)  # the diagonal move's score, per distinct code of a
    ramp = np.arange(m + 1, dtype=np.int64) * gap
    direction = np.empty((n + 1, m + 1), dtype=np.int8)
    direction[0, :] = LEFT
    direction[1:, 0] = UP
    row = np.arange(m + 1, dtype=np.int64) * lead
    last_col = np.empty(n + 1, dtype=np.int64)
    last_col[0] = row[m]
    best = np.empty(m + 1, dtype=np.int64)
    for i in range(1, n + 1):
        diag = row[:-1] + step[which[i - 1]]
        up = row[1:] + gap
        best[0] = i * lead
        np.maximum(diag, up, out=best[1:])
        running = np.maximum.accumulate(best - ramp) + ramp
        moves = direction[i, 1:]
        np.greater(up, diag, out=moves.view(np.bool_))  # UP where strictly better, else DIAG
        moves[running[1:] > best[1:]] = LEFT
        row = running
        last_col[i] = row[m]
    return direction, row.astype(np.int32), last_col.astype(np.int32)


def traceback(direction: np.ndarray, i: int, j: int) -> np.ndarray:
    """dp.traceback: the (L, 2) path from cell (0, 0) to cell (i, j), GAP for a gap."""
    path: list[tuple[int, int]] = []
    while i > 0 or j > 0:
        step = direction.item(i, j)
        if step == DIAG:
            i, j = i - 1, j - 1
            path.append((i, j))
        elif step == UP:
            i -= 1
            path.append((i, GAP))
        else:
            j -= 1
            path.append((GAP, j))
    return np.array(path[::-1], dtype=np.int64).reshape(-1, 2)
