"""Stage 7, compare: run the stages for a pair of traces, whole and per phase, and build the Comparison.

In: two classified Traces. Out: `result.Comparison`. `pair.compare` matches, aligns and detects; `ops` compares
the op calls and builds the op table; `phases` adds the per-phase section; the efficiency of the aligned op
calls (fusion.efficiency) is the Comparison's `efficiency`.

May import: every stage above it (efficiency, detect, match, classify, model, loader) and the top-level modules.
"""
