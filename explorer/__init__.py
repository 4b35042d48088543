"""The Streamlit explorer's building blocks (the pages in pages/ lay them out).

    figures.py   Plotly figure builders: plain functions returning go.Figure (no Streamlit)
    canvas.py    drawing / upload preprocessing to a 28x28 MNIST-style image (no Streamlit)
    compute.py   pure computations for the pages: one input's trace, rotation study, parity sets
    data.py      MNIST and the bundled example digits, memoised per process (no Streamlit)
    jobs.py      background training jobs: a process-wide registry, threads that never call st.*
    loaders.py   st.cache_resource / st.cache_data wrappers around the above
    ui.py        small *_ui() helpers that draw widgets and return plain values
    views.py     groups of charts that several pages draw
"""
