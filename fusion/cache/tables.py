"""On-disk cache of loaded traces, so a trace analysed before reopens in a fraction of a second.

A cache is an optimisation, never a source of truth. An entry is one sealed file (fusion.cache.sealed)
holding every DataFrame field of the Trace (the kernel table and the name table, whatever columns
they have) as Arrow IPC and the other fields in its header, with the trace's content digest, the
FORMAT_VERSION and the analysis fingerprint (this package's code and rules, the user's rules file).
It is used only when its checksum verifies and those three match what was asked for; anything else
is a miss: the file is parsed again, the entry rewritten and one warning logged.

Finding the digest of a 1 GB file takes about 0.5 s, so the digests of files seen before are
remembered in digests.json by (path, size, mtime, inode), as git's index does. Each entry also
holds a fingerprint of sampled bytes of its file, and a remembered digest is used only when the
file at that path has that fingerprint: a digests.json that points a path at another trace's entry
is a miss, not that trace. A file named by its sha256 (the trace store's) needs no remembered
digest: its name is checked the same way, so touching it (LRU) does not make it a miss.

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
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from fusion import settings
from fusion.cache.sealed import Damaged, frame_bytes, frame_from, read_sealed, seal, write_sealed
from fusion.cache.store import UNWRITABLE, ensure_dir, evict_least_recent, is_digest, place, touch, write_with_room

if TYPE_CHECKING:
    from fusion.model.trace import Trace

log = logging.getLogger(__name__)

FORMAT_VERSION = 3
"""Bump when the entry layout or the meaning of a Trace field changes (new columns need no bump)."""
ENTRY_SUFFIX = ".fxt"
RESULT_SUFFIX = ".fxr"
"""Result cache entries (fusion.cache.results) share the directory and its cap."""
LEGACY_SUFFIXES = (".parquet",)
"""Entries of older formats: never read, counted in the cap and evicted first (they are the oldest)."""
_STAMPS_FILE = "digests.json"
_MAX_STAMPS = 2000
_SAMPLE_BLOCKS = 16
_SAMPLE_BYTES = 4096


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
    digest = hashlib.sha256(_code_fingerprint().encode())
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
        """The cached trace for the file at `path` when it is unchanged since it was stored, else None.

        `name` is what messages call the trace (else the path), as for fusion.classify.trace.load."""
        located = self._locate(Path(path))
        if located is None:
            return None
        return self.get(located[0], label, source=name or str(path), sample=located[1])

    def header(self, path: str | os.PathLike) -> dict[str, Any] | None:
        """The verified entry header (Trace `fields`, table `rows`) for the unchanged file at `path`, else None
        (quietly: see `read`).

        Reads no table: what a re-open needs to find its cached comparison."""
        located = self._locate(Path(path))
        if located is None:
            return None
        found = self.read(self._entry(located[0]), self._expected(*located), quiet=True)
        return None if found is None else found[0]

    def _locate(self, file: Path) -> tuple[str, str] | None:
        """(content digest, file_sample) of a file whose digest is known, else None."""
        digest = self._stamps().get(stamp(file)) or (file.name if is_digest(file.name) else None)
        if not isinstance(digest, str):
            return None
        sample = file_sample(file)
        return (digest, sample) if sample else None

    def _expected(self, digest: str, sample: str | None) -> dict[str, Any]:
        expected = {"format": FORMAT_VERSION, "digest": digest, "analysis": analysis_fingerprint()}
        if sample is not None:
            expected["sample"] = sample
        return expected

    def store(self, path: str | os.PathLike, trace: Trace, *, seen: str | None = None) -> None:
        """Cache `trace`, loaded from the file at `path`, and remember that file's digest.

        `seen` is stamp(path) taken before loading: when the file changed since, its digest is not
        remembered (the trace is of the old content)."""
        file = Path(path)
        now = stamp(file)
        if not now or (seen is not None and seen != now):
            return
        if self.put(trace, sample=file_sample(file)):
            self._remember(now, trace.digest)

    def get(
        self, digest: str, label: str | None = None, *, source: str | None = None, sample: str | None = None
    ) -> Trace | None:
        """The cached trace of that content digest, or None; anything that does not verify is a miss.

        With `sample` (file_sample of the file it should come from), an entry of other bytes is a miss too."""
        found = self.read(self._entry(digest), self._expected(digest, sample))
        if found is None:
            return None
        overrides = {key: value for key, value in (("label", label), ("source", source)) if value}
        try:
            return _trace_from(*found, overrides)
        except (Damaged, KeyError, TypeError, ValueError) as exc:
            log.warning("%s: %s: ignored and rebuilt", self._name(self._entry(digest)), exc)
            return None

    def put(self, trace: Trace, *, sample: str = "") -> bool:
        """Write the trace's entry; False when the cache cannot take it (it says why once)."""
        if self.problem is not None:
            return False
        chunks = _sealed_trace(trace, sample)
        if chunks is None:
            return False
        return self.write(self._entry(trace.digest), chunks)

    def _entry(self, digest: str) -> Path:
        key = hashlib.sha256(f"{digest}:{FORMAT_VERSION}:{analysis_fingerprint()}".encode()).hexdigest()
        return self.root / f"{key}{ENTRY_SUFFIX}"

    def _stamps(self) -> dict[str, Any]:
        try:
            stamps = orjson.loads((self.root / _STAMPS_FILE).read_bytes())
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
    """Path, size, mtime and inode of a regular file ('' when it is not one): changes when the file does."""
    try:
        resolved = path.resolve()
        stat = resolved.stat()
    except OSError:
        return ""
    if not resolved.is_file():
        return ""
    return f"{resolved}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ino}"


def file_sample(path: Path) -> str:
    """sha256 of the size and of _SAMPLE_BLOCKS blocks spread over the file ('' when unreadable)."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            digest.update(str(size).encode())
            step = max(size // _SAMPLE_BLOCKS, 1)
            for offset in range(0, size, step)[:_SAMPLE_BLOCKS] or [0]:
                handle.seek(offset)
                digest.update(handle.read(_SAMPLE_BYTES))
            handle.seek(max(size - _SAMPLE_BYTES, 0))
            digest.update(handle.read(_SAMPLE_BYTES))
    except OSError:
        return ""
    return digest.hexdigest()


def _sealed_trace(trace: Trace, sample: str) -> list[bytes] | None:
    """The entry's chunks; None (with a warning) when a field would not come back as it is."""
    import pandas as pd
    import pyarrow as pa

    header = {"format": FORMAT_VERSION, "digest": trace.digest, "analysis": analysis_fingerprint(), "sample": sample}
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
