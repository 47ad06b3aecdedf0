"""Fault injection into the table and result caches: whatever happens to the cache directory, `compare`
prints exactly what `compare --no-cache` prints, or fails with one clear line. Never a different number.

Real small tmpfs mounts are used for read-only and full directories where the machine allows mounting
(root); the same faults are also simulated through the file layer, which runs everywhere.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
from builders import PROJECT, SAMPLES

from fusion import settings
from fusion.__main__ import main
from fusion.cache import tables as tablecache
from fusion.cache.loading import WORKDIR_PREFIX, remove_leftovers
from fusion.cache.sealed import seal, write_sealed
from fusion.cache.store import STALE_TEMP_SECONDS, TEMP_PREFIX

PAIR = [str(SAMPLES / "vllm_moe_full_graph" / name) for name in ("amd.json.gz", "nvidia.json.gz")]
OTHER_PAIR = [str(SAMPLES / "eager_prefill" / name) for name in ("amd.json.gz", "nvidia.json.gz")]
FLIPS = 30


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def compare_json(*extra: str, pair: list[str] = PAIR) -> tuple[int, str, str]:
    return run("compare", *pair, "--format", "json", *extra)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """stdout and stderr of compare --no-cache: what every faulty cache must still give (made once: it reads no
    cache, so no test's cache can change it; in private cache folders all the same)."""
    root = tmp_path_factory.mktemp("baseline-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FUSION_CACHE_DIR", str(root / "tables"))
        patch.setenv("FUSION_STORE_DIR", str(root / "traces"))
        code, out, err = compare_json("--no-cache")
    assert code == 0
    assert not root.exists() or not any(root.iterdir()), "--no-cache wrote to the cache"
    return out, err


@pytest.fixture
def cache_dir() -> Path:
    return settings.cache_dir()


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Path, list[str]], None]:
    """Fill a cache folder with what `compare` of the pair leaves in an empty one (its table and result entries and
    digests.json), copied from one made once in the module: the entries of two runs are byte for byte the same,
    and a cold compare of the sample pair is about 0.25 s of CPU, which most tests here spent on their
    precondition. (test_a_warm_cache_gives_the_no_cache_result fills its cache by comparing.)"""
    made: dict[tuple[str, ...], Path] = {}

    def fill(cache_dir: Path, pair: list[str] = PAIR) -> None:
        if tuple(pair) not in made:
            root = tmp_path_factory.mktemp("warm-cache")
            with pytest.MonkeyPatch.context() as patch:
                patch.setenv("FUSION_CACHE_DIR", str(root / "tables"))
                patch.setenv("FUSION_STORE_DIR", str(root / "traces"))
                code, _, err = compare_json(pair=pair)
            assert code == 0, err
            made[tuple(pair)] = root / "tables"
        shutil.copytree(made[tuple(pair)], cache_dir, dirs_exist_ok=True)

    return fill


def assert_same(result: tuple[int, str, str], baseline: tuple[str, str]) -> list[str]:
    """The run gave the --no-cache output; returns the stderr lines it added (cache warnings)."""
    code, out, err = result
    assert code == 0, err
    assert out == baseline[0]
    assert err.endswith(baseline[1])
    return err[: len(err) - len(baseline[1])].splitlines()


def entries(cache_dir: Path, suffix: str) -> list[Path]:
    return sorted(cache_dir.glob(f"*{suffix}"))


def test_a_warm_cache_gives_the_no_cache_result(baseline, cache_dir) -> None:
    assert assert_same(compare_json(), baseline) == []
    assert len(entries(cache_dir, ".fxt")) == 2 and len(entries(cache_dir, ".fxr")) == 1
    assert assert_same(compare_json(), baseline) == []


@pytest.mark.parametrize("suffix", [".fxt", ".fxr"])
def test_byte_flips_anywhere_in_an_entry_are_a_miss(baseline, cache_dir, warm, suffix) -> None:
    warm(cache_dir)
    entry = entries(cache_dir, suffix)[0]
    size = entry.stat().st_size
    positions = sorted({0, size - 1, *random.Random(suffix).sample(range(size), FLIPS - 2)})
    for position in positions:
        data = bytearray(entry.read_bytes())
        data[position] ^= 0x5A
        entry.write_bytes(bytes(data))
        added = assert_same(compare_json(), baseline)
        assert len(added) == 1 and "ignored and rebuilt" in added[0], (position, added)
        assert entry.read_bytes() != bytes(data), "the damaged entry was rewritten"


def test_swapped_table_entries_are_a_miss(baseline, cache_dir, warm) -> None:
    warm(cache_dir)
    first, second = entries(cache_dir, ".fxt")
    held = first.read_bytes()
    first.write_bytes(second.read_bytes())
    second.write_bytes(held)
    added = assert_same(compare_json(), baseline)
    assert len(added) == 2 and all("holds another entry (digest" in line for line in added)


@pytest.mark.parametrize("suffix", [".fxt", ".fxr"])
def test_a_foreign_entry_in_place_of_ours_is_a_miss(baseline, cache_dir, warm, suffix) -> None:
    warm(cache_dir, OTHER_PAIR)
    foreign = {path.name: path.read_bytes() for path in entries(cache_dir, suffix)}
    compare_json()
    for path in entries(cache_dir, suffix):
        if path.name not in foreign:
            path.write_bytes(next(iter(foreign.values())))
    added = assert_same(compare_json(), baseline)
    assert added and all("holds another entry" in line for line in added)


def test_a_result_of_other_parameters_is_a_miss(baseline, cache_dir) -> None:
    compare_json("--min-group-size", "20")
    other = entries(cache_dir, ".fxr")[0].read_bytes()
    compare_json()
    for path in entries(cache_dir, ".fxr"):
        path.write_bytes(other)
    added = assert_same(compare_json(), baseline)
    assert len(added) == 1 and "holds another entry (key differ)" in added[0]


def _replace_with(path: Path, kind: str) -> None:
    """Put something that is not a valid entry where an entry is."""
    path.unlink()
    if kind == "directory":
        (path / "inner").mkdir(parents=True)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    elif kind == "socket":  # a Unix socket's inode (what bind() leaves): opening it fails with ENXIO
        os.mknod(path, stat.S_IFSOCK | 0o600)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "no metadata":
        write_sealed(path, seal({"format": tablecache.FORMAT_VERSION}, {}))
    elif kind == "old parquet":
        path.write_bytes(b"PAR1" + b"\0" * 100 + b"PAR1")


@pytest.mark.parametrize("kind", ["directory", "fifo", "device", "socket", "empty", "no metadata", "old parquet"])
@pytest.mark.parametrize("suffix", [".fxt", ".fxr"])
def test_something_else_in_place_of_an_entry_is_a_miss(baseline, cache_dir, warm, kind, suffix) -> None:
    warm(cache_dir)
    for path in entries(cache_dir, suffix):
        _replace_with(path, kind)
    assert_same(compare_json(), baseline)
    assert all(path.is_file() and not path.is_symlink() for path in entries(cache_dir, suffix))
    assert assert_same(compare_json(), baseline) == [], "the entries were rebuilt"


def _stamps(cache_dir: Path) -> dict:
    return orjson.loads((cache_dir / "digests.json").read_bytes())


@pytest.mark.parametrize(
    "content",
    [b"[]", b'"text"', b"3", b"null", b"{not json", b"\xff\xfe", b'{"a": 1}'],
    ids=["list", "string", "number", "null", "broken", "binary", "unknown-key"],
)
def test_a_damaged_digests_file_is_ignored(baseline, cache_dir, warm, content) -> None:
    warm(cache_dir)
    (cache_dir / "digests.json").write_bytes(content)
    assert_same(compare_json(), baseline)
    assert assert_same(compare_json(), baseline) == []


def test_digests_pointing_a_path_at_another_trace_are_a_miss(baseline, cache_dir, warm) -> None:
    """A hint that names the wrong entry: the entry's file_hash is not the file's, so the trace is parsed again
    (quietly: the hint is only a hint) and the hint put right."""
    warm(cache_dir)
    stamps = _stamps(cache_dir)
    first, second = list(stamps)
    stamps[first], stamps[second] = stamps[second], stamps[first]
    (cache_dir / "digests.json").write_bytes(orjson.dumps(stamps))
    assert assert_same(compare_json(), baseline) == []
    assert _stamps(cache_dir)[first] == stamps[second]


def test_digests_pointing_at_a_foreign_trace_are_a_miss(baseline, cache_dir, warm) -> None:
    warm(cache_dir, OTHER_PAIR)
    foreign = list(_stamps(cache_dir).values())
    compare_json()
    stamps = {key: foreign[0] for key in _stamps(cache_dir)}
    (cache_dir / "digests.json").write_bytes(orjson.dumps(stamps))
    assert_same(compare_json(), baseline)


class Hangs(Exception):
    """Raised by `deadline`; not an OSError (TimeoutError is one), which the code under test may catch."""


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail the test instead of hanging when the block takes longer (SIGALRM: Linux, main thread)."""

    def expired(*_: object) -> None:
        raise Hangs(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("kind", ["directory", "fifo", "device", "socket"])
def test_something_else_in_place_of_the_digests_file_is_never_opened(baseline, cache_dir, warm, kind) -> None:
    """A FIFO digests.json hung compare for ever (issue 40 #2): it is skipped on its type, never read."""
    warm(cache_dir)
    _replace_with(cache_dir / "digests.json", kind)
    with deadline(60):
        assert_same(compare_json(), baseline)
        assert_same(run("compare", *PAIR), (run("compare", *PAIR, "--no-cache")[1], ""))
    assert (cache_dir / "digests.json").is_file() and not (cache_dir / "digests.json").is_symlink()


def _plain_copies(folder: Path, pair: list[str]) -> list[str]:
    import gzip

    copies = []
    for side, path in enumerate(pair, start=1):
        copy = folder / f"trace{side}.json"
        copy.write_bytes(gzip.decompress(Path(path).read_bytes()))
        copies.append(str(copy))
    return copies


def _outside_the_old_sample(data: bytes, marker: bytes) -> int:
    """A position of `marker` outside every block the old 16-block sample read: an edit there went unseen."""
    step, sampled = len(data) // 16, 4096
    for found in (m for m in range(len(data)) if data.startswith(marker, m)):
        if found % step > sampled + len(marker) and found < len(data) - sampled - 64:
            return found
    raise AssertionError("no such position")


@pytest.mark.parametrize("fmt", ["json", "text", "csv"])
def test_an_in_place_edit_that_keeps_size_and_mtime_is_never_served_stale(tmp_path, fmt) -> None:
    """rsync --inplace -t or cp -p of an equal-size file: same path, size, mtime and inode, other bytes (issue 40
    #1). The result is the --no-cache one of the new bytes, in every format."""
    pair = _plain_copies(tmp_path, PAIR)
    cached = run("compare", *pair, "--format", fmt)
    target = Path(pair[0])
    before = target.stat()
    data = target.read_bytes()
    kernel = _outside_the_old_sample(data, b'"cat":"kernel"')
    where = data.index(b'"dur":', kernel) + len(b'"dur":')
    digit = data[where : where + 1]
    assert digit.isdigit()
    with target.open("r+b") as handle:
        handle.seek(where)
        handle.write(b"9" if digit != b"9" else b"8")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    fresh = run("compare", *pair, "--format", fmt, "--no-cache")
    assert fresh[1] != cached[1], "the edit changes the numbers"
    assert run("compare", *pair, "--format", fmt) == fresh
    assert run("compare", *pair, "--format", fmt) == fresh, "and again, from the rebuilt entry"


# --- read-only and full directories -----------------------------------------------------------------


@contextlib.contextmanager
def tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A small tmpfs mounted at `where`; skips the test where the machine does not allow mounting."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def remount_read_only(where: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(where)], check=True)


def test_a_read_only_cache_disk_still_serves_and_never_stops_a_comparison(baseline, tmp_path, monkeypatch) -> None:
    with tmpfs(tmp_path / "ro", "4m") as disk:
        monkeypatch.setenv("FUSION_CACHE_DIR", str(disk))
        compare_json()
        remount_read_only(disk)
        assert assert_same(compare_json(), baseline) == [], "a fully cached pair needs no writes"
        assert assert_same(compare_json("--min-group-size", "50"), baseline) == []


@pytest.mark.parametrize("hosted", [False, True])
def test_an_empty_read_only_cache_disk_is_one_warning(baseline, tmp_path, monkeypatch, hosted) -> None:
    with tmpfs(tmp_path / "ro", "1m") as disk:
        remount_read_only(disk)
        monkeypatch.setenv("FUSION_CACHE_DIR", str(disk / "tables"))
        if hosted:
            monkeypatch.setenv("FUSION_HOSTED", "1")
        added = assert_same(compare_json(), baseline)
        assert len(added) == 1 and "Read-only file system" in added[0] and "without caching" in added[0]
        assert (str(disk) in added[0]) is not hosted


def test_a_cache_disk_too_small_for_an_entry_is_one_warning(baseline, tmp_path, monkeypatch) -> None:
    with tmpfs(tmp_path / "small", "64k") as disk:
        monkeypatch.setenv("FUSION_CACHE_DIR", str(disk))
        added = assert_same(compare_json(), baseline)
        assert len(added) == 1 and "No space left on device" in added[0] and str(disk) in added[0]


def test_a_full_cache_disk_evicts_the_least_recently_used_and_retries(baseline, tmp_path, monkeypatch) -> None:
    with tmpfs(tmp_path / "full", "1m") as disk:
        monkeypatch.setenv("FUSION_CACHE_DIR", str(disk))
        old = [disk / f"{i:064x}.fxt" for i in range(3)]
        for i, path in enumerate(old):
            path.write_bytes(b"\0" * (335 << 10))  # leaves less room than any entry needs
            os.utime(path, (1000 + i, 1000 + i))
        assert assert_same(compare_json(), baseline) == []
        assert not old[0].exists() and len(entries(disk, ".fxt")) >= 2
        assert assert_same(compare_json(), baseline) == []


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES, errno.ENOSPC])
def test_simulated_unwritable_cache_is_one_warning(baseline, cache_dir, monkeypatch, code) -> None:
    def refuse(*args, **kwargs):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    added = assert_same(compare_json(), baseline)
    assert len(added) == 1 and os.strerror(code) in added[0] and str(cache_dir) in added[0]


def test_simulated_full_disk_once_evicts_and_retries(baseline, cache_dir, warm, monkeypatch) -> None:
    warm(cache_dir, OTHER_PAIR)
    old = entries(cache_dir, ".fxt")
    for path in old:
        os.utime(path, (1000, 1000))
    real = tablecache.write_sealed
    calls = []

    def full_once(path, chunks):
        calls.append(path)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(path, chunks)

    monkeypatch.setattr(tablecache, "write_sealed", full_once)
    assert assert_same(compare_json(), baseline) == []
    assert not all(path.exists() for path in old), "an old entry made room"
    assert len(entries(cache_dir, ".fxr")) >= 1


# --- killed processes -------------------------------------------------------------------------------

_SLOW_WRITER = """
import sys, time
import fusion.cache.tables as tablecache

def half_then_hang(path, chunks):
    data = b"".join(chunks)
    with open(path, "wb") as handle:
        handle.write(data[: len(data) // 2])
        handle.flush()
    print("writing", flush=True)
    time.sleep(600)

tablecache.write_sealed = half_then_hang
from fusion.__main__ import main
main(["compare", *sys.argv[1:3], "--format", "json"])
"""


def _python(code: str, *args: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(PROJECT)}
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, env=env, cwd=PROJECT)


def test_kill_9_during_a_cache_write(baseline, cache_dir) -> None:
    writer = _python(_SLOW_WRITER, *PAIR)
    assert writer.stdout.readline() == b"writing\n"
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    leftovers = list(cache_dir.glob(f"{TEMP_PREFIX}*"))
    assert leftovers and entries(cache_dir, ".fxt") == []
    assert assert_same(compare_json(), baseline) == []
    assert assert_same(compare_json(), baseline) == []
    stale = time.time() - STALE_TEMP_SECONDS - 60
    for path in leftovers:
        os.utime(path, (stale, stale))
    for path in entries(cache_dir, ".fxr"):
        path.unlink()
    assert_same(compare_json(), baseline)
    assert not any(path.exists() for path in leftovers), "stale leftovers go at the next eviction"


_PARALLEL_PARENT = """
import sys
from fusion.cache.loading import load_pair
load_pair(sys.argv[1], sys.argv[2], parallel=True)
"""


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads children from Linux /proc")
def test_the_loader_child_dies_with_its_parent_and_leftovers_go(tmp_path) -> None:
    fifos = [tmp_path / "a.json", tmp_path / "b.json"]
    for fifo in fifos:
        os.mkfifo(fifo)
    parent = _python(_PARALLEL_PARENT, *map(str, fifos))
    deadline = time.monotonic() + 60
    while not (children := _children(parent.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(children) == 1, "one loader process, whose threads read both files"
    workdirs = list(Path(tempfile.gettempdir()).glob(f"{WORKDIR_PREFIX}{parent.pid}-*"))
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 30
    while any(map(_running, children)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(_running, children)), "the loader process outlived its parent"
    assert workdirs and all(path.is_dir() for path in workdirs)
    remove_leftovers()
    assert not any(path.exists() for path in workdirs)


def test_the_dashboard_serves_the_sample_with_a_read_only_cache_and_store(tmp_path, monkeypatch) -> None:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from fusion.classify.trace import load

    with tmpfs(tmp_path / "ro", "1m") as disk:
        remount_read_only(disk)
        monkeypatch.setenv("FUSION_CACHE_DIR", str(disk / "tables"))
        monkeypatch.setenv("FUSION_STORE_DIR", str(disk / "traces"))
        monkeypatch.setenv("FUSION_HOSTED", "1")
        st.cache_resource.clear()
        try:
            at = AppTest.from_file(str(PROJECT / "app.py"), default_timeout=60)
            at.query_params["sample"] = "vllm_moe_full_graph"
            at.run()
        finally:
            st.cache_resource.clear()
        assert not at.exception, [e.value for e in at.exception]
        assert not at.error, [e.value for e in at.error]
        kernels = [metric.value for metric in at.metric if metric.label == "Kernels"]
        assert kernels == [f"{load(path).kernel_count:,}" for path in PAIR]
