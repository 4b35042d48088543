"""Ponder a digit: draw, pick or upload a digit, rotate it, and watch the network decide when to stop."""
import streamlit as st

from explorer.drawing import canvas
from explorer.app import digit_page, loaders, pickers, stepper, ui, views, worth
from explorer import links
from ponder.analysis.studies import seen_at_steps, trace_input, view_labels

ui.app_guard(__file__)
TASK = links.MODEL_TASK["digit"]          # the task whose models this page shows
st.title("Ponder a digit")
entry, ck = pickers.checkpoint_picker_ui(TASK)
digit_page.intro_ui(ck.record, entry.name)
second = digit_page.second_model_ui(entry.name)
model = ck.model
CLASSES = [str(c) for c in range(10)]

left, right = st.columns([1, 1.4], gap="large")
with left:
    digit, truth, hint, angle, index, answer = digit_page.digit_input_ui()   # the answer's line above the input

with right:
    if digit is None:
        st.info(hint)
    else:
        x = canvas.model_input(digit, angle)
        mode = ui.mode_ui()
        q = ui.q_ui() if mode == "deterministic" else 0.5
        seed = ui.seed_ui(enabled=mode == "sample")
        trace = trace_input(model, x, mode, seed, q)
        answer.markdown(views.answer_line(trace, CLASSES, truth))
        c1, c2 = st.columns([0.8, 2.4])
        with c1:
            views.seen_image_ui(canvas.seen_image(x), f"What the model sees (28×28{f', rotated {angle:g}°' if angle else ''})")
        with c2:
            views.answer_ui(trace, CLASSES, truth)
            worth.settle_ui(trace, truth)
        digit_page.unlike_digit_ui(model, ck.record, digit, angle, trace, mode, seed)   # unlike a training digit?
digit_page.view_link(digit, index, angle, *((mode, seed, q) if digit is not None else ("", 0, 0.5)))

if digit is not None:
    shown = [(entry.name, model, trace)]                 # the models answering, [(name, model, Trace)]
    if second is not None:
        with ui.user_errors(stop=False):
            other = loaders.checkpoint(second).model
            shown.append((second.name, other, trace_input(other, x, mode, seed, q)))
            digit_page.side_by_side_ui([(name, tr) for name, _, tr in shown], CLASSES, truth)
    name, stepped, tr = digit_page.stepped_model_ui(shown)
    seen = seen_at_steps(stepped, x)
    stepper.steps_ui(tr, None if seen is None else [canvas.seen_image(v[None]) for v in seen], CLASSES, truth,
                     labels=view_labels(stepped))
    views.trace_downloads_ui(tr, CLASSES, name)
if box := ui.on_demand("Test digits it ponders least and most (E[n] over the first 2,000 test digits)", "gallery_open"):
    with box:                                        # measured when opened, not on each first drawing
        views.pondering_gallery_ui(loaders.pondering_gallery(str(entry.path), loaders.stamp(entry.path)), CLASSES)
worth.section_ui(entry, "digit")                     # about the model, not the input: there before any drawing
