"""explorer/app/job_views.py: what the Train page says during and after the training loop."""
import re

import pytest
from streamlit.testing.v1 import AppTest


def progress_app():
    import time

    import streamlit as st

    from explorer.app import job_views
    from explorer.jobs.job import RunState
    from ponder.config import TrainConfig
    phase, step, forecast = st.session_state.get("case", ("training", 50, 190))
    row = dict(step=step, total_steps=1290, elapsed=4.0 if phase == "training" else 15.0, wall=time.time(),
               max_seconds=15.0, forecast_steps=forecast, fraction=0.3, halting=[0.5, 0.5], loss=1.0, rec=1.0,
               reg=0.0, accuracy=0.5, mean_steps=1.5, val_accuracy=None, epoch=0.1, lr=0.002)
    run = RunState(name="r", config=TrainConfig(max_steps=2, max_seconds=15.0), status="running", phase=phase,
                   progress=[row], started=time.time() - 20)
    job_views.run_progress_ui(run, key="k")


def progress_text(case):
    at = AppTest.from_function(progress_app)
    at.session_state["case"] = case
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at.get("progress")[0].proto.text


@pytest.mark.long
def test_the_progress_line_shows_the_forecast_while_training_and_the_phase_after_it():
    text = progress_text(("training", 50, 190))
    assert "step 50 of about 190 (15 s budget)" in text and "training time left ≈ 11 s" in text
    # after the loop: no step estimate, what was trained and what runs now
    for phase, what in (("validating", "the final validation pass"), ("saving", "saving the run"),
                        ("evaluating", "measuring it on test data")):
        text = progress_text((phase, 84, 84))
        assert f"trained 84 steps in 15 s · now {what}" in text and "of about" not in text, text


def slowing_app():
    """One run's progress line, redrawn as its reports say the run slowed down (a row per rerun)."""
    import time

    import streamlit as st

    from explorer.app import job_views
    from explorer.jobs.job import RunState
    from ponder.config import TrainConfig
    step, elapsed = st.session_state["report"]
    row = dict(step=step, total_steps=1290, elapsed=elapsed, wall=time.time(), max_seconds=60.0, forecast_steps=1290,
               fraction=elapsed / 60, halting=[0.5, 0.5], loss=1.0, rec=1.0, reg=0.0, accuracy=0.5, mean_steps=1.5,
               val_accuracy=None, epoch=0.1, lr=0.002)
    run = RunState(name="r", config=TrainConfig(max_steps=2, max_seconds=60.0), status="running", phase="training",
                   progress=[row], started=1000.0)
    job_views.run_progress_ui(run, key="k")


def seconds_left(text: str) -> int:
    m = re.search(r"training time left ≈ (?:(\d+) min )?(\d+) s", text)
    return 60 * int(m.group(1) or 0) + int(m.group(2))


def test_the_time_left_of_a_60_s_run_never_exceeds_it_and_never_rises():
    at = AppTest.from_function(slowing_app)
    shown = []
    for report in ((10, 1.0), (300, 20.0), (400, 30.0), (480, 45.0)):    # the pace falls: 10, 15, 13.3, 10.7 steps/s
        at.session_state["report"] = report
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        text = at.get("progress")[0].proto.text
        shown.append(seconds_left(text))
        assert "of 1,290 ·" not in text                         # "at most" 1,290: the budget may end it first
    assert all(s <= 60 for s in shown) and shown == sorted(shown, reverse=True), shown


def result_app():
    import streamlit as st

    from explorer.app import job_views
    from explorer.jobs.job import RunState
    from ponder.config import TrainConfig
    from ponder.store.record import new_record
    steps, reason, run_dir, *rest = st.session_state["case"]
    status, metrics = rest or ("cancelled", None)
    cfg = TrainConfig(task="parity", max_steps=2, max_seconds=10.0)
    record = new_record(cfg, {}, status=status, reason=reason, steps=steps, train_seconds=10.0, metrics=metrics)
    job_views.run_result_ui(RunState(name="r", config=cfg, status=status, run_dir=run_dir, record=record))


def result_boxes(case):
    at = AppTest.from_function(result_app)
    at.session_state["case"] = case
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return [(kind, e.value) for kind in ("info", "warning", "success", "error") for e in getattr(at, kind)]


def test_a_cancel_before_the_first_step_says_so_in_one_sentence():
    boxes = result_boxes((0, "cancelled from another session at step 0; cancelled before the first step; "
                             "nothing to save", None))
    assert boxes == [("info", "**r** was cancelled from another session before its first training step, so "
                              "there is nothing to save.")], boxes
    # a cancel after some steps is a partial run, saved where it says
    (kind, text), = result_boxes((12, "cancelled at step 12", "/tmp/runs/r"))
    assert kind == "warning" and "**Partial run**: cancelled at step 12." in text and "Not saved" not in text


def test_a_run_that_learned_nothing_is_told_the_likely_cause():
    # a 10 s parity run at chance: its budget ended it, so the advice is more time, not a smaller learning rate
    chance = {"test": {"accuracy": 0.5, "n": 2000, "mean_steps": 2.0}}
    (kind, text), = result_boxes((90, "stopped by the time budget of 10 s at step 90", "/tmp/runs/r", "completed", chance))
    assert kind == "warning" and "learned nothing" in text and "its time budget ended it after 90 steps" in text
    assert "smaller learning rate" not in text
    (kind, text), = result_boxes((5000, "", "/tmp/runs/r", "completed", chance))
    assert "try a smaller learning rate or β" in text


def job_app():
    import time

    import streamlit as st

    from explorer.app import job_views
    from explorer.jobs.job import JobView, RunState
    from ponder.config import TrainConfig
    budget = st.session_state["budget"]
    run = RunState(name="r", config=TrainConfig(max_steps=2, max_seconds=budget), status="queued")
    job_views.job_ui(JobView(id="j", session="s", kind="train", status="running", runs=[run], created=time.time(),
                             finished=None, cancel_requested=False, cap=1800.0), lambda: None)


def test_the_server_cap_is_named_only_when_the_job_could_reach_it():
    # a 60 s job was told "the server stops it at its 30 min cap, in 29 min 30 s"
    for budget, named in ((60.0, False), (None, True), (3600.0, True)):
        at = AppTest.from_function(job_app)
        at.session_state["budget"] = budget
        at.run()
        line = next(m.value for m in at.markdown if "Training job" in m.value)
        assert ("30 min cap" in line) is named, (budget, line)


def test_durations_under_a_second_are_not_zero():
    from explorer.app.job_views import _fmt_s
    assert [_fmt_s(v) for v in (0.0, 0.4, 1.4, 75.0, None)] == ["0 s", "under 1 s", "1 s", "1 min 15 s", "?"]


def moved_app():
    import streamlit as st

    from explorer.app import job_views
    from explorer.jobs.job import RunState
    from ponder.config import TrainConfig
    from ponder.store.record import new_record
    run_dir, key = st.session_state["case"]
    cfg = TrainConfig(task="parity", max_steps=2, max_seconds=10.0)
    record = new_record(cfg, {}, status="completed", steps=5, train_seconds=10.0)
    job_views.run_result_ui(RunState(name="x", config=cfg, status="completed", run_dir=run_dir, record=record,
                                     run_key=key))


def test_the_result_says_plainly_when_the_jobs_run_was_renamed_or_deleted(tmp_path):
    from helpers import save_tiny_run
    from explorer.jobs.job import saved_key
    from ponder.store.manage import delete_run, rename_run

    root = tmp_path / "runs"
    d, _ = save_tiny_run(root / "x")
    case = (str(d), saved_key(d))

    def text():
        at = AppTest.from_function(moved_app)
        at.session_state["case"] = case
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        return at.success[0].value.replace("\\", "")      # plain() escapes punctuation

    assert "Saved as **runs/x**" in text()
    rename_run("x", "y", root)
    save_tiny_run(root / "x", seed=4)                  # another session's run now holds the name
    assert "since renamed to runs/y" in text() and "Saved as runs/x," in text()
    delete_run("y", root)
    assert "since been deleted or overwritten" in text() and "runs/x is another run now" in text()
    delete_run("x", root)
    assert "since been deleted**: it is in no model picker" in text()


def test_the_live_curves_say_what_the_kl_costs_now():
    from explorer.app.job_views import kl_note
    # KL 8.0 at β 0.01 costs 0.080 of loss, against a reconstruction loss of 0.250
    assert kl_note(dict(reg=8.0, rec=0.25), 0.01) == (
        " Now KL = 8.00 (how far the batch's halting is from the prior) costs β·KL = 0.080 against the answers' loss "
        "of 0.250: with β = 0.01 the halting moves away from the prior wherever that makes answers right.")
    assert kl_note(dict(step=1), 0.01) == ""
