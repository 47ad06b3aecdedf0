"""Concurrent dashboard sessions: several browsers upload and analyse their own pair at once, on one server.

    python bench/concurrency.py                      # 6 sessions for 60 s
    python bench/concurrency.py --sessions 8 --seconds 120

Starts `streamlit run serve.py` (the README's server, with its warm-up) on a free loopback port with empty caches,
then drives --sessions browser contexts of one headless Chromium (Playwright) at once. Each session owns a pair no
other session has: the bundled eager_prefill pair with the session's number in both GPU names (so its own digests).
A cycle opens the home page afresh, picks "Upload files", uploads trace 1, waits until the page shows it stored,
uploads trace 2, and waits for the comparison's headline (--eager: trace 2 at once, without waiting). It counts:
  cycles  completed cycles (both uploads registered, the comparison shown)
  lost    an upload the browser took (its file chip shows) that the page never showed as stored in --timeout s
  dropped a file the browser itself never took: with --eager, the second file given while the first file's run
          redraws the page (Streamlit's frontend; no request reaches the server)
  leaks   a page that shows another session's GPU name (a cross-session leak)
  errors  an error box or exception on the page, or a step that timed out otherwise
and the server's resident memory at the start (after the first page) and at the end. The exit status is 1
when any of lost, leaks or errors is not 0. tests/ui/test_concurrency.py runs a short version.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import chromium
from playwright.async_api import Browser, Page, async_playwright

PROJECT = Path(__file__).resolve().parents[1]
SAMPLE = PROJECT / "sample_traces" / "eager_prefill"
FILE_SIZE = re.compile(r"^\d+(\.\d+)?(B|KB|MB|GB)$")
"""The size line of an uploader's file chip (the chip shortens a long file name, so the name cannot be matched)."""
GPUS = (b'"AMD Instinct MI300X"', b'"NVIDIA H100 80GB HBM3"')
"""The GPU names of the sample pair: each session's copy appends its tag to them."""


@dataclass
class Tally:
    """What the sessions saw."""

    cycles: int = 0
    lost: int = 0
    dropped: int = 0
    """--eager: second files the browser never took (its uploader was redrawn by the first file's run meanwhile)."""
    leaks: int = 0
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def session_pairs(folder: Path, sessions: int) -> list[tuple[Path, Path]]:
    """Per session, the sample pair with `session-N` in both GPU names: content (and digests) of its own."""
    pairs = []
    for number in range(sessions):
        paths = []
        for side, gpu in zip(("amd", "nvidia"), GPUS):
            body = gzip.decompress((SAMPLE / f"{side}.json.gz").read_bytes())
            path = folder / f"session{number}_{side}.json.gz"
            path.write_bytes(gzip.compress(body.replace(gpu, gpu[:-1] + f' {tag(number)}"'.encode(), 1)))
            paths.append(path)
        pairs.append((paths[0], paths[1]))
    return pairs


def tag(number: int) -> str:
    return f"session-{number:02d}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(workdir: Path) -> tuple[subprocess.Popen, str]:
    """`streamlit run serve.py` on a free loopback port, with its own empty store and caches."""
    port = free_port()
    env = {
        **os.environ,
        "FUSION_STORE_DIR": str(workdir / "store"),
        "FUSION_CACHE_DIR": str(workdir / "cache"),
        "FUSION_BATCH_DIR": str(workdir / "batches"),
    }
    env.pop("FUSION_HOSTED", None)
    command = [sys.executable, "-m", "streamlit", "run", "serve.py", "--server.headless", "true"]
    command += ["--server.port", str(port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false"]
    log = (workdir / "streamlit.log").open("w")
    server = subprocess.Popen(command, cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2):
                return server, url
        except OSError:
            if server.poll() is not None:
                raise RuntimeError(
                    f"streamlit exited with {server.returncode}; see {workdir / 'streamlit.log'}"
                ) from None
            time.sleep(0.3)
    server.kill()
    raise TimeoutError("streamlit did not start within 60 s")


def rss_mb(pid: int) -> float:
    """Resident memory of a process and its children (the loader's child processes), from /proc."""
    total, stack = 0, [pid]
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, ValueError):
            continue
    while stack:
        current = stack.pop()
        try:
            total += int(Path(f"/proc/{current}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            pass
        stack.extend(children.get(current, []))
    return total / 1e6


async def settled(page: Page) -> None:
    await page.wait_for_timeout(300)
    await page.wait_for_selector("[data-testid='stApp'][data-test-script-state='notRunning']")


async def problems(page: Page) -> list[str]:
    return await page.evaluate(
        """() => Array.from(document.querySelectorAll("[data-testid='stException'], [data-testid='stAlertContentError']"),
                             e => e.innerText.slice(0, 160))"""
    )


async def cycle(
    page: Page,
    url: str,
    number: int,
    pair: tuple[Path, Path],
    others: list[str],
    tally: Tally,
    timeout: float,
    eager: bool,
) -> None:
    """One upload-and-analyse cycle of session `number`, counted into `tally`."""
    await page.goto(url)
    await settled(page)
    await page.get_by_text("Upload files", exact=True).click()
    await settled(page)
    uploaders = page.locator("[data-testid='stFileUploaderDropzoneInput']")
    for side, path in enumerate(pair, start=1):
        await uploaders.nth(side - 1).set_input_files(str(path))
        chip = page.locator("[data-testid='stFileUploader']").nth(side - 1).get_by_text(FILE_SIZE)  # its file's chip
        try:
            await chip.wait_for(timeout=timeout * 1000)
        except Exception:  # the browser never took the file: the uploader was redrawn while it was given
            tally.dropped += 1
            tally.notes.append(f"{tag(number)}: the browser dropped file {side}")
            return
        if not eager or side == 2:
            stored = page.get_by_text(f"Trace {side} · ", exact=False).filter(has_text=tag(number))
            try:
                await stored.first.wait_for(timeout=timeout * 1000)
            except Exception:
                tally.lost += 1
                tally.errors.append(f"{tag(number)}: upload {side} reached the server but never registered")
                return
            await settled(page)
    await page.get_by_test_id("stMetricValue").first.wait_for(timeout=timeout * 1000)
    body = await page.locator("[data-testid='stMain']").inner_text()
    if any(other in body for other in others):
        tally.leaks += 1
    found = await problems(page)
    tally.errors += [f"{tag(number)}: {p}" for p in found]
    if tag(number) in body and not found:
        tally.cycles += 1


async def session(
    browser: Browser,
    url: str,
    number: int,
    pair: tuple[Path, Path],
    others: list[str],
    tally: Tally,
    until: float,
    timeout: float,
    eager: bool,
) -> None:
    context = await browser.new_context(viewport={"width": 1400, "height": 1000})
    page = await context.new_page()
    page.set_default_timeout(timeout * 1000)
    try:
        while True:  # at least one cycle, however long the start took
            try:
                await cycle(page, url, number, pair, others, tally, timeout, eager)
            except Exception as exc:  # a step that timed out: counted, and the session goes on
                tally.errors.append(f"{tag(number)}: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
            if time.monotonic() >= until:
                break
    finally:
        await context.close()


async def drive(url: str, pairs: list[tuple[Path, Path]], seconds: float, timeout: float, eager: bool) -> Tally:
    tally = Tally()
    tags = [tag(n) for n in range(len(pairs))]
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(**chromium.launch_options())
        until = time.monotonic() + seconds
        await asyncio.gather(
            *(
                session(browser, url, n, pair, [t for t in tags if t != tags[n]], tally, until, timeout, eager)
                for n, pair in enumerate(pairs)
            )
        )
        await browser.close()
    return tally


def run(sessions: int, seconds: float, timeout: float, eager: bool = False) -> tuple[Tally, float, float]:
    """Start a server, drive the sessions, stop it; the tally and the server's memory (MB) at start and end."""
    with tempfile.TemporaryDirectory(prefix="fusion-concurrency-") as folder:
        workdir = Path(folder)
        pairs = session_pairs(workdir, sessions)
        server, url = start_server(workdir)
        try:
            urllib.request.urlopen(url, timeout=30).read()
            start = rss_mb(server.pid)
            tally = asyncio.run(drive(url, pairs, seconds, timeout, eager))
            end = rss_mb(server.pid)
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
    return tally, start, end


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--timeout", type=float, default=60, help="seconds one step may take")
    parser.add_argument(
        "--eager", action="store_true", help="give the second file at once, without waiting for the first to register"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    tally, start, end = run(args.sessions, args.seconds, args.timeout, args.eager)
    print(
        f"{args.sessions} sessions of {chromium.executable()} for {args.seconds:.0f} s on loopback "
        f"({time.perf_counter() - started:.0f} s in all, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}): {tally.cycles} cycles completed, "
        f"lost uploads {tally.lost}, cross-session leaks {tally.leaks}, errors {len(tally.errors)}"
        + f", files the browser dropped {tally.dropped}"
        + "; "
        + f"server memory {start:.0f} MB at the start, {end:.0f} MB at the end"
    )
    for line in (tally.errors + tally.notes)[:20]:
        print(f"  {line}")
    sys.exit(1 if tally.lost or tally.leaks or tally.errors else 0)


if __name__ == "__main__":
    main()
