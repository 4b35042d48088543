"""Pieces of the Ponder-a-digit page (pages/digit.py): the introduction, the input column, the note on inputs
unlike the training digits, and a second model's answer beside the first (Streamlit layout only)."""
from __future__ import annotations

from typing import Optional, Sequence

import streamlit as st

from ponder.store.record import RunRecord
from ponder.store.runs import ModelEntry
from ponder.analysis.studies import Trace, trace_input
from ponder.tasks import step_meaning

from ..drawing import canvas, digits
from ..figures import halting as figures
from .. import links, tables
from . import loaders, pickers, ui
from ..drawing.ood import unlike_digits

NO_SECOND = "—"


def intro_ui(record: RunRecord, name: str) -> None:
    """What PonderNet is in two sentences, what a step is for the model shown (from its record: Task.step_meaning),
    and what to look at (collapsed after the first look)."""
    meaning, caveat = step_meaning(record)
    st.markdown("**PonderNet** runs one step of a network again and again; after each step n it halts with "
                "probability λ_n and answers, so it can think longer about some inputs than others. Give it a "
                f"digit and watch when it stops. **A step** of {tables.plain(name)}: {meaning}.")
    with st.expander("What to look at"):
        st.markdown(
            f"- **What a step is** for this model: {meaning}{f', {caveat}' if caveat else ''}.\n"
            "- **Per-step answer**: what it would answer if it stopped at step n (the heatmap, and the step slider).\n"
            "- **λ_n**: its chance to halt at step n if it is still running.\n"
            "- **p_n vs the prior**: the chance to halt exactly at step n, λ_n·∏(1−λ_j) over the earlier steps; "
            "training pulls it towards the geometric prior λp(1−λp)^(n−1), whose mean is 1/λp steps.\n"
            "- **E[n] = Σ n·p_n**: how many steps it expects to take on this input; compare digits, rotations and "
            "models (pick a second one in the sidebar to see both side by side).\n"
            "- **Halting mode**: *sample* draws the halt at random (the paper's inference; the seed fixes the "
            "draw), *deterministic* stops where P(halted by n) reaches 0.5, *expected* mixes every step's answer.")


def digit_input_ui() -> tuple:
    """The input column: draw, pick a test digit or upload, then rotate -> (uint8 [28, 28] digit or None,
    true label or None, hint when there is no digit, angle)."""
    source = pickers.digit_source_ui()
    truth = None
    if source == "Draw":
        digit, hint = pickers.drawing_ui()
    elif source == "Upload":
        digit, hint = pickers.upload_ui()
    else:
        mnist, missing = loaders.mnist()
        pool = digits.digit_pool(mnist)
        if missing:
            ui.mnist_missing_ui(missing, "digit_download",
                                f"Meanwhile you can pick from the {len(pool)} bundled example digits.")
        pos = pickers.digit_picker_ui(pool)
        digit, truth, hint = pool.x[pos], int(pool.y[pos]), ""
        st.caption(f"{pool.source}, image #{int(pool.index[pos])}, label {truth}")
    return digit, truth, hint, pickers.rotation_ui()


def unlike_text(reasons: Sequence[str]) -> str:
    """The warning for an input unlike the training digits: its reasons (explorer.drawing.ood) joined, one full stop."""
    said = "; ".join(reasons)
    return ("**This does not look like the handwritten digits the model was trained on**: " + said
            + ("" if said.endswith((".", "?", "!")) else ".") + " The answer above is what the model says anyway: a "
            "network answers every input with some digit, often confidently.")


def unlike_digit_ui(model, digit, angle: float, trace: Trace, mode: str, seed: int) -> None:
    """A warning under the answer when the input does not look like a training digit (explorer.drawing.ood). Is it upside
    down? is asked of the drawing as drawn (its answer as it is and turned 180°): a rotation of the reader's own is
    a study, not a mistake to point out (a 7 rotated 75° read '4 at 99.8%' turned, 'is it upside down?')."""
    upright = trace if not angle % 360 else trace_input(model, canvas.model_input(digit, 0), mode, seed)
    turned = trace_input(model, canvas.model_input(digit, 180), mode, seed)
    reasons = unlike_digits(digit, trace.confidence, (upright.pred, upright.confidence, turned.pred, turned.confidence))
    if reasons:
        st.warning(unlike_text(reasons), icon=":material/help:")


def second_model_ui(first: str, key: str = "second_model") -> Optional[ModelEntry]:
    """An optional second MNIST model in the sidebar, answering the same input side by side."""
    by = {e.name: e for e in loaders.models(links.MODEL_TASK["digit"]) if e.name != first}
    if st.session_state.get(key) not in [NO_SECOND, *by]:
        st.session_state[key] = NO_SECOND
    name = st.sidebar.selectbox("Compare with a second model", [NO_SECOND, *by], key=key,
                                format_func=lambda n: n if n == NO_SECOND else pickers.entry_label(by[n]),
                                help="Its answer, halting step and E[n] for the same input, mode and seed, "
                                     "beside the first model's.")
    return by.get(name)


def side_by_side_ui(rows: Sequence[tuple], class_names: Sequence[str], truth: Optional[int] = None,
                    key: str = "side") -> None:
    """Each model's answer to the same input in its own column: rows = [(model name, Trace)]. Their p_n charts
    share one y scale and upright step labels (figures.side_by_side)."""
    st.subheader("Side by side")
    p_figs = figures.side_by_side([figures.halting_fig(tr.p, tr.lambda_p, halt_step=tr.halt_step if tr.mode != "expected"
                                                       else None, title=f"p_n vs prior (λp = {tr.lambda_p:g})")
                                   for _, tr in rows])
    for i, (col, (name, tr)) in enumerate(zip(st.columns(len(rows), gap="large"), rows)):
        tr: Trace
        with col:
            st.markdown(f"**{name}**")
            m1, m2, m3 = st.columns(3)
            m1.metric("Prediction", class_names[tr.pred], help=f"Probability of this answer: {tr.confidence:.1%}")
            m2.metric("Halted at step" if tr.mode != "expected" else "Steps run",
                      f"{tr.halt_step} / {tr.max_steps}" if tr.mode != "expected" else f"all {tr.max_steps}")
            m3.metric("E[n]", f"{tr.expected_steps:.2f}", help=f"The prior's mean is 1/λp = {1 / tr.lambda_p:.2f}.")
            verdict = "" if truth is None else (" Right." if tr.pred == truth else f" Wrong (label {class_names[truth]}).")
            st.caption(f"Answers {class_names[tr.pred]} with {tr.confidence:.1%}.{verdict}")
            ui.chart(figures.topk_fig(tr.answer_probs, class_names, truth=truth, title="Top 3 classes"),
                     "The three most probable classes of the answer.", key=f"{key}_top_{i}")
            ui.chart(p_figs[i], "This input's halting distribution (bars) and the model's geometric prior (line), on "
                     "the same scale as the other model's.", key=f"{key}_p_{i}")
    st.divider()


def stepped_model_ui(shown: Sequence[tuple], key: str = "stepped_model") -> tuple:
    """Which model the step slider, the heatmap and the per-step charts show: shown = [(name, model, Trace)], the
    first model and, when picked, the second; a choice when there are two. Returns that (name, model, Trace)."""
    names = [name for name, _, _ in shown]
    if len(names) == 1:
        return shown[0]
    if st.session_state.get(key) not in names:
        st.session_state[key] = names[0]
    name = st.segmented_control("Step through the steps of", names, key=key, required=True,
                                help="The step slider, the heatmap and the per-step charts below show this model.")
    return shown[names.index(name or names[0])]
