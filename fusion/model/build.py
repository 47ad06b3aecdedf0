"""A reader's TraceRecords -> the Trace model: each kernel's launching op, module, phase and step.

The CPU side of the records is resolved here, once, into columns of the kernel table, and then dropped.
The kernels are not typed yet: fusion.classify adds their operation types.
"""

from __future__ import annotations

from fusion.loader.kineto import TraceRecords, read_kineto
from fusion.loader.reader import Progress, TraceSource
from fusion.model.ops import launch_columns
from fusion.model.phases import ENGINE_FRAME_SUFFIXES, phase_columns
from fusion.model.trace import Trace, default_label, name_stats


def build(records: TraceRecords, label: str | None = None) -> Trace:
    """The trace model of `records`; `label` names it in reports (default: its GPU, or its file name)."""
    kernels = records.kernels.assign(**launch_columns(records.kernels, records.cpu))
    kernels = kernels.assign(**phase_columns(kernels, records.cpu))
    return Trace(
        label=label or default_label(records.platform, records.gpu, records.gpu_recorded, records.source),
        source=records.source,
        platform=records.platform,
        platform_evidence=records.platform_evidence,
        gpu=records.gpu,
        gpu_recorded=records.gpu_recorded,
        device_properties=records.device_properties,
        kernels=kernels,
        names=name_stats(kernels),
        digest=records.digest,
        warnings=records.warnings,
        file_hash=records.file_hash,
    )


def read(
    source: TraceSource,
    label: str | None = None,
    *,
    name: str | None = None,
    progress: Progress | None = None,
    max_bytes: int | None = None,
) -> Trace:
    """Read a trace file and build its model; raises TraceError naming the input and the problem."""
    records = read_kineto(
        source, name=name, progress=progress, max_bytes=max_bytes, frame_suffixes=ENGINE_FRAME_SUFFIXES
    )
    return build(records, label)
