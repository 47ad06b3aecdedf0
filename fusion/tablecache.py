"""On-disk columnar cache of loaded traces, so a trace analyzed before reopens in a fraction of a second.

An entry is one Parquet file holding the kernel table, with the name table and the trace's facts in
the file's metadata. Its key is the sha256 of the trace's bytes combined with FORMAT_VERSION and a
fingerprint of the classification rules, so a change of either invalidates old entries. Finding the
digest of a 1 GB file takes about 0.5 s, so digests of files already seen are remembered by
(path, size, mtime, inode), as git's index does; any change to the file changes that stamp.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import platformdirs
import pyarrow as pa
import pyarrow.parquet as pq

from .classify import BUILTIN_OP_RULES, BUILTIN_RULES, KERNEL_TYPES, RULES_ENV
from .store import atomic_file, evict_least_recent
from .trace import Trace

FORMAT_VERSION = 1
"""Bump when the kernel table, the name table or the Trace fields change shape or meaning."""
DEFAULT_MAX_MB = 4096
_META_KEY = b"fusion-explorer"
_STAMPS_FILE = "digests.json"
_MAX_STAMPS = 2000


def default_root() -> Path:
    """FUSION_CACHE_DIR, else the user cache directory."""
    configured = os.environ.get("FUSION_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(platformdirs.user_cache_dir("fusion-explorer")) / "tables"


class TableCache:
    """Parquet entries keyed by trace content, capped in size, least recently used evicted first."""

    def __init__(self, root: Path | None = None, max_bytes: int | None = None) -> None:
        self.root = Path(root) if root is not None else default_root()
        self.root.mkdir(parents=True, exist_ok=True)
        env_mb = float(os.environ.get("FUSION_CACHE_MAX_MB", DEFAULT_MAX_MB))
        self.max_bytes = int(env_mb * (1 << 20)) if max_bytes is None else max_bytes

    def lookup(self, path: str | os.PathLike, label: str | None = None, *, name: str | None = None) -> Trace | None:
        """The cached trace for the file at `path` when it is unchanged since it was stored, else None.

        `name` is what messages call the trace (else the path), as for fusion.trace.load."""
        digest = self._stamps().get(_stamp(Path(path)))
        return self.get(digest, label, source=name or str(path)) if digest else None

    def store(self, path: str | os.PathLike, trace: Trace) -> None:
        """Cache `trace`, loaded from the file at `path`, and remember that file's digest."""
        self.put(trace)
        self._remember(Path(path), trace.digest)

    def get(self, digest: str, label: str | None = None, *, source: str | None = None) -> Trace | None:
        """A cached trace, or None; an unreadable entry counts as absent."""
        entry = self._entry(digest)
        try:
            table = pq.read_table(entry)
        except (OSError, pa.ArrowException):
            return None
        os.utime(entry)
        meta = orjson.loads(table.schema.metadata[_META_KEY])
        return _trace_from(table, meta, label, source)

    def put(self, trace: Trace) -> None:
        """Write the trace's entry atomically, then evict old entries beyond the cap."""
        table = pa.Table.from_pandas(trace.kernels, preserve_index=False)
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), _META_KEY: _meta(trace)})
        entry = self._entry(trace.digest)
        with atomic_file(entry) as temp:
            pq.write_table(table, temp, compression="zstd")
        evict_least_recent(self.root, self.max_bytes, keep=entry.name, is_entry=lambda name: name.endswith(".parquet"))

    def _entry(self, digest: str) -> Path:
        key = hashlib.sha256(f"{digest}:{FORMAT_VERSION}:{_rules_fingerprint()}".encode()).hexdigest()
        return self.root / f"{key}.parquet"

    def _stamps(self) -> dict[str, str]:
        try:
            return orjson.loads((self.root / _STAMPS_FILE).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return {}

    def _remember(self, path: Path, digest: str) -> None:
        stamps = self._stamps()
        stamps[_stamp(path)] = digest
        if len(stamps) > _MAX_STAMPS:
            stamps = dict(list(stamps.items())[-_MAX_STAMPS:])
        with atomic_file(self.root / _STAMPS_FILE) as temp:
            temp.write_bytes(orjson.dumps(stamps))


def _rules_fingerprint() -> str:
    """Digest of the built-in rules and the user's FUSION_RULES file: types change when rules do."""
    digest = hashlib.sha256(BUILTIN_RULES.read_bytes() + BUILTIN_OP_RULES.read_bytes())
    user_rules = os.environ.get(RULES_ENV)
    if user_rules:
        try:
            digest.update(Path(user_rules).read_bytes())
        except OSError:
            digest.update(user_rules.encode())
    return digest.hexdigest()


def _stamp(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return ""
    return f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ino}"


def _meta(trace: Trace) -> bytes:
    names = trace.names
    return orjson.dumps(
        {
            "label": trace.label,
            "source": trace.source,
            "platform": trace.platform,
            "platform_evidence": trace.platform_evidence,
            "gpu": trace.gpu,
            "gpu_recorded": trace.gpu_recorded,
            "device_properties": trace.device_properties,
            "digest": trace.digest,
            "warnings": trace.warnings,
            "names": {
                "name": names.index.tolist(),
                **{column: names[column].tolist() for column in names.columns},
            },
        },
        option=orjson.OPT_SERIALIZE_NUMPY,
    )


def _trace_from(table: pa.Table, meta: dict[str, Any], label: str | None, source: str | None) -> Trace:
    kernels = table.to_pandas()
    kernels["type"] = kernels["type"].astype(pd.CategoricalDtype(list(KERNEL_TYPES)))
    columns = dict(meta["names"])
    index = pd.Index(columns.pop("name"), name="name")
    names = pd.DataFrame(columns, index=index)
    for column in ("components", "fused_components"):
        names[column] = names[column].map(tuple)
    return Trace(
        label=label or meta["label"],
        source=source or meta["source"],
        platform=meta["platform"],
        platform_evidence=meta["platform_evidence"],
        gpu=meta["gpu"],
        gpu_recorded=meta["gpu_recorded"],
        device_properties=meta["device_properties"],
        kernels=kernels,
        names=names,
        digest=meta["digest"],
        warnings=meta["warnings"],
    )
