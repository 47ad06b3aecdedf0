"""Map GPU kernel names (and, when the name says nothing, their launching op) to vendor-neutral operation types.

A kernel's *type* is what it computes as a whole (a GEMM with a SiLU-and-mul epilogue is a GEMM); its
*fused components* are the other operation types it also performs; its *implementation* is the library or
generator that made it (Inductor, CUTLASS, Tensile, ...); its *helper* role is set when it is one part of
another operation (a split-K reduce is GEMM with role 'split_k_reduce').

The rules are data (fusion/rules.toml and fusion/op_rules.toml, plus an optional user file named by
FUSION_RULES); this module only loads, validates and applies them. Each distinct name is classified once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pandas as pd

from . import settings
from .errors import ConfigError
from .rulefile import Entry, Matcher, compile_pattern, entries, read_toml, reject_duplicate_ids

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
    "SiLU",
    "GELU",
    "ReLU",
    "RoPE",
    "MoE_Routing",
    "Softmax",
    "Embedding",
    "Quantize",
    "Cast",
    "Reduce",
    "Sort",
    "Scan",
    "Elementwise",
    "MemCopy",
    "Memset",
    "Other",
)

HELPER_ROLES: tuple[str, ...] = ("split_k_reduce", "split_kv_combine", "sort_pass")
"""Roles of kernels that are one part of another operation (typed as that operation)."""

ROUTES: tuple[str, ...] = ("name", "op", "unknown")
PLATFORMS: tuple[str, ...] = ("AMD", "NVIDIA", "unknown")
COLUMNS: tuple[str, ...] = ("type", "rule", "components", "fused_components", "implementation", "helper")
_PLATFORM_KEYS = {p.lower(): p for p in PLATFORMS}
RULES_ENV = "FUSION_RULES"
BUILTIN_RULES = Path(__file__).with_name("rules.toml")
BUILTIN_OP_RULES = Path(__file__).with_name("op_rules.toml")
MAX_MATCH_CHARS = 8192
"""Only this many leading characters of a name are matched: bounds the cost of hostile names."""
UNCLASSIFIED_RULE = "unclassified"

_NAME_TABLES = ("compound_ops", "inductor", "inductor_op", "rule", "component", "implementation")
_OP_TABLES = ("op", "equivalent")
_RULE_KEYS = ("id", "type", "pattern", "vendor", "fused", "helper", "note")
_COMPONENT_KEYS = ("id", "pattern", "fused", "types", "vendor", "note")
_IMPLEMENTATION_KEYS = ("id", "implementation", "pattern", "vendor", "note")
_INDUCTOR_OP_KEYS = ("id", "type", "all", "any", "absorbs", "kinds", "alone", "note")
_INDUCTOR_KEYS = ("implementation", "fallback", "passive_ops", "note")
_OP_KEYS = ("id", "type", "pattern", "overrides", "note")
_EQUIVALENT_KEYS = ("canonical", "ops", "note")
_VENDORS = ("AMD", "NVIDIA")
INDUCTOR_KINDS: tuple[str, ...] = ("poi", "red", "per", "tem", "for")
_INDUCTOR_PREFIX = re.compile(r"triton_(poi|red|per|tem|for)_fused_")


@dataclass(frozen=True)
class Classification:
    """The operation type of one kernel name and why it was chosen."""

    kernel_type: str
    rule: str
    components: tuple[str, ...]
    """Raw op words of an Inductor name (e.g. ('add', 'mean', 'pow', 'rsqrt')); () for other names."""
    fused_components: tuple[str, ...] = ()
    """Operation types the kernel also performs besides `kernel_type`."""
    implementation: str = ""
    helper: str = ""


# --- rule records --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _NameRule:
    id: str
    kernel_type: str
    vendor: str | None
    matcher: Matcher
    fused: tuple[str, ...]
    helper: str


@dataclass(frozen=True)
class _ComponentRule:
    """Adds `fused` types to kernels of `types` whose name matches (epilogue, bias, activation tags)."""

    id: str
    vendor: str | None
    matcher: Matcher
    fused: tuple[str, ...]
    types: frozenset[str]


@dataclass(frozen=True)
class _ImplementationRule:
    id: str
    implementation: str
    vendor: str | None
    matcher: Matcher


@dataclass(frozen=True)
class _InductorOpRule:
    """Types an Inductor kernel whose op list has all of `all` and one of `any` (if given)."""

    id: str
    kernel_type: str
    all: frozenset[str]
    any: frozenset[str]
    absorbs: frozenset[str]
    kinds: frozenset[str]
    alone: bool
    """Only when every op word is this rule's or passive (a kernel that only casts)."""

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
class _Inductor:
    implementation: str
    fallback: Mapping[str, str]
    passive_ops: frozenset[str]
    """Op words with no compute of their own (views, layout copies, extern outputs)."""
    rules: tuple[_InductorOpRule, ...]


@dataclass(frozen=True)
class _OpRule:
    id: str
    kernel_type: str
    pattern: re.Pattern[str]
    overrides: frozenset[str]


@dataclass(frozen=True)
class _RuleSet:
    by_platform: Mapping[str, tuple[_NameRule, ...]]
    components: Mapping[str, tuple[_ComponentRule, ...]]
    implementations: Mapping[str, tuple[_ImplementationRule, ...]]
    inductor: _Inductor
    compound_ops: Mapping[str, tuple[tuple[str, ...], ...]]
    """First "_"-token of a compound op name -> its token tuples, longest first."""


@dataclass(frozen=True)
class _OpRuleSet:
    rules: tuple[_OpRule, ...]
    canonical: Mapping[str, str]


# --- public API ------------------------------------------------------------------------------------


def classify(name: str, platform: str = "unknown") -> Classification:
    """Classify one kernel name; never raises on a str name (a bad rule file raises ConfigError)."""
    rules = _active_rules()
    return _classify_one(name, _platform_key(platform), rules)


def classify_names(names: Iterable[str], platform: str = "unknown") -> pd.DataFrame:
    """One row per distinct name (index "name"); columns COLUMNS."""
    rules = _active_rules()
    key = _platform_key(platform)
    distinct = list(dict.fromkeys(names))
    results = [_classify_one(name, key, rules) for name in distinct]
    index = pd.Index(distinct, name="name")
    return pd.DataFrame(
        {
            "type": [r.kernel_type for r in results],
            "rule": [r.rule for r in results],
            "components": pd.Series([r.components for r in results], index=index, dtype=object),
            "fused_components": pd.Series([r.fused_components for r in results], index=index, dtype=object),
            "implementation": [r.implementation for r in results],
            "helper": [r.helper for r in results],
        },
        index=index,
    )


def inductor_ops(name: str) -> tuple[str, ...]:
    """The ops an Inductor kernel name lists, e.g. triton_poi_fused__to_copy_add_3 -> ("_to_copy", "add").

    The op list is split on "_" and then rejoined greedily (longest first) into
    the compound op names of the rule files, so "native_layer_norm" or
    "_to_copy" stay whole; an unknown op with a leading underscore keeps it.
    """
    return _components(name, _active_rules().compound_ops)


def type_from_op(name_type: str, op: str, op_top: str) -> tuple[str, str]:
    """(type, route) of a kernel from its name's type and its launching ops (innermost, outermost).

    The name decides (route 'name') unless an op rule overrides that name type; a name typed Other is
    typed by the first op rule matching `op`, then `op_top` (route 'op'); otherwise ('Other', 'unknown').
    """
    rules = _active_op_rules().rules
    for launching_op in (op, op_top):
        rule = _op_rule(rules, launching_op, name_type)
        if rule is not None:
            return rule.kernel_type, "op"
    if name_type != "Other":
        return name_type, "name"
    return "Other", "unknown"


def canonical_op(op: str) -> str:
    """The representative of `op`'s equivalence class (aten::addmm -> aten::mm); `op` itself when it has none."""
    return _active_op_rules().canonical.get(op, op)


def rule_files() -> tuple[Path, ...]:
    """The files the classification depends on (for cache fingerprints): built-in ones and FUSION_RULES."""
    user = settings.rules_path()
    return (BUILTIN_RULES, BUILTIN_OP_RULES) + ((Path(user),) if user else ())


# --- classification --------------------------------------------------------------------------------


def _platform_key(platform: str) -> str:
    key = _PLATFORM_KEYS.get(platform.lower()) if isinstance(platform, str) else None
    if key is not None:
        return key
    raise ValueError(f"platform must be one of {PLATFORMS}, got {platform!r}")


def _classify_one(name: str, platform: str, rules: _RuleSet) -> Classification:
    if not isinstance(name, str):
        return Classification("Other", UNCLASSIFIED_RULE, ())
    prefix = _INDUCTOR_PREFIX.match(name)
    if prefix is not None:
        return _classify_inductor(name, prefix.group(1), rules)
    text = name[:MAX_MATCH_CHARS].lower()
    implementation = _implementation(text, rules.implementations[platform])
    for rule in rules.by_platform[platform]:
        if rule.matcher.matches(text):
            fused = _epilogue(text, rule, rules.components[platform])
            return Classification(rule.kernel_type, rule.id, (), fused, implementation, rule.helper)
    return Classification("Other", UNCLASSIFIED_RULE, (), (), implementation)


def _implementation(text: str, rules: tuple[_ImplementationRule, ...]) -> str:
    return next((r.implementation for r in rules if r.matcher.matches(text)), "")


def _epilogue(text: str, rule: _NameRule, components: tuple[_ComponentRule, ...]) -> tuple[str, ...]:
    """The rule's own fused types, then those of every component rule matching the name, without repeats."""
    fused = list(rule.fused)
    for component in components:
        if rule.kernel_type in component.types and component.matcher.matches(text):
            fused.extend(component.fused)
    return tuple(t for t in dict.fromkeys(fused) if t != rule.kernel_type)


def _classify_inductor(name: str, kind: str, rules: _RuleSet) -> Classification:
    """Type an Inductor kernel from its op list: the first matching op rule wins.

    A later matching rule adds its type to the fused components when it brings op words no earlier
    rule consumed; op words no matching rule consumes (and not passive) are elementwise work fused in.
    """
    inductor = rules.inductor
    components = _components(name, rules.compound_ops)
    ops = frozenset(components)
    matched = [rule for rule in inductor.rules if rule.matches(ops, kind, inductor.passive_ops)]
    kernel_type = matched[0].kernel_type if matched else inductor.fallback[kind]
    rule_id = matched[0].id if matched else f"inductor_{kind}"
    consumed = set(inductor.passive_ops)
    fused = []
    for rule in matched:
        if not rule.own(ops) <= consumed:
            fused.append(rule.kernel_type)
        consumed |= rule.consumed(ops)
    if ops - consumed:
        fused.append("Elementwise")
    fused_types = tuple(t for t in dict.fromkeys(fused) if t != kernel_type)
    return Classification(kernel_type, rule_id, components, fused_types, inductor.implementation)


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


def _op_rule(rules: tuple[_OpRule, ...], op: str, name_type: str) -> _OpRule | None:
    """The first rule matching `op` that may decide for a kernel whose name says `name_type`."""
    if not op:
        return None
    text = op.lower()
    for rule in rules:
        if (name_type == "Other" or name_type in rule.overrides) and rule.pattern.fullmatch(text):
            return rule
    return None


# --- loading name rules ----------------------------------------------------------------------------


def _active_rules() -> _RuleSet:
    return _load_rules(settings.rules_path())


def _active_op_rules() -> _OpRuleSet:
    return _load_op_rules(settings.rules_path())


@lru_cache(maxsize=8)
def _load_rules(user_path: str) -> _RuleSet:
    """Built-in rules, preceded by the user's; cached per FUSION_RULES value."""
    builtin = _read_name_rules(BUILTIN_RULES, frozenset())
    files = [builtin]
    if user_path:
        files.insert(0, _read_name_rules(Path(user_path), _ids(builtin)))
    rules = [r for f in files for r in f["rule"]]
    components = [r for f in files for r in f["component"]]
    implementations = [r for f in files for r in f["implementation"]]
    settings_ = builtin["inductor"]
    inductor = _Inductor(settings_.implementation, settings_.fallback, settings_.passive_ops,
                         tuple(r for f in files for r in f["inductor_op"]))
    ops = [op for f in reversed(files) for op in f["compound_ops"]]
    return _RuleSet(
        _per_platform(rules), _per_platform(components), _per_platform(implementations),
        inductor, _index_compound_ops(ops),
    )


def _ids(parsed: dict) -> frozenset[str]:
    return frozenset(r.id for table in ("rule", "component", "implementation", "inductor_op") for r in parsed[table])


def _per_platform(rules: list) -> dict[str, tuple]:
    return {p: tuple(r for r in rules if r.vendor in (None, p) or p == "unknown") for p in PLATFORMS}


def _index_compound_ops(ops: list[str]) -> dict[str, tuple[tuple[str, ...], ...]]:
    index: dict[str, list[tuple[str, ...]]] = {}
    for op in dict.fromkeys(ops):
        tokens = tuple(op.split("_"))
        index.setdefault(tokens[0], []).append(tokens)
    return {first: tuple(sorted(group, key=len, reverse=True)) for first, group in index.items()}


def _read_name_rules(path: Path, taken: frozenset[str]) -> dict:
    user_file = bool(taken)
    data = read_toml(path, _NAME_TABLES + _OP_TABLES if user_file else _NAME_TABLES)
    parsed = {
        "rule": [_parse_rule(Entry.of(path, "rule", n, e, _RULE_KEYS)) for n, e in _numbered(path, data, "rule")],
        "component": [_parse_component(Entry.of(path, "component", n, e, _COMPONENT_KEYS))
                      for n, e in _numbered(path, data, "component")],
        "implementation": [_parse_implementation(Entry.of(path, "implementation", n, e, _IMPLEMENTATION_KEYS))
                           for n, e in _numbered(path, data, "implementation")],
        "inductor_op": [_parse_inductor_op(Entry.of(path, "inductor_op", n, e, _INDUCTOR_OP_KEYS))
                        for n, e in _numbered(path, data, "inductor_op")],
        "compound_ops": _parse_compound_ops(path, data.get("compound_ops", [])),
    }
    if user_file and "inductor" in data:
        raise ConfigError(f"{path}: [inductor] settings belong to the built-in rules; add [[inductor_op]] rules instead")
    if not user_file:
        parsed["inductor"] = _parse_inductor(path, data.get("inductor"))
    reject_duplicate_ids(path, [r.id for t in ("rule", "component", "implementation", "inductor_op")
                                for r in parsed[t]], taken)
    return parsed


def _numbered(path: Path, data: dict, table: str) -> list[tuple[int, dict]]:
    return list(enumerate(entries(path, data, table), start=1))


def _vendor(entry: Entry) -> str | None:
    vendor = entry.data.get("vendor")
    if vendor is not None and vendor not in _VENDORS:
        entry.fail(f"vendor must be 'AMD' or 'NVIDIA', got {vendor!r}")
    return vendor


def _parse_rule(entry: Entry) -> _NameRule:
    return _NameRule(
        entry.text("id"), entry.choice("type", KERNEL_TYPES), _vendor(entry), compile_pattern(entry),
        entry.words("fused", KERNEL_TYPES), entry.choice("helper", HELPER_ROLES, ""),
    )


def _parse_component(entry: Entry) -> _ComponentRule:
    fused, types = entry.words("fused", KERNEL_TYPES), entry.words("types", KERNEL_TYPES)
    if not fused or not types:
        entry.fail("'fused' and 'types' must each list at least one type")
    return _ComponentRule(entry.text("id"), _vendor(entry), compile_pattern(entry), fused, frozenset(types))


def _parse_implementation(entry: Entry) -> _ImplementationRule:
    return _ImplementationRule(entry.text("id"), entry.text("implementation"), _vendor(entry), compile_pattern(entry))


def _parse_inductor_op(entry: Entry) -> _InductorOpRule:
    required, alternatives = entry.words("all"), entry.words("any")
    if not required and not alternatives:
        entry.fail("needs 'all' or 'any' (op words of an Inductor name)")
    kinds = entry.words("kinds", INDUCTOR_KINDS) or INDUCTOR_KINDS
    return _InductorOpRule(
        entry.text("id"), entry.choice("type", KERNEL_TYPES), frozenset(required), frozenset(alternatives),
        frozenset(entry.words("absorbs")), frozenset(kinds), _flag(entry, "alone"),
    )


def _flag(entry: Entry, key: str) -> bool:
    value = entry.data.get(key, False)
    if not isinstance(value, bool):
        entry.fail(f"'{key}' must be true or false")
    return value


def _parse_inductor(path: Path, data: object) -> _Inductor:
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: needs an [inductor] table")
    entry = Entry.of(path, "inductor", 1, data, _INDUCTOR_KEYS)
    fallback = data.get("fallback")
    if not isinstance(fallback, dict) or set(fallback) != set(INDUCTOR_KINDS) or not set(fallback.values()) <= set(KERNEL_TYPES):
        entry.fail(f"'fallback' must map each of {INDUCTOR_KINDS} to a type")
    return _Inductor(entry.text("implementation"), dict(fallback), frozenset(entry.words("passive_ops")), ())


def _parse_compound_ops(path: Path, ops: object) -> list[str]:
    if not isinstance(ops, list) or not all(isinstance(op, str) and "_" in op for op in ops):
        raise ConfigError(f"{path}: compound_ops must be a list of op names that contain '_'")
    return ops


# --- loading op rules ------------------------------------------------------------------------------


@lru_cache(maxsize=8)
def _load_op_rules(user_path: str) -> _OpRuleSet:
    """Op rules of op_rules.toml; a user file's [[op]] / [[equivalent]] tables (if any) come first."""
    rules, canonical = _read_op_rules(BUILTIN_OP_RULES)
    if user_path:
        user_rules, user_canonical = _read_op_rules(Path(user_path), user_file=True)
        reject_duplicate_ids(Path(user_path), [r.id for r in user_rules], {r.id for r in rules})
        rules, canonical = user_rules + rules, {**canonical, **user_canonical}
    return _OpRuleSet(tuple(rules), canonical)


def _read_op_rules(path: Path, user_file: bool = False) -> tuple[list[_OpRule], dict[str, str]]:
    data = read_toml(path, _NAME_TABLES + _OP_TABLES if user_file else _OP_TABLES)
    rules = [_parse_op_rule(Entry.of(path, "op", n, e, _OP_KEYS)) for n, e in _numbered(path, data, "op")]
    reject_duplicate_ids(path, [r.id for r in rules])
    canonical: dict[str, str] = {}
    for n, e in _numbered(path, data, "equivalent"):
        entry = Entry.of(path, "equivalent", n, e, _EQUIVALENT_KEYS)
        representative = entry.text("canonical")
        for op in (representative, *entry.words("ops")):
            if canonical.setdefault(op, representative) != representative:
                entry.fail(f"op {op!r} is already equivalent to {canonical[op]!r}")
    return rules, canonical


def _parse_op_rule(entry: Entry) -> _OpRule:
    compile_pattern(entry)
    return _OpRule(
        entry.text("id"), entry.choice("type", KERNEL_TYPES), re.compile(entry.text("pattern")),
        frozenset(entry.words("overrides", KERNEL_TYPES)),
    )
