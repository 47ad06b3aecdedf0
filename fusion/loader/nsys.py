"""Nsight Systems SQLite export (`nsys export --type sqlite`) -> TraceRecords, opened read-only.

Built against NVIDIA's published schema (the Nsight Systems SQLite Schema Reference); no real export was
available to test against, so the tests build small files with that schema. Read:
- `CUPTI_ACTIVITY_KIND_KERNEL`: the kernels (start/end in ns, `demangledName` -> `StringIds`, the raw
  `mangledName` where present, `correlationId`, `streamId`, `deviceId`; kernels of a graph replay
  carry the correlation id of their `cudaGraphLaunch`, as in Kineto);
- `CUPTI_ACTIVITY_KIND_MEMCPY` / `_MEMSET`: copies and memsets as GPU work, named like Kineto's
  (`Memcpy HtoD (Pinned -> Device)`, `Memset (Device)`);
- `CUPTI_ACTIVITY_KIND_RUNTIME`: the launch side (`nameId` -> `StringIds`; thread from `globalTid`);
- `NVTX_EVENTS`: push/pop and start/end ranges as annotations (`text`, or `textId` -> `StringIds`);
- `TARGET_INFO_GPU`: each device's name (`id`, else `cuDevice`, matched to the kernels' `deviceId`);
- `CUPTI_ACTIVITY_KIND_GRAPH_TRACE`: graph replays recorded whole (`--cuda-graph-trace=graph`), whose
  kernels are then missing: a warning says so.
Tables are created lazily by the exporter, so each optional table and column is used only where present.
A file that is SQLite but not an export, a damaged or truncated one, or a rocpd database gets one line.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from fusion.errors import TraceError
from fusion.loader.assemble import CpuRows, GpuRows, intern, microseconds
from fusion.loader.cpu_events import RangeKind
from fusion.loader.kineto import TraceRecords
from fusion.loader.reader import RawInput, TraceSource
from fusion.vocabulary import GPU_MEMCPY, GPU_MEMSET

FORMAT = "Nsight Systems SQLite"
KERNELS, STRINGS, RUNTIME = "CUPTI_ACTIVITY_KIND_KERNEL", "StringIds", "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMCPY, MEMSET, NVTX, GPUS = (
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "NVTX_EVENTS",
    "TARGET_INFO_GPU",
)
GRAPH_TRACE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
NVTX_RANGES = (59, 60)
"""ENUM_NSYS_EVENT_TYPE of NVTX push/pop ranges (NvtxPushPopRange) and start/end ranges (NvtxStartEndRange)."""
COPY_KINDS = {
    1: "HtoD",
    2: "DtoH",
    3: "HtoA",
    4: "AtoH",
    5: "AtoA",
    6: "AtoD",
    7: "DtoA",
    8: "DtoD",
    9: "HtoH",
    10: "PtoP",
}
"""CUpti_ActivityMemcpyKind."""
MEMORY_KINDS = {
    1: "Pageable",
    2: "Pinned",
    3: "Device",
    4: "Array",
    5: "Managed",
    6: "Device Static",
    7: "Managed Static",
}
"""CUpti_ActivityMemoryKind."""
ROCPD_PREFIX = "rocpd_"
BATCH_ROWS = 1 << 16
GLOBAL_ID_PART = 0x1000000
"""A serialized globalTid holds the pid and the tid in 24-bit fields: pid = gtid / 2^24 % 2^24, tid = gtid % 2^24."""


def read_sqlite(source: TraceSource, raw: RawInput) -> TraceRecords:
    """The records of an SQLite trace file opened as `raw`; raises TraceError for anything that cannot be read."""
    connection = _connect(source, raw)
    try:
        return _Export(raw.source, connection).records(raw.sha256, raw.file_hash)
    except sqlite3.Error as exc:
        raise _damaged(raw.source, exc) from None
    finally:
        connection.close()


def _damaged(source: str, exc: sqlite3.Error) -> TraceError:
    return TraceError(source, f"the SQLite file cannot be read ({exc}); truncated or damaged?")


def _connect(source: TraceSource, raw: RawInput) -> sqlite3.Connection:
    """A read-only connection: to the file itself when `source` is a plain file path, else to the bytes
    (an upload, or a compressed file) copied into memory. The digest covers the bytes either way."""
    try:
        if isinstance(source, (str, os.PathLike)) and not raw.gzipped and Path(source).is_file():
            for _ in raw.chunks:  # the digest
                pass
            uri = f"file:{quote(os.fspath(Path(source).resolve()))}?mode=ro&immutable=1"
            connection = sqlite3.connect(uri, uri=True)
        else:
            connection = sqlite3.connect(":memory:")
            connection.deserialize(b"".join(raw.chunks))
        connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise _damaged(raw.source, exc) from None
    return connection


class _Export:
    """One export's tables, read into the common columns."""

    def __init__(self, source: str, connection: sqlite3.Connection) -> None:
        self.source = source
        self.db = connection
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')").fetchall()
        self.tables = {name for (name,) in rows}
        self.gpu = GpuRows()
        self.cpu = CpuRows()
        self.work: dict[str, str] = {}
        self.warnings: list[str] = []
        self._check_kind()

    def _check_kind(self) -> None:
        if any(t.startswith(ROCPD_PREFIX) for t in self.tables):
            raise TraceError(
                self.source,
                "a rocpd database (rocprofv3's SQLite output) is not read yet; write JSON instead "
                "(rocprofv3 --output-format json) or convert it (rocpd convert --output-format csv)",
            )
        if STRINGS not in self.tables:
            found = ", ".join(sorted(self.tables)[:8]) or "none"
            raise TraceError(
                self.source,
                f"an SQLite file that is no Nsight Systems export (no {STRINGS} table; its tables: {found}); "
                "export a report with `nsys export --type sqlite`",
            )

    def columns(self, table: str) -> set[str]:
        return {row[1] for row in self.db.execute(f'PRAGMA table_info("{table}")')}

    def rows(self, query: str, parameters: tuple[Any, ...] = ()) -> Iterator[list[tuple[Any, ...]]]:
        cursor = self.db.execute(query, parameters)
        while batch := cursor.fetchmany(BATCH_ROWS):
            yield batch

    def strings(self, table: str, column: str) -> dict[int, str]:
        """{id: text} of the StringIds a column of `table` refers to."""
        query = f'SELECT id, value FROM {STRINGS} WHERE id IN (SELECT DISTINCT "{column}" FROM "{table}")'
        return dict(self.db.execute(query).fetchall())

    def records(self, digest: str, file_hash: str) -> TraceRecords:
        raw_names = self._kernels() if KERNELS in self.tables else {}
        if MEMCPY in self.tables:
            self._copies()
        if MEMSET in self.tables:
            self._memsets()
        if RUNTIME in self.tables:
            self._launches()
        if NVTX in self.tables:
            self._ranges()
        self._graph_note()
        device_names, properties = self._gpus()
        table = self.gpu.table()
        if table.empty:
            self.warnings.append(f"{self.source}: no kernels in the export ({KERNELS} is missing or empty)")
        gpu = next(iter(device_names.values()), "NVIDIA GPU, name not recorded")
        return TraceRecords(
            source=self.source,
            digest=digest,
            file_hash=file_hash,
            platform="NVIDIA",
            platform_evidence="Nsight Systems export (CUPTI tables)",
            gpu=gpu,
            gpu_recorded=bool(device_names),
            device_properties=properties,
            kernels=table,
            cpu=self.cpu.events(),
            warnings=self.warnings,
            format=FORMAT,
            raw_names=raw_names,
            work=self.work,
            device_names=device_names,
        )

    def _kernels(self) -> dict[str, str]:
        columns = self.columns(KERNELS)
        mangled = "mangledName" in columns
        names = self.strings(KERNELS, "demangledName")
        raw = self.strings(KERNELS, "mangledName") if mangled else {}
        select = f'start, "end", correlationId, streamId, deviceId, demangledName{", mangledName" if mangled else ""}'
        raw_names: dict[str, str] = {}
        for batch in self.rows(f'SELECT {select} FROM {KERNELS} WHERE start IS NOT NULL AND "end" IS NOT NULL'):
            columns_of = list(zip(*batch))
            shown = [names.get(n, f"<StringIds {n}>") for n in columns_of[5]]
            if mangled:
                raw_names.update((s, raw[m]) for s, m in zip(shown, columns_of[6]) if m in raw and raw[m] != s)
            self._add(columns_of, intern(shown, self.gpu.names))
        return raw_names

    def _copies(self) -> None:
        columns = self.columns(MEMCPY)
        kinds = ", srcKind, dstKind" if {"srcKind", "dstKind"} <= columns else ", NULL, NULL"
        query = f'SELECT start, "end", correlationId, streamId, deviceId, copyKind{kinds} FROM {MEMCPY}'
        for batch in self.rows(query):
            columns_of = list(zip(*batch))
            names = [_copy_name(*kind) for kind in zip(columns_of[5], columns_of[6], columns_of[7])]
            self.work.update(dict.fromkeys(names, GPU_MEMCPY))
            self._add(columns_of, intern(names, self.gpu.names))

    def _memsets(self) -> None:
        kind = "memKind" if "memKind" in self.columns(MEMSET) else "NULL"
        for batch in self.rows(f'SELECT start, "end", correlationId, streamId, deviceId, {kind} FROM {MEMSET}'):
            columns_of = list(zip(*batch))
            names = [f"Memset ({MEMORY_KINDS.get(k, 'Device')})" for k in columns_of[5]]
            self.work.update(dict.fromkeys(names, GPU_MEMSET))
            self._add(columns_of, intern(names, self.gpu.names))

    def _add(self, columns: list[tuple[Any, ...]], codes: np.ndarray) -> None:
        """GPU rows from (start, end, correlationId, streamId, deviceId, ...) columns."""
        ts, dur = microseconds(np.array(columns[0], dtype=np.int64), np.array(columns[1], dtype=np.int64))
        correlation, stream, device = (_ids(c) for c in columns[2:5])
        self.gpu.add(codes, ts, dur, correlation, stream, device)

    def _launches(self) -> None:
        names = self.strings(RUNTIME, "nameId")
        query = f'SELECT start, "end", correlationId, globalTid, nameId FROM {RUNTIME} WHERE correlationId IS NOT NULL'
        for batch in self.rows(query):
            start, end, correlation, thread, name = zip(*batch)
            ts, dur = microseconds(np.array(start, dtype=np.int64), np.array(end, dtype=np.int64))
            codes = intern((names.get(n, f"<StringIds {n}>") for n in name), self.cpu.names)
            self.cpu.add_launches(_ids(correlation), ts, dur, self._threads(thread), codes)

    def _ranges(self) -> None:
        columns = self.columns(NVTX)
        text = "COALESCE(e.text, s.value)" if "textId" in columns else "e.text"
        join = f"LEFT JOIN {STRINGS} s ON s.id = e.textId" if "textId" in columns else ""
        kinds = f" AND e.eventType IN {NVTX_RANGES}" if "eventType" in columns else ""
        query = (
            f'SELECT e.start, e."end", e.globalTid, {text} FROM {NVTX} e {join} '
            f'WHERE e."end" IS NOT NULL AND e."end" >= e.start{kinds} AND {text} IS NOT NULL'
        )
        for batch in self.rows(query):
            start, end, thread, name = zip(*batch)
            begin, length = microseconds(np.array(start, dtype=np.int64), np.array(end, dtype=np.int64))
            codes = intern(name, self.cpu.names)
            self.cpu.add_ranges(RangeKind.ANNOTATION, begin, begin + length, self._threads(thread), codes)

    def _threads(self, global_tids: tuple[Any, ...]) -> np.ndarray:
        tids = [g if isinstance(g, int) else None for g in global_tids]
        pids = [None if g is None else g // GLOBAL_ID_PART % GLOBAL_ID_PART for g in tids]
        return self.cpu.thread_codes(pids, [None if g is None else g % GLOBAL_ID_PART for g in tids])

    def _graph_note(self) -> None:
        if GRAPH_TRACE not in self.tables:
            return
        (count,) = self.db.execute(f"SELECT count(*) FROM {GRAPH_TRACE}").fetchone()
        if count:
            self.warnings.append(
                f"{count:,} CUDA graph replays are recorded as whole graphs, without their kernels (nsys "
                "--cuda-graph-trace=graph): those kernels are not in this trace; profile with "
                "--cuda-graph-trace=node to see them"
            )

    def _gpus(self) -> tuple[dict[int, str], list[dict[str, Any]]]:
        """{deviceId: name} and deviceProperties-like entries from TARGET_INFO_GPU."""
        if GPUS not in self.tables:
            return {}, []
        columns = self.columns(GPUS)
        optional = [c for c in ("cuDevice", "threadsPerWarp", "smCount") if c in columns]
        query = f"SELECT id, name{''.join(', ' + c for c in optional)} FROM {GPUS}"
        used = set(self.gpu_devices())
        names: dict[int, str] = {}
        properties = []
        for row in self.db.execute(query).fetchall():
            entry = dict(zip(("id", "name", *optional), row))
            device = entry["id"] if entry["id"] in used or "cuDevice" not in entry else entry["cuDevice"]
            if isinstance(device, int) and isinstance(entry["name"], str) and entry["name"].strip():
                names.setdefault(device, entry["name"].strip())
            properties.append(
                {
                    "id": device,
                    "name": entry["name"],
                    "warpSize": entry.get("threadsPerWarp"),
                    "numSms": entry.get("smCount"),
                }
            )
        return names, properties

    def gpu_devices(self) -> list[int]:
        return sorted({int(d) for part in self.gpu.parts for d in np.unique(part[5]).tolist()})


def _ids(values: tuple[Any, ...]) -> np.ndarray:
    """Integer ids, -1 where NULL or not an integer."""
    return np.array([v if isinstance(v, int) and v >= 0 else -1 for v in values], dtype=np.int64)


def _copy_name(kind: Any, source: Any, destination: Any) -> str:
    """'Memcpy HtoD (Pinned -> Device)', as CUPTI's activity names it in Kineto."""
    direction = COPY_KINDS.get(kind, "")
    name = f"Memcpy {direction}".rstrip()
    if source in MEMORY_KINDS and destination in MEMORY_KINDS:
        name += f" ({MEMORY_KINDS[source]} -> {MEMORY_KINDS[destination]})"
    return name
