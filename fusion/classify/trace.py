"""Type a Trace's kernels: each distinct name is classified once, each distinct (name, op, op_top) typed once.

`load(source)` runs the front of the pipeline: read the file (fusion.loader), build the model (fusion.model),
classify (here). Its Trace is what every later stage takes.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from fusion.classify.names import KERNEL_TYPES, classify_names, type_from_op
from fusion.loader.reader import Progress, TraceSource
from fusion.model.build import read
from fusion.model.columns import TYPE_ROUTES
from fusion.model.trace import Trace


def load(
    source: TraceSource,
    label: str | None = None,
    *,
    name: str | None = None,
    progress: Progress | None = None,
    max_bytes: int | None = None,
    device: int | None = None,
) -> Trace:
    """Read, model and classify a trace from a path, bytes or a binary file; raises TraceError naming the input
    and the problem.

    `name` names an in-memory input in messages (an upload's file name); `progress` is called with
    (bytes read, total bytes) as the file is read; `device` picks the GPU of a file that records several
    (default: the one with the most kernel time).
    """
    return classify_trace(read(source, label, name=name, progress=progress, max_bytes=max_bytes, device=device))


def classify_trace(trace: Trace) -> Trace:
    """The trace with its names table classified (sorted by time) and each kernel's type and type_route."""
    info = classify_names(trace.names.index, trace.platform)
    info.index.name = "name"
    names = info.join(trace.names).sort_values("time_us", ascending=False)
    types, routes = _kernel_types(trace.kernels, names)
    kernels = trace.kernels.copy(deep=False)
    kernels.insert(1, "type", types)
    kernels.insert(2, "type_route", routes)
    return dataclasses.replace(trace, kernels=kernels, names=names)


def _kernel_types(kernels: pd.DataFrame, name_table: pd.DataFrame) -> tuple[pd.Categorical, pd.Categorical]:
    """Per kernel, its type and what typed it, from the name's type and the launching ops.

    Each distinct (name, op, op_top) is classified once: the codes of the three are packed into one
    integer key, and classify.type_from_op runs on the distinct keys only.
    """
    columns = [kernels[c].cat for c in ("name", "op", "op_top")]
    name_types = name_table["type"].reindex(columns[0].categories.astype(str)).fillna("Other").to_numpy()
    sizes = [max(len(c.categories), 1) for c in columns]
    key = (columns[0].codes.to_numpy(np.int64) * sizes[1] + columns[1].codes) * sizes[2] + columns[2].codes
    inverse, distinct = pd.factorize(key)
    name_code, rest = np.divmod(distinct, sizes[1] * sizes[2])
    op_code, top_code = np.divmod(rest, sizes[2])
    ops, tops = columns[1].categories, columns[2].categories
    typed = [type_from_op(name_types[n], ops[o], tops[t]) for n, o, t in zip(name_code, op_code, top_code)]
    return _by_code([t for t, _ in typed], inverse, KERNEL_TYPES), _by_code([r for _, r in typed], inverse, TYPE_ROUTES)


def _by_code(values: list[str], inverse: np.ndarray, categories: tuple[str, ...]) -> pd.Categorical:
    """values[inverse] as a categorical over `categories` (missing where a value is not one of them)."""
    code_of = {category: code for code, category in enumerate(categories)}
    codes = np.array([code_of.get(v, -1) for v in values], dtype=np.int64)
    return pd.Categorical.from_codes(codes[inverse], categories=list(categories))
