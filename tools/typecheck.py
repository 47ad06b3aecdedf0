"""mypy on fusion/ and ui/ (settings in pyproject.toml) against a baseline that only shrinks.

    python tools/typecheck.py            # fails on an error not in the baseline, and on a baseline line now fixed
    python tools/typecheck.py --shrink   # after fixing errors: drop the fixed ones from the baseline

The baseline (tools/mypy-baseline.txt) lists the errors the code had when mypy was added, one per line as
'file: error: message  [code]' (no line numbers, so unrelated edits do not move them). New code must not add one.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = Path(__file__).with_name("mypy-baseline.txt")
_LINE = re.compile(r"^(?P<file>[^:]+):\d+(?::\d+)?: (?P<rest>error: .*)$")


def current_errors() -> Counter[str]:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--no-error-summary"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode not in (0, 1):
        sys.exit(f"mypy failed to run: {done.stderr.strip() or done.stdout.strip()}")
    return Counter(f"{m['file']}: {m['rest']}" for line in done.stdout.splitlines() if (m := _LINE.match(line)))


def baseline() -> Counter[str]:
    return Counter(line for line in BASELINE.read_text().splitlines() if line) if BASELINE.exists() else Counter()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shrink", action="store_true", help="drop fixed errors from the baseline")
    args = parser.parse_args(argv)
    now, known = current_errors(), baseline()
    new, fixed = now - known, known - now
    for error in sorted(new.elements()):
        print(f"new: {error}")
    if new:
        print(f"{sum(new.values())} mypy errors not in the baseline: fix them (the baseline only shrinks)")
        return 1
    if fixed and args.shrink:
        BASELINE.write_text("".join(f"{e}\n" for e in sorted(now.elements())))
        print(f"baseline: {sum(fixed.values())} fixed errors dropped, {sum(now.values())} left")
    elif fixed:
        for error in sorted(fixed.elements()):
            print(f"fixed: {error}")
        print(f"{sum(fixed.values())} baseline errors are fixed: run `python tools/typecheck.py --shrink`")
        return 1
    print(f"mypy: {sum(now.values())} known errors (baseline), none new")
    return 0


if __name__ == "__main__":
    sys.exit(main())
