"""On-disk cache of loaded traces, so a trace analysed before reopens in a fraction of a second.

A cache is an optimisation, never a source of truth. An entry is one sealed file (fusion.cache.sealed)
holding every DataFrame field of the Trace (the kernel table and the name table, whatever columns
they have) as Arrow IPC and the other fields in its header, with the trace's content digest, the
FORMAT_VERSION and the analysis fingerprint (this package's code and rules, the user's rules file).
It is used only when its checksum verifies and those three match what was asked for; anything else
is a miss: the file is parsed again, the entry rewritten and one warning logged.

A cached trace is served for a file only when the file's bytes are proven the same as the bytes it was
parsed from: the entry holds their xxh3-128 (file_hash, computed in the parsing pass) and a lookup hashes
the whole file and compares (1 GB in about 0.1 s from the page cache, where its sha256 takes 0.5 s). The
file's stamp (path, size, mtime, inode) in digests.json is only a hint of which entry to check, and that
a file is worth hashing at all: a file rewritten in place with its size and mtime kept is a miss, and a
digests.json that points a path at another trace's entry is a miss too. A file named by its sha256 (the
trace store's) needs no hint. Anything in the cache directory that is not a regular file (a FIFO, a
device, a directory) is skipped without being opened for reading.

A directory that cannot be created or written (read-only, full, no permission) disables writing
for this object, with one warning (`problem` keeps it for a UI); reading valid entries goes on.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import os
import shutil
import stat as stat_module
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import xxhash

from fusion import settings
from fusion.cache.sealed import Damaged, frame_bytes, frame_from, read_sealed, seal, write_sealed
from fusion.cache.store import (
    UNWRITABLE,
    ensure_dir,
    evict_least_recent,
    is_digest,
    place,
    regular_file_bytes,
    touch,
    write_with_room,
)

if TYPE_CHECKING:
    from fusion.model.trace import Trace

log = logging.getLogger(__name__)

FORMAT_VERSION = 4
"""Bump when the entry layout or the meaning of a Trace field changes (new columns need no bump). 4: entries are
checked by their file_hash (a full hash), not by 16 sampled blocks."""
ENTRY_SUFFIX = ".fxt"
RESULT_SUFFIX = ".fxr"
"""Result cache entries (fusion.cache.results) share the directory and its cap."""
LEGACY_SUFFIXES = (".parquet",)
"""Entries of older formats: never read, counted in the cap and evicted first (they are the oldest)."""
_STAMPS_FILE = "digests.json"
_MAX_STAMPS = 2000
_HASH_BLOCK = 512 << 10
"""Read size of file_hash: blocks that stay in the CPU's cache between the read and the hash (fastest measured)."""


@functools.cache
def _code_fingerprint() -> str:
    """Digest of the fusion package's code and data files as imported: results change when they do."""
    digest = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for path in sorted(package.rglob("*")):
        if path.suffix in (".py", ".toml") and path.is_file():
            digest.update(f"{path.relative_to(package)}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def analysis_fingerprint() -> str:
    """Digest of the package's code and built-in rules and of the user's FUSION_RULES and FUSION_GPU_PEAKS files."""
    digest = hashlib.sha256(f"{_code_fingerprint()}:{settings.max_name_chars()}".encode())
    for user_file in (settings.rules_path(), settings.gpu_peaks_path()):
        if user_file:
            try:
                digest.update(Path(user_file).read_bytes())
            except OSError:
                digest.update(user_file.encode())
    return digest.hexdigest()


class CacheDir:
    """A cache directory that stops writing, with one warning, when the disk refuses."""

    what = "the cache directory"

    def __init__(self, root: Path | None = None, max_bytes: int | None = None) -> None:
        self.root = Path(root) if root is not None else settings.cache_dir()
        self.max_bytes = settings.cache_max_bytes() if max_bytes is None else max_bytes
        self.problem: str | None = None
        """Why this cache does not write (shown once); None while it works."""
        error = ensure_dir(self.root)
        if error is not None:
            self._disable(error)

    def write(self, target: Path, chunks: list[bytes]) -> bool:
        """Write a sealed entry atomically (making room on a full disk), then evict beyond the cap."""
        if self.problem is not None:
            return False
        size = sum(len(c) for c in chunks)
        try:
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            write_with_room(self.root, target, lambda temp: write_sealed(temp, chunks), size, _is_entry)
        except OSError as exc:
            if exc.errno in UNWRITABLE:
                self._disable(exc)
            else:
                log.warning("%s: not written (%s)", self._name(target), exc.strerror or exc)
            return False
        if _is_entry(target.name):
            evict_least_recent(self.root, self.max_bytes, keep=target.name, is_entry=_is_entry)
        return True

    def read(
        self, entry: Path, expected: dict[str, Any], *, quiet: bool = False
    ) -> tuple[dict[str, Any], dict[str, memoryview]] | None:
        """A verified entry whose header has the `expected` values, else None (a warning unless absent).

        `quiet`: no warning, for a look that the ordinary path repeats (and reports) on a miss."""
        if not os.path.lexists(entry):
            return None
        try:
            header, parts = read_sealed(entry)
            wrong = [key for key, value in expected.items() if header.get(key) != value]
            if wrong:
                raise Damaged(f"holds another entry ({', '.join(wrong)} differ)")
        except Damaged as exc:
            if not quiet:
                log.warning("%s: %s: ignored and rebuilt", self._name(entry), exc)
            return None
        touch(entry)
        return header, parts

    def _name(self, entry: Path) -> str:
        return f"{place(self.root, self.what)}: entry {entry.name}"

    def _disable(self, exc: OSError) -> None:
        why = exc.strerror or exc
        self.problem = f"{place(self.root, self.what)} cannot be written ({why}); carrying on without caching"
        if self.root not in _REPORTED:
            _REPORTED.add(self.root)
            log.warning(self.problem)


_REPORTED: set[Path] = set()
"""Directories whose problem was logged: one warning per directory and process, however many caches use it."""


def _is_entry(name: str) -> bool:
    return name.endswith((ENTRY_SUFFIX, RESULT_SUFFIX, *LEGACY_SUFFIXES))


class TableCache(CacheDir):
    """Loaded traces keyed by content, capped in size, least recently used evicted first."""

    def lookup(self, path: str | os.PathLike, label: str | None = None, *, name: str | None = None) -> Trace | None:
        """The cached trace for the file at `path` when the file's bytes are those it was parsed from, else None.

        `name` is what messages call the trace (else the path), as for fusion.classify.trace.load."""
        file = Path(path)
        digest = self._hinted(file)
        return None if digest is None else self.get(digest, label, source=name or str(path), file=file)

    def header(self, path: str | os.PathLike) -> dict[str, Any] | None:
        """The verified entry header (Trace `fields`, table `rows`) for the unchanged file at `path`, else None
        (quietly: see `read`).

        Reads no table: what a re-open needs to find its cached comparison."""
        file = Path(path)
        digest = self._hinted(file)
        if digest is None:
            return None
        found = self.read(self._entry(digest), self._expected(digest), quiet=True)
        return found[0] if found is not None and _same_bytes(found[0], file) else None

    def _hinted(self, file: Path) -> str | None:
        """The content digest the cache may hold the file under (a hint: the entry is checked against the bytes)."""
        digest = self._stamps().get(stamp(file)) or (file.name if is_digest(file.name) else None)
        return digest if isinstance(digest, str) else None

    def _expected(self, digest: str) -> dict[str, Any]:
        return {"format": FORMAT_VERSION, "digest": digest, "analysis": analysis_fingerprint()}

    def store(self, path: str | os.PathLike, trace: Trace) -> None:
        """Cache `trace`, loaded from the file at `path`, and remember where that file is (the hint).

        A trace without a file_hash is not cached: nothing could prove a file holds its bytes."""
        now = stamp(Path(path))
        if not now or not trace.file_hash:
            return
        if self.put(trace):
            self._remember(now, trace.digest)

    def get(
        self, digest: str, label: str | None = None, *, source: str | None = None, file: Path | None = None
    ) -> Trace | None:
        """The cached trace of that content digest, or None; anything that does not verify is a miss.

        With `file`, the entry is used only when that file's bytes hash to the entry's file_hash (else a quiet miss:
        the file changed since)."""
        found = self.read(self._entry(digest), self._expected(digest))
        if found is None or (file is not None and not _same_bytes(found[0], file)):
            return None
        overrides = {key: value for key, value in (("label", label), ("source", source)) if value}
        try:
            return _trace_from(*found, overrides)
        except (Damaged, KeyError, TypeError, ValueError) as exc:
            log.warning("%s: %s: ignored and rebuilt", self._name(self._entry(digest)), exc)
            return None

    def put(self, trace: Trace) -> bool:
        """Write the trace's entry; False when the cache cannot take it (it says why once)."""
        if self.problem is not None:
            return False
        chunks = _sealed_trace(trace)
        if chunks is None:
            return False
        return self.write(self._entry(trace.digest), chunks)

    def _entry(self, digest: str) -> Path:
        key = hashlib.sha256(f"{digest}:{FORMAT_VERSION}:{analysis_fingerprint()}".encode()).hexdigest()
        return self.root / f"{key}{ENTRY_SUFFIX}"

    def _stamps(self) -> dict[str, Any]:
        try:
            stamps = orjson.loads(regular_file_bytes(self.root / _STAMPS_FILE))
        except (OSError, orjson.JSONDecodeError):
            return {}
        return stamps if isinstance(stamps, dict) else {}

    def _remember(self, file_stamp: str, digest: str) -> None:
        stamps = {k: v for k, v in self._stamps().items() if isinstance(v, str)}
        stamps.pop(file_stamp, None)
        stamps[file_stamp] = digest
        if len(stamps) > _MAX_STAMPS:
            stamps = dict(list(stamps.items())[-_MAX_STAMPS:])
        self.write(self.root / _STAMPS_FILE, [orjson.dumps(stamps)])


def stamp(path: Path) -> str:
    """Path, size, mtime and inode of a regular file ('' when it is not one, or a symlink loop): a hint that the
    file was seen before, never a proof that it is unchanged (file_hash is)."""
    try:
        resolved = os.path.realpath(path)
        info = os.stat(resolved)
    except (OSError, ValueError):
        return ""
    if not stat_module.S_ISREG(info.st_mode):
        return ""
    return f"{resolved}|{info.st_size}|{info.st_mtime_ns}|{info.st_ino}"


def file_hash(path: Path) -> str:
    """xxh3-128 of a regular file's whole content, as the reader computes it ('' when it is unreadable or not a
    regular file, which is never opened for reading: a FIFO would block)."""
    digest = xxhash.xxh3_128()
    block = bytearray(_HASH_BLOCK)
    view = memoryview(block)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb", buffering=0) as handle:
            if not stat_module.S_ISREG(os.fstat(fd).st_mode):
                return ""
            while size := handle.readinto(block):
                digest.update(view[:size])
    except OSError:
        return ""
    return digest.hexdigest()


def _same_bytes(header: dict[str, Any], file: Path) -> bool:
    """Whether the file's bytes are the ones the entry was parsed from (its file_hash)."""
    recorded = header.get("fields", {}).get("file_hash") if isinstance(header.get("fields"), dict) else None
    return isinstance(recorded, str) and bool(recorded) and recorded == file_hash(file)


def _sealed_trace(trace: Trace) -> list[bytes] | None:
    """The entry's chunks; None (with a warning) when a field would not come back as it is."""
    import pandas as pd
    import pyarrow as pa

    header = {"format": FORMAT_VERSION, "digest": trace.digest, "analysis": analysis_fingerprint()}
    fields: dict[str, Any] = {}
    parts: dict[str, bytes] = {}
    rows: dict[str, int] = {}
    try:
        for field in dataclasses.fields(trace):
            value = getattr(trace, field.name)
            if isinstance(value, pd.DataFrame):
                parts[field.name] = frame_bytes(value)
                rows[field.name] = len(value)
            else:
                fields[field.name] = value
        if orjson.loads(orjson.dumps(fields)) != fields:
            raise TypeError("a field does not survive JSON")
    except (TypeError, ValueError, pa.ArrowException) as exc:
        log.warning("trace %s not cached: %s", trace.digest[:12], exc)
        return None
    return seal({**header, "fields": fields, "rows": rows}, parts)


def _trace_from(header: dict[str, Any], parts: dict[str, memoryview], overrides: dict[str, str]) -> Trace:
    """The entry's Trace; its tables are converted when first used (a verified entry's tables read back)."""
    from fusion.model.trace import FrameLoader, Trace

    values = {**header["fields"], **overrides}
    for name, data in parts.items():
        rows = header["rows"][name]
        if not isinstance(rows, int):
            raise TypeError(f"row count of {name} is not a number")
        values[name] = FrameLoader(rows, functools.partial(frame_from, data))
    return Trace(**values)
