"""Sealed cache files: a JSON header and named binary parts, under one checksum, written atomically.

Layout: MAGIC, the sha256 of everything after it, the header's length (8 bytes, little endian),
the header (JSON; it lists the parts' names and lengths), then the parts. A file that is short,
foreign, flipped anywhere, or not a regular file raises Damaged; callers treat that as a cache
miss. DataFrames travel as Arrow IPC streams (exact dtypes, categories included), never pickle.
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import pandas as pd

MAGIC = b"FUSION-SEALED-1\n"
_LENGTH = struct.Struct("<Q")
_DIGEST_SIZE = 32
_PARTS_KEY = "parts"
_IPC_COMPRESSION = "lz4"
"""LZ4 frames: a quarter of the size, and read back faster than uncompressed (measured on 1.2 M kernels).
pyarrow (and pandas) are imported by the two frame functions only: reading a header, or starting the
loader processes, does not pay for them."""


class Damaged(Exception):
    """A sealed file that cannot be trusted; the message says why."""


def seal(header: dict[str, Any], parts: dict[str, bytes]) -> list[bytes]:
    """The file's content as a list of byte strings (write them in order)."""
    head = orjson.dumps({**header, _PARTS_KEY: [[name, len(data)] for name, data in parts.items()]})
    body = [_LENGTH.pack(len(head)), head, *parts.values()]
    digest = hashlib.sha256()
    for chunk in body:
        digest.update(chunk)
    return [MAGIC, digest.digest(), *body]


def write_sealed(path: Path, chunks: list[bytes]) -> None:
    """Write the chunks of `seal` to `path` (call it inside store.atomic_file)."""
    with path.open("wb") as handle:
        for chunk in chunks:
            handle.write(chunk)


def read_sealed(path: Path) -> tuple[dict[str, Any], dict[str, memoryview]]:
    """The header and the parts of a sealed file; Damaged for anything that does not verify."""
    try:
        data = _regular_file_bytes(path)
    except OSError as exc:
        raise Damaged(f"cannot be read ({exc.strerror or exc})") from None
    start = len(MAGIC) + _DIGEST_SIZE
    if len(data) < start + _LENGTH.size or not data.startswith(MAGIC):
        raise Damaged("not a sealed cache file")
    view = memoryview(data)
    if hashlib.sha256(view[start:]).digest() != data[len(MAGIC) : start]:
        raise Damaged("checksum mismatch")
    (head_length,) = _LENGTH.unpack_from(data, start)
    offset = start + _LENGTH.size + head_length
    try:
        header = orjson.loads(view[start + _LENGTH.size : offset])
        parts = {}
        for name, length in header.pop(_PARTS_KEY):
            parts[str(name)] = view[offset : offset + length]
            offset += length
    except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError) as exc:
        raise Damaged(f"bad header ({exc})") from None
    if offset != len(data):
        raise Damaged("parts do not add up to the file")
    return header, parts


def _regular_file_bytes(path: Path) -> bytes:
    """The bytes of a sealed file; a directory, FIFO or device is refused without blocking on it, and a
    foreign file after its first bytes, whatever its size."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise Damaged("not a regular file")
        if handle.read(len(MAGIC)) != MAGIC:
            raise Damaged("not a sealed cache file")
        handle.seek(0)
        return handle.read()


def frame_bytes(frame: pd.DataFrame) -> bytes:
    """A DataFrame (with its index) as an Arrow IPC stream."""
    import pyarrow as pa

    table = pa.Table.from_pandas(frame, preserve_index=True)
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=_IPC_COMPRESSION)
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def frame_from(data: memoryview) -> pd.DataFrame:
    """The DataFrame of frame_bytes; list columns come back as tuples, as the loader makes them."""
    import pyarrow as pa

    try:
        table = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
        frame = table.to_pandas()
    except (pa.ArrowException, ValueError, TypeError, KeyError) as exc:
        raise Damaged(f"bad table ({exc})") from None
    for column, kind in zip(table.column_names, table.schema.types):
        if pa.types.is_list(kind) and column in frame.columns:
            frame[column] = [tuple(v) if v is not None else None for v in frame[column]]
    return frame
