"""Op calls: one trace's top-level PyTorch op calls and the kernels each launched, and their alignment across
two traces.

Where a trace records CPU ops, each eagerly launched kernel belongs to one top-level op call (the model's
`op_call`). The two traces run the same op sequence, so aligning their op-call sequences (per thread,
Needleman-Wunsch on canonical op codes: equivalent ops are the same) pairs each call with its counterpart.
Kernels of graph replays (launch 'graph') have an op call only where a capture trace tied them to the ops
that launched them during capture (fusion.model.capture); kernels without a runtime launch (launch 'none')
have none. Kernels without an op call are left to the kernel-type comparison.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fusion.classify.names import canonical_op
from fusion.match.align import GAP, align_codes, stream_windows
from fusion.model.columns import OP_COLUMNS
from fusion.model.ops import MODULE_SEPARATOR
from fusion.model.trace import Trace

EAGER_LAUNCH = "kernel"
"""The loader's `launch` value of an eagerly launched kernel (ops.LAUNCH_KINDS)."""
_INSTANCE = re.compile(rf"_\d+(?={re.escape(MODULE_SEPARATOR)}|$)")
"""The instance number the profiler appends to a module name (Linear_3)."""


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
    op_ids: np.ndarray
    """Per call: an int equal exactly where `ops` are (see factorized); likewise raw_op_ids and module_ids."""
    raw_op_ids: np.ndarray
    module_ids: np.ndarray

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
        rows = np.flatnonzero(call >= 0)
    else:
        call, rows = np.zeros(len(kernels), dtype=np.int64), np.zeros(0, dtype=np.int64)
    rows = rows[np.argsort(call[rows], kind="stable")]
    _, first = np.unique(call[rows], return_index=True)
    heads = rows[first]
    (ops, op_ids), (raw_ops, raw_op_ids) = (_per_category(kernels, "op_top", heads, f) for f in (canonical_op, str))
    modules, module_ids = _per_category(kernels, "module", heads, class_path)
    return OpCalls(
        side,
        trace,
        ops,
        raw_ops,
        modules,
        _column(kernels, "thread", heads),
        rows,
        np.r_[first, len(rows)].astype(np.int64),
        _by_row(kernels, "name"),
        _by_row(kernels, "type"),
        kernels["dur"].to_numpy(np.float64),
        kernels["correlation"].to_numpy(np.int64),
        op_ids,
        raw_op_ids,
        module_ids,
    )


def _column(kernels: pd.DataFrame, name: str, rows: np.ndarray) -> np.ndarray:
    return kernels[name].to_numpy()[rows] if name in kernels.columns else np.zeros(0, dtype=np.int64)


def class_path(path: str) -> str:
    """A module path without the profiler's instance numbers: Qwen2Model_0/Qwen2DecoderLayer_3 ->
    Qwen2Model/Qwen2DecoderLayer."""
    return _INSTANCE.sub("", path)


def _per_category(
    kernels: pd.DataFrame, column: str, rows: np.ndarray, rewrite: Callable[[str], str]
) -> tuple[np.ndarray, np.ndarray]:
    """`rewrite` of a categorical column's value at `rows`, as an object array of shared strings (8 bytes a row),
    and per row an int equal exactly where the strings are; each distinct value is rewritten once."""
    by_row = _by_row(kernels, column, rewrite)
    ids = pd.factorize(by_row.values)[0]  # per category (and '' last): an id of its rewritten string
    codes = by_row.codes[rows]
    return by_row.values[codes], ids[codes]


def factorized(strings: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pd.factorize(strings) (codes in order of first appearance, and the distinct strings) from `ids`, ints equal
    exactly where the strings are (OpCalls.op_ids and the like): hashing ints is about ten times quicker."""
    codes, first_ids = pd.factorize(ids)
    table = np.empty(int(ids.max()) + 1 if len(ids) else 0, dtype=object)
    table[ids] = strings
    return codes, table[first_ids]


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


def align_calls(calls1: OpCalls, calls2: OpCalls) -> np.ndarray:
    """(k, 2) indices of aligned calls with the same canonical op; threads paired by their number of calls."""
    (first, ops1), (second, ops2) = (factorized(c.ops, c.op_ids) for c in (calls1, calls2))
    vocabulary = {op: i for i, op in enumerate(sorted(set(ops1) | set(ops2)))}
    codes1 = np.array([vocabulary[op] for op in ops1], dtype=np.int64)[first]
    codes2 = np.array([vocabulary[op] for op in ops2], dtype=np.int64)[second]
    pairs = [_align_thread(codes1, codes2, t1, t2) for t1, t2 in zip(_threads(calls1), _threads(calls2))]
    return np.vstack(pairs) if pairs else np.zeros((0, 2), dtype=np.int64)


def _threads(calls: OpCalls) -> list[np.ndarray]:
    """Call indices of each launching thread, busiest thread first."""
    _, inverse, counts = np.unique(calls.threads, return_inverse=True, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    return [np.flatnonzero(inverse == t) for t in order]


def _align_thread(codes1: np.ndarray, codes2: np.ndarray, calls1: np.ndarray, calls2: np.ndarray) -> np.ndarray:
    """Aligned same-op call pairs of one thread pair, walked in corresponding windows like an eager stream.

    Two equal op sequences align call for call: each window's alignment is then its diagonal, the one path
    that matches every call (any other scores less), so they are paired without aligning."""
    a, b = codes1[calls1], codes2[calls2]
    if np.array_equal(a, b):
        return np.column_stack([calls1, calls2])
    out = []
    for s1, e1, s2, e2 in stream_windows(a, b, max(len(a), len(b))):
        path = align_codes(a[s1:e1], b[s2:e2])
        both = (path[:, 0] != GAP) & (path[:, 1] != GAP)
        i, j = path[both, 0] + s1, path[both, 1] + s2
        same = a[i] == b[j]
        out.append(np.column_stack([calls1[i[same]], calls2[j[same]]]))
    return np.vstack(out) if out else np.zeros((0, 2), dtype=np.int64)
