"""Content-addressed store for uploaded traces, so a link naming a digest reopens the same bytes.

A trace is reachable only by its full sha256 digest: there is no listing, and a key that is not
64 hex digits is refused before any path is built. The store is capped in size and evicts the
least recently used traces (every access touches the file's mtime).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import platformdirs

DEFAULT_MAX_MB = 10240
_DIGEST = re.compile(r"[0-9a-f]{64}")
_TEMP_PREFIX = ".incoming-"


def is_digest(key: object) -> bool:
    """True for a full lowercase sha256 hex digest, the only key the store accepts."""
    return isinstance(key, str) and _DIGEST.fullmatch(key) is not None


def default_root() -> Path:
    """FUSION_STORE_DIR, else the user cache directory."""
    configured = os.environ.get("FUSION_STORE_DIR")
    if configured:
        return Path(configured)
    return Path(platformdirs.user_cache_dir("fusion-explorer")) / "traces"


def default_max_bytes() -> int:
    """FUSION_STORE_MAX_MB (mebibytes), else DEFAULT_MAX_MB."""
    return int(float(os.environ.get("FUSION_STORE_MAX_MB", DEFAULT_MAX_MB)) * (1 << 20))


class TraceStore:
    """Stored trace files named by the sha256 of their bytes."""

    def __init__(self, root: Path | None = None, max_bytes: int | None = None) -> None:
        self._root = Path(root) if root is not None else default_root()
        self._root.mkdir(parents=True, exist_ok=True)
        self.max_bytes = default_max_bytes() if max_bytes is None else max_bytes

    def put(self, data: bytes | memoryview) -> str:
        """Store `data` (deduplicated) and return its digest; the file appears whole or not at all."""
        digest = hashlib.sha256(data).hexdigest()
        target = self._root / digest
        if target.exists():
            os.utime(target)
            return digest
        with atomic_file(target) as temp:
            temp.write_bytes(data)
        evict_least_recent(self._root, self.max_bytes, keep=digest, is_entry=is_digest)
        return digest

    def path(self, digest: str) -> Path:
        """The stored file for a full digest; KeyError for anything else or an unknown digest."""
        if not is_digest(digest):
            raise KeyError(digest)
        target = self._root / digest
        try:
            os.utime(target)
        except FileNotFoundError:
            raise KeyError(digest) from None
        return target

    def __contains__(self, digest: object) -> bool:
        return is_digest(digest) and (self._root / str(digest)).is_file()


@contextmanager
def atomic_file(target: Path) -> Iterator[Path]:
    """A temporary path beside `target`; it replaces `target` only when the block succeeds."""
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=_TEMP_PREFIX)
    os.close(fd)
    try:
        yield Path(temp)
        os.replace(temp, target)
    finally:
        Path(temp).unlink(missing_ok=True)


def evict_least_recent(root: Path, max_bytes: int, *, keep: str, is_entry: Callable[[str], bool]) -> None:
    """Delete the least recently used entries (by mtime) of `root` until they fit in `max_bytes`."""
    entries = sorted(
        (stat.st_mtime_ns, stat.st_size, entry.name)
        for entry in os.scandir(root)
        if is_entry(entry.name) and entry.is_file() and (stat := entry.stat())
    )
    total = sum(size for _, size, _ in entries)
    for _, size, name in entries:
        if total <= max_bytes:
            break
        if name != keep:
            (root / name).unlink(missing_ok=True)
            total -= size
