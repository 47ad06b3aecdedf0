"""Where a trace's capture traces are: given by name, or in a `capture/` folder beside it (found by itself).

Path logic only (no loader, no pandas), so the CLI can decide whether a cached report may be re-opened before it
imports the analysis.
"""

from __future__ import annotations

from pathlib import Path

CAPTURE_FOLDER = "capture"
"""Beside an execution trace, the folder its capture traces are found in by themselves."""
TRACE_SUFFIXES = (".json", ".json.gz")
DETAILS_FILE = "execution_details.json"
"""vLLM's list of {file, batch_size, mode} per capture trace, in the capture folder: not a trace."""


def capture_files_beside(trace_path: str | Path) -> list[Path]:
    """The capture traces in the `capture/` folder beside a trace file ([] when there is none)."""
    folder = Path(trace_path).parent / CAPTURE_FOLDER
    if not folder.is_dir():
        return []
    return _traces_in(folder)


def _traces_in(folder: Path) -> list[Path]:
    """The trace files of a folder (execution_details.json is no trace)."""
    return sorted(
        p for p in folder.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES) and p.name != DETAILS_FILE
    )


def trace_in_folder(folder: Path) -> Path | None:
    """The trace of a folder laid out as one trace file plus `capture/`, else None (the loader then says what the
    path is)."""
    files = _traces_in(folder) if (folder / CAPTURE_FOLDER).is_dir() else []
    return files[0] if len(files) == 1 else None


def resolve_input(path: str, captures: list[str] | None = None) -> tuple[str, list[str], str | None]:
    """(trace file, capture files, folder they were found in) for a trace given as a file or a folder.

    Captures given by name are used as they are; otherwise the `capture/` folder beside the trace, if any
    (found by itself: the folder is named, so the output can say so)."""
    given = Path(path)
    trace = (trace_in_folder(given) if given.is_dir() else None) or given
    if captures:
        return str(trace), list(captures), None
    found = capture_files_beside(trace)
    return str(trace), [str(p) for p in found], str(trace.parent / CAPTURE_FOLDER) if found else None
