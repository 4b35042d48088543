"""ponder/tasks/parity/experiment.py: the paper's experiment for one run of any method: the sets it reads, its own
answer on seen and unseen k, and each policy's operating point chosen on validation, scored on test."""
import pytest
import torch

from helpers import tiny_model
from ponder.inference import ponder
from ponder.tasks import train_config
from ponder.tasks.parity.data import TEST_CLASS, VAL_CLASS, parity_class
from ponder.tasks.parity.experiment import measure, sets


def test_the_seen_unseen_and_validation_sets_hold_the_right_k_and_held_out_classes():
    cfg = train_config("parity", parity_preset="extrapolation")
    s = sets(cfg, 96, size=300)
    assert s["seen"][2].min() >= 1 and s["seen"][2].max() <= 48 and (parity_class(s["seen"][0]) == TEST_CLASS).all()
    assert s["unseen"][2].min() >= 49 and (parity_class(s["unseen"][0]) == TEST_CLASS).all()
    assert s["val"][2].max() <= 48 and (parity_class(s["val"][0]) == VAL_CLASS).all()
    assert "unseen" not in sets(train_config("parity", parity_preset="paper"), 64, size=50)


@pytest.mark.parametrize("method", ["ponder", "act", "deep"])
def test_a_run_is_measured_by_its_own_answer_and_every_policy_at_each_budget(method):
    cfg = train_config("parity", parity_preset="medium-extrapolation", method=method, max_steps=5)
    model = tiny_model("parity", max_steps=5, method=method, n_elems=16, lambda_std=2.0)
    e = measure(model, cfg, size=200)
    assert (e.seen.n, e.unseen.n, e.train_k) == (200, 200, [1, 8])
    assert sorted({r["k"] for r in e.by_k}) == list(range(1, 17))
    x, y, _ = sets(cfg, 16, size=200)["unseen"]
    own = ponder(model, x, "sample", generator=torch.Generator().manual_seed(0))
    if method != "ponder":                                  # a deterministic rule: ponder() gives the same answers
        assert e.unseen.accuracy == pytest.approx((own.pred == y.long()).float().mean().item())
        assert e.unseen.mean_steps == pytest.approx(own.halt_step.float().mean().item())
    assert (e.seen.q_exit_accuracy is not None) == (method == "ponder")
    names = {r["policy"] for r in e.frontier}
    assert names == ({"fixed_depth", "confidence_exit", "patience"} | ({"learned_q"} if method != "deep" else set()))
    for r in e.frontier:
        assert r["val_steps"] == pytest.approx(r["budget"], abs=0.02) or r["policy"] in ("confidence_exit", "patience")
        assert 1.0 <= r["seen"]["mean_steps"] <= 5.0 and 0.0 <= r["unseen"]["accuracy"] <= 1.0
    fixed = [r for r in e.frontier if r["policy"] == "fixed_depth"]
    assert [r["seen"]["mean_steps"] for r in fixed] == pytest.approx([1, 2, 3, 4, 5])   # a depth is a depth
