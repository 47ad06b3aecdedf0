"""A reader's TraceRecords -> the Trace model: each kernel's launching op, module, phase and step.

The CPU side of the records is resolved here, once, into columns of the kernel table, and then dropped;
a trace whose CPU side cannot be tied to its kernels gets one warning that says what is missing
(fusion.model.linking). The kernels are not typed yet: fusion.classify adds their operation types.
"""

from __future__ import annotations

import pandas as pd

from fusion.loader.formats import read_records
from fusion.loader.kineto import TraceRecords
from fusion.loader.reader import Progress, TraceSource
from fusion.model.linking import cpu_link_warning
from fusion.model.ops import launch_columns
from fusion.model.phases import ENGINE_FRAME_SUFFIXES, phase_columns
from fusion.model.trace import Trace, default_label, name_stats
from fusion.vocabulary import GPU_KERNEL


def build(records: TraceRecords, label: str | None = None) -> Trace:
    """The trace model of `records`; `label` names it in reports (default: its GPU, or its file name)."""
    kernels = records.kernels.assign(**launch_columns(records.kernels, records.cpu))
    kernels = kernels.assign(**phase_columns(kernels, records.cpu))
    link = cpu_link_warning(kernels, records.cpu)
    return Trace(
        label=label or default_label(records.platform, records.gpu, records.gpu_recorded, records.source),
        source=records.source,
        platform=records.platform,
        platform_evidence=records.platform_evidence,
        gpu=records.gpu,
        gpu_recorded=records.gpu_recorded,
        device_properties=records.device_properties,
        kernels=kernels,
        names=_name_table(kernels, records),
        digest=records.digest,
        warnings=records.warnings + ([link] if link else []),
        format=records.format,
        file_hash=records.file_hash,
    )


def _name_table(kernels: pd.DataFrame, records: TraceRecords) -> pd.DataFrame:
    """name_stats with each name's NAME_FACTS: its raw name and what GPU work it is."""
    stats = name_stats(kernels)
    names = stats.index.tolist()
    return stats.assign(
        raw_name=[records.raw_names.get(n, n) for n in names],
        gpu_work=[records.work.get(n, GPU_KERNEL) for n in names],
    )


def read(
    source: TraceSource,
    label: str | None = None,
    *,
    name: str | None = None,
    progress: Progress | None = None,
    max_bytes: int | None = None,
    device: int | None = None,
) -> Trace:
    """Read a trace file of any supported format and build its model (of one GPU: `device`, or the one with
    the most kernel time); raises TraceError naming the input and the problem."""
    records = read_records(
        source,
        name=name,
        progress=progress,
        max_bytes=max_bytes,
        frame_suffixes=ENGINE_FRAME_SUFFIXES,
        device=device,
    )
    return build(records, label)
