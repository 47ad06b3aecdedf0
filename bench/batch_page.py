"""Batch page cost on a large batch: reading the result folder, building its tables, one script run.

    python bench/batch_page.py --pairs 1000 --runs 3

Runs a real 3-pair batch of the bundled sample (AMD vs NVIDIA twice, AMD vs itself once), then
writes a batch of --pairs pairs by repeating its rows under new labels and ranks, and prints for
each run the time of `read_batch`, of the pair and finding tables, and of the Batch page under
AppTest (what the server spends before the browser can draw).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import orjson
import pandas as pd

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from streamlit.testing.v1 import AppTest  # noqa: E402

from fusion.batch import run as batch  # noqa: E402
from fusion.batch.results import read_batch  # noqa: E402
from ui import batch as batch_page  # noqa: E402
from ui.state import PAGES  # noqa: E402

SAMPLE = PROJECT / "sample_traces" / "vllm_moe_full_graph"
SEED_PAIRS = 3


def seed_batch(root: Path) -> Path:
    """A real batch: ranks 0-1 AMD vs NVIDIA, rank 2 AMD vs itself."""
    jobs = [
        batch.Job(
            str(SAMPLE / "amd.json.gz"),
            str(SAMPLE / ("amd.json.gz" if r == 2 else "nvidia.json.gz")),
            f"rank{r}",
            "seed",
            r,
        )
        for r in range(SEED_PAIRS)
    ]
    out = root / "seed"
    batch.run_batch(jobs, out, workers=1)
    return out


def repeated(seed: Path, out: Path, pairs: int) -> Path:
    """The seed's record and tables repeated to `pairs` pairs, each under its own label and rank."""
    out.mkdir(parents=True)
    record = orjson.loads((seed / batch.BATCH_FILE).read_bytes())
    record["pairs"] = [dict(record["pairs"][i % SEED_PAIRS], label=f"rank{i}", rank=i) for i in range(pairs)]
    (out / batch.BATCH_FILE).write_bytes(orjson.dumps(record))
    for name in (batch.SUMMARY_FILE, batch.FINDINGS_FILE):
        table = pd.read_parquet(seed / name)
        parts = [
            table[table["label"] == f"rank{i % SEED_PAIRS}"].assign(label=f"rank{i}", rank=i) for i in range(pairs)
        ]
        pd.concat(parts, ignore_index=True).to_parquet(out / name)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temp:
        root = Path(temp)
        os.environ["FUSION_CACHE_DIR"] = str(root / "cache")
        os.environ["FUSION_BATCH_DIR"] = str(root / "batches")
        folder = repeated(seed_batch(root), root / "batches" / "big", args.pairs)
        for _ in range(args.runs):
            started = time.perf_counter()
            result = read_batch(folder)
            read = time.perf_counter()
            batch_page.pair_table(result)
            batch_page.finding_table(result.findings)
            tables = time.perf_counter()
            app = AppTest.from_file(str(PROJECT / PAGES["batch"]), default_timeout=300)
            app.query_params["batch"] = "big"
            app.run()
            page = time.perf_counter()
            assert not app.exception and len(app.dataframe[0].value) == args.pairs
            print(
                f"{args.pairs} pairs ({len(result.summary):,} summary rows, {len(result.findings):,} findings): "
                f"read {read - started:.3f} s, tables {tables - read:.3f} s, Batch page script {page - tables:.2f} s"
            )


if __name__ == "__main__":
    main()
