"""explorer/app/sweep_views.py: the λp sweep table's rows from a running sweep job (the charts and the table are
drawn by the λp sweep page's AppTests in tests/app/test_sweep_page.py)."""
import json
import time

import pytest

from helpers import APP_TIMEOUT, one_line_errors, save_tiny_run, tiny_config
from explorer.jobs.job import JobView, RunState
from explorer.app.sweep_views import job_sweep_rows
from ponder.config import TrainConfig
from ponder.store.card import read_record
from ponder.store.record import new_record
from ponder.store.runs import SWEEP


def test_a_sweep_jobs_rows_come_from_saved_cards_and_from_the_runs_still_going(tmp_path):
    sweep = tmp_path / "sw"
    done, _ = save_tiny_run(sweep / "lambda_p0.3-seed0", lambda_p=0.3,
                            metrics={"test": {"accuracy": 0.75, "mean_steps": 2.5, "n": 8}})
    (sweep / SWEEP).write_text('{"trials": []}')                  # a sweep folder: its trials are runs/<sweep>/<trial>
    runs = [RunState(name="lambda_p0.3-seed0", config=TrainConfig(lambda_p=0.3), status="completed", run_dir=str(done),
                     record=read_record(done)),
            RunState(name="lambda_p0.5-seed0", config=TrainConfig(lambda_p=0.5), status="running",
                     progress=[{"fraction": 0.4}]),
            RunState(name="lambda_p0.7-seed0", config=TrainConfig(lambda_p=0.7), status="running"),
            RunState(name="lambda_p0.9-seed0", config=TrainConfig(lambda_p=0.9), status="failed",
                     record=new_record(TrainConfig(lambda_p=0.9), {}, status="failed", reason="NaN loss"))]
    view = JobView(id="j", session="s", kind="sweep", status="running", runs=runs, created=time.time(),
                   finished=None, cancel_requested=False)
    rows = job_sweep_rows(view)
    assert [r["name"] for r in rows] == ["runs/sw/lambda_p0.3-seed0", "lambda_p0.5-seed0", "lambda_p0.7-seed0",
                                         "lambda_p0.9-seed0"]
    assert (rows[0]["status"], rows[0]["accuracy"], rows[0]["mean_steps"]) == ("completed", 0.75, 2.5)   # its card
    assert [r["status"] for r in rows[1:]] == ["running 40%", "running", "failed"]     # 0.4 of its steps: 40%
    assert [r["lambda_p"] for r in rows] == [0.3, 0.5, 0.7, 0.9] and rows[3]["reason"] == "NaN loss"
    assert all(r["accuracy"] is None for r in rows[1:])                              # nothing measured yet


def test_a_sweep_jobs_row_says_when_its_trial_was_deleted_and_shows_no_other_runs_numbers(tmp_path):
    """The sweep folder deleted and a new sweep of the same name saved since: the row is the job's trial,
    marked deleted, not the new sweep's trial under the old path."""
    import shutil
    from explorer.jobs.job import saved_key
    sweep = tmp_path / "sw"
    done, _ = save_tiny_run(sweep / "lambda_p0.3-seed0", lambda_p=0.3,
                            metrics={"test": {"accuracy": 0.75, "mean_steps": 2.5, "n": 8}})
    (sweep / SWEEP).write_text('{"trials": []}')
    run = RunState(name="lambda_p0.3-seed0", config=TrainConfig(lambda_p=0.3), status="completed", run_dir=str(done),
                   record=read_record(done), run_key=saved_key(done))
    view = JobView(id="j", session="s", kind="sweep", status="done", runs=[run], created=time.time(),
                   finished=time.time(), cancel_requested=False)
    assert job_sweep_rows(view)[0]["status"] == "completed"
    shutil.rmtree(sweep)
    save_tiny_run(sweep / "lambda_p0.3-seed0", lambda_p=0.3, seed=5, metrics={"test": {"accuracy": 0.5, "n": 8}})
    (sweep / SWEEP).write_text('{"trials": []}')
    [row] = job_sweep_rows(view)
    assert (row["name"], row["status"], row["accuracy"]) == ("lambda_p0.3-seed0", "deleted", None)


def _folder_app():
    import os
    from explorer.app import sweep_views
    sweep_views.folder_sweep_ui(os.environ["SWEEP_FOLDER"])


@pytest.mark.long
@pytest.mark.parametrize("bad", [None, '{"plan": 1, "trials": [1, "x"]}', "max_steps 10**9", "deep"])
def test_a_sweep_folder_is_shown_or_its_sweep_json_is_one_red_line(tmp_path, monkeypatch, bad):
    """The newest sweep folder is every visitor's default: a sweep.json no sweep writes crashed the page for all."""
    from streamlit.testing.v1 import AppTest
    root = tmp_path / "runs"
    monkeypatch.setenv("PONDER_RUNS", str(root))
    save_tiny_run(root / "sw" / "t0", metrics={"test": {"accuracy": 0.75, "mean_steps": 2.5, "n": 8,
                                                        "halting_distribution": [0.5, 0.3, 0.1, 0.05, 0.05]}})
    config = tiny_config("parity").to_dict()
    plan = {"task": "parity", "base": {"hidden": 16, "max_steps": 5}, "grid": {"lambda_p": [0.3]}, "seeds": [0]}
    record = {"plan": plan, "trials": [{"name": "t0", "values": {"lambda_p": 0.3, "seed": 0}, "status": "completed",
                                        "config": config}]}
    text = json.dumps(record) if bad is None else bad
    if bad == "max_steps 10**9":       # the page computed the prior's mean over N steps: 8 GB per grid point
        text = json.dumps({**record, "trials": [{**record["trials"][0], "config": {**config, "max_steps": 10 ** 9}}]})
    elif bad == "deep":
        text = "[" * 100000 + "]" * 100000
    (root / "sw" / SWEEP).write_text(text)
    monkeypatch.setenv("SWEEP_FOLDER", str(root / "sw"))
    at = AppTest.from_function(_folder_app, default_timeout=APP_TIMEOUT).run()
    assert not at.exception, [e.value for e in at.exception]
    if bad is None:
        assert not at.error and at.dataframe[0].value["run"].tolist() == ["runs/sw/t0"]
    else:
        errs = one_line_errors(at)
        assert len(errs) == 1 and str(root / "sw" / SWEEP) in errs[0], errs


def test_the_reader_note_says_what_a_step_is_for_each_reader_and_why_the_curves_differ():
    from explorer.app.sweep_views import reader_note
    from explorer.tables import sweep_row
    from ponder.store.record import RunRecord
    rows = [sweep_row("a", RunRecord(train={"task": "mnist", "lambda_p": 0.1}, model={"reader": "rows", "rows_per_step": 2})),
            sweep_row("b", None, lambda_p=0.5, train={"task": "mnist", "reader": "cnn"})]       # a job's run, no card yet
    assert [r["reader"] for r in rows] == ["rows", "cnn"]
    note = reader_note(rows)
    assert "**cnn**: every step sees the whole image" in note and "**rows**: each step reveals 2 more rows" in note
    assert "follow the prior's 1/λp" in note and "fall much less than 1/λp" in note
    assert reader_note([sweep_row("p", RunRecord(train={"task": "parity", "lambda_p": 0.2}))]) == ""   # parity: no reader


def test_a_sweep_folders_trials_without_card_metrics_are_shown_not_measured(tmp_path, monkeypatch):
    """A sweep folder anyone can write may hold 1,000 trials whose cards have no numbers: the page measured each
    on 2,000 test items for the first visitor (cached afterwards)."""
    from explorer.app import loaders, sweep_views
    from ponder.sweeps.record import read_sweep
    root = tmp_path / "runs"
    monkeypatch.setenv("PONDER_RUNS", str(root))
    for i in range(3):
        save_tiny_run(root / "sw" / f"t{i}")                      # no metrics in the cards
    entry = {"values": {"lambda_p": 0.3, "seed": 0}, "status": "completed", "config": tiny_config("parity").to_dict()}
    plan = {"task": "parity", "base": {"hidden": 16, "max_steps": 5}, "grid": {"lambda_p": [0.3]}, "seeds": [0]}
    (root / "sw" / SWEEP).write_text(json.dumps({"plan": plan, "trials": [{**entry, "name": f"t{i}"} for i in range(3)]}))
    monkeypatch.setattr(loaders, "measured_metrics", lambda *a: pytest.fail("a trial was measured"))
    rows = sweep_views.folder_sweep_rows(read_sweep(root / "sw"))
    assert [(r["name"], r["status"], r["accuracy"]) for r in rows] == [(f"runs/sw/t{i}", "completed", None)
                                                                       for i in range(3)]
