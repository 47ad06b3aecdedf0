"""Small trace files of the formats beside Kineto, written the way their profilers write them.

- rocprofv3 JSON and CSV: the fields rocprofiler-sdk's tool writes (tests/rocprofv3 of ROCm/rocprofiler-sdk read
  the same fields; the shared MI350X file has this layout);
- Nsight Systems SQLite: tables created with the columns and types of NVIDIA's published SQLite Schema Reference
  (no real export was available), filled with the rows a test needs.
"""

from __future__ import annotations

import csv
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

GPU_AGENT = 2
KIND_NAMES = [
    {"kind": "NONE", "operations": []},
    {"kind": "HIP_RUNTIME_API", "operations": ["hipNone", "hipLaunchKernel", "hipGraphLaunch", "hipMemcpyAsync"]},
    {"kind": "MARKER_CORE_RANGE_API", "operations": ["roctxRangePush"]},
    {
        "kind": "MEMORY_COPY",
        "operations": ["MEMORY_COPY_NONE", "MEMORY_COPY_HOST_TO_DEVICE", "MEMORY_COPY_DEVICE_TO_DEVICE"],
    },
    {"kind": "KERNEL_DISPATCH", "operations": ["NONE", "KERNEL_DISPATCH_ENQUEUE", "KERNEL_DISPATCH_COMPLETE"]},
]
HIP_KIND, MARKER_KIND, COPY_KIND, DISPATCH_KIND = 1, 2, 3, 4
LAUNCH, GRAPH_LAUNCH, MEMCPY_ASYNC = 1, 2, 3
HOST_TO_DEVICE, DEVICE_TO_DEVICE = 1, 2


@dataclass
class RocprofRun:
    """A rocprofv3 run being written: GPU agents, kernel symbols, dispatches, HIP calls, roctx ranges, copies.

    Times are in ns; `agents` are (handle, GPU index, product name, gfx name)."""

    agents: list[tuple[int, int, str, str]] = field(default_factory=lambda: [(100, 0, "AMD Instinct MI350X", "gfx950")])
    symbols: dict[int, str] = field(default_factory=dict)
    dispatches: list[dict[str, Any]] = field(default_factory=list)
    hip: list[dict[str, Any]] = field(default_factory=list)
    markers: list[dict[str, Any]] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)
    copies: list[dict[str, Any]] = field(default_factory=list)
    pid: int = 908
    correlation: int = 0

    def symbol(self, name: str) -> int:
        for kernel_id, known in self.symbols.items():
            if known == name:
                return kernel_id
        kernel_id = len(self.symbols) + 1
        self.symbols[kernel_id] = name
        return kernel_id

    def dispatch(self, name: str, start: int, dur: int, correlation: int, agent: int = 100, stream: int = 5) -> None:
        self.dispatches.append(
            {
                "size": 184,
                "kind": DISPATCH_KIND,
                "operation": 2,
                "thread_id": self.pid,
                "correlation_id": {"internal": correlation, "external": 0},
                "start_timestamp": start,
                "end_timestamp": start + dur,
                "dispatch_info": {
                    "size": 72,
                    "agent_id": {"handle": agent},
                    "queue_id": {"handle": 16},
                    "kernel_id": self.symbol(name),
                    "dispatch_id": len(self.dispatches) + 1,
                    "workgroup_size": {"x": 256, "y": 1, "z": 1},
                    "grid_size": {"x": 4096, "y": 1, "z": 1},
                },
                "stream_id": {"handle": stream},
            }
        )

    def call(self, operation: int, start: int, dur: int, tid: int = 908) -> int:
        """A HIP API call; its correlation id."""
        self.correlation += 1
        self.hip.append(_api(HIP_KIND, operation, start, dur, tid, self.correlation))
        return self.correlation

    def launch(self, name: str, cpu: int, gpu: int, dur: int, agent: int = 100) -> None:
        self.dispatch(name, gpu, dur, self.call(LAUNCH, cpu, 2_000), agent)

    def graph(self, names: list[str], cpu: int, gpu: int, dur: int) -> None:
        correlation = self.call(GRAPH_LAUNCH, cpu, 5_000)
        for i, name in enumerate(names):
            self.dispatch(name, gpu + i * (dur + 500), dur, correlation)

    def marker(self, message: str, start: int, end: int, tid: int = 908) -> None:
        self.correlation += 1
        self.markers.append(_api(MARKER_KIND, 0, start, end - start, tid, self.correlation))
        self.messages.append({"key": self.correlation, "value": message})

    def copy(self, direction: int, start: int, dur: int, src: int, dst: int) -> None:
        correlation = self.call(MEMCPY_ASYNC, start - 3_000, 1_000)
        record = _api(COPY_KIND, direction, start, dur, self.pid, correlation)
        self.copies.append({**record, "src_agent_id": {"handle": src}, "dst_agent_id": {"handle": dst}, "bytes": 4096})

    def data(self) -> bytes:
        agents = [
            {
                "size": 600,
                "id": {"handle": 1},
                "type": 1,
                "name": "AMD EPYC",
                "product_name": "AMD EPYC",
                "logical_node_type_id": 0,
            }
        ] + [
            {
                "size": 600,
                "id": {"handle": handle},
                "type": GPU_AGENT,
                "name": arch,
                "product_name": product,
                "logical_node_type_id": index,
                "wave_front_size": 64,
                "cu_count": 256,
            }
            for handle, index, product, arch in self.agents
        ]
        tool = {
            "metadata": {"pid": self.pid, "init_time": 0, "fini_time": 1, "command": ["python", "train.py"]},
            "agents": agents,
            "counters": [],
            "strings": {"callback_records": [], "buffer_records": KIND_NAMES, "marker_api": self.messages},
            "code_objects": [],
            "kernel_symbols": [
                {"size": 88, "kernel_id": k, "code_object_id": 1, "kernel_name": n, "formatted_kernel_name": n}
                for k, n in self.symbols.items()
            ],
            "host_functions": [],
            "summary": [],
            "callback_records": {"counter_collection": []},
            "buffer_records": {
                "kernel_dispatch": self.dispatches,
                "hip_api": self.hip,
                "hsa_api": [],
                "marker_api": self.markers,
                "memory_copy": self.copies,
                "scratch_memory": [],
            },
        }
        return orjson.dumps({"rocprofiler-sdk-tool": [tool]})

    def write_csv(self, folder: Path, prefix: str = "908_", *, siblings: bool = True) -> Path:
        """The same run as rocprofv3 --output-format csv writes it; the kernel trace's path."""
        agent_of = {handle: index for handle, index, _, _ in self.agents}
        kernel_rows = [
            {
                "Kind": "KERNEL_DISPATCH",
                "Agent_Id": f"Agent {agent_of[d['dispatch_info']['agent_id']['handle']] + 1}",
                "Queue_Id": 16,
                "Stream_Id": d["stream_id"]["handle"],
                "Thread_Id": self.pid,
                "Dispatch_Id": d["dispatch_info"]["dispatch_id"],
                "Kernel_Id": d["dispatch_info"]["kernel_id"],
                "Kernel_Name": self.symbols[d["dispatch_info"]["kernel_id"]],
                "Correlation_Id": d["correlation_id"]["internal"],
                "Start_Timestamp": d["start_timestamp"],
                "End_Timestamp": d["end_timestamp"],
                "Workgroup_Size_X": 256,
            }
            for d in self.dispatches
        ]
        kernel_path = folder / f"{prefix}kernel_trace.csv"
        _write_csv(kernel_path, kernel_rows)
        if not siblings:
            return kernel_path
        operations = KIND_NAMES[HIP_KIND]["operations"]
        _write_csv(
            folder / f"{prefix}hip_api_trace.csv",
            [_api_row("HIP_RUNTIME_API", operations[h["operation"]], h, self.pid) for h in self.hip],
        )
        messages = {m["key"]: m["value"] for m in self.messages}
        _write_csv(
            folder / f"{prefix}marker_api_trace.csv",
            [
                _api_row("MARKER_CORE_RANGE_API", messages[m["correlation_id"]["internal"]], m, self.pid)
                for m in self.markers
            ],
        )
        agent_rows = [
            {
                "Node_Id": 0,
                "Logical_Node_Id": 0,
                "Logical_Node_Type_Id": 0,
                "Agent_Type": "CPU",
                "Name": "AMD EPYC",
                "Product_Name": "AMD EPYC",
            }
        ]
        agent_rows += [
            {
                "Node_Id": index + 1,
                "Logical_Node_Id": index + 1,
                "Logical_Node_Type_Id": index,
                "Agent_Type": "GPU",
                "Name": arch,
                "Product_Name": product,
            }
            for _, index, product, arch in self.agents
        ]
        _write_csv(folder / f"{prefix}agent_info.csv", agent_rows)
        directions = KIND_NAMES[COPY_KIND]["operations"]
        copy_rows = [
            {
                "Kind": "MEMORY_COPY",
                "Direction": directions[c["operation"]],
                "Source_Agent_Id": f"Agent {agent_of.get(c['src_agent_id']['handle'], -1) + 1}",
                "Destination_Agent_Id": f"Agent {agent_of.get(c['dst_agent_id']['handle'], -1) + 1}",
                "Correlation_Id": c["correlation_id"]["internal"],
                "Start_Timestamp": c["start_timestamp"],
                "End_Timestamp": c["end_timestamp"],
            }
            for c in self.copies
        ]
        _write_csv(folder / f"{prefix}memory_copy_trace.csv", copy_rows)
        return kernel_path


def _api(kind: int, operation: int, start: int, dur: int, tid: int, correlation: int) -> dict[str, Any]:
    return {
        "size": 64,
        "kind": kind,
        "operation": operation,
        "thread_id": tid,
        "correlation_id": {"internal": correlation, "external": 0},
        "start_timestamp": start,
        "end_timestamp": start + dur,
    }


def _api_row(domain: str, function: str, record: dict[str, Any], pid: int) -> dict[str, Any]:
    return {
        "Domain": domain,
        "Function": function,
        "Process_Id": pid,
        "Thread_Id": record["thread_id"],
        "Correlation_Id": record["correlation_id"]["internal"],
        "Start_Timestamp": record["start_timestamp"],
        "End_Timestamp": record["end_timestamp"],
    }


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="") as out:
        if not rows:
            return
        writer = csv.DictWriter(out, fieldnames=list(rows[0]), quoting=csv.QUOTE_NONNUMERIC)
        writer.writeheader()
        writer.writerows(rows)


# -- Nsight Systems SQLite export: tables as NVIDIA's schema reference (3.x) declares them

NSYS_SCHEMA = """
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, busLocation TEXT,
    isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, clockRate INTEGER,
    smCount INTEGER, pwGpuId INTEGER, uuid TEXT, luid INTEGER, chipName TEXT, cuDevice INTEGER,
    threadsPerWarp INTEGER, computeMajor INTEGER, computeMinor INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER,
    launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL,
    gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL,
    blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL,
    localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL,
    sharedMemoryExecuted INTEGER, graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER, graphId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL,
    globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL,
    callchainId INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, deprecatedSrcId INTEGER,
    srcKind INTEGER, dstKind INTEGER, srcDeviceId INTEGER, srcContextId INTEGER, dstDeviceId INTEGER,
    dstContextId INTEGER, migrationCause INTEGER, graphNodeId INTEGER, virtualAddress INTEGER);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, value INTEGER NOT NULL, bytes INTEGER NOT NULL, graphNodeId INTEGER, memKind INTEGER);
CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER,
    category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER,
    domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value INTEGER,
    int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT, binaryData TEXT,
    eventId INTEGER NOT NULL PRIMARY KEY);
CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER,
    globalPid INTEGER, graphId INTEGER NOT NULL, graphExecId INTEGER NOT NULL);
"""
NVTX_PUSH_POP = 59
PID, TID = 4242, 4243
GLOBAL_TID = (PID << 24) | TID
"""A serialized globalTid: the pid and the tid in 24-bit fields."""
COPY_HTOD, COPY_DTOD = 1, 8
MEMORY_PINNED, MEMORY_DEVICE = 2, 3


@dataclass
class NsysExport:
    """An Nsight Systems export being written (times in ns)."""

    gpus: list[tuple[int, str]] = field(default_factory=lambda: [(0, "NVIDIA H100 80GB HBM3")])
    strings: dict[str, int] = field(default_factory=dict)
    kernels: list[tuple[Any, ...]] = field(default_factory=list)
    runtime: list[tuple[Any, ...]] = field(default_factory=list)
    nvtx: list[tuple[Any, ...]] = field(default_factory=list)
    copies: list[tuple[Any, ...]] = field(default_factory=list)
    memsets: list[tuple[Any, ...]] = field(default_factory=list)
    graph_traces: list[tuple[Any, ...]] = field(default_factory=list)
    correlation: int = 0

    def string(self, value: str) -> int:
        return self.strings.setdefault(value, len(self.strings) + 1)

    def kernel(
        self, name: str, start: int, dur: int, correlation: int | None, *, device: int = 0, graph: int | None = None
    ) -> None:
        node = None if graph is None else 1000 + len(self.kernels)
        name_id = self.string(name)
        mangled = self.string(f"_Z{len(name)}{name}v")
        self.kernels.append(
            (
                start,
                start + dur,
                device,
                1,
                None,
                7,
                correlation,
                PID << 24,
                name_id,
                name_id,
                mangled,
                0,
                0,
                32,
                128,
                1,
                1,
                256,
                1,
                1,
                0,
                0,
                0,
                0,
                len(self.kernels),
                0,
                node,
                None,
                graph,
            )
        )

    def call(self, name: str, start: int, dur: int) -> int:
        self.correlation += 1
        self.runtime.append((start, start + dur, 1, GLOBAL_TID, self.correlation, self.string(name), 0, None))
        return self.correlation

    def launch(self, name: str, cpu: int, gpu: int, dur: int, device: int = 0) -> None:
        self.kernel(name, gpu, dur, self.call("cudaLaunchKernel_v7000", cpu, 2_000), device=device)

    def graph(self, names: list[str], cpu: int, gpu: int, dur: int) -> None:
        correlation = self.call("cudaGraphLaunch_v10000", cpu, 5_000)
        for i, name in enumerate(names):
            self.kernel(name, gpu + i * (dur + 500), dur, correlation, graph=77)

    def range(self, text: str, start: int, end: int, *, registered: bool = False) -> None:
        text_id = self.string(text) if registered else None
        self.nvtx.append(
            (
                start,
                end,
                NVTX_PUSH_POP,
                None,
                None,
                None,
                None if registered else text,
                GLOBAL_TID,
                None,
                text_id,
                0,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                len(self.nvtx) + 1,
            )
        )

    def copy(
        self, start: int, dur: int, kind: int = COPY_HTOD, src: int = MEMORY_PINNED, dst: int = MEMORY_DEVICE
    ) -> None:
        correlation = self.call("cudaMemcpyAsync_v3020", start - 3_000, 1_000)
        self.copies.append(
            (
                start,
                start + dur,
                0,
                1,
                None,
                7,
                correlation,
                PID << 24,
                4096,
                kind,
                None,
                src,
                dst,
                0,
                1,
                0,
                1,
                None,
                None,
                None,
            )
        )

    def memset(self, start: int, dur: int) -> None:
        correlation = self.call("cudaMemsetAsync_v3020", start - 3_000, 1_000)
        self.memsets.append((start, start + dur, 0, 1, None, 7, correlation, PID << 24, 0, 4, None, MEMORY_DEVICE))

    def whole_graph(self, start: int, dur: int) -> None:
        self.graph_traces.append(
            (
                start,
                start + dur,
                0,
                1,
                None,
                7,
                self.call("cudaGraphLaunch_v10000", start - 4_000, 1_000),
                PID << 24,
                5,
                6,
            )
        )

    def write(self, path: Path, *, tables: tuple[str, ...] | None = None) -> Path:
        """The export as an SQLite file; `tables` keeps only these tables of the schema."""
        rows = {
            "StringIds": [(i, v) for v, i in self.strings.items()],
            "TARGET_INFO_GPU": [
                (0, d, n, "0000:1b:00.0", 1, 0, 0, 0, 0, 132, 0, "", 0, "GH100", d, 32, 9, 0) for d, n in self.gpus
            ],
            "CUPTI_ACTIVITY_KIND_KERNEL": self.kernels,
            "CUPTI_ACTIVITY_KIND_RUNTIME": self.runtime,
            "CUPTI_ACTIVITY_KIND_MEMCPY": self.copies,
            "CUPTI_ACTIVITY_KIND_MEMSET": self.memsets,
            "NVTX_EVENTS": self.nvtx,
            "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": self.graph_traces,
        }
        with sqlite3.connect(path) as db:
            for statement in NSYS_SCHEMA.split(";"):
                table = statement.split("(")[0].split()[-1] if statement.strip() else ""
                if table and (tables is None or table in tables):
                    db.execute(statement)
                    if rows[table]:
                        marks = ", ".join("?" * len(rows[table][0]))
                        db.executemany(f"INSERT INTO {table} VALUES ({marks})", rows[table])
        db.close()
        return path
