"""explorer/sweep_views.py: the λp sweep table's rows from a running sweep job (the charts and the table are
drawn by the λp sweep page's AppTests in tests/app/test_pages.py)."""
import time

from helpers import save_tiny_run
from explorer.jobs import JobView, RunState
from explorer.sweep_views import job_sweep_rows
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


def test_the_reader_note_says_what_a_step_is_for_each_reader_and_why_the_curves_differ():
    from explorer.sweep_views import reader_note
    from explorer.tables import sweep_row
    rows = [sweep_row("a", {"train": {"task": "mnist", "lambda_p": 0.1}, "model": {"reader": "rows", "rows_per_step": 2}}),
            sweep_row("b", None, lambda_p=0.5, train={"task": "mnist", "reader": "cnn"})]       # a job's run, no card yet
    assert [r["reader"] for r in rows] == ["rows", "cnn"]
    note = reader_note(rows)
    assert "**cnn**: every step sees the whole image" in note and "**rows**: each step reveals 2 more rows" in note
    assert "follow the prior's 1/λp" in note and "fall much less than 1/λp" in note
    assert reader_note([sweep_row("p", {"train": {"task": "parity", "lambda_p": 0.2}})]) == ""   # parity: no reader
