"""The parallel run's work units named in tests/conftest.py exist: a name left behind by a renamed file or test
would silently stop grouping its tests or handing its unit out first."""

from __future__ import annotations

from pathlib import Path

from conftest import LONGEST_FIRST, WORK_UNITS

ROOT = Path(__file__).resolve().parents[1]


def test_every_named_work_unit_is_a_test_file_or_a_shared_unit() -> None:
    named = set(WORK_UNITS.values())
    for unit in [*WORK_UNITS, *LONGEST_FIRST]:
        assert unit in named or (ROOT / unit).is_file(), unit
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
