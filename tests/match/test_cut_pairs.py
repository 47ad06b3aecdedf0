"""Matched groups cut at different places: judged by where their alignment leaves one side unaligned."""

import numpy as np
import pytest

from fusion.match.cut_pairs import cut_differently

LAYER = list(range(1, 11))
STEP = LAYER * 5
MAX_FUSED_RUN = 8


def codes(values):
    return np.array(values, dtype=np.int32)


@pytest.mark.parametrize("part", [STEP[:30], STEP[20:], STEP[10:40]], ids=["start", "end", "middle"])
def test_part_of_a_step_against_the_whole_step_is_cut(part):
    assert cut_differently(codes(part), codes(STEP), MAX_FUSED_RUN)
    assert cut_differently(codes(STEP), codes(part), MAX_FUSED_RUN)


def test_fusions_inside_the_step_are_not_a_cut():
    fused = [c for c in STEP if c not in (4, 5)]  # two kernels of every layer are one fused kernel elsewhere
    assert not cut_differently(codes(fused), codes(STEP), MAX_FUSED_RUN)
    assert not cut_differently(codes(STEP), codes(STEP), MAX_FUSED_RUN)


def test_a_surplus_up_to_a_fused_run_is_not_a_cut():
    assert not cut_differently(codes(STEP[:-MAX_FUSED_RUN]), codes(STEP), MAX_FUSED_RUN)
    assert cut_differently(codes(STEP[: -MAX_FUSED_RUN - 1]), codes(STEP), MAX_FUSED_RUN)
