"""The Batch page's plain parts: which result folders a link may open, the pair and finding tables, row links.

No streamlit here. A link names a batch result folder directly under the server's batch_dir() by
its name (`batch`), checked like a sample name and kept inside that folder; a server path (`bp`)
only when the app is not hosted (ui.state drops it then). A pair of a named batch is a source for
the analysis pages (`batch` + `bpair`): its two traces are the local files the batch recorded.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from fusion import settings
from fusion.batch.results import BatchError, BatchRecord, BatchResult, PairRecord, read_batch, read_record
from fusion.report.render import headline
from fusion.result import COUNT, KERNEL_TYPE, TIME_US
from ui import text
from ui.state import NOT_ALLOWED, View, is_sample_name, server_path

HEADLINE_FINDINGS = 2
"""Findings named in a pair's headline, most unfused extra time first."""
TIME_GAP_SHARE = 0.05
"""A type's time gap is named in the headline when it is at least this share of the larger side's kernel time."""
FAILED = "failed"


@dataclass(frozen=True)
class Listed:
    """One result folder of the server's batch_dir(), or why it cannot be read."""

    name: str
    record: BatchRecord | None
    problem: str = ""


def folder_of(view: View) -> Path | None:
    """The batch folder the view names: by name under batch_dir(), else a server path (never when hosted)."""
    if view.batch:
        return named_folder(view.batch)
    if view.bp and not settings.hosted():
        folder = server_path(view.bp)
        if folder is None:
            raise BatchError(view.bp, NOT_ALLOWED)
        return folder
    return None


def named_folder(name: str) -> Path:
    """`name`'s folder directly under batch_dir(); a name that could leave it is refused before any path is built."""
    if not is_sample_name(name):
        raise BatchError("this link", "it does not name a batch result")
    base = settings.batch_dir().resolve()
    folder = (base / name).resolve()
    if folder.parent != base:
        raise BatchError(_named(name), "not a batch result of this server")
    return folder


def _named(name: str) -> str:
    return f"batch {name}"


def load(view: View) -> BatchResult | None:
    """The batch the view names, or None when it names none. A named batch's problems name it, not the server's folder."""
    folder = folder_of(view)
    if folder is None:
        return None
    if not view.batch:
        return read_batch(folder)
    try:
        return read_batch(folder)
    except BatchError as exc:
        raise BatchError(_named(view.batch), _without(exc.problem, folder)) from None


def _named_record(name: str) -> BatchRecord:
    folder = named_folder(name)
    try:
        return read_record(folder)
    except BatchError as exc:
        raise BatchError(_named(name), _without(exc.problem, folder)) from None


def _without(problem: str, folder: Path) -> str:
    """A problem as a user of a named batch may read it: the server's folder path left out."""
    return problem.replace(str(folder), "…")


def listing() -> list[Listed]:
    """Every folder directly under batch_dir() holding a batch.json, newest first; unreadable ones with their problem."""
    base = settings.batch_dir()
    if not base.is_dir():
        return []
    found = []
    for name in sorted(p.name for p in base.iterdir() if is_sample_name(p.name)):
        try:
            folder = named_folder(name)
            if (folder / "batch.json").is_file():
                found.append(Listed(name, read_record(folder)))
        except BatchError as exc:
            found.append(Listed(name, None, _without(exc.problem, base.resolve() / name)))
    return sorted(found, key=lambda item: -(item.record.written if item.record else 0.0))


def when(seconds: float) -> str:
    """A batch's time of writing, to the minute, in UTC."""
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


# --- a batch pair as the analysis pages' source ---------------------------------------------------------


def pair_files(name: str, index: int) -> tuple[PairRecord, Path, Path]:
    """The pair `index` of the named batch and its two trace files; only local files recorded by the batch."""
    record = _named_record(name)
    if index >= len(record.pairs):
        raise BatchError(_named(name), f"has no pair {index} (it has {len(record.pairs)})")
    pair = record.pairs[index]
    paths = [_local(name, pair, location) for location in (pair.trace1, pair.trace2)]
    return pair, paths[0], paths[1]


def _local(name: str, pair: PairRecord, location: str) -> Path:
    where = f"{_named(name)}, pair {pair.label}"
    if "://" in location:
        raise BatchError(where, "its trace is a URL, which a link never opens; run `python -m fusion compare` on it")
    if not Path(location).is_absolute():
        raise BatchError(where, "its trace was recorded as a relative path; run the batch again")
    return Path(location)


def pair_view(view: View, record: BatchRecord, pair: PairRecord) -> View | None:
    """The view of one pair's comparison: hosted by batch name and pair (a hosted view names its batch only so),
    locally by the traces' server paths, like any path link.

    None when the pair failed or a trace is not a local file (a URL is never opened from a link).
    """
    if pair.failed or any("://" in location for location in (pair.trace1, pair.trace2)):
        return None
    if settings.hosted():
        opened = view.with_sources(bpair=pair.index)
    else:
        opened = view.with_sources(p1=pair.trace1, p2=pair.trace2)
    return opened.with_min_group_size(record.min_group_size)


# --- tables -------------------------------------------------------------------------------------------


def pair_table(result: BatchResult) -> pd.DataFrame:
    """One row per pair: status and message, kernels and time per side, the time ratio, findings and a headline."""
    summary, findings = result.summary, result.findings
    per_side = summary.dropna(subset=["side"]).groupby(["label", "side"])[[COUNT, TIME_US]].sum().unstack("side")
    pairs = result.record.pairs
    labels = [pair.label for pair in pairs]
    failed = np.array([pair.failed for pair in pairs], dtype=bool)

    def column(what: str, side: int) -> np.ndarray:
        values = per_side[(what, side)] if (what, side) in per_side.columns else pd.Series(dtype=float)
        return np.where(failed, np.nan, values.reindex(labels).to_numpy(dtype=float))

    time1, time2 = column(TIME_US, 1), column(TIME_US, 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(time2 > 0, time1 / time2, np.nan)
    found = findings.groupby("label").size().reindex(labels, fill_value=0).to_numpy()
    table = pd.DataFrame(
        {
            "pair": [pair.index for pair in pairs],
            "label": labels,
            "rank": [pair.rank for pair in pairs],
            "status": [FAILED if pair.failed else pair.status for pair in pairs],
            "message": [pair.message for pair in pairs],
            "kernels 1": column(COUNT, 1),
            "kernels 2": column(COUNT, 2),
            "time 1 (ms)": time1 / 1000,
            "time 2 (ms)": time2 / 1000,
            "time ratio": ratio,
            "findings": np.where(failed, np.nan, found),
            "headline": np.where(
                failed, "", headlines(findings, summary).reindex(labels, fill_value="no difference found")
            ),
            "trace files": [files_state(pair) for pair in pairs],
        }
    )
    return table.astype({column: "Int64" for column in ("rank", "kernels 1", "kernels 2", "findings")})


AS_COMPARED = "as compared"


def files_state(pair: PairRecord) -> str:
    """'as compared', or which trace changed since the batch compared it (its figures here are of the old file)."""
    changed = pair.changed_sides()
    if not changed:
        return AS_COMPARED
    return f"trace {' and '.join(map(str, changed))} changed since the batch ran"


def headlines(findings: pd.DataFrame, summary: pd.DataFrame) -> pd.Series:
    """Each pair's biggest differences in a few words: its top findings, then its largest per-type time gap.

    Indexed by label; a pair with neither has no entry.
    """
    top = findings.sort_values("time_saved_us", ascending=False, kind="stable").groupby("label").head(HEADLINE_FINDINGS)
    parts = pd.Series(finding_texts(top).to_numpy(), index=top["label"].to_numpy())
    times = summary.dropna(subset=["side"]).groupby(["label", KERNEL_TYPE, "side"])[TIME_US].sum().unstack("side")
    times = times.reindex(columns=[1, 2], fill_value=0.0).fillna(0.0)
    if len(times):
        gaps = (times[1] - times[2]).abs()
        widest = gaps.groupby(level="label").idxmax()
        totals = times.groupby(level="label").sum().max(axis=1)
        gap_text = {
            label: f"{kernel_type}: {text.ms(times.loc[(label, kernel_type), 1])} vs {text.ms(times.loc[(label, kernel_type), 2])}"
            for label, (_, kernel_type) in widest.items()
            if gaps[(label, kernel_type)] > 0 and gaps[(label, kernel_type)] >= TIME_GAP_SHARE * totals[label]
        }
        parts = pd.concat([parts, pd.Series(gap_text, dtype=object)])
    return parts.groupby(level=0, sort=False).agg("; ".join)


def finding_texts(findings: pd.DataFrame) -> pd.Series:
    """Each finding in a few words: 'Trace 2 fuses GEMM + SwiGLU -> GEMM x8' (report.headline, by its kind where the
    batch recorded one)."""
    kinds = findings["kind"] if "kind" in findings.columns else pd.Series("", index=findings.index)
    texts = [
        headline(detector, int(trace), str(sequence).split(" + "), str(fused_type), str(kind)) + f" x{int(count)}"
        for detector, trace, sequence, fused_type, count, kind in zip(
            *(findings[c] for c in ["detector", "fused_trace", "unfused_sequence", "fused_kernel_type", "count"]),
            kinds,
        )
    ]
    return pd.Series(texts, index=findings.index, dtype=object)


def filtered(table: pd.DataFrame, query: str, status: str | None) -> pd.DataFrame:
    """Rows whose label, status, message or headline hold `query` (any case), of the status picked."""
    if status == FAILED:
        table = table[table["status"] == FAILED]
    elif status:
        table = table[table["status"] != FAILED]
    if query:
        text_columns = table[["label", "status", "message", "headline"]].astype(str).agg(" ".join, axis=1)
        table = table[text_columns.str.contains(query, case=False, regex=False)]
    return table


FINDING_KEY = ["group", "detector", "fused_trace", "fused_kernel_type", "unfused_sequence", "op"]


def finding_table(findings: pd.DataFrame) -> pd.DataFrame:
    """One row per finding across the pairs of a group: on which ranks it holds (every rank, some ranks: a straggler)."""
    if findings.empty:
        return pd.DataFrame(
            columns=["finding", "holds on", "ranks", "pairs", "time saved (ms)", "group", "fused kernels"]
        )
    grouped = findings.assign(rank=findings["rank"].astype("Int64")).groupby(FINDING_KEY, dropna=False, sort=False)
    table = grouped.agg(
        holds_on=("holds_on", "first"),
        ranks_with=("ranks_with", "first"),
        ranks_in_group=("ranks_in_group", "first"),
        ranks=("rank", lambda r: ", ".join(str(v) for v in sorted(r.dropna().unique()))),
        pairs=("label", "nunique"),
        count=("count", "max"),
        saved=("time_saved_us", "sum"),
        names=("fused_kernel_names", "first"),
    ).reset_index()
    return pd.DataFrame(
        {
            "finding": finding_texts(table).to_numpy(),
            "holds on": table["holds_on"],
            "ranks": [
                f"{r} ({w} of {n})" if n > 1 else r
                for r, w, n in zip(table["ranks"], table["ranks_with"], table["ranks_in_group"])
            ],
            "pairs": table["pairs"],
            "time saved (ms)": table["saved"] / 1000,
            "group": table["group"],
            "fused kernels": table["names"],
        }
    ).sort_values(["holds on", "time saved (ms)"], ascending=[True, False], ignore_index=True)
