"""ponder/training/step.py: one update changes the weights and leaves its outputs on the device; a healthy check
snapshots the weights; a diverged one names the step and keeps the last good weights, whether the fused
optimiser skipped the bad update or the snapshot has to be put back. The update's loss and gradients are those
of the model written the straightforward way (nn.GRUCell step by step, both heads every step). (Through whole trainings:
test_loop.py, test_fastpath.py.)"""
import itertools

import pytest
import torch
import torch.nn.functional as F

from helpers import tiny_model
from ponder.config import TrainConfig
from ponder.halting import halting_log_probs
from ponder.losses import ponder_loss
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


# ----------------------------------------------------------------------------- the fast step computes the plain math

def plain_loss(model, cfg, x, y):
    """The loss of `model` on (x, y) written the straightforward way: each evidence level's embedding (as the
    reader computes it) fed to nn.GRUCell step by step, both heads applied at every step, ponder.losses' loss."""
    fn, seen = model.step_fn, []
    if hasattr(fn, "project"):                                     # the readers whose evidence grows: [B, L, E]
        project = fn.project
        fn.project = lambda e: seen.append(e) or project(e)
        fn.encode(x)
        del fn.project
        e = seen[0]
    else:
        e = fn.embed(x).unsqueeze(1)                               # the whole image's embedding, one level
    h, ys, ls = torch.zeros(len(x), fn.cfg.hidden), [], []
    for n in range(model.max_steps):
        h = fn.cell(e[:, min(n, e.shape[1] - 1)], h)
        ys.append(fn.out_head(h))
        ls.append(fn.lambda_head(h).squeeze(-1))
    y_steps, log_p = torch.stack(ys), halting_log_probs(torch.stack(ls))              # [N, B, 10], [N, B]
    N, B = log_p.shape
    losses = F.cross_entropy(y_steps.flatten(0, 1), y.repeat(N), reduction="none").view(N, B)
    return ponder_loss(losses, log_p, cfg.lambda_p, cfg.beta)[0]


@pytest.mark.parametrize("reader,rows", [("cnn", 2), ("rows", 4), ("rows", 2)])
def test_the_update_has_the_loss_and_gradients_of_the_plain_computation(reader, rows):
    cfg = TrainConfig(reader=reader, rows_per_step=rows, max_steps=9, lambda_p=0.4, beta=0.05, grad_clip=1e9,
                      device="cpu", batch_size=12)                 # no clipping: the gradients as computed
    model = tiny_model("mnist", max_steps=9, lambda_p=0.4, reader=reader, rows_per_step=rows).train()
    x = torch.randn(12, 1, 28, 28, generator=torch.Generator().manual_seed(3))
    y = torch.arange(12) % 10
    params = list(model.parameters())
    loss = plain_loss(model, cfg, x, y)
    grads = torch.autograd.grad(loss, params)
    out = Update(cfg, model, torch.device("cpu"), "eager", "")(x, y)
    assert torch.allclose(out.loss, loss.detach(), atol=1e-6, rtol=1e-5)
    for (name, p), g in zip(model.named_parameters(), grads):
        assert torch.allclose(p.grad, g, atol=1e-6, rtol=1e-4), name


def training_loss(model, x, y):
    """The training loss as Update computes it (the model's forward and ponder.losses)."""
    out = model(x)
    N, B = out.log_p.shape
    losses = model.step_fn.loss(out.y.flatten(0, 1), y.repeat(N)).view(N, B)
    return ponder_loss(losses, out.log_p, model.lambda_p, 0.01)[0]


def graph_nodes(t: torch.Tensor) -> int:
    """The autograd nodes the backward pass from t runs."""
    seen, todo = set(), [t.grad_fn]
    while todo:
        f = todo.pop()
        if f is None or f in seen:
            continue
        seen.add(f)
        todo += [g for g, _ in f.next_functions]
    return len(seen)


@pytest.mark.parametrize("reader", ["cnn", "rows"])
def test_a_training_forward_records_as_many_autograd_nodes_for_20_steps_as_for_5(reader):
    """The N GRU updates are one node (ponder.tasks.mnist.gru) and the heads and losses see all steps at once, so
    the backward pass runs the same operators whatever N is (with the N updates recorded step by step, the cnn reader's
    graph had 106 nodes at N = 5 and 211 at N = 20; one node for them: 66 at both)."""
    x, y = torch.randn(4, 1, 28, 28), torch.arange(4)
    nodes = []
    for n in (5, 20):
        model = tiny_model("mnist", max_steps=n, reader=reader).train()
        nodes.append(graph_nodes(training_loss(model, x, y)))
    assert nodes[0] == nodes[1]
