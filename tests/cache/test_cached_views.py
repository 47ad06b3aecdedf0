"""A comparison served from the result cache carries the traces it compared, not the whole inputs."""

from __future__ import annotations

from pathlib import Path

from builders import EagerTrace, Launch, Op

from fusion.cache.results import ResultCache, cached_compare
from fusion.classify.trace import load


def test_a_cached_comparison_keeps_its_kernels_without_a_launch_event_left_out(tmp_path: Path) -> None:
    """A cache hit attached the loaded traces, so the dashboard showed 1,516 kernels compared (all of them) for
    Qwen's 1,053 on a second visit, and kernel indices pointed into the wrong table."""
    traces = []
    for platform in ("AMD", "NVIDIA"):
        trace = EagerTrace(platform, first_correlation=100)
        trace.unlaunched("previous_step_tail", correlation=40, dur=50.0)
        trace.run(*(Op("aten::mm", [Launch("gemm", dur=10.0)]) for _ in range(10)))
        path = tmp_path / f"{platform}.json"
        path.write_bytes(trace.data())
        traces.append(load(path))
    cache = ResultCache(tmp_path / "cache")
    for keep, kernels in ((False, 10), (True, 11)):
        first = cached_compare(*traces, cache=cache, keep_unlaunched=keep)
        again = cached_compare(*traces, cache=cache, keep_unlaunched=keep)
        assert again is not first
        assert first.trace1.kernel_count == again.trace1.kernel_count == kernels
        assert again.trace1.warnings == first.trace1.warnings
