"""Reading and checking the TOML rule files (fusion/rules.toml, fusion/op_rules.toml, a user's FUSION_RULES).

Every problem raises `ConfigError` naming the file and the entry, so a bad user file is one clear line.
Patterns are Python regexes over lower-cased text, restricted so that matching stays linear.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusion.errors import ConfigError

_ESCAPE = re.compile(r"\\.")
_GROUP_NAME = re.compile(r"\(\?P<\w*>")
_CHAR_CLASS = re.compile(r"\[\^?\]?[^\]]*\]")
_QUANTIFIED_GROUP = re.compile(r"\)[*+{]")
_UNBOUNDED = re.compile(r"[*+]|\{\d*,\}")
_BACKREF = re.compile(r"\\[1-9]|\(\?P=")
_META = frozenset("\\.^$*+?{}[]()|")


def read_toml(path: Path, tables: Collection[str]) -> dict[str, Any]:
    """The file's top-level mapping; only the keys in `tables` are allowed."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read rules file: {exc}") from exc
    unknown = set(data) - set(tables)
    if unknown:
        raise ConfigError(f"{path}: unknown top-level keys {sorted(unknown)}; expected {sorted(tables)}")
    return data


def entries(path: Path, data: dict[str, Any], table: str) -> list[dict[str, Any]]:
    """The [[table]] entries of a file, each checked to be a table."""
    items = data.get(table, [])
    if not isinstance(items, list):
        raise ConfigError(f"{path}: '{table}' must be an array of tables ([[{table}]])")
    for number, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise ConfigError(f"{path}: {table} #{number}: must be a table")
    return items


@dataclass(frozen=True)
class Entry:
    """One [[table]] entry being checked; `label` names the file and the entry in messages."""

    label: str
    data: dict[str, Any]

    @classmethod
    def of(cls, path: Path, table: str, number: int, data: dict[str, Any], allowed: Collection[str]) -> Entry:
        entry = cls(f"{path}: {table} {data.get('id', f'#{number}')!r}", data)
        unknown = set(data) - set(allowed)
        if unknown:
            entry.fail(f"unknown keys {sorted(unknown)}; allowed: {sorted(allowed)}")
        if not isinstance(data.get("note", ""), str):
            entry.fail("'note' must be a string")
        return entry

    def fail(self, problem: str) -> None:
        raise ConfigError(f"{self.label}: {problem}")

    def text(self, key: str, default: str | None = None) -> str:
        """A non-empty string value (or `default` when the key is absent and a default is given)."""
        value = self.data.get(key, default)
        if not isinstance(value, str) or (not value and default is None):
            self.fail(f"'{key}' must be a non-empty string")
        return value

    def choice(self, key: str, allowed: Collection[str], default: str | None = None) -> str:
        value = self.text(key, default)
        if value != default and value not in allowed:
            self.fail(f"{key} {value!r} is not one of {tuple(allowed)}")
        return value

    def flag(self, key: str) -> bool:
        """A boolean value, False when the key is absent."""
        value = self.data.get(key, False)
        if not isinstance(value, bool):
            self.fail(f"'{key}' must be true or false")
        return value

    def words(self, key: str, allowed: Collection[str] | None = None) -> tuple[str, ...]:
        """A list of non-empty strings (empty when absent), each in `allowed` when given."""
        value = self.data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            self.fail(f"'{key}' must be a list of non-empty strings")
        for word in value:
            if allowed is not None and word not in allowed:
                self.fail(f"{key}: {word!r} is not one of {tuple(allowed)}")
        return tuple(value)


def reject_duplicate_ids(path: Path, ids: list[str], taken: Collection[str] = ()) -> None:
    """Ids are unique within a file, and a user file may not reuse a built-in id."""
    seen: set[str] = set()
    for rule_id in ids:
        if rule_id in seen:
            raise ConfigError(f"{path}: rule {rule_id!r}: duplicate id")
        if rule_id in taken:
            raise ConfigError(f"{path}: rule {rule_id!r}: id is already used by a built-in rule")
        seen.add(rule_id)


@dataclass(frozen=True)
class Matcher:
    """A compiled pattern split into top-level alternatives.

    Plain-text alternatives are tested with `in` and "^text" ones with startswith, both much faster
    than re; every other alternative is its own regex, so re can use its literal-prefix search on each.
    """

    literals: tuple[str, ...]
    prefixes: tuple[str, ...]
    regexes: tuple[re.Pattern[str], ...]

    def matches(self, text: str) -> bool:
        for literal in self.literals:
            if literal in text:
                return True
        if text.startswith(self.prefixes):
            return True
        for regex in self.regexes:
            if regex.search(text):
                return True
        return False


def compile_pattern(entry: Entry, key: str = "pattern") -> Matcher:
    """Check a rule pattern and split it into literals, "^literal" prefixes and regexes."""
    pattern = entry.text(key)
    check_pattern(entry, pattern)
    if pattern.startswith("(?"):
        return Matcher((), (), (re.compile(pattern),))
    literals, prefixes, regexes = [], [], []
    for branch in _alternatives(pattern):
        if not _META.intersection(branch):
            literals.append(branch)
        elif branch.startswith("^") and not _META.intersection(branch[1:]):
            prefixes.append(branch[1:])
        else:
            regexes.append(re.compile(branch))
    return Matcher(tuple(literals), tuple(prefixes), tuple(regexes))


def check_pattern(entry: Entry, pattern: str) -> None:
    """Refuse invalid patterns, upper case, and constructs that can backtrack badly.

    Repeated groups ("(ab)+") backtrack exponentially and stacked unbounded
    repeats ("\\w+\\w+x") polynomially, so only bounded repeats are allowed.
    """
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        entry.fail(f"pattern {pattern!r} is not a valid regex: {exc}")
    if _BACKREF.search(pattern):
        entry.fail(f"pattern {pattern!r} uses a back-reference")
    plain = _GROUP_NAME.sub("(", _CHAR_CLASS.sub("x", _ESCAPE.sub("x", pattern)))
    if _QUANTIFIED_GROUP.search(plain):
        entry.fail(f"pattern {pattern!r} repeats a group (e.g. '(ab)+'); use a flat pattern")
    if _UNBOUNDED.search(plain):
        entry.fail(f"pattern {pattern!r} has an unbounded repeat (*, +, {{n,}}); use e.g. .{{0,200}}")
    if any(ch.isupper() for ch in plain):
        entry.fail(f"pattern {pattern!r} has upper-case letters; names are lower-cased before matching")


def _alternatives(pattern: str) -> list[str]:
    """Split a valid pattern at its top-level "|" (outside groups and character classes)."""
    branches: list[str] = []
    depth = start = i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 1
        elif ch == "[":
            i = _class_end(pattern, i)
        elif ch in "()":
            depth += 1 if ch == "(" else -1
        elif ch == "|" and depth == 0:
            branches.append(pattern[start:i])
            start = i + 1
        i += 1
    branches.append(pattern[start:])
    return branches


def _class_end(pattern: str, i: int) -> int:
    """Index of the "]" that closes the character class opening at i."""
    j = i + 1
    if pattern.startswith("^", j):
        j += 1
    if pattern.startswith("]", j):
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j] == "\\" else 1
    return j
