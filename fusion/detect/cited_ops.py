"""The launching ops of the kernels each finding cites: every finding names its op, top-level and innermost,
whatever its evidence source (groups, windows, op calls), read from the kernel rows its evidence refs cite."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fusion.model.trace import Trace
from fusion.result import EvidenceRef, FusionMapping, OneSidedNote

OP_PATH_SEPARATOR = " > "
"""Between a kernel's top-level and innermost op in a finding's op lists: 'aten::linear > aten::addmm'."""


@dataclass(frozen=True)
class LaunchOps:
    """One trace's launching op of each kernel row: a code into `paths` ((op_top, op) pairs), -1 without an op."""

    codes: np.ndarray
    paths: list[tuple[str, str]]

    @classmethod
    def of(cls, trace: Trace) -> LaunchOps:
        kernels = trace.kernels
        if not {"op", "op_top"} <= set(kernels.columns) or not len(kernels):
            return cls(np.full(len(kernels), -1, dtype=np.int64), [])
        top, inner = kernels["op_top"].cat, kernels["op"].cat
        width = len(inner.categories) + 1
        codes, keys = pd.factorize(top.codes.to_numpy(np.int64) * width + inner.codes.to_numpy(np.int64) + 1)
        paths = [(_category(top.categories, k // width), _category(inner.categories, k % width - 1)) for k in keys]
        known = np.array([bool(t) for t, _ in paths], dtype=bool)
        codes = np.where(known[codes], codes, -1) if len(paths) else codes
        return cls(codes.astype(np.int64), paths)

    def counts(self, windows: Iterable[tuple[int, int]]) -> Counter[int]:
        """Kernels per path code in the [start, stop) row windows (a window (-1, -1) cites no kernel)."""
        found: Counter[int] = Counter()
        for start, stop in windows:
            if 0 <= start < stop:
                codes = self.codes[start:stop]
                found.update(codes[codes >= 0].tolist())
        return found

    def texts(self, counts: Counter[int], limit: int) -> list[str]:
        return [path_text(*self.paths[code]) for code, _ in counts.most_common(limit)]


def _category(categories: pd.Index, code: int) -> str:
    return str(categories[code]) if 0 <= code < len(categories) else ""


def path_text(top: str, inner: str) -> str:
    """'aten::linear > aten::addmm', or the one op when both are the same."""
    return top if inner in ("", top) else f"{top}{OP_PATH_SEPARATOR}{inner}"


def _windows(refs: list[EvidenceRef], side: int) -> list[tuple[int, int]]:
    return [ref.window1 if side == 1 else ref.window2 for ref in refs]


def name_ops(mappings: list[FusionMapping], notes: list[OneSidedNote], traces: tuple[Trace, Trace], limit: int) -> None:
    """Set every finding's op, inner_op and per-side op lists from the kernels its evidence refs cite.

    The op is the top-level op of the most cited kernels on the fused side (the side whose kernel stands for the
    work), else on the other; an op-level finding keeps the op whose calls it compares."""
    ops = (LaunchOps.of(traces[0]), LaunchOps.of(traces[1]))
    for mapping in mappings:
        fused = ops[mapping.fused_trace - 1]
        unfused = ops[2 - mapping.fused_trace]
        fused_counts = fused.counts(_windows(mapping.evidence_refs, mapping.fused_trace))
        unfused_counts = unfused.counts(_windows(mapping.evidence_refs, 3 - mapping.fused_trace))
        mapping.fused_ops = fused.texts(fused_counts, limit)
        mapping.unfused_ops = unfused.texts(unfused_counts, limit)
        top, inner = _main_path(fused, fused_counts) or _main_path(unfused, unfused_counts) or ("", "")
        mapping.op = mapping.op or top
        mapping.inner_op = inner
    for note in notes:
        side = ops[note.side - 1]
        counts = side.counts(_windows(note.evidence_refs, note.side))
        note.ops = side.texts(counts, limit)
        note.op, note.inner_op = _main_path(side, counts) or ("", "")


def _main_path(ops: LaunchOps, counts: Counter[int]) -> tuple[str, str] | None:
    return ops.paths[counts.most_common(1)[0][0]] if counts else None
