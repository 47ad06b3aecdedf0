"""Stage 4, match: what corresponds to what across the two traces.

In: two classified Traces. Out: correlation groups (`groups`: a graph replay is one group), pairs of matched
groups (`pairing`), pairs of aligned top-level op calls (`op_calls`), stream windows and kernel-by-kernel
alignments (`align`, with the compiled Needleman-Wunsch in `dp`), and the checks on matched pairs (`cut_pairs`,
`pair_checks`).

May import: fusion.classify, fusion.model, fusion.loader and the top-level modules.
"""
