"""Every FUSION_* setting, read from the environment at call time, with one error path for bad values.

Nothing else in the project reads os.environ for a FUSION_* name: call the function here instead, so a
test (or a server operator) that changes a variable sees the change at once, and a bad value always
gets the same kind of message: `FUSION_X='value': must be ...`.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from fusion.errors import ConfigError

APP_DIR_NAME = "fusion-explorer"
DEFAULT_CACHE_MAX_MB = 4096
DEFAULT_STORE_MAX_MB = 10240
DEFAULT_MAX_TRACE_BYTES = 8 << 30
HOSTED_UPLOAD_MB = 2048
DEFAULT_CACHED_TRACES = 6
DEFAULT_CACHED_COMPARISONS = 4
DEFAULT_MAX_NAME_CHARS = 16384
"""Three times the longest kernel name of the shared real traces (5,166 characters, a templated C++ name)."""
MIN_NAME_CHARS = 256
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
"""The words a boolean setting accepts (any case, blanks around them ignored); unset or empty is false. Any
other value is an error, never a silent false: FUSION_HOSTED=enabled must not leave server paths open."""


class SettingError(ConfigError):
    """A FUSION_* variable whose value cannot be used; the message names the variable and the value."""

    def __init__(self, name: str, value: str, expected: str) -> None:
        super().__init__(f"{name}={value!r}: must be {expected}")
        self.name = name


def _raw(name: str) -> str | None:
    value = os.environ.get(name)
    return value.strip() if value is not None and value.strip() else None


def _flag(name: str) -> bool:
    value = _raw(name)
    if value is None:
        return False
    if value.lower() in TRUE_WORDS:
        return True
    if value.lower() in FALSE_WORDS:
        return False
    raise SettingError(name, value, f"one of {', '.join(TRUE_WORDS)} (on) or {', '.join(FALSE_WORDS)} (off)")


def _number(name: str, default: float, *, minimum: float = 0.0) -> float:
    value = _raw(name)
    if value is None:
        return default
    try:
        number = float(value)
    except ValueError:
        raise SettingError(name, value, f"a number of at least {minimum:g}") from None
    if not number >= minimum or number == float("inf"):
        raise SettingError(name, value, f"a number of at least {minimum:g}")
    return number


def _count(name: str, default: int, *, minimum: int = 1) -> int:
    value = _raw(name)
    if value is None:
        return default
    if not value.isdigit() or int(value) < minimum:
        raise SettingError(name, value, f"a whole number of at least {minimum}")
    return int(value)


def _directory(name: str, leaf: str) -> Path:
    value = _raw(name)
    return Path(value) if value else Path(platformdirs.user_cache_dir(APP_DIR_NAME)) / leaf


def cache_dir() -> Path:
    """FUSION_CACHE_DIR: the on-disk table (and result) cache."""
    return _directory("FUSION_CACHE_DIR", "tables")


def cache_max_bytes() -> int:
    """FUSION_CACHE_MAX_MB: the cache's size cap."""
    return int(_number("FUSION_CACHE_MAX_MB", DEFAULT_CACHE_MAX_MB) * (1 << 20))


def store_dir() -> Path:
    """FUSION_STORE_DIR: the content-addressed store of uploaded traces."""
    return _directory("FUSION_STORE_DIR", "traces")


def batch_dir() -> Path:
    """FUSION_BATCH_DIR: the batch result folders the dashboard's Batch page opens by name."""
    return _directory("FUSION_BATCH_DIR", "batches")


def store_max_bytes() -> int:
    """FUSION_STORE_MAX_MB: the store's size cap."""
    return int(_number("FUSION_STORE_MAX_MB", DEFAULT_STORE_MAX_MB) * (1 << 20))


def max_trace_bytes() -> int:
    """FUSION_MAX_TRACE_BYTES: the largest decompressed trace accepted."""
    return int(_number("FUSION_MAX_TRACE_BYTES", DEFAULT_MAX_TRACE_BYTES, minimum=1))


def hosted() -> bool:
    """FUSION_HOSTED=1: no server paths from users or links, and an upload size cap."""
    return _flag("FUSION_HOSTED")


def trace_roots() -> list[Path]:
    """FUSION_TRACE_ROOTS: folders (separated by os.pathsep) whose files a local dashboard may open by path, besides
    its working directory and the bundled samples."""
    value = _raw("FUSION_TRACE_ROOTS")
    return [Path(part).expanduser() for part in value.split(os.pathsep) if part.strip()] if value else []


def max_upload_mb() -> float | None:
    """FUSION_MAX_UPLOAD_MB, else HOSTED_UPLOAD_MB when hosted; None means only the server's own limit."""
    if _raw("FUSION_MAX_UPLOAD_MB") is not None:
        return _number("FUSION_MAX_UPLOAD_MB", HOSTED_UPLOAD_MB, minimum=1)
    return float(HOSTED_UPLOAD_MB) if hosted() else None


def max_name_chars() -> int:
    """FUSION_MAX_NAME_CHARS: longer kernel and op names are kept as their beginning, length and digest."""
    return _count("FUSION_MAX_NAME_CHARS", DEFAULT_MAX_NAME_CHARS, minimum=MIN_NAME_CHARS)


def cached_traces() -> int:
    """FUSION_CACHED_TRACES: loaded traces kept in a server's memory."""
    return _count("FUSION_CACHED_TRACES", DEFAULT_CACHED_TRACES)


def cached_comparisons() -> int:
    """FUSION_CACHED_COMPARISONS: comparisons kept in a server's memory."""
    return _count("FUSION_CACHED_COMPARISONS", DEFAULT_CACHED_COMPARISONS)


def analysis_threads() -> int:
    """FUSION_ANALYSIS_THREADS: threads one comparison may use. With 2 or more, a large pair's op-level and per-phase
    comparisons run beside the whole comparison (comparison.pair.SECOND_THREAD); with 1, after it on the same thread
    (a busy machine or a pool of one process per core gains nothing from a second thread: the two then take turns
    on one core, about 10% slower). The default is 2 where this process may run on two CPUs or more, else 1."""
    return _count(ANALYSIS_THREADS, 2 if usable_cpus() >= 2 else 1)


ANALYSIS_THREADS = "FUSION_ANALYSIS_THREADS"


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the system tells it, else every CPU)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def rules_path() -> str:
    """FUSION_RULES: a user rule file checked before the built-in rules ('' when unset)."""
    return _raw("FUSION_RULES") or ""


def gpu_peaks_path() -> str:
    """FUSION_GPU_PEAKS: a user file of GPU peaks (fusion/efficiency/gpu_peaks.toml's format) that adds GPUs to the
    built-in table or overrides its rows ('' when unset)."""
    return _raw("FUSION_GPU_PEAKS") or ""


def debug() -> bool:
    """FUSION_DEBUG=1: the CLI shows tracebacks of internal errors."""
    return _flag("FUSION_DEBUG")


def check() -> None:
    """Read every setting once, so a bad value stops a command or the app at its start with one line (a
    SettingError), not halfway through, and never reads as a default."""
    for read in (
        cache_dir,
        cache_max_bytes,
        store_dir,
        batch_dir,
        store_max_bytes,
        max_trace_bytes,
        hosted,
        trace_roots,
        max_upload_mb,
        max_name_chars,
        cached_traces,
        analysis_threads,
        cached_comparisons,
        rules_path,
        debug,
    ):
        read()
