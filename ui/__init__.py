"""The dashboard's Streamlit glue, beside app.py and pages/ (the engine, fusion/, never imports it).

- state: the view and its URL (no streamlit), text: escaping per display sink and number text,
  charts: Plotly figures and colours, tables: DataFrames the pages show and export (these three
  without streamlit too);
- batch: the Batch page's folders, tables and row links (without streamlit);
- data: the cached data layer (traces, comparisons, uploads);
- widgets: shared widgets and `page()`, the call every page starts with.
"""
