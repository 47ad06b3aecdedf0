"""Many pairs: `run` compares each pair as one task (a local process pool, or Ray when asked) and writes the
batch result; `results` reads a batch result back as plain data.

May import: fusion.cache, fusion.report, fusion.comparison and everything below them.
"""
