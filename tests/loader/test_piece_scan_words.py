"""The parts of the compiled scan that read 8 bytes at a time (keys by lookup, digit runs, names) give what
msgspec gives at every alignment, at the end of the piece, and on near misses."""

from __future__ import annotations

import json

import pytest
from test_piece_scan import TABLE, assert_same_or_declined

from fusion.loader.piece_scan import _ARGS_KEYS, _KEYS, _SKIPPED_KEYS, scan_piece

KNOWN = [k.decode() for k in _KEYS + _ARGS_KEYS + _SKIPPED_KEYS]
NEAR_MISSES = sorted({m for k in KNOWN for m in (k[:-1], k + "x", k[:-1] + "X", " " + k, k + " ")} - set(KNOWN))


def event_text(key: str, value: str) -> str:
    return '{"cat": "kernel", "name": "k", "ts": 1.5, "args": {"x": 3, "%s": %s}, "%s": %s}' % (key, value, key, value)


@pytest.mark.parametrize("shift", range(9))
@pytest.mark.parametrize("key", KNOWN + NEAR_MISSES)
def test_keys_at_every_alignment_and_at_the_end(key: str, shift: int) -> None:
    text = "[" + " " * shift + event_text(key, "7") + "]"
    scanned = assert_same_or_declined(text.encode())
    if key not in ("cat", "name", "ts", "args"):  # these repeat a field: declined
        assert scanned is not None
    tail = '[{"%s": 7}]' % key  # the key within the last 16 bytes of the piece
    assert_same_or_declined(tail.encode())


@pytest.mark.parametrize("key", ["ph", "grid", "Sequence number", "External id"])
def test_skipped_keys_may_repeat(key: str) -> None:
    text = '[{"cat": "kernel", "%s": 1, "%s": 2, "args": {"%s": 1, "%s": [2]}}]' % (key, key, key, key)
    assert assert_same_or_declined(text.encode()) is not None


@pytest.mark.parametrize("key", ["cat", "stream"])
def test_kept_keys_that_repeat_are_still_declined(key: str) -> None:
    text = '[{"cat": "kernel", "args": {"stream": 1, "%s": 2}, "%s": "kernel"}]' % (key, key)
    assert scan_piece(text.encode(), TABLE) is None


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


@pytest.mark.parametrize("shift", range(8))
@pytest.mark.parametrize("literal", NUMBERS)
def test_digit_runs_at_every_alignment(literal: str, shift: int) -> None:
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


@pytest.mark.parametrize("after", ["\u00e9", "\x7f", "\xff", ":", "/", "a", " ", "\n"])
def test_a_digit_run_ends_at_any_other_byte(after: str) -> None:
    for size in range(1, 12):
        text = '[{"cat": "kernel", "ts": ' + "7" * size + after + "0000000000}]"
        data = text.encode("latin-1") if after == "\xff" else text.encode()
        assert_same_or_declined(data)


@pytest.mark.parametrize("offset", range(17))
@pytest.mark.parametrize("special", ['\\"', "\\\\", "\\n", "\\u0041", "\x01", "\t", "\u00e9", '"'])
def test_a_special_byte_anywhere_in_a_name(special: str, offset: int) -> None:
    name = "a" * offset + special + "b" * (20 - offset)
    text = '[{"cat": "kernel", "name": "' + name + '", "ts": 1}]'
    assert_same_or_declined(text.encode())
