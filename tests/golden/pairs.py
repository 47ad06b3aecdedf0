"""The before/after check of `compare`: the canonical JSON of every sample pair and every pairing of the shared
real traces, recorded once and compared byte for byte after a change that must not change a finding.

    python -m tests.golden.pairs --record      # write tests/golden/*.json.gz and digests.json (after an intended change)
    python -m tests.golden.pairs --check       # compare today's output with the recording, name what differs

The JSON is `Comparison.to_dict()` with sorted keys (key order was never promised; list order is). Traces are
named by their path relative to the repository or to ../shared/traces, so the recording does not depend on
where the checkout is.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import itertools
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SAMPLES = REPO / "sample_traces"
SHARED = REPO.parent / "shared" / "traces"
DIGESTS = HERE / "digests.json"
FULL_DIR = HERE / "full"
"""Full JSON (gzip) of the pairs a reader most often wants to diff: the samples and the cross-vendor pairs."""
CROSS_VENDOR = ("bert_small", "falconsai_nsfw", "qwen1.5-0.5b", "timesformer")
KINETO_SUFFIXES = (".json", ".json.gz")


def sample_pairs() -> list[tuple[str, Path, Path]]:
    return [
        (f"sample/{d.name}", d / "amd.json.gz", d / "nvidia.json.gz") for d in sorted(SAMPLES.iterdir()) if d.is_dir()
    ]


def shared_traces() -> list[Path]:
    """One Kineto trace per shared folder (not capture traces, not rocprofv3 output); [] without ../shared."""
    if not SHARED.is_dir():
        return []
    out = []
    for folder in sorted(p for p in SHARED.iterdir() if p.is_dir() and p.name != "LICENSES"):
        files = sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(KINETO_SUFFIXES))
        if files and not folder.name.startswith("tl_rocprofv3"):
            out.append(files[0])
    return out


def shared_pairs() -> list[tuple[str, Path, Path]]:
    traces = shared_traces()
    return [(f"shared/{a.parent.name}~{b.parent.name}", a, b) for a, b in itertools.combinations(traces, 2)]


def cross_vendor_pairs() -> list[tuple[str, Path, Path]]:
    return [
        (
            f"shared/tl_h100_{m}~tl_mi300_{m}",
            *(next((SHARED / f"tl_{g}_{m}").glob("*.json.gz")) for g in ("h100", "mi300")),
        )
        for m in CROSS_VENDOR
        if (SHARED / f"tl_h100_{m}").is_dir()
    ]


def compared(path1: Path, path2: Path, loaded: dict[Path, Any] | None = None) -> Any:
    """The pair's `compare`; `loaded` keeps each trace loaded once (compare never changes a trace, so a trace
    compared before gives the same result as a fresh load: the check holds either way)."""
    from fusion import compare, load

    def trace(path: Path) -> Any:
        if loaded is None:
            return load(path, label=_label(path))
        if path not in loaded:
            loaded[path] = load(path, label=_label(path))
        return loaded[path]

    return compare(trace(path1), trace(path2))


def canonical(comparison: Any) -> bytes:
    """A comparison as canonical JSON."""
    return orjson.dumps(comparison.to_dict(), option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)


def _label(path: Path) -> str:
    for root in (REPO, SHARED):
        if path.is_relative_to(root):
            return str(path.relative_to(root))
    return path.name


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def full_names() -> set[str]:
    return {name for name, _, _ in sample_pairs()} | {name for name, _, _ in cross_vendor_pairs()}


def _file_of(name: str) -> Path:
    return FULL_DIR / (name.replace("/", "__") + ".json.gz")


def all_pairs() -> Iterator[tuple[str, Path, Path]]:
    yield from sample_pairs()
    yield from shared_pairs()


def record() -> None:
    digests = {}
    FULL_DIR.mkdir(exist_ok=True)
    keep = full_names()
    for name, a, b in all_pairs():
        data = canonical(compared(a, b))
        digests[name] = digest(data)
        if name in keep:
            _file_of(name).write_bytes(gzip.compress(data, mtime=0))
        print(name, digests[name][:12], flush=True)
    DIGESTS.write_bytes(orjson.dumps(digests, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n")


def recorded() -> dict[str, str]:
    return orjson.loads(DIGESTS.read_bytes())


def check(pairs: Iterable[tuple[str, Path, Path]] | None = None) -> list[str]:
    """Names of the pairs (default: all) whose JSON differs from the recording (one not recorded differs)."""
    loaded: dict[Path, Any] = {}
    chosen = all_pairs() if pairs is None else pairs
    return differing((name, compared(a, b, loaded)) for name, a, b in chosen)


def differing(comparisons: Iterable[tuple[str, Any]]) -> list[str]:
    """Names of the comparisons whose canonical JSON differs from the recording (one not recorded differs)."""
    want = recorded()
    return [name for name, comparison in comparisons if want.get(name) != digest(canonical(comparison))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", action="store_true")
    mode.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    if args.record:
        record()
        return 0
    differ = check()
    for name in differ:
        print(f"differs: {name}")
    print(f"{len(differ)} of {sum(1 for _ in all_pairs())} pairs differ from the recording")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
