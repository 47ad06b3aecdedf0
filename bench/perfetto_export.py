"""Benchmark the Perfetto export (`fusion export --perfetto`) on issue 14's 1 GB many-kernel pair, against a 2 s target,
and Chrome trace-event JSON against Perfetto's protobuf format for the same timelines.

    python bench/perfetto_export.py [--data-dir bench/out] [--runs 3]

The pair is bench.py's `--pair manykernel` (generated into --data-dir once, then reused). It is loaded and compared
once, as `fusion export` does (load_pair, then compare), and cached in a result cache under --data-dir. Then:
  export      perfetto.write(comparison, scope, file) for each scope: the default (the first matched group pair and
              every finding in it: the target's measure), --op vllm::unified_attention_with_output (every aligned
              call of the op behind most eager kernels) and --finding 1. Each run starts from a copy of the
              comparison with its alignments forgotten and the alignment cache cleared; median and range of --runs
  re-export   `fusion export A B --perfetto OUT` of the default scope in a fresh process whose comparison comes from
              the result cache: the time from the comparison in hand to the file written, measured inside it
              (it includes loading the alignment's compiled code, which the re-opened comparison had not needed)
  formats     per scope, the timeline as events, then those events written as Chrome JSON (orjson) and as Perfetto
              protobuf through the perfetto package's TraceProtoBuilder (a track descriptor per process and thread,
              a begin and an end TrackEvent per slice, its args as debug annotations, its flow as flow ids): the
              time of each writer and the bytes; the protobuf is parsed back and its packets counted
  checks      each written JSON file read back through tests/report/trace_checks: the trace event format's schema,
              a viewer's rules, the comparison, the loader's round trip; its counts
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from bench import generate_manykernel  # noqa: E402  (bench/bench.py: the pair's generator)
from fusion.cache.loading import load_pair  # noqa: E402
from fusion.cache.results import ResultCache, cached_compare  # noqa: E402
from fusion.cache.tables import TableCache  # noqa: E402
from fusion.comparison.result import Comparison  # noqa: E402
from fusion.match.align import clear_cache, prepare  # noqa: E402
from fusion.report import perfetto  # noqa: E402
from fusion.report.timeline import Scope, aligned_timeline  # noqa: E402
from tests.report import trace_checks as checks  # noqa: E402

TARGET_S = 2.0
"""Issue 36: exporting the default scope of the 1 GB pair, after the comparison is loaded."""
SCOPES = {
    "default": Scope(),
    "op vllm::unified_attention_with_output": Scope("op", "vllm::unified_attention_with_output"),
    "finding 1": Scope("finding", 1),
}
REEXPORT = """
import os, sys, time
from fusion.cache.loading import load_pair
from fusion.cache.results import cached_compare
from fusion.report import perfetto
from fusion.report.timeline import Scope
pair = load_pair(sys.argv[1], sys.argv[2])
comparison = cached_compare(*pair)
start = time.perf_counter()
perfetto.write(comparison, Scope(), sys.argv[3])
print(f"EXPORT {time.perf_counter() - start:.3f}")
"""


def fresh(comparison: Comparison) -> Comparison:
    """The comparison as just loaded: no alignment computed yet, none cached."""
    clear_cache()
    return dataclasses.replace(comparison, _alignments={}, _helpers=[])


def timed_export(comparison: Comparison, scope: Scope, out: Path, runs: int) -> list[float]:
    walls = []
    for _ in range(runs):
        copy = fresh(comparison)
        start = time.perf_counter()
        perfetto.write(copy, scope, out)
        walls.append(time.perf_counter() - start)
    return walls


def proto_bytes(doc: dict[str, Any]) -> tuple[bytes, int]:
    """The same events as Perfetto protobuf (TraceProtoBuilder); returns the bytes and the packets written."""
    from perfetto.trace_builder.proto_builder import TraceProtoBuilder

    builder = TraceProtoBuilder()
    uuids: dict[tuple[int, int | None], int] = {}
    events = doc["traceEvents"]
    for event in events:
        if event["ph"] == "M" and event["name"] == "process_name":
            packet = builder.add_packet()
            uuids[(event["pid"], None)] = uuid = len(uuids) + 1
            packet.track_descriptor.uuid = uuid
            packet.track_descriptor.process.pid = event["pid"]
            packet.track_descriptor.process.process_name = event["args"]["name"]
    for event in events:
        if event["ph"] == "M" and event["name"] == "thread_name":
            packet = builder.add_packet()
            uuids[(event["pid"], event["tid"])] = uuid = len(uuids) + 1
            packet.track_descriptor.uuid = uuid
            packet.track_descriptor.parent_uuid = uuids[(event["pid"], None)]
            packet.track_descriptor.thread.pid = event["pid"]
            packet.track_descriptor.thread.tid = event["tid"]
            packet.track_descriptor.thread.thread_name = event["args"]["name"]
    for event in events:
        if event["ph"] != "X":
            continue
        track = uuids[(event["pid"], event["tid"])]
        begin = builder.add_packet()
        begin.timestamp = round(event["ts"] * 1000)
        begin.trusted_packet_sequence_id = 1
        begin.track_event.type = begin.track_event.TYPE_SLICE_BEGIN
        begin.track_event.track_uuid = track
        begin.track_event.name = event["name"]
        begin.track_event.categories.append(event["cat"])
        for key, value in event.get("args", {}).items():
            annotation = begin.track_event.debug_annotations.add()
            annotation.name = key
            if isinstance(value, bool):
                annotation.bool_value = value
            elif isinstance(value, int):
                annotation.int_value = value
            elif isinstance(value, float):
                annotation.double_value = value
            else:
                annotation.string_value = value if isinstance(value, str) else ", ".join(map(str, value))
        if "bind_id" in event:
            (begin.track_event.flow_ids if event.get("flow_out") else begin.track_event.terminating_flow_ids).append(
                event["bind_id"]
            )
        end = builder.add_packet()
        end.timestamp = round((event["ts"] + event["dur"]) * 1000)
        end.trusted_packet_sequence_id = 1
        end.track_event.type = end.track_event.TYPE_SLICE_END
        end.track_event.track_uuid = track
    return builder.serialize(), len(builder.trace.packet)


def formats(comparison: Comparison, scope: Scope, runs: int) -> dict[str, Any]:
    """Per format: median writer seconds and bytes, from the same timeline's events."""
    import orjson
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

    timeline = aligned_timeline(fresh(comparison), scope)
    start = time.perf_counter()
    doc = perfetto.chrome_trace(comparison, timeline)
    events_s = time.perf_counter() - start
    json_walls, proto_walls = [], []
    for _ in range(runs):
        start = time.perf_counter()
        data = orjson.dumps(doc)
        json_walls.append(time.perf_counter() - start)
        start = time.perf_counter()
        proto, packets = proto_bytes(doc)
        proto_walls.append(time.perf_counter() - start)
    parsed = Trace()
    parsed.ParseFromString(proto)
    assert len(parsed.packet) == packets
    slices = sum(1 for e in doc["traceEvents"] if e["ph"] == "X")
    return {
        "slices": slices,
        "events_s": events_s,
        "json_s": statistics.median(json_walls),
        "json_bytes": len(data),
        "proto_s": statistics.median(proto_walls),
        "proto_bytes": len(proto),
        "packets": packets,
    }


def reexport(files: tuple[Path, Path], out: Path, env: dict[str, str], runs: int) -> list[float]:
    walls = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", REEXPORT, str(files[0]), str(files[1]), str(out)],
            env={**env, "PYTHONPATH": str(PROJECT)},
            capture_output=True,
            text=True,
            check=True,
        )
        walls.append(float(next(line for line in done.stdout.splitlines() if line.startswith("EXPORT")).split()[1]))
    return walls


def _span(walls: list[float]) -> str:
    return f"median {statistics.median(walls):.3f} s (runs {', '.join(f'{w:.3f}' for w in walls)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=PROJECT / "bench" / "out")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    files = next(iter(generate_manykernel(args.data_dir).values()))
    cache_dir = args.data_dir / "perfetto-cache"
    cache_dir.mkdir(exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "FUSION_CACHE_DIR": str(cache_dir)}
    os.environ["FUSION_CACHE_DIR"] = str(cache_dir)
    print(f"load average at the start {os.getloadavg()[0]:.2f}", flush=True)
    start = time.perf_counter()
    pair = load_pair(files[0], files[1], cache=TableCache(), meanwhile=prepare)
    loaded = time.perf_counter()
    comparison = cached_compare(*pair, cache=ResultCache())
    print(
        f"{files[0].parent.name}: {pair[0].kernel_count:,} + {pair[1].kernel_count:,} kernels; loaded in "
        f"{loaded - start:.1f} s, compared (or re-opened) in {time.perf_counter() - loaded:.1f} s",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as folder:
        for name, scope in SCOPES.items():
            out = Path(folder) / f"{name.split()[0]}.json"
            walls = timed_export(comparison, scope, out, args.runs)
            note = f" (target {TARGET_S:g} s: {'met' if statistics.median(walls) <= TARGET_S else 'MISSED'})"
            print(f"\nexport {name}: {_span(walls)}" + (note if name == "default" else ""))
            doc = checks.read(out)
            problems = checks.schema_problems(doc) + checks.viewer_problems(doc)
            counts = checks.check_against(doc, comparison)
            loaded_back = checks.round_trip(out, doc)
            print(
                f"  checks: {'schema and viewer rules ok' if not problems else problems[:3]}; {counts['kernels1']:,} + "
                f"{counts['kernels2']:,} kernels (the loader reads {loaded_back}), {counts['flows']:,} flows = aligned "
                f"pairs, {counts['findings']} finding slices spanning their kernels, {counts['gaps']:,} gaps"
            )
            f = formats(comparison, scope, args.runs)
            print(
                f"  formats, {f['slices']:,} slices (timeline to events {f['events_s']:.3f} s): Chrome JSON "
                f"{f['json_s']:.3f} s, {f['json_bytes'] / 1e6:.2f} MB; Perfetto protobuf (TraceProtoBuilder) "
                f"{f['proto_s']:.3f} s, {f['proto_bytes'] / 1e6:.2f} MB, {f['packets']:,} packets; protobuf/JSON "
                f"time {f['proto_s'] / f['json_s']:.1f}x, bytes {f['proto_bytes'] / f['json_bytes']:.2f}x"
            )
        walls = reexport(files, Path(folder) / "reexport.json", env, args.runs)
        print(f"\nre-export of the default scope in a fresh process, comparison from the result cache: {_span(walls)}")
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
