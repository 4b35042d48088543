"""Rotation study: accuracy and halting steps of an MNIST model on rotated test digits."""
import streamlit as st

from explorer import links
from explorer.app import loaders, pickers, ui, worth
from explorer.figures import studies as study_figures
from ponder.analysis.studies import rotation_verdict, rotation_label
from ponder.tasks import step_meaning

ui.app_guard(__file__)
TASK = links.MODEL_TASK["rotation"]          # the task whose models this page shows
st.title("Rotation study")
entry = pickers.model_picker_ui(TASK)
mnist, missing = loaders.mnist()
if mnist is None:
    ui.mnist_missing_ui(missing, "rotation_download")
    st.stop()
if entry is None:
    st.warning("No MNIST model to study.")
    st.stop()
pickers.rotated_model_hint_ui(entry, TASK)

angles, ranges, limit, mode, full, q = ui.rotation_settings_ui()

asked = 10000 if full else int(limit)
study = (str(entry.path), loaders.stamp(entry.path), tuple(angles), tuple(ranges), None if full else int(limit), mode, 0,
         q if mode == "deterministic" else 0.5)
with ui.user_errors():
    rows, whole = loaders.rotation_first(*study)   # a first pass on a few images unless all were measured before
n_images = int(rows[0]["n"]) if rows else 0
if not whole:
    st.info(f"A first look on the first {n_images:,} test images per rotation; measuring all "
                         f"{asked:,} now (kept on disk afterwards, so the next visit opens with them).")
answer, text = rotation_verdict(rows, step_meaning(entry.record))
st.subheader("Does it ponder longer on harder inputs?")
(st.success if answer == "longer" else st.info)(text)

c1, c2 = st.columns(2)
with c1:
    ui.chart(study_figures.rotation_accuracy_fig(rows), f"Accuracy of {entry.name} on {n_images:,} test images "
             f"rotated by exactly θ (line) or each by its own angle in ±d (diamonds), {mode} mode"
             f"{f' (Q-exit at q = {q:g})' if mode == 'deterministic' else ''}.")
with c2:
    ui.chart(study_figures.rotation_steps_fig(rows), "Spread of the halting step per rotation: boxes span the "
             "quartiles, whiskers 1.5 IQR, the dotted line joins the means.")
c1, c2 = st.columns(2)
with c1:
    ui.chart(study_figures.rotation_halting_fig(rows), "Mean learned halting distribution p_n for each rotation "
             "(darker = more mass at that step).")
labels = [rotation_label(r) for r in rows]
with c2:
    if box := ui.on_demand("Per-sample view: each test image's halting step against the confidence of its answer",
                           "rot_samples_open", icon=":material/scatter_plot:"):     # a dot per image: when asked
        with box:
            if st.session_state.get("rot_pick") not in labels:
                st.session_state["rot_pick"] = labels[min(6, len(labels) - 1)]
            pick = st.selectbox("Per-sample view for", labels, key="rot_pick")
            r = rows[labels.index(pick)]
            ui.chart(study_figures.confidence_scatter_fig(r["steps"], r["confidence"], r["correct"],
                                                          title=f"Halting step vs confidence at {pick}"),
                     "One dot per test image: the step it halted at (jittered) and the probability of its answer; "
                     "green right, red wrong.")
ui.rotation_table_ui(labels, rows)
if whole:
    worth.rotation_section_ui(entry, rows, n_images)
else:                                  # the rest of the images, and the "worth it?" section, then the page again
    with ui.user_errors():
        loaders.rotation_results(*study)
        worth.results(entry)
    st.rerun()
