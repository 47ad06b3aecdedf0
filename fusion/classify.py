"""Map GPU kernel names to vendor-neutral operation types.

The rules are data (fusion/rules.toml, plus an optional user file named by the
FUSION_RULES environment variable); this module only loads, validates and
applies them: for each name the first matching rule wins.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd

KERNEL_TYPES: tuple[str, ...] = (
    "GEMM",
    "MoE_GEMM",
    "Attention",
    "KV_Cache",
    "Communication",
    "Convolution",
    "RMSNorm",
    "LayerNorm",
    "BatchNorm",
    "GroupNorm",
    "SwiGLU",
    "GELU",
    "ReLU",
    "RoPE",
    "MoE_Routing",
    "Softmax",
    "Embedding",
    "Quantize",
    "Reduce",
    "Sort",
    "Scan",
    "Elementwise",
    "Triton_Pointwise",
    "Triton_Reduce",
    "Triton_Persistent",
    "Triton_Template",
    "MemCopy",
    "Memset",
    "Other",
)

PLATFORMS: tuple[str, ...] = ("AMD", "NVIDIA", "unknown")
_PLATFORM_KEYS = {p.lower(): p for p in PLATFORMS}
RULES_ENV = "FUSION_RULES"
BUILTIN_RULES = Path(__file__).with_name("rules.toml")
MAX_MATCH_CHARS = 8192
"""Only this many leading characters of a name are matched: bounds the cost of hostile names."""

_RULE_KEYS = frozenset({"id", "type", "pattern", "vendor", "note"})
_FILE_KEYS = frozenset({"rule", "compound_ops"})
_VENDORS = frozenset({"AMD", "NVIDIA"})
_INDUCTOR_PREFIX = re.compile(r"triton_(?:poi|red|per|tem)_fused_")
_ESCAPE = re.compile(r"\\.")
_GROUP_NAME = re.compile(r"\(\?P<\w*>")
_CHAR_CLASS = re.compile(r"\[\^?\]?[^\]]*\]")
_QUANTIFIED_GROUP = re.compile(r"\)[*+{]")
_UNBOUNDED = re.compile(r"[*+]|\{\d*,\}")
_BACKREF = re.compile(r"\\[1-9]|\(\?P=")
_META = frozenset("\\.^$*+?{}[]()|")


@dataclass(frozen=True)
class Classification:
    """The operation type of one kernel name and why it was chosen."""

    kernel_type: str
    rule: str
    components: tuple[str, ...]


UNCLASSIFIED_RULE = "unclassified"


@dataclass(frozen=True)
class _Rule:
    """A compiled rule: its pattern split into top-level alternatives.

    Plain-text alternatives are tested with `in` and "^text" ones with
    startswith, both much faster than re; every other alternative is its own
    regex, so re can use its literal-prefix search on each.
    """

    id: str
    kernel_type: str
    vendor: str | None
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


@dataclass(frozen=True)
class _RuleSet:
    by_platform: Mapping[str, tuple[_Rule, ...]]
    compound_ops: Mapping[str, tuple[tuple[str, ...], ...]]
    """First "_"-token of a compound op name -> its token tuples, longest first."""


def classify(name: str, platform: str = "unknown") -> Classification:
    """Classify one kernel name; never raises on a str name."""
    rules = _active_rules()
    return _classify_one(name, rules.by_platform[_platform_key(platform)], rules)


def classify_names(names: Iterable[str], platform: str = "unknown") -> pd.DataFrame:
    """One row per distinct name (index "name"): kernel_type, rule, components."""
    rules = _active_rules()
    platform_rules = rules.by_platform[_platform_key(platform)]
    distinct = list(dict.fromkeys(names))
    results = [_classify_one(name, platform_rules, rules) for name in distinct]
    return pd.DataFrame(
        {
            "kernel_type": [r.kernel_type for r in results],
            "rule": [r.rule for r in results],
            "components": pd.Series([r.components for r in results], index=distinct, dtype=object),
        },
        index=pd.Index(distinct, name="name"),
    )


def fused_components(name: str) -> tuple[str, ...]:
    """The ops an Inductor kernel name lists, e.g. triton_poi_fused__to_copy_add_3 -> ("_to_copy", "add").

    The op list is split on "_" and then rejoined greedily (longest first) into
    the compound op names of the rule files, so "native_layer_norm" or
    "_to_copy" stay whole; an unknown op with a leading underscore keeps it.
    """
    return _components(name, _active_rules().compound_ops)


def _platform_key(platform: str) -> str:
    key = _PLATFORM_KEYS.get(platform.lower()) if isinstance(platform, str) else None
    if key is not None:
        return key
    raise ValueError(f"platform must be one of {PLATFORMS}, got {platform!r}")


def _classify_one(name: str, rules: tuple[_Rule, ...], rule_set: _RuleSet) -> Classification:
    if not isinstance(name, str):
        return Classification("Other", UNCLASSIFIED_RULE, ())
    text = name[:MAX_MATCH_CHARS].lower()
    components = _components(name, rule_set.compound_ops)
    for rule in rules:
        if rule.matches(text):
            return Classification(rule.kernel_type, rule.id, components)
    return Classification("Other", UNCLASSIFIED_RULE, components)


def _components(name: str, compound_ops: Mapping[str, tuple[tuple[str, ...], ...]]) -> tuple[str, ...]:
    if not isinstance(name, str) or len(name) > MAX_MATCH_CHARS:
        return ()
    prefix = _INDUCTOR_PREFIX.match(name)
    if prefix is None:
        return ()
    body = name[prefix.end():]
    head, _, number = body.rpartition("_")
    if number.isascii() and number.isdigit():
        body = head
    return _split_ops(body.split("_"), compound_ops) if body else ()


def _split_ops(tokens: list[str], compound_ops: Mapping[str, tuple[tuple[str, ...], ...]]) -> tuple[str, ...]:
    ops: list[str] = []
    i = 0
    while i < len(tokens):
        width = _op_width(tokens, i, compound_ops)
        op = "_".join(tokens[i:i + width])
        if op.strip("_"):
            ops.append(op)
        i += width
    return tuple(ops)


def _op_width(tokens: list[str], i: int, compound_ops: Mapping[str, tuple[tuple[str, ...], ...]]) -> int:
    """How many "_"-tokens starting at i form one op name."""
    for candidate in compound_ops.get(tokens[i], ()):
        if tuple(tokens[i:i + len(candidate)]) == candidate:
            return len(candidate)
    leading_underscore = tokens[i] == "" and i + 1 < len(tokens)
    return 2 if leading_underscore else 1


def _active_rules() -> _RuleSet:
    return _load_rules(os.environ.get(RULES_ENV, ""))


@lru_cache(maxsize=8)
def _load_rules(user_path: str) -> _RuleSet:
    """Built-in rules, preceded by the user's; cached per FUSION_RULES value."""
    rules, ops = _read_rule_file(BUILTIN_RULES)
    if user_path:
        user_rules, user_ops = _read_rule_file(Path(user_path))
        _reject_shadowed_ids(Path(user_path), user_rules, rules)
        rules, ops = user_rules + rules, ops + user_ops
    by_platform = {p: tuple(r for r in rules if r.vendor in (None, p) or p == "unknown") for p in PLATFORMS}
    return _RuleSet(by_platform, _index_compound_ops(ops))


def _reject_shadowed_ids(path: Path, user_rules: list[_Rule], builtin: list[_Rule]) -> None:
    builtin_ids = {r.id for r in builtin}
    for rule in user_rules:
        if rule.id in builtin_ids:
            raise ValueError(f"{path}: rule {rule.id!r}: id is already used by a built-in rule")


def _index_compound_ops(ops: list[str]) -> dict[str, tuple[tuple[str, ...], ...]]:
    index: dict[str, list[tuple[str, ...]]] = {}
    for op in dict.fromkeys(ops):
        tokens = tuple(op.split("_"))
        index.setdefault(tokens[0], []).append(tokens)
    return {first: tuple(sorted(group, key=len, reverse=True)) for first, group in index.items()}


def _read_rule_file(path: Path) -> tuple[list[_Rule], list[str]]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: cannot read rules file: {exc}") from exc
    unknown = set(data) - _FILE_KEYS
    if unknown:
        raise ValueError(f"{path}: unknown top-level keys {sorted(unknown)}; expected [[rule]] tables and compound_ops")
    entries = data.get("rule", [])
    if not isinstance(entries, list):
        raise ValueError(f"{path}: 'rule' must be an array of tables ([[rule]])")
    rules = [_parse_rule(path, n, entry) for n, entry in enumerate(entries, start=1)]
    _reject_duplicate_ids(path, rules)
    return rules, _parse_compound_ops(path, data.get("compound_ops", []))


def _parse_compound_ops(path: Path, ops: Any) -> list[str]:
    if not isinstance(ops, list) or not all(isinstance(op, str) and "_" in op for op in ops):
        raise ValueError(f"{path}: compound_ops must be a list of op names that contain '_'")
    return ops


def _reject_duplicate_ids(path: Path, rules: list[_Rule]) -> None:
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise ValueError(f"{path}: rule {rule.id!r}: duplicate id")
        seen.add(rule.id)


def _parse_rule(path: Path, number: int, entry: Any) -> _Rule:
    if not isinstance(entry, dict):
        raise ValueError(f"{path}: rule #{number}: must be a table")
    label = f"{path}: rule {entry.get('id', f'#{number}')!r}"
    unknown = set(entry) - _RULE_KEYS
    if unknown:
        raise ValueError(f"{label}: unknown keys {sorted(unknown)}; allowed: {sorted(_RULE_KEYS)}")
    for key in ("id", "type", "pattern"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise ValueError(f"{label}: '{key}' must be a non-empty string")
    if entry["type"] not in KERNEL_TYPES:
        raise ValueError(f"{label}: type {entry['type']!r} is not one of {KERNEL_TYPES}")
    vendor = entry.get("vendor")
    if vendor is not None and vendor not in _VENDORS:
        raise ValueError(f"{label}: vendor must be 'AMD' or 'NVIDIA', got {vendor!r}")
    if not isinstance(entry.get("note", ""), str):
        raise ValueError(f"{label}: 'note' must be a string")
    return _Rule(entry["id"], entry["type"], vendor, *_compile(label, entry["pattern"]))


def _compile(
    label: str, pattern: str
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[re.Pattern[str], ...]]:
    """Check a rule pattern and split it into literals, "^literal" prefixes and regexes."""
    _check_pattern(label, pattern)
    if pattern.startswith("(?"):
        return (), (), (re.compile(pattern),)
    literals, prefixes, regexes = [], [], []
    for branch in _alternatives(pattern):
        if not _META.intersection(branch):
            literals.append(branch)
        elif branch.startswith("^") and not _META.intersection(branch[1:]):
            prefixes.append(branch[1:])
        else:
            regexes.append(re.compile(branch))
    return tuple(literals), tuple(prefixes), tuple(regexes)


def _check_pattern(label: str, pattern: str) -> None:
    """Refuse invalid patterns, upper case, and constructs that can backtrack badly.

    Repeated groups ("(ab)+") backtrack exponentially and stacked unbounded
    repeats ("\\w+\\w+x") polynomially, so only bounded repeats are allowed.
    """
    try:
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as exc:
        raise ValueError(f"{label}: pattern {pattern!r} is not a valid regex: {exc}") from exc
    if _BACKREF.search(pattern):
        raise ValueError(f"{label}: pattern {pattern!r} uses a back-reference")
    plain = _GROUP_NAME.sub("(", _CHAR_CLASS.sub("x", _ESCAPE.sub("", pattern)))
    if _QUANTIFIED_GROUP.search(plain):
        raise ValueError(f"{label}: pattern {pattern!r} repeats a group (e.g. '(ab)+'); use a flat pattern")
    if _UNBOUNDED.search(plain):
        raise ValueError(f"{label}: pattern {pattern!r} has an unbounded repeat (*, +, {{n,}}); use e.g. .{{0,200}}")
    if any(ch.isupper() for ch in plain):
        raise ValueError(f"{label}: pattern {pattern!r} has upper-case letters; names are lower-cased before matching")


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
