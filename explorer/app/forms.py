"""The forms: train a λp sweep, import a run, and what the training form (explorer.app.train_form) shares. Each
returns plain values."""
from __future__ import annotations

import json
from typing import Optional

import streamlit as st
import torch

from ponder.config import ConfigError, TrainConfig
from ponder.losses import REGULARISERS, regulariser_help
from ponder.tasks import TASKS, get_task, train_config, validate
from ponder.tasks.mnist.options import MNIST_READERS, READER_LABELS, READER_NOTE
from ponder.tasks.parity.options import preset_label
from ponder.store.card import MAX_CARD_BYTES
from ponder.store.manage import import_zip
from ponder.store.runs import RunNameError, safe_name, unused_name
from ponder.store.uploads import IMPORT_MAX_HIDDEN, IMPORT_MAX_STEPS, MAX_UPLOAD_BYTES, import_checkpoint
from ponder.sweeps.plan import Plan
from ponder.training.loop import trains_on

from .. import tables
from .ui import USER_ERRORS, error_text


# ----------------------------------------------------------------------------- training forms

def devices() -> list:
    return ["auto", "cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def device_label(device: str) -> str:
    return f"auto: {trains_on('auto')}" if device == "auto" else device


def task_ui(key: str = "train_task") -> str:
    """The task radio; the choice is kept across pages (a widget's own state is dropped where it is not drawn)."""
    tasks = list(TASKS)
    kept = st.session_state.get("_kept_" + key)
    task = st.sidebar.radio("Task", tasks, index=tasks.index(kept) if kept in tasks else 0, key=key,
                            horizontal=True, format_func=task_label)
    st.session_state["_kept_" + key] = task
    return task


def task_label(task: str) -> str:
    label = get_task(task).label
    return label[:1].upper() + label[1:]


def all_presets() -> dict:
    """Every task's data presets, {name: preset} (the parity presets)."""
    return {name: p for t in TASKS.values() for name, p in t.presets.items()}


# What one web user can ask for (hidden 1024, batch 4096, N 200 would need ~40 GB and get the server
# OOM-killed). With these the largest run, the coarse reader at all three maxima, needs ~2.3 GB at its
# peak by ponder.training.memory.estimate (cnn reader 1.5 GB, parity 1.4 GB); JobRegistry.submit still refuses a run
# that does not fit in the memory free when it starts.
MAX_STEPS, MAX_HIDDEN, MAX_BATCH = IMPORT_MAX_STEPS, IMPORT_MAX_HIDDEN, 512   # an import is held to the same sizes
SIZE_HELP = "The form's limits keep a run under ~2.5 GB of memory; a run that does not fit in the memory free now is refused."



def regulariser_choice(name: str) -> str:
    """A regulariser as a form's choice shows it (ponder.losses.REGULARISERS)."""
    return REGULARISERS[name].choice


LAMBDA_INPUT_LABELS = {"hidden": "h (the paper's)", "confidence": "h + answer's confidence",   # fit the sidebar
                       "stability": "h + confidence, stability"}


SWEEP_CHOICES = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)    # λp in (0, 1): see links.LP_RANGE


def sweep_form_ui(reader: str = "cnn") -> Optional[tuple]:
    """λp values, seeds and a short config per trial (MNIST or parity). Returns (sweep folder name, Plan)
    on submit: the trials train through ponder.sweeps.run into runs/<name>/, as `python -m ponder sweep` does.
    reader: what each MNIST step sees by default (the shipped sweep's, so a sweep of one's own compares with it)."""
    with st.form("sweep_form", enter_to_submit=False):
        values = st.multiselect("λp values to train", SWEEP_CHOICES, default=[0.1, 0.3, 0.5, 0.9], key="sw_values")
        t1, t2, t3, t4 = st.columns(4)
        task = t1.radio("Task", list(TASKS), horizontal=True, key="sw_task", format_func=task_label)
        presets = list(all_presets())
        preset = t2.selectbox("Parity preset", presets, index=presets.index(TrainConfig().parity_preset),
                              key="sw_preset", format_func=preset_label,
                              help="Parity only. The video seed swept λp 0.1–0.9 on its n = 15 (video-15).")
        reg = t3.selectbox("Regulariser", list(REGULARISERS), key="sw_reg", format_func=regulariser_choice,
                           help=regulariser_help())
        read = t4.selectbox("What each step sees (MNIST)", MNIST_READERS, index=MNIST_READERS.index(reader),
                            key="sw_reader", format_func=READER_LABELS.get,
                            help=f"MNIST only. The default is the shipped sweep's reader ({READER_LABELS[reader]}), "
                                 "so your curve compares with it. " + READER_NOTE)
        c1, c2, c3, c4, c5 = st.columns(5)
        epochs = c1.number_input("Epochs per run", 0.001, 20.0, 0.5, 0.25, format="%g", key="sw_epochs")
        seconds = c2.number_input("Time budget per run (s)", 0, 3600, 20, 5, key="sw_seconds",
                                  help="Each run stops at its epochs or this budget, whichever comes first.")
        n = c3.number_input("N", 1, MAX_STEPS, 20, 1, key="sw_n", help=SIZE_HELP)
        beta = c4.number_input("β", 0.0, 10.0, 0.01, 0.005, format="%g", key="sw_beta")
        seeds = c5.number_input("Seeds per λp", 1, 10, 1, 1, key="sw_seeds", help="Seeds 0, 1, … for each λp.")
        name = st.text_input("Sweep folder (in the runs folder)", "", max_chars=64, key="sw_name",
                             placeholder="a new sweep-<task>", help="Empty: a new folder. An earlier sweep's folder: its "
                             "trials completed with the same settings are kept, not trained again (resume); "
                             "trials trained with other settings are never replaced.")
        go = st.form_submit_button("Train the sweep (queued, one run after the other)", icon=":material/play_arrow:",
                                   type="primary", key="sw_start")
    if not go:
        return None
    if not values:
        st.warning("Pick at least one λp value.")
        return None
    reads = get_task(task).reads
    base = dict(epochs=float(epochs), max_seconds=float(seconds) or None, max_steps=int(n), beta=float(beta),
                regulariser=reg, device="auto", **(dict(parity_preset=preset) if "parity_preset" in reads else {}),
                **(dict(reader=read) if "reader" in reads else {}))
    try:
        folder = safe_name(name) if name else unused_name(name=f"sweep-{task}")   # a new folder unless one is named
        if name and (note := tables.renamed(name, folder)):
            st.info(tables.plain(note))
        return folder, Plan(task, base, {"lambda_p": sorted(values)}, list(range(seeds)))
    except RunNameError as e:
        st.error(error_text(e))
        return None


# ----------------------------------------------------------------------------- importing a run

def import_run_ui(where=None) -> Optional[str]:
    """Upload a run into the runs folder: an exported .zip (Runs page), or model.safetensors + run.json
    (optionally metrics.jsonl). In the sidebar unless `where` (a container) is given.

    Validated by ponder.store.uploads.import_checkpoint (size limit, no pickle, shapes and config checked)
    before anything lands in the runs folder. Returns the new run's picker name, else None.
    """
    box = (where or st.sidebar).expander("Import a run", icon=":material/upload:", expanded=where is not None)
    n = st.session_state.get("_imports", 0)             # a new uploader and name box after each import: emptied
    fresh = "" if n == 0 else f"_{n}"
    with box.form("import_run", border=False):
        files = st.file_uploader("A run's .zip (from Export on the Runs page), or its model.safetensors and run.json "
                                 "(metrics.jsonl optional)", accept_multiple_files=True,
                                 type=["zip", "safetensors", "json", "jsonl"], max_upload_size=MAX_UPLOAD_BYTES // 2**20,
                                 key="import_files" + fresh, help="The files of a run folder, e.g. from "
                                 "`python -m ponder train` or another explorer. Checked before it is added.")
        name = st.text_input("Name for the run", "", max_chars=64, key="import_name" + fresh,
                             placeholder="its own name", help="Empty: the run's own name (the .zip's file name, "
                             "else the name in its run.json), with -2, -3, … if a run has it already.")
        go = st.form_submit_button("Import", icon=":material/upload:", key="import_go")
    if not go:
        return None
    by_ext = {}
    for f in files or []:
        ext = f.name.rsplit(".", 1)[-1].lower() if "." in f.name else ""
        by_ext.setdefault(ext, []).append(f)
    zipped = len(by_ext.get("zip", [])) == 1 and len(files) == 1
    if not zipped and (len(by_ext.get("safetensors", [])) != 1 or len(by_ext.get("json", [])) != 1
                       or len(by_ext.get("jsonl", [])) > 1 or by_ext.get("zip")):
        box.error("Upload one .zip, or exactly one .safetensors file and one run.json (and at most one metrics.jsonl).")
        return None
    name = name.strip() or own_name(files[0] if zipped else by_ext["json"][0], zipped)
    try:
        dest = (import_zip(by_ext["zip"][0], name) if zipped else
                import_checkpoint(by_ext["safetensors"][0], by_ext["json"][0], name,
                                  history=(by_ext.get("jsonl") or [None])[0]))
    except USER_ERRORS as e:
        box.error(error_text(e), icon=":material/error:")
        return None
    box.success(f"Imported as runs/{dest.name}; it is now in every model picker. {tables.plain(tables.renamed(name, dest.name))}")
    st.session_state["_imports"] = n + 1
    return f"runs/{dest.name}"


def own_name(upload, zipped: bool) -> str:
    """The name an uploaded run brings: a .zip's file name (Export names it after the run), else the "name" in its
    run.json; 'imported' when neither gives one a run folder can have. Only this string is taken from the JSON here
    (at most a card's size, a JSON nested past the parser's limit giving none): import_checkpoint reads the card."""
    name = upload.name.rsplit(".", 1)[0] if zipped else None
    if not zipped:
        try:
            raw = upload.getvalue()
            name = json.loads(raw).get("name") if len(raw) <= MAX_CARD_BYTES else None
        except (ValueError, RecursionError, AttributeError, TypeError):
            name = None
    try:
        return name if isinstance(name, str) and safe_name(name) else "imported"
    except RunNameError:                   # no letter or digit in it
        return "imported"
