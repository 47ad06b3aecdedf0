"""Command line: `python -m fusion summary|classify|compare ...`.

Bad input prints one line naming the file and the problem and exits with status 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import orjson

from .errors import TraceError

EXIT_BAD_INPUT = 2


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.run(args)
    except TraceError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:
        print("error: out of memory; the traces are too large for this machine", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return 0
    except OSError as exc:
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as exc:
        if os.environ.get("FUSION_DEBUG"):
            raise
        print(f"internal error: {type(exc).__name__}: {exc} (set FUSION_DEBUG=1 for a traceback)", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m fusion", description="Compare kernel fusion across GPU traces.")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    summary = commands.add_parser("summary", help="platform, GPU and per-type kernel counts of one trace")
    summary.add_argument("trace", help="a .json or .json.gz PyTorch-profiler trace")
    summary.add_argument("--format", choices=("text", "json"), default="text")
    summary.set_defaults(run=_summary)

    classify = commands.add_parser("classify", help="the operation type of a kernel name, and the rule")
    classify.add_argument("name", help="a kernel name, quoted")
    classify.add_argument("--platform", choices=("AMD", "NVIDIA", "unknown"), default="unknown")
    classify.set_defaults(run=_classify)

    compare = commands.add_parser("compare", help="fusion differences between two traces")
    compare.add_argument("trace1")
    compare.add_argument("trace2")
    compare.add_argument("--min-group-size", type=_positive_int, default=50, metavar="N")
    compare.add_argument("--format", choices=("text", "json", "csv"), default="text")
    compare.add_argument("-o", "--output", metavar="FILE", help="write here (csv: FILE_<table>.csv)")
    compare.add_argument(
        "--no-cache", action="store_true", help="parse both files even if they were loaded before (see FUSION_CACHE_DIR)"
    )
    compare.add_argument(
        "--keep-unlaunched", action="store_true",
        help="also compare kernels without a launch event in the trace (by default left out, with a warning)",
    )
    compare.set_defaults(run=_compare)
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _summary(args: argparse.Namespace) -> int:
    from .summary import summarize, summary_text
    from .trace import load

    trace = load(args.trace)
    summary = summarize(trace)
    if args.format == "json":
        _warn(trace.warnings)
        sys.stdout.write(orjson.dumps(summary, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(summary_text(trace, summary))
    return 0


def _classify(args: argparse.Namespace) -> int:
    from .classify import classify

    result = classify(args.name, args.platform)
    print(f"{result.kernel_type}\trule: {result.rule}")
    if result.components:
        print(f"fused aten ops: {', '.join(result.components)}")
    if result.fused_components:
        print(f"fused components: {', '.join(result.fused_components)}")
    if result.helper:
        print(f"helper of {result.kernel_type}: {result.helper}")
    if result.implementation:
        print(f"implementation: {result.implementation}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from . import report
    from .compare import compare
    from .parallel import load_pair
    from .tablecache import TableCache

    trace1, trace2 = load_pair(args.trace1, args.trace2, cache=None if args.no_cache else TableCache())
    comparison = compare(trace1, trace2, min_group_size=args.min_group_size, keep_unlaunched=args.keep_unlaunched)
    if args.format == "csv":
        _write_csv(report.to_csv(comparison), args.output)
    else:
        text = report.to_json(comparison) if args.format == "json" else report.to_text(comparison)
        _write(text, args.output)
    if args.format != "text":
        _warn(comparison.warnings)
    return 0


def _write(text: str, output: str | None) -> None:
    if output:
        Path(output).write_text(text if text.endswith("\n") else text + "\n")
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _write_csv(tables: dict[str, str], output: str | None) -> None:
    if output is None:
        for stem, text in tables.items():
            sys.stdout.write(f"# {stem}\n{text}\n")
        return
    prefix = output.removesuffix(".csv")
    for stem, text in tables.items():
        Path(f"{prefix}_{stem}.csv").write_text(text)


def _warn(warnings: Sequence[str]) -> None:
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
