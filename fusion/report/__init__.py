"""Stage 8, report: a Comparison as strict JSON, text or CSV (`render`), one trace's summary (`summary`), the
efficiency of op calls as text (`efficiency`), and both traces on one aligned timeline (`timeline`), written for
the Perfetto UI (`perfetto`).

Reads results, never recomputes a finding.

May import: fusion.comparison and everything below it.
"""
