"""Parity: one input vector step by step, then easy vs hard (vs extrapolation) test sets."""
import streamlit as st

from explorer import inputs, links, tables
from explorer.app import loaders, pickers, stepper, ui, views, worth
from explorer.tasks.parity import paper
from explorer.figures import studies as study_figures
from ponder.tasks.parity.data import parity_target
from ponder.tasks.parity.task import layout_of
from ponder.analysis.studies import trace_input

ui.app_guard(__file__)
TASK = links.MODEL_TASK["parity"]          # the task whose models this page shows
st.title("Parity")
entry, ck = pickers.checkpoint_picker_ui(TASK)
views.parity_intro_ui(ck.record, entry.name)
n = int(ck.record.model["n_elems"])
CLASSES = ["even", "odd"]

c1, c2 = st.columns([1.35, 2], gap="large")      # 1.35: the whole halting mode control at 1280 px
with c1:
    how = st.segmented_control("Input", ["Generate", "Type"], key="par_how", required=True, default="Generate")
    x = None
    if how == "Type":
        text = st.text_input(f"{n} values in {{-1, 0, 1}} (e.g. '1 -1 0 …' or '+-0…')", "+-" * (n // 4) + "0" * (n - 2 * (n // 4)),
                             max_chars=inputs.vector_chars(n), key="par_text")
        try:
            x = inputs.parse_vector(text, n)
        except ValueError as e:
            st.error(f"{e}. Fix the vector to see its steps; the test sets below still show.")
    else:
        k = st.slider("Number of non-zeros k", 0, n, min(n, max(1, n // 2)), key="par_k")
        vseed = st.number_input("Vector seed", 0, 10**9, 0, key="par_vseed", help="Change it for another vector.")
        x = inputs.parity_vector(n, k, vseed, layout_of(ck.record.config))
    mode = ui.mode_ui("par_mode")
    q = ui.q_ui("par_q") if mode == "deterministic" else 0.5
    seed = ui.seed_ui("par_seed", enabled=mode == "sample", stacked=True)
if x is not None:
    st.session_state["_parity_vector"] = x              # a Train run watches it learn (explorer.app.watch_views)
    truth = int(parity_target(x)[0])
    trace = trace_input(ck.model, x, mode, seed, q)
    with c2:
        ui.chart(study_figures.parity_input_fig(x[0].tolist()), "The input: red +1, blue −1, grey 0; the target is "
                 "whether the number of +1s is odd.", key="par_input")
        pickers.vector_cells_ui(x[0].tolist())
        views.answer_ui(trace, CLASSES, truth)
    stepper.steps_ui(trace, None, CLASSES, truth, key="par_step")
    views.trace_downloads_ui(trace, CLASSES, entry.name, key="par")

st.subheader("Easy vs hard inputs")
if line := tables.parity_card_line(ck.record):
    st.caption(line)
size = st.select_slider("Problems per test set", [500, 1000, 2000, 5000, 10000], 2000, key="par_size")
with ui.user_errors():
    res = loaders.parity_results(str(entry.path), loaders.stamp(entry.path), int(size), "sample", 0)
sets = res["sets"]
by_sets, by_k = ui.tabs_on_demand(["Halting distribution by set", "Steps and accuracy by k"], "par_sets_tab")
if by_sets is not None:                            # one chart drawn at a time: the open tab's
    with by_sets:
        ui.chart(study_figures.sets_halting_fig({k: v["halting_distribution"] for k, v in sets.items()},
                                                ck.model.lambda_p),
                 f"Mean halting distribution on {int(size):,} problems per set, by number of non-zeros k "
                 f"(trained on k {res['train_k'][0]}–{res['train_k'][1]}), against the prior.", key="par_sets")
if by_k is not None:
    with by_k:
        gap = study_figures.unmeasured_k(res["by_k"])
        ui.chart(study_figures.by_k_fig(res["by_k"], res["train_k"]), "Mean sampled halting step, mean E[n] = "
                 "Σ n·p_n with its spread over the inputs (error bars: ± std), and accuracy (dotted, right axis) for each "
                 "number of non-zeros k; the shaded band is the training range."
                 + (f" No test set has k {gap}: the lines break there." if gap else ""), key="par_byk")
st.dataframe([{"set": k, "accuracy": v["accuracy"], "mean steps": v["mean_steps"], "E[n]": v["expected_steps"],
               "problems": v["count"]} for k, v in sets.items()], hide_index=True)
worth.section_ui(entry, "par")
paper.section_ui(x)
