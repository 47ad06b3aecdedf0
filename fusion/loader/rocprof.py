"""rocprofv3 (rocprofiler-sdk) JSON output -> TraceRecords, streamed: the file is walked once and only the
parts below are kept, the large arrays a piece at a time (fusion.loader.json_walk).

`rocprofiler-sdk-tool[i]`:
- `buffer_records.kernel_dispatch`: the kernels: start/end (ns), `correlation_id.internal`,
  `dispatch_info.kernel_id` (-> `kernel_symbols[].kernel_name`, a code-object symbol: shown demangled,
  kept raw), `dispatch_info.agent_id` (-> `agents[]`), `stream_id` (the HIP stream; the queue where absent);
- `buffer_records.memory_copy`: copies the GPU ran, as GPU work named like Kineto's (`Memcpy HtoD (Host ->
  Device)`); memsets are blit kernels (`__amd_rocclr_fillBufferAligned`), so they come as kernels;
- `buffer_records.hip_api`: the launch side (named through `strings.buffer_records[kind].operations`), so
  correlation groups (`hipGraphLaunch`) and launch-to-kernel links work as for Kineto;
- `buffer_records.marker_api`: roctx ranges (messages in `strings.marker_api`) as annotations;
- `agents[]`: the GPUs (`product_name`, `name` such as gfx950); a kernel's device is its GPU's index.
rocprofv3 records no PyTorch ops, so such a trace has no op records and says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from fusion.errors import TraceError
from fusion.loader.assemble import CpuRows, GpuRows, intern, microseconds
from fusion.loader.cpu_events import RangeKind
from fusion.loader.demangle import display_names
from fusion.loader.json_walk import Action, JsonPath, walk
from fusion.loader.kineto import TraceRecords
from fusion.loader.reader import RawInput
from fusion.vocabulary import GPU_MEMCPY

TOOL_KEY = "rocprofiler-sdk-tool"
FORMAT = "rocprofv3 JSON"
PLATFORM_EVIDENCE = "rocprofv3 (rocprofiler-sdk) output, which only AMD GPUs write"
GPU_AGENT_TYPE = 2
"""rocprofiler_agent_type_t: 1 is a CPU, 2 a GPU."""
COPY_NAMES = {
    "HOST_TO_HOST": "Memcpy HtoH (Host -> Host)",
    "HOST_TO_DEVICE": "Memcpy HtoD (Host -> Device)",
    "DEVICE_TO_HOST": "Memcpy DtoH (Device -> Host)",
    "DEVICE_TO_DEVICE": "Memcpy DtoD (Device -> Device)",
}
"""rocprofv3's copy directions, named as Kineto names the same copies on AMD."""
NO_ID = -1


class _Handle(msgspec.Struct, frozen=True, gc=False):
    handle: int = NO_ID


class _Correlation(msgspec.Struct, frozen=True, gc=False):
    internal: int = NO_ID


class _DispatchInfo(msgspec.Struct, gc=False):
    kernel_id: int
    agent_id: _Handle = _Handle()
    queue_id: _Handle = _Handle()


class _Dispatch(msgspec.Struct, gc=False):
    start_timestamp: int
    end_timestamp: int
    dispatch_info: _DispatchInfo
    correlation_id: _Correlation = _Correlation()
    stream_id: _Handle | None = None


class _Api(msgspec.Struct, gc=False):
    """A hip_api or marker_api record."""

    start_timestamp: int
    end_timestamp: int
    kind: int = NO_ID
    operation: int = NO_ID
    thread_id: int = NO_ID
    correlation_id: _Correlation = _Correlation()


class _Copy(msgspec.Struct, gc=False):
    start_timestamp: int
    end_timestamp: int
    kind: int = NO_ID
    operation: int = NO_ID
    correlation_id: _Correlation = _Correlation()
    src_agent_id: _Handle = _Handle()
    dst_agent_id: _Handle = _Handle()


class _Symbol(msgspec.Struct, gc=False):
    kernel_id: int
    kernel_name: str


class _Agent(msgspec.Struct, gc=False):
    id: _Handle
    type: int = 0
    name: str = ""
    product_name: str = ""
    logical_node_type_id: int = NO_ID
    wave_front_size: int = 0
    cu_count: int = 0


class _KindNames(msgspec.Struct, gc=False):
    kind: str = ""
    operations: list[str] = []


class _Message(msgspec.Struct, gc=False):
    key: int
    value: str


class _Metadata(msgspec.Struct, gc=False):
    pid: int = NO_ID


_ENTERED = {(), (TOOL_KEY,)}
_ENTRY_PARTS = {
    "metadata": Action.WHOLE,
    "agents": Action.WHOLE,
    "kernel_symbols": Action.PIECES,
    "strings": Action.ENTER,
    "buffer_records": Action.ENTER,
}
_NESTED_PARTS = {
    ("strings", "buffer_records"): Action.WHOLE,
    ("strings", "marker_api"): Action.PIECES,
    ("buffer_records", "kernel_dispatch"): Action.PIECES,
    ("buffer_records", "hip_api"): Action.PIECES,
    ("buffer_records", "marker_api"): Action.PIECES,
    ("buffer_records", "memory_copy"): Action.PIECES,
}


def plan(path: JsonPath) -> Action:
    """What of the document is read: see the module doc; the rest is skipped."""
    if path in _ENTERED or (len(path) == 2 and path[0] == TOOL_KEY and isinstance(path[1], int)):
        return Action.ENTER
    if len(path) == 3 and path[0] == TOOL_KEY:
        return _ENTRY_PARTS.get(str(path[2]), Action.SKIP)
    if len(path) == 4 and path[0] == TOOL_KEY:
        return _NESTED_PARTS.get((str(path[2]), str(path[3])), Action.SKIP)
    return Action.SKIP


def read_rocprof_json(raw: RawInput) -> TraceRecords:
    """The records of a rocprofv3 JSON file opened as `raw`; raises TraceError naming what cannot be read."""
    collector = _Collector(raw.source)
    walk(raw.source, raw.chunks, plan, collector.take)
    return collector.records(raw.sha256, raw.file_hash)


@dataclass
class _Entry:
    """What one `rocprofiler-sdk-tool` element holds, as far as it was read."""

    pid: int = NO_ID
    agents: list[_Agent] = field(default_factory=list)
    kinds: list[_KindNames] = field(default_factory=list)
    symbols: dict[int, str] = field(default_factory=dict)
    messages: dict[int, str] = field(default_factory=dict)
    dispatches: list[tuple[np.ndarray, ...]] = field(default_factory=list)
    apis: dict[str, list[tuple[np.ndarray, ...]]] = field(default_factory=dict)
    copies: list[tuple[np.ndarray, ...]] = field(default_factory=list)

    def operation(self, kind: int, operation: int) -> str:
        if 0 <= kind < len(self.kinds) and 0 <= operation < len(self.kinds[kind].operations):
            return self.kinds[kind].operations[operation]
        return f"operation {operation} of kind {kind}"


@dataclass
class _Collector:
    source: str
    entries: dict[int, _Entry] = field(default_factory=dict)
    count: dict[str, int] = field(default_factory=dict)
    """Elements decoded so far per array (for entry numbers in messages)."""

    def take(self, path: JsonPath, data: bytes | bytearray) -> None:
        entry = self.entries.setdefault(int(path[1]), _Entry())
        part = "/".join(str(p) for p in path[2:])
        taker = _TAKERS.get(part)
        if taker is not None:
            taker(self, entry, part, data)

    def decode(self, part: str, data: bytes | bytearray, kind: Any) -> Any:
        try:
            value = msgspec.json.decode(data, type=kind)
        except msgspec.ValidationError as exc:
            where = _entry_of(str(exc), self.count.get(part, 0))
            raise TraceError(
                self.source, f"rocprofv3 {part}{where} cannot be read ({str(exc).split(' - ')[0]})"
            ) from None
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise TraceError(self.source, f"rocprofv3 {part}: not valid JSON ({exc})") from None
        if isinstance(value, list):
            self.count[part] = self.count.get(part, 0) + len(value)
        return value

    def records(self, digest: str, file_hash: str) -> TraceRecords:
        return _Assembly(self.source, list(self.entries.values())).records(digest, file_hash)


def _entry_of(message: str, before: int) -> str:
    """' entry N' from a msgspec path like `$[12].dispatch_info`, counted over the whole array."""
    if message.count("$[") and (end := message.find("]")) > 0:
        head = message[message.find("$[") + 2 : end]
        if head.isdigit():
            return f" entry {before + int(head)}"
    return ""


def _take_metadata(collector: _Collector, entry: _Entry, part: str, data: bytes | bytearray) -> None:
    entry.pid = collector.decode(part, data, _Metadata).pid


def _take_agents(collector: _Collector, entry: _Entry, part: str, data: bytes | bytearray) -> None:
    entry.agents = collector.decode(part, data, list[_Agent])


def _take_kinds(collector: _Collector, entry: _Entry, part: str, data: bytes | bytearray) -> None:
    entry.kinds = collector.decode(part, data, list[_KindNames])


def _take_symbols(collector: _Collector, entry: _Entry, part: str, data: bytes | bytearray) -> None:
    entry.symbols.update((s.kernel_id, s.kernel_name) for s in collector.decode(part, data, list[_Symbol]))


def _take_messages(collector: _Collector, entry: _Entry, part: str, data: bytes | bytearray) -> None:
    entry.messages.update((m.key, m.value) for m in collector.decode(part, data, list[_Message]))


def _take_dispatches(collector: _Collector, entry: _Entry, part: str, data: bytes | bytearray) -> None:
    rows: list[_Dispatch] = collector.decode(part, data, list[_Dispatch])
    streams = [d.stream_id.handle if d.stream_id is not None else d.dispatch_info.queue_id.handle for d in rows]
    entry.dispatches.append(
        (
            np.array([d.start_timestamp for d in rows], dtype=np.int64),
            np.array([d.end_timestamp for d in rows], dtype=np.int64),
            np.array([d.dispatch_info.kernel_id for d in rows], dtype=np.int64),
            np.array([d.correlation_id.internal for d in rows], dtype=np.int64),
            np.array(streams, dtype=np.int64),
            np.array([d.dispatch_info.agent_id.handle for d in rows], dtype=np.int64),
        )
    )


def _take_apis(collector: _Collector, entry: _Entry, part: str, data: bytes | bytearray) -> None:
    rows: list[_Api] = collector.decode(part, data, list[_Api])
    entry.apis.setdefault(part, []).append(
        (
            np.array([a.start_timestamp for a in rows], dtype=np.int64),
            np.array([a.end_timestamp for a in rows], dtype=np.int64),
            np.array([a.kind for a in rows], dtype=np.int64),
            np.array([a.operation for a in rows], dtype=np.int64),
            np.array([a.thread_id for a in rows], dtype=np.int64),
            np.array([a.correlation_id.internal for a in rows], dtype=np.int64),
        )
    )


def _take_copies(collector: _Collector, entry: _Entry, part: str, data: bytes | bytearray) -> None:
    rows: list[_Copy] = collector.decode(part, data, list[_Copy])
    entry.copies.append(
        (
            np.array([c.start_timestamp for c in rows], dtype=np.int64),
            np.array([c.end_timestamp for c in rows], dtype=np.int64),
            np.array([c.kind for c in rows], dtype=np.int64),
            np.array([c.operation for c in rows], dtype=np.int64),
            np.array([c.correlation_id.internal for c in rows], dtype=np.int64),
            np.array([c.src_agent_id.handle for c in rows], dtype=np.int64),
            np.array([c.dst_agent_id.handle for c in rows], dtype=np.int64),
        )
    )


_TAKERS: dict[str, Callable[[_Collector, _Entry, str, bytes | bytearray], None]] = {
    "metadata": _take_metadata,
    "agents": _take_agents,
    "strings/buffer_records": _take_kinds,
    "kernel_symbols": _take_symbols,
    "strings/marker_api": _take_messages,
    "buffer_records/kernel_dispatch": _take_dispatches,
    "buffer_records/hip_api": _take_apis,
    "buffer_records/marker_api": _take_apis,
    "buffer_records/memory_copy": _take_copies,
}
HIP_API = "buffer_records/hip_api"
MARKER_API = "buffer_records/marker_api"


def _joined(parts: list[tuple[np.ndarray, ...]], width: int) -> list[np.ndarray]:
    if not parts:
        return [np.zeros(0, np.int64) for _ in range(width)]
    return [np.concatenate(column) for column in zip(*parts)]


@dataclass
class GpuAgents:
    """The GPU agents of a file: each agent id's device number (its GPU index) and each device's name."""

    device_of: dict[int, int] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    properties: list[dict[str, Any]] = field(default_factory=list)

    def add(self, agent_id: int, index: int, product: str, arch: str, warp: int = 0, units: int = 0) -> None:
        device = index if index >= 0 else len(self.device_of)
        self.device_of[agent_id] = device
        name = gpu_label(product, arch)
        if name:
            self.names[device] = name
        self.properties.append({"id": device, "name": name, "gcnArchName": arch, "warpSize": warp, "numSms": units})

    def devices(self, agent_ids: np.ndarray) -> np.ndarray:
        """The device number of each agent id (NO_ID for an agent that is no known GPU), each distinct id once."""
        distinct, index = np.unique(agent_ids, return_inverse=True)
        return np.array([self.device_of.get(int(a), NO_ID) for a in distinct], dtype=np.int64)[index.reshape(-1)]

    def facts(self) -> tuple[str, bool]:
        """The GPU name to show before a device is chosen: the first recorded one, or that none is."""
        for device in sorted(self.names):
            return self.names[device], True
        return "AMD GPU, name not recorded", False


def gpu_label(product: str, arch: str) -> str:
    """'AMD Instinct MI350X (gfx950)': the product name with the ISA when the file gives both."""
    product, arch = product.strip(), arch.strip()
    if product and arch and arch not in product:
        return f"{product} ({arch})"
    return product or arch


@dataclass
class _Assembly:
    """The entries' columns as one TraceRecords."""

    source: str
    entries: list[_Entry]
    gpu: GpuRows = field(default_factory=GpuRows)
    cpu: CpuRows = field(default_factory=CpuRows)
    agents: GpuAgents = field(default_factory=GpuAgents)
    warnings: list[str] = field(default_factory=list)
    work: dict[str, str] = field(default_factory=dict)

    def records(self, digest: str, file_hash: str) -> TraceRecords:
        for entry in self.entries:
            for agent in entry.agents:
                if agent.type == GPU_AGENT_TYPE:
                    self.agents.add(
                        agent.id.handle,
                        agent.logical_node_type_id,
                        agent.product_name,
                        agent.name,
                        agent.wave_front_size,
                        agent.cu_count,
                    )
        raw_names: dict[str, str] = {}
        for entry in self.entries:
            raw_names |= self._kernels(entry)
            self._copies(entry)
            self._cpu(entry)
        gpu, recorded = self.agents.facts()
        table = self.gpu.table()
        if table.empty:
            self.warnings.append(f"{self.source}: no kernel dispatches (buffer_records.kernel_dispatch is empty)")
        return TraceRecords(
            source=self.source,
            digest=digest,
            file_hash=file_hash,
            platform="AMD",
            platform_evidence=PLATFORM_EVIDENCE,
            gpu=gpu,
            gpu_recorded=recorded,
            device_properties=self.agents.properties,
            kernels=table,
            cpu=self.cpu.events(),
            warnings=self.warnings,
            format=FORMAT,
            raw_names=raw_names,
            work=self.work,
            device_names=self.agents.names,
        )

    def _kernels(self, entry: _Entry) -> dict[str, str]:
        start, end, kernel, correlation, stream, agent = _joined(entry.dispatches, 6)
        if not len(start):
            return {}
        ids, index = np.unique(kernel, return_inverse=True)
        unknown = [int(k) for k in ids if int(k) not in entry.symbols]
        if unknown:
            count = int(np.isin(kernel, unknown).sum())
            self.warnings.append(f"{count} kernel dispatches name a kernel_id missing from kernel_symbols")
        symbols = [entry.symbols.get(int(k), f"kernel_id {int(k)} (not in kernel_symbols)") for k in ids]
        names, raw = display_names(symbols)
        codes = intern(names, self.gpu.names)
        ts, dur = microseconds(start, end)
        self.gpu.add(codes[index], ts, dur, correlation, stream, self.agents.devices(agent))
        return raw

    def _copies(self, entry: _Entry) -> None:
        start, end, kind, operation, correlation, src, dst = _joined(entry.copies, 7)
        if not len(start):
            return
        pairs, index = np.unique(np.stack([kind, operation]), axis=1, return_inverse=True)
        names = [_copy_name(entry.operation(int(k), int(o))) for k, o in pairs.T]
        self.work.update(dict.fromkeys(names, GPU_MEMCPY))
        codes = intern(names, self.gpu.names)
        device = np.where(np.isin(dst, list(self.agents.device_of)), dst, src)
        ts, dur = microseconds(start, end)
        self.gpu.add(
            codes[index.reshape(-1)], ts, dur, correlation, np.full(len(start), NO_ID), self.agents.devices(device)
        )

    def _cpu(self, entry: _Entry) -> None:
        for part, parts in entry.apis.items():
            start, end, kind, operation, thread, correlation = _joined(parts, 6)
            ts, dur = microseconds(start, end)
            threads = self.cpu.thread_codes([entry.pid] * len(thread), thread.tolist())
            if part == HIP_API:
                pairs, index = np.unique(np.stack([kind, operation]), axis=1, return_inverse=True)
                codes = intern((entry.operation(int(k), int(o)) for k, o in pairs.T), self.cpu.names)
                self.cpu.add_launches(correlation, ts, dur, threads, codes[index.reshape(-1)])
            else:
                messages = [entry.messages.get(c, "") for c in correlation.tolist()]
                named = np.array([bool(m) for m in messages], dtype=bool)
                codes = intern((m for m in messages if m), self.cpu.names)
                self.cpu.add_ranges(RangeKind.ANNOTATION, ts[named], ts[named] + dur[named], threads[named], codes)


def _copy_name(operation: str) -> str:
    """'Memcpy HtoD (Host -> Device)' for MEMORY_COPY_HOST_TO_DEVICE; the operation itself when unknown."""
    return COPY_NAMES.get(operation.removeprefix("MEMORY_COPY_"), f"Memcpy {operation}")
