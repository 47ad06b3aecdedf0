"""Kernel-by-kernel alignment of two kernel-type sequences (Needleman-Wunsch, global or with free ends).

Scores: same type +2, gap -2, different types -5: dearer than a pair of gaps, so a kernel of one operation
type never stands for a kernel of another (an epilogue fused on one side and a prologue on the other stay two
one-sided kernels). A kernel whose type is unknown (no rule knows its name) may stand for any type: against it
a different type costs -3, cheaper than two gaps. Codes carry two flag bits for this (FOLDED, UNKNOWN; see
unit_codes). Alignments are cached by the pair of code sequences: identical decode steps are aligned once.

The DP runs in compiled code (dp.py, numba: about 0.7 ns a cell) in a process that has loaded numba (a large
trace's loader did) or has aligned enough cells to win back loading it; otherwise in numpy rows (dp_rows.py:
about 15-25 ns a cell, the same cells), so that a small pair never waits for numba, let alone its compile.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from fusion.compiled import cacheable, compile_here, numba_loaded
from fusion.match import dp_rows
from fusion.vocabulary import SPLIT_ROLES

MATCH_SCORE, MISMATCH_SCORE, UNKNOWN_MISMATCH_SCORE, GAP_SCORE = 2, -5, -3, -2
GAP = -1
MATCH, SUBSTITUTE, ONLY1, ONLY2 = 0, 1, 2, 3
OP_NAMES = np.array(["match", "substitute", "only1", "only2"])
_SCORES = np.array([MATCH_SCORE, MISMATCH_SCORE, UNKNOWN_MISMATCH_SCORE, GAP_SCORE], dtype=np.int32)
"""dp.fill's scores; a cell's magnitude is at most 5 x (n + m), far inside int32 for any trace."""
ROWS_BUDGET_CELLS = 32 << 20
"""Cells a process aligns in numpy rows (about 0.6 s) before it loads the compiled DP (numba's import and the
DP's machine code: about 0.5-1 s in a new process, more than a small pair's alignments take in rows)."""
STREAM_CHUNK = 512
"""Kernels per side aligned at once when walking a long eager stream."""
STREAM_KEEP = 0.75
"""Fraction of a chunk's alignment kept before the next chunk starts (chunk ends are unreliable)."""
CODE_DTYPE = np.int32
"""Alignment codes: a type (or op) number in the low bits, FOLDED and UNKNOWN far above any vocabulary."""
FOLDED = 1 << 28
"""Code bit of a helper kernel folded into the kernel of its operation (GEMM + split-K reduce)."""
UNKNOWN = 1 << 29
"""Code bit of a kernel of the unknown type: it may align with a kernel of any type."""
UNKNOWN_TYPE = "Other"
"""The classification's type for names no rule knows."""


def unit_codes(
    codes: np.ndarray, helper: np.ndarray, unknown_code: int = -1, lengths: np.ndarray | None = None
) -> np.ndarray:
    """Alignment codes: a helper kernel next to a kernel of its operation type carries FOLDED.

    In a run of kernels of one type, helpers are folded into the run's other kernels (before or after
    them: a split-K reduce follows its GEMM, a BetaOnly scaling precedes it); a run of helpers only keeps
    its first kernel unfolded. A folded helper never aligns with the other side's real kernel of that type,
    only with a folded helper, so "GEMM + splitKreduce" vs "GEMM" aligns the two GEMMs and leaves the
    reduce one-sided. Kernels of `unknown_code` (the unknown type's code) carry UNKNOWN. With `lengths`, the
    sequences are several put end to end (of these lengths), each coded as on its own: no run crosses into the next.
    """
    out = np.array(codes, dtype=CODE_DTYPE)  # a copy: the flags are set in place
    helper = np.asarray(helper, dtype=bool)
    if not len(out):
        return out
    helpers = np.flatnonzero(helper)
    folded = helpers[_folded(out, helper, helpers, lengths)] if len(helpers) else helpers
    out[out == unknown_code] |= UNKNOWN
    out[folded] |= FOLDED
    return out


def _folded(codes: np.ndarray, helper: np.ndarray, helpers: np.ndarray, lengths: np.ndarray | None) -> np.ndarray:
    """Per helper kernel (at `helpers`): it is folded, being in a run of one code that has a kernel of its
    operation, or not the run's first kernel (unit_codes). Runs are decided on the codes and helpers only."""
    starts = np.r_[True, codes[1:] != codes[:-1]]
    if lengths is not None:
        bounds = np.cumsum(lengths)[:-1]
        starts[bounds[bounds < len(codes)]] = True
    run_starts = np.flatnonzero(starts)
    has_main = np.logical_or.reduceat(~helper, run_starts)
    run = np.searchsorted(run_starts, helpers, side="right") - 1
    return has_main[run] | ~starts[helpers]


def type_code(codes: np.ndarray) -> np.ndarray:
    """The type code of alignment codes (flag bits removed)."""
    return np.asarray(codes) & (FOLDED - 1)


def align_codes(a: np.ndarray, b: np.ndarray, free_end: bool = False, free_start: bool = False) -> np.ndarray:
    """Align two int type-code sequences: an (L, 2) array of positions into a and b, -1 for a gap.

    With `free_end`, trailing kernels of either sequence may stay unaligned at no cost (the rest of
    a stream continues in the next chunk); they are then left out of the result. With `free_start`, leading
    kernels of either sequence may stay unaligned at no cost (they are in the result, as gaps).

    The DP breaks ties between equally good alignments by the order of its two inputs (dp.py), so the pair
    is always aligned in one canonical order (the shorter sequence first, then the lesser bytes) and the
    path mirrored back: swapping the traces swaps the path's columns and changes nothing else.
    """
    key, swapped = _key(a, b, free_end, free_start)
    path, _ = _aligned(key)
    return path[:, ::-1] if swapped else path


def _aligned(key: _Key) -> tuple[np.ndarray, Any]:
    """The cached path of a canonical key, else the path aligned now (and cached) with its filled DP
    (_needleman_wunsch); the DP is None for a cached path."""
    path = _PATHS.get(key)
    if path is not None:
        return path, None
    path, filled = _needleman_wunsch(*_arrays(key), key[2], key[3])
    return _PATHS.put(key, path), filled


def _key(a: np.ndarray, b: np.ndarray, free_end: bool, free_start: bool) -> tuple[_Key, bool]:
    """The alignment cache's key of a pair (its canonical order), and whether that order swaps the pair."""
    a_bytes = np.ascontiguousarray(a, dtype=CODE_DTYPE).tobytes()
    b_bytes = np.ascontiguousarray(b, dtype=CODE_DTYPE).tobytes()
    if (len(b_bytes), b_bytes) < (len(a_bytes), a_bytes):  # the canonical order
        return (b_bytes, a_bytes, free_end, free_start), True
    return (a_bytes, b_bytes, free_end, free_start), False


def _arrays(key: _Key) -> tuple[np.ndarray, np.ndarray]:
    return np.frombuffer(key[0], dtype=CODE_DTYPE), np.frombuffer(key[1], dtype=CODE_DTYPE)


_Key = tuple[bytes, bytes, bool, bool]


class _Paths:
    """Alignments by canonical key, the MAX_PATHS last used (identical decode steps are aligned once). A path
    stored is read-only. Thread-safe: a server's sessions align at the same time."""

    def __init__(self) -> None:
        self._paths: OrderedDict[_Key, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: _Key) -> np.ndarray | None:
        with self._lock:
            path = self._paths.get(key)
            if path is not None:
                self._paths.move_to_end(key)
            return path

    def put(self, key: _Key, path: np.ndarray) -> np.ndarray:
        path.flags.writeable = False
        with self._lock:
            self._paths[key] = path
            self._paths.move_to_end(key)
            while len(self._paths) > MAX_PATHS:
                self._paths.popitem(last=False)
        return path

    def clear(self) -> None:
        with self._lock:
            self._paths.clear()


MAX_PATHS = 4096
"""Alignments kept (a few MB: most are of a few hundred kernels)."""
_PATHS = _Paths()


def prepare() -> None:
    """Load the compiled DP now (numba's import and its cached machine code: a few tenths of a second in a
    new process; compiled first, announced, where numba's cache has none), for a caller with a core to spare
    before the alignments of a large pair."""
    from fusion.match import dp

    if compile_here(dp.COMPILED, warm):
        warm()  # loads the machine code where compile_here found it cached


def warm() -> None:
    """Run the compiled DP once on inputs typed as align_codes passes them (compiling it if it is not cached)."""
    from fusion.match import dp

    one = np.frombuffer(np.zeros(1, CODE_DTYPE).tobytes(), dtype=CODE_DTYPE)
    direction, _, _ = dp.fill(one, one, _SCORES, UNKNOWN, False)
    dp.traceback(direction, 1, 1)


def ops(path: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The op code (MATCH, SUBSTITUTE, ONLY1, ONLY2) of each alignment row."""
    i, j = path[:, 0], path[:, 1]
    same = np.asarray(a)[np.maximum(i, 0)] == np.asarray(b)[np.maximum(j, 0)] if len(a) and len(b) else False
    both = np.where(same, MATCH, SUBSTITUTE)
    return np.where(i < 0, ONLY2, np.where(j < 0, ONLY1, both)).astype(np.int8)


def clear_cache() -> None:
    """Forget cached alignments (benchmarks time a fresh process's work)."""
    _PATHS.clear()


def _needleman_wunsch(a: np.ndarray, b: np.ndarray, free_end: bool, free_start: bool) -> tuple[np.ndarray, Any]:
    """The path, and the filled DP (its module and directions, for _chunk) or None where none was filled."""
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        return _gaps_only(n, m, free_end), None
    dp = _dp(n * m)
    direction, last_row, last_col = dp.fill(a, b, _SCORES, UNKNOWN, free_start)
    end = _free_end_cell(last_row, last_col, n, m) if free_end else (n, m)
    return dp.traceback(direction, *end), (dp, direction)


_rows_cells = 0
"""Cells aligned in numpy rows so far in this process."""


def _dp(cells: int) -> Any:
    """The DP module to fill `cells` cells with: the compiled one where it is ready (or worth loading, and no
    other process is compiling it), else numpy rows."""
    global _rows_cells
    if numba_loaded() or _rows_cells + cells > ROWS_BUDGET_CELLS:
        from fusion.match import dp  # numba: imported and its compiled code loaded only here

        if cacheable(dp.fill) and compile_here(dp.COMPILED, warm):
            return dp
    _rows_cells += cells
    return dp_rows


def _free_end_cell(last_row: np.ndarray, last_col: np.ndarray, n: int, m: int) -> tuple[int, int]:
    """The best end cell; among equal scores the one that aligns the most kernels (never an early stop)."""
    j = m - int(np.argmax(last_row[::-1]))
    i = n - int(np.argmax(last_col[::-1]))
    if last_row[j] != last_col[i]:
        return (n, j) if last_row[j] > last_col[i] else (i, m)
    return (n, j) if n + j >= i + m else (i, m)


def _gaps_only(n: int, m: int, free_end: bool) -> np.ndarray:
    if free_end:
        return np.zeros((0, 2), dtype=np.int64)
    rows = [(i, GAP) for i in range(n)] + [(GAP, j) for j in range(m)]
    return np.array(rows, dtype=np.int64).reshape(-1, 2)


def stream_windows(codes1: np.ndarray, codes2: np.ndarray, budget: int) -> list[tuple[int, int, int, int]]:
    """Cut two long kernel streams into corresponding windows [start1, stop1) x [start2, stop2).

    Walks both streams in chunks: aligns a chunk with free ends, keeps the first STREAM_KEEP of it and
    continues from where the kept part ends on each side, so the sides may advance at different rates
    (fused kernels, extra steps). Stops after `budget` kernels on either side; a tail left on one side
    only becomes a window with an empty other side. A window inside its chunk is aligned from the chunk's DP
    where it can be (_chunk): its alignment, which the caller asks for next, is then cached already.
    """
    n1, n2 = min(len(codes1), budget), min(len(codes2), budget)
    windows = []
    c1 = c2 = 0
    while c1 < n1 and c2 < n2:
        a, b = codes1[c1 : min(c1 + STREAM_CHUNK, n1)], codes2[c2 : min(c2 + STREAM_CHUNK, n2)]
        keep = 1.0 if c1 + len(a) >= n1 or c2 + len(b) >= n2 else STREAM_KEEP
        path, window_path = _chunk(a, b)
        used1, used2 = _kept(path, len(a), len(b), keep)
        stop1, stop2 = _past_helpers(codes1, c1 + used1, n1), _past_helpers(codes2, c2 + used2, n2)
        window_path(stop1 - c1, stop2 - c2)
        windows.append((c1, stop1, c2, stop2))
        c1, c2 = stop1, stop2
    if c1 < n1 or c2 < n2:
        windows.append((c1, n1, c2, n2))
    return windows


def _chunk(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, Callable[[int, int], None]]:
    """align_codes(a, b, free_end=True), and a function that caches the global alignment of a[:i] and b[:j]
    (align_codes(a[:i], b[:j])) from the chunk's DP: every cell of that smaller DP is the chunk's own (a cell
    reads only the cells above and to its left), so the traceback from cell (i, j) is its path. Only where the
    smaller pair's canonical order is the chunk's (the DP's tie-breaks follow the order) and the chunk's DP was
    filled here (not a cached alignment)."""
    key, swapped = _key(a, b, True, False)
    path, filled = _aligned(key)

    def window_path(i: int, j: int) -> None:
        if filled is None or not (0 < i <= len(a) and 0 < j <= len(b)):
            return
        window, window_swapped = _key(a[:i], b[:j], False, False)
        if window_swapped == swapped and _PATHS.get(window) is None:
            dp, direction = filled
            _PATHS.put(window, dp.traceback(direction, *((j, i) if swapped else (i, j))))

    return (path[:, ::-1] if swapped else path), window_path


def _past_helpers(codes: np.ndarray, stop: int, end: int) -> int:
    """Move a window's end past folded helpers, so an operation's kernels stay in one window."""
    while stop < end and codes[stop] & FOLDED:
        stop += 1
    return stop


def _kept(path: np.ndarray, n: int, m: int, keep: float) -> tuple[int, int]:
    """Kernels consumed on each side by the first `keep` fraction of a chunk alignment (at least one)."""
    if len(path) == 0:
        return 1, 1
    done1, done2 = np.maximum.accumulate(path[:, 0]) + 1, np.maximum.accumulate(path[:, 1]) + 1
    stop = np.flatnonzero((done1 >= keep * n) | (done2 >= keep * m))
    k = stop[0] if len(stop) else len(path) - 1
    return max(1, int(done1[k])), max(1, int(done2[k]))


def kernel_helpers(kernels: pd.DataFrame, names: pd.DataFrame) -> np.ndarray:
    """Per kernel row: is it a helper kernel of its own operation type (names table `helper` a split role)."""
    helper = names["helper"].isin(SPLIT_ROLES).reindex(kernels["name"].cat.categories.astype(str), fill_value=False)
    codes = kernels["name"].cat.codes.to_numpy()
    return helper.to_numpy(bool)[codes] if len(codes) else np.zeros(0, dtype=bool)


def alignment_table(
    kernels1: pd.DataFrame,
    kernels2: pd.DataFrame,
    rows1: np.ndarray,
    rows2: np.ndarray,
    helpers1: np.ndarray,
    helpers2: np.ndarray,
) -> pd.DataFrame:
    """Side-by-side aligned kernels of one pair: global index, name, type, dur and rel_ts per side, and op.

    `helpers1/2` flag each kernel row of the traces that is a helper (see unit_codes).
    """
    types = sorted(set(kernels1["type"].cat.categories) | set(kernels2["type"].cat.categories))
    code = {t: i for i, t in enumerate(types)}
    a = kernels1["type"].iloc[rows1].to_numpy()  # only the pair's rows become strings
    b = kernels2["type"].iloc[rows2].to_numpy()
    unknown = code.get(UNKNOWN_TYPE, -1)
    a_codes = unit_codes(np.array([code[t] for t in a], dtype=CODE_DTYPE), helpers1[rows1], unknown)
    b_codes = unit_codes(np.array([code[t] for t in b], dtype=CODE_DTYPE), helpers2[rows2], unknown)
    path = align_codes(a_codes, b_codes)
    table = {"op": OP_NAMES[ops(path, a_codes, b_codes)]}
    for side, kernels, rows in ((1, kernels1, rows1), (2, kernels2, rows2)):
        table.update(_side_columns(side, kernels, rows, path[:, side - 1]))
    return pd.DataFrame(table)


def _side_columns(side: int, kernels: pd.DataFrame, rows: np.ndarray, positions: np.ndarray) -> dict[str, object]:
    present = positions >= 0
    index = np.where(present, np.asarray(rows, dtype=np.int64)[np.maximum(positions, 0)] if len(rows) else -1, -1)
    picked = kernels.iloc[index[present]]
    start = float(kernels["ts"].iloc[rows[0]]) if len(rows) else 0.0
    columns: dict[str, object] = {f"index{side}": index}
    for column, fill in (("name", None), ("type", None), ("dur", np.nan), ("ts", np.nan)):
        values = np.full(len(positions), fill, dtype=object if fill is None else np.float64)
        values[present] = (
            picked[column].to_numpy() if column in ("name", "type") else picked[column].to_numpy(np.float64)
        )
        columns[f"{column}{side}" if column != "ts" else f"rel_ts{side}"] = values - start if column == "ts" else values
    return columns
