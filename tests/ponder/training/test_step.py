"""ponder/training/step.py: one update changes the weights and leaves its outputs on the device; a healthy check
snapshots the weights; a diverged one names the step and keeps the last good weights, whether the fused
optimiser skipped the bad update or the snapshot has to be put back. (Through whole trainings:
test_loop.py, test_fastpath.py.)"""
import itertools

import torch

from ponder.config import TrainConfig
from ponder.training.loop import setup
from ponder.training.step import Health, Update


def make(fused=True, **kw):
    cfg = TrainConfig(**{**dict(task="parity", hidden=16, batch_size=16, max_steps=4, epochs=1.0, steps_per_epoch=10,
                                device="cpu", lr_schedule="constant"), **kw})
    device, model, batches, _ = setup(cfg, None, None, None)
    update = Update(cfg, model, device, "eager", "")
    if not fused:                                   # a plain Adam takes no found_inf: nothing skips on the device
        update.opt = torch.optim.Adam(update.params, lr=cfg.lr)
        update.skips = False
    return update, Health(update), iter(batches)


def weights(update):
    return [p.detach().clone() for p in update.params]


def test_an_update_moves_the_weights_and_a_healthy_check_snapshots_them():
    update, health, batches = make()
    before = weights(update)
    out = update(*next(batches))
    N, B = out.log_p.shape
    assert (N, B) == (4, 16) and out.y.shape[:2] == (4, 16) and out.loss.dim() == 0 and not out.loss.requires_grad
    assert any(not torch.equal(a, b) for a, b in zip(before, update.params))
    assert health.check(1) is None and (health.good_step, health.checked) == (1, 1)
    assert all(torch.equal(g, p) for g, p in zip(health.good, update.params))
    assert update.step_mode() == ("eager", "")


def test_a_nan_loss_is_skipped_by_the_fused_optimiser_and_the_step_before_it_is_kept():
    update, health, batches = make()
    update(*next(batches))
    assert health.check(1) is None
    kept = weights(update)
    x, y = next(batches)
    update(torch.full_like(x, float("nan")), y)       # step 2: a NaN input makes the loss NaN
    update(*next(batches))                            # step 3: skipped too (the skip stays set)
    reason, step = health.check(3)
    assert reason == "loss became nan at step 2" and step == 1
    assert all(torch.equal(a, b) for a, b in zip(kept, update.params))


def test_without_the_skip_the_last_checked_weights_are_put_back_and_named():
    update, health, batches = make(fused=False)
    for _ in range(2):
        update(*next(batches))
    assert health.check(2) is None
    kept = weights(update)
    for x, y in itertools.islice(batches, 2):         # steps 3 and 4: healthy, not checked
        update(x, y)
    x, y = next(batches)
    update(torch.full_like(x, float("nan")), y)       # step 5
    reason, step = health.check(5)
    # the last check was at step 2, three steps before the bad one: its weights are kept and the reason says so
    assert reason == "loss became nan at step 5; the weights of step 2, the last check, are kept" and step == 2
    assert all(torch.equal(a, b) for a, b in zip(kept, update.params))


def test_under_deep_supervision_the_halting_loss_leaves_the_answer_head_alone():
    # the same batch and weights, halting trained by "ce", "accuracy" or "exit": the answer head's gradient is the
    # deep-supervised one's either way, the lambda head's differs (no clipping, so the gradients are as computed)
    grads = {}
    for halting in ("ce", "accuracy", "exit"):
        torch.manual_seed(0)
        update, _, batches = make(answer_loss="mean", halting_loss=halting, step_cost=0.05, grad_clip=1e9)
        out = update(*next(batches))
        assert torch.isfinite(out.loss)
        fn = update.model.step_fn
        grads[halting] = (fn.out_head.weight.grad.clone(), fn.lambda_head.weight.grad.clone())
    assert torch.allclose(grads["ce"][0], grads["accuracy"][0], atol=1e-7)
    assert torch.allclose(grads["ce"][0], grads["exit"][0], atol=1e-7)
    assert not torch.allclose(grads["ce"][1], grads["accuracy"][1]) and not torch.allclose(grads["ce"][1], grads["exit"][1])


def test_in_the_halting_warm_up_only_the_answers_train():
    # halting_warmup 0.5: before half the updates the halting term and the regulariser weigh 0, so the lambda head
    # gets no gradient and stays; from then on it trains
    update, _, batches = make(answer_loss="mean", halting_loss="exit", beta=0.01, halting_warmup=0.5)
    fn = update.model.step_fn
    lam, ans = fn.lambda_head.weight.detach().clone(), fn.out_head.weight.detach().clone()
    update.set_lr(update.cfg.lr, 0.4)
    update(*next(batches))
    assert torch.equal(fn.lambda_head.weight, lam) and not torch.equal(fn.out_head.weight, ans)
    update.set_lr(update.cfg.lr, 0.5)
    update(*next(batches))
    assert not torch.equal(fn.lambda_head.weight, lam)
