"""One input's panels that pages draw: the input as the model sees it, the answer, the per-step charts,
stepping through the steps, the inputs pondered least and most (Streamlit layout around explorer.figures)."""
from __future__ import annotations

import csv
import hashlib
import io
import json
from typing import Optional, Sequence

import numpy as np
import streamlit as st
from PIL import Image

from ponder.analysis.studies import Trace, trace_rows

from . import figures
from .ui import chart


def seen_image_ui(img28: np.ndarray, caption: str) -> None:
    """The 28x28 input, enlarged with hard pixel edges, fitted to its column (never wider)."""
    big = Image.fromarray(np.asarray(img28, np.uint8)).resize((168, 168), Image.NEAREST)
    st.image(big, caption=caption, width="stretch")


def answer_line(tr: Trace, class_names: Sequence[str], truth: Optional[int] = None) -> str:
    """The answer in one line, for right under the input (on a phone the charts are screens further down)."""
    steps = (f"all {tr.max_steps} steps run" if tr.mode == "expected" else
             f"halted at step {tr.halt_step} of {tr.max_steps}")
    verdict = "" if truth is None else " · :green[right]" if tr.pred == truth else " · :red[wrong]"
    return (f":material/arrow_forward: Answer **{class_names[tr.pred]}** ({tr.confidence:.0%}) · {steps} · "
            f"E[n] {tr.expected_steps:.2f}{verdict}")


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
                    key: str = "trace", cursor: Optional[int] = None) -> None:
    """The four per-step charts of one input: answers, λ_n, p_n vs prior, cumulative halting (cursor: the
    step the slider is on, a band on each)."""
    figs = figures.trace_figures(tr, class_names, truth, cursor)
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


def trace_downloads_ui(tr: Trace, class_names: Sequence[str], name: str, key: str = "trace") -> None:
    """The per-step numbers of one input (ponder.analysis.studies.trace_rows) as CSV and as JSON."""
    rows = trace_rows(tr, class_names)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    meta = {"model": name, "mode": tr.mode, "seed": tr.seed, "halt_step": tr.halt_step, "answer": class_names[tr.pred],
            "expected_steps": tr.expected_steps, "lambda_p": tr.lambda_p, "max_steps": tr.max_steps}
    c1, c2, _ = st.columns([1, 1, 3])
    c1.download_button("Steps as CSV", out.getvalue(), file_name="ponder-steps.csv", mime="text/csv", help="This input's numbers at every step: the answer, each class's probability, λ_n, p_n, P(halted by n), the prior",
                       on_click="ignore", icon=":material/download:", key=f"{key}_csv")
    c2.download_button("Steps as JSON", json.dumps({**meta, "steps": rows}, indent=1), file_name="ponder-steps.json",
                       mime="application/json", on_click="ignore", icon=":material/download:", key=f"{key}_json")


def step_through_ui(tr: Trace, seen: Optional[np.ndarray], class_names: Sequence[str], key: str = "step",
                    labels: Optional[Sequence[str]] = None) -> int:
    """A slider over the steps: what step n saw and what it would answer if it stopped there. Returns n.

    seen: [N, 28, 28] uint8 images per step, or None when every step sees the whole image; labels: a few
    words per step on what it has seen. The slider starts at the halting step of each new input (its
    widget key includes the input's trace, so a new drawing, angle, mode or model starts it afresh).
    """
    slider = f"{key}_{trace_id(tr)}"
    st.session_state.setdefault(slider, min(tr.halt_step, tr.max_steps))
    n = st.slider("Step through the steps", 1, tr.max_steps, key=slider,
                  help="Move through the steps (or press Play): the image as that step saw it, its answer if it "
                       "stopped there, and a band at that step on every chart below.")
    probs = tr.probs[n - 1]
    top = int(np.argmax(probs))
    c1, c2 = st.columns([0.8, 2.4])
    with c1:
        if seen is not None:
            seen_image_ui(seen[n - 1], f"What step {n} has seen" + (f" ({labels[n - 1]})" if labels else ""))
        else:
            st.caption("This model sees its whole input at every step: its steps only refine its state.")
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


def parity_intro_ui() -> None:
    """The Parity page's task in two sentences, and what to look at."""
    st.markdown("**Parity**, the paper's task: is the number of +1s in a vector of −1, 0 and +1 odd? A vector "
                "with more non-zeros (k) is harder, so a PonderNet may think longer on it. Generate or type a "
                "vector and watch when it stops; below, whole test sets from easy to hard.")
    with st.expander("What to look at"):
        st.markdown(
            "- **Step slider / Play**: what it would answer if it stopped at step n, with a band at that step on "
            "every chart.\n"
            "- **p_n vs the prior** and **λ_n**: when it halts, against the geometric prior λp(1−λp)^(n−1).\n"
            "- **Easy vs hard**: E[n] = Σ n·p_n by number of non-zeros k: does it ponder longer on harder vectors?\n"
            "- **Is the extra thought worth it?**: its accuracy against a fixed depth and a confidence rule at "
            "the same mean number of steps.")


PLAY_EVERY = 0.8        # seconds a step while playing: slow enough to read the answer and see the band move


def trace_id(tr: Trace) -> str:
    """A short id of one input's trace: a new drawing, angle, mode or model is a new one."""
    return hashlib.blake2b(np.ascontiguousarray(tr.probs).tobytes() + f"{tr.mode}{tr.halt_step}".encode(),
                           digest_size=6).hexdigest()


def steps_ui(tr: Trace, seen: Optional[np.ndarray], class_names: Sequence[str], truth: Optional[int] = None,
             key: str = "step", labels: Optional[Sequence[str]] = None) -> None:
    """Watch one input think: the step slider (step_through_ui) with Play / Pause, and the per-step charts
    with a band at the slider's step. Playing moves one step every PLAY_EVERY seconds and stops at step N."""
    ident = trace_id(tr)
    slider, play = f"{key}_{ident}", f"{key}_playing"
    playing = st.session_state.get(play) == ident

    @st.fragment(run_every=PLAY_EVERY if playing else None)
    def section():
        now = st.session_state.get(slider, min(tr.halt_step, tr.max_steps))
        if playing and st.session_state.get(play) == ident:
            if now >= tr.max_steps:
                st.session_state[play] = None
                st.rerun()                                    # the whole page: the fragment stops polling
            st.session_state[slider] = now + 1               # before the slider is drawn in this run
        if st.button("Pause" if playing else "Play through the steps", key=f"{key}_play",
                     icon=":material/pause:" if playing else ":material/play_arrow:"):
            st.session_state[play] = None if playing else ident
            if not playing and now >= tr.max_steps:
                st.session_state[slider] = 1                  # from the start again
            st.rerun()
        n = step_through_ui(tr, seen, class_names, key=key, labels=labels)
        st.divider()
        trace_charts_ui(tr, class_names, truth, key=f"{key}_charts", cursor=n)

    section()


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


