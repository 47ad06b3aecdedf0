"""Every name of the names corpus (tests/names_corpus.tsv) classifies as its row says.

The corpus holds real kernel names from public traces and kernel sources, one family per row or few,
with the expected type, implementation, fused components, helper role and single-op flag. A rule change that
breaks a family fails here with the name.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from fusion.classify.names import (
    BUILTIN_OP_RULES,
    BUILTIN_RULES,
    HELPER_ROLES,
    KERNEL_TYPES,
    LAYOUT_ROLE,
    RULES_ENV,
    classify,
    type_from_op,
)
from fusion.classify.rulesets import name_rules

CORPUS = Path(__file__).with_name("names_corpus.tsv")
MIN_ROWS = 200
FIELDS = 8


@dataclass(frozen=True)
class Row:
    name: str
    platform: str
    kernel_type: str
    implementation: str
    fused_components: tuple[str, ...]
    helper: str
    single_op: bool
    source: str


def _rows() -> list[Row]:
    rows = []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        cells = line.split("\t")
        assert len(cells) == FIELDS, f"{CORPUS.name}: {FIELDS} tab-separated fields expected: {line[:80]}"
        name, platform, kernel_type, implementation, fused, helper, single_op, source = cells
        assert single_op in ("", "yes"), f"{CORPUS.name}: single_op is 'yes' or empty: {line[:80]}"
        rows.append(
            Row(
                name,
                platform,
                kernel_type,
                implementation,
                tuple(filter(None, fused.split(","))),
                helper,
                single_op == "yes",
                source,
            )
        )
    return rows


ROWS = _rows()


@pytest.fixture(autouse=True)
def _builtin_rules_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RULES_ENV, raising=False)


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.name[:60])
def test_corpus_name_classifies_as_expected(row: Row) -> None:
    result = classify(row.name, row.platform)
    got = (result.kernel_type, result.implementation, result.fused_components, result.helper, result.single_op)
    assert got == (row.kernel_type, row.implementation, row.fused_components, row.helper, row.single_op), row.source


def test_corpus_is_large_unique_and_uses_known_words() -> None:
    assert len(ROWS) >= MIN_ROWS
    assert len({r.name for r in ROWS}) == len(ROWS)
    for row in ROWS:
        assert row.platform in ("AMD", "NVIDIA")
        assert row.kernel_type in KERNEL_TYPES and set(row.fused_components) <= set(KERNEL_TYPES)
        assert row.helper in ("", *HELPER_ROLES) and row.source


def test_corpus_covers_every_type_and_role() -> None:
    assert {r.kernel_type for r in ROWS} == set(KERNEL_TYPES)
    assert {r.helper for r in ROWS} - {""} == set(HELPER_ROLES)


def test_every_builtin_rule_decides_some_corpus_name() -> None:
    data = tomllib.loads(BUILTIN_RULES.read_text(encoding="utf-8"))
    rule_ids = {r["id"] for table in ("rule", "inductor_op") for r in data[table] if not r.get("fused_only")}
    used = {classify(r.name, r.platform).rule for r in ROWS}
    assert rule_ids - used == set()
    fused_only = {r["type"] for r in data["inductor_op"] if r.get("fused_only")}
    assert fused_only <= {t for r in ROWS if r.name.startswith("triton_") for t in r.fused_components}


def test_every_single_op_rule_marks_some_corpus_name() -> None:
    for rule in name_rules("").single_op["unknown"]:
        assert any(rule.matcher.matches(r.name.lower()) for r in ROWS if r.single_op), rule.id


def _launching_ops() -> list[str]:
    """Real launching ops, at least one per type an op rule gives (asserted): every op context is tried."""
    data = tomllib.loads(BUILTIN_OP_RULES.read_text(encoding="utf-8"))
    ops = ["aten::miopen_convolution", "aten::cudnn_convolution", "aten::conv2d", "aten::embedding", "aten::to"]
    ops += ["aten::mm", "aten::scaled_dot_product_attention", "c10d::allreduce_", "aten::layer_norm", "aten::rms_norm"]
    ops += ["aten::batch_norm", "aten::group_norm", "aten::softmax", "_C::silu_and_mul", "aten::silu", "aten::gelu"]
    ops += ["_C::rotary_embedding", "_C::scaled_fp8_quant", "aten::sort", "aten::cumsum", "aten::fill_", "aten::cat"]
    ops += ["aten::sum", "aten::add_"]
    assert {type_from_op("Other", op, "")[0] for op in ops} == {r["type"] for r in data["op"]}
    return ops


@pytest.mark.parametrize("op", _launching_ops())
def test_a_named_kernel_keeps_its_type_whatever_op_launches_it(op: str) -> None:
    """The name wins over the launching op: only a name that says nothing (Other) is typed by its op."""
    for row in ROWS:
        if row.kernel_type != "Other":
            assert type_from_op(row.kernel_type, op, op) == (row.kernel_type, "name"), (row.name, op)


def test_layout_conversions_are_copy_work() -> None:
    """nchwToNhwc, nhwcToNchw, batched_transpose and other transposes are MemCopy with the layout role, never the op
    they serve (a convolution launches them)."""
    layout = [r for r in ROWS if r.helper == LAYOUT_ROLE]
    assert len(layout) >= 5
    assert {r.kernel_type for r in layout} == {"MemCopy"}
    names = " ".join(r.name.lower() for r in layout)
    assert all(word in names for word in ("nchwtonhwc", "nhwctonchw", "batched_transpose", "::transpose<"))
