"""Stage 8, report: a Comparison as strict JSON, text or CSV (`render`), one trace's summary (`summary`), and the
efficiency of op calls as text (`efficiency`).

Reads results, never recomputes a finding.

May import: fusion.comparison and everything below it.
"""
