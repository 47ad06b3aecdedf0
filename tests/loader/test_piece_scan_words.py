"""The parts of the compiled scan that read 8 bytes at a time (keys by lookup, digit runs, names) give what
msgspec gives at every alignment, at the end of the piece, and on near misses.

Table tests: each test walks its whole table of cases and fails naming every case that differs (thousands of
cases as one test each cost more in pytest's bookkeeping than in the scan).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from itertools import product
from typing import Any

from test_piece_scan import TABLE, assert_same_or_declined

from fusion.loader.piece_scan import _ARGS_KEYS, _KEYS, _SKIPPED_KEYS, scan_piece

KNOWN = [k.decode() for k in _KEYS + _ARGS_KEYS + _SKIPPED_KEYS]
NEAR_MISSES = sorted({m for k in KNOWN for m in (k[:-1], k + "x", k[:-1] + "X", " " + k, k + " ")} - set(KNOWN))


def assert_every_case(cases: Iterable[Any], check: Callable[..., None]) -> None:
    """Run `check` on every case (a tuple is its arguments); fail listing each case whose check failed, and why."""
    failed = []
    for case in cases:
        arguments = case if isinstance(case, tuple) else (case,)
        try:
            check(*arguments)
        except AssertionError as exc:
            failed.append(f"{arguments!r}: {str(exc).splitlines()[0] if str(exc) else 'assertion failed'}")
    if failed:
        raise AssertionError(f"{len(failed)} cases differ:\n" + "\n".join(failed[:50]))


def event_text(key: str, value: str) -> str:
    return '{"cat": "kernel", "name": "k", "ts": 1.5, "args": {"x": 3, "%s": %s}, "%s": %s}' % (key, value, key, value)


def key_at(key: str, shift: int) -> None:
    text = "[" + " " * shift + event_text(key, "7") + "]"
    scanned = assert_same_or_declined(text.encode())
    if key not in ("cat", "name", "ts", "args"):  # these repeat a field: declined
        assert scanned is not None, "declined"
    tail = '[{"%s": 7}]' % key  # the key within the last 16 bytes of the piece
    assert_same_or_declined(tail.encode())


def test_keys_at_every_alignment_and_at_the_end() -> None:
    assert_every_case(product(KNOWN + NEAR_MISSES, range(9)), key_at)


def test_skipped_keys_may_repeat() -> None:
    def repeated(key: str) -> None:
        text = '[{"cat": "kernel", "%s": 1, "%s": 2, "args": {"%s": 1, "%s": [2]}}]' % (key, key, key, key)
        assert assert_same_or_declined(text.encode()) is not None, "declined"

    assert_every_case(["ph", "grid", "Sequence number", "External id"], repeated)


def test_kept_keys_that_repeat_are_still_declined() -> None:
    def declined(key: str) -> None:
        text = '[{"cat": "kernel", "args": {"stream": 1, "%s": 2}, "%s": "kernel"}]' % (key, key)
        assert scan_piece(text.encode(), TABLE) is None, "accepted"

    assert_every_case(["cat", "stream"], declined)


NUMBERS = (
    [d * k for d in "19" for k in range(1, 26)]
    + ["1" + "0" * k for k in range(25)]
    + ["12345678." + "9" * k for k in range(1, 14)]
    + ["0." + "0" * k + "1" for k in range(22)]
    + [
        "1234567812345678912",
        "12345678123456789123",
        "9" * 19 + ".5",
        "18446744073709551615",
        "18446744073709551616",
        "-9" * 1 + "9" * 18,
    ]
)


def digits_at(literal: str, shift: int) -> None:
    text = (
        "["
        + " " * shift
        + json.dumps(
            [{"cat": "kernel", "ts": 0, "dur": 0, "pid": 0, "tid": 0, "args": {"correlation": 0, "stream": 0, "x": 0}}]
        )[1:-1]
        + "]"
    )
    for field in ('"ts": 0', '"dur": 0', '"pid": 0', '"tid": 0', '"correlation": 0', '"stream": 0', '"x": 0'):
        text = text.replace(field, field[:-1] + literal)
    assert_same_or_declined(text.encode())
    for end in ("]", "}]", "e5}]", ".5}]", "x}]", "\u00e9}]"):  # digits ending at the end of the piece
        assert_same_or_declined(('[{"cat": "kernel", "ts": ' + literal + end).encode())


def test_digit_runs_at_every_alignment() -> None:
    assert_every_case(product(NUMBERS, range(8)), digits_at)


def test_a_digit_run_ends_at_any_other_byte() -> None:
    def ends(after: str, size: int) -> None:
        text = '[{"cat": "kernel", "ts": ' + "7" * size + after + "0000000000}]"
        assert_same_or_declined(text.encode("latin-1") if after == "\xff" else text.encode())

    assert_every_case(product(["\u00e9", "\x7f", "\xff", ":", "/", "a", " ", "\n"], range(1, 12)), ends)


def test_a_special_byte_anywhere_in_a_name() -> None:
    def special_at(special: str, offset: int) -> None:
        name = "a" * offset + special + "b" * (20 - offset)
        assert_same_or_declined(('[{"cat": "kernel", "name": "' + name + '", "ts": 1}]').encode())

    assert_every_case(product(['\\"', "\\\\", "\\n", "\\u0041", "\x01", "\t", "\u00e9", '"'], range(17)), special_at)


def test_a_failing_case_is_named() -> None:
    """The table runner itself: a case whose check fails is reported by its arguments, and the others still run."""
    seen = []

    def odd_fails(number: int) -> None:
        seen.append(number)
        assert number % 2 == 0, "odd"

    try:
        assert_every_case([1, 2, 3], odd_fails)
    except AssertionError as exc:
        assert str(exc).startswith("2 cases differ:\n(1,): odd\n(3,): odd")
    else:
        raise AssertionError("a failing case passed")
    assert seen == [1, 2, 3]
