"""Train: a sidebar form starts a background job; the page polls it live and saves the run."""
import streamlit as st

from explorer import forms, loaders, ui, views
from explorer.jobs import JobLimitError
from ponder.config import ConfigError

ui.app_guard("train")
st.title("Train a PonderNet")
registry, session = loaders.job_registry(), ui.session_id()

task = forms.task_ui()
request, refused = forms.train_form_ui(task), False
if request is not None:
    refused = True
    if request[1].task == "mnist" and loaders.mnist()[0] is None:
        st.error(loaders.mnist()[1])
    else:
        try:
            registry.submit(session, [request], kind="train")
            refused = False
        except (JobLimitError, ConfigError) as e:
            st.error(ui.one_line(e))

busy = registry.busy_message(session)
job = registry.session_job(session, "train")
if busy and not refused and not (job and job.active):
    st.warning(busy)
if job is None:
    st.markdown(
        "Set the hyperparameters in the sidebar and press **Start training**. The defaults train an MNIST "
        "PonderNet to about 99% test accuracy in 30–45 seconds on 2 CPU cores (parity: the small n = 8 "
        "preset in 1–1.5 minutes; measured, see the README). Training runs in the background: you can switch pages and come back; "
        "**Cancel** stops it within a second and keeps what was trained as a partial run. Finished runs "
        "are saved to the runs folder and appear in every model picker.")
    if task == "mnist" and loaders.mnist()[0] is None:
        ui.mnist_missing_ui(loaders.mnist()[1], "train_download")
    st.stop()

view = views.job_live_ui(registry, session, "train", every=1.0, key="train")
if view is not None and not view.active:
    st.page_link("pages/digit.py", label="Try the new model on a digit", icon=":material/draw:")
    st.page_link("pages/compare.py", label="Compare it with other runs", icon=":material/compare_arrows:")
