"""Re-open an analysed pair from the caches alone: the stored JSON export of its comparison.

No trace is parsed, no table is built and pandas is never imported, so the cold command costs the
interpreter and three verified reads (both table entries' headers, the result entry). The result
entry is found by the same key as fusion.cache.results's, from the table entries' fields; anything
missing or not verifying is None, quietly: the caller takes the ordinary path, which reads the
same entries again and says what was wrong with them.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import orjson

from fusion.cache.tables import RESULT_SUFFIX, TableCache, analysis_fingerprint

FORMAT_VERSION = 2
"""Of result entries: bump when their layout changes; code changes are covered by the analysis fingerprint."""
EXPORT_PART = "json"
"""The result entry's part holding report.to_json of the comparison, as bytes."""
Side = tuple[str, str, str]
"""What a comparison depends on per trace: content digest, label, source."""


def result_key_of(sides: tuple[Side, Side], params: dict[str, Any]) -> str | None:
    """The result entry's key; None when a parameter is not plain JSON data (such results are not cached)."""
    try:
        text = orjson.dumps(
            [FORMAT_VERSION, analysis_fingerprint(), [list(s) for s in sides], params], option=orjson.OPT_SORT_KEYS
        )
    except TypeError:
        return None
    return hashlib.sha256(text).hexdigest()


def cached_json(
    path1: str | os.PathLike, path2: str | os.PathLike, params: dict[str, Any]
) -> tuple[str, list[str]] | None:
    """The JSON report and warnings of comparing the two files with `params` ('all' phases), when cached.

    None when either file or the comparison is not in the cache, a side has no kernels, or a phase is
    selected (those need the tables: the ordinary path says what is wrong or computes the view)."""
    if params.get("phase") != "all":
        return None
    cache = TableCache()
    sides = []
    for path in (path1, path2):
        header = cache.header(path)
        if header is None or not _has_kernels(header):
            return None
        fields = header["fields"]
        sides.append((fields["digest"], fields["label"], str(path)))
    key = result_key_of((sides[0], sides[1]), params)
    if key is None:
        return None
    found = cache.read(cache.root / f"{key}{RESULT_SUFFIX}", {"format": FORMAT_VERSION, "key": key}, quiet=True)
    if found is None or EXPORT_PART not in found[1]:
        return None
    text = bytes(found[1][EXPORT_PART]).decode()
    warnings = orjson.loads(text)["warnings"]
    return text, warnings


def _has_kernels(header: dict[str, Any]) -> bool:
    rows = header.get("rows")
    return isinstance(rows, dict) and isinstance(rows.get("kernels"), int) and rows["kernels"] > 0
