"""A training job on the Train and λp sweep pages: its progress and phases, its result, Cancel, coming back
to a job after a reload (the address holds it), and the recent jobs (Streamlit; the jobs are explorer.jobs.job)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import numpy as np
import streamlit as st

from ponder.store.record import RunRecord
from ponder.analysis.unroll import near_chance
from ponder.tasks import TASKS
from ponder.store.runs import SWEEP

from ..figures import halting as figures
from .. import navigation, tables
from . import watch_views
from ..jobs.job import JobView, RunState, where_now
from ..jobs.limits import fmt_duration
from ..tables import plain
from .ui import chart


def _fmt_s(s: Optional[float]) -> str:
    if s is None or not np.isfinite(s):
        return "?"
    if 0 < s < 1:
        return "under 1 s"
    s = max(0, int(round(s)))
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


AGO = "{ago}"           # in a job's note: 'N s ago', counted when it is shown

AFTER_TRAINING = {"validating": "the final validation pass", "saving": "saving the run",
                  "evaluating": "measuring it on test data"}      # phases after the training loop (ponder.training.lifecycle)


def run_progress_ui(run: RunState, key: str, watch: tuple = (None, "")) -> None:
    """Progress bar, elapsed / remaining time, live curves and the current halting distribution; with a watched
    input (watch: (input, where it is from)), what the model does on it as it trains."""
    last = run.progress[-1] if run.progress else None
    frac = float(last["fraction"]) if last else 0.0
    if run.status == "running":
        now = time.time()
        elapsed = now - run.started if run.started else 0.0
        if run.phase in AFTER_TRAINING and last:          # training is over: no step estimate, say what follows
            st.progress(1.0, text=f"**{plain(run.name)}** · trained {last['step']:,} steps in "
                                  f"{_fmt_s(last['elapsed'])} · now {AFTER_TRAINING[run.phase]} · elapsed {_fmt_s(elapsed)}")
        else:
            mem = f"_eta_{key}_{run.started}"               # the time left shown before: it only counts down
            step, remaining = tables.training_eta(last, now, st.session_state.get(mem)) if last else ("first steps", None)
            st.session_state[mem] = (remaining, now)
            st.progress(min(max(frac, 0.0), 1.0),
                        text=f"**{plain(run.name)}** · {run.phase or 'starting'} · {step} · elapsed {_fmt_s(elapsed)}"
                             f" · training time left ≈ {_fmt_s(remaining) if remaining is not None else '…'}")
    else:
        run_result_ui(run)
    if not run.progress:
        return
    cfg = run.config
    c1, c2 = st.columns([2.2, 1])
    with c1:
        chart(figures.training_fig(run.progress, cfg.lambda_p, cfg.max_steps, regulariser=cfg.regulariser),
              "Live training curves: total loss = reconstruction + β·KL, batch and validation accuracy, "
              "and the batch's mean expected halting step against the prior's mean." + kl_note(last, cfg.beta),
              key=f"{key}_curves")
    with c2:
        chart(figures.halting_fig(last["halting"], cfg.lambda_p, title=f"Halting distribution at step {last['step']}",
                            max_ticks=10),
              "Mean learned p_n over the last batch (bars) against the geometric prior (line).",
              key=f"{key}_halt")
    watch_views.watch_ui(run.watched, watch[0], cfg.lambda_p, key, watch[1])


def kl_note(row: dict, beta: float) -> str:
    """Why the halting may sit far from the prior: what its KL costs in the loss now, against the answers' loss."""
    if row.get("reg") is None or row.get("rec") is None:
        return ""
    return (f" Now KL = {row['reg']:.2f} (how far the batch's halting is from the prior) costs β·KL = "
            f"{beta * row['reg']:.3f} against the answers' loss of {row['rec']:.3f}: with β = {beta:g} the halting "
            "moves away from the prior wherever that makes answers right.")


def saved_where(run: RunState) -> str:
    """A finished run's sentence on where it is: the name it was saved as, and what became of that run since (a
    rename, a delete, another run under its name: in any session), found by the run, not by its old name."""
    if not run.run_dir:
        return " Not saved."
    if run.saved_elsewhere:
        return f" Saved outside the runs folder, in **{plain(run.run_dir)}**."
    now, what = where_now(run)
    saved = plain(run_name(run.run_dir))
    if what == "there":
        return (f" Saved as **{saved}**, in the folder {plain(now.resolve())}. "
                f"{plain(tables.renamed(run.name, now.name))}").rstrip()
    if what == "renamed":
        return f" Saved as {saved}, **since renamed to {plain(run_name(str(now)))}** (in the folder {plain(now.resolve())})."
    if what == "replaced":
        return f" Saved as {saved}, which has **since been deleted or overwritten**: {saved} is another run now."
    return f" Saved as {saved}, which has **since been deleted**: it is in no model picker any more."


def run_result_ui(run: RunState) -> None:
    where = saved_where(run)
    rec = run.record or RunRecord(train={}, reason="", train_seconds=0.0)   # an ended run has its record
    t = rec.test
    acc = (f" Test accuracy {t.accuracy:.2%} on {t.n or '?'} samples, mean halting step "
           f"{t.mean_steps:.2f}." if t.accuracy is not None else "")
    budget = run.config.max_seconds if run.config is not None else None
    head = (f"**{plain(run.name)}**: {run.steps:,} steps in {_fmt_s(rec.train_seconds)} of training"
            f"{f' (budget {_fmt_s(budget)})' if budget else ''}.")
    reason = plain(rec.reason)
    task = run.config.task if run.config is not None else ""
    if run.status == "completed" and near_chance(task, t.accuracy):
        advice = (f"its time budget ended it after {run.steps:,} steps: give it more time (or fewer epochs' worth of "
                  "work)" if "time budget" in rec.reason else "try a smaller learning rate or β")
        st.warning(f"{head} Completed, but it **learned nothing**: its test accuracy is at chance level "
                   f"({TASKS[task].chance:.0%} by guessing); {advice}.{acc}{where}")
    elif run.status == "completed":
        st.success(f"{head} Completed{' (' + reason + ')' if reason else ''}.{acc}{where}")
    elif run.status == "cancelled" and not run.steps:
        who = " from another session" if "another session" in rec.reason else ""
        st.info(f"**{plain(run.name)}** was cancelled{who} before its first training step, so there is nothing "
                f"to save.")
    elif run.status == "cancelled":
        st.warning(f"{head} **Partial run**: {reason}.{acc}{where}")
    elif run.status == "failed":
        st.error(f"{head} **Failed**: {reason}.{acc}{where}")
    else:
        st.info(f"**{plain(run.name)}**: {run.status}.")


def job_ui(view: JobView, cancel, key: str = "job", note: str = "", watch: tuple = (None, "")) -> None:
    """A job's runs: the running one live, the finished ones as result boxes, queued ones listed.
    note: a line on where the job came from (another session, the URL)."""
    if note:
        st.caption(note_line(note, view))                       # counted at each poll
    if view.active:
        c1, c2 = st.columns([4, 1], vertical_alignment="center")
        budgets = [r.config.max_seconds if r.config is not None else None for r in view.runs]
        reaches = view.cap and (None in budgets or sum(budgets) >= view.cap)     # its own budgets end it sooner
        cap = (f" · the server stops it at its {fmt_duration(view.cap)} cap, in "
               f"{_fmt_s(view.created + view.cap - time.time())}" if reaches else "")
        c1.markdown(f"**Training job** ({len(view.runs)} run{'s' if len(view.runs) > 1 else ''}) — "
                    + ("stopping…" if view.cancel_requested else "running" + cap))
        if c2.button("Cancel", icon=":material/stop:", key=f"{key}_cancel", disabled=view.cancel_requested,
                     help="Stops within a second; what was trained so far is saved as a partial run. Anyone "
                          "may cancel the machine's running job, from any tab."):
            cancel()
            st.toast("Cancelling: the run stops after the current step and is saved as partial.")
    cur = view.current
    for i, run in enumerate(view.runs):
        if run is cur:
            run_progress_ui(run, key=f"{key}_{i}", watch=watch)
        elif run.status == "queued":
            st.caption(f":material/schedule: queued: {plain(run.name)} (λp {run.config.lambda_p:g})")
        else:
            run_result_ui(run)


def job_live_ui(job, session: Optional[str], every: float = 1.0, key: str = "job", note: str = "") -> JobView:
    """Poll a job with st.fragment(run_every=...) while it is active; anyone's Cancel stops it (session:
    who cancels, None for the job's owner; the run's reason says 'cancelled from another session' else)."""
    @st.fragment(run_every=every if job.active else None)
    def live():
        view = job.snapshot()
        job_ui(view, lambda: job.cancel(session), key=key, note=note, watch=(job.watch, job.watch_where))
        seen = f"_seen_done_{job.kind}"
        if not view.active and st.session_state.get(seen) != view.id:
            st.session_state[seen] = view.id
            st.rerun()                           # the whole page: pickers list the new run, polling stops

    live()
    return job.snapshot()


def attach_job_ui(registry, session: str, kind: str, started=None):
    """The job of this kind that this tab shows, kept in the URL as ?job=<id> so that a reload comes
    back to it: the one just started here, else the URL's, else the machine's running one (whoever
    started it), else this session's newest. Returns (job or None, a line on where it came from, who
    cancels: None as its owner -- this session, or the URL's job after a reload -- else this session)."""
    url, mem = st.query_params.get("job"), f"_attached_{kind}"
    job, note, who = started, "", None
    if job is None and url and st.session_state.get(mem, ("",))[0] == url:     # a rerun: as it was attached
        job, note, who = registry.get(url, kind), *st.session_state[mem][1:]
    elif job is None and url:
        job = registry.get(url)
        if job is None:
            st.info(f"Job {plain(url[:40])} is not known to this server (it was restarted, or the job is old): "
                    f"a run it saved is in the runs folder and the model pickers.")
        elif job.kind != kind:
            job = None                           # another page's job: not this page's business
        elif job.session != session:
            note = f":material/history: Back to job {job.id}, started {AGO}."
    if job is None and registry.active(kind):
        job = registry.active(kind)[0]
        if job.session != session:
            who = session
            note = (f":material/group: This job was started elsewhere (another tab or user, or this tab before a "
                    f"reload) {AGO}: it holds the machine's training slot; anyone can cancel it.")
    if job is None:
        job = registry.session_job(session, kind)
    if job is not None:
        st.query_params["job"] = job.id
        st.session_state[mem] = (job.id, note, who)
    elif "job" in st.query_params:
        del st.query_params["job"]
    return job, note, who


def recent_jobs_ui(jobs, shown: Optional[str], key: str) -> None:
    """The server's newest jobs, each with a button that shows it here (a new ?job=<id>)."""
    others = [j.snapshot() for j in jobs if j.id != shown]
    if not others:
        return
    with st.expander(f"Recent jobs on this server ({len(others)})"):
        for v in others:
            run = v.current
            state = "running" if v.active else {"cancelled": "partial run"}.get(run.status, run.status) if run else v.status
            c1, c2 = st.columns([4, 1], vertical_alignment="center")
            c1.markdown(f"**{plain(v.name)}** · {state} · started {_ago(v.created)}")
            if c2.button("Show", key=f"{key}_show_{v.id}"):
                st.query_params["job"] = v.id
                st.rerun()


def _ago(t: float) -> str:
    return f"{_fmt_s(time.time() - t)} ago"


def note_line(note: str, view: JobView) -> str:
    """A job's note (attach_job_ui) as shown: its AGO counted now."""
    return note.replace(AGO, _ago(view.created))


def run_name(run_dir: str) -> str:
    """A saved run's name in the pickers: runs/<run>, or runs/<sweep>/<trial> for a trial of a sweep folder."""
    p = Path(run_dir)
    trial = (p.parent / SWEEP).is_file() or not p.parent.exists()      # a deleted sweep folder's trial too
    return f"runs/{p.parent.name}/{p.name}" if trial else f"runs/{p.name}"



def running_job_sidebar_ui(registry, here: str) -> None:
    """A line in the sidebar of every page while a training job runs on this machine: its name, how far it is,
    and a link to the page that shows it (here: the page's url path; no link on that page itself)."""
    @st.fragment(run_every=2.0 if registry.active() else None)
    def line():
        active = registry.active()
        if not active:
            return
        v = active[0].snapshot()
        run, page = v.current, "sweep" if v.kind == "sweep" else "train"
        last = run.progress[-1] if run and run.progress else None
        where = f"step {last['step']:,}" if last else "starting"
        st.caption(f":material/model_training: **Training {plain(v.name)}** · {where} · started "
                   f"{_ago(v.created)}" + ("" if page == here else "; anyone can cancel it there:"))
        if page != here:
            st.page_link(navigation.BY_NAME[page].script, label="Show the training job", icon=":material/arrow_forward:",
                         query_params={"job": v.id})

    with st.sidebar:
        line()
