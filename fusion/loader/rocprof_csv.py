"""rocprofv3 CSV output (`--output-format csv`) -> TraceRecords: `<prefix>kernel_trace.csv` and, beside it
when present, `<prefix>hip_api_trace.csv` (launches), `<prefix>marker_api_trace.csv` (roctx ranges),
`<prefix>memory_copy_trace.csv` (copies as GPU work) and `<prefix>agent_info.csv` (GPU names).

The kernel trace is read in chunks of rows as its bytes arrive, keeping only the columns below; an upload
(bytes) has no siblings and reads as the kernel trace alone. `Agent_Id` is "Agent N" (rocprofv3's default
relative index, the agent's logical node id), "GPU N" (type-relative: the GPU index) or a plain number; it
becomes the GPU index through agent_info.csv where that file is there. The content digest covers the
sibling files read, so a changed sibling is a different trace; the table cache, which knows the kernel
trace's path only, is refreshed with --no-cache after a sibling alone was edited.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fusion.errors import TraceError
from fusion.loader.assemble import CpuRows, GpuRows, intern, microseconds
from fusion.loader.cpu_events import RangeKind
from fusion.loader.demangle import display_names
from fusion.loader.kineto import TraceRecords
from fusion.loader.reader import RawInput, TraceSource
from fusion.loader.rocprof import COPY_NAMES, PLATFORM_EVIDENCE, GpuAgents
from fusion.vocabulary import GPU_MEMCPY

FORMAT = "rocprofv3 CSV"
KERNEL_SUFFIX = "kernel_trace.csv"
SIBLINGS = {
    "hip": "hip_api_trace.csv",
    "marker": "marker_api_trace.csv",
    "copy": "memory_copy_trace.csv",
    "agents": "agent_info.csv",
}
KERNEL_COLUMNS = (
    "Agent_Id",
    "Queue_Id",
    "Stream_Id",
    "Kernel_Name",
    "Correlation_Id",
    "Start_Timestamp",
    "End_Timestamp",
)
REQUIRED = {"Kernel_Name", "Start_Timestamp", "End_Timestamp"}
API_COLUMNS = ("Function", "Process_Id", "Thread_Id", "Correlation_Id", "Start_Timestamp", "End_Timestamp")
COPY_COLUMNS = (
    "Direction",
    "Source_Agent_Id",
    "Destination_Agent_Id",
    "Correlation_Id",
    "Start_Timestamp",
    "End_Timestamp",
)
CHUNK_ROWS = 200_000
_AGENT = re.compile(r"^\s*(?:(GPU|Agent)\s+)?(\d+)\s*$")


def read_rocprof_csv(source: TraceSource, raw: RawInput) -> TraceRecords:
    """The records of a rocprofv3 kernel_trace.csv opened as `raw`, with its sibling files where found."""
    siblings = _siblings(source)
    digest = hashlib.sha256()
    agents, agent_index = _agents(raw.source, siblings.get("agents"), digest)
    gpu, kernel_raw = GpuRows(), dict[str, str]()
    for chunk in _csv_chunks(raw.source, _ChunkReader(raw.chunks), KERNEL_COLUMNS):
        kernel_raw |= _add_kernels(raw.source, gpu, chunk, agent_index)
    digest.update(raw.sha256.encode())
    work: dict[str, str] = {}
    if "copy" in siblings:
        copies = _read_sibling(raw.source, siblings["copy"], COPY_COLUMNS, digest)
        work = _add_copies(f"{raw.source} ({SIBLINGS['copy']})", gpu, copies, agent_index)
    cpu = CpuRows()
    for key, kind in (("hip", None), ("marker", RangeKind.ANNOTATION)):
        if key in siblings:
            calls = _read_sibling(raw.source, siblings[key], API_COLUMNS, digest)
            _add_api(f"{raw.source} ({SIBLINGS[key]})", cpu, calls, kind)
    table = gpu.table()
    warnings = [] if not table.empty else [f"{raw.source}: no kernel dispatches in the kernel trace"]
    if "hip" not in siblings and isinstance(source, (str, os.PathLike)):
        warnings.append(
            f"no {SIBLINGS['hip']} beside it: kernels have no launches (rocprofv3 --hip-trace records them)"
        )
    name, recorded = agents.facts()
    return TraceRecords(
        source=raw.source,
        digest=digest.hexdigest() if siblings else raw.sha256,
        file_hash="" if siblings else raw.file_hash,  # the hash proves one file: with siblings, not cached
        platform="AMD",
        platform_evidence=PLATFORM_EVIDENCE,
        gpu=name,
        gpu_recorded=recorded,
        device_properties=agents.properties,
        kernels=table,
        cpu=cpu.events(),
        warnings=warnings,
        format=FORMAT,
        raw_names=kernel_raw,
        work=work,
        device_names=agents.names,
    )


def _siblings(source: TraceSource) -> dict[str, Path]:
    """The sibling files of a `<prefix>kernel_trace.csv` path that exist."""
    if not isinstance(source, (str, os.PathLike)):
        return {}
    path = Path(source)
    if not path.name.endswith(KERNEL_SUFFIX):
        return {}
    prefix = path.name.removesuffix(KERNEL_SUFFIX)
    found = {key: path.with_name(prefix + name) for key, name in SIBLINGS.items()}
    return {key: file for key, file in found.items() if file.is_file()}


class _ChunkReader(io.RawIOBase):
    """A binary file over an iterator of chunks, so pandas reads the CSV as its bytes arrive."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self.chunks = chunks
        self.rest = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not len(self.rest):
            chunk = next(self.chunks, None)
            if chunk is None:
                return 0
            self.rest = memoryview(chunk)
        size = min(len(buffer), len(self.rest))
        buffer[:size] = self.rest[:size]
        self.rest = self.rest[size:]
        return size


def _csv_chunks(source: str, stream: Any, wanted: tuple[str, ...]) -> Iterator[pd.DataFrame]:
    """The CSV's wanted columns (those present) in chunks of rows; a TraceError names what is wrong."""
    try:
        reader = pd.read_csv(
            io.BufferedReader(stream) if isinstance(stream, io.RawIOBase) else stream,
            usecols=lambda column: column in wanted,
            dtype={
                c: str
                for c in ("Agent_Id", "Source_Agent_Id", "Destination_Agent_Id", "Kernel_Name", "Function", "Direction")
            },
            chunksize=CHUNK_ROWS,
            keep_default_na=False,
        )
        yield from reader
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
        raise TraceError(source, f"the rocprofv3 CSV cannot be read ({str(exc).splitlines()[0]})") from None


def _read_sibling(source: str, path: Path, wanted: tuple[str, ...], digest: Any) -> pd.DataFrame:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(source, f"{path.name} beside it cannot be read ({exc.strerror or exc})") from None
    digest.update(hashlib.sha256(data).digest())
    parts = list(_csv_chunks(f"{source} ({path.name})", io.BytesIO(data), wanted))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(wanted))


def _times(source: str, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """ts and dur (µs) of the rows' Start_Timestamp and End_Timestamp (ns)."""
    try:
        start, end = (
            pd.to_numeric(frame[c], errors="raise").to_numpy(np.int64) for c in ("Start_Timestamp", "End_Timestamp")
        )
    except (ValueError, TypeError, KeyError):
        raise TraceError(source, "no usable Start_Timestamp and End_Timestamp columns") from None
    return microseconds(start, end)


def _ids(frame: pd.DataFrame, column: str) -> np.ndarray:
    """An id column as int64, -1 where absent or not a number."""
    if column not in frame:
        return np.full(len(frame), -1, dtype=np.int64)
    return pd.to_numeric(frame[column], errors="coerce").fillna(-1).to_numpy(np.int64)


def _add_kernels(source: str, gpu: GpuRows, chunk: pd.DataFrame, agent_index: dict[str, int]) -> dict[str, str]:
    missing = REQUIRED - set(chunk.columns)
    if missing:
        raise TraceError(source, f"the kernel trace has no {', '.join(sorted(missing))} column")
    symbols = chunk["Kernel_Name"].astype("category")
    names, raw = display_names([str(s) for s in symbols.cat.categories])
    codes = intern(names, gpu.names)[symbols.cat.codes.to_numpy()]
    ts, dur = _times(source, chunk)
    stream = _ids(chunk, "Stream_Id" if "Stream_Id" in chunk else "Queue_Id")
    gpu.add(
        codes, ts, dur, _ids(chunk, "Correlation_Id"), stream, _devices(chunk.get("Agent_Id"), agent_index, len(chunk))
    )
    return raw


def _devices(agent_ids: pd.Series | None, agent_index: dict[str, int], count: int) -> np.ndarray:
    """The GPU index of each row's agent id text; -1 where it cannot be told."""
    if agent_ids is None:
        return np.full(count, -1, dtype=np.int64)
    codes = agent_ids.astype("category")
    per_text = [agent_index.get(str(text), _agent_number(str(text))) for text in codes.cat.categories]
    return np.array(per_text + [-1], dtype=np.int64)[codes.cat.codes.to_numpy()]


def _agent_number(text: str) -> int:
    match = _AGENT.match(text)
    return int(match.group(2)) if match else -1


def _agents(source: str, path: Path | None, digest: Any) -> tuple[GpuAgents, dict[str, int]]:
    """The GPUs of agent_info.csv, and the GPU index of each way kernel_trace.csv may name an agent."""
    agents = GpuAgents()
    if path is None:
        return agents, {}
    info = _read_sibling(
        source,
        path,
        (
            "Node_Id",
            "Logical_Node_Id",
            "Logical_Node_Type_Id",
            "Agent_Type",
            "Name",
            "Product_Name",
            "Wave_Front_Size",
            "Cu_Count",
        ),
        digest,
    )
    index: dict[str, int] = {}
    if "Agent_Type" not in info:
        return agents, index
    gpus = info[info["Agent_Type"].astype(str) == "GPU"]
    for position, row in enumerate(gpus.itertuples(index=False)):
        values = row._asdict()
        logical = _int(values.get("Logical_Node_Id"))
        device = _int(values.get("Logical_Node_Type_Id"), position)
        agents.add(
            logical,
            device,
            str(values.get("Product_Name", "")),
            str(values.get("Name", "")),
            _int(values.get("Wave_Front_Size"), 0),
            _int(values.get("Cu_Count"), 0),
        )
        index[f"Agent {logical}"] = index[str(logical)] = device
        index[f"GPU {device}"] = device
    return agents, index


def _int(value: Any, default: int = -1) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _add_copies(source: str, gpu: GpuRows, frame: pd.DataFrame, agent_index: dict[str, int]) -> dict[str, str]:
    if frame.empty:
        return {}
    directions = frame["Direction"].astype(str).str.removeprefix("MEMORY_COPY_").astype("category")
    names = [COPY_NAMES.get(d, f"Memcpy {d}") for d in directions.cat.categories]
    codes = intern(names, gpu.names)[directions.cat.codes.to_numpy()]
    ts, dur = _times(source, frame)
    origin = _devices(frame.get("Source_Agent_Id"), agent_index, len(frame))
    destination = _devices(frame.get("Destination_Agent_Id"), agent_index, len(frame))
    to_gpu = directions.astype(str).str.endswith("TO_DEVICE").to_numpy()
    gpu.add(
        codes, ts, dur, _ids(frame, "Correlation_Id"), np.full(len(frame), -1), np.where(to_gpu, destination, origin)
    )
    return dict.fromkeys(names, GPU_MEMCPY)


def _add_api(source: str, cpu: CpuRows, frame: pd.DataFrame, kind: RangeKind | None) -> None:
    """hip_api rows as launches (kind None) or marker rows as ranges of `kind`."""
    if frame.empty:
        return
    ts, dur = _times(source, frame)
    threads = cpu.thread_codes(frame["Process_Id"].tolist(), frame["Thread_Id"].tolist())
    functions = frame["Function"].astype("category")
    codes = intern((str(f) for f in functions.cat.categories), cpu.names)[functions.cat.codes.to_numpy()]
    if kind is None:
        cpu.add_launches(_ids(frame, "Correlation_Id"), ts, dur, threads, codes)
    else:
        cpu.add_ranges(kind, ts, ts + dur, threads, codes)
