"""Content-addressed store for uploaded traces, so a link naming a digest reopens the same bytes.

A trace is reachable only by its full sha256 digest: there is no listing, and a key that is not
64 hex digits is refused before any path is built. The store is capped in size and evicts the
least recently used traces (every access touches the file's mtime). A stored file is checked
against its name the first time a process serves it, so a damaged or replaced blob is never shown
as the trace a link names.

The file helpers here (atomic writes, eviction, room on a full disk) serve the table and result
caches too: a cache directory that cannot be written is never a reason to stop an analysis.
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from fusion import settings

log = logging.getLogger(__name__)

_DIGEST = re.compile(r"[0-9a-f]{64}")
TEMP_PREFIX = ".incoming-"
STALE_TEMP_SECONDS = 3600
"""An .incoming-* file older than this is a leftover of a killed write: removed at the next eviction."""
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})
UNWRITABLE = frozenset({errno.EROFS, errno.EACCES, errno.EPERM}) | NO_ROOM
_HASH_BLOCK = 8 << 20


class StoreError(OSError):
    """An upload that cannot be stored; the message is fit to show to the user (no server path when hosted).

    An OSError, so callers that catch disk errors around put() keep working."""


class TraceUnavailable(KeyError):
    """A stored trace whose bytes no longer match its digest: never served as the trace a link names."""

    def __str__(self) -> str:
        return "this trace is no longer available (the stored copy is damaged); upload it again"


def is_digest(key: object) -> bool:
    """True for a full lowercase sha256 hex digest, the only key the store accepts."""
    return isinstance(key, str) and _DIGEST.fullmatch(key) is not None


def place(root: Path, what: str) -> str:
    """How messages name a directory: its path, or only what it is when hosted (no server paths)."""
    return what if settings.hosted() else f"{what} {root}"


def ensure_dir(root: Path) -> OSError | None:
    """Create `root` if needed; the error instead of raising, so a cache can carry on without it."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return exc
    return None


class TraceStore:
    """Stored trace files named by the sha256 of their bytes."""

    def __init__(self, root: Path | None = None, max_bytes: int | None = None) -> None:
        self._root = Path(root) if root is not None else settings.store_dir()
        self.max_bytes = settings.store_max_bytes() if max_bytes is None else max_bytes
        self._verified: dict[str, tuple[int, int, int]] = {}
        ensure_dir(self._root)

    def put(self, data: bytes | memoryview) -> str:
        """Store `data` (deduplicated) and return its digest; the file appears whole or not at all.

        Raises StoreError when the store cannot take it, after evicting old traces to make room."""
        digest = hashlib.sha256(data).hexdigest()
        target = self._root / digest
        try:
            if target.is_file() and self._matches(digest, target):
                self._touch(digest, target)
                return digest
            write_with_room(self._root, target, lambda temp: temp.write_bytes(data), len(data), is_digest)
        except OSError as exc:
            raise StoreError(_store_problem(self._root, exc)) from exc
        self._verified[digest] = _identity(target.stat())
        evict_least_recent(self._root, self.max_bytes, keep=digest, is_entry=is_digest)
        return digest

    def path(self, digest: str) -> Path:
        """The stored file for a full digest, checked against it once per process.

        KeyError for anything but a stored full digest; TraceUnavailable (a KeyError) when the
        stored bytes no longer have that digest."""
        if not is_digest(digest):
            raise KeyError(digest)
        target = self._root / digest
        if not target.is_file():
            raise KeyError(digest)
        if not self._matches(digest, target):
            log.warning("stored trace %s does not match its digest; not served", digest[:12])
            raise TraceUnavailable(digest)
        self._touch(digest, target)
        return target

    def __contains__(self, digest: object) -> bool:
        """Whether path(digest) would serve a trace: stored, and its bytes still match the digest."""
        if not is_digest(digest):
            return False
        target = self._root / str(digest)
        return target.is_file() and self._matches(str(digest), target)

    def _touch(self, digest: str, target: Path) -> None:
        """Mark a verified file as used; it stays verified unless its size or inode changed meanwhile."""
        before = self._verified.get(digest)
        touch(target)
        try:
            after = _identity(target.stat())
        except OSError:
            return
        if before is not None and (before[0], before[2]) == (after[0], after[2]):
            self._verified[digest] = after

    def _matches(self, digest: str, target: Path) -> bool:
        """Whether the file's bytes hash to `digest`; remembered while the file is unchanged."""
        try:
            identity = _identity(target.stat())
            if self._verified.get(digest) == identity:
                return True
            ok = file_sha256(target) == digest
        except OSError:
            return False
        if ok:
            self._verified[digest] = identity
        return ok


def _identity(stat: os.stat_result) -> tuple[int, int, int]:
    return stat.st_size, stat.st_mtime_ns, stat.st_ino


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_HASH_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def regular_file_bytes(path: Path) -> bytes:
    """The bytes of a regular file; OSError for anything else (a FIFO, device or directory is never read: opened
    without blocking, it is refused on its type)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return handle.read()


def _store_problem(root: Path, exc: OSError) -> str:
    where = place(root, "the trace store")
    if exc.errno in NO_ROOM:
        return f"The upload could not be stored: {where} is full. Try again later or use a smaller trace."
    return f"The upload could not be stored: {where} cannot be written ({exc.strerror or exc})."


def touch(path: Path) -> None:
    """Mark an entry as just used (LRU); a read-only directory only loses the ordering."""
    try:
        os.utime(path)
    except OSError:
        pass


@contextmanager
def atomic_file(target: Path) -> Iterator[Path]:
    """A temporary path beside `target`; it replaces `target` only when the block succeeds."""
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=TEMP_PREFIX)
    os.close(fd)
    try:
        yield Path(temp)
        os.replace(temp, target)
    finally:
        Path(temp).unlink(missing_ok=True)


def write_with_room(
    root: Path, target: Path, write: Callable[[Path], object], size: int, is_entry: Callable[[str], bool]
) -> None:
    """Write `target` atomically; on a full disk evict least recently used entries for `size` bytes and retry once."""
    try:
        with atomic_file(target) as temp:
            write(temp)
    except OSError as exc:
        if exc.errno not in NO_ROOM or not evict_for(root, size, keep=target.name, is_entry=is_entry):
            raise
        with atomic_file(target) as temp:
            write(temp)


def _entries(root: Path, is_entry: Callable[[str], bool]) -> tuple[list[tuple[int, int, str]], int]:
    """Entries as (mtime, size, name), oldest first, and the bytes of unfinished writes.

    .incoming-* files older than STALE_TEMP_SECONDS are leftovers of killed writes and are removed."""
    entries, pending = [], 0
    stale_before = time.time_ns() - STALE_TEMP_SECONDS * 10**9
    for entry in os.scandir(root):
        try:
            if entry.name.startswith(TEMP_PREFIX) and entry.is_file(follow_symlinks=False):
                stat = entry.stat(follow_symlinks=False)
                if stat.st_mtime_ns < stale_before:
                    os.unlink(entry.path)
                else:
                    pending += stat.st_size
            elif is_entry(entry.name) and entry.is_file(follow_symlinks=False):
                stat = entry.stat(follow_symlinks=False)
                entries.append((stat.st_mtime_ns, stat.st_size, entry.name))
        except OSError:
            continue
    return sorted(entries), pending


def evict_least_recent(root: Path, max_bytes: int, *, keep: str, is_entry: Callable[[str], bool]) -> None:
    """Delete least recently used entries (by mtime) of `root` until they and unfinished writes fit in `max_bytes`."""
    try:
        entries, pending = _entries(root, is_entry)
    except OSError:
        return
    total = pending + sum(size for _, size, _ in entries)
    for _, size, name in entries:
        if total <= max_bytes:
            break
        if name != keep and _remove(root / name):
            total -= size


def evict_for(root: Path, needed: int, *, keep: str, is_entry: Callable[[str], bool]) -> bool:
    """Delete least recently used entries until `needed` bytes are freed; whether anything was freed."""
    try:
        entries, _ = _entries(root, is_entry)
    except OSError:
        return False
    freed = 0
    for _, size, name in entries:
        if freed >= needed:
            break
        if name != keep and _remove(root / name):
            freed += size
    return freed > 0


def _remove(path: Path) -> bool:
    try:
        path.unlink()
    except OSError:
        return False
    return True
