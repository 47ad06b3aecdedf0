"""Many trace pairs at once: one task per pair, on a local process pool (default) or on a Ray cluster.

A batch is a list of jobs (two traces and a label), read from a manifest CSV or paired from two
directories by rank or by name. Each job runs `run_pair`, the same function on either engine: it
loads both traces, compares them and writes that pair's result (the `compare` JSON) under
`OUT/pairs/`, keyed by the traces' content digests and the parameters, so a re-run skips pairs
already done. A pair that fails is recorded with its message and the batch goes on. The batch then
writes `summary.parquet` (per pair, per type, per side: counts, time, findings), `findings.parquet`
(per pair, per finding, with whether it holds on every rank of its group) and `batch.json`.
"""

from __future__ import annotations

import csv
import hashlib
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
import pandas as pd

from fusion import settings
from fusion.errors import TraceError
from fusion.result import COUNT, KERNEL_TYPE, TIME_US, side_column

ENGINES = ("local", "ray")
RESULT_FORMAT = 1
"""Bump when a pair's result or the key that names it changes meaning."""
SUMMARY_FILE = "summary.parquet"
FINDINGS_FILE = "findings.parquet"
BATCH_FILE = "batch.json"
PAIRS_DIR = "pairs"
TASK_BASE_BYTES = 512 << 20
"""Memory stated for a Ray task on top of its traces: the interpreter, pandas and the analysis."""
TASK_BYTES_PER_JSON_BYTE = 1.0
"""The loader peaks below the JSON size of the larger trace; both traces of a pair are held at once."""
_RANK = re.compile(r"(?:^|[^a-z0-9])rank[-_]?(\d+)(?![0-9])", re.IGNORECASE)
_TRACE_SUFFIXES = (".json", ".json.gz", ".gz")
_HASH_CHUNK = 8 << 20
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")

Progress = Callable[[int, int, "PairOutcome"], None]
"""Called with (pairs done, pairs in all, the outcome just finished)."""


@dataclass(frozen=True)
class Job:
    """One pair to compare: two trace locations (paths or fsspec URLs), a label, its group and rank, and each
    side's capture traces (fusion.model.capture; a local trace with a `capture/` folder beside it needs none)."""

    trace1: str
    trace2: str
    label: str
    group: str = ""
    rank: int | None = None
    capture1: tuple[str, ...] = ()
    capture2: tuple[str, ...] = ()


@dataclass
class PairOutcome:
    """What one job produced: status 'ok', 'skipped' (result already there) or 'error' with its message."""

    job: Job
    status: str
    message: str = ""
    result_file: str = ""
    seconds: float = 0.0
    digests: tuple[str, str] = ("", "")
    """The two traces' content digests the result is of ('' when the pair failed before hashing)."""
    stamps: tuple[list[int] | None, list[int] | None] = (None, None)
    """Each local trace's [size, mtime_ns] when it was hashed, so a reader can tell the file changed since."""
    type_rows: list[dict[str, Any]] = field(default_factory=list)
    findings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status != "error"


@dataclass(frozen=True)
class BatchParams:
    """Parameters of every comparison in a batch; part of each pair's result key."""

    min_group_size: int = 50


# ---- jobs -----------------------------------------------------------------------------------------


def jobs_from_manifest(path: str | os.PathLike) -> list[Job]:
    """Rows `trace1,trace2,label[,capture1,capture2]` (a header row with those names is allowed; a capture cell
    may name several files, separated by `;`); relative paths are read from the manifest's folder."""
    base = Path(path).absolute().parent
    try:
        with open(path, newline="") as handle:
            rows = [row for row in csv.reader(handle) if row and any(cell.strip() for cell in row)]
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(str(path), f"cannot read the manifest: {exc}") from None
    if rows and [c.strip().lower() for c in rows[0][:2]] == ["trace1", "trace2"]:
        rows = rows[1:]
    jobs = []
    for number, row in enumerate(rows, start=1):
        if len(row) < 2 or not row[0].strip() or not row[1].strip():
            raise TraceError(str(path), f"row {number}: expected trace1,trace2,label")
        first, second = (_resolve(base, cell.strip()) for cell in row[:2])
        label = row[2].strip() if len(row) > 2 and row[2].strip() else f"{_stem(first)} vs {_stem(second)}"
        captures = [tuple(_resolve(base, c.strip()) for c in cell.split(";") if c.strip()) for cell in row[3:5]]
        captures += [()] * (2 - len(captures))
        jobs.append(replace(_job(first, second, label), capture1=captures[0], capture2=captures[1]))
    if not jobs:
        raise TraceError(str(path), "the manifest lists no pair")
    return _unique_labels(jobs)


def jobs_from_directories(dir1: str | os.PathLike, dir2: str | os.PathLike, pair_by: str = "rank") -> list[Job]:
    """Pair the traces of two directories by rank (file name `rank<N>`, else `distributedInfo.rank`) or by name."""
    files1, files2 = _trace_files(Path(dir1)), _trace_files(Path(dir2))
    if pair_by == "rank":
        keys1, keys2 = _ranks(files1), _ranks(files2)
    else:
        keys1, keys2 = {f.name: f for f in files1}, {f.name: f for f in files2}
    common = sorted(set(keys1) & set(keys2), key=lambda k: (isinstance(k, str), k))
    if not common:
        raise TraceError(f"{dir1} and {dir2}", f"no two traces pair by {pair_by}")
    group = f"{Path(dir1).name} vs {Path(dir2).name}"
    jobs = []
    for key in common:
        label = f"rank{key}" if pair_by == "rank" else str(key)
        jobs.append(Job(str(keys1[key]), str(keys2[key]), label, group, key if pair_by == "rank" else None))
    return jobs


def unpaired(dir1: str | os.PathLike, dir2: str | os.PathLike, jobs: list[Job]) -> list[str]:
    """Trace files in either directory that no job uses."""
    used = {j.trace1 for j in jobs} | {j.trace2 for j in jobs}
    return [str(f) for d in (dir1, dir2) for f in _trace_files(Path(d)) if str(f) not in used]


def _job(first: str, second: str, label: str) -> Job:
    rank = _rank_of(label) if _rank_of(label) is not None else _rank_of(_stem(first))
    group = _RANK.sub("", label).strip(" _-/") if rank is not None else label
    return Job(first, second, label, group, rank)


def _resolve(base: Path, location: str) -> str:
    if "://" in location or Path(location).is_absolute():
        return location
    return str(base / location)


def _stem(location: str) -> str:
    name = location.rstrip("/").rsplit("/", 1)[-1]
    for suffix in _TRACE_SUFFIXES:
        name = name.removesuffix(suffix)
    return name


def _rank_of(text: str) -> int | None:
    match = _RANK.search(text)
    return int(match.group(1)) if match else None


def _trace_files(directory: Path) -> list[Path]:
    """Absolute paths, so the batch's record opens them from anywhere (the dashboard links to each pair)."""
    if not directory.is_dir():
        raise TraceError(str(directory), "not a directory")
    directory = directory.absolute()
    return sorted(p for p in directory.iterdir() if p.is_file() and p.name.endswith(_TRACE_SUFFIXES))


def _ranks(files: list[Path]) -> dict[int, Path]:
    ranks: dict[int, Path] = {}
    for path in files:
        rank = _rank_of(path.name)
        if rank is None:
            rank = _recorded_rank(path)
        if rank is not None and rank not in ranks:
            ranks[rank] = path
    return ranks


def _recorded_rank(path: Path) -> int | None:
    """`distributedInfo.rank` from the keys before `traceEvents` (the file is not parsed further)."""
    from fusion.loader.events import read_events
    from fusion.loader.reader import open_input

    try:
        info = read_events(open_input(path)).top_level.get("distributedInfo")
    except TraceError:
        return None
    rank = info.get("rank") if isinstance(info, dict) else None
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else None


def _unique_labels(jobs: list[Job]) -> list[Job]:
    seen: dict[str, int] = {}
    out = []
    for job in jobs:
        seen[job.label] = seen.get(job.label, 0) + 1
        out.append(job if seen[job.label] == 1 else replace(job, label=f"{job.label} ({seen[job.label]})"))
    return out


# ---- one pair (the task both engines run) --------------------------------------------------------


def run_pair(job: Job, out_dir: str, params: BatchParams) -> PairOutcome:
    """Compare one pair and write its result, or reuse the result a previous run wrote for the same content."""
    started = time.perf_counter()
    try:
        outcome = _run_pair(job, Path(out_dir), params)
    except TraceError as exc:
        outcome = PairOutcome(job, "error", str(exc))
    except MemoryError:
        outcome = PairOutcome(job, "error", "out of memory while comparing this pair")
    except OSError as exc:
        outcome = PairOutcome(job, "error", f"{exc.filename or job.label}: {exc.strerror or exc}")
    outcome.seconds = time.perf_counter() - started
    return outcome


def _run_pair(job: Job, out_dir: Path, params: BatchParams) -> PairOutcome:
    from fusion.cache.tables import TableCache
    from fusion.classify.trace import load
    from fusion.comparison.pair import compare
    from fusion.report.render import to_json

    stamps = (file_stamp(job.trace1), file_stamp(job.trace2))
    digests = (content_digest(job.trace1), content_digest(job.trace2))
    captures = [_captures(trace, given) for trace, given in ((job.trace1, job.capture1), (job.trace2, job.capture2))]
    key = result_key(digests, params, tuple(content_digest(c) for side in captures for c in side[0]))
    result_path = out_dir / PAIRS_DIR / f"{_safe(job.label)}.json"
    previous = _read_result(result_path, key)
    if previous is not None:
        return _outcome(job, "skipped", result_path, previous, digests, stamps)
    cache = TableCache()
    traces = [_load_one(location, cache, load) for location in (job.trace1, job.trace2)]
    traces = [_tied(trace, *side) for trace, side in zip(traces, captures)]
    result = orjson.loads(to_json(compare(*traces, min_group_size=params.min_group_size)))
    result["batch"] = {"key": key, "label": job.label, "trace1": job.trace1, "trace2": job.trace2}
    result["batch"] |= {f"capture{s}": list(side[0]) for s, side in enumerate(captures, start=1) if side[0]}
    _write_atomic(result_path, orjson.dumps(result, option=orjson.OPT_INDENT_2))
    return _outcome(job, "ok", result_path, result, digests, stamps)


def _captures(trace: str, given: tuple[str, ...]) -> tuple[tuple[str, ...], str | None]:
    """A side's capture traces: those the job names, else the `capture/` folder beside a local trace (and the
    folder they were found in)."""
    if given or "://" in trace:
        return given, None
    from fusion.model.capture_files import resolve_input

    _, found, folder = resolve_input(trace)
    return tuple(found), folder


def _tied(trace: Any, captures: tuple[str, ...], found_in: str | None) -> Any:
    """The trace with its replays tied to its capture traces (read through fsspec where they are URLs)."""
    if not captures:
        return trace
    from fusion.model.capture import read_captures, tie_captures

    sources = [c if "://" not in c else _open_bytes(c).read() for c in captures]
    return tie_captures(trace, read_captures(sources, found_in, names=list(captures)))


def file_stamp(location: str) -> list[int] | None:
    """[size, mtime_ns] of a local trace file (None for a URL or a file that cannot be read)."""
    if "://" in location:
        return None
    try:
        stat = os.stat(location)
    except OSError:
        return None
    return [stat.st_size, stat.st_mtime_ns]


def _load_one(location: str, cache: Any, load: Callable[..., Any]) -> Any:
    if "://" not in location:
        cached = cache.lookup(location)
        if cached is None:
            cached = load(location)
            cache.store(location, cached)
        return cached
    import fsspec

    with fsspec.open(location, "rb") as handle:
        return load(handle, name=location)


def content_digest(location: str) -> str:
    """sha256 of the bytes as stored (what a loaded Trace's digest is), for local paths and fsspec URLs."""
    digest = hashlib.sha256()
    try:
        with _open_bytes(location) as handle:
            for chunk in iter(lambda: handle.read(_HASH_CHUNK), b""):
                digest.update(chunk)
    except FileNotFoundError:
        raise TraceError(location, "no such file") from None
    except IsADirectoryError:
        raise TraceError(location, "is a directory, not a trace file") from None
    return digest.hexdigest()


def _open_bytes(location: str) -> Any:
    if "://" in location:
        import fsspec

        return fsspec.open(location, "rb").open()
    return open(location, "rb")


def result_key(digests: tuple[str, str], params: BatchParams, captures: tuple[str, ...] = ()) -> str:
    """What names a pair's result: both content digests (and the capture traces'), the parameters, the rules and
    the result format."""
    from fusion.cache.tables import analysis_fingerprint

    parts: list[Any] = [RESULT_FORMAT, digests, asdict(params), analysis_fingerprint()]
    text = orjson.dumps([*parts, list(captures)] if captures else parts)
    return hashlib.sha256(text).hexdigest()


def _read_result(path: Path, key: str) -> dict[str, Any] | None:
    try:
        result = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    same = isinstance(result, dict) and isinstance(result.get("batch"), dict) and result["batch"].get("key") == key
    return result if same else None


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temp.write_bytes(data)
    os.replace(temp, path)


def _safe(label: str) -> str:
    digest = hashlib.sha256(label.encode()).hexdigest()[:8]
    return f"{_UNSAFE.sub('_', label).strip('_')[:80] or 'pair'}-{digest}"


def _outcome(
    job: Job,
    status: str,
    path: Path,
    result: dict[str, Any],
    digests: tuple[str, str],
    stamps: tuple[list[int] | None, list[int] | None],
) -> PairOutcome:
    return PairOutcome(
        job,
        status,
        result_file=str(path),
        type_rows=_type_rows(result),
        findings=_findings(result),
        digests=digests,
        stamps=stamps,
    )


def _type_rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Per type and side: count, time and the findings whose fused kernel is of that type on that side."""
    fused = Counter((m["fused_trace"], m["fused_kernel_type"]) for m in result["fusion_mappings"])
    return [
        {
            KERNEL_TYPE: stat[KERNEL_TYPE],
            "side": side,
            COUNT: int(stat[side_column(COUNT, side)]),
            TIME_US: float(stat[side_column(TIME_US, side)]),
            "fused_findings": fused[(side, stat[KERNEL_TYPE])],
        }
        for stat in result["type_stats"]
        for side in (1, 2)
    ]


def _findings(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "detector": m["detector"],
            "kind": m.get("kind", ""),
            "fused_trace": m["fused_trace"],
            "fused_kernel_type": m["fused_kernel_type"],
            "unfused_sequence": " + ".join(m["unfused_sequence"]),
            "op": m.get("op", ""),
            "count": int(m["pattern_count"]),
            "time_saved_us": float(m.get("time_saved_us") or 0.0),
            "fused_kernel_names": " | ".join(m.get("fused_kernel_names", [])[:3]),
            "evidence": m["evidence"],
        }
        for m in result["fusion_mappings"]
    ]


# ---- engines -------------------------------------------------------------------------------------


def run_local(
    jobs: list[Job], out_dir: str, params: BatchParams, workers: int, progress: Progress | None
) -> list[PairOutcome]:
    """Each job in a process of a pool of `workers`."""
    if workers <= 1 or len(jobs) <= 1:
        return _in_order(jobs, (run_pair(job, out_dir, params) for job in jobs), progress)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(_run_pair_on_one_thread, job, out_dir, params): job for job in jobs}
        return _in_order(jobs, (future.result() for future in as_completed(futures)), progress)


def _run_pair_on_one_thread(job: Job, out_dir: str, params: BatchParams) -> PairOutcome:
    """run_pair in a worker of a pool of processes or a Ray task: one thread per comparison unless
    FUSION_ANALYSIS_THREADS says otherwise (the pool already runs a comparison per core; a second thread per
    comparison would only take turns with another process's)."""
    os.environ.setdefault(settings.ANALYSIS_THREADS, "1")
    return run_pair(job, out_dir, params)


def run_ray(
    jobs: list[Job], out_dir: str, params: BatchParams, address: str | None, progress: Progress | None
) -> list[PairOutcome]:
    """Each job as one Ray task that states the memory its pair needs (so Ray does not over-pack a node)."""
    import ray

    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, log_to_driver=False, include_dashboard=False)
    try:
        task = ray.remote(_run_pair_on_one_thread)
        pending = [task.options(num_cpus=1, memory=task_memory(job)).remote(job, out_dir, params) for job in jobs]
        return _in_order(jobs, _ray_results(ray, pending), progress)
    finally:
        if started_here:
            ray.shutdown()


def _ray_results(ray: Any, pending: list[Any]) -> Iterator[PairOutcome]:
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        yield ray.get(done[0])


def task_memory(job: Job) -> int:
    """Bytes a task needs: both traces' JSON size (from the gzip trailer where compressed) plus a base."""
    return TASK_BASE_BYTES + int(TASK_BYTES_PER_JSON_BYTE * sum(json_bytes(t) for t in (job.trace1, job.trace2)))


def json_bytes(location: str) -> int:
    if "://" in location:
        return 0
    from fusion.cache.loading import json_size

    try:
        return json_size(Path(location))
    except OSError:
        return 0


def _in_order(jobs: list[Job], outcomes: Iterable[PairOutcome], progress: Progress | None) -> list[PairOutcome]:
    by_job: dict[Job, PairOutcome] = {}
    for outcome in outcomes:
        by_job[outcome.job] = outcome
        if progress is not None:
            progress(len(by_job), len(jobs), outcome)
    return [by_job[job] for job in jobs]


# ---- the batch ------------------------------------------------------------------------------------


def run_batch(
    jobs: list[Job],
    out_dir: str | os.PathLike,
    *,
    engine: str = "local",
    params: BatchParams | None = None,
    workers: int | None = None,
    address: str | None = None,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Run every job on `engine`, write the summary files, and return the summary table."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}")
    params = params or BatchParams()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if engine == "ray":
        outcomes = run_ray(jobs, str(out), params, address, progress)
    else:
        outcomes = run_local(jobs, str(out), params, workers or os.cpu_count() or 1, progress)
    summary = summary_table(outcomes)
    findings = findings_table(outcomes)
    summary.to_parquet(out / SUMMARY_FILE, index=False)
    findings.to_parquet(out / FINDINGS_FILE, index=False)
    _write_atomic(
        out / BATCH_FILE,
        orjson.dumps(
            _batch_record(outcomes, params, engine, time.perf_counter() - started), option=orjson.OPT_INDENT_2
        ),
    )
    return summary


def summary_table(outcomes: list[PairOutcome]) -> pd.DataFrame:
    """Per pair, per type, per side: count, time_us and fused findings; a failed pair has one row with its error."""
    rows = []
    for outcome in outcomes:
        base = _pair_columns(outcome)
        if not outcome.ok:
            rows.append(
                {**base, "kernel_type": None, "side": None, "count": None, "time_us": None, "fused_findings": None}
            )
        rows.extend({**base, **row} for row in outcome.type_rows)
    return pd.DataFrame(rows, columns=[*_PAIR_COLUMNS, "kernel_type", "side", "count", "time_us", "fused_findings"])


_PAIR_COLUMNS = ("label", "group", "rank", "trace1", "trace2", "status", "message", "result_file")


def _pair_columns(outcome: PairOutcome) -> dict[str, Any]:
    job = outcome.job
    return {
        "label": job.label,
        "group": job.group,
        "rank": job.rank,
        "trace1": job.trace1,
        "trace2": job.trace2,
        "status": outcome.status,
        "message": outcome.message,
        "result_file": outcome.result_file,
    }


def findings_table(outcomes: list[PairOutcome]) -> pd.DataFrame:
    """Per pair and finding; `ranks_with`/`ranks_in_group` and `holds_on` say whether it holds on every rank."""
    columns = [
        *_PAIR_COLUMNS,
        "detector",
        "kind",
        "fused_trace",
        "fused_kernel_type",
        "unfused_sequence",
        "op",
        "count",
        "time_saved_us",
        "fused_kernel_names",
        "evidence",
    ]
    rows = [{**_pair_columns(o), **finding} for o in outcomes if o.ok for finding in o.findings]
    table = pd.DataFrame(rows, columns=columns)
    return with_rank_consensus(table, outcomes)


_FINDING_KEY = ["group", "detector", "fused_trace", "fused_kernel_type", "unfused_sequence", "op"]


def with_rank_consensus(table: pd.DataFrame, outcomes: list[PairOutcome]) -> pd.DataFrame:
    """Add `ranks_with`, `ranks_in_group` and `holds_on`: 'every rank', 'some ranks' or 'single pair'."""
    ranked = pd.DataFrame(
        [{"group": o.job.group, "rank": o.job.rank} for o in outcomes if o.ok and o.job.rank is not None],
        columns=["group", "rank"],
    )
    in_group = ranked.groupby("group")["rank"].nunique()
    with_finding = table.dropna(subset=["rank"]).groupby(_FINDING_KEY, dropna=False)["rank"].nunique()
    keys = pd.MultiIndex.from_frame(table[_FINDING_KEY])
    table = table.assign(
        ranks_with=with_finding.reindex(keys).fillna(0).astype(int).to_numpy(),
        ranks_in_group=table["group"].map(in_group).fillna(0).astype(int).to_numpy(),
    )
    table["holds_on"] = [
        "single pair" if total <= 1 else ("every rank" if found == total else "some ranks")
        for found, total in zip(table["ranks_with"], table["ranks_in_group"])
    ]
    return table


def _batch_record(outcomes: list[PairOutcome], params: BatchParams, engine: str, seconds: float) -> dict[str, Any]:
    return {
        "format": RESULT_FORMAT,
        "engine": engine,
        "params": asdict(params),
        "seconds": round(seconds, 3),
        "pairs": [
            {
                **asdict(o.job),
                "status": o.status,
                "message": o.message,
                "result_file": o.result_file,
                "seconds": round(o.seconds, 3),
                "digests": list(o.digests),
                "stamps": list(o.stamps),
            }
            for o in outcomes
        ],
    }


def print_progress(done: int, total: int, outcome: PairOutcome) -> None:
    """One stderr line per finished pair."""
    what = outcome.message if outcome.status == "error" else f"{len(outcome.findings)} findings"
    print(f"[{done}/{total}] {outcome.job.label}: {outcome.status} ({outcome.seconds:.1f} s) {what}", file=sys.stderr)
