"""Caches: an optimisation, never a source of truth. Every entry is sealed (checksummed), verified on read and
rebuilt when anything is off.

`store` keeps uploaded traces by content digest; `tables` keeps loaded traces' tables (Parquet); `results`
keeps finished comparisons and their JSON (`reopen` prints a cached JSON report without importing the
analysis); `sealed` is the entry format; `loading` loads a pair of traces through the table cache, in two
processes or threads.

May import: fusion.report, fusion.comparison and everything below them.
"""
