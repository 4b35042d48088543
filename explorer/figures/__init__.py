"""Plotly figures of halting, studies and "worth it?": plain functions of numbers returning go.Figure (no Streamlit)."""
