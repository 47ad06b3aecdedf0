"""Stage 7, report: a Comparison as strict JSON, text or CSV (`render`), and one trace's summary (`summary`).

Reads results, never recomputes a finding.

May import: fusion.comparison and everything below it.
"""
