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
    """One trace's launching ops by kernel row: the codes of its op_top and op columns (-1: none) and their names."""

    top: np.ndarray
    inner: np.ndarray
    top_names: list[str]
    inner_names: list[str]

    @classmethod
    def of(cls, trace: Trace) -> LaunchOps:
        kernels = trace.kernels
        if not {"op", "op_top"} <= set(kernels.columns):
            none = np.full(len(kernels), -1, dtype=np.int64)
            return cls(none, none, [], [])
        top, inner = kernels["op_top"].cat, kernels["op"].cat
        return cls(top.codes.to_numpy(), inner.codes.to_numpy(), _strings(top.categories), _strings(inner.categories))

    def counts(self, windows: Iterable[tuple[int, int]]) -> Counter[tuple[str, str]]:
        """Kernels per (op_top, op) in the [start, stop) row windows (a window (-1, -1) cites no kernel); kernels
        without an op are left out."""
        found: Counter[tuple[str, str]] = Counter()
        for start, stop in windows:
            if 0 <= start < stop:
                pairs = Counter(zip(self.top[start:stop].tolist(), self.inner[start:stop].tolist()))
                for (top, inner), count in pairs.items():
                    path = (_category(self.top_names, top), _category(self.inner_names, inner))
                    if path[0]:
                        found[path] += count
        return found


def _texts(counts: Counter[tuple[str, str]], limit: int) -> list[str]:
    return [path_text(*path) for path, _ in counts.most_common(limit)]


def _category(categories: list[str], code: int) -> str:
    return categories[code] if 0 <= code < len(categories) else ""


def _strings(categories: pd.Index) -> list[str]:
    """The categories as Python strings, read once (indexing the Index per kernel costs microseconds each)."""
    return [str(c) for c in categories]


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
        fused = ops[mapping.fused_trace - 1].counts(_windows(mapping.evidence_refs, mapping.fused_trace))
        unfused = ops[2 - mapping.fused_trace].counts(_windows(mapping.evidence_refs, 3 - mapping.fused_trace))
        mapping.fused_ops, mapping.unfused_ops = _texts(fused, limit), _texts(unfused, limit)
        top, inner = _main_path(fused) or _main_path(unfused) or ("", "")
        mapping.op = mapping.op or top
        mapping.inner_op = inner
    for note in notes:
        counts = ops[note.side - 1].counts(_windows(note.evidence_refs, note.side))
        note.ops = _texts(counts, limit)
        note.op, note.inner_op = _main_path(counts) or ("", "")


def _main_path(counts: Counter[tuple[str, str]]) -> tuple[str, str] | None:
    return counts.most_common(1)[0][0] if counts else None
