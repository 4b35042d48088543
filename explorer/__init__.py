"""The Streamlit explorer's building blocks (the pages in pages/ lay them out; analyses live in ponder.analysis).
Grouped by role; only app/ imports Streamlit (tests/test_imports.py checks it):

    app/          the Streamlit parts: cached loaders, *_ui() widget helpers (pickers, forms, the train form made
                  from each task's options), one input's panels, a job's and a sweep's views, "worth it?"
    figures/      Plotly figures, plain functions of numbers: style, halting, studies, worth
    jobs/         background training: a job's runs in a thread that never calls st.*, the registry, the limits
    drawing/      a drawing or an upload to a 28x28 MNIST-style image, ink statistics, the example digits
    navigation.py the page registry: each page's script, title, icon and link parameters
    links.py      which parameters of a shared link a page keeps
    tables.py     table rows and tooltip text from run cards, a job's time left
    inputs.py     typed text to numbers / tensors: angle lists, parity vectors
    disk_cache.py study results kept on disk per model;  watch.py one input watched while a run trains
    narrow.py     the sidebar on a narrow screen
"""
