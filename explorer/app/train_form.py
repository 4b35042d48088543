"""The Train page's sidebar settings: a run's name (and the name it will be saved as), Start, and the
hyperparameters. Live widgets, not a st.form: the saved-as name and the prior preview follow every change,
and only the Start button starts a run. Returns plain values."""
from __future__ import annotations

import re
import streamlit as st

from ponder.config import ConfigError, TrainConfig
from ponder.losses import REGULARISERS, regulariser_help
from ponder.methods import METHODS, method_help
from ponder.halting import LAMBDA_INPUTS
from ponder.store.runs import RunNameError, safe_name, unused_name
from ponder.tasks import get_task, train_config, validate
from ponder.tasks.options import default_of, option_fields, options_of
from ponder.training.loop import trains_on

from .. import tables
from .forms import (LAMBDA_INPUT_LABELS, MAX_BATCH, MAX_HIDDEN, MAX_STEPS, SIZE_HELP, device_label, devices,
                    regulariser_choice)
from ..links import LP_HELP, LP_RANGE
from .ui import error_text, remembered_lambda_p

FIELDS = ("name", "method", "lp", "beta", "reg", "lam_in", "n", "hidden", "batch", "lr", "epochs", "seconds", "seed", "device")


def auto_name(task: str, lambda_p: float) -> str:
    """The name a run gets unless one is typed: 'mnist-lp0.5'."""
    return f"{task}-lp{lambda_p:g}"


def saved_as(name: str, root=None) -> tuple:
    """(the folder name a run called `name` would be saved as now, a sentence when that is not `name`, or an error
    sentence for a name with no usable characters as the first item's None)."""
    try:
        final = unused_name(root, name)
    except RunNameError as e:
        return None, error_text(e)
    return final, tables.plain(tables.renamed(name, final))


def keep_job_settings(name: str, cfg: TrainConfig) -> None:
    """Show a job's task and settings in the form when it has none of its own yet (a reload forgets them)."""
    st.session_state.setdefault("_kept_train_task", cfg.task)
    kept = st.session_state.setdefault(f"_kept_tf_{cfg.task}_", {})
    if kept:
        return
    kept.update(name=name, method=cfg.method, lp=cfg.lambda_p, beta=cfg.beta, reg=cfg.regulariser, lam_in=cfg.lambda_input,
                n=cfg.max_steps, hidden=cfg.hidden, batch=cfg.batch_size, lr=cfg.lr, epochs=cfg.epochs,
                seconds=int(cfg.max_seconds or 0), seed=cfg.seed, device=cfg.device,
                **vars(options_of(get_task(cfg.task), cfg)))


def option_ui(f, key: str):
    """The widget of one task option, made from its field (ponder.tasks.options.option); returns its value."""
    m, d, sb = f.metadata, default_of(f), st.sidebar
    label, help = m["label"] or f.name.replace("_", " "), m["help"][:1].upper() + m["help"][1:] + "."
    if m["choices"]:
        value = sb.selectbox(label, m["choices"], key=key, help=help, format_func=lambda v: m["labels"].get(v, str(v)))
    elif isinstance(d, bool):
        value = sb.checkbox(label, key=key, help=help)
    elif m["slider"]:
        value = sb.slider(label, m["lo"], m["hi"], step=m["step"], key=key, help=help)
    else:
        value = sb.number_input(label, m["lo"], m["hi"], step=m["step"] or (1 if type(d) is int else None), key=key,
                                help=help, format=None if type(d) is int else "%g")
    if m["note"]:
        sb.caption(m["note"])
    return type(d)(value)


def train_form_ui(task: str, busy: str = "") -> tuple:
    """The sidebar training settings. Returns (request, settings): request is (run name, TrainConfig) when
    Start is pressed (else None); settings is {lambda_p, beta, n, regulariser, reader} as set now (the prior preview, what a step is).
    busy: why a run cannot start now ('' when it can): Start is then disabled and says why.

    Defaults train an MNIST PonderNet for the task's time budget (the Train page says what they reach).
    Widget keys start with tf_<task>_ so each task keeps its own values; they are kept across pages.
    """
    d, t, sb = train_config(task), get_task(task), st.sidebar
    k = f"tf_{task}_"
    kept = st.session_state.setdefault(f"_kept_{k}", {})     # the form's values: a widget's own state is dropped
    choices, own = devices(), option_fields(t)                # on a page that does not draw it
    defaults = dict(method=d.method, lp=float(remembered_lambda_p(kept.get("lp", d.lambda_p))), beta=float(d.beta),
                    reg=d.regulariser,
                    lam_in=d.lambda_input, n=int(d.max_steps), hidden=int(d.hidden), batch=int(d.batch_size),
                    lr=float(d.lr), epochs=float(d.epochs), seconds=t.budget_seconds, seed=0, device=choices[0],
                    **vars(options_of(t, d)))
    for f, v in defaults.items():              # a value out of a widget's range falls back to its default
        st.session_state.setdefault(k + f, kept.get(f, v) if f != "lp" else v)
    if st.session_state[k + "device"] not in choices:
        st.session_state[k + "device"] = choices[0]
    typed = st.session_state.get(k + "name", kept.get("name"))
    if typed is None or re.fullmatch(re.escape(task) + r"-lp[0-9.e-]+", typed):   # not typed: follows λp
        typed = auto_name(task, st.session_state[k + "lp"])
    st.session_state[k + "name"] = typed
    name = sb.text_input("Run name", max_chars=64, key=k + "name")
    final, note = saved_as(name)
    if final is None:
        sb.caption(f":red[{note}]")
    else:
        sb.caption(f"Saved as **runs/{tables.plain(final)}**" + (f" — {note}" if note else ""))
    go = sb.button("Start training", icon=":material/play_arrow:", type="primary", width="stretch", key="tf_start",
                   disabled=bool(busy), help=busy or "Trains in the background with the settings below.")
    if busy:
        sb.caption(busy)
    method = sb.selectbox("Halting method", list(METHODS), key=k + "method", format_func=lambda m: METHODS[m].choice,
                          help=method_help("; ") + ". With ACT, β is its ponder cost τ.")
    lp = sb.slider("λp (prior)", *LP_RANGE, step=0.01, key=k + "lp", help=LP_HELP)
    beta = sb.number_input("β (weight of the KL term)", 0.0, 10.0, defaults["beta"], 0.005, format="%g", key=k + "beta")
    reg = sb.selectbox("Regulariser", list(REGULARISERS), key=k + "reg", format_func=regulariser_choice,
                       help=regulariser_help())
    lam_in = sb.selectbox("What the λ head reads", LAMBDA_INPUTS, key=k + "lam_in", format_func=LAMBDA_INPUT_LABELS.get,
                          help="The halting probability λ_n comes from the cell's state h; 'confidence' also gives "
                               "it the answer's top probability and how far the answer moved since the last step; "
                               "'stability' also for how many steps the answer has held and how far the state "
                               "still moves.")
    options = {f.name: option_ui(f, k + f.name) for f in own}         # the task's own options
    n = sb.number_input("N (most steps)", 1, MAX_STEPS, defaults["n"], 1, key=k + "n", help=SIZE_HELP)
    hidden = sb.number_input("Hidden size", 4, MAX_HIDDEN, defaults["hidden"], 8, key=k + "hidden", help=SIZE_HELP)
    batch = sb.number_input("Batch size", 8, MAX_BATCH, defaults["batch"], 16, key=k + "batch", help=SIZE_HELP)
    lr = sb.number_input("Learning rate", 1e-5, 1.0, defaults["lr"], 1e-4, format="%.4f", key=k + "lr")
    epochs = sb.number_input("Epochs", 0.001, 100.0, defaults["epochs"], 0.5, format="%g", key=k + "epochs",
                             help="MNIST: passes over 55,000 images. Parity: blocks of 500 batches.")
    seconds = sb.number_input("Time budget (s, 0 = none)", 0, 24 * 3600, defaults["seconds"], 10, key=k + "seconds",
                              help="Training stops at whichever comes first: the epochs or the budget. The budget "
                                   "covers the training steps; a validation pass, saving and a test measurement "
                                   "on 2,000 images follow (a few seconds, shown as they run).")
    seed = sb.number_input("Seed", 0, 2**31 - 1, 0, 1, key=k + "seed")
    device = sb.selectbox("Device", choices, key=k + "device", format_func=device_label,
                          help="auto: the GPU when there is one (CUDA, else Apple's MPS), else the CPU.")
    sb.caption(f"Trains on: {trains_on(device)}")
    kept.update({f: st.session_state[k + f] for f in FIELDS + tuple(options)})
    settings = dict(lambda_p=float(lp), beta=float(beta), n=int(n), regulariser=reg,
                    reader=options.get("reader", d.reader))
    if not go:
        return None, settings
    st.session_state["_lp"] = lp
    st.query_params["lp"] = f"{lp:g}"
    cfg = train_config(task, lambda_p=float(lp), beta=float(beta), max_steps=int(n), hidden=int(hidden),
                       batch_size=int(batch), lr=float(lr), epochs=float(epochs), max_seconds=float(seconds) or None,
                       seed=int(seed), device=device, regulariser=reg, lambda_input=lam_in, method=method, **options)
    try:
        safe, cfg = safe_name(name), validate(cfg)
        if note := tables.renamed(name, safe):
            sb.info(tables.plain(note))
        return (safe, cfg), settings
    except (RunNameError, ConfigError) as e:
        sb.error(error_text(e))
        return None, settings
