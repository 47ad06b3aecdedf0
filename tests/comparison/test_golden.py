"""Refactors and speed-ups change no finding: `compare` gives byte for byte the JSON recorded in tests/golden for
the sample pairs and every pairing of the shared traces (those skip where ../shared is absent).

After an intended change of findings: `python -m tests.golden.pairs --record`, and review the diff of
tests/golden/full/*.json.gz (the samples and the cross-vendor pairs) in the same commit."""

from __future__ import annotations

import pytest
from builders import shared_absent
from golden import pairs


def test_the_sample_pairs_give_the_recorded_json() -> None:
    assert pairs.check(pairs.sample_pairs()) == []


def test_every_pairing_of_the_shared_traces_gives_the_recorded_json(shared_comparisons) -> None:
    """The comparisons are made once for this check and tests/detect/test_workload.py (conftest.py)."""
    shared = shared_comparisons
    if not shared:
        pytest.skip(shared_absent("../shared/traces"))
    differ = pairs.differing(shared.items())
    assert differ == [], f"{len(differ)} of {len(shared)} pairs differ from tests/golden (first: {differ[:5]})"


def test_the_recording_covers_every_pair() -> None:
    recorded = set(pairs.recorded())
    assert {name for name, _, _ in [*pairs.sample_pairs(), *pairs.shared_pairs()]} <= recorded
