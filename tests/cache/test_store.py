"""The trace store: content addressing, atomic writes, LRU cap, and refusal of anything but a digest."""

from __future__ import annotations

import errno
import hashlib
import os
import tempfile
import time
from pathlib import Path

import pytest

from fusion.cache import store as store_module
from fusion.cache.store import STALE_TEMP_SECONDS, TEMP_PREFIX, StoreError, TraceStore, TraceUnavailable, is_digest


@pytest.fixture
def store(tmp_path: Path) -> TraceStore:
    return TraceStore(tmp_path / "traces", max_bytes=1000)


def _age(store: TraceStore, digest: str, seconds_ago: int) -> None:
    """Set a stored file's last use explicitly, so LRU order does not depend on timer resolution."""
    path = store.path(digest)
    when = path.stat().st_mtime - seconds_ago
    os.utime(path, (when, when))


def test_put_returns_sha256_and_path_holds_the_bytes(store: TraceStore) -> None:
    digest = store.put(b"hello trace")
    assert digest == hashlib.sha256(b"hello trace").hexdigest()
    assert store.path(digest).read_bytes() == b"hello trace"
    assert digest in store


def test_put_dedupes(store: TraceStore, tmp_path: Path) -> None:
    first = store.put(b"same")
    second = store.put(b"same")
    assert first == second
    assert sorted(os.listdir(tmp_path / "traces")) == [first]


def test_a_failed_write_leaves_nothing_behind(
    store: TraceStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = Path.write_bytes

    def half_written(path: Path, data: bytes) -> int:
        real_write(path, data[: len(data) // 2])
        raise OSError("disk full")

    monkeypatch.setattr(Path, "write_bytes", half_written)
    with pytest.raises(StoreError, match="cannot be written"):
        store.put(b"whole trace")
    assert os.listdir(tmp_path / "traces") == []


def test_put_writes_through_a_temp_file_and_rename(store: TraceStore, monkeypatch: pytest.MonkeyPatch) -> None:
    renames: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src: str, dst: str) -> None:
        renames.append((Path(src).name, Path(dst).name))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    digest = store.put(b"atomic")
    assert len(renames) == 1
    temp_name, final_name = renames[0]
    assert final_name == digest and temp_name != digest


def test_cap_evicts_least_recently_used(store: TraceStore) -> None:
    old = store.put(b"a" * 400)
    used = store.put(b"b" * 400)
    _age(store, old, 20)
    _age(store, used, 30)
    store.path(used)  # touching makes it the most recently used
    newest = store.put(b"c" * 400)
    assert old not in store
    assert used in store and newest in store


def test_a_trace_bigger_than_the_cap_is_kept_until_the_next_put(store: TraceStore) -> None:
    big = store.put(b"x" * 5000)
    assert big in store
    small = store.put(b"y" * 10)
    assert big not in store and small in store


@pytest.mark.parametrize(
    "key",
    ["../etc/passwd", "..", "", "abc", "0" * 63, "0" * 65, "G" * 64, "A" * 64, "0" * 64 + "\n", "/" + "0" * 63],
)
def test_rejects_anything_but_a_full_digest(store: TraceStore, key: str) -> None:
    assert not is_digest(key)
    assert key not in store
    with pytest.raises(KeyError):
        store.path(key)


def test_a_prefix_of_a_stored_digest_finds_nothing(store: TraceStore) -> None:
    digest = store.put(b"secret")
    for prefix in (digest[:8], digest[:32], digest[:63]):
        assert prefix not in store
        with pytest.raises(KeyError):
            store.path(prefix)


def test_unknown_full_digest_is_a_key_error(store: TraceStore) -> None:
    with pytest.raises(KeyError):
        store.path("f" * 64)
    assert 123 not in store


def test_no_listing_method() -> None:
    public = {name for name in dir(TraceStore) if not name.startswith("_")}
    assert public == {"put", "path"}
    assert not hasattr(TraceStore, "__iter__")


def test_env_configures_dir_and_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FUSION_STORE_DIR", str(tmp_path / "env-store"))
    monkeypatch.setenv("FUSION_STORE_MAX_MB", "2")
    store = TraceStore()
    digest = store.put(b"z")
    assert (tmp_path / "env-store" / digest).is_file()
    assert store.max_bytes == 2 << 20


def test_a_blob_replaced_under_its_digest_is_no_longer_available(tmp_path: Path) -> None:
    store = TraceStore(tmp_path / "traces")
    digest = store.put(b"the real trace")
    other = store.put(b"another trace")
    (tmp_path / "traces" / digest).write_bytes((tmp_path / "traces" / other).read_bytes())
    restarted = TraceStore(tmp_path / "traces")
    for server in (store, restarted):
        assert digest not in server
        with pytest.raises(TraceUnavailable) as caught:
            server.path(digest)
        assert str(caught.value).startswith("this trace is no longer available")
    assert restarted.path(other).read_bytes() == b"another trace"
    assert restarted.put(b"the real trace") == digest
    assert restarted.path(digest).read_bytes() == b"the real trace"


def test_a_blob_is_hashed_once_while_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = TraceStore(tmp_path / "traces")
    digest = store.put(b"trace")
    restarted = TraceStore(tmp_path / "traces")
    hashed: list[Path] = []
    real = store_module.file_sha256
    monkeypatch.setattr(store_module, "file_sha256", lambda path: hashed.append(path) or real(path))
    for _ in range(3):
        restarted.path(digest)
    assert hashed == [tmp_path / "traces" / digest]


def _refuse(code: int):
    def refuse(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    return refuse


@pytest.mark.parametrize("hosted", [False, True])
def test_an_unwritable_store_is_a_clear_error_without_a_server_path_when_hosted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hosted: bool
) -> None:
    if hosted:
        monkeypatch.setenv("FUSION_HOSTED", "1")
    store = TraceStore(tmp_path / "traces")
    monkeypatch.setattr(tempfile, "mkstemp", _refuse(errno.EROFS))
    with pytest.raises(StoreError) as caught:
        store.put(b"upload")
    message = str(caught.value)
    assert "could not be stored" in message and "Read-only file system" in message
    assert (str(tmp_path) in message) is not hosted


def test_a_store_that_cannot_be_created_does_not_fail_until_an_upload(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    store = TraceStore(blocker / "traces")
    assert "f" * 64 not in store
    with pytest.raises(StoreError, match="cannot be written"):
        store.put(b"upload")


def test_a_full_store_evicts_the_least_recently_used_then_retries_once(
    store: TraceStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = store.put(b"a" * 300)
    _age(store, old, 60)
    kept = store.put(b"b" * 300)
    real = Path.write_bytes
    attempts: list[int] = []

    def full_once(path: Path, data: bytes) -> int:
        attempts.append(len(data))
        if len(attempts) == 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(path, data)

    monkeypatch.setattr(Path, "write_bytes", full_once)
    new = store.put(b"c" * 100)
    assert len(attempts) == 2
    assert old not in store and kept in store and new in store


def test_a_store_that_stays_full_says_so(store: TraceStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.put(b"a" * 300)
    monkeypatch.setattr(Path, "write_bytes", _refuse(errno.ENOSPC))
    with pytest.raises(StoreError, match="is full"):
        store.put(b"c" * 100)


def test_unfinished_writes_count_in_the_cap_and_stale_ones_are_removed(store: TraceStore, tmp_path: Path) -> None:
    root = tmp_path / "traces"
    fresh = root / f"{TEMP_PREFIX}fresh"
    stale = root / f"{TEMP_PREFIX}stale"
    fresh.write_bytes(b"x" * 700)
    stale.write_bytes(b"y" * 5000)
    long_ago = time.time() - STALE_TEMP_SECONDS - 60
    os.utime(stale, (long_ago, long_ago))
    first = store.put(b"a" * 200)
    _age(store, first, 60)
    second = store.put(b"b" * 200)
    assert not stale.exists() and fresh.exists()
    assert first not in store and second in store, "700 + 200 + 200 bytes exceed the cap of 1000"


def test_a_store_error_reads_as_its_message(store: TraceStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Path, "write_bytes", _refuse(errno.ENOSPC))
    with pytest.raises(OSError) as caught:
        store.put(b"upload")
    assert isinstance(caught.value, StoreError)
    assert str(caught.value).startswith("The upload could not be stored: the trace store ")
