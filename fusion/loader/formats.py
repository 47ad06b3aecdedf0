"""Which reader a file needs, told from its first bytes (never from its name), and the records it gives.

- `SQLite format 3`: an Nsight Systems export (`nsys export --type sqlite`; fusion.loader.nsys) or a rocpd
  database (rocprofv3's SQLite output, not read yet: the error says how to get JSON);
- a JSON object whose first key is `rocprofiler-sdk-tool`: rocprofv3 JSON (fusion.loader.rocprof);
- a CSV header naming `Kernel_Name` and `Start_Timestamp`: rocprofv3's kernel_trace.csv (fusion.loader.rocprof_csv);
- anything else: Kineto JSON (fusion.loader.kineto), whose reader says what is wrong with a bad file.
A file of none of these whose name ends in `.nsys-rep` (Nsight Systems' own report format) is refused
with the command that exports it. The trace of one GPU is then taken (fusion.loader.devices).
"""

from __future__ import annotations

import re
from itertools import chain

from fusion.errors import TraceError
from fusion.loader.devices import select_device
from fusion.loader.kineto import TraceRecords, read_kineto_input
from fusion.loader.reader import Progress, RawInput, TraceSource, open_input

SQLITE_MAGIC = b"SQLite format 3\x00"
SNIFF_BYTES = 4096
KINETO, ROCPROF_JSON, ROCPROF_CSV, API_CSV, SQLITE = "kineto", "rocprof-json", "rocprof-csv", "api-csv", "sqlite"
NSYS_REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
_FIRST_KEY = re.compile(rb'^(?:\xef\xbb\xbf)?[ \t\r\n]*\{[ \t\r\n]*"([^"\\]{1,64})"')
_CSV_HEADER = re.compile(rb"^(?:\xef\xbb\xbf)?([^\r\n]{1,4096})")


def read_records(
    source: TraceSource,
    *,
    name: str | None = None,
    progress: Progress | None = None,
    max_bytes: int | None = None,
    frame_suffixes: tuple[str, ...] = (),
    device: int | None = None,
) -> TraceRecords:
    """The records of a trace file of any supported format, of one GPU (`device`, or the busiest); raises
    TraceError naming the input and the problem."""
    raw = open_input(source, name=name, progress=progress, max_bytes=max_bytes)
    head = _peek(raw)
    kind = sniff(head)
    if kind == SQLITE:
        from fusion.loader.nsys import read_sqlite

        records = read_sqlite(source, raw)
    elif kind == ROCPROF_JSON:
        from fusion.loader.rocprof import read_rocprof_json

        records = read_rocprof_json(raw)
    elif kind == ROCPROF_CSV:
        from fusion.loader.rocprof_csv import read_rocprof_csv

        records = read_rocprof_csv(source, raw)
    elif kind == API_CSV:
        raise TraceError(raw.source, "a rocprofv3 API trace (hip_api_trace.csv); give its kernel_trace.csv instead")
    else:
        _refuse_nsys_report(raw, head)
        records = read_kineto_input(raw, frame_suffixes=frame_suffixes)
    return select_device(records, device)


def sniff(head: bytes) -> str:
    """The format of a file that starts with `head` (decompressed): one of the names above."""
    if head.startswith(SQLITE_MAGIC):
        return SQLITE
    key = _FIRST_KEY.match(head)
    if key is not None:
        return ROCPROF_JSON if key.group(1) == b"rocprofiler-sdk-tool" else KINETO
    header = _CSV_HEADER.match(head)
    if header is not None:
        fields = set(header.group(1).replace(b'"', b"").split(b","))
        if {b"Kernel_Name", b"Start_Timestamp", b"End_Timestamp"} <= fields:
            return ROCPROF_CSV
        if {b"Domain", b"Function", b"Correlation_Id", b"Start_Timestamp"} <= fields:
            return API_CSV
    return KINETO


def _peek(raw: RawInput) -> bytes:
    """The first SNIFF_BYTES decompressed bytes (fewer at the end of the file); `raw.chunks` still yields all."""
    seen: list[bytes] = []
    size = 0
    while size < SNIFF_BYTES:
        chunk = next(raw.chunks, None)
        if chunk is None:
            break
        seen.append(chunk)
        size += len(chunk)
    head = b"".join(seen)
    raw.chunks = chain([head] if head else [], raw.chunks)
    return head[:SNIFF_BYTES]


def _refuse_nsys_report(raw: RawInput, head: bytes) -> None:
    """An .nsys-rep that is not JSON: say how to export it rather than that it is no JSON."""
    if raw.source.endswith(NSYS_REPORT_SUFFIXES) and head.lstrip()[:1] not in (b"{", b"["):
        raise TraceError(
            raw.source,
            "an Nsight Systems report (.nsys-rep) is NVIDIA's own format, not read here; export it to SQLite "
            "with `nsys export --type sqlite -o trace.sqlite report.nsys-rep` and give the .sqlite file",
        )
