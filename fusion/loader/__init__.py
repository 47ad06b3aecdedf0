"""Stage 1, load: bytes in, columns out. The only place that parses a trace file.

In: a path, bytes or a binary stream (plain or gzip) of any supported format. Out: `kineto.TraceRecords`, the
kernel columns (name, ts, dur, correlation, stream, device; copies and memsets the GPU ran are rows too), the
CPU side as compact columns (runtime launches, op / annotation / module ranges) and the facts the file states
(platform, GPU, format). `formats` tells the format from the first bytes and picks the reader: `kineto`
(Chrome-trace JSON: `events` cuts the events array into pieces, `piece_scan` (compiled) and msgspec decode
them, `cpu_events` collects the CPU side), `rocprof` and `rocprof_csv` (rocprofv3; `json_walk` streams the
JSON, `demangle` names its symbols), `nsys` (Nsight Systems SQLite); `op_args` keeps the shapes args of cpu_ops (and, for graph captures, the kernel
a launch names) as one code per event; `assemble` gives those readers the common
columns; `devices` keeps one GPU of a multi-GPU file. `reader` opens and inflates the input and digests its
bytes.

May import: fusion.errors, fusion.settings, fusion.compiled, fusion.vocabulary. Nothing of the later stages.
"""
