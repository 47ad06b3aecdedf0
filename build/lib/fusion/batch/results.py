"""A batch result folder read back as plain data: the run's record and its two tables.

`python -m fusion batch` writes batch.json, summary.parquet and findings.parquet into its output
folder (see batch.py). Reading them back checks each file, so a folder that is not a batch result,
or one damaged since, gives one message naming the folder and the problem, never a traceback.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pyarrow as pa

from fusion.batch.run import BATCH_FILE, FINDINGS_FILE, RESULT_FORMAT, SUMMARY_FILE
from fusion.errors import TraceError

STATUSES = ("ok", "skipped", "error")
MAX_RECORD_BYTES = 64 << 20
"""batch.json lists one short record per pair; anything larger is not one the batch wrote."""
SUMMARY_COLUMNS = ("label", "status", "kernel_type", "side", "count", "time_us")
FINDINGS_COLUMNS = (
    "label",
    "group",
    "rank",
    "detector",
    "fused_trace",
    "fused_kernel_type",
    "unfused_sequence",
    "op",
    "count",
    "time_saved_us",
    "fused_kernel_names",
    "ranks_with",
    "ranks_in_group",
    "holds_on",
)
_TEXT_FIELDS = ("label", "group", "trace1", "trace2", "status", "message")


class BatchError(TraceError):
    """A batch result folder that cannot be read; the message names the folder and the problem."""


@dataclass(frozen=True)
class PairRecord:
    """One pair of the run as batch.json records it: where its traces are, and how it went."""

    index: int
    label: str
    group: str
    rank: int | None
    trace1: str
    trace2: str
    status: str
    message: str
    stamps: tuple[tuple[int, int] | None, tuple[int, int] | None] = (None, None)
    """Each local trace's (size, mtime_ns) when the batch hashed it; None when not recorded (a URL, a failure)."""

    @property
    def failed(self) -> bool:
        return self.status == "error"

    def changed_sides(self) -> list[int]:
        """The sides whose trace file is missing or differs in size or time from when the batch compared it."""
        changed = []
        for side, (location, stamp) in enumerate(zip((self.trace1, self.trace2), self.stamps), start=1):
            if stamp is None:
                continue
            try:
                stat = os.stat(location)
            except OSError:
                changed.append(side)
                continue
            if (stat.st_size, stat.st_mtime_ns) != stamp:
                changed.append(side)
        return changed


@dataclass(frozen=True)
class BatchRecord:
    """batch.json: the engine, the parameters every pair was compared with, and the pairs."""

    folder: Path
    engine: str
    min_group_size: int
    seconds: float
    written: float
    """When batch.json was written (seconds since the epoch)."""
    pairs: tuple[PairRecord, ...]

    @property
    def failures(self) -> int:
        return sum(pair.failed for pair in self.pairs)


@dataclass(frozen=True)
class BatchResult:
    """A whole batch result: the record, per pair/type/side counts and times, and the findings per pair."""

    record: BatchRecord
    summary: pd.DataFrame
    findings: pd.DataFrame


def read_record(folder: str | Path) -> BatchRecord:
    """batch.json of `folder`, checked field by field."""
    folder = Path(folder)
    if not folder.is_dir():
        raise BatchError(str(folder), "not a folder")
    path = folder / BATCH_FILE
    try:
        if path.stat().st_size > MAX_RECORD_BYTES:
            raise BatchError(str(folder), f"{BATCH_FILE} is larger than a batch record can be")
        raw = orjson.loads(path.read_bytes())
        written = path.stat().st_mtime
    except FileNotFoundError:
        raise BatchError(str(folder), f"no {BATCH_FILE}: not a batch result folder") from None
    except (OSError, orjson.JSONDecodeError) as exc:
        raise BatchError(str(folder), f"{BATCH_FILE} cannot be read: {exc}") from None
    return _record(folder, raw, written)


def read_batch(folder: str | Path) -> BatchResult:
    """The record and both tables of `folder`."""
    record = read_record(folder)
    summary = _table(record.folder, SUMMARY_FILE, SUMMARY_COLUMNS)
    findings = _table(record.folder, FINDINGS_FILE, FINDINGS_COLUMNS)
    return BatchResult(record, summary, findings)


def _record(folder: Path, raw: Any, written: float) -> BatchRecord:
    def bad(problem: str) -> BatchError:
        return BatchError(str(folder), f"{BATCH_FILE}: {problem}")

    if not isinstance(raw, dict) or not isinstance(raw.get("pairs"), list):
        raise bad("expected an object with a list of pairs")
    if raw.get("format") != RESULT_FORMAT:
        raise bad(f"format {raw.get('format')!r}, this version reads {RESULT_FORMAT}")
    params = raw.get("params")
    size = params.get("min_group_size") if isinstance(params, dict) else None
    if not _is_int(size) or size < 1:
        raise bad("params.min_group_size is missing or not a positive whole number")
    seconds = raw.get("seconds", 0.0)
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool):
        raise bad("seconds is not a number")
    pairs = tuple(_pair(index, entry, bad) for index, entry in enumerate(raw["pairs"]))
    return BatchRecord(folder, str(raw.get("engine", "")), size, float(seconds), written, pairs)


def _pair(index: int, entry: Any, bad: Any) -> PairRecord:
    if not isinstance(entry, dict):
        raise bad(f"pair {index} is not an object")
    for name in _TEXT_FIELDS:
        if not isinstance(entry.get(name), str):
            raise bad(f"pair {index}: {name} is missing or not text")
    if entry["status"] not in STATUSES:
        raise bad(f"pair {index}: unknown status {entry['status'][:40]!r}")
    rank = entry.get("rank")
    if rank is not None and not _is_int(rank):
        raise bad(f"pair {index}: rank is not a whole number")
    return PairRecord(
        index,
        *(entry[name] for name in ("label", "group")),
        rank,
        *(entry[name] for name in ("trace1", "trace2", "status", "message")),
        _stamps(index, entry, bad),
    )


def _stamps(index: int, entry: dict, bad: Any) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
    """The recorded (size, mtime_ns) per side; a record written before stamps were kept has none."""
    stamps = entry.get("stamps", [None, None])
    if not isinstance(stamps, list) or len(stamps) != 2:
        raise bad(f"pair {index}: stamps is not a list of two")
    out = []
    for stamp in stamps:
        if stamp is not None and not (isinstance(stamp, list) and len(stamp) == 2 and all(_is_int(v) for v in stamp)):
            raise bad(f"pair {index}: a stamp is not [size, mtime_ns]")
        out.append(tuple(stamp) if stamp is not None else None)
    return out[0], out[1]


def _table(folder: Path, name: str, columns: tuple[str, ...]) -> pd.DataFrame:
    try:
        table = pd.read_parquet(folder / name)
    except FileNotFoundError:
        raise BatchError(str(folder), f"no {name}") from None
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise BatchError(
            str(folder), f"{name} cannot be read: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        ) from None
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise BatchError(str(folder), f"{name} lacks the column(s) {', '.join(missing)}")
    return table


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
