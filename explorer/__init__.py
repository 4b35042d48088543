"""The Streamlit explorer's building blocks (the pages in pages/ lay them out; analyses live in ponder.analysis.studies).

    navigation.py     the page registry: each page's script, title, icon and link parameters (no Streamlit)
    style.py          chart style: colours, step axes, layout, labelled rules, the prior trace
    figures.py        Plotly figures of halting: prior, one input's steps, training curves, overlays
    study_figures.py  Plotly figures of the studies: λp sweep, rotation study, parity by difficulty
    canvas.py         drawing / upload preprocessing to a 28x28 MNIST-style image (no Streamlit)
    ood.py            ink statistics: does a drawing look like MNIST's training digits? (no Streamlit)
    digits.py         MNIST and the bundled example digits, memoised per process (no Streamlit)
    inputs.py         typed text to numbers / tensors: angle lists, parity vectors (no Streamlit)
    tables.py         table rows and tooltip text from run cards, a job's time left (no Streamlit)
    jobs.py           a background training job: its runs in a thread that never calls st.*, snapshots
    job_registry.py   the process-wide registry of jobs: limits, submit, finding a job again
    loaders.py        st.cache_resource / st.cache_data wrappers around the above
    ui.py             small *_ui() helpers that draw widgets and return plain values
    pickers.py        the pickers: a model or runs, a checkpoint, a sweep folder, the input digit and its rotation
    forms.py          the sidebar forms: train, sweep, import a run (*_ui(), plain values out)
    runs_page.py      the Runs page's widgets: the table of runs, the picker, export / rename / delete
    views.py          one input's panels: the answer, the per-step charts, stepping through the steps
    job_views.py      a training job's progress, result and Cancel; coming back to it after a reload
    sweep_views.py    λp sweep results: rows from a job, cards or a sweep folder, their table and charts
"""
