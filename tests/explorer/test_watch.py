"""explorer/watch.py: one input looked at between training steps, without changing the training."""
import pytest
import torch

from explorer.watch import Watcher
from helpers import tiny_model
from job_helpers import registry, tiny, wait_done  # noqa: F401 (registry: a fixture)
from ponder.store.checkpoint import load_checkpoint


def test_a_look_records_the_inputs_halting_at_most_once_a_second_and_leaves_the_model_training():
    model = tiny_model("parity", max_steps=5).train()
    w = Watcher(torch.tensor([[1.0, -1.0, 0.0, 1.0, 0.0, 0.0, 1.0, -1.0]]), "parity")
    assert w.look(1) is None                              # no model yet
    w.attach(model)
    snap = w.look(10)
    assert snap["step"] == 10 and abs(sum(snap["p"]) - 1) < 1e-6 and len(snap["lambdas"]) == 5
    assert 1 <= snap["expected_steps"] <= 5 and snap["pred"] in (0, 1) and 0.5 <= snap["confidence"] <= 1
    assert model.training and w.look(20) is None           # back in training mode; the next look waits a second


@pytest.mark.long
def test_a_job_records_the_watched_input_and_trains_as_without_it(registry, tmp_path):  # noqa: F811
    x = torch.tensor([[1.0, -1.0, 0.0, 1.0, 0.0, 0.0, 1.0, -1.0]])
    watched = wait_done(registry.submit("s", [("w", tiny())], root=tmp_path / "a", watch=(x, "a vector"))).runs[0]
    plain = wait_done(registry.submit("s", [("w", tiny())], root=tmp_path / "b")).runs[0]
    assert watched.watched and watched.watched[0]["step"] == 5 and not plain.watched     # the first report's look
    a, b = load_checkpoint(watched.run_dir).model, load_checkpoint(plain.run_dir).model
    assert all(torch.equal(v, b.state_dict()[k]) for k, v in a.state_dict().items())     # the same weights


def watched_app():
    import streamlit as st

    from explorer.app.watch_views import watched_input
    from ponder.config import TrainConfig
    x, where = watched_input(TrainConfig(task=st.session_state["task"]))
    st.session_state["got"] = (x.tolist(), where)


def test_a_run_watches_the_parity_pages_vector_when_it_has_the_runs_length_else_one_of_its_own():
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_function(watched_app)
    at.session_state["task"] = "parity"                       # the small preset: n = 8
    at.session_state["_parity_vector"] = torch.tensor([[1.0, 1.0, 0.0, -1.0, 0.0, 0.0, 1.0, 0.0]])
    at.run()
    assert at.session_state["got"] == ([[1.0, 1.0, 0.0, -1.0, 0.0, 0.0, 1.0, 0.0]], "the vector from the Parity page")
    at.session_state["_parity_vector"] = torch.ones(1, 15)     # parity-15's vector: not this run's length
    at.run()
    x, where = at.session_state["got"]
    assert len(x[0]) == 8 and sum(v != 0 for v in x[0]) == 4 and where.startswith("a vector with 4 non-zeros")
    at.session_state["task"] = "mnist"                        # no drawing yet: a bundled test digit
    at.run()
    x, where = at.session_state["got"]
    assert torch.tensor(x).shape == (1, 1, 28, 28) and where.startswith("a test digit (label")
