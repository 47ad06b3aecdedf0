"""Stage 6, efficiency: FLOPs, bytes and achieved rates of op calls, against the GPU's peaks, side by side.

In: the op calls of fusion.match.op_calls (each kernel attributed to its top-level op call, as the op-level
comparison does) and their recorded shapes (the model's op_shapes / op_top_shapes), the GPUs' deviceProperties,
and for a pair the aligned calls and the findings. Out: `rates.trace_rates` per op call and per op signature of
one trace (time, TFLOP/s, TB/s, arithmetic intensity, % of peak and of bandwidth, bound); `pair.op_efficiency`
the aligned calls of two traces side by side, ranked by the time a side would save at the other side's
efficiency, and the findings that share those calls. `work` counts the work of one call from its shapes (pure),
`peaks` reads the GPU peak table (gpu_peaks.toml, and the user's FUSION_GPU_PEAKS file).

May import: fusion.match, fusion.classify, fusion.model, fusion.loader and the top-level modules (result,
settings, errors). fusion.detect is not needed: findings arrive as fusion.result types.
"""
