"""Op calls' string columns carry ints equal exactly where the strings are, so tables factorize ints, not strings."""

import numpy as np
import pandas as pd
import pytest
from builders import SAMPLES
from hypothesis import given
from hypothesis import strategies as st

from fusion import load
from fusion.match.op_calls import factorized, op_calls


@given(st.lists(st.sampled_from(["aten::mm", "aten::add", "", "aten::mm_", "vllm::attn"]), max_size=40), st.randoms())
def test_factorized_from_ids_is_pandas_factorize_of_the_strings(strings: list[str], rng) -> None:
    values = np.array(strings, dtype=object)
    first_seen = pd.factorize(values)[0]
    relabel = list(range(len(set(strings)) + 3))
    rng.shuffle(relabel)  # ids in any order and with gaps: only their equality may count
    ids = np.array([relabel[c] for c in first_seen], dtype=np.int64)
    codes, distinct = factorized(values, ids)
    expected_codes, expected = pd.factorize(values)
    assert np.array_equal(codes, expected_codes) and list(distinct) == list(expected)


@pytest.mark.parametrize("sample", ["eager_prefill", "vllm_moe_piecewise"])
def test_call_ids_are_equal_exactly_where_the_call_strings_are(sample: str) -> None:
    calls = op_calls(load(SAMPLES / sample / "amd.json.gz"), 1)
    assert len(calls) > 1
    for strings, ids in (
        (calls.ops, calls.op_ids),
        (calls.raw_ops, calls.raw_op_ids),
        (calls.modules, calls.module_ids),
    ):
        assert len(set(strings.tolist())) > 1 or strings[0] == ""
        pairs = set(zip(strings.tolist(), ids.tolist()))
        assert len(pairs) == len(set(strings.tolist())) == len(set(ids.tolist()))
