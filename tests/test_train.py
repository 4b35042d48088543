"""The training loop: callback, cancel, time budget, divergence, repeatability, evaluation."""
import threading

import pytest
import torch

from ponder import data as D
from ponder.config import ConfigError, TrainConfig
from ponder.evaluate import evaluate_mnist, evaluate_parity
from ponder.config import PARITY_PRESETS
from ponder.train import lr_at, train


def small_mnist(m, n_train=6000, n_val=500):
    return D.Mnist(m.train_x[:n_train], m.train_y[:n_train], m.val_x[:n_val], m.val_y[:n_val],
                   m.test_x[:1000], m.test_y[:1000])


def parity_cfg(**kw):
    base = dict(task="parity", epochs=1, steps_per_epoch=20, batch_size=32, hidden=16, max_steps=6,
                device="cpu", log_every=5)
    base.update(kw)
    return TrainConfig(**base)


def test_callback_fields_and_completion():
    seen = []
    res = train(parity_cfg(), callback=seen.append)
    assert res.status == "completed" and res.steps == 20
    assert [p.step for p in seen] == [5, 10, 15, 20]
    last = seen[-1]
    for f in ("step", "epoch", "loss", "rec", "reg", "accuracy", "mean_steps", "elapsed"):
        assert getattr(last, f) is not None
    assert last.val_accuracy is not None and len(last.halting) == 6
    assert abs(sum(last.halting) - 1) < 1e-4
    assert last.loss == pytest.approx(last.rec + 0.01 * last.reg, rel=1e-4)


def test_cpu_runs_repeatable():
    a = train(parity_cfg(seed=3)).model.state_dict()
    b = train(parity_cfg(seed=3)).model.state_dict()
    c = train(parity_cfg(seed=4)).model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not all(torch.equal(a[k], c[k]) for k in a)


def test_cancel_stops_promptly():
    cancel = threading.Event()

    def cb(p):
        if p.step >= 10:
            cancel.set()

    res = train(parity_cfg(epochs=100), callback=cb, cancel=cancel)
    assert res.status == "cancelled" and res.steps == 10 and res.partial


def test_time_budget():
    res = train(parity_cfg(epochs=10000, max_seconds=1.0))
    assert res.status == "completed" and "time budget" in res.reason
    assert 0 < res.steps < 20000 and res.seconds < 5


def test_non_finite_loss_fails_and_keeps_last_good_weights():
    from ponder.models import build_model
    cfg = parity_cfg(epochs=100)
    model = build_model("parity", cfg.model_config(), cfg.max_steps, cfg.lambda_p)
    calls = {"n": 0}
    real_loss = model.step_fn.loss
    snapshot = {}

    def loss(y, t):                      # the 8th step's loss is inf
        calls["n"] += 1
        if calls["n"] == 7:
            snapshot.update({k: v.clone() for k, v in model.state_dict().items()})
        out = real_loss(y, t)
        return out * float("inf") if calls["n"] == 8 else out

    model.step_fn.loss = loss
    res = train(cfg, model=model)
    assert res.status == "failed" and "step 8" in res.reason and "inf" in res.reason
    assert res.steps == 7
    # the weights are those after step 7: the failed step was never applied
    after7 = res.model.state_dict()
    assert snapshot and not all(torch.equal(snapshot[k], after7[k]) for k in after7)   # step 7 was applied
    assert all(torch.isfinite(v).all() for v in after7.values())


def test_lr_schedule_shape():
    cfg = TrainConfig(lr=1.0)
    assert lr_at(cfg, 0.0) == pytest.approx(0.1)
    assert lr_at(cfg, 0.05) == pytest.approx(1.0)
    assert lr_at(cfg, 1.0) == pytest.approx(0.02)
    assert lr_at(TrainConfig(lr=0.5, lr_schedule="constant"), 0.7) == 0.5


@pytest.mark.parametrize("field,value", [("lambda_p", 0.0), ("lambda_p", 1.01), ("beta", -1.0),
                                         ("max_steps", 0), ("max_steps", 201), ("batch_size", 0),
                                         ("lr", 0.0), ("hidden", 0), ("rotate_train", 181.0),
                                         ("task", "cifar"), ("lambda_p", float("nan"))])
def test_config_validation_names_field(field, value):
    with pytest.raises(ConfigError, match=field):
        TrainConfig(**{field: value}).validate()


def test_mnist_short_training_learns_and_evaluates(mnist):
    small = small_mnist(mnist)
    cfg = TrainConfig(epochs=2, batch_size=64, device="cpu", max_steps=8, rotate_train=10.0)
    res = train(cfg, mnist=small)
    assert res.status == "completed"
    ev = evaluate_mnist(res.model, small, "sample", rotations=[0, 90], uniform_rotations=[45])
    assert ev["accuracy"] > 0.85
    assert 1 <= ev["mean_steps"] <= 8
    assert len(ev["per_step_accuracy"]) == 8 and len(ev["halting_distribution"]) == 8
    assert abs(sum(ev["halting_distribution"]) - 1) < 1e-4 and abs(sum(ev["prior"]) - 1) < 1e-4
    assert len(ev["by_class"]) == 10 and sum(r["count"] for r in ev["by_class"]) == 1000
    assert [r["angle"] for r in ev["rotations"]] == [0.0, 90.0]
    assert ev["rotations"][0]["accuracy"] == pytest.approx(ev["accuracy"])
    assert ev["rotations"][1]["accuracy"] < ev["accuracy"]
    assert ev["uniform_rotations"][0]["kind"] == "uniform"
    det = evaluate_mnist(res.model, small, "deterministic")
    exp = evaluate_mnist(res.model, small, "expected")
    assert det["accuracy"] > 0.85 and exp["accuracy"] > 0.85


def test_parity_evaluation_easy_hard():
    res = train(parity_cfg())
    ev = evaluate_parity(res.model, PARITY_PRESETS["small"], size=1000)
    assert ev["easy"]["count"] + ev["hard"]["count"] == 1000
    assert ev["easy"]["k_range"][1] < ev["hard"]["k_range"][0]
    assert 0 <= ev["accuracy"] <= 1
