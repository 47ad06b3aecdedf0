"""The args of an event that the efficiency and the capture tie-up read, kept as one code per event.

A `cpu_op` records its operands in `Input Dims`, `Input type`, `Input Strides` and `Concrete Inputs`;
a runtime launch inside a graph capture names its kernel in `kernel`. Many events share the same values
(every call of one op on one shape), so an event keeps only a code into the distinct value sets of its
piece, each decoded once: the compiled scan (piece_scan.py) interns the byte spans of the values, msgspec
(events.py) hands their raw bytes here. Both paths end in `ArgValues`, so the loader's columns are the
same whichever decoded a piece.
"""

from __future__ import annotations

from typing import NamedTuple

import msgspec
import numpy as np

from fusion.loader.columns import IdArgs

SHAPE_KEYS = ("Input Dims", "Input type", "Input Strides", "Concrete Inputs")
"""The args of a cpu_op whose values describe its operands, in the order of a shapes text."""
KERNEL_KEY = "kernel"
"""The arg of a runtime launch that names the kernel launched (kept only when asked: graph captures)."""
NO_ARGS = -1
"""The code of an event without any of these args."""
SHAPES_MASK = (1 << len(SHAPE_KEYS)) - 1
"""A value mask's bits of the shapes args (kept for cpu_op events)."""
KERNEL_MASK = 1 << len(SHAPE_KEYS)
"""A value mask's bit of the launched kernel's name (kept for runtime launches when asked: graph captures)."""
ValueMasks = dict[int, int]
"""Per bucket (EventColumns.bucket), which values its events keep: SHAPES_MASK and/or KERNEL_MASK bits."""
_EMPTY = msgspec.Raw()
_decoder = msgspec.json.Decoder()


class EventArgs(IdArgs, gc=False):
    """The id fields of an event's args and, undecoded, the values above (an absent one is the shared empty Raw)."""

    dims: msgspec.Raw = msgspec.field(default=_EMPTY, name=SHAPE_KEYS[0])
    types: msgspec.Raw = msgspec.field(default=_EMPTY, name=SHAPE_KEYS[1])
    strides: msgspec.Raw = msgspec.field(default=_EMPTY, name=SHAPE_KEYS[2])
    concrete: msgspec.Raw = msgspec.field(default=_EMPTY, name=SHAPE_KEYS[3])
    kernel: msgspec.Raw = msgspec.field(default=_EMPTY, name=KERNEL_KEY)


class ArgValues(NamedTuple):
    """One distinct set of values: the shapes text ('' when none of SHAPE_KEYS is recorded) and the
    launched kernel's name ('' when not recorded or not kept)."""

    shapes: str
    kernel: str


def arg_values(parts: tuple[bytes | None, ...]) -> ArgValues:
    """The values of the raw JSON of SHAPE_KEYS then KERNEL_KEY (None or b'' where absent).

    The shapes text is the compact JSON array of the four values (null where absent), so equal values give
    equal texts however the file spaced them."""
    values = [None if not part else _decoder.decode(part) for part in parts]
    shapes = values[: len(SHAPE_KEYS)]
    kernel = values[len(SHAPE_KEYS)] if len(values) > len(SHAPE_KEYS) else None
    text = msgspec.json.encode(shapes).decode() if any(v is not None for v in shapes) else ""
    return ArgValues(text, kernel if isinstance(kernel, str) else "")


def region_values(region: bytes, mask: int) -> ArgValues:
    """The values of a region of args (`"key": value, ...`, as the compiled scan cuts it) that `mask` keeps."""
    found = _decoder.decode(b"{" + region + b"}")
    keys = (*SHAPE_KEYS, KERNEL_KEY)
    parts = [msgspec.json.encode(found[k]) if mask & (1 << i) and k in found else None for i, k in enumerate(keys)]
    return arg_values(tuple(parts))


def arg_codes(
    args: list[EventArgs | None], buckets: np.ndarray, value_masks: ValueMasks
) -> tuple[np.ndarray, list[ArgValues]]:
    """Per event (msgspec's decode), the code of its value set (NO_ARGS for none), and the distinct sets: only
    the values `value_masks` keeps for the event's bucket, so only those events are looked at one by one."""
    codes = np.full(len(args), NO_ARGS, dtype=np.int32)
    code_of: dict[tuple[bytes, ...], int] = {}
    for bucket, mask in value_masks.items():
        for i in np.flatnonzero(buckets == bucket).tolist():
            a = args[i]
            if a is None:
                continue
            fields = (a.dims, a.types, a.strides, a.concrete, a.kernel)
            key = tuple(bytes(f) if mask & (1 << k) else b"" for k, f in enumerate(fields))
            if any(key):
                codes[i] = code_of.setdefault(key, len(code_of))
    return codes, [arg_values(key) for key in code_of]


_args_decoder = msgspec.json.Decoder(EventArgs)
_args_list_decoder = msgspec.json.Decoder(list[EventArgs | None])


def decode_args(raws: list[msgspec.Raw]) -> list[EventArgs | None]:
    """All args of a piece's events in one decode; one by one only when some are not objects."""
    try:
        return _args_list_decoder.decode(b"[" + b",".join(r if len(r) else b"null" for r in raws) + b"]")
    except (msgspec.DecodeError, RecursionError):
        return [_decode_one_args(r) for r in raws]


def _decode_one_args(raw: msgspec.Raw) -> EventArgs | None:
    try:
        return _args_decoder.decode(raw) if len(raw) else None
    except (msgspec.DecodeError, RecursionError):
        return None
