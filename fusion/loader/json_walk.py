"""Walk one JSON document in a byte stream and hand chosen parts on: whole values, or the elements of
large arrays in pieces. Everything else is skipped without being kept.

The grammar-aware scan of scan.py gives the structural bytes and their depth. The walk follows the keys
down the containers a plan tells it to enter (a few per file), and finds the end of a value it skips,
keeps or cuts with one vectorised search over the marks, so Python touches only the containers on the
way and memory holds one piece at a time. The walk does not validate: the decoder of each kept part
does, and a document that ends before its containers close is reported as truncated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum

import msgspec
import numpy as np

from fusion.errors import TraceError
from fusion.loader.scan import (
    CLOSE_ARRAY,
    CLOSE_OBJECT,
    COLON,
    COMMA,
    OBJECT_MARKS,
    OPEN_ARRAY,
    OPEN_OBJECT,
    QUOTE,
    Marks,
    Scanner,
)

PIECE_SIZE = 16 << 20
"""Bytes of array elements handed on at a time."""
MAX_KEPT_BYTES = 256 << 20
"""The largest whole value or single array element kept: bounds the buffer, whatever the input."""
_BOM = b"\xef\xbb\xbf"
_BLANK = b" \t\r\n"

JsonPath = tuple[str | int, ...]
"""Keys of objects and indices of arrays from the top of the document down to a value."""


class Action(Enum):
    ENTER = "enter"
    """Walk into the container: its members are planned one by one."""
    WHOLE = "whole"
    """Hand the value's bytes on once it is complete."""
    PIECES = "pieces"
    """The value is an array: hand its elements on as JSON arrays of about PIECE_SIZE bytes."""
    SKIP = "skip"


Plan = Callable[[JsonPath], Action]
Take = Callable[[JsonPath, bytes | bytearray], None]


def walk(source: str, chunks: Iterator[bytes], plan: Plan, take: Take, piece_size: int | None = None) -> None:
    """Walk the document in `chunks`: `take(path, data)` gets each WHOLE value's bytes and each piece of a
    PIECES array (`[...]`, elements in order); raises TraceError for a document that is not one container
    or ends early."""
    walker = _Walker(source, plan, take, PIECE_SIZE if piece_size is None else piece_size)
    for chunk in chunks:
        walker.feed(chunk)
    walker.finish()


@dataclass
class _Frame:
    path: JsonPath
    depth: int
    """Depth of the marks directly inside this container."""
    is_object: bool
    key: str | None = None
    index: int = 0


@dataclass
class _Value:
    """A value being skipped, kept or cut: it ends at the first mark back at `depth`."""

    action: Action
    path: JsonPath
    start: int
    depth: int
    piece_start: int = 0
    boundary: int = -1
    """Stream position of the last comma between elements seen (PIECES)."""


@dataclass
class _Walker:
    source: str
    plan: Plan
    take: Take
    piece_size: int
    scanner: Scanner = field(default_factory=lambda: Scanner(OBJECT_MARKS))
    buf: bytearray = field(default_factory=bytearray)
    base: int = 0
    """Stream position of buf[0]."""
    read: int = 0
    frames: list[_Frame] = field(default_factory=list)
    value: _Value | None = None
    marks: Marks | None = None
    next_mark: int = 0
    started: bool = False
    done: bool = False

    def feed(self, chunk: bytes) -> None:
        if not self.read and chunk.startswith(_BOM):
            chunk, self.base = chunk[len(_BOM) :], len(_BOM)
            self.read = len(_BOM)
        at = self.read
        self.read += len(chunk)
        self.buf += chunk
        for marks in self.scanner.marks(chunk, at):
            self._add_marks(marks)
            self._run()
        self._drop_consumed()

    def finish(self) -> None:
        if not self.started:
            raise TraceError(self.source, "the file holds no JSON object or array")
        if not self.done:
            where = ".".join(str(p) for p in (self.value.path if self.value else self.frames[-1].path)) or "the top"
            raise TraceError(self.source, f"truncated: the file ends inside {where}, before the JSON document closes")

    def _add_marks(self, marks: Marks) -> None:
        if self.marks is None or self.next_mark >= len(self.marks.pos):
            self.marks, self.next_mark = marks, 0
            return
        rest = Marks(*(column[self.next_mark :] for column in self.marks))
        self.marks = Marks(*(np.concatenate(pair) for pair in zip(rest, marks)))
        self.next_mark = 0

    def _run(self) -> None:
        """Consume marks while a decision can be made from the marks at hand."""
        assert self.marks is not None
        while self.next_mark < len(self.marks.pos):
            if self.done:
                at = int(self.marks.pos[self.next_mark])
                raise TraceError(self.source, f"not valid JSON: data after the end of the document (byte {at})")
            step = self._in_value() if self.value is not None else self._in_frame()
            if not step:
                return

    def _in_frame(self) -> bool:
        pos, byte, depth = self.marks  # type: ignore[misc]
        i = self.next_mark
        mark = int(byte[i])
        if not self.frames:
            return self._open_root(mark, int(pos[i]))
        frame = self.frames[-1]
        if mark == QUOTE:
            if frame.is_object and frame.key is None:
                if i + 1 >= len(pos):
                    return False
                if byte[i + 1] != COLON:
                    raise TraceError(self.source, f"not valid JSON: expected ':' after a key (byte {int(pos[i])})")
                frame.key = self._key(int(pos[i]), int(pos[i + 1]))
                self.next_mark = i + 2
                return True
        elif mark == COMMA:
            frame.key = None
            frame.index += 1
        elif mark in (OPEN_OBJECT, OPEN_ARRAY):
            self._open_child(frame, mark, int(pos[i]))
        elif mark in (CLOSE_OBJECT, CLOSE_ARRAY):
            self.frames.pop()
            self.done = not self.frames
        self.next_mark = i + 1
        return True

    def _open_root(self, mark: int, at: int) -> bool:
        if mark not in (OPEN_OBJECT, OPEN_ARRAY) or bytes(self.buf[: at - self.base]).strip(_BLANK):
            raise TraceError(self.source, "not valid JSON: the document is not an object or an array")
        self.started = True
        self.frames.append(_Frame((), 1, mark == OPEN_OBJECT))
        self.next_mark += 1
        return True

    def _open_child(self, frame: _Frame, mark: int, at: int) -> None:
        path = (*frame.path, frame.key if frame.is_object and frame.key is not None else frame.index)
        action = self.plan(path)
        if action is Action.ENTER:
            self.frames.append(_Frame(path, frame.depth + 1, mark == OPEN_OBJECT))
            return
        if action is Action.PIECES and mark != OPEN_ARRAY:
            raise TraceError(self.source, f"{'.'.join(map(str, path))} is not a list")
        self.value = _Value(action, path, at, frame.depth, piece_start=at + 1)

    def _key(self, quote: int, colon: int) -> str:
        text = bytes(self.buf[quote - self.base : colon - self.base]).rstrip(_BLANK)
        try:
            key = msgspec.json.decode(text)
        except (msgspec.DecodeError, UnicodeDecodeError):
            raise TraceError(self.source, f"not valid JSON: a key that cannot be read (byte {quote})") from None
        if not isinstance(key, str):
            raise TraceError(self.source, f"not valid JSON: a key that is not a string (byte {quote})")
        return key

    def _in_value(self) -> bool:
        """Find the end of the current value in the marks at hand; cut pieces on the way."""
        value = self.value
        assert value is not None and self.marks is not None
        pos, byte, depth = (column[self.next_mark :] for column in self.marks)
        ends = np.flatnonzero(depth <= value.depth)
        end = int(ends[0]) if len(ends) else len(pos)
        if value.action is Action.PIECES:
            commas = np.flatnonzero((byte[:end] == COMMA) & (depth[:end] == value.depth + 1))
            if len(commas):
                value.boundary = int(pos[commas[-1]])
            if end == len(pos) and value.boundary - value.piece_start >= self.piece_size:
                self._hand_piece(value, value.boundary)
                value.piece_start = value.boundary + 1
        if end == len(pos):
            self.next_mark += end
            self._check_kept(value)
            return False
        close = int(pos[end])
        if value.action is Action.PIECES:
            self._hand_piece(value, close)
        elif value.action is Action.WHOLE:
            self.take(value.path, bytes(self.buf[value.start - self.base : close + 1 - self.base]))
        self.value = None
        self.next_mark += end + 1
        return True

    def _hand_piece(self, value: _Value, upto: int) -> None:
        """The elements from piece_start to `upto` as one JSON array, copied once."""
        piece = bytearray(b"[")
        piece += self.buf[value.piece_start - self.base : upto - self.base]
        if piece.strip(_BLANK) != b"[":
            piece += b"]"
            self.take(value.path, piece)

    def _check_kept(self, value: _Value) -> None:
        kept = self.read - (value.piece_start if value.action is Action.PIECES else value.start)
        if value.action is not Action.SKIP and kept > MAX_KEPT_BYTES + self.piece_size:
            what = "an element of" if value.action is Action.PIECES else "the value"
            where = ".".join(map(str, value.path))
            raise TraceError(self.source, f"{what} {where} is larger than {MAX_KEPT_BYTES >> 20} MB; refused")

    def _drop_consumed(self) -> None:
        """Forget the bytes no later step needs: before the kept value, or before the next mark."""
        if self.value is not None and self.value.action is Action.WHOLE:
            keep = self.value.start
        elif self.value is not None and self.value.action is Action.PIECES:
            keep = self.value.piece_start
        elif self.marks is not None and self.next_mark < len(self.marks.pos):
            keep = int(self.marks.pos[self.next_mark])
        else:
            keep = self.read
        if not self.started and bytes(self.buf).strip(_BLANK):
            raise TraceError(self.source, "not valid JSON: the document is not an object or an array")
        if keep > self.base:
            del self.buf[: keep - self.base]
            self.base = keep
