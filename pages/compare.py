"""Compare runs: halting distributions, per-step accuracy and training curves of several models."""
import streamlit as st

from explorer.figures import halting as figures
from explorer.app import forms, loaders, pickers, ui, worth
from explorer import tables

ui.app_guard(__file__)
st.title("Compare runs")
st.caption("Two or more models side by side: their test numbers and settings (the design — what each step sees — "
           "is the main reason models differ), how each spreads its halting over the steps against its prior, how "
           "accurate it would be if stopped at each step, whether its extra steps beat a fixed depth or a confidence "
           "rule, and how it trained.")
imported = forms.import_run_ui()
entries = pickers.models_multiselect_ui(add=imported)
if len(entries) < 2:
    st.info("Pick two or more models or runs to compare.")
    if not entries:
        st.stop()

with ui.user_errors():
    metrics = {e.name: loaders.test_metrics(e) for e in entries}
    histories = {e.name: loaders.history(e) for e in entries}
series = [{"name": e.name, "p": metrics[e.name].halting_distribution, "lambda_p": e.record.lambda_p,
           "per_step_accuracy": metrics[e.name].per_step_accuracy} for e in entries if metrics[e.name].charted]
if len(series) < len(entries):
    st.caption("No test metrics for: " + ", ".join(tables.plain(e.name) for e in entries if not metrics[e.name].charted)
               + " (no card metrics, and MNIST is not available to measure them).")

st.space("small")                  # room for the table's toolbar (shown on hover) below the picker's icons
num = st.column_config.NumberColumn                 # missing values show as "—"; the model column stays on scroll
rows = tables.compare_rows(entries, metrics)
st.dataframe(rows, hide_index=True, placeholder="—", column_config={
    "model": st.column_config.TextColumn(pinned=True, width="medium"), "accuracy": num(format="%.4f"),
    "mean steps": num(format="%.2f"), "E[n]": num(format="%.2f"), "E[n] hard − easy": num(format="%+.2f"),
    "train s": num(format="%.0f")})
if note := tables.test_sizes_note(rows):
    st.caption(f":material/info: {tables.plain(note)}")
if steps := tables.step_groups(entries):                     # the design: the main reason models differ
    st.markdown("**What a step is** — " + "; ".join(f"{', '.join(map(tables.plain, names))}: {text}"
                                                   for names, text in steps) + ".")
c1, c2 = st.columns(2)
with c1:
    ui.chart(figures.overlay_halting_fig(series), "Mean learned halting distribution p_n on each model's test "
             "set (solid), with the geometric prior of each distinct λp and N (dashed or dotted, in the colour of the "
             "first model that has it).")
with c2:
    acc = [s for s in series if s["per_step_accuracy"]]
    low = min([min(s["per_step_accuracy"]) for s in acc] + [1.0])
    ui.chart(figures.overlay_steps_fig(acc, "per_step_accuracy", "Accuracy if it stopped at step n",
                                       "accuracy", [max(0.0, low - 0.02), 1.0]),
             "Test accuracy of the answer each model would give if forced to stop at step n.")

worth.compare_ui(entries)

histories = {k: v for k, v in histories.items() if v}
st.subheader("Training curves")
CURVES = [("loss", "Training loss", "loss", "Total loss (reconstruction + β·KL) per training step, log scale."),
          ("accuracy", "Batch accuracy", "accuracy", "Accuracy of the p-weighted answer on each logged training batch."),
          ("mean_steps", "Mean halting step", "E[n]", "Batch mean of the expected halting step E[n] = Σ n·p_n during "
           "training.")]
for tab, (field, title, axis, caption) in zip(ui.tabs_on_demand([c[1] for c in CURVES], "compare_curves"), CURVES):
    if tab is not None:                                   # one curve drawn at a time: the open tab's
        with tab:
            ui.chart(figures.overlay_training_fig(histories, field, title, axis, log=field == "loss"), caption)
