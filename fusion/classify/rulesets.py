"""The compiled classification rules: fusion/rules.toml and fusion/op_rules.toml, preceded by a user file.

Loaded once per FUSION_RULES value (cached); every entry is validated, and a bad file raises ConfigError
naming the file and the entry. fusion/classify.py applies the rules; this module only builds them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from fusion.classify.rulefile import Entry, Matcher, compile_pattern, entries, read_toml, reject_duplicate_ids
from fusion.errors import ConfigError
from fusion.vocabulary import HELPER_ROLES, INDUCTOR_KINDS, KERNEL_TYPES, PLATFORMS, VENDORS

BUILTIN_RULES = Path(__file__).with_name("rules.toml")
BUILTIN_OP_RULES = Path(__file__).with_name("op_rules.toml")

_NAME_TABLES = ("compound_ops", "inductor", "inductor_op", "rule", "component", "implementation", "single_op")
_OP_TABLES = ("op", "equivalent")
_RULE_KEYS = ("id", "type", "pattern", "vendor", "fused", "helper", "note")
_COMPONENT_KEYS = ("id", "pattern", "fused", "types", "vendor", "note")
_IMPLEMENTATION_KEYS = ("id", "implementation", "pattern", "vendor", "note")
_SINGLE_OP_KEYS = ("id", "pattern", "vendor", "note")
_INDUCTOR_OP_KEYS = ("id", "type", "all", "any", "absorbs", "kinds", "alone", "fused_only", "note")
_INDUCTOR_KEYS = ("implementation", "fallback", "passive_ops", "note")
_OP_KEYS = ("id", "type", "pattern", "note")
_EQUIVALENT_KEYS = ("canonical", "ops", "note")


@dataclass(frozen=True)
class NameRule:
    """[[rule]]: a name matching `matcher` is `kernel_type`, also performs `fused`, and has role `helper`."""

    id: str
    kernel_type: str
    vendor: str | None
    matcher: Matcher
    fused: tuple[str, ...]
    helper: str


@dataclass(frozen=True)
class ComponentRule:
    """[[component]]: adds `fused` types to kernels of `types` whose name matches (epilogue, activation tags)."""

    id: str
    vendor: str | None
    matcher: Matcher
    fused: tuple[str, ...]
    types: frozenset[str]


@dataclass(frozen=True)
class ImplementationRule:
    """[[implementation]]: a name matching `matcher` was made by `implementation`."""

    id: str
    implementation: str
    vendor: str | None
    matcher: Matcher


@dataclass(frozen=True)
class SingleOpRule:
    """[[single_op]]: a name matching `matcher` computes one elementwise operation and nothing else."""

    id: str
    vendor: str | None
    matcher: Matcher


@dataclass(frozen=True)
class InductorOpRule:
    """[[inductor_op]]: types an Inductor kernel whose op list has all of `all` and one of `any` (if given)."""

    id: str
    kernel_type: str
    all: frozenset[str]
    any: frozenset[str]
    absorbs: frozenset[str]
    kinds: frozenset[str]
    alone: bool
    """Only when every op word is this rule's or passive (a kernel that only casts)."""
    fused_only: bool
    """Never the kernel's type, only one of its fused components (a cast inside an elementwise kernel)."""

    def matches(self, ops: frozenset[str], kind: str, passive: frozenset[str]) -> bool:
        if kind not in self.kinds or not self.all <= ops or (self.any and not self.any & ops):
            return False
        return not self.alone or ops <= self.all | self.any | self.absorbs | passive

    def own(self, ops: frozenset[str]) -> frozenset[str]:
        """The op words that made the rule match."""
        return (self.all | self.any) & ops

    def consumed(self, ops: frozenset[str]) -> frozenset[str]:
        return (self.all | self.any | self.absorbs) & ops


@dataclass(frozen=True)
class InductorRules:
    """[inductor] settings and the [[inductor_op]] rules, user rules first."""

    implementation: str
    fallback: Mapping[str, str]
    """Inductor kind -> type when no op rule matches."""
    passive_ops: frozenset[str]
    """Op words with no compute of their own (views, layout copies, extern outputs)."""
    rules: tuple[InductorOpRule, ...]


@dataclass(frozen=True)
class NameRules:
    """Everything that classifies a kernel name, with the vendor-tagged rules split per platform."""

    by_platform: Mapping[str, tuple[NameRule, ...]]
    components: Mapping[str, tuple[ComponentRule, ...]]
    implementations: Mapping[str, tuple[ImplementationRule, ...]]
    single_op: Mapping[str, tuple[SingleOpRule, ...]]
    inductor: InductorRules
    compound_ops: Mapping[str, tuple[tuple[str, ...], ...]]
    """First "_"-token of a compound op name -> its token tuples, longest first."""


@dataclass(frozen=True)
class OpRule:
    """[[op]]: a launching op fully matching `pattern` types the kernels whose name says nothing as `kernel_type`."""

    id: str
    kernel_type: str
    pattern: re.Pattern[str]


@dataclass(frozen=True)
class OpRules:
    rules: tuple[OpRule, ...]
    canonical: Mapping[str, str]
    """Op -> the representative of its [[equivalent]] class."""


@dataclass(frozen=True)
class _NameFile:
    rules: list[NameRule]
    components: list[ComponentRule]
    implementations: list[ImplementationRule]
    single_op: list[SingleOpRule]
    inductor_ops: list[InductorOpRule]
    compound_ops: list[str]

    def ids(self) -> list[str]:
        return [
            r.id for r in (*self.rules, *self.components, *self.implementations, *self.single_op, *self.inductor_ops)
        ]


@lru_cache(maxsize=8)
def name_rules(user_path: str) -> NameRules:
    """Built-in name rules, preceded by those of `user_path` ('' for none)."""
    data = read_toml(BUILTIN_RULES, _NAME_TABLES)
    files = [_name_file(BUILTIN_RULES, data)]
    if user_path:
        path = Path(user_path)
        user_data = read_toml(path, _NAME_TABLES + _OP_TABLES)
        if "inductor" in user_data:
            raise ConfigError(f"{path}: [inductor] settings belong to the built-in rules; add [[inductor_op]] rules")
        files.insert(0, _name_file(path, user_data))
        reject_duplicate_ids(path, files[0].ids(), set(files[1].ids()))
    inductor = _parse_inductor(BUILTIN_RULES, data.get("inductor"), tuple(r for f in files for r in f.inductor_ops))
    return NameRules(
        _per_platform([r for f in files for r in f.rules]),
        _per_platform([r for f in files for r in f.components]),
        _per_platform([r for f in files for r in f.implementations]),
        _per_platform([r for f in files for r in f.single_op]),
        inductor,
        _index_compound_ops([op for f in reversed(files) for op in f.compound_ops]),
    )


@lru_cache(maxsize=8)
def op_rules(user_path: str) -> OpRules:
    """Op rules of op_rules.toml; a user file's [[op]] / [[equivalent]] tables (if any) come first."""
    rules, canonical = _read_op_rules(BUILTIN_OP_RULES, _OP_TABLES)
    if user_path:
        path = Path(user_path)
        user_rules, user_canonical = _read_op_rules(path, _NAME_TABLES + _OP_TABLES)
        reject_duplicate_ids(path, [r.id for r in user_rules], {r.id for r in rules})
        rules, canonical = user_rules + rules, {**canonical, **user_canonical}
    return OpRules(tuple(rules), canonical)


# --- name rules -------------------------------------------------------------------------------------


def _name_file(path: Path, data: dict[str, Any]) -> _NameFile:
    parsed = _NameFile(
        [_parse_rule(e) for e in _entries(path, data, "rule", _RULE_KEYS)],
        [_parse_component(e) for e in _entries(path, data, "component", _COMPONENT_KEYS)],
        [_parse_implementation(e) for e in _entries(path, data, "implementation", _IMPLEMENTATION_KEYS)],
        [_parse_single_op(e) for e in _entries(path, data, "single_op", _SINGLE_OP_KEYS)],
        [_parse_inductor_op(e) for e in _entries(path, data, "inductor_op", _INDUCTOR_OP_KEYS)],
        _parse_compound_ops(path, data.get("compound_ops", [])),
    )
    reject_duplicate_ids(path, parsed.ids())
    return parsed


def _entries(path: Path, data: dict[str, Any], table: str, keys: tuple[str, ...]) -> list[Entry]:
    return [Entry.of(path, table, n, item, keys) for n, item in enumerate(entries(path, data, table), start=1)]


def _per_platform(rules: list[Any]) -> dict[str, tuple[Any, ...]]:
    return {p: tuple(r for r in rules if r.vendor in (None, p) or p == "unknown") for p in PLATFORMS}


def _index_compound_ops(ops: list[str]) -> dict[str, tuple[tuple[str, ...], ...]]:
    index: dict[str, list[tuple[str, ...]]] = {}
    for op in dict.fromkeys(ops):
        tokens = tuple(op.split("_"))
        index.setdefault(tokens[0], []).append(tokens)
    return {first: tuple(sorted(group, key=len, reverse=True)) for first, group in index.items()}


def _vendor(entry: Entry) -> str | None:
    vendor = entry.data.get("vendor")
    if vendor is not None and vendor not in VENDORS:
        entry.fail(f"vendor must be 'AMD' or 'NVIDIA', got {vendor!r}")
    return vendor


def _parse_rule(entry: Entry) -> NameRule:
    return NameRule(
        entry.text("id"),
        entry.choice("type", KERNEL_TYPES),
        _vendor(entry),
        compile_pattern(entry),
        entry.words("fused", KERNEL_TYPES),
        entry.choice("helper", HELPER_ROLES, ""),
    )


def _parse_component(entry: Entry) -> ComponentRule:
    fused, types = entry.words("fused", KERNEL_TYPES), entry.words("types", KERNEL_TYPES)
    if not fused or not types:
        entry.fail("'fused' and 'types' must each list at least one type")
    return ComponentRule(entry.text("id"), _vendor(entry), compile_pattern(entry), fused, frozenset(types))


def _parse_implementation(entry: Entry) -> ImplementationRule:
    return ImplementationRule(entry.text("id"), entry.text("implementation"), _vendor(entry), compile_pattern(entry))


def _parse_single_op(entry: Entry) -> SingleOpRule:
    return SingleOpRule(entry.text("id"), _vendor(entry), compile_pattern(entry))


def _parse_inductor_op(entry: Entry) -> InductorOpRule:
    required, alternatives = entry.words("all"), entry.words("any")
    if not required and not alternatives:
        entry.fail("needs 'all' or 'any' (op words of an Inductor name)")
    kinds = entry.words("kinds", INDUCTOR_KINDS) or INDUCTOR_KINDS
    return InductorOpRule(
        entry.text("id"),
        entry.choice("type", KERNEL_TYPES),
        frozenset(required),
        frozenset(alternatives),
        frozenset(entry.words("absorbs")),
        frozenset(kinds),
        entry.flag("alone"),
        entry.flag("fused_only"),
    )


def _parse_inductor(path: Path, data: object, rules: tuple[InductorOpRule, ...]) -> InductorRules:
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: needs an [inductor] table")
    entry = Entry.of(path, "inductor", 1, data, _INDUCTOR_KEYS)
    fallback = data.get("fallback")
    if (
        not isinstance(fallback, dict)
        or set(fallback) != set(INDUCTOR_KINDS)
        or not set(fallback.values()) <= set(KERNEL_TYPES)
    ):
        entry.fail(f"'fallback' must map each of {INDUCTOR_KINDS} to a type")
    return InductorRules(entry.text("implementation"), dict(fallback), frozenset(entry.words("passive_ops")), rules)


def _parse_compound_ops(path: Path, ops: object) -> list[str]:
    if not isinstance(ops, list) or not all(isinstance(op, str) and "_" in op for op in ops):
        raise ConfigError(f"{path}: compound_ops must be a list of op names that contain '_'")
    return ops


# --- op rules ---------------------------------------------------------------------------------------


def _read_op_rules(path: Path, tables: tuple[str, ...]) -> tuple[list[OpRule], dict[str, str]]:
    data = read_toml(path, tables)
    rules = [_parse_op_rule(e) for e in _entries(path, data, "op", _OP_KEYS)]
    reject_duplicate_ids(path, [r.id for r in rules])
    canonical: dict[str, str] = {}
    for entry in _entries(path, data, "equivalent", _EQUIVALENT_KEYS):
        representative = entry.text("canonical")
        for op in (representative, *entry.words("ops")):
            if canonical.setdefault(op, representative) != representative:
                entry.fail(f"op {op!r} is already equivalent to {canonical[op]!r}")
    return rules, canonical


def _parse_op_rule(entry: Entry) -> OpRule:
    compile_pattern(entry)
    return OpRule(
        entry.text("id"),
        entry.choice("type", KERNEL_TYPES),
        re.compile(entry.text("pattern")),
    )
