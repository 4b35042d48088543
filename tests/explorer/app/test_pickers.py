"""explorer/app/pickers.py: a model's label in the pickers, the model a task's picker starts on, and the picker
itself under AppTest (the shipped models, a link's ?model=, a run that went away). The pages' use of the
pickers: tests/app/test_*_page.py."""
from pathlib import Path

import pytest

from explorer.app import pickers
from helpers import APP_TIMEOUT, edit_card, save_tiny_run
from ponder.store.record import RunRecord
from ponder.store.runs import ModelEntry
from ponder.tasks import TASKS


def test_entry_label_names_lambda_p_the_accuracy_and_a_partial_run():
    cancelled = ModelEntry("r", Path("r"), "run", RunRecord.from_card({"train": {"lambda_p": 0.25}, "status": "cancelled",
                                                                       "metrics": {"test": {"accuracy": 0.875}}}))
    assert pickers.entry_label(cancelled) == "r · λp 0.25 · 87.5% · partial (cancelled)"
    failed = ModelEntry("f", Path("f"), "run", RunRecord.from_card({"train": {"lambda_p": 0.5}, "status": "failed"}))   # no
    # metrics: no accuracy
    assert pickers.entry_label(failed) == "f · λp 0.5 · FAILED"


def test_default_model_is_the_tasks_own_or_the_first_tasks():
    assert pickers.default_model("parity") == TASKS["parity"].default_model == "parity-15"
    first = next(iter(TASKS.values())).default_model
    assert pickers.default_model(None) == pickers.default_model("no-such-task") == first


def _picker_app():
    from explorer.app import pickers
    entry = pickers.model_picker_ui("parity")
    import streamlit as st
    st.write(f"picked {entry.name}")


@pytest.fixture
def no_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("PONDER_RUNS", str(tmp_path / "runs"))       # only the shipped models


def _open(**query):
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_function(_picker_app, default_timeout=APP_TIMEOUT)
    at.query_params.update(query)
    return at.run()


def test_the_parity_picker_starts_on_the_tasks_shipped_model_and_keeps_it_in_the_url(no_runs):
    at = _open()
    assert not at.exception
    box = at.sidebar.selectbox(key="pick_model_parity")
    assert box.value == "parity-15" and at.query_params["model"] == "parity-15"
    assert all(o.split(" · ")[0].startswith("parity") for o in box.options)    # only the task's models
    assert "picked parity-15" in [m.value for m in at.markdown]


def test_a_link_names_the_model_and_a_run_gone_since_is_said_in_the_sidebar(no_runs, tmp_path):
    import shutil
    save_tiny_run(tmp_path / "runs" / "soon-gone")
    at = _open(model="runs/soon-gone")
    assert at.sidebar.selectbox(key="pick_model_parity").value == "runs/soon-gone"
    shutil.rmtree(tmp_path / "runs" / "soon-gone")
    at.run()
    assert not at.exception
    note = [i.value.replace("\\", "") for i in at.sidebar.info if "is gone" in i.value]   # plain(): escaped
    assert note == ["runs/soon-gone is gone (deleted or renamed meanwhile): showing parity-15 instead."]
    assert "picked parity-15" in [m.value for m in at.markdown]


def test_the_sidebar_caption_says_when_the_lambda_head_also_reads_the_confidence(no_runs, tmp_path):
    """Beside the regulariser; the paper's λ head (h alone) is left unsaid, as the shipped parity-15's."""
    folder, _ = save_tiny_run(tmp_path / "runs" / "conf")
    edit_card(folder, lambda card: card["train"].update(lambda_input="confidence", regulariser="kl-both"))
    caption = _open(model="runs/conf").sidebar.caption[0].value
    assert "KL(p ‖ p_G) + KL(p_G ‖ p) · λ head reads h and the answer's confidence ·" in caption
    assert "λ head" not in _open().sidebar.caption[0].value
