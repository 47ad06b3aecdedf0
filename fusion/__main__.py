"""Command line: `python -m fusion summary|classify|compare|export|batch ...`.

Bad input (or a bad FUSION_* setting or rules file) prints one line naming the file and the problem
and exits with status 2. Everything written to the terminal passes through terminal_text, so text
from traces never carries escape sequences to it. The caches are used unless --no-cache; their
problems are warnings on stderr, never a reason to stop.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from fusion import __version__, settings
from fusion.errors import ConfigError, TraceError
from fusion.vocabulary import PHASES

if TYPE_CHECKING:  # imported where used: a cold re-open of a cached JSON report needs none of the analysis
    from fusion.comparison.result import Comparison

EXIT_BAD_INPUT = 2
PHASE_CHOICES = (PHASES[-1], *PHASES[:-1])


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler = _log_to_stderr()
    try:
        settings.check()
        return args.run(args)
    except (TraceError, ConfigError) as exc:
        _err(f"error: {exc}")
        return EXIT_BAD_INPUT
    except MemoryError:
        _err("error: out of memory; the traces are too large for this machine")
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return 0
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        _err(f"error: {where}{exc.strerror or exc}")
        return EXIT_BAD_INPUT
    except Exception as exc:
        if settings.debug():
            raise
        _err(f"internal error: {type(exc).__name__}: {exc} (set FUSION_DEBUG=1 for a traceback)")
        return 1
    finally:
        logging.getLogger("fusion").removeHandler(handler)


def terminal_text(text: str) -> str:
    """`text` with every control and format character (ANSI/OSC escapes, bidi overrides, C1 codes) made
    visible as a JSON-style \\uXXXX escape, so trace text cannot drive the terminal. Newlines and tabs stay.

    The escape is valid inside a JSON string and keeps its value there, so JSON output stays correct."""
    return _UNSAFE.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if unicodedata.category(char) not in _UNSAFE_CATEGORIES:
        return char
    code = ord(char)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    high, low = divmod(code - 0x10000, 0x400)
    return f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}"


_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
_UNSAFE = re.compile(r"[^\x20-\x7e\n\t]")
"""Candidates: everything but printable ASCII, newline and tab; _escaped keeps the printable ones."""


def _out(text: str) -> None:
    sys.stdout.write(terminal_text(text if text.endswith("\n") else text + "\n"))


def _err(line: str) -> None:
    sys.stderr.write(terminal_text(line) + "\n")


class _StderrLog(logging.Handler):
    """The library's log records as stderr lines: warnings (a damaged cache entry, an unwritable cache) as
    'warning:'; notices (the first-run compile of the loader's scan) as 'note:', on a terminal only, so a
    script's stderr depends on its input, not on what this machine has compiled before."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            _err(f"warning: {record.getMessage()}")
        elif sys.stderr.isatty():
            _err(f"note: {record.getMessage()}")


def _log_to_stderr() -> logging.Handler:
    handler = _StderrLog(logging.INFO)
    logger = logging.getLogger("fusion")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return handler


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fusion", description="Compare kernel fusion across GPU traces.")
    version = f"fusion {__version__}"
    parser.add_argument("--version", action="version", version=version)
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    summary = commands.add_parser("summary", help="platform, GPU and per-type kernel counts of one trace")
    summary.add_argument(
        "trace",
        help="a trace file: Kineto JSON, rocprofv3 JSON or CSV, nsys SQLite (docs/formats.md); or a folder:"
        " a trace plus capture/",
    )
    summary.add_argument("--format", choices=("text", "json"), default="text")
    summary.add_argument("--device", type=_device, metavar="N", help=DEVICE_HELP)
    _capture_options(summary, sides=(1,))
    summary.set_defaults(run=_summary)

    classify = commands.add_parser("classify", help="the operation type of a kernel name, and the rule")
    classify.add_argument("name", help="a kernel name, quoted")
    classify.add_argument("--platform", choices=("AMD", "NVIDIA", "unknown"), default="unknown")
    classify.set_defaults(run=_classify)

    compare = commands.add_parser(
        "compare",
        help="fusion differences between two traces",
        description="Put two traces of the same workload side by side (usually one AMD, one NVIDIA) and report\n"
        "where their kernels differ: fusions, splits, op-level differences, kernels on one side only.\n"
        "Warnings go to stderr; bad input is one line and exit status 2.",
        epilog="example:\n  fusion compare mi300x/trace.json.gz h100/trace.json.gz --format json -o result.json\n"
        "  fusion compare a.json b.json --format csv -o out   (writes out_opportunities.csv, ..., out_ops.csv)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    compare.add_argument("trace1", help="the first trace: a PyTorch-profiler .json or .json.gz (a pipe works too)")
    compare.add_argument("trace2", help="the second trace, the same kind of file")
    compare.add_argument(
        "--min-group-size",
        type=_positive_int,
        default=50,
        metavar="N",
        help="a correlation group (the kernels of one graph launch) counts as significant from N kernels (default 50)",
    )
    compare.add_argument(
        "--format",
        choices=("text", "json", "csv"),
        default="text",
        help="text: a report for a person (default); json: every number with its evidence; csv: the tables",
    )
    _pair_device_option(compare)
    compare.add_argument(
        "--phase",
        choices=PHASE_CHOICES,
        default="all",
        help="compare only the kernels of one phase (see `summary` for a trace's phases)",
    )
    compare.add_argument("-o", "--output", metavar="FILE", help="write here (csv: FILE_<table>.csv)")
    compare.add_argument(
        "--threshold",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="change a detection threshold (repeatable; names and defaults: the JSON output's params)",
    )
    compare.add_argument(
        "--no-cache",
        action="store_true",
        help="parse and compare even if these files were compared before (see FUSION_CACHE_DIR)",
    )
    compare.add_argument(
        "--keep-unlaunched",
        action="store_true",
        help="also compare kernels without a launch event in the trace (by default left out, with a warning)",
    )
    compare.add_argument(
        "--opportunities-on-mismatch",
        action="store_true",
        help="show count-based fusion opportunities although the counts do not look like the same workload"
        " (comparability mismatch), each with its warning (by default withheld)",
    )
    _capture_options(compare)
    compare.set_defaults(run=_compare)

    export = commands.add_parser(
        "export", help="both traces on one aligned timeline, findings marked: a file for ui.perfetto.dev"
    )
    export.add_argument("trace1")
    export.add_argument("trace2")
    export.add_argument(
        "--perfetto",
        required=True,
        metavar="OUT",
        help="write Chrome trace-event JSON here (gzip-compressed when OUT ends in .gz); opens in the Perfetto UI "
        "and chrome://tracing",
    )
    export.add_argument(
        "--phase",
        choices=PHASE_CHOICES,
        help="compare only the kernels of one phase and export all of them (or the scope below, inside it)",
    )
    scope = export.add_mutually_exclusive_group()
    scope.add_argument("--step", type=_positive_int, metavar="N", help="the N-th step both traces recorded (1: first)")
    scope.add_argument("--pair", type=_natural_int, metavar="ID", help="one matched pair (a pair id of compare's JSON)")
    scope.add_argument("--op", metavar="OP", help="every aligned call of one op (e.g. aten::linear)")
    scope.add_argument(
        "--finding", type=_positive_int, metavar="N", help="the cited windows of the N-th finding (1: first)"
    )
    export.add_argument("--call", type=_positive_int, metavar="K", help="with --op: only its K-th aligned call")
    export.add_argument("--min-group-size", type=_positive_int, default=50, metavar="N")
    export.add_argument("--threshold", action="append", default=[], metavar="NAME=VALUE")
    export.add_argument("--no-cache", action="store_true", help="parse and compare even if compared before")
    export.add_argument("--keep-unlaunched", action="store_true", help="also compare kernels without a launch event")
    _pair_device_option(export)
    _capture_options(export)
    export.set_defaults(run=_export)

    efficiency = commands.add_parser(
        "efficiency", help="FLOPs, bytes, TFLOP/s, TB/s and %% of peak of the aligned op calls, side by side"
    )
    efficiency.add_argument("trace1")
    efficiency.add_argument("trace2")
    efficiency.add_argument("--format", choices=("text", "json"), default="text")
    efficiency.add_argument("--top", type=_positive_int, default=20, metavar="N", help="aligned op signatures shown")
    efficiency.add_argument("--phase", choices=PHASE_CHOICES, default="all", help="only the kernels of one phase")
    efficiency.add_argument("-o", "--output", metavar="FILE", help="write here")
    efficiency.add_argument("--no-cache", action="store_true", help="parse and compare even if compared before")
    efficiency.add_argument("--keep-unlaunched", action="store_true", help="also kernels without a launch event")
    _pair_device_option(efficiency)
    _capture_options(efficiency)
    efficiency.set_defaults(run=_efficiency, min_group_size=50, threshold=[])

    batch = commands.add_parser("batch", help="compare many pairs: a manifest CSV, or two directories of rank traces")
    batch.add_argument("dirs", nargs="*", metavar="DIR", help="two directories whose traces pair by rank or by name")
    batch.add_argument("--manifest", metavar="CSV", help="rows trace1,trace2,label (paths or s3:// gs:// URLs)")
    batch.add_argument("-o", "--output", required=True, metavar="DIR", help="where the per-pair results and summary go")
    batch.add_argument("--pair-by", choices=("rank", "name"), default="rank")
    batch.add_argument("--engine", choices=("local", "ray"), default="local")
    batch.add_argument("--address", metavar="ray://HOST:PORT", help="a Ray cluster (default: start a local one)")
    batch.add_argument("--workers", type=_positive_int, metavar="N", help="local processes (default: one per core)")
    batch.add_argument("--min-group-size", type=_positive_int, default=50, metavar="N")
    batch.set_defaults(run=_batch)
    for command in commands.choices.values():  # `fusion compare --version` too (issue 38 #13)
        command.add_argument("--version", action="version", version=version)
    return parser


DEVICE_HELP = "the GPU of a file that records several (default: the one with the most kernel time)"


def _device(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a device number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def _devices(args: argparse.Namespace) -> tuple[int | None, int | None]:
    """The --device of each trace of a compare."""
    chosen = args.device or []
    if len(chosen) > 2:
        raise ConfigError("--device takes one number (both traces) or two (one per trace)")
    if len(chosen) == 1:
        return chosen[0], chosen[0]
    return (chosen[0], chosen[1]) if chosen else (None, None)


def _pair_device_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        type=_device,
        nargs="+",
        metavar="N",
        help=f"{DEVICE_HELP}; one number for both traces, or one per trace",
    )


def _capture_options(parser: argparse.ArgumentParser, sides: tuple[int, ...] = (1, 2)) -> None:
    for side in sides:
        parser.add_argument(
            f"--capture{side}",
            action="append",
            default=[],
            metavar="FILE",
            help=f"a graph-capture trace of trace {side}'s run (repeatable): ties its graph replays to the captured"
            " ops and shapes (default: the traces in a capture/ folder beside the trace, if any)",
        )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _natural_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more")
    return value


def _summary(args: argparse.Namespace) -> int:
    from fusion.cache.loading import load_traces
    from fusion.report.summary import summarize, summary_text

    (trace,) = load_traces([_request(args.trace, args.capture1, args.device)], parallel=False)
    if isinstance(trace, TraceError):
        raise trace
    summary = summarize(trace)
    if args.format == "json":
        _out(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode())
    else:
        _out(summary_text(trace, summary))
    _warn(trace.warnings)
    return 0


def _classify(args: argparse.Namespace) -> int:
    from fusion.classify.names import classify

    result = classify(args.name, args.platform)
    _out(f"{result.kernel_type}\trule: {result.rule}")
    if result.components:
        _out(f"fused aten ops: {', '.join(result.components)}")
    if result.fused_components:
        _out(f"fused components: {', '.join(result.fused_components)}")
    if result.helper:
        _out(f"helper of {result.kernel_type}: {result.helper}")
    if result.implementation:
        _out(f"implementation: {result.implementation}")
    if result.single_op:
        _out("single op: the name says it computes one elementwise operation (never credited with a fusion)")
    return 0


def _request(path: str, captures: list[str], device: int | None = None) -> Any:
    """A load request for a trace file or folder with its capture traces (given, or found beside it) and GPU."""
    from fusion.cache.loading import Request
    from fusion.model.capture_files import resolve_input

    trace, found, folder = resolve_input(path, captures)
    return Request(trace, device=device, captures=tuple(found), found_in=folder)


def _compare(args: argparse.Namespace) -> int:
    params = _params(args, args.phase)
    if args.opportunities_on_mismatch:
        params["opportunities_on_mismatch"] = True
    default_devices = _devices(args) == (None, None)
    if (
        not args.no_cache
        and default_devices
        and not _captured(args)
        and args.format == "json"
        and _reopen(args, params)
    ):
        return 0
    comparison = _comparison(args, params)
    from fusion.report import render as report

    in_report: list[str] = []
    if args.format == "csv":
        _write_csv(report.to_csv(comparison), args.output)
    elif args.format == "json":
        _write(report.to_json(comparison), args.output)
    else:  # the text report's verdict carries its own reasons; the other warnings go to stderr only
        _write(report.to_text(comparison, warnings=False), args.output)
        in_report = comparison.comparability.warnings
    _warn([w for w in comparison.warnings if w not in in_report])
    return 0


def _export(args: argparse.Namespace) -> int:
    """The aligned timeline of one scope of the comparison (fusion.report.perfetto), and one line saying what it holds."""
    comparison = _comparison(args, _params(args, args.phase or "all"))
    from fusion.report import perfetto
    from fusion.report.timeline import Scope, ScopeError

    if args.call is not None and args.op is None:
        _err("error: --call needs --op")
        return EXIT_BAD_INPUT
    chosen = [
        (kind, getattr(args, kind)) for kind in ("step", "pair", "op", "finding") if getattr(args, kind) is not None
    ]
    scope = Scope(*chosen[0], call=args.call) if chosen else Scope("all" if args.phase else "default")
    try:
        timeline = perfetto.write(comparison, scope, args.perfetto)
    except ScopeError as exc:
        _err(f"error: {exc}")
        return EXIT_BAD_INPUT
    kernels = [len(lane.rows) for lane in timeline.lanes]
    _out(
        f"{args.perfetto}: {timeline.scope}; {kernels[0]:,} + {kernels[1]:,} kernels, {len(timeline.links):,} aligned "
        f"pairs linked, {len(timeline.findings):,} finding slices, {len(timeline.gaps):,} gaps marked"
    )
    _warn(comparison.warnings)
    return 0


def _efficiency(args: argparse.Namespace) -> int:
    comparison = _comparison(args, _params(args, args.phase))
    from fusion.report.efficiency import efficiency_text

    if args.format == "json":
        document = {"op_efficiency": comparison.efficiency.to_dict()}
        _write(orjson.dumps(document, option=orjson.OPT_INDENT_2).decode(), args.output)
    else:
        _write(efficiency_text(comparison, args.top), args.output)
    _warn(comparison.warnings)
    return 0


def _captured(args: argparse.Namespace) -> bool:
    """Capture traces are given or found beside a trace (their tie-up is not in the cached JSON report)."""
    from fusion.model.capture_files import capture_files_beside

    return bool(args.capture1 or args.capture2 or any(capture_files_beside(p) for p in (args.trace1, args.trace2)))


def _params(args: argparse.Namespace, phase: str) -> dict:
    params = {"min_group_size": args.min_group_size, "keep_unlaunched": args.keep_unlaunched, "phase": phase}
    if args.threshold:  # the detect package imports pandas, which a cold re-open without thresholds avoids
        from fusion.detect.thresholds import threshold_overrides

        params.update(threshold_overrides(args.threshold))
    return params


def _comparison(args: argparse.Namespace, params: dict) -> Comparison:
    """Load both traces (table cache unless --no-cache) and compare them (result cache unless --no-cache)."""
    from fusion.cache.loading import load_requests
    from fusion.cache.tables import TableCache

    table_cache = None if args.no_cache else TableCache()
    device1, device2 = _devices(args)
    requests = (_request(args.trace1, args.capture1, device1), _request(args.trace2, args.capture2, device2))
    trace1, trace2 = load_requests(requests, cache=table_cache, meanwhile=_prepare_analysis, isolated=False)
    from fusion.cache.results import ResultCache, cached_compare
    from fusion.comparison.pair import compare
    from fusion.model.phases import require_phase

    for trace in (trace1, trace2):
        if trace.kernel_count == 0:
            raise TraceError(trace.source, "no kernel events to compare (cat 'kernel'); not a GPU profile?")
    require_phase((trace1, trace2), params["phase"])
    if args.no_cache:
        return compare(trace1, trace2, **params)
    return cached_compare(trace1, trace2, cache=ResultCache(), **params)


def _prepare_analysis() -> None:
    """Import the analysis and load the alignment's compiled code on the core that the first finished loader
    frees (not before: the loaders need both cores)."""
    import fusion.comparison.pair  # noqa: F401  (imported for later, while the other trace loads)
    import fusion.report.render  # noqa: F401
    from fusion.match.align import prepare

    prepare()


def _reopen(args: argparse.Namespace, params: dict) -> bool:
    """Print the cached JSON report of an analysed pair, if there is one (fusion.cache.reopen); False if not."""
    from fusion.cache.reopen import cached_json

    found = cached_json(args.trace1, args.trace2, params)
    if found is None:
        return False
    text, warnings = found
    _write(text, args.output)
    _warn(warnings)
    return True


def _batch(args: argparse.Namespace) -> int:
    from fusion.batch import run as batch

    if bool(args.manifest) == bool(args.dirs) or (args.dirs and len(args.dirs) != 2):
        print("error: give either --manifest CSV or two directories", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.manifest:
        jobs = batch.jobs_from_manifest(args.manifest)
    else:
        jobs = batch.jobs_from_directories(*args.dirs, pair_by=args.pair_by)
        _warn([f"{path}: no trace to pair it with; left out" for path in batch.unpaired(*args.dirs, jobs)])
    params = batch.BatchParams(min_group_size=args.min_group_size)
    summary = batch.run_batch(
        jobs,
        args.output,
        engine=args.engine,
        params=params,
        workers=args.workers,
        address=args.address,
        progress=batch.print_progress,
    )
    failed = summary.loc[summary["status"] == "error", ["label", "message"]].drop_duplicates()
    for label, message in failed.itertuples(index=False):
        print(f"error: {label}: {message}", file=sys.stderr)
    print(f"{len(jobs)} pairs, {len(failed)} failed; summary in {Path(args.output) / batch.SUMMARY_FILE}")
    return EXIT_BAD_INPUT if len(failed) else 0


def _write(text: str, output: str | None) -> None:
    """To the file as it is, or to the terminal through terminal_text."""
    if output:
        Path(output).write_text(text if text.endswith("\n") else text + "\n")
    else:
        _out(text)


def _write_csv(tables: dict[str, str], output: str | None) -> None:
    if output is None:
        for stem, text in tables.items():
            _out(f"# {stem}\n{text}\n")
        return
    prefix = output.removesuffix(".csv")
    for stem, text in tables.items():
        Path(f"{prefix}_{stem}.csv").write_text(text)


def _warn(warnings: Sequence[str]) -> None:
    for warning in warnings:
        _err(f"warning: {warning}")


if __name__ == "__main__":
    sys.exit(main())
