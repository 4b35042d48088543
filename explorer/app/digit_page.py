"""Pieces of the Ponder-a-digit page (pages/digit.py): the introduction, the input column, the view kept in the
address (the digit, its rotation, the halting mode, seed and q: explorer.drawing.shared), the note on inputs unlike
the training digits, and a second model's answer beside the first (Streamlit layout only)."""
from __future__ import annotations

from typing import Optional, Sequence

import streamlit as st

from ponder.store.record import RunRecord
from ponder.store.runs import ModelEntry
from ponder.analysis.studies import Trace, prior_mean, trace_input
from ponder.tasks import step_meaning

from ..drawing import canvas, digits, shared
from ..figures import halting as figures
from .. import links, tables
from . import loaders, pickers, ui
from ..drawing.ood import rotation_reason, unlike_digits

NO_SECOND = "—"
ANSWER_LINES = 2         # the answer's line takes two lines in the input column at 1280 px and at 390 px


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
            f"{prior_pull(record)}\n"
            "- **E[n] = Σ n·p_n**: how many steps it expects to take on this input; compare digits, rotations and "
            "models (pick a second one in the sidebar to see both side by side).\n"
            "- **Halting mode**: *sample* draws the halt at random (the paper's inference; the seed fixes the "
            "draw), *deterministic* stops where P(halted by n) reaches 0.5, *expected* mixes every step's answer.")


def link_view_ui() -> None:
    """A shared link's view, once a session, before the widgets it sets are made: its digit (drawn in the canvas)
    or test digit, its rotation, seed and q. Values the link check refused (explorer.links) are gone from the
    address by then; what is left is read with the same parsers."""
    if st.session_state.get("_view_from_link"):
        return
    st.session_state["_view_from_link"] = True
    read = lambda name, parse: parse(st.query_params[name])[0] if name in st.query_params else None   # noqa: E731
    if (digit := read("digit", shared.decode_digit)) is not None:
        st.session_state.update(digit_source="Draw", _drawing={"json": shared.drawing_json(digit, canvas.CANVAS_SIDE),
                                                               "digit": digit})
    elif (index := read("test", shared.parse_test)) is not None:
        st.session_state.update(digit_source="MNIST test digit", digit_class="any", _link_test=index)
    for name, parse, key in (("angle", shared.parse_angle, "angle"), ("seed", shared.parse_seed, "_kept_seed"),
                             ("q", shared.parse_q, "_kept_q")):
        if (value := read(name, parse)) is not None:
            st.session_state[key] = value


def view_link(digit, test_index: Optional[int], angle: float, mode: str, seed: int, q: float) -> None:
    """Write the view into the address, so that a copied link shows it: the digit (a test digit by its index,
    anything else by its pixels), the rotation, and the seed or q where the mode uses them (ui.mode_ui writes
    the mode)."""
    qp = st.query_params
    view = {"test": None if test_index is None else str(test_index),
            "digit": shared.encode_digit(digit) if digit is not None and test_index is None else None,
            "angle": shared.link_text(angle) if angle else None,
            "seed": str(seed) if mode == "sample" and digit is not None else None,
            "q": shared.link_text(q) if mode == "deterministic" and digit is not None else None}
    for name, value in view.items():
        if value is None:
            qp.pop(name, None)
        elif qp.get(name) != value:
            qp[name] = value


def prior_pull(record: RunRecord) -> str:
    """How hard training pulls p_n towards the prior for this model: the KL term's weight β, and, where its card
    measured it, its mean E[n] on test digits beside the prior's mean (the Train page says why a small β lets them
    differ)."""
    beta, lp = record.train.get("beta"), record.lambda_p
    mean = prior_mean(lp, record.max_steps)
    text = (f"training pulls it towards the geometric prior λp(1−λp)^(n−1) (mean {mean:.2f} steps within N = "
            f"{record.max_steps}) only through the KL term, weighed by β = {beta:g} against the answers' loss")
    if (en := record.test.mean_expected_steps) is not None:
        far = abs(en - mean) > 0.5 * mean
        text += (f": its mean E[n] on test digits is {en:.2f}, " + ("far from the prior's: at this β the answers' "
                 "loss outweighs the pull (the Train page shows what each costs)." if far else "close to the prior's."))
    return text + ("" if text.endswith(".") else ".")


def digit_input_ui() -> tuple:
    """The input column: draw, pick a test digit or upload, then rotate -> (uint8 [28, 28] digit or None,
    true label or None, hint when there is no digit, angle, the test digit's index or None, a placeholder for
    the answer). The answer's line sits above the input, where a phone shows it right after a stroke; until
    there is an answer it says where it will be (the same height: the canvas does not move under the pen)."""
    link_view_ui()
    source = pickers.digit_source_ui()
    st.html(f"<style>.st-key-answer_line{{min-height:{ANSWER_LINES * 1.6}rem}}</style>")
    answer = st.container(key="answer_line").empty()
    answer.markdown(":material/arrow_downward: The answer appears on this line as soon as there is a digit.")
    truth = index = None
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
        if (want := st.session_state.pop("_link_test", None)) is not None:
            found = [i for i, at in enumerate(pool.index) if int(at) == want]
            if found:
                st.session_state["digit_pos"] = found[0]
            else:
                st.warning(f"The link's test digit #{want} is not among the {len(pool)} {pool.source}.",
                           icon=":material/link_off:")
        pos = pickers.digit_picker_ui(pool)
        digit, truth, hint, index = pool.x[pos], int(pool.y[pos]), "", int(pool.index[pos])
        st.caption(f"{pool.source}, image #{index}, label {truth}")
    return digit, truth, hint, pickers.rotation_ui(), index, answer


def unlike_text(reasons: Sequence[str]) -> str:
    """The warning for an input unlike the training digits: its reasons (explorer.drawing.ood) joined, one full stop."""
    said = "; ".join(reasons)
    return ("**This does not look like the handwritten digits the model was trained on**: " + said
            + ("" if said.endswith((".", "?", "!")) else ".") + " The answer above is what the model says anyway: a "
            "network answers every input with some digit, often confidently.")


def unlike_digit_ui(model, record: RunRecord, digit, angle: float, trace: Trace, mode: str, seed: int) -> None:
    """A warning under the answer when the input does not look like a training digit (explorer.drawing.ood): its
    ink, an unsure answer, a drawing that reads far surer upside down, or a rotation well beyond the model's
    training rotations (record.train's rotate_train; the accuracy its card measured at that rotation), however sure
    the answer. Is it upside down? is asked of the drawing as drawn (its answer as it is and turned 180°): a
    rotation of the reader's own is named as such, not as a drawing to turn (a 7 rotated 75° read '4 at 99.8%'
    turned, 'is it upside down?')."""
    upright = trace if not angle % 360 else trace_input(model, canvas.model_input(digit, 0), mode, seed)
    turned = trace_input(model, canvas.model_input(digit, 180), mode, seed)
    reasons = unlike_digits(digit, trace.confidence, (upright.pred, upright.confidence, turned.pred, turned.confidence))
    measured = [r for r in record.test.rotations or [] if r.get("kind") == "fixed"]
    if why := rotation_reason(angle, float(record.train.get("rotate_train") or 0.0), measured):
        reasons.append(why)
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
