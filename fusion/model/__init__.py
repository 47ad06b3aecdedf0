"""Stage 2, model: TraceRecords -> Trace, the kernel table with what the trace itself records about each kernel.

In: the loader's TraceRecords. Out: `trace.Trace` (kernels sorted by start, a names table), with each kernel's
launching op, module and the shapes its ops recorded (`ops`), phase and step (`phases`); `columns` names the
kernel table's columns. `build.read(source)` reads a file and builds its model; the kernels are not typed yet
(fusion.classify). `capture` ties the kernels of graph replays to the ops of a graph-capture trace
(`capture_files`: where those traces are).

May import: fusion.loader and the top-level modules (errors, settings, vocabulary).
"""
