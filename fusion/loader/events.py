"""Decode a Chrome-trace JSON stream piece by piece, keeping only the fields the analysis reads.

A trace is one object whose `traceEvents` array holds millions of events. Decoding it whole
needs several times the file size in memory, so the array is cut into pieces at its top-level
element boundaries and each piece is decoded on its own into the columns of the events the caller keeps
(EventColumns): the pieces of a large trace by the compiled scan of piece_scan.py, those of a small one, or one
the scan declines, with a typed msgspec schema, which also names what is wrong with a piece.

Cutting costs a bounded amount of work per byte, whatever the content:
- a piece is first tried at a likely boundary (the last `}` followed by a comma near its end); the
  decoder accepts it only if the cut is a true boundary, since the piece starts at one and a cut
  inside a string or a nested value never closes into a valid array;
- the first time a try fails, the grammar-aware scan of `scan.py` takes over for the rest of the
  file: it finds the boundaries and the end of the array in one forward pass, so a crafted input
  (strings full of `},`, huge events) costs one failed decode, a scan and the decode itself.
The top-level `traceEvents` key and the end of the array are found by the same scan.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from fusion.compiled import compiling_elsewhere
from fusion.errors import TraceError
from fusion.loader.event_columns import EventColumns, of_events
from fusion.loader.op_args import EventArgs, ValueMasks, decode_args
from fusion.loader.reader import RawInput
from fusion.loader.scan import CLOSE_ARRAY, CLOSE_OBJECT, COLON, COMMA, OBJECT_MARKS, QUOTE, Marks, Scanner

PIECE_SIZE = 16 << 20
COMPILED_SCAN_MIN_BYTES = 64 << 20
"""Traces of at least this much JSON are decoded by the compiled scan: it takes about 5 ns a byte where msgspec
takes 11, but importing numba and loading the scan's machine code cost about 0.5 s per process, which a
smaller trace does not win back (and a first run would compile it). In a process that has the scan's machine
code loaded already (it read a large trace before: a server, a batch), every trace is scanned: nothing is left
to pay (`scans`)."""
MAX_HEADER_BYTES = 256 << 20
MAX_EVENT_BYTES = 256 << 20
"""The longest stretch of the array without a boundary: bounds the buffer, whatever the input."""
NOT_AN_OBJECT_BYTES = 1 << 20
"""A file that does not start with `{` is read this far only: a small one is decoded to say exactly what it is."""
HEADER_FIRST_SCAN = 4 << 10
"""The key usually comes within the first kilobytes: the header is scanned in windows growing from this."""
GUESS_WINDOW = 64 << 10
"""How far back from a piece's end a likely boundary is looked for."""
_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_EVENTS_KEY = b'"traceEvents"'
_WHITESPACE = b" \t\r\n"
_TAIL_PREFIX = b'{"_":0'


class _BadCut(TraceError):
    """A piece that fails only at its end: the cut fell inside a string or a nested value."""


class _Fields(msgspec.Struct, gc=False):
    """The fields of one trace event that the loader looks at.

    Not tracked by the garbage collector (gc=False): an event refers only to values decoded from JSON,
    which never refer back to it, so it cannot be in a cycle; millions of tracked events would make
    every collection slower.
    """

    cat: Any = None
    name: Any = None
    ts: Any = None
    dur: Any = None
    pid: Any = None
    tid: Any = None


class Event(_Fields, gc=False):
    """An event with the fields of its `args` the loader reads (op_args.EventArgs): None when it has no args, or
    args that are not an object."""

    args: EventArgs | None = None


class _RawEvent(_Fields, gc=False):
    """An event whose `args` stays undecoded: what any valid piece decodes to, whatever its args hold."""

    args: msgspec.Raw = msgspec.Raw()


_piece_decoder = msgspec.json.Decoder(list[Event])
"""Decodes a piece and its args' ids in one pass; fails on args that are not objects (then _raw_decoder)."""
_raw_decoder = msgspec.json.Decoder(list[_RawEvent])
_any_decoder = msgspec.json.Decoder()


@dataclass
class EventStream:
    """Top-level keys (without `traceEvents`) and an iterator over the pieces' kept events as columns."""

    top_level: dict[str, Any] = field(default_factory=dict)
    pieces: Iterator[EventColumns] = field(default_factory=lambda: iter(()))
    warnings: list[str] = field(default_factory=list)


def scan_compile_pending(size: int) -> bool:
    """Reading `size` bytes of JSON would first compile the piece scan here (about 20 s on a new install); not
    while another process compiles it (reading then takes the msgspec path)."""
    if size < COMPILED_SCAN_MIN_BYTES:
        return False
    from fusion.loader import piece_scan  # imports numba

    return piece_scan.compile_pending() and not compiling_elsewhere()


def scans(size: int) -> bool:
    """A trace of `size` bytes of JSON is decoded by the compiled scan: it is large enough to pay for loading the
    scan (COMPILED_SCAN_MIN_BYTES), or this process has the scan loaded already. A process that has not imported
    the scan never imports it (nor numba) for a small trace."""
    if size >= COMPILED_SCAN_MIN_BYTES:
        return True
    piece_scan = sys.modules.get("fusion.loader.piece_scan")
    return piece_scan is not None and piece_scan.loaded()


def read_events(
    raw: RawInput, bucket_of: dict[str, int] | None = None, value_masks: ValueMasks | None = None
) -> EventStream:
    """Find `traceEvents` and return the stream of its pieces; top-level keys fill in as it runs.

    `bucket_of` numbers the categories to keep (EventColumns.bucket); events of other categories are dropped.
    `value_masks`: per bucket, the args values its events keep (op_args: a cpu_op's shapes, a capture's kernels)."""
    stream = EventStream()
    chunks = iter(raw.chunks)
    pending = _read_header(raw.source, chunks, stream)
    decoder = _Decoder(raw.source, bucket_of or {}, scans(max(raw.json_size, raw.size)), value_masks or {})
    stream.pieces = _Pieces(raw.source, chunks, pending, stream, decoder).run()
    return stream


@dataclass
class _Decoder:
    """Decodes pieces into EventColumns: a large trace's with the compiled scan, the rest (and what it declines)
    with msgspec."""

    source: str
    bucket_of: dict[str, int]
    scans: bool
    """The trace is decoded by the compiled scan (`scans`)."""
    value_masks: ValueMasks = field(default_factory=dict)
    table: Any = None
    """The compiled scan's category table, made on the first piece it scans (importing numba only then)."""
    masks: Any = None
    """The compiled scan's form of value_masks, made with its category table."""

    def decode(self, data: bytes, offset: int, index: int) -> EventColumns:
        """The events of `data` (see _decode_events); raises _BadCut or TraceError as it does, and a TraceError
        for bytes that are not UTF-8 in the args values kept undecoded until here (op_args)."""
        try:
            if self.scans:
                scanned = self._scan(data)
                if scanned is not None:
                    return scanned
            return of_events(_decode_events(self.source, data, offset, index), self.bucket_of, self.value_masks)
        except UnicodeDecodeError:
            raise TraceError(self.source, f"not UTF-8 text (bad byte at {offset - 1 + _utf8_error_at(data)})") from None

    def _scan(self, data: bytes) -> EventColumns | None:
        from fusion.loader import piece_scan  # imports numba: only for a large trace

        if not piece_scan.ready():
            return None
        if self.table is None:
            self.table = piece_scan.category_table(self.bucket_of)
            self.masks = piece_scan.value_mask_table(self.value_masks)
        return piece_scan.scan_piece(data, self.table, self.masks)


def _first_content(data: bytes | memoryview) -> int:
    """Index of the first byte that is not JSON whitespace; len(data) when there is none.

    Windows of growing size are checked with bytes.translate, the fastest blank test in the standard
    library (about ten times a regex), so a file of blanks is refused at about the speed of reading it.
    """
    view = memoryview(data)
    start, step = 0, 1 << 10
    while start < len(view):
        window = bytes(view[start : start + step])
        if window.translate(None, _WHITESPACE):
            return start + len(window) - len(window.lstrip(_WHITESPACE))
        start, step = start + len(window), min(step * 8, 1 << 20)
    return len(view)


# -- the keys before the array


@dataclass
class _Header:
    """The bytes read so far from the first non-blank byte on, and the scan that looks for the key."""

    data: bytearray = field(default_factory=bytearray)
    start: int = 0
    """Stream position of data[0] (past a byte-order mark and leading blanks)."""
    scanner: Scanner = field(default_factory=lambda: Scanner(OBJECT_MARKS))
    waiting: int = -1
    """Position of a top-level string whose next mark is in a block not scanned yet."""

    def add(self, chunk: bytes | memoryview) -> int | None:
        """Append and scan a chunk; the position of the top-level `"traceEvents"` key once it is known."""
        at = self.start + len(self.data)
        self.data += chunk
        view = memoryview(chunk)
        start, step = 0, HEADER_FIRST_SCAN
        while start < len(view):
            for marks in self.scanner.marks(view[start : start + step], at + start):
                found = self._key(marks)
                if found is not None:
                    return found
            start, step = start + step, step * 8
        return None

    def _key(self, marks: Marks) -> int | None:
        pos, byte, depth = marks
        if self.waiting >= 0 and len(pos):
            if byte[0] == COLON and self._spells_key(np.array([self.waiting])).any():
                return self.waiting
            self.waiting = -1
        strings = np.flatnonzero((byte == QUOTE) & (depth == 1))
        if len(strings) and strings[-1] == len(pos) - 1:
            self.waiting = int(pos[strings[-1]])
            strings = strings[:-1]
        keys = pos[strings[byte[strings + 1] == COLON]]
        matches = keys[self._spells_key(keys)]
        return int(matches[0]) if len(matches) else None

    def _spells_key(self, positions: np.ndarray) -> np.ndarray:
        """Which of these string starts (stream positions) spell `"traceEvents"`."""
        local = positions - self.start
        fits = local + len(_EVENTS_KEY) <= len(self.data)
        text = np.frombuffer(self.data, dtype=np.uint8)
        window = local[fits, None] + np.arange(len(_EVENTS_KEY))
        spelled = np.zeros(len(positions), dtype=bool)
        spelled[fits] = (text[window] == np.frombuffer(_EVENTS_KEY, dtype=np.uint8)).all(axis=1)
        return spelled


def _read_header(source: str, chunks: Iterator[bytes], stream: EventStream) -> _Pending:
    """Read up to the `[` of the top-level `traceEvents` key; the bytes after it begin the array."""
    header, read = _skip_blanks(source, chunks, stream)
    key = header.add(read) if read else None
    while key is None and len(header.data) <= _header_limit(header.data):
        chunk = next(chunks, None)
        if chunk is None:
            _diagnose_whole(source, bytes(header.data), header.start, True)
        key = header.add(chunk)
    if key is None:
        _diagnose_whole(source, bytes(header.data), header.start, False)
    local = key - header.start
    stream.top_level.update(_decode_head(source, bytes(header.data[:local]), header.start))
    after_key = key + len(_EVENTS_KEY)
    rest, at = _after_colon(source, memoryview(header.data)[local + len(_EVENTS_KEY) :], after_key, chunks)
    if rest[:1] != b"[":
        raise TraceError(source, f"traceEvents is not a list (it holds {_describe_value(bytes(rest[:20]))})")
    pending = _Pending(start=at + 1)
    pending.add(memoryview(rest)[1:])
    return pending


def _header_limit(data: bytearray) -> int:
    """How much is read looking for the key: a file that does not start with `{` is no trace object."""
    return MAX_HEADER_BYTES if data[:1] == b"{" else NOT_AN_OBJECT_BYTES


def _skip_blanks(source: str, chunks: Iterator[bytes], stream: EventStream) -> tuple[_Header, memoryview]:
    """Drop a byte-order mark and leading blanks without keeping them; the first chunk with content."""
    read = b""
    while len(read) < len(_BOM) and (chunk := next(chunks, None)) is not None:
        read += chunk
    skipped = 0
    if read.startswith(_BOM):
        stream.warnings.append("the file starts with a UTF-8 byte-order mark; it was skipped")
        read, skipped = read[len(_BOM) :], len(_BOM)
    seen = len(read)
    while (blank := _first_content(read)) == len(read):
        skipped += len(read)
        chunk = next(chunks, None)
        if chunk is None:
            problem = "the file holds only whitespace, no JSON value" if seen else "the file is empty"
            raise TraceError(source, problem)
        read, seen = chunk, seen + len(chunk)
    return _Header(start=skipped + blank), memoryview(read)[blank:]


def _after_colon(source: str, rest: memoryview, at: int, chunks: Iterator[bytes]) -> tuple[memoryview, int]:
    """The bytes from the key's value on, and the value's stream position; `rest` follows the key at `at`."""
    colon = _first_content(rest)
    if rest[colon : colon + 1] != b":":
        raise TraceError(source, f"not valid JSON: expected ':' after the traceEvents key (byte {at + colon})")
    value, at = rest[colon + 1 :], at + colon + 1
    while (blank := _first_content(value)) == len(value):
        at += len(value)
        chunk = next(chunks, None)
        if chunk is None:
            raise TraceError(source, "truncated: the file ends right after the traceEvents key")
        value = memoryview(chunk)
    return value[blank:], at + blank


def _diagnose_whole(source: str, buf: bytes, shift: int, complete: bool) -> None:
    """No `traceEvents` key was found: say what the file is instead."""
    if buf.startswith(_UTF16_BOMS):
        raise TraceError(source, "UTF-16 text; a trace is UTF-8 JSON (save it as UTF-8)")
    if not complete and not buf.startswith(b"{"):
        raise TraceError(source, _top_level_value(buf, shift))
    if not complete:
        raise TraceError(source, f"no traceEvents list in the first {MAX_HEADER_BYTES >> 20} MB; not a trace")
    value = _decode_whole(source, buf, shift)
    if not isinstance(value, dict):
        raise TraceError(source, f"the JSON holds {_kind(value)} at the top level, not a trace object")
    raise TraceError(source, "JSON object without a traceEvents list; not a Chrome/Kineto trace")


def _top_level_value(buf: bytes, shift: int) -> str:
    """What a large file that does not start with `{` holds, told from its first byte."""
    first = buf[:1]
    kinds = {b"[": "an array", b'"': "a string", b"n": "null", b"t": "a boolean", b"f": "a boolean"}
    kind = kinds.get(first) or ("a number" if first in b"-0123456789" else None)
    if kind is None:
        return f"not valid JSON: invalid character (byte {shift})"
    return f"the JSON holds {kind} at the top level, not a trace object"


def _decode_whole(source: str, data: bytes, shift: int) -> Any:
    try:
        return _any_decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise TraceError(source, _json_problem(exc, data, shift)) from None
    except UnicodeDecodeError:
        raise TraceError(source, f"not UTF-8 text (bad byte at {shift + _utf8_error_at(data)})") from None
    except RecursionError:
        raise TraceError(source, _TOO_DEEP) from None


def _decode_head(source: str, head: bytes, shift: int) -> dict[str, Any]:
    """The keys before `traceEvents`: close the object after them and decode it."""
    value = _decode_whole(source, head.rstrip(_WHITESPACE) + b'"traceEvents":null}', shift)
    if not isinstance(value, dict):
        raise TraceError(source, "the JSON top level is not a trace object")
    value.pop("traceEvents", None)
    return value


# -- the array, piece by piece


@dataclass
class _Pending:
    """Bytes of the array read but not decoded yet: blocks, and the stream position of the first byte."""

    start: int
    blocks: list[memoryview] = field(default_factory=list)
    size: int = 0

    @property
    def end(self) -> int:
        return self.start + self.size

    def add(self, block: bytes | memoryview) -> None:
        if len(block):
            self.blocks.append(memoryview(block))
            self.size += len(block)

    def join(self, upto: int, prefix: bytes = b"", suffix: bytes = b"") -> bytes:
        """prefix, the bytes up to stream position `upto`, suffix: in one copy."""
        parts, need = [prefix], upto - self.start
        for block in self.blocks:
            if need <= 0:
                break
            parts.append(block[:need])
            need -= len(block)
        parts.append(suffix)
        return b"".join(parts)

    def tail(self, size: int) -> tuple[bytes, int]:
        """The last `size` bytes (all, when there are fewer) and the stream position of the first of them."""
        at = max(self.start, self.end - size)
        parts, skip = [], at - self.start
        for block in self.blocks:
            parts.append(block[skip:])
            skip = max(0, skip - len(block))
        return b"".join(parts), at

    def drop(self, upto: int) -> None:
        """Forget the bytes before stream position `upto`."""
        count = upto - self.start
        self.start, self.size = upto, self.size - count
        while count:
            first = self.blocks[0]
            if len(first) <= count:
                del self.blocks[0]
                count -= len(first)
            else:
                self.blocks[0] = first[count:]
                count = 0

    def first_content(self) -> int | None:
        """The first byte that is not blank, the blanks before it dropped; None when there is none yet."""
        while self.blocks:
            blank = _first_content(self.blocks[0])
            if blank < len(self.blocks[0]):
                self.drop(self.start + blank)
                return self.blocks[0][0]
            self.drop(self.start + blank)
        return None


class _ArrayScan:
    """The grammar-aware scan of the array, from an element boundary on: its last boundary and its end."""

    def __init__(self) -> None:
        self.scanner = Scanner()
        self.boundary = -1
        """Stream position where the complete elements seen so far end (before a comma or after a close)."""
        self.end: int | None = None
        """Stream position of the byte that closes the array (a `]` in valid JSON)."""
        self.end_byte = CLOSE_ARRAY

    def feed(self, data: bytes | memoryview, at: int) -> None:
        for pos, byte, depth in self.scanner.marks(data, at):
            if self.end is not None:
                return
            closed = np.flatnonzero(depth < 0)
            if len(closed):
                first = closed[0]
                self.end, self.end_byte = int(pos[first]), int(byte[first])
                pos, byte, depth = pos[:first], byte[:first], depth[:first]
            top = depth == 0
            commas = pos[top & (byte == COMMA)]
            closes = pos[top & ((byte == CLOSE_OBJECT) | (byte == CLOSE_ARRAY))] + 1
            for cuts in (commas, closes):
                if len(cuts):
                    self.boundary = max(self.boundary, int(cuts[-1]))


class _Pieces:
    """Cut the array into pieces and decode them; the last piece also yields the keys after the array."""

    def __init__(
        self, source: str, chunks: Iterator[bytes], pending: _Pending, stream: EventStream, decoder: _Decoder
    ) -> None:
        self.source = source
        self.decoder = decoder
        self.chunks = chunks
        self.pending = pending
        self.stream = stream
        self.at_eof = False
        self.scan: _ArrayScan | None = None
        self.index = 0
        """Events decoded so far: entry numbers in messages count from here."""
        self.separated = True
        """False right after a cut: the next element must come after a comma."""

    def run(self) -> Iterator[EventColumns]:
        self._separate()
        while True:
            while not self.at_eof and self._wants_more():
                self._read()
            if self.at_eof or (self.scan is not None and self.scan.end is not None):
                yield from self._finish()
                return
            events = self._cut()
            if events is not None:
                yield events

    def _read(self) -> None:
        chunk = next(self.chunks, None)
        if chunk is None:
            self.at_eof = True
            return
        if self.scan is not None:
            self.scan.feed(chunk, self.pending.end)
        self.pending.add(chunk)
        self._separate()

    def _wants_more(self) -> bool:
        if self.pending.size < PIECE_SIZE:
            return self.scan is None or self.scan.end is None
        scan = self.scan
        if scan is None or scan.end is not None or scan.boundary > self.pending.start:
            return False
        return self.pending.size <= MAX_EVENT_BYTES

    def _separate(self) -> None:
        """Drop blanks before the next element and, after a cut, the comma that precedes it."""
        byte = self.pending.first_content()
        if self.separated or byte is None or byte == CLOSE_ARRAY:
            return
        if byte != COMMA:
            at = self.pending.start
            raise TraceError(self.source, f"not valid JSON near byte {at}: expected ',' between events")
        self.pending.drop(self.pending.start + 1)
        self.separated = True
        self.pending.first_content()

    def _cut(self) -> EventColumns | None:
        """The events of one piece of about PIECE_SIZE bytes (none when the scan only started)."""
        if self.scan is None:
            events = self._try_likely_boundary()
            if events is None:
                self._start_scan()
            return events
        if self.scan.boundary <= self.pending.start:
            self._probe(self.pending.end)
            limit = MAX_EVENT_BYTES >> 20
            problem = f"no end of an event within {limit} MB after byte {self.pending.start}; too large, refused"
            raise TraceError(self.source, problem)
        return self._decode_to(self.scan.boundary)

    def _try_likely_boundary(self) -> EventColumns | None:
        """The events up to the last `}` followed by a comma near the end, if the decoder accepts the cut."""
        window, at = self.pending.tail(GUESS_WINDOW)
        found = _LIKELY_END.search(window[::-1])
        if found is None:
            return None
        try:
            return self._decode_to(at + len(window) - found.end() + 1)
        except _BadCut:
            return None

    def _start_scan(self) -> None:
        self.scan = _ArrayScan()
        at = self.pending.start
        for block in self.pending.blocks:
            self.scan.feed(block, at)
            at += len(block)

    def _decode_to(self, upto: int) -> EventColumns:
        """Decode the elements before stream position `upto` and drop their bytes."""
        data = self.pending.join(upto, b"[", b"]")
        events = self.decoder.decode(data, self.pending.start, self.index)
        self.index += events.events
        self.pending.drop(upto)
        self.separated = False
        self._separate()
        return events

    def _probe(self, upto: int) -> None:
        """Raise the first error in the file before `upto`, if there is one; a truncated end is not one."""
        try:
            _decode_raw_events(self.source, self.pending.join(upto, b"[", b"]"), self.pending.start, self.index)
        except _BadCut:
            pass

    def _finish(self) -> Iterator[EventColumns]:
        """The last events and the keys after the array, which must be followed by the end of the object."""
        if self.scan is None:
            last = self._try_likely_end()
            if last is not None:
                yield from last
                return
            self._start_scan()
        assert self.scan is not None
        end = self.scan.end
        if end is None:
            self._probe(self.pending.end)
            raise TraceError(self.source, "truncated: the file ends before the traceEvents list is closed")
        if self.scan.end_byte != CLOSE_ARRAY:
            self._probe(end)
            raise TraceError(self.source, f"not valid JSON: invalid character (byte {end})")
        data = self.pending.join(end, b"[", b"]")
        events = self.decoder.decode(data, self.pending.start, self.index)
        self.pending.drop(end + 1)
        self._take_tail_keys(_tail_keys(self.source, self._rest(), end + 1))
        yield events

    def _try_likely_end(self) -> list[EventColumns] | None:
        """At the end of the file: the last events if the last `]` near it closes the array; None if not.

        The decoder accepts the events before that `]` only if it is the array's own, as for any cut.
        """
        window, at = self.pending.tail(GUESS_WINDOW)
        close = window.rfind(b"]")
        if close < 0:
            return None
        tail = _try_tail_keys(window[close + 1 :])
        if tail is None:
            return None
        try:
            events = self.decoder.decode(self.pending.join(at + close, b"[", b"]"), self.pending.start, self.index)
        except _BadCut:
            return None
        self._take_tail_keys(tail)
        return [events]

    def _take_tail_keys(self, tail: dict[str, Any]) -> None:
        if "traceEvents" in tail:
            raise TraceError(self.source, "two traceEvents keys; which one is meant is unclear")
        self.stream.top_level.update((k, v) for k, v in tail.items() if k not in self.stream.top_level)

    def _rest(self) -> bytes:
        """Everything after the array; a blank chunk counts as one blank, so blank padding costs no memory."""
        parts = [bytes(block) for block in self.pending.blocks]
        for chunk in self.chunks:
            parts.append(chunk if _first_content(chunk) < len(chunk) else b" ")
        return b"".join(parts)


_LIKELY_END = re.compile(rb",[ \t\r\n]*\}")
"""A `}` followed by a comma, searched in reversed bytes: the last one of a window."""


def _try_tail_keys(tail: bytes) -> dict[str, Any] | None:
    """The keys after a likely end of the array, or None when they do not decode."""
    try:
        value = _any_decoder.decode(_TAIL_PREFIX + tail)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    value.pop("_", None)
    return value


def _tail_keys(source: str, tail: bytes, at: int) -> dict[str, Any]:
    """The keys after the array (`tail` starts at stream position `at`); a message says what is wrong."""
    data = _TAIL_PREFIX + tail
    try:
        value = _any_decoder.decode(data)
    except msgspec.DecodeError as exc:
        if "truncated" in str(exc):
            raise TraceError(
                source, "truncated: the file ends after the traceEvents list, before the closing }"
            ) from None
        problem = _json_problem(exc, data, at - len(_TAIL_PREFIX))
        raise TraceError(source, f"after the traceEvents list: {problem}") from None
    except (UnicodeDecodeError, RecursionError):
        raise TraceError(source, "after the traceEvents list: not UTF-8 text or nested too deeply") from None
    value.pop("_", None)
    return value


def _decode_events(source: str, data: bytes, offset: int, index: int) -> list[Event]:
    """The events of `data`, one piece in brackets whose body starts at stream position `offset`.

    One decode when every args is an object or absent (real traces); otherwise, or when the piece
    is not valid, the piece is decoded again with args kept raw, which gives the same events (args
    that are not objects have no ids) or says what is wrong. Raises _BadCut when decoding fails only
    at the piece's end.
    """
    try:
        return _piece_decoder.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        pass
    raw = _decode_raw_events(source, data, offset, index)
    args = decode_args([e.args for e in raw])
    return [Event(e.cat, e.name, e.ts, e.dur, e.pid, e.tid, a) for e, a in zip(raw, args)]


def _decode_raw_events(source: str, data: bytes, offset: int, index: int) -> list[_RawEvent]:
    try:
        return _raw_decoder.decode(data)
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
