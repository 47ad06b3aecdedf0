"""Map GPU kernel names (and, only when the name says nothing, their launching op) to vendor-neutral operation types.

A kernel's *type* is what it computes as a whole (a GEMM with a SiLU-and-mul epilogue is a GEMM); its
*fused components* are the other operation types it also performs; its *implementation* is the library or
generator that made it (Inductor, CUTLASS, Tensile, ...); its *helper* role is set when it is one part of
another operation (a split-K reduce is GEMM with role 'split_k_reduce'; a layout transpose is MemCopy with role
'layout'); *single_op* is set when its name says it computes one elementwise operation and nothing else (an ATen
add functor).

The rules are data (fusion/rules.toml and fusion/op_rules.toml, plus an optional user file named by
FUSION_RULES, read through settings.rules_path()); fusion/rulesets.py loads and validates them, this
module applies them. Each distinct name is classified once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pandas as pd

from fusion import settings
from fusion.classify.rulesets import (
    BUILTIN_OP_RULES,
    BUILTIN_RULES,
    ComponentRule,
    ImplementationRule,
    NameRule,
    NameRules,
    OpRules,
    SingleOpRule,
    name_rules,
    op_rules,
)
from fusion.vocabulary import HELPER_ROLES, INDUCTOR_KINDS, KERNEL_TYPES, LAYOUT_ROLE, PLATFORMS, SPLIT_ROLES

__all__ = [
    "BUILTIN_OP_RULES",
    "BUILTIN_RULES",
    "COLUMNS",
    "HELPER_ROLES",
    "INDUCTOR_KINDS",
    "KERNEL_TYPES",
    "LAYOUT_ROLE",
    "MAX_MATCH_CHARS",
    "PLATFORMS",
    "RULES_ENV",
    "SPLIT_ROLES",
    "UNCLASSIFIED_RULE",
    "Classification",
    "canonical_op",
    "classify",
    "classify_names",
    "inductor_ops",
    "name_family",
    "type_from_op",
]

COLUMNS: tuple[str, ...] = ("type", "rule", "components", "fused_components", "implementation", "helper", "single_op")
"""Columns of classify_names (and of trace.names, with count and time_us)."""
RULES_ENV = "FUSION_RULES"
MAX_MATCH_CHARS = 8192
"""Only this many leading characters of a name are matched: bounds the cost of hostile names."""
UNCLASSIFIED_RULE = "unclassified"
CODE_OBJECT_SUFFIXES = (" [clone .kd]", ".kd")
"""rocprofv3 names a kernel by its code-object symbol, the kernel's name with one of these after it."""
_PLATFORM_KEYS = {p.lower(): p for p in PLATFORMS}
_INDUCTOR_PREFIX = re.compile(rf"triton_({'|'.join(INDUCTOR_KINDS)})_fused_")


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
    single_op: bool = False
    """The name says the kernel computes one elementwise operation and nothing else ([[single_op]] rules)."""


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
            "single_op": pd.Series([r.single_op for r in results], index=index, dtype=bool),
        },
        index=index,
    )


def inductor_ops(name: str) -> tuple[str, ...]:
    """The ops an Inductor kernel name lists, e.g. triton_poi_fused__to_copy_add_3 -> ("_to_copy", "add").

    The op list is split on "_" and then rejoined greedily (longest first) into
    the compound op names of the rule files, so "native_layer_norm" or
    "_to_copy" stay whole; an unknown op with a leading underscore keeps it.
    """
    return _components(_kernel_name(name), _active_rules().compound_ops)


def type_from_op(name_type: str, op: str, op_top: str) -> tuple[str, str]:
    """(type, route) of a kernel from its name's type and its launching ops (innermost, outermost).

    A name the rules type keeps that type whatever launches it (route 'name'): a layout transpose under a
    convolution is copy work, not the convolution. Only a name that says nothing (Other) is typed by the first
    op rule (in file order) that matches `op` or `op_top` (route 'op'); else it stays Other ('unknown').
    """
    if name_type != "Other":
        return name_type, "name"
    launching = tuple(o.lower() for o in (op, op_top) if o)
    for rule in _active_op_rules().rules:
        if any(rule.pattern.fullmatch(o) for o in launching):
            return rule.kernel_type, "op"
    return "Other", "unknown"


def name_family(name: str, rule: str, fused_components: tuple[str, ...]) -> str:
    """A kernel name's family: the rule that typed it and what it also performs (cutlass_gemm+SwiGLU), so the tiles
    and shapes of one library's kernels are one family; a name no rule knows is its own family."""
    if rule == UNCLASSIFIED_RULE:
        return name
    return f"{rule}+{'+'.join(fused_components)}" if fused_components else rule


def canonical_op(op: str) -> str:
    """The representative of `op`'s equivalence class (aten::addmm -> aten::mm); `op` itself when it has none."""
    return _active_op_rules().canonical.get(op, op)


# --- classification --------------------------------------------------------------------------------


def _platform_key(platform: str) -> str:
    key = _PLATFORM_KEYS.get(platform.lower()) if isinstance(platform, str) else None
    if key is not None:
        return key
    raise ValueError(f"platform must be one of {PLATFORMS}, got {platform!r}")


def _classify_one(name: str, platform: str, rules: NameRules) -> Classification:
    if not isinstance(name, str):
        return Classification("Other", UNCLASSIFIED_RULE, ())
    name = _kernel_name(name)
    prefix = _INDUCTOR_PREFIX.match(name)
    if prefix is not None:
        return _classify_inductor(name, prefix.group(1), rules)
    text = name[:MAX_MATCH_CHARS].lower()
    implementation = _implementation(text, rules.implementations[platform])
    single_op = _single_op(text, rules.single_op[platform])
    for rule in rules.by_platform[platform]:
        if rule.matcher.matches(text):
            fused = _epilogue(text, rule, rules.components[platform])
            return Classification(rule.kernel_type, rule.id, (), fused, implementation, rule.helper, single_op)
    return Classification("Other", UNCLASSIFIED_RULE, (), (), implementation, single_op=single_op)


def _kernel_name(name: str) -> str:
    """`name` without a code-object suffix: triton_poi_fused_mul_silu_0.kd is triton_poi_fused_mul_silu_0."""
    for suffix in CODE_OBJECT_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _implementation(text: str, rules: tuple[ImplementationRule, ...]) -> str:
    return next((r.implementation for r in rules if r.matcher.matches(text)), "")


def _single_op(text: str, rules: tuple[SingleOpRule, ...]) -> bool:
    return any(r.matcher.matches(text) for r in rules)


def _epilogue(text: str, rule: NameRule, components: tuple[ComponentRule, ...]) -> tuple[str, ...]:
    """The rule's own fused types, then those of every component rule matching the name, without repeats."""
    fused = list(rule.fused)
    for component in components:
        if rule.kernel_type in component.types and component.matcher.matches(text):
            fused.extend(component.fused)
    return tuple(t for t in dict.fromkeys(fused) if t != rule.kernel_type)


def _classify_inductor(name: str, kind: str, rules: NameRules) -> Classification:
    """Type an Inductor kernel from its op list: the first matching op rule that is not fused_only wins.

    Every other matching rule adds its type to the fused components when it brings op words no earlier
    rule consumed; op words no matching rule consumes (and not passive) are elementwise work fused in.
    """
    inductor = rules.inductor
    components = _components(name, rules.compound_ops)
    ops = frozenset(components)
    matched = [rule for rule in inductor.rules if rule.matches(ops, kind, inductor.passive_ops)]
    primary = next((rule for rule in matched if not rule.fused_only), None)
    kernel_type = primary.kernel_type if primary else inductor.fallback[kind]
    rule_id = primary.id if primary else f"inductor_{kind}"
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
    body = name[prefix.end() :]
    head, _, number = body.rpartition("_")
    if number.isascii() and number.isdigit():
        body = head
    return _split_ops(body.split("_"), compound_ops) if body else ()


def _split_ops(tokens: list[str], compound_ops: Mapping[str, tuple[tuple[str, ...], ...]]) -> tuple[str, ...]:
    ops: list[str] = []
    i = 0
    while i < len(tokens):
        width = _op_width(tokens, i, compound_ops)
        op = "_".join(tokens[i : i + width])
        if op.strip("_"):
            ops.append(op)
        i += width
    return tuple(ops)


def _op_width(tokens: list[str], i: int, compound_ops: Mapping[str, tuple[tuple[str, ...], ...]]) -> int:
    """How many "_"-tokens starting at i form one op name."""
    for candidate in compound_ops.get(tokens[i], ()):
        if tuple(tokens[i : i + len(candidate)]) == candidate:
            return len(candidate)
    leading_underscore = tokens[i] == "" and i + 1 < len(tokens)
    return 2 if leading_underscore else 1


def _active_rules() -> NameRules:
    return name_rules(settings.rules_path())


def _active_op_rules() -> OpRules:
    return op_rules(settings.rules_path())
