"""Train: a sidebar form starts a background job; the page polls it live and saves the run."""
import streamlit as st

from explorer.app import forms, job_views, loaders, train_form, train_views, ui, watch_views
from explorer import navigation
from explorer.jobs.limits import JobLimitError, fmt_duration
from ponder.config import ConfigError
from ponder.tasks import get_task

ui.app_guard(__file__)
st.title("Train a PonderNet")
registry, session = loaders.job_registry(), ui.session_id()

if (shown := registry.get(st.query_params.get("job"), "train")) is not None:    # a reload: the form shows its job
    train_form.keep_job_settings(shown.snapshot().runs[0].name, shown.snapshot().runs[0].config)
task = forms.task_ui()
busy = registry.busy_message(session, "train")
(request, settings), refused = train_form.train_form_ui(task, busy), False
if request is not None:
    refused = True
    if get_task(request[1].task).uses_data and loaders.mnist()[0] is None:
        st.error(loaders.mnist()[1])
    else:
        try:
            started = registry.submit(session, [request], kind="train", watch=watch_views.watched_input(request[1]))
            st.query_params["job"] = started.id
            st.rerun()                                  # the form redrawn for a running job: Start disabled
        except (JobLimitError, ConfigError) as e:
            st.error(ui.error_text(e))

job, note, who = job_views.attach_job_ui(registry, session, "train")
if busy and not refused and not (job and job.active):
    st.warning(busy)
if job is None:
    train_views.intro_ui(task, registry.max_seconds)
    if get_task(task).uses_data and loaders.mnist()[0] is None:
        ui.mnist_missing_ui(loaders.mnist()[1], "train_download")
    train_views.prior_preview_ui(**settings, task=task)
    job_views.recent_jobs_ui(registry.recent("train"), None, key="train")
    st.stop()

train_views.step_ui(job.snapshot().runs[0].config, job.snapshot().runs[0].name)
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
