"""One input's panels that pages draw: the input as the model sees it, the answer, the per-step charts, the
inputs pondered least and most (Streamlit layout around explorer.figures.halting)."""
from __future__ import annotations

import csv
import io
import json
from typing import Optional, Sequence

import numpy as np
import streamlit as st
from PIL import Image

from ponder.analysis.studies import Trace, trace_rows
from ponder.analysis.worth_text import NEVER_CHOSE, halt_forced
from ponder.store.record import RunRecord
from ponder.tasks import step_meaning

from ..figures import halting as figures
from .pickers import pick_test_digit
from ..tables import plain
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
    forced = halt_forced(tr.halt_step, tr.max_steps)         # λ_N = 1 stopped it, not the draw or the CDF
    if tr.mode == "sample":
        how = (f"{NEVER_CHOSE} at step **{tr.halt_step}** (λ_N = 1)" if forced else
               f"the draw stopped it at step **{tr.halt_step}**")
        text = (f"Sampled with seed **{tr.seed}**: at each step it halted with probability λ_n; {how}, answering "
                f"**{class_names[tr.pred]}**{conf}.{verdict}")
    elif tr.mode == "deterministic":
        how = (f"P(halted by n) never reached {tr.q:g} before step N: {NEVER_CHOSE} at step **{tr.halt_step}**"
               if forced else f"step **{tr.halt_step}**")
        text = (f"Deterministic: the Q-exit at q = {tr.q:g} halts at the first step where P(halted by n) ≥ "
                f"{tr.q:g}; {how}, answering **{class_names[tr.pred]}**{conf}.{verdict}")
    else:
        text = (f"Expected: it ran all {tr.max_steps} steps and answers the p-weighted mixture of every "
                f"step's answer: **{class_names[tr.pred]}**{conf}.{verdict}")
    words, bars = st.columns([1.2, 1])
    words.markdown(text)
    with bars:
        few = len(class_names) <= 3                          # parity: every class
        if tr.mode == "expected":                            # the answer is a mixture: show what it is made of
            chart(figures.mixture_fig(tr.p, tr.probs, class_names, truth=truth),
                  ("Each class's" if few else "The three most probable classes'") + " probability in the answer, "
                  "Σ_n p_n·P(class | step n): each bar stacks every step's answer weighted by its p_n (light: early "
                  "steps, dark: late)" + (" (✓: the true label)." if truth is not None else "."), key=f"{key}_mix")
            return
        chart(figures.topk_fig(tr.answer_probs, class_names, truth=truth),
              ("The answer's probability for each class" if few else "The answer's three most probable classes")
              + (" (green: the true label)." if truth is not None else "."), key=f"{key}_top")


def heat_caption(tr: Trace, cursor: Optional[int] = None) -> str:
    """The heatmap's caption, naming what figures.step_probs_heatmap draws on it: the slider's orange box and,
    unless in expected mode (it runs all N), the dotted box at the halting step."""
    marks = ([f"the orange box is step {cursor}, where the slider is"] if cursor else []) + (
        [f"the black dotted box is step {tr.halt_step}, where it halted"] if tr.mode != "expected" else [])
    return ("Each row is what the network would answer if it stopped at step n (rows sum to 1)"
            + (f"; {' and '.join(marks)}." if marks else "."))


def trace_charts_ui(tr: Trace, class_names: Sequence[str], truth: Optional[int] = None,
                    key: str = "trace", cursor: Optional[int] = None) -> None:
    """The four per-step charts of one input: answers, λ_n, p_n vs prior, cumulative halting (cursor: the
    step the slider is on, a band on each)."""
    figs = figures.trace_figures(tr, class_names, truth, cursor)
    c1, c2 = st.columns(2)
    with c1:
        chart(figs["heat"], heat_caption(tr, cursor), key=f"{key}_heat")
        chart(figs["p"], f"Bars: probability of halting exactly at step n for this input; line: the geometric "
              f"prior λp(1−λp)^(n−1) with λp = {tr.lambda_p:g}, renormalised over the N steps.", key=f"{key}_p")
    with c2:
        chart(figs["lambda"], "λ_n is the network's chance to halt at step n if it is still running (λ_N = 1 by "
              "definition); the dashed line is the prior's constant λp.", key=f"{key}_lambda")
        chart(figs["cdf"], f"The halting mass as it accumulates to 1: the bar at step n stacks the probability "
              f"p_j of halting at each step j up to n (one shade a step), so it is P(halted by n); deterministic mode "
              f"stops where it crosses 0.5. E[n] = {tr.expected_steps:.2f}.", key=f"{key}_cdf")


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


def parity_intro_ui(record: RunRecord, name: str) -> None:
    """The Parity page's task in two sentences, what a step is for the model shown, and what to look at."""
    meaning, caveat = step_meaning(record)
    st.markdown("**Parity**, the paper's task: is the number of +1s in a vector of −1, 0 and +1 odd? A vector "
                "with more non-zeros (k) is harder, so a PonderNet may think longer on it. Generate or type a "
                f"vector and watch when it stops; below, whole test sets from easy to hard. **A step** of "
                f"{plain(name)}: {meaning}.")
    with st.expander("What to look at"):
        st.markdown(
            f"- **What a step is** for this model: {meaning}{f', {caveat}' if caveat else ''}.\n"
            "- **Step slider / Play**: what it would answer if it stopped at step n, with a band at that step on "
            "every chart.\n"
            "- **p_n vs the prior** and **λ_n**: when it halts, against the geometric prior λp(1−λp)^(n−1).\n"
            "- **Easy vs hard**: E[n] = Σ n·p_n by number of non-zeros k: does it ponder longer on harder vectors?\n"
            "- **Is the extra thought worth it?**: the learned halting, sampled and used deterministically (Q-exit), "
            "against a fixed depth and a confidence rule at the same mean number of steps (chosen on validation "
            "vectors), with 95 % intervals on the differences; on the unseen k too, where a preset has them.")


GALLERY_CELL_PX = 96    # a digit, its caption and its button: rows wrap at any width (seven at 1280 px, three on a
                        # phone); eight columns at 1280 px left each button ~95 px, its label cut ("#10…")


def pondering_gallery_ui(gallery: Optional[dict], class_names: Sequence[str]) -> None:
    """Test digits in wrapping rows: the ones it ponders least and most (by E[n]), with its answers; a click on one
    loads it as the input above (pickers.pick_test_digit)."""
    if gallery is None:
        st.info("The gallery needs the MNIST test set (see the MNIST test digit source above).")
        return
    st.caption("Click a digit's button to ponder it above, step by step.")
    for title, rows in (("Least pondered", gallery["least"]), ("Most pondered", gallery["most"])):
        st.markdown(f"**{title}**")
        with st.container(horizontal=True, gap="small"):
            for r in rows:
                mark = "" if r["pred"] == r["label"] else f" ✗ (label {class_names[r['label']]})"
                with st.container(width=GALLERY_CELL_PX, gap="small"):
                    st.image(Image.fromarray(r["image"]).resize((84, 84), Image.NEAREST), width=84,
                             caption=f"#{r['index']} · E[n] {r['expected_steps']:.1f} · says {class_names[r['pred']]}{mark}")
                    st.button(f"#{r['index']}", key=f"gallery_{r['index']}", icon=":material/arrow_upward:",
                              help=f"Ponder test digit #{r['index']} above", on_click=pick_test_digit,
                              args=(r["index"],), width="stretch")
