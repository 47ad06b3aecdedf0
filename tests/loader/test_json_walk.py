"""The JSON walk: kept values and pieces exactly as in the document, skipped parts of any content, bad ends."""

from __future__ import annotations

import orjson
import pytest

from fusion.errors import TraceError
from fusion.loader.json_walk import Action, walk

DOC = {
    "skip": {"s": 'a "quoted" ] } [ { , : string \\ with marks', "n": [[1, 2], {"x": "}]"}]},
    'we\\ird "key"': {"inner": [1, {"a": "b"}]},
    "rows": [{"i": i, "s": "},{" * (i % 3)} for i in range(50)],
    "tail": 1,
}


def plan(path: tuple) -> Action:
    if path == ():
        return Action.ENTER
    if path == ('we\\ird "key"',):
        return Action.WHOLE
    if path == ("rows",):
        return Action.PIECES
    return Action.SKIP


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
@pytest.mark.parametrize("piece_size", [1, 100, 1 << 20])
def test_kept_parts_are_exact_whatever_the_chunking(chunk: int, piece_size: int) -> None:
    data = orjson.dumps(DOC, option=orjson.OPT_INDENT_2)
    got: dict[tuple, list] = {}
    walk(
        "doc.json",
        iter(data[i : i + chunk] for i in range(0, len(data), chunk)),
        plan,
        lambda path, part: got.setdefault(path, []).append(orjson.loads(bytes(part))),
        piece_size,
    )
    assert got[('we\\ird "key"',)] == [DOC['we\\ird "key"']]
    assert [row for piece in got[("rows",)] for row in piece] == DOC["rows"]
    pieces = len(got[("rows",)])
    # cut where a chunk ends inside the array and a piece is full: at most a piece and a chunk are held
    assert pieces > 1 if chunk < 1000 and piece_size < 1000 else pieces >= 1
    assert len(got) == 2


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "the file holds no JSON object or array"),
        (b"42", "not valid JSON: the document is not an object or an array"),
        (b'{"rows": [1, 2', "truncated: the file ends inside rows, before the JSON document closes"),
        (b'{"a": 1} {"b": 2}', "not valid JSON: data after the end of the document (byte 9)"),
        (b'{"rows": {"a": 1}}', "rows is not a list"),
        (b'{"a" 1}', "not valid JSON: expected ':' after a key (byte 1)"),
    ],
)
def test_documents_that_cannot_be_walked_get_one_line(data: bytes, problem: str) -> None:
    with pytest.raises(TraceError) as caught:
        walk("doc.json", iter([data]), plan, lambda path, part: None)
    assert str(caught.value) == f"doc.json: {problem}"
