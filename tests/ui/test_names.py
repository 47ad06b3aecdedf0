"""Long kernel names shortened for tables, and tables' numbers before their names (issue 39 #1)."""

from __future__ import annotations

import pandas as pd

from ui.tables import fitted_height, numbers_first
from ui.text import ELLIPSIS, SHORT_NAME_CHARS, short_name, top_of

SILU = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::silu_kernel"
    "(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::"
    "{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::silu_kernel"
    "(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::"
    "{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)"
)
TENSILE = (
    "Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64_MI16x16x1_SN_LDSB1_AFC1" + "_X1" * 60 + "_WG32_8_1"
)


def test_a_short_name_stays_as_it_is() -> None:
    assert short_name("attn_fwd") == "attn_fwd"
    assert short_name("void f<1>(int)") == "void f<1>(int)"


def test_a_long_name_keeps_its_family_template_arguments_and_end() -> None:
    shown = short_name(SILU)
    assert len(shown) <= SHORT_NAME_CHARS
    assert shown.startswith("vectorized_elementwise_kernel<4, silu_kernel")  # family and the functor it runs
    assert "at::native::" not in shown and not shown.startswith("void ")
    tensile = short_name(TENSILE)
    assert len(tensile) == SHORT_NAME_CHARS and ELLIPSIS in tensile
    assert tensile.startswith("Cijk_Alik_Bljk_B_BS_BH_Bias_HA_S_SAV_UserArgs_MT256x128x64")  # the tile
    assert tensile.endswith("_WG32_8_1")


def test_two_names_of_one_family_stay_apart() -> None:
    other = SILU.replace("vectorized_elementwise_kernel<4", "vectorized_elementwise_kernel<8")
    assert short_name(other) != short_name(SILU)


def test_numbers_come_before_names() -> None:
    frame = pd.DataFrame({"kernel name": ["a"], "type": ["GEMM"], "count": [1], "time (ms)": [0.5]})
    assert numbers_first(frame) == ["count", "time (ms)", "kernel name", "type"]


def test_a_ranked_table_caption_is_a_sentence() -> None:
    """Issue 39 #7: it read 'The 10 ops with the largest time gap of 33.'"""
    assert top_of(10, 33, "ops", "with the largest time gap") == "The 10 of 33 ops with the largest time gap"


def test_a_filtered_table_is_as_tall_as_its_rows() -> None:
    """Issue 39 #6: a filter leaving 2 rows showed them above 12 blank ones (a fixed 520 px)."""
    assert fitted_height(2, 520) == 38 + 2 * 35 + 2
    assert fitted_height(0, 520) == 38 + 35 + 2
    assert fitted_height(1000, 520) == 520
