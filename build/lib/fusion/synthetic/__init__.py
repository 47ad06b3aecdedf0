"""Generated AMD/NVIDIA trace pairs with known differences and their ground truth, for tests and benchmarks.

`pairs` writes a vLLM-like MoE decode pair (full graphs, piecewise graphs or eager), `phases` a serving pair with
prefill and decode steps and a training trace. `python -m fusion.synthetic OUT_DIR ...` writes a pair.

Imports nothing of the project: what it writes is read back through the loader like any trace.
"""
