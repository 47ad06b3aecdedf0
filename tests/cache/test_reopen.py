"""Re-opening an analysed pair from the caches (fusion.cache.reopen): the --no-cache output, without pandas."""

from __future__ import annotations

import subprocess
import sys

from builders import PROJECT, SAMPLES
from test_faults import compare_json

from fusion import settings
from fusion.cache import reopen

PAIR = [str(SAMPLES / "vllm_moe_full_graph" / name) for name in ("amd.json.gz", "nvidia.json.gz")]
_NO_PANDAS = """
import sys
from fusion.__main__ import main
code = main(["compare", *sys.argv[1:3], "--format", "json"])
assert "pandas" not in sys.modules and "pyarrow" not in sys.modules, "the re-open imported pandas"
sys.exit(code)
"""


def test_a_cold_reopen_prints_the_no_cache_output_without_pandas() -> None:
    code, expected_out, expected_err = compare_json("--no-cache")
    assert code == 0 and compare_json()[1] == expected_out  # fills the table and result caches
    done = subprocess.run(
        [sys.executable, "-c", _NO_PANDAS, *PAIR],
        capture_output=True,
        text=True,
        cwd=PROJECT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(PROJECT), "FUSION_CACHE_DIR": str(settings.cache_dir())},
    )
    assert done.returncode == 0, done.stderr
    assert (done.stdout, done.stderr) == (expected_out, expected_err)


def test_a_selected_phase_or_a_missing_entry_takes_the_ordinary_path() -> None:
    """cached_json answers only for every phase and a complete cache; the command's output is the same."""
    params = {"min_group_size": 50, "keep_unlaunched": False, "phase": "all"}
    assert reopen.cached_json(*PAIR, params) is None  # empty cache
    compare_json()
    assert reopen.cached_json(*PAIR, params) is not None
    assert reopen.cached_json(*PAIR, {**params, "phase": "decode"}) is None
    assert reopen.cached_json(*PAIR, {**params, "min_group_size": 10}) is None
    for entry in settings.cache_dir().glob("*.fxr"):
        entry.unlink()
    assert reopen.cached_json(*PAIR, params) is None
