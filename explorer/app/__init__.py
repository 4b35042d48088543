"""The explorer's Streamlit parts: cached loaders, *_ui() widget helpers and page sections (the only modules of
explorer/ that import Streamlit)."""
