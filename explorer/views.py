"""Groups of charts and panels that pages draw (Streamlit layout around explorer.figures)."""
from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import streamlit as st
from PIL import Image

from ponder.card import CheckpointError, read_card, test_metrics
from ponder.config import ConfigError

from ponder.analysis.unroll import near_chance
from ponder.analysis.studies import Trace
from ponder.runs import SWEEP
from ponder.sweep import read_sweep
from ponder.tasks import TASKS

from . import figures, loaders, study_figures, tables
from .tables import plain
from .jobs import JobView, RunState
from .limits import fmt_duration
from .ui import chart


# ----------------------------------------------------------------------------- one input

def seen_image_ui(img28: np.ndarray, caption: str) -> None:
    """The 28x28 input, enlarged with hard pixel edges, fitted to its column (never wider)."""
    big = Image.fromarray(np.asarray(img28, np.uint8)).resize((168, 168), Image.NEAREST)
    st.image(big, caption=caption, width="stretch")


def answer_ui(tr: Trace, class_names: Sequence[str], truth: Optional[int] = None, key: str = "answer") -> None:
    """The answer, the halting step and E[n], in words and metrics, and the top 3 classes as bars."""
    c1, c2, c3 = st.columns([1, 1.35, 0.8])          # room for "Halted at step" in narrow layouts
    c1.metric("Prediction", class_names[tr.pred], help=f"Probability of this answer: {tr.confidence:.1%}")
    if tr.mode == "expected":
        c2.metric("Steps run", f"all {tr.max_steps}", help="Expected mode runs every step and mixes the answers.")
    else:
        c2.metric("Halted at step", f"{tr.halt_step} / {tr.max_steps}", help=f"{tr.mode} mode")
    c3.metric("E[n]", f"{tr.expected_steps:.2f}", help=f"Expected number of steps Σ n·p_n; the prior's mean is "
              f"1/λp = {1 / tr.lambda_p:.2f}.")
    verdict = ""
    if truth is not None:
        verdict = " :green[**Right.**]" if tr.pred == truth else f" :red[**Wrong**: the label is {class_names[truth]}.]"
    conf = f" ({tr.confidence:.1%} confident)"
    if tr.mode == "sample":
        text = (f"Sampled with seed **{tr.seed}**: at each step it halted with probability λ_n; the draw "
                f"stopped it at step **{tr.halt_step}**, answering **{class_names[tr.pred]}**{conf}.{verdict}")
    elif tr.mode == "deterministic":
        text = (f"Deterministic: it halts at the first step where P(halted by n) ≥ 0.5, step "
                f"**{tr.halt_step}**, answering **{class_names[tr.pred]}**{conf}.{verdict}")
    else:
        text = (f"Expected: it ran all {tr.max_steps} steps and answers the p-weighted mixture of every "
                f"step's answer: **{class_names[tr.pred]}**{conf}.{verdict}")
    words, bars = st.columns([1.2, 1])
    words.markdown(text)
    with bars:
        few = len(class_names) <= 3                          # parity: every class
        chart(figures.topk_fig(tr.answer_probs, class_names, truth=truth),
              ("The answer's probability for each class" if few else "The answer's three most probable classes")
              + (" (green: the true label)." if truth is not None else "."), key=f"{key}_top")


def trace_charts_ui(tr: Trace, class_names: Sequence[str], truth: Optional[int] = None,
                    key: str = "trace") -> None:
    """The four per-step charts of one input: answers, λ_n, p_n vs prior, cumulative halting."""
    figs = figures.trace_figures(tr, class_names, truth)
    c1, c2 = st.columns(2)
    with c1:
        chart(figs["heat"], "Each row is what the network would answer if it stopped at step n (rows sum to 1); "
              "the dotted box marks where it halted.", key=f"{key}_heat")
        chart(figs["p"], f"Bars: probability of halting exactly at step n for this input; line: the geometric "
              f"prior λp(1−λp)^(n−1) with λp = {tr.lambda_p:g}, renormalised over the N steps.", key=f"{key}_p")
    with c2:
        chart(figs["lambda"], "λ_n is the network's chance to halt at step n if it is still running (λ_N = 1 by "
              "definition); the dashed line is the prior's constant λp.", key=f"{key}_lambda")
        chart(figs["cdf"], f"Probability of having halted by step n; deterministic mode stops where it crosses "
              f"0.5. E[n] = {tr.expected_steps:.2f}.", key=f"{key}_cdf")


def step_through_ui(tr: Trace, seen: Optional[np.ndarray], class_names: Sequence[str], key: str = "step",
                    labels: Optional[Sequence[str]] = None) -> int:
    """A slider over the steps: what step n saw and what it would answer if it stopped there. Returns n.

    seen: [N, 28, 28] uint8 images per step, or None when every step sees the whole image; labels: a few
    words per step on what it has seen. The slider starts at the halting step of each new input (its
    widget key includes the input's trace, so a new drawing, angle, mode or model starts it afresh).
    """
    ident = hashlib.blake2b(np.ascontiguousarray(tr.probs).tobytes() + f"{tr.mode}{tr.halt_step}".encode(),
                            digest_size=6).hexdigest()
    n = st.slider("Step through the steps", 1, tr.max_steps, value=min(tr.halt_step, tr.max_steps),
                  key=f"{key}_{ident}",
                  help="Move through the steps: the image as that step saw it, and its answer if it stopped there.")
    probs = tr.probs[n - 1]
    top = int(np.argmax(probs))
    c1, c2 = st.columns([0.8, 2.4])
    with c1:
        if seen is not None:
            seen_image_ui(seen[n - 1], f"What step {n} has seen" + (f" ({labels[n - 1]})" if labels else ""))
        else:
            st.caption("This model sees the whole image at every step: its steps only refine the state.")
    with c2:
        m1, m2, m3, m4 = st.columns(4)
        m1.metric(f"Answer at step {n}", class_names[top], help=f"{probs[top]:.1%} for this class at step {n}")
        m2.metric("λ_n", f"{tr.lambdas[n - 1]:.3f}", help="chance to halt at this step if still running")
        m3.metric("p_n", f"{tr.p[n - 1]:.3f}", help="probability of halting exactly here")
        m4.metric("P(halted by n)", f"{tr.cdf[n - 1]:.3f}")
        where = "where it halted" if n == tr.halt_step and tr.mode != "expected" else (
            "after it halted: shown to compare" if n > tr.halt_step and tr.mode != "expected" else "")
        st.caption(f"Step {n} of {tr.max_steps}{f' ({where})' if where else ''}: it would answer "
                   f"{class_names[top]} with {probs[top]:.1%}.")
    return n


def pondering_gallery_ui(gallery: Optional[dict], class_names: Sequence[str]) -> None:
    """Two rows of test digits: the ones it ponders least and most (by E[n]), with its answers."""
    if gallery is None:
        st.info("The gallery needs the MNIST test set (see the MNIST test digit source above).")
        return
    for title, rows in (("Least pondered", gallery["least"]), ("Most pondered", gallery["most"])):
        st.markdown(f"**{title}**")
        for col, r in zip(st.columns(len(rows)), rows):
            mark = "" if r["pred"] == r["label"] else f" ✗ (label {class_names[r['label']]})"
            with col:
                st.image(Image.fromarray(r["image"]).resize((84, 84), Image.NEAREST),
                         caption=f"#{r['index']} · E[n] {r['expected_steps']:.1f} · says {class_names[r['pred']]}{mark}")


# ----------------------------------------------------------------------------- training jobs

def _fmt_s(s: Optional[float]) -> str:
    if s is None or not np.isfinite(s):
        return "?"
    s = max(0, int(round(s)))
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


AFTER_TRAINING = {"validating": "the final validation pass", "saving": "saving the run",
                  "evaluating": "measuring it on test data"}      # phases after the training loop (ponder.lifecycle)


def run_progress_ui(run: RunState, key: str) -> None:
    """Progress bar, elapsed / remaining time, live curves and the current halting distribution."""
    last = run.progress[-1] if run.progress else None
    frac = float(last["fraction"]) if last else 0.0
    if run.status == "running":
        now = time.time()
        elapsed = now - run.started if run.started else 0.0
        if run.phase in AFTER_TRAINING and last:          # training is over: no step estimate, say what follows
            st.progress(1.0, text=f"**{plain(run.name)}** · trained {last['step']:,} steps in "
                                  f"{_fmt_s(last['elapsed'])} · now {AFTER_TRAINING[run.phase]} · elapsed {_fmt_s(elapsed)}")
        else:
            step, remaining = tables.training_eta(last, now) if last else ("first steps", None)
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
        chart(figures.training_fig(run.progress, cfg.lambda_p, cfg.max_steps),
              "Live training curves: total loss = reconstruction + β·KL, batch and validation accuracy, "
              "and the batch's mean expected halting step against the prior's mean.", key=f"{key}_curves")
    with c2:
        chart(figures.halting_fig(last["halting"], cfg.lambda_p, title=f"Halting distribution at step {last['step']}",
                            max_ticks=10),
              "Mean learned p_n over the last batch (bars) against the geometric prior (line).",
              key=f"{key}_halt")


def run_result_ui(run: RunState) -> None:
    where = (f" Saved as **{plain(run_name(run.run_dir))}**, in the folder {plain(Path(run.run_dir).resolve())}. "
             f"{plain(tables.renamed(run.name, Path(run.run_dir).name))}".rstrip() if run.run_dir else " Not saved.")
    if run.run_dir and run.saved_elsewhere:
        where = f" Saved outside the runs folder, in **{plain(run.run_dir)}**."
    t = (run.metrics or {}).get("test", {})
    acc = (f" Test accuracy {t['accuracy']:.2%} on {t.get('n', '?')} samples, mean halting step "
           f"{t['mean_steps']:.2f}." if t.get("accuracy") is not None else "")
    budget = run.config.max_seconds if run.config is not None else None
    head = (f"**{plain(run.name)}**: {run.steps:,} steps in {_fmt_s(run.seconds)} of training"
            f"{f' (budget {_fmt_s(budget)})' if budget else ''}.")
    reason = plain(run.reason)
    task = run.config.task if run.config is not None else ""
    if run.status == "completed" and near_chance(task, t.get("accuracy")):
        st.warning(f"{head} Completed, but it **learned nothing**: its test accuracy is at chance level "
                   f"({TASKS[task].chance:.0%} by guessing); try a smaller learning rate or β.{acc}{where}")
    elif run.status == "completed":
        st.success(f"{head} Completed{' (' + reason + ')' if reason else ''}.{acc}{where}")
    elif run.status == "cancelled" and not run.steps:
        who = " from another session" if "another session" in run.reason else ""
        st.info(f"**{plain(run.name)}** was cancelled{who} before its first training step, so there is nothing "
                f"to save.")
    elif run.status == "cancelled":
        st.warning(f"{head} **Partial run**: {reason}.{acc}{where}")
    elif run.status == "failed":
        st.error(f"{head} **Failed**: {reason}.{acc}{where}")
    else:
        st.info(f"**{plain(run.name)}**: {run.status}.")


def job_ui(view: JobView, cancel, key: str = "job", note: str = "") -> None:
    """A job's runs: the running one live, the finished ones as result boxes, queued ones listed.
    note: a line on where the job came from (another session, the URL)."""
    if note:
        st.caption(note)
    if view.active:
        c1, c2 = st.columns([4, 1], vertical_alignment="center")
        cap = (f" · the server stops it at its {fmt_duration(view.cap)} cap, in "
               f"{_fmt_s(view.created + view.cap - time.time())}" if view.cap else "")
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
            run_progress_ui(run, key=f"{key}_{i}")
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
        job_ui(view, lambda: job.cancel(session), key=key, note=note)
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
            note = f":material/history: Back to job {job.id}, started {_ago(job.created)}."
    if job is None and registry.active(kind):
        job = registry.active(kind)[0]
        if job.session != session:
            who = session
            note = (f":material/group: This job was started elsewhere (another tab or user, or this tab before a "
                    f"reload) {_ago(job.created)}: it holds the machine's training slot; anyone can cancel it.")
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


# ----------------------------------------------------------------------------- λp sweep

def job_sweep_rows(view: JobView) -> list:
    rows = []
    for run in view.runs:
        card = None
        if run.run_dir:
            try:
                card = read_card(run.run_dir)
            except CheckpointError:
                card = None
        status = run.status
        if status == "running":
            last = run.progress[-1] if run.progress else None
            status = f"running {last['fraction']:.0%}" if last else "running"
        row = tables.sweep_row(run_name(run.run_dir) if run.run_dir else run.name, card,
                                status=status, reason=run.reason, lambda_p=run.config.lambda_p)
        rows.append(row)
    return rows


def run_name(run_dir: str) -> str:
    """A saved run's name in the pickers: runs/<run>, or runs/<sweep>/<trial> for a trial of a sweep folder."""
    p = Path(run_dir)
    return f"runs/{p.parent.name}/{p.name}" if (p.parent / SWEEP).is_file() else f"runs/{p.name}"


def entry_sweep_rows(entries) -> list:
    rows = []
    for e in entries:
        card = dict(e.card)
        card.setdefault("metrics", {})
        try:
            t = loaders.test_metrics(e) if card.get("status") != "failed" else test_metrics(card)
        except (CheckpointError, ConfigError, OSError) as err:       # a run that cannot be loaded any more
            card.update(status="failed", reason=" ".join(str(err).split()))
            t = {}
        card["metrics"] = {**(card["metrics"] if isinstance(card["metrics"], dict) else {}), "test": t}
        rows.append(tables.sweep_row(e.name, card))
    return rows


def folder_sweep_rows(folder) -> list:
    """A sweep folder's trials in sweep.json's order: from each trial's card where it has one (as
    entry_sweep_rows reads it), else from its record there (running, or failed before it was saved)."""
    entries = {e.path.name: e for e in loaders.models() if e.path.parent == Path(folder)}
    rows = []
    for r in (read_sweep(folder) or {}).get("trials", []):
        if r.get("name") in entries:
            rows += entry_sweep_rows([entries[r["name"]]])
        else:
            rows.append(tables.sweep_row(str(r.get("name")), None, status=r.get("status"), reason=r.get("reason", ""),
                                         lambda_p=(r.get("config") or {}).get("lambda_p")))
    return rows


def folder_sweep_ui(folder) -> None:
    """A sweep folder's results: where it is, its table, and the sweep charts over its trials."""
    records = (read_sweep(folder) or {}).get("trials", [])
    n_steps = max([int((r.get("config") or {}).get("max_steps") or 0) for r in records] + [1])
    st.caption(f"{folder}: {len(records)} trials (sweep.json, sweep.md and a run folder per trial); each trial is "
               f"also in every model picker as runs/{Path(folder).name}/<trial>.")
    sweep_results_ui(folder_sweep_rows(folder), n_steps, key="sweep_dir")


def sweep_results_ui(rows: list, n_steps: int = 20, key: str = "sweep") -> None:
    if not rows:
        st.info("No sweep runs to show yet.")
        return
    rows = sorted(rows, key=lambda r: r["lambda_p"])
    table = [{"run": r["name"], "λp": r["lambda_p"], "1/λp": round(1 / r["lambda_p"], 2), "status": r["status"],
              "accuracy": r["accuracy"], "mean steps": r["mean_steps"], "E[n]": r["expected_steps"],
              "reason": r["reason"]} for r in rows]
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config={"accuracy": st.column_config.NumberColumn(format="%.4f"),
                                "mean steps": st.column_config.NumberColumn(format="%.2f"),
                                "E[n]": st.column_config.NumberColumn(format="%.2f")})
    failed = [r for r in rows if r["status"] == "failed"]
    for r in failed:
        st.error(f"{plain(r['name'])} (λp {r['lambda_p']:g}) failed: {plain(r['reason'] or 'no reason recorded')}")
    chart(study_figures.sweep_grid_fig(rows), "Each finished run's learned halting distribution (bars, mean over test "
          "images) over the geometric prior of its λp (line); failed or unfinished runs say why.",
          key=f"{key}_grid")
    c1, c2 = st.columns(2)
    with c1:
        chart(study_figures.sweep_steps_fig(rows, n_steps), "Mean sampled halting step per run against λp; the dashed "
              "curve is the prior's mean 1/λp, the dotted one that mean truncated at N.", key=f"{key}_steps")
    with c2:
        chart(study_figures.sweep_accuracy_fig(rows), "Test accuracy of each finished run against its λp.",
              key=f"{key}_acc")
