"""explorer/views.py: what the Train page's progress line says during and after the training loop (issue 15, item 4)."""
from streamlit.testing.v1 import AppTest


def progress_app():
    import time

    import streamlit as st

    from explorer import views
    from explorer.jobs import RunState
    from ponder.config import TrainConfig
    phase, step, forecast = st.session_state.get("case", ("training", 50, 190))
    row = dict(step=step, total_steps=1290, elapsed=4.0 if phase == "training" else 15.0, wall=time.time(),
               max_seconds=15.0, forecast_steps=forecast, fraction=0.3, halting=[0.5, 0.5], loss=1.0, rec=1.0,
               reg=0.0, accuracy=0.5, mean_steps=1.5, val_accuracy=None, epoch=0.1, lr=0.002)
    run = RunState(name="r", config=TrainConfig(max_steps=2, max_seconds=15.0), status="running", phase=phase,
                   progress=[row], started=time.time() - 20)
    views.run_progress_ui(run, key="k")


def progress_text(case):
    at = AppTest.from_function(progress_app)
    at.session_state["case"] = case
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at.get("progress")[0].proto.text


def test_the_progress_line_shows_the_forecast_while_training_and_the_phase_after_it():
    text = progress_text(("training", 50, 190))
    assert "step 50 of about 190 (15 s budget)" in text and "training time left ≈ 11 s" in text
    # after the loop: no step estimate, what was trained and what runs now
    for phase, what in (("validating", "the final validation pass"), ("saving", "saving the run"),
                        ("evaluating", "measuring it on test data")):
        text = progress_text((phase, 84, 84))
        assert f"trained 84 steps in 15 s · now {what}" in text and "of about" not in text, text
