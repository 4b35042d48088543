"""Issue 6, divergence: a run whose loss or gradient becomes NaN/inf stops within one step, is marked
failed with the reason and the step, and keeps its last good weights (finite, savable, loadable).

Each parametrized case is one diverging input; all must end as a clean 'failed' run.
"""
import json
import re

import pytest
import torch

from conftest import tiny_model
from ponder.card import read_card, read_history
from ponder.checkpoint import load_checkpoint, save_run
from ponder.cli import main
from ponder.config import ConfigError, TrainConfig
from ponder.runs import list_models
from ponder.train import train

BASE = dict(task="parity", epochs=1, steps_per_epoch=20, batch_size=32, hidden=16, max_steps=6, device="cpu",
            log_every=1)


def cfg(**kw):
    return TrainConfig(**{**BASE, **kw})


def weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def assert_failed_cleanly(res):
    assert res.status == "failed", (res.status, res.reason)
    m = re.search(r"at step (\d+)", res.reason)
    assert m, res.reason
    assert int(m.group(1)) == res.steps + 1, (res.reason, res.steps)     # stopped within one step
    assert re.search(r"\b(nan|inf|-inf)\b", res.reason), res.reason
    assert all(torch.isfinite(p).all() for p in res.model.state_dict().values()), "non-finite weights kept"
    for row in res.history:                                               # history holds good steps only
        assert row["step"] <= res.steps and all(
            v is None or v == v and abs(v) != float("inf") for v in (row["loss"], row["rec"], row["reg"]))


# ----------------------------------------------------------------------------- diverging configs

def test_real_config_diverges_at_a_later_step_and_keeps_last_good_weights():
    """lambda_p 0.9, lr 1.0 and a huge KL weight: the gradient norm overflows after a few good steps."""
    bad = cfg(lambda_p=0.9, lr=1.0, beta=1e20, lr_schedule="constant", steps_per_epoch=30)
    res = train(bad)
    assert_failed_cleanly(res)
    assert res.steps >= 1, "expected some good steps before the divergence"
    # the returned weights are exactly those after the last good step: rerun for that many steps
    again = train(cfg(lambda_p=0.9, lr=1.0, beta=1e20, lr_schedule="constant", steps_per_epoch=res.steps))
    assert again.status == "completed" and again.steps == res.steps
    for k, v in weights(res.model).items():
        assert torch.equal(v, again.model.state_dict()[k]), k


@pytest.mark.parametrize("kw", [dict(beta=1e38), dict(beta=1e30, lambda_p=0.9, lr=1.0), dict(beta=1e25, lambda_p=1.0),
                                dict(beta=3e38, lambda_p=1e-9)],
                         ids=["beta1e38", "beta1e30-lp0.9-lr1", "beta1e25-lp1", "beta3e38-lp1e-9"])
def test_real_configs_that_overflow_at_the_first_step(kw):
    model = tiny_model("parity", max_steps=6)
    start = weights(model)
    res = train(cfg(**kw), model=model)
    assert_failed_cleanly(res)
    assert res.steps == 0
    for k, v in weights(res.model).items():              # no optimiser step was taken
        assert torch.equal(v, start[k]), k


@pytest.mark.parametrize("kw", [dict(lambda_p=0.9, lr=1.0), dict(lambda_p=0.7, lr=1.0), dict(lambda_p=1.0, lr=1.0)],
                         ids=["lp0.9-lr1", "lp0.7-lr1", "lp1-lr1"])
def test_issue_example_high_lambda_high_lr_ends_cleanly(kw):
    """The issue's example (lambda_p >= 0.7, high lr): lr is capped at 1 and Adam + clipping keep it finite
    here; whichever way it ends, it must end cleanly."""
    res = train(cfg(lr_schedule="constant", **kw))
    if res.status == "failed":
        assert_failed_cleanly(res)
    else:
        assert res.status == "completed" and res.steps == 20
        assert all(torch.isfinite(p).all() for p in res.model.parameters())


def test_weight_decay_that_would_poison_the_weights_is_refused():
    """Adam adds weight_decay * w after clipping: 3e38 turned the weights NaN in one step; now refused."""
    with pytest.raises(ConfigError, match="weight_decay"):
        cfg(weight_decay=3e38).validate()


# ----------------------------------------------------------------------------- injected divergence

@pytest.mark.parametrize("scale", [1e30, 1e36, 3e38])
def test_overflowing_weights_fail_at_step_one(scale):
    model = tiny_model("parity", max_steps=6, lambda_std=0)
    with torch.no_grad():
        model.step_fn.out_head.weight.mul_(scale)
    start = weights(model)
    res = train(cfg(), model=model)
    assert_failed_cleanly(res)
    assert res.steps == 0 and all(torch.equal(v, start[k]) for k, v in weights(res.model).items())


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("at", [1, 4])
def test_loss_becomes_non_finite_after_good_steps(value, at):
    """The output head starts returning NaN/inf on training forward number `at`+1."""
    model = tiny_model("parity", max_steps=6)
    calls, snapshot = {"n": 0}, {}

    def hook(module, inp, out):
        if not module.training:                     # validation passes are left alone
            return out
        calls["n"] += 1
        if calls["n"] == at * 6 + 1:                # 6 pondering steps per forward pass
            snapshot.update(weights(model))
        if calls["n"] > at * 6:
            return out + value
        return out

    model.step_fn.out_head.register_forward_hook(hook)
    res = train(cfg(), model=model)
    assert_failed_cleanly(res)
    assert res.steps == at and "loss" in res.reason
    assert all(torch.equal(v, snapshot[k]) for k, v in weights(res.model).items())


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_gradient_becomes_non_finite(value):
    model = tiny_model("parity", max_steps=6)
    calls, snapshot = {"n": 0}, {}

    def poison(grad):
        calls["n"] += 1
        if calls["n"] == 3:
            snapshot.update(weights(model))
            return grad * value
        return grad

    model.step_fn.out_head.weight.register_hook(poison)
    res = train(cfg(), model=model)
    assert_failed_cleanly(res)
    assert res.steps == 2 and "gradient" in res.reason
    assert all(torch.equal(v, snapshot[k]) for k, v in weights(res.model).items())


# ----------------------------------------------------------------------------- saved as failed

def test_failed_run_saved_as_failed_and_loads(tmp_path):
    bad = cfg(lambda_p=0.9, lr=1.0, beta=1e20, lr_schedule="constant", steps_per_epoch=30)
    res = train(bad)
    assert res.status == "failed"
    root = tmp_path / "runs"
    d = save_run(root / "diverged", res.model, bad, status=res.status, reason=res.reason, steps=res.steps,
                 history=res.history, train_seconds=res.seconds)
    card = read_card(d)
    assert card["status"] == "failed" and card["reason"] == res.reason and card["steps"] == res.steps
    ck = load_checkpoint(d)
    x = torch.randint(0, 2, (5, 8)).float()
    with torch.no_grad():
        assert torch.equal(ck.model(x).y, res.model.eval()(x).y)
    assert all(r["step"] <= res.steps for r in read_history(d))
    [entry] = list_models(root, assets=tmp_path / "none")
    assert entry.card["status"] == "failed" and "at step" in entry.card["reason"]
    assert json.loads((d / "run.json").read_text())["status"] == "failed"


def test_cli_diverging_run_exits_3_and_keeps_the_failed_run(tmp_path, capsys):
    out = tmp_path / "div"
    rc = main(["train", "--task", "parity", "--out", str(out), "--epochs", "1", "--steps-per-epoch", "30",
               "--hidden", "16", "--max-steps", "6", "--batch-size", "32", "--lambda-p", "0.9", "--lr", "1.0",
               "--beta", "1e20", "--lr-schedule", "constant", "--device", "cpu", "--quiet", "--no-eval"])
    stdout, err = capsys.readouterr()
    assert rc == 3, (stdout, err)
    assert stdout.startswith("failed:") and "at step" in stdout and "Traceback" not in err
    ck = load_checkpoint(out)
    assert ck.card["status"] == "failed" and "at step" in ck.card["reason"]
    assert all(torch.isfinite(p).all() for p in ck.model.parameters())


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_update_that_makes_weights_non_finite_is_undone(monkeypatch, value):
    """Loss and gradient are finite but the optimiser step writes NaN/inf into a weight (as a
    huge learning rate can): the run fails at that step and returns the weights from before it."""
    model = tiny_model("parity", max_steps=6)
    calls, snapshot = {"n": 0}, {}
    real_step = torch.optim.Adam.step

    def poisoned_step(self, *a, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            snapshot.update(weights(model))
        out = real_step(self, *a, **kw)
        if calls["n"] == 3:
            with torch.no_grad():
                model.step_fn.out_head.weight.view(-1)[0] = value
        return out

    monkeypatch.setattr(torch.optim.Adam, "step", poisoned_step)
    res = train(cfg(), model=model)
    assert res.status == "failed" and "non-finite after the update at step 3" in res.reason, res.reason
    assert res.steps == 2
    assert all(torch.equal(v, snapshot[k]) for k, v in weights(res.model).items())


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("mode", ["sample", "deterministic", "expected"])
def test_ponder_refuses_non_finite_inputs(bad, mode):
    from ponder.halting import ponder
    model = tiny_model("mnist", max_steps=4).eval()
    x = torch.zeros(2, 1, 28, 28)
    x[1, 0, 5, 5] = bad
    with pytest.raises(ValueError, match="NaN or infinite"):
        ponder(model, x, mode)
    ponder(model, torch.zeros(2, 1, 28, 28), mode)          # finite input still works
