"""Background training jobs: a job's runs in a thread that never calls st.*, the process's registry, the limits
(no Streamlit)."""
