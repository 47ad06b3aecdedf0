"""The structure of a JSON byte stream, in one forward pass: which bytes sit outside strings, and how deep.

The scan follows the JSON grammar as far as cutting needs it: a `"` opens or closes a string unless
an odd run of backslashes precedes it, and outside strings `{[` go one level down and `}]` one up.
It works with numpy on the positions of the few bytes that matter, block by block, carrying its
state (inside a string, after a backslash, depth) from one block to the next, so the work per byte
is bounded whatever the content. It does not validate: the decoder does that.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

QUOTE, BACKSLASH, COMMA, COLON = b'"\\,:'
OPEN_OBJECT, CLOSE_OBJECT, OPEN_ARRAY, CLOSE_ARRAY = b"{}[]"
SCAN_BLOCK = 1 << 20
"""Bytes scanned at a time: bounds the scan's temporary arrays (a few bytes per marked byte)."""


def _table(chars: bytes) -> np.ndarray:
    table = np.zeros(256, dtype=bool)
    table[list(chars)] = True
    return table


ARRAY_MARKS = _table(b'"\\{}[],')
"""What cutting an array needs."""
OBJECT_MARKS = _table(b'"\\{}[],:')
"""What finding a key needs: the colon tells a key from a string value."""
_STEP = np.zeros(256, dtype=np.int64)
_STEP[[OPEN_OBJECT, OPEN_ARRAY]] = 1
_STEP[[CLOSE_OBJECT, CLOSE_ARRAY]] = -1


class Marks(NamedTuple):
    """Structural bytes outside strings and the opening quote of each string, in file order."""

    pos: np.ndarray
    """Position in the stream (int64)."""
    byte: np.ndarray
    """The byte (uint8)."""
    depth: np.ndarray
    """Nesting depth just after the byte, counted from where the scan started (int64)."""


class Scanner:
    """Scan consecutive blocks of one stream; `depth`, `in_string` and `escaped` carry over between them."""

    def __init__(self, marks: np.ndarray = ARRAY_MARKS) -> None:
        self.table = marks
        self.depth = 0
        self.in_string = False
        self.escaped = False

    def marks(self, data: bytes | memoryview, at: int) -> Iterator[Marks]:
        """The marks of `data`, which starts at stream position `at` and follows what was scanned before."""
        view = memoryview(data)
        for start in range(0, len(view), SCAN_BLOCK):
            yield self._block(np.frombuffer(view[start : start + SCAN_BLOCK], dtype=np.uint8), at + start)

    def _block(self, block: np.ndarray, at: int) -> Marks:
        pos = np.flatnonzero(self.table[block])
        byte = block[pos]
        if self.escaped or (byte == BACKSLASH).any():
            pos, byte = self._unescaped(pos, byte, len(block))
        quote = byte == QUOTE
        parity = np.cumsum(quote, dtype=np.int64) & 1 ^ self.in_string
        inside = parity.astype(bool)
        if len(inside):
            self.in_string = bool(inside[-1])
        keep = quote == inside  # an opening quote, or a byte outside any string
        pos, byte = pos[keep], byte[keep]
        depth = np.cumsum(_STEP[byte]) + self.depth
        if len(depth):
            self.depth = int(depth[-1])
        return Marks(pos + at, byte, depth)

    def _unescaped(self, pos: np.ndarray, byte: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Drop the backslashes and every byte escaped by an odd run of them (a run may start in the last block)."""
        slash = byte == BACKSLASH
        index = np.arange(len(pos))
        after_slash = np.zeros(len(pos), dtype=bool)
        after_slash[1:] = slash[:-1] & (np.diff(pos) == 1)
        run_start = np.maximum.accumulate(np.where(slash & ~after_slash, index, 0))
        run = index - run_start + (pos[run_start] == 0) * self.escaped  # backslashes just before each byte
        escaped = after_slash & (run & 1).astype(bool)
        if self.escaped and len(pos) and pos[0] == 0 and not slash[0]:
            escaped[0] = True
        ends_in_run = len(pos) > 0 and bool(slash[-1]) and pos[-1] == size - 1
        self.escaped = ends_in_run and bool((run[-1] + 1) & 1)
        keep = ~(slash | escaped)
        return pos[keep], byte[keep]
