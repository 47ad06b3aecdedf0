"""Tests import their helpers from this folder (builders.py and friends)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
