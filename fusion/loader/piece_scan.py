"""A compiled scan of one piece of the traceEvents array: the fields of the kept events as columns.

Decoding a piece with msgspec builds a Python object per event and per field, and then Python walks
those objects again to make columns; many events (flows, metadata) are dropped after all that.
This scan reads the bytes once in compiled code (numba) and writes the fields of the events in kept
categories straight into arrays; names are deduplicated as byte spans, so Python only decodes each
distinct name once per piece. Its machine code comes from numba's disk cache (compiled once, about 18 s,
the first time a machine loads a large trace, under fusion.compiled's lock); where numba cannot cache, it is
not used (`USABLE`).

It is strict on purpose: it accepts a piece only when the piece is valid JSON that msgspec would decode
to the same values. Anything outside that envelope (a `\\u` escape, a byte that is not ASCII, an escaped
key or category, a repeated field, a pid that is not an integer, a number too long to convert exactly
here, deep nesting, any invalid JSON) makes it decline, and events.py decodes the piece with msgspec,
which also names any problem. The tests check both paths give the same columns.
"""

from __future__ import annotations

import sys

import msgspec
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic

from fusion.compiled import cacheable, compile_here, compiled
from fusion.compiled import compile_pending as compiled_pending
from fusion.loader.event_columns import EventColumns, distinct_pairs
from fusion.loader.op_args import KERNEL_KEY, SHAPE_KEYS, region_values

# columns of the integer output, one row per kept event
(
    _BUCKET,
    _NAME,
    _PID,
    _PID_KIND,
    _TID,
    _TID_KIND,
    _CORRELATION,
    _STREAM,
    _DEVICE,
    _HAS_ARGS,
    _SLOW_TS,
    _SLOW_TS_END,
    _SLOW_DUR,
    _SLOW_DUR_END,
    _REGION_START,
    _REGION_END,
    _ARGS,
) = range(17)
"""_SLOW_*: where a ts or dur that the scan could not convert exactly is (0 when converted). _REGION_*: the span of
the args from the first _VALUE_KEYS key to the end of the last one's value (0 where none: no region starts at
a piece's first byte, which is `[`, so the row's reset clears it); _ARGS: 1 + the code of its values (0 for
none)."""
_INT_COLUMNS = 17
_TS, _DUR = range(2)
_NO_INT, _INT, _OTHER = range(3)
"""What a pid or tid holds: nothing (absent or null), an int64, or anything else (declined)."""
_MISSING = -1
_MAX_DEPTH = 64
"""Deeper values are left to msgspec (trace events nest a few levels)."""
_FIRST_ROWS = 1 << 12
_FIRST_SLOTS = 1 << 12
_EXACT_MANTISSA = 1 << 53
_EXACT_POWERS = np.array([10.0**k for k in range(23)])
"""A decimal with a mantissa up to 2**53 and a power of ten up to 22 converts exactly in one float operation."""
_POWERS_OF_TEN = np.array([10**k for k in range(9)], dtype=np.uint64)
_INT64_MAX = (1 << 63) - 1
_LARGEST_EXPONENT = 300
"""A float literal whose digits and exponent could reach 10**300 is left to msgspec (it refuses one beyond
float64 in the fields it decodes, and the scan does not track which those are), wherever it is."""

_SPACE, _TAB, _LF, _CR = 32, 9, 10, 13
_QUOTE, _BACKSLASH, _COLON, _COMMA, _MINUS, _PLUS, _DOT = 34, 92, 58, 44, 45, 43, 46
_OPEN_OBJECT, _CLOSE_OBJECT, _OPEN_ARRAY, _CLOSE_ARRAY = 123, 125, 91, 93
_ZERO, _NINE = 48, 57
_FNV_OFFSET, _FNV_PRIME = np.uint64(14695981039346656037), np.uint64(1099511628211)
_MIX1, _MIX2 = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53)
_SIMPLE_ESCAPES = np.zeros(256, dtype=np.bool_)
_SIMPLE_ESCAPES[list(b'"\\/bfnrt')] = True
_KEYS = (b"cat", b"name", b"ts", b"dur", b"pid", b"tid", b"args")
_ARGS_KEYS = (b"correlation", b"stream", b"device")
_VALUE_KEYS = tuple(key.encode() for key in (*SHAPE_KEYS, KERNEL_KEY))
"""The args whose values op_args keeps. Their region (they come together in a cpu_op's args) is interned per
distinct bytes, for the events of the buckets that keep values (value_masks)."""
_CAT, _NAME_KEY, _TS_KEY, _DUR_KEY, _PID_KEY, _TID_KEY, _ARGS_KEY = range(len(_KEYS))


def _key_table(keys: tuple[bytes, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The keys' bytes joined, and where each starts (one more entry: the end)."""
    starts = np.cumsum([0, *(len(k) for k in keys)]).astype(np.int64)
    return np.frombuffer(b"".join(keys), dtype=np.uint8).copy(), starts


_SKIPPED_KEYS = (
    b"ph",
    b"id",
    b"bp",
    b"queued",
    b"context",
    b"grid",
    b"block",
    b"kind",
    b"cbid",
    b"External id",
    b"Ev Idx",
    b"Python id",
    b"shared memory",
    b"blocks per SM",
    b"warps per SM",
    b"Trace name",
    b"Trace iteration",
    b"Call stack",
    b"Sequence number",
    b"Fwd thread id",
)
"""Common keys of Kineto traces whose values are not kept: recognised only to save reading them a byte at a time."""
_KEY_HASH = np.uint64(0x9E3779B97F4A7C15)
_KEY_HASH_BITS = 12


def _key_lookup(keys: tuple[bytes, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A table to recognise keys (2 to 15 bytes): open addressing on a hash of their first three bytes, a key
    compared as two masked words. Each key is compared with its closing quote, so a match is the whole string
    (plain ASCII, no escape): (the key in each slot or -1, the quoted keys as two words each, their masks,
    their sizes)."""
    by_hash = np.full(1 << _KEY_HASH_BITS, -1, dtype=np.int8)
    patterns = np.zeros((len(keys), 2), dtype=np.uint64)
    masks = np.zeros((len(keys), 2), dtype=np.uint64)
    for k, key in enumerate(keys):
        quoted = key + b'"'
        assert 3 <= len(quoted) <= 16, key
        slot = _key_slot(int.from_bytes(quoted[:3], "little"))
        while by_hash[slot] >= 0:  # keys that begin alike (Input Dims, Input type): the next free slot
            slot = (slot + 1) % len(by_hash)
        by_hash[slot] = k
        patterns[k] = np.frombuffer(quoted.ljust(16, b"\0"), dtype=np.uint64)
        masks[k] = np.frombuffer((b"\xff" * len(quoted)).ljust(16, b"\0"), dtype=np.uint64)
    return by_hash, patterns, masks, np.array([len(k) + 1 for k in keys], dtype=np.int64)


def _key_slot(first: int) -> int:
    """Where the lookup keeps a key whose first three bytes (little-endian) are `first`; as _key computes it."""
    return (first * int(_KEY_HASH)) % (1 << 64) >> (64 - _KEY_HASH_BITS)


_KEY_SLOTS, _KEY_PATTERNS, _KEY_MASKS, _KEY_SIZES = _key_lookup(_KEYS + _ARGS_KEYS + _VALUE_KEYS + _SKIPPED_KEYS)
_FIRST_ARGS_KEY = len(_KEYS)
_FIRST_VALUE_ARG = len(_ARGS_KEYS)
_FIRST_SKIPPED_KEY = len(_KEYS) + len(_ARGS_KEYS) + len(_VALUE_KEYS)
"""One table for the keys of both levels and the skipped ones: an args key's index there is _FIRST_ARGS_KEY
plus its index in _ARGS_KEYS + _VALUE_KEYS."""


@compiled(allocates=False)
def _blank(data, i, n):
    while i < n:
        c = data[i]
        if c != _SPACE and c != _LF and c != _CR and c != _TAB:
            return i
        i += 1
    return i


@compiled(allocates=False)
def _string_end(data, i, n):
    """From the opening quote at i: the position after the closing quote, and whether it holds an escape;
    -1 where the string is not one the scan accepts."""
    i += 1
    escaped = False
    while i < n:
        c = data[i]
        if c == _QUOTE:
            return i + 1, escaped
        if c == _BACKSLASH:
            if i + 1 >= n or not _SIMPLE_ESCAPES[data[i + 1]]:
                return -1, escaped  # \u (surrogates) and invalid escapes: msgspec decides
            escaped = True
            i += 2
        elif c < 32 or c > 127:
            return -1, escaped
        else:
            i += 1
    return -1, escaped


_ONES = np.uint64(0x0101010101010101)
_HIGHS = np.uint64(0x8080808080808080)
_QUOTES = np.uint64(0x2222222222222222)
_BACKSLASHES = np.uint64(0x5C5C5C5C5C5C5C5C)
_SPACES = np.uint64(0x2020202020202020)


@compiled(allocates=False, inline=True)
def _special(w):
    """Whether any of the 8 bytes of w is a quote, a backslash, a control byte or not ASCII (SWAR: a byte of
    x - 0x01.. & ~x has its high bit set where x's byte is zero, or above such a byte; only whether any is
    set matters)."""
    q = w ^ _QUOTES
    b = w ^ _BACKSLASHES
    zero = ((q - _ONES) & ~q) | ((b - _ONES) & ~b) | ((w - _SPACES) & ~w) | w
    return (zero & _HIGHS) != np.uint64(0)


@compiled(allocates=False, inline=True)
def _long_string_end(data, i, n):
    """_string_end for a string that is usually long (a name): 8 plain bytes at a time first. (Most strings
    are short keys, for which this costs more than it saves.)"""
    j = i + 1
    while j + 8 <= n and not _special(_word(data, j)):
        j += 8
    return _string_end(data, j - 1, n)


@compiled(allocates=False, inline=True)
def _digits(data, i, n, value, count):
    """Position after a run of digits starting at i, with `value` and `count` carried on over them (the value
    only while the count is under 19, so that it fits). Up to 8 digits at a time while they all fit."""
    while i + 8 <= n:
        word = _word(data, i)
        size = _digit_run(word)
        if count + size > 19:
            break
        if size > 0:
            value = value * _POWERS_OF_TEN[size] + _digits_value(word, size)
            count += size
            i += size
        if size < 8:
            return i, value, count
    while i < n:
        d = np.uint64(data[i]) - np.uint64(_ZERO)
        if d > np.uint64(9):
            break
        if count < 19:
            value = value * np.uint64(10) + d
        count += 1
        i += 1
    return i, value, count


@compiled(allocates=False, inline=True)
def _digit_run(word):
    """How many of the bytes of `word` are digits before the first that is not (0 to 8). A byte is a digit
    when its high nibble is 3 both as it is and plus 6; a carry out of a byte >= 0xFA can only spoil the
    bytes after that one, which is not a digit."""
    high = np.uint64(0xF0F0F0F0F0F0F0F0)
    threes = np.uint64(0x3030303030303030)
    other = ((word & high) ^ threes) | (((word + np.uint64(0x0606060606060606)) & high) ^ threes)
    return np.int64(trailing_zeros(other)) >> 3


@compiled(allocates=False, inline=True)
def _digits_value(word, size):
    """The value of the first `size` (1 to 8) bytes of `word`, all digits: shifted up so that zeros stand
    before them, then pairs, quads and octets of digits combined in three multiplications."""
    word = (word - np.uint64(0x3030303030303030)) << np.uint64(64 - 8 * size)
    word = (word * np.uint64(10) + (word >> np.uint64(8))) & np.uint64(0x00FF00FF00FF00FF)
    word = (word * np.uint64(100) + (word >> np.uint64(16))) & np.uint64(0x0000FFFF0000FFFF)
    return (word * np.uint64(10000) + (word >> np.uint64(32))) & np.uint64(0xFFFFFFFF)


@compiled(allocates=False, inline=True)
def _number(data, i, n):
    """The JSON number at i, read once: (end, negative, mantissa, exponent, significant digits, integer literal).
    The value is mantissa * 10**exponent when digits <= 19. end is -1 where the grammar is not followed, or for
    a float whose integer digits and exponent could reach 10**300 (_LARGEST_EXPONENT)."""
    negative = i < n and data[i] == _MINUS
    if negative:
        i += 1
    if i >= n or not (_ZERO <= data[i] <= _NINE):
        return -1, negative, np.uint64(0), 0, 0, True
    mantissa, digits = np.uint64(0), 0
    if data[i] == _ZERO:  # a leading zero is the whole integer part, and not a significant digit
        i += 1
    else:
        i, mantissa, digits = _digits(data, i, n, mantissa, digits)
    magnitude = digits  # integer digits, then plus the exponent
    exponent = 0
    literal_int = True
    if i < n and data[i] == _DOT:
        start = i + 1
        i, mantissa, digits = _digits(data, start, n, mantissa, digits)
        if i == start:
            return -1, negative, mantissa, 0, 0, True
        exponent = start - i
        literal_int = False
    if i < n and (data[i] == 101 or data[i] == 69):  # e, E
        i += 1
        sign = 1
        if i < n and (data[i] == _PLUS or data[i] == _MINUS):
            sign = -1 if data[i] == _MINUS else 1
            i += 1
        i, power, count = _digits(data, i, n, np.uint64(0), 0)
        if count == 0:
            return -1, negative, mantissa, 0, 0, True
        shift = sign * (np.int64(power) if count < 6 else 99999)
        magnitude += shift
        exponent += shift
        literal_int = False
    if not literal_int and magnitude > _LARGEST_EXPONENT:
        return -1, negative, mantissa, 0, 0, True  # msgspec refuses a float beyond float64 in a field it decodes
    return i, negative, mantissa, exponent, digits, literal_int


@compiled(allocates=False)
def _float(negative, mantissa, exponent, digits, literal_int):
    """The exact float64 of a parsed number, and whether it could be computed here (else Python parses it)."""
    if digits > 19 or mantissa > np.uint64(_EXACT_MANTISSA) or exponent > 22 or exponent < -22:
        return 0.0, False
    value = float(mantissa)
    if exponent >= 0:
        value = value * _EXACT_POWERS[exponent]
    else:
        value = value / _EXACT_POWERS[-exponent]
    if negative and not (literal_int and mantissa == 0):  # the integer -0 is 0, the float -0.0 keeps its sign
        value = -value
    return value, True


@compiled(allocates=False)
def _id(negative, mantissa, digits, literal_int):
    """An id column's value: a non-negative int64, else MISSING (a float, a negative, a huge integer)."""
    if not literal_int or digits > 19 or mantissa > np.uint64(_INT64_MAX):
        return _MISSING
    if negative and mantissa != 0:
        return _MISSING
    return np.int64(mantissa)


@compiled(allocates=False)
def _thread(negative, mantissa, digits, literal_int):
    """(value, kind) of a pid or tid: an int64, or OTHER."""
    if not literal_int or digits > 19:
        return 0, _OTHER
    if negative:
        if mantissa > np.uint64(_INT64_MAX) + np.uint64(1):
            return 0, _OTHER
        return -np.int64(mantissa - np.uint64(1)) - 1, _INT
    if mantissa > np.uint64(_INT64_MAX):
        return 0, _OTHER
    return np.int64(mantissa), _INT


@compiled(allocates=False, inline=True)
def _literal(data, i, n):
    """Position after true, false or null at i; -1 if none is there."""
    c = data[i]
    if c == 116 and i + 4 <= n and data[i + 1] == 114 and data[i + 2] == 117 and data[i + 3] == 101:
        return i + 4
    if (
        c == 102
        and i + 5 <= n
        and data[i + 1] == 97
        and data[i + 2] == 108
        and data[i + 3] == 115
        and data[i + 4] == 101
    ):
        return i + 5
    if c == 110 and i + 4 <= n and data[i + 1] == 117 and data[i + 2] == 108 and data[i + 3] == 108:
        return i + 4
    return -1


@compiled(allocates=False)
def _delimited(data, i, n):
    """A scalar must be followed by a blank, a comma or a closing bracket."""
    if i >= n:
        return False
    c = data[i]
    return c == _SPACE or c == _LF or c == _CR or c == _TAB or c == _COMMA or c == _CLOSE_OBJECT or c == _CLOSE_ARRAY


@compiled(allocates=False, inline=True)
def _scalar_end(data, i, n):
    """Position after the string, number or literal at i; -1 where it is not valid."""
    c = data[i]
    if c == _QUOTE:
        end, _ = _string_end(data, i, n)
        return end
    if c == _MINUS or (_ZERO <= c <= _NINE):
        end = _number(data, i, n)[0]
    else:
        end = _literal(data, i, n)
    if end < 0 or not _delimited(data, end, n):
        return -1
    return end


@compiled(allocates=False)
def _key_end(data, i, n):
    """From the opening quote of a key: the position of its value; -1 where invalid or escaped."""
    if i >= n or data[i] != _QUOTE:
        return -1
    end, escaped = _string_end(data, i, n)
    if end < 0 or escaped:
        return -1
    return _colon(data, end, n)


@compiled(allocates=False)
def _colon(data, i, n):
    """The position of the value after the colon that follows a key ending at i; -1 where there is none."""
    i = _blank(data, i, n)
    if i >= n or data[i] != _COLON:
        return -1
    return _blank(data, i + 1, n)


@compiled(allocates=False, inline=True)
def _key(data, i, n):
    """From the opening quote of a key: (position of its value, index of the key in _KEYS + _ARGS_KEYS + _VALUE_KEYS or -1
    for any other key); the position is -1 where invalid or escaped. A key in the lookup costs two loads and
    a compare, where reading it costs a branch per byte."""
    if i >= n or data[i] != _QUOTE:
        return -1, -1
    first = _bytes_word(data, i + 1, min(i + 9, n), n)
    second = _bytes_word(data, i + 9, min(i + 17, n), n)
    slot = ((first & np.uint64(0xFFFFFF)) * _KEY_HASH) >> np.uint64(64 - _KEY_HASH_BITS)
    while _KEY_SLOTS[slot] >= 0:
        k = _KEY_SLOTS[slot]
        if (first & _KEY_MASKS[k, 0]) == _KEY_PATTERNS[k, 0] and (second & _KEY_MASKS[k, 1]) == _KEY_PATTERNS[k, 1]:
            return _colon(data, i + 1 + _KEY_SIZES[k], n), k if k < _FIRST_SKIPPED_KEY else -1
        slot = (slot + np.uint64(1)) & np.uint64(len(_KEY_SLOTS) - 1)
    return _key_end(data, i, n), -1


@compiled(allocates=False, inline=True)
def _bytes_word(data, p, end, n):
    """The bytes from p to end (at most 8 of them) as one word, zeros above them."""
    size = end - p
    if p + 8 <= n:
        word = _word(data, p)
        return word if size >= 8 else word & ((np.uint64(1) << np.uint64(8 * size)) - np.uint64(1))
    word = np.uint64(0)
    for j in range(end - 1, p - 1, -1):
        word = (word << np.uint64(8)) | np.uint64(data[j])
    return word


@compiled(allocates=False, inline=True)
def _skip(data, i, n, stack):
    """Position after the JSON value at i, checked as msgspec checks it; -1 where invalid or too deep.
    A scalar (most skipped values) is read in place, a container by _container_end."""
    if i >= n:
        return -1
    if data[i] == _OPEN_OBJECT or data[i] == _OPEN_ARRAY:
        return _container_end(data, i, n, stack)
    return _scalar_end(data, i, n)


@compiled(allocates=False)
def _container_end(data, i, n, stack):
    """Position after the object or array at i (_skip)."""
    depth = 0
    while True:
        if i >= n:
            return -1
        c = data[i]
        if c == _OPEN_OBJECT or c == _OPEN_ARRAY:
            j = _blank(data, i + 1, n)
            closing = _CLOSE_OBJECT if c == _OPEN_OBJECT else _CLOSE_ARRAY
            if j < n and data[j] == closing:
                i = j + 1
            else:
                if depth == _MAX_DEPTH:
                    return -1
                stack[depth] = c
                depth += 1
                i = _key_end(data, j, n) if c == _OPEN_OBJECT else j
                if i < 0:
                    return -1
                continue
        else:
            i = _scalar_end(data, i, n)
            if i < 0:
                return -1
        while True:  # a value ended: close containers until another value is expected
            if depth == 0:
                return i
            i = _blank(data, i, n)
            if i >= n:
                return -1
            c = data[i]
            top = stack[depth - 1]
            if c == _COMMA:
                i = _blank(data, i + 1, n)
                if top == _OPEN_OBJECT:
                    i = _key_end(data, i, n)
                    if i < 0:
                        return -1
                break
            if (c == _CLOSE_OBJECT and top == _OPEN_OBJECT) or (c == _CLOSE_ARRAY and top == _OPEN_ARRAY):
                depth -= 1
                i += 1
            else:
                return -1


@compiled(allocates=False)
def _which_key(data, start, end, key_bytes, key_starts):
    """Index in the table of the string data[start:end] (without quotes or escapes); -1 for any other."""
    size = end - start
    for k in range(len(key_starts) - 1):
        if key_starts[k + 1] - key_starts[k] != size:
            continue
        same = True
        for j in range(size):
            if data[start + j] != key_bytes[key_starts[k] + j]:
                same = False
                break
        if same:
            return k
    return -1


@intrinsic
def _word(typingctx, data, p):
    """The 8 bytes of `data` (uint8) at p as one word, p + 8 <= len(data): an unaligned load. On a
    little-endian machine (USABLE) the first byte is the lowest; equal words, equal bytes."""

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        address = builder.bitcast(builder.gep(array.data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(address, align=1)

    return types.uint64(data, p), codegen


@compiled(allocates=False, inline=True)
def _name_hash(data, start, end, n):
    """FNV-1a over 8-byte words (a byte at a time made hashing a third of a kernel event's scan), then
    murmur3's finaliser, so that every bit of the state reaches the low bits that pick a slot."""
    value = _FNV_OFFSET ^ np.uint64(end - start)
    p = start
    while p < end:
        value = (value ^ _bytes_word(data, p, min(p + 8, end), n)) * _FNV_PRIME
        p += 8
    value = (value ^ (value >> np.uint64(33))) * _MIX1
    value = (value ^ (value >> np.uint64(33))) * _MIX2
    return value ^ (value >> np.uint64(33))


@compiled(allocates=False, inline=True)
def _same_bytes(data, a, b, size, n):
    """Whether the `size` bytes at a and at b are equal, compared a word at a time."""
    for j in range(0, size, 8):
        end = min(j + 8, size)
        if _bytes_word(data, a + j, a + end, n) != _bytes_word(data, b + j, b + end, n):
            return False
    return True


@compiled
def _grow(array):
    bigger = np.empty((array.shape[0] * 2,) + array.shape[1:], dtype=array.dtype)
    bigger[: array.shape[0]] = array
    return bigger


@compiled
def _scan(data, cat_bytes, cat_starts, cat_buckets, value_masks):
    """The piece `[...]`: (accepted, events, ints, floats, name spans, value regions), one row per kept event.

    A row's name is a code into the spans of distinct names: open addressing on a hash, with the bytes
    compared on a hit, so equal codes mean equal bytes. An event of a bucket with value_masks[bucket] set has its
    value region interned the same way, with the mask: _ARGS is 1 + a code into the distinct (region, mask)."""
    n = len(data)
    stack = np.empty(_MAX_DEPTH, dtype=np.uint8)
    ints = np.empty((_FIRST_ROWS, _INT_COLUMNS), dtype=np.int64)
    floats = np.empty((_FIRST_ROWS, 2), dtype=np.float64)
    spans = np.empty((_FIRST_ROWS, 2), dtype=np.int64)
    slots = np.full(_FIRST_SLOTS, -1, dtype=np.int64)
    regions = np.empty((_FIRST_ROWS, 3), dtype=np.int64)
    region_slots = np.full(_FIRST_SLOTS, -1, dtype=np.int64)
    rows = names = sets = events = 0
    declined = (False, 0, ints[:0], floats[:0], spans[:0], regions[:0])
    i = _blank(data, 0, n)
    if i >= n or data[i] != _OPEN_ARRAY:
        return declined
    i = _blank(data, i + 1, n)
    closed = i < n and data[i] == _CLOSE_ARRAY
    while not closed:
        if i >= n:
            return declined
        if rows == ints.shape[0]:
            ints, floats = _grow(ints), _grow(floats)
        i, bucket, name_start, name_end = _event(
            data, i, n, stack, cat_bytes, cat_starts, cat_buckets, ints[rows], floats[rows]
        )
        if i < 0:
            return declined
        events += 1
        if bucket >= 0:
            ints[rows, _BUCKET] = bucket
            if name_start >= 0:
                if names * 2 >= slots.shape[0]:
                    slots = _rehash(data, spans, names, slots.shape[0] * 2)
                if names == spans.shape[0]:
                    spans = _grow(spans)
                code = _intern(data, name_start, name_end, spans, names, slots)
                if code == names:
                    spans[names, 0], spans[names, 1] = name_start, name_end
                    names += 1
                ints[rows, _NAME] = code
            keep = value_masks[bucket] if bucket < len(value_masks) else 0
            if keep and ints[rows, _REGION_START]:
                if sets * 2 >= region_slots.shape[0]:
                    region_slots = _rehash_regions(data, regions, sets, region_slots.shape[0] * 2)
                if sets == regions.shape[0]:
                    regions = _grow(regions)
                start, end = ints[rows, _REGION_START], ints[rows, _REGION_END]
                code = _intern_region(data, start, end, keep, regions, sets, region_slots)
                if code == sets:
                    regions[sets, 0], regions[sets, 1], regions[sets, 2] = start, end, keep
                    sets += 1
                ints[rows, _ARGS] = code + 1
            rows += 1
        i = _blank(data, i, n)
        if i >= n or (data[i] != _COMMA and data[i] != _CLOSE_ARRAY):
            return declined
        closed = data[i] == _CLOSE_ARRAY
        if not closed:
            i = _blank(data, i + 1, n)
    if _blank(data, i + 1, n) != n:
        return declined
    return True, events, ints[:rows], floats[:rows], spans[:names], regions[:sets]


@compiled(allocates=False)
def _event(data, i, n, stack, cat_bytes, cat_starts, cat_buckets, row, times):
    """The event object at i: its fields into `row` and `times`; (position after it, bucket, name span).

    The position is -1 where the scan declines; the bucket is -1 for a category nobody asked for."""
    if data[i] != _OPEN_OBJECT:
        return -1, -1, -1, -1
    bucket, name_start, name_end = -1, -1, -1
    row[:] = 0
    row[_NAME] = row[_CORRELATION] = row[_STREAM] = row[_DEVICE] = _MISSING
    times[:] = np.nan
    seen = 0
    i = _blank(data, i + 1, n)
    if i < n and data[i] == _CLOSE_OBJECT:
        return i + 1, bucket, name_start, name_end
    while True:
        i, key = _key(data, i, n)
        if i < 0:
            return -1, -1, -1, -1
        if key >= _FIRST_ARGS_KEY:
            key = -1
        if key >= 0:
            if seen & (1 << key):
                return -1, -1, -1, -1  # a repeated field: msgspec keeps the last, the scan leaves it to msgspec
            seen |= 1 << key
        c = data[i]
        number = c == _MINUS or _ZERO <= c <= _NINE
        if key == _CAT and c == _QUOTE:
            end, escaped = _string_end(data, i, n)
            if end < 0 or escaped:
                return -1, -1, -1, -1
            code = _which_key(data, i + 1, end - 1, cat_bytes, cat_starts)
            bucket = cat_buckets[code] if code >= 0 else -1
        elif key == _NAME_KEY and c == _QUOTE:
            end, _ = _long_string_end(data, i, n)
            name_start, name_end = i + 1, end - 1
        elif number:
            end, negative, mantissa, exponent, digits, literal_int = _number(data, i, n)
            if key == _TS_KEY or key == _DUR_KEY:
                value, exact = _float(negative, mantissa, exponent, digits, literal_int)
                column = _TS if key == _TS_KEY else _DUR
                if exact:
                    times[column] = value
                else:  # Python converts it
                    row[_SLOW_TS + 2 * column], row[_SLOW_TS + 2 * column + 1] = i, end
            elif key == _PID_KEY or key == _TID_KEY:
                column = _PID if key == _PID_KEY else _TID
                row[column], row[column + 1] = _thread(negative, mantissa, digits, literal_int)
        elif key == _ARGS_KEY and c == _OPEN_OBJECT:
            end = _args(data, i, n, stack, row)
        else:
            if key == _PID_KEY or key == _TID_KEY:
                row[(_PID if key == _PID_KEY else _TID) + 1] = _NO_INT if c == 110 else _OTHER  # null, or other
            end = _skip(data, i, n, stack)
        if end < 0 or (number and not _delimited(data, end, n)):
            return -1, -1, -1, -1
        i = _blank(data, end, n)
        if i < n and data[i] == _COMMA:
            i = _blank(data, i + 1, n)
        elif i < n and data[i] == _CLOSE_OBJECT:
            break
        else:
            return -1, -1, -1, -1
    if bucket >= 0 and (row[_PID_KIND] == _OTHER or row[_TID_KIND] == _OTHER):
        return -1, -1, -1, -1  # a thread that is not an integer: Python's keys for it are msgspec's to make
    return i + 1, bucket, name_start, name_end


@compiled(allocates=False)
def _args(data, i, n, stack, row):
    """The args object at i: its id fields into `row`; the position after it, -1 where declined."""
    row[_HAS_ARGS] = 1
    i = _blank(data, i + 1, n)
    if i < n and data[i] == _CLOSE_OBJECT:
        return i + 1
    seen = 0
    while True:
        key_at = i
        i, key = _key(data, i, n)
        if i < 0:
            return -1
        key = key - _FIRST_ARGS_KEY if key >= _FIRST_ARGS_KEY else -1
        c = data[i]
        if key >= 0:
            if seen & (1 << key):
                return -1
            seen |= 1 << key
            if key >= _FIRST_VALUE_ARG and not row[_REGION_START]:
                row[_REGION_START] = key_at
        if c == _MINUS or _ZERO <= c <= _NINE:
            end, negative, mantissa, _, digits, literal_int = _number(data, i, n)
            if end < 0 or not _delimited(data, end, n):
                return -1
            if 0 <= key < _FIRST_VALUE_ARG:
                row[_CORRELATION + key] = _id(negative, mantissa, digits, literal_int)
            i = end
        elif c == _OPEN_ARRAY:
            i = _numbers(data, i, n, stack)
            if i < 0:
                return -1
        else:
            i = _skip(data, i, n, stack)
            if i < 0:
                return -1
        if key >= _FIRST_VALUE_ARG:
            row[_REGION_END] = i
        i = _blank(data, i, n)
        if i >= n:
            return -1
        if data[i] == _COMMA:
            i = _blank(data, i + 1, n)
            continue
        if data[i] != _CLOSE_OBJECT:
            return -1
        return i + 1


@compiled(allocates=False, inline=True)
def _numbers(data, i, n, stack):
    """Position after the array at i when it holds numbers only (grid, block); other arrays go to _skip."""
    j = _blank(data, i + 1, n)
    while j < n and (data[j] == _MINUS or _ZERO <= data[j] <= _NINE):
        j = _number(data, j, n)[0]
        if j < 0:
            return -1
        j = _blank(data, j, n)
        if j < n and data[j] == _CLOSE_ARRAY:
            return j + 1
        if j >= n or data[j] != _COMMA:
            return -1
        j = _blank(data, j + 1, n)
    return _container_end(data, i, n, stack)


@compiled(allocates=False)
def _intern_region(data, start, end, keep, regions, count, slots):
    """The code of a (region, mask): an existing one with the same bytes and mask, or `count` (new; its slot is
    taken). A call, not inlined: the scan's loop stays as small for the events that have no values."""
    mask = slots.shape[0] - 1
    slot = np.int64((_name_hash(data, start, end, len(data)) ^ np.uint64(keep)) & np.uint64(mask))
    size = end - start
    while True:
        code = slots[slot]
        if code < 0:
            slots[slot] = count
            return count
        at = regions[code, 0]
        if regions[code, 2] == keep and regions[code, 1] - at == size and _same_bytes(data, at, start, size, len(data)):
            return code
        slot = (slot + 1) & mask


@compiled
def _rehash_regions(data, regions, count, size):
    slots = np.full(size, -1, dtype=np.int64)
    mask = size - 1
    for code in range(count):
        hashed = _name_hash(data, regions[code, 0], regions[code, 1], len(data)) ^ np.uint64(regions[code, 2])
        slot = np.int64(hashed & np.uint64(mask))
        while slots[slot] >= 0:
            slot = (slot + 1) & mask
        slots[slot] = code
    return slots


@compiled(allocates=False, inline=True)
def _intern(data, start, end, spans, names, slots):
    """The code of the name data[start:end]: an existing one with the same bytes, or `names` (new; its slot is taken)."""
    mask = slots.shape[0] - 1
    slot = np.int64(_name_hash(data, start, end, len(data)) & np.uint64(mask))
    size = end - start
    while True:
        code = slots[slot]
        if code < 0:
            slots[slot] = names
            return names
        if spans[code, 1] - spans[code, 0] == size and _same_bytes(data, spans[code, 0], start, size, len(data)):
            return code
        slot = (slot + 1) & mask


@compiled
def _rehash(data, spans, names, size):
    slots = np.full(size, -1, dtype=np.int64)
    mask = size - 1
    for code in range(names):
        slot = np.int64(_name_hash(data, spans[code, 0], spans[code, 1], len(data)) & np.uint64(mask))
        while slots[slot] >= 0:
            slot = (slot + 1) & mask
        slots[slot] = code
    return slots


def category_table(bucket_of: dict[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The scan's form of a category -> bucket mapping: joined bytes, their starts, the buckets."""
    categories = [c for c in bucket_of if c.isascii() and '"' not in c and "\\" not in c]
    joined, starts = _key_table(tuple(c.encode() for c in categories))
    return joined, starts, np.array([bucket_of[c] for c in categories], dtype=np.int8)


def value_mask_table(value_masks: dict[int, int]) -> np.ndarray:
    """The scan's form of bucket -> the op_args values its events keep (op_args.SHAPES_MASK, KERNEL_MASK bits);
    buckets beyond the table keep none."""
    table = np.zeros(max(value_masks, default=-1) + 2, dtype=np.int64)
    for bucket, mask in value_masks.items():
        table[bucket] = mask
    return table


_NO_MASKS = np.zeros(1, dtype=np.int64)


def scan_piece(
    data: bytes, table: tuple[np.ndarray, np.ndarray, np.ndarray], value_masks: np.ndarray | None = None
) -> EventColumns | None:
    """The kept events of a piece (`[` events `]`) as columns; None where the scan declines the piece.
    `value_masks` (value_mask_table): per bucket, the op_args values kept (none without)."""
    masks = value_masks if value_masks is not None else _NO_MASKS
    ok, events, ints, floats, spans, regions = _scan(np.frombuffer(data, dtype=np.uint8), *table, masks)
    if not ok:
        return None
    _convert_slow_numbers(data, ints, floats)
    values = [region_values(data[start:end], mask) for start, end, mask in regions.tolist()]
    args = ints[:, _ARGS].astype(np.int32) - 1
    empty = np.array([not (v.shapes or v.kernel) for v in values] + [True])  # code -1 (none) picks the last
    if empty[:-1].any():  # a region of none of the kept values
        args = np.where(empty[args], -1, args).astype(np.int32)
    names = [_decoded(data[start - 1 : end + 1]) for start, end in spans.tolist()]
    thread, threads = distinct_pairs(
        ints[:, _PID], ints[:, _PID_KIND] == _INT, ints[:, _TID], ints[:, _TID_KIND] == _INT
    )
    return EventColumns(
        bucket=ints[:, _BUCKET].astype(np.int8),
        name=ints[:, _NAME].astype(np.int32),
        names=names,
        ts=floats[:, _TS].copy(),
        dur=floats[:, _DUR].copy(),
        thread=thread,
        threads=threads,
        correlation=ints[:, _CORRELATION].copy(),
        stream=ints[:, _STREAM].copy(),
        device=ints[:, _DEVICE].copy(),
        has_args=ints[:, _HAS_ARGS].astype(bool),
        args=args,
        arg_values=values,
        events=int(events),
    )


def _convert_slow_numbers(data: bytes, ints: np.ndarray, floats: np.ndarray) -> None:
    """Numbers the scan could not convert exactly, converted by Python (correctly rounded, as msgspec does);
    NaN beyond 1e300, as columns.numbers makes them (the scan declined float literals that large)."""
    for column, span in ((_TS, _SLOW_TS), (_DUR, _SLOW_DUR)):
        for row in np.flatnonzero(ints[:, span]).tolist():
            value = float(data[ints[row, span] : ints[row, span + 1]])
            floats[row, column] = value if abs(value) < 1e300 else np.nan


def _decoded(quoted: bytes) -> str:
    """A name from its quoted bytes: plain ASCII as is, escapes decoded by msgspec."""
    if b"\\" in quoted:
        return msgspec.json.decode(quoted)
    return quoted[1:-1].decode("ascii")


USABLE = sys.byteorder == "little" and cacheable(_scan)
"""False where numba cannot cache the scan (compiling it in each process would cost more than it saves),
or on a big-endian machine (_word)."""
COMPILED = (_scan,)
"""What warm() compiles (its helpers compile with it)."""
_WARM_PIECE = b'[{"cat":"kernel","name":"k","ts":1,"dur":1,"pid":1,"tid":1,"args":{"correlation":1}}]'


def ready() -> bool:
    """The scan can run now: its machine code loaded, or compiled here first (announced; about 20 s on a new
    install). False where it is not usable, or while another process compiles it (compiled.compile_lock)."""
    return USABLE and compile_here(COMPILED, warm)


def loaded() -> bool:
    """This process has the scan's machine code (compiled or loaded from numba's cache): scanning costs nothing
    more to start."""
    return USABLE and bool(_scan.signatures)


def warm() -> None:
    """Compile the scan (or load its machine code) by scanning a one-event piece, as a trace's pieces are."""
    scan_piece(_WARM_PIECE, category_table({"kernel": 0}))


def compile_pending() -> bool:
    """The next scan would compile it first (numba's disk cache has no machine code for it yet)."""
    return USABLE and compiled_pending(_scan)
