"""λp sweep: the geometric prior at a glance, then runs trained at several λp (or the shipped sweep)."""
import streamlit as st

from explorer.figures import halting as figures
from explorer.app import forms, job_views, loaders, sweep_views, ui
from explorer.jobs.limits import JobLimitError, fmt_duration
from ponder.config import ConfigError
from ponder.store.runs import runs_root
from ponder.analysis.studies import prior_mean
from ponder.tasks import get_task

ui.app_guard(__file__)
st.title("λp sweep")
registry, session = loaders.job_registry(), ui.session_id()

c1, c2 = st.columns([1, 2.2], gap="large")
with c1:
    lp = ui.lambda_p_ui()
    n = st.number_input("N (most steps)", 1, 200, 20, key="sweep_prior_n")
    st.markdown(f"Prior mean **1/λp = {1 / lp:.2f}** steps; truncated at N = {n}: "
                f"**{prior_mean(lp, n):.2f}**.")
with c2:
    ui.chart(figures.prior_fig(lp, n), f"The geometric prior λp(1−λp)^(n−1) for λp = {lp:g}, renormalised over N "
             f"steps: the halting distribution the KL term pulls the network towards; dashed line at its mean 1/λp"
             f"{' (off the axis here: 1/λp > N)' if 1 / lp > n + 0.5 else ''}; dotted, where it differs, at the "
             f"mean truncated at N.")

st.subheader("Train a sweep")
st.caption("Short runs (MNIST or parity), one per λp and seed, trained one after the other in the background (your "
           "one job) by ponder.sweeps.run into a sweep folder in the runs folder, as `python -m ponder sweep` does (which "
           "also runs on Ray); a run that diverges is shown as failed with the reason, and the sweep goes on. The job "
           f"stops at the server's cap of {fmt_duration(registry.max_seconds)} (PONDER_MAX_JOB_SECONDS); a reload "
           "comes back to it, and every tab shows the machine's running sweep, which anyone can cancel.")
form, started = forms.sweep_form_ui(sweep_views.shipped_reader()), None
if form and get_task(form[1].task).uses_data and loaders.mnist()[0] is None:     # said before it trains, not per run
    st.session_state["_sweep_needs_mnist"], form = True, None
if st.session_state.get("_sweep_needs_mnist") and (no_mnist := loaders.mnist()[1]):
    st.error("An MNIST sweep needs the MNIST training set; a parity sweep trains without it.")
    ui.mnist_missing_ui(no_mnist, "sweep_download")
if form:
    try:
        started = registry.submit(session, [], kind="sweep", root=runs_root() / form[0], plan=form[1])
        st.success(f"Sweep started into runs/{form[0]}: {len(form[1].trials())} runs, one after the other; its "
                   "progress and results are under **Results** below.", icon=":material/arrow_downward:")
    except (JobLimitError, ConfigError) as e:
        st.error(ui.error_text(e))

st.subheader("Results")
job, note, who = job_views.attach_job_ui(registry, session, "sweep", started)     # kept in the URL: a reload comes back
sources = (["The sweep job"] if job else []) + ["Shipped sweep (assets/sweep-lp*)", "Your sweeps (runs/)"]
source = st.radio("Show", sources, horizontal=True, key=f"sweep_source_{bool(job)}")
if source == "The sweep job":
    @st.fragment(run_every=2.0 if job.active else None)
    def live_results():
        view = job.snapshot()
        if note:
            st.caption(job_views.note_line(note, view))
        if view.active:
            job_views.job_ui(view, lambda: job.cancel(who), key="sweep_job")
        sweep_views.sweep_results_ui(sweep_views.job_sweep_rows(view), view.runs[0].config.max_steps, key="sweep_live")
        if not view.active and st.session_state.get("_seen_done_sweep") != view.id:
            st.session_state["_seen_done_sweep"] = view.id
            st.rerun()
    live_results()
elif source.startswith("Your sweeps"):
    sweep_views.saved_sweeps_ui()
else:
    entries = [e for e in loaders.models() if e.source == "shipped" and e.path.name.startswith("sweep-")]
    sweep_views.sweep_results_ui(sweep_views.entry_sweep_rows(entries),
                                 max((e.record.max_steps for e in entries), default=20))
