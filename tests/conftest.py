"""Tests import their helpers from this folder (builders.py and friends), and never write to the user's cache."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(autouse=True)
def _private_cache_dirs(tmp_path_factory, monkeypatch) -> None:
    root = tmp_path_factory.mktemp("fusion-cache")
    monkeypatch.setenv("FUSION_CACHE_DIR", str(root / "tables"))
    monkeypatch.setenv("FUSION_STORE_DIR", str(root / "traces"))
