"""Stage 1, load: bytes in, columns out. The only place that parses a trace file.

In: a path, bytes or a binary stream (plain or gzip). Out: `kineto.TraceRecords`, the kernel columns (name, ts,
dur, correlation, stream, device), the CPU side as compact columns (runtime launches, op / annotation / module
ranges) and the facts the file states at its top level (platform, GPU). `reader` opens and inflates the input
and digests its bytes; `events` cuts the events array into pieces; `piece_scan` (compiled) and msgspec decode
them; `op_args` keeps the shapes args of cpu_ops (and, for graph captures, the kernel a launch names) as one
code per event; `cpu_events` and `kineto` collect the columns.

May import: fusion.errors, fusion.settings, fusion.compiled. Nothing of the later stages.
"""
