"""Train: a sidebar form starts a background job; the page polls it live and saves the run."""
import streamlit as st

from explorer import forms, job_views, loaders, navigation, ui
from explorer.limits import JobLimitError, fmt_duration
from ponder.config import ConfigError
from ponder.tasks import get_task

ui.app_guard(__file__)
st.title("Train a PonderNet")
registry, session = loaders.job_registry(), ui.session_id()

task = forms.task_ui()
request, refused, started = forms.train_form_ui(task), False, None
if request is not None:
    refused = True
    if get_task(request[1].task).uses_data and loaders.mnist()[0] is None:
        st.error(loaders.mnist()[1])
    else:
        try:
            started = registry.submit(session, [request], kind="train")
            refused = False
        except (JobLimitError, ConfigError) as e:
            st.error(ui.one_line(e))

job, note, who = job_views.attach_job_ui(registry, session, "train", started)
busy = registry.busy_message(session)
if busy and not refused and not (job and job.active):
    st.warning(busy)
if job is None:
    st.markdown(
        "Set the hyperparameters in the sidebar and press **Start training**. The defaults train an MNIST "
        "PonderNet to about 99% test accuracy in 30–45 seconds on 2 CPU cores (parity: the small n = 8 "
        "preset in 1–1.5 minutes; measured: docs/development.md). Training runs in the background: you can switch "
        "pages, reload or close the tab and come back (the address holds the job); **Cancel** stops training "
        "within a second (after the step running); what was trained is then saved as a partial run and measured "
        "on 2,000 test images, a few seconds more. The machine's running job shows in every tab, "
        f"and anyone can cancel it. A job trains for at most {fmt_duration(registry.max_seconds)} on this server "
        "(PONDER_MAX_JOB_SECONDS): then it stops and is saved as a partial run. Finished runs are saved to the "
        "runs folder and appear in every model picker.")
    if get_task(task).uses_data and loaders.mnist()[0] is None:
        ui.mnist_missing_ui(loaders.mnist()[1], "train_download")
    job_views.recent_jobs_ui(registry.recent("train"), None, key="train")
    st.stop()

view = job_views.job_live_ui(job, who, every=1.0, key="train", note=note)
job_views.recent_jobs_ui(registry.recent("train"), job.id, key="train")
saved = [r for r in view.runs if r.run_dir and not r.saved_elsewhere]
now = job_views.where_now(saved[-1])[0] if saved else None    # found by the run: renamed or deleted since?
if not view.active and now is not None:            # the newest saved run, on its task's first page
    run = saved[-1]
    t, name = get_task(run.config.task), job_views.run_name(str(now))
    if t.pages:
        st.page_link(navigation.BY_NAME[t.pages[0]].script, label=f"Try {name} on the {t.pages[0].capitalize()} page",
                     icon=":material/draw:", query_params={"model": name})
    st.page_link(navigation.BY_NAME["compare"].script, label="Compare it with other runs", icon=":material/compare_arrows:",
                 query_params={"models": name})
