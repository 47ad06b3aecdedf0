"""Decode a Chrome-trace JSON stream piece by piece, keeping only the fields the analysis reads.

A trace is one object whose `traceEvents` array holds millions of events. Decoding it whole
needs several times the file size in memory, so the array is cut into pieces at element
boundaries and each piece is decoded on its own with a typed msgspec schema. A cut is only
trusted when the piece decodes: a cut that fell inside a string or a nested object never
yields valid JSON, so it is rejected and an earlier boundary is tried.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from .errors import TraceError
from .reader import RawInput

PIECE_SIZE = 16 << 20
MAX_HEADER_BYTES = 256 << 20
MAX_EVENT_BYTES = 256 << 20
"""The longest stretch of the array without a usable cut: bounds the buffer, whatever the input."""
CUT_ATTEMPTS = 4
_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*')
_WHITESPACE = b" \t\r\n"
_TAIL_PREFIX = b'{"_":0'
_TOKEN_CHARS = (string.ascii_letters + string.digits + "+-.").encode()
"""What a number or literal is made of: a buffer ending inside one is stripped of it before a trial decode."""


class _BadCut(TraceError):
    """A piece that fails only at its end: the cut fell inside a string or a nested value."""


class Event(msgspec.Struct):
    """The fields of one trace event that the loader looks at; `args` stays undecoded."""

    cat: Any = None
    name: Any = None
    ts: Any = None
    dur: Any = None
    pid: Any = None
    tid: Any = None
    args: msgspec.Raw = msgspec.Raw()


_piece_decoder = msgspec.json.Decoder(list[Event])
_any_decoder = msgspec.json.Decoder()


@dataclass
class EventStream:
    """Top-level keys (without `traceEvents`) and an iterator over decoded event pieces."""

    top_level: dict[str, Any] = field(default_factory=dict)
    pieces: Iterator[list[Event]] = field(default_factory=lambda: iter(()))
    warnings: list[str] = field(default_factory=list)


def read_events(raw: RawInput) -> EventStream:
    """Find `traceEvents` and return the stream of its pieces; top-level keys fill in as it runs."""
    stream = EventStream()
    chunks = iter(raw.chunks)
    buf, offset, at_eof = _read_until_events_key(raw, chunks, stream)
    stream.pieces = _pieces(raw, chunks, _Cursor(buf, offset, at_eof), stream)
    return stream


def _read_until_events_key(
    raw: RawInput, chunks: Iterator[bytes], stream: EventStream
) -> tuple[bytes, int, bool]:
    buf = b""
    at_eof = False
    while True:
        match = _EVENTS_KEY.search(buf)
        if (match and match.end() < len(buf)) or at_eof or len(buf) > MAX_HEADER_BYTES:
            break
        chunk = next(chunks, None)
        at_eof = chunk is None
        buf += chunk or b""
    skipped = 0
    if buf.startswith(_BOM):
        stream.warnings.append("the file starts with a UTF-8 byte-order mark; it was skipped")
        buf = buf[len(_BOM) :]
        skipped = len(_BOM)
        match = _EVENTS_KEY.search(buf)
    if not match:
        _diagnose_whole(raw.source, buf, at_eof)
    match, head = _top_level_key(raw.source, buf, match)
    stream.top_level.update(head)
    rest = buf[match.end() :]
    if not rest:
        raise TraceError(raw.source, "truncated: the file ends right after the traceEvents key")
    if not rest.startswith(b"["):
        found = _describe_value(rest)
        raise TraceError(raw.source, f"traceEvents is not a list (it holds {found})")
    return rest[1:], skipped + match.end() + 1, at_eof


def _top_level_key(source: str, buf: bytes, first: re.Match[bytes]) -> tuple[re.Match[bytes], dict[str, Any]]:
    """The `traceEvents` key of the top-level object, and the keys before it.

    An earlier match can sit inside a nested object (`{"meta": {"traceEvents": 1}, ...}`); then the
    keys before it do not close into an object, and the next match is tried.
    """
    error: TraceError | None = None
    for match in _EVENTS_KEY.finditer(buf, first.start()):
        try:
            return match, _decode_head(source, buf[: match.start()])
        except TraceError as exc:
            error = error or exc
    raise error or TraceError(source, "no top-level traceEvents key")


def _diagnose_whole(source: str, buf: bytes, complete: bool) -> None:
    """No `traceEvents` key was found: say what the file is instead."""
    if not buf.strip():
        raise TraceError(source, "the file is empty")
    if buf.startswith(_UTF16_BOMS):
        raise TraceError(source, "UTF-16 text; a trace is UTF-8 JSON (save it as UTF-8)")
    if not complete:
        raise TraceError(source, f"no traceEvents list in the first {MAX_HEADER_BYTES >> 20} MB; not a trace")
    value = _decode_whole(source, buf)
    if not isinstance(value, dict):
        raise TraceError(source, f"the JSON holds {_kind(value)} at the top level, not a trace object")
    raise TraceError(source, "JSON object without a traceEvents list; not a Chrome/Kineto trace")


def _decode_whole(source: str, data: bytes) -> Any:
    try:
        return _any_decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise TraceError(source, _json_problem(exc, data, 0)) from None
    except UnicodeDecodeError:
        raise TraceError(source, f"not UTF-8 text (bad byte at {_utf8_error_at(data)})") from None
    except RecursionError:
        raise TraceError(source, _TOO_DEEP) from None


def _decode_head(source: str, head: bytes) -> dict[str, Any]:
    """The keys before `traceEvents`: close the object after them and decode it."""
    value = _decode_whole(source, head.rstrip(_WHITESPACE) + b'"traceEvents":null}')
    if not isinstance(value, dict):
        raise TraceError(source, "the JSON top level is not a trace object")
    value.pop("traceEvents", None)
    return value


@dataclass
class _Cursor:
    """Undecoded bytes of the array, where they start in the file, and whether input is exhausted."""

    buf: bytes
    offset: int
    at_eof: bool

    def fill(self, chunks: Iterator[bytes], size: int) -> None:
        while not self.at_eof and len(self.buf) < size:
            chunk = next(chunks, None)
            self.at_eof = chunk is None
            self.buf += chunk or b""

    def skip_whitespace(self) -> None:
        """Drop leading whitespace, so a file padded with blanks streams instead of piling up."""
        rest = self.buf.lstrip(_WHITESPACE)
        self.offset += len(self.buf) - len(rest)
        self.buf = rest


def _pieces(raw: RawInput, chunks: Iterator[bytes], cur: _Cursor, stream: EventStream) -> Iterator[list[Event]]:
    """Decode the array in pieces of about PIECE_SIZE bytes; the last piece also yields the tail keys."""
    index = 0
    want = PIECE_SIZE
    while True:
        cur.fill(chunks, want)
        cur.skip_whitespace()
        if cur.at_eof:
            events, tail = _decode_last_piece(raw.source, cur.buf, cur.offset, index)
            if "traceEvents" in tail:
                raise TraceError(raw.source, "two traceEvents keys; which one is meant is unclear")
            stream.top_level.update((k, v) for k, v in tail.items() if k not in stream.top_level)
            if events:
                yield events
            return
        cut = _cut_piece(raw.source, cur.buf, cur.offset, index)
        if cut is None:
            want = len(cur.buf) + PIECE_SIZE
            continue
        want = PIECE_SIZE
        events, end = cut
        index += len(events)
        yield events
        rest = cur.buf[end:].lstrip(_WHITESPACE)
        if not rest.startswith(b","):
            raise TraceError(raw.source, f"not valid JSON near byte {cur.offset + end}: expected ',' between events")
        cur.offset += len(cur.buf) - len(rest) + 1
        cur.buf = rest[1:]


def _cut_piece(source: str, buf: bytes, offset: int, index: int) -> tuple[list[Event], int] | None:
    """The events before the last boundary in `buf` that decodes, and where it ends; None: read more.

    An error before the end of the buffer is an error in the file: it is raised at once, even where no
    boundary was found (a trial decode of the whole buffer finds it).
    """
    end: int | None = len(buf)
    for _ in range(CUT_ATTEMPTS):
        end = _last_boundary(buf, end)
        if end is None:
            break
        try:
            return _decode_events(source, buf[:end], offset, index), end
        except _BadCut:
            end -= 1
    try:
        _decode_events(source, buf.rstrip(_TOKEN_CHARS), offset, index)
    except _BadCut:
        pass
    if len(buf) > MAX_EVENT_BYTES:
        limit = MAX_EVENT_BYTES >> 20
        raise TraceError(source, f"no end of an event within {limit} MB after byte {offset}; too large, refused")
    return None


def _last_boundary(buf: bytes, before: int) -> int | None:
    """Position just after the last `}` before `before` that is followed by a comma."""
    pos = buf.rfind(b"}", 0, before)
    while pos >= 0:
        nxt = pos + 1
        while nxt < len(buf) and buf[nxt] in _WHITESPACE:
            nxt += 1
        if nxt < len(buf) and buf[nxt] == ord(","):
            return pos + 1
        pos = buf.rfind(b"}", 0, pos)
    return None


def _decode_last_piece(source: str, buf: bytes, offset: int, index: int) -> tuple[list[Event], dict[str, Any]]:
    """The final events and the keys after the array; the closing `]` is the one whose both sides decode."""
    end = len(buf)
    events_error: TraceError | None = None
    bad_tails: list[int] = []
    while True:
        end = buf.rfind(b"]", 0, end)
        if end < 0 or end < len(buf) - (1 << 20):
            raise events_error or _tail_problem(source, buf, offset, index, bad_tails[:CUT_ATTEMPTS])
        tail = _decode_tail(buf[end + 1 :])
        body = buf[:end].rstrip(_WHITESPACE)
        if tail is None:
            bad_tails.append(end)
            continue
        try:
            return _decode_events(source, body, offset, index), tail
        except TraceError as exc:
            events_error = events_error or exc


def _tail_problem(source: str, buf: bytes, offset: int, index: int, ends: list[int]) -> TraceError:
    """No `]` closes the list with a valid tail: if one closes it, say what is wrong after it."""
    for end in ends:
        data = _TAIL_PREFIX + buf[end + 1 :]
        try:
            _decode_events(source, buf[:end].rstrip(_WHITESPACE), offset, index)
            _any_decoder.decode(data)
        except TraceError:
            continue
        except msgspec.DecodeError as exc:
            if "truncated" in str(exc):
                return TraceError(source, "truncated: the file ends after the traceEvents list, before the closing }")
            problem = _json_problem(exc, data, offset + end + 1 - len(_TAIL_PREFIX))
            return TraceError(source, f"after the traceEvents list: {problem}")
        except (UnicodeDecodeError, RecursionError):
            return TraceError(source, "after the traceEvents list: not UTF-8 text or nested too deeply")
        return TraceError(source, "after the traceEvents list: the trace object holds something other than keys")
    return TraceError(source, "truncated: the file ends before the traceEvents list is closed")


def _decode_tail(tail: bytes) -> dict[str, Any] | None:
    try:
        value = _any_decoder.decode(_TAIL_PREFIX + tail)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    value.pop("_", None)
    return value


def _decode_events(source: str, body: bytes, offset: int, index: int) -> list[Event]:
    """The events of one piece; raises _BadCut when decoding fails only at the piece's end."""
    data = b"[" + body + b"]"
    try:
        return _piece_decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise TraceError(source, _entry_problem(exc, index)) from None
    except msgspec.DecodeError as exc:
        error = _BadCut if _is_bad_cut(exc, len(data)) else TraceError
        raise error(source, _json_problem(exc, data, offset - 1)) from None
    except UnicodeDecodeError:
        raise TraceError(source, f"not UTF-8 text (bad byte at {offset - 1 + _utf8_error_at(data)})") from None
    except RecursionError:
        raise TraceError(source, _TOO_DEEP) from None


def _utf8_error_at(data: bytes) -> int:
    """Where the first invalid UTF-8 byte is (msgspec counts from the start of the string, not the input)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start
    return 0


def _is_bad_cut(exc: msgspec.DecodeError, size: int) -> bool:
    """The error a wrong cut gives: inside a value (fails at the end) or past the array's end (trailing data)."""
    message = str(exc)
    match = _BYTE_POS.search(message)
    ends_early = "truncated" in message or "trailing characters" in message
    return ends_early or (match is not None and int(match.group(1)) >= size - 1)


_BYTE_POS = re.compile(r"\(byte (\d+)\)")
_ENTRY_POS = re.compile(r"\$\[(\d+)\]")
_NON_JSON_NUMBERS = (b"NaN", b"Infinity", b"-Infinity")
_TOO_DEEP = "JSON nested too deeply (over a thousand levels; trace events are a few levels deep)"


def _json_problem(exc: msgspec.DecodeError, data: bytes, shift: int) -> str:
    """A decode error with its byte position counted from the start of the file."""
    message = str(exc)
    if "truncated" in message:
        return "truncated JSON: the file ends in the middle of a value"
    match = _BYTE_POS.search(message)
    if match:
        position = int(match.group(1))
        if "trailing characters" in message:
            position -= 1  # msgspec names the byte after the first trailing one
        if data[position:].startswith(_NON_JSON_NUMBERS):
            return f"not valid JSON: NaN or Infinity at byte {position + shift} (JSON has no such numbers)"
        message = _BYTE_POS.sub(f"(byte {position + shift})", message)
    if message.startswith("JSON is malformed"):
        return "not valid JSON: " + message.removeprefix("JSON is malformed: ")
    return message


def _entry_problem(exc: msgspec.ValidationError, index: int) -> str:
    match = _ENTRY_POS.search(str(exc))
    where = f"entry {index + int(match.group(1))}" if match else "an entry"
    detail = str(exc).split(" - ")[0]
    if detail.startswith("Expected `object`"):
        return f"traceEvents {where} is not an object ({detail})"
    return f"traceEvents {where} holds a value that cannot be read ({detail})"


def _describe_value(rest: bytes) -> str:
    head = rest[:20].decode("utf-8", "replace")
    for prefix, kind in (("{", "an object"), ('"', "a string"), ("null", "null"), ("t", "true"), ("f", "false")):
        if head.startswith(prefix):
            return kind
    return "a number" if head[:1].isdigit() or head.startswith("-") else f"'{head}'"


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"
