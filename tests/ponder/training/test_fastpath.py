"""ponder/training/fastpath.py: the training step with no host sync, and the CUDA-graph step's selection and fallback.

On CPU: the sync-free loop trains exactly the weights of a reference loop that syncs every step and reports the
same metrics at log points; a divergence is found within check_every steps with the last good
weights kept and the right step reported; the CUDA-graph path is not chosen off CUDA, is chosen on
CUDA unless switched off, caches one graph per batch shape, and falls back to eager steps (with the
reason recorded) where capture fails.
"""
import copy
import math
import threading

import pytest
import torch
from hypothesis import given, settings, strategies as st

from helpers import tiny_model
from ponder import data as D
from ponder.training import loop as T
from ponder.config import ConfigError, TrainConfig
from ponder.halting import expected_steps
from ponder.losses import ponder_loss
from ponder.training.fastpath import WEIGHTS, DivergenceGuard, GraphedStep, choose_step_mode
from ponder.training.loop import batch_accuracy, lr_at, train
from ponder.tasks import get_task


def parity_cfg(**kw):
    base = dict(task="parity", epochs=1, steps_per_epoch=24, batch_size=32, hidden=16, max_steps=6,
                device="cpu", log_every=1000)
    return TrainConfig(**{**base, **kw})


def weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def same_weights(a, b):
    return all(torch.equal(a[k], b[k]) for k in a)


# ----------------------------------------------------------------------------- the old loop, as a reference

def reference_train(cfg, model, mnist=None):
    """A reference training loop, reduced to its arithmetic: it reads loss, gradient norm and the
    log-point metrics from the device at every step, the plain way the sync-free loop must match.
    Returns (weights, rows at log points)."""
    torch.manual_seed(cfg.seed)
    batches = get_task(cfg.task).batches(cfg, "cpu", mnist)
    total = max(1, math.ceil(cfg.epochs * batches.per_epoch))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, fused=True)
    model.train()
    rows = []
    for step, (x, y) in zip(range(total), batches):
        lr = lr_at(cfg, step / total)
        for g in opt.param_groups:
            g["lr"] = lr
        out = model(x)
        N, B = out.log_p.shape
        loss, rec, reg = ponder_loss(model.step_fn.loss(out.y.flatten(0, 1), y.repeat(N)).view(N, B),
                                     out.log_p, cfg.lambda_p, cfg.beta)
        loss_v = loss.item()
        assert math.isfinite(loss_v)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        assert torch.isfinite(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip))
        opt.step()
        if (step + 1) % cfg.log_every == 0:
            rows.append(dict(step=step + 1, lr=lr, loss=loss_v, rec=rec.item(), reg=reg.item(),
                             accuracy=batch_accuracy(model, out.y.detach(), out.log_p.detach(), y),
                             mean_steps=expected_steps(out.log_p.detach()).mean().item(),
                             halting=out.log_p.detach().exp().mean(1).tolist()))
    return weights(model), rows


METRICS = ("step", "lr", "loss", "rec", "reg", "accuracy", "mean_steps", "halting")


@pytest.mark.long
@pytest.mark.parametrize("check_every", [1, 7, 50])
def test_parity_weights_and_log_metrics_equal_the_per_step_sync_loop(check_every):
    cfg = parity_cfg(log_every=4, check_every=check_every, seed=2)
    model = tiny_model("parity", max_steps=6)
    ref_w, ref_rows = reference_train(cfg, copy.deepcopy(model))
    res = train(cfg, model=model)
    assert res.record.status == "completed" and res.record.steps == 24 and res.step_mode == "eager"
    assert same_weights(weights(res.model), ref_w)
    assert [{k: r[k] for k in METRICS} for r in res.history] == ref_rows       # exactly the old reads


def test_mnist_weights_and_log_metrics_equal_the_per_step_sync_loop(mnist):
    n, bs = 12, 32
    small = D.Mnist(mnist.train_x[:n * bs], mnist.train_y[:n * bs], mnist.val_x[:200], mnist.val_y[:200],
                    mnist.test_x[:10], mnist.test_y[:10])
    cfg = TrainConfig(epochs=1, batch_size=bs, device="cpu", max_steps=5, log_every=3, check_every=5,
                      rotate_train=15.0, seed=1)
    model = tiny_model("mnist", max_steps=5)
    ref_w, ref_rows = reference_train(cfg, copy.deepcopy(model), mnist=small)
    res = train(cfg, data=small, model=model)
    assert res.record.status == "completed" and res.record.steps == n
    assert same_weights(weights(res.model), ref_w)
    assert [{k: r[k] for k in METRICS} for r in res.history] == ref_rows
    assert res.history[-1]["val_accuracy"] is not None


# ----------------------------------------------------------------------------- divergence, found within K steps

def forward_counter(model, bad_from=None, value=float("nan")):
    """Counts training forward passes; from pass `bad_from` on, the output head returns `value`.
    Keeps the weights as they were when each pass began."""
    state = {"n": 0, "before": {}}
    n_steps = model.max_steps

    def hook(module, inp, out):
        if not module.training:
            return out
        state["n"] += 1
        k = (state["n"] - 1) // n_steps + 1                 # the forward pass (= step) this call is in
        if (state["n"] - 1) % n_steps == 0:
            state["before"][k] = weights(model)
        return out + value if bad_from is not None and k >= bad_from else out

    model.step_fn.out_head.register_forward_hook(hook)
    state["passes"] = lambda: state["n"] // n_steps
    return state


@pytest.mark.parametrize("bad_at,K", [(5, 8), (8, 8), (9, 4), (1, 3)])
def test_non_finite_loss_found_within_K_steps_keeps_last_good_weights(bad_at, K):
    model = tiny_model("parity", max_steps=6)
    seen = forward_counter(model, bad_from=bad_at)
    res = train(parity_cfg(epochs=10, check_every=K), model=model)
    assert res.record.status == "failed" and f"loss became nan at step {bad_at}" == res.record.reason
    assert res.record.steps == bad_at - 1
    # stopped at the first check at or after the bad step: at most K - 1 steps late
    assert seen["passes"]() == K * math.ceil(bad_at / K)
    assert same_weights(weights(res.model), seen["before"][bad_at])      # the weights after step bad_at - 1
    assert res.history == []                                              # no log point was reached


def test_non_finite_gradient_found_at_the_next_check():
    model = tiny_model("parity", max_steps=6)
    seen = forward_counter(model)
    calls = {"n": 0}

    def poison(grad):
        calls["n"] += 1
        return grad * float("inf") if calls["n"] == 6 else grad      # only step 6's gradient; later ones are fine

    model.step_fn.out_head.weight.register_hook(poison)
    res = train(parity_cfg(epochs=10, check_every=10, log_every=3), model=model)
    assert res.record.status == "failed" and res.record.reason.startswith("gradient norm became") and "at step 6" in res.record.reason
    assert res.record.steps == 5 and seen["passes"]() == 6               # the log point at step 6 is a check too
    assert same_weights(weights(res.model), seen["before"][6])
    assert [r["step"] for r in res.history] == [3]                # history holds checked, good steps only


def test_update_that_poisons_weights_restores_the_last_checked_snapshot(monkeypatch):
    """The update of step 7 writes NaN into a weight; checks every 5 steps: found at step 10, and the
    weights of step 5 (the last healthy check) are returned."""
    model = tiny_model("parity", max_steps=6)
    after, real_step = {}, torch.optim.Adam.step

    def poisoned_step(self, *a, **kw):
        out = real_step(self, *a, **kw)
        n = len(after) + 1
        if n == 7:
            with torch.no_grad():
                model.step_fn.out_head.weight.view(-1)[0] = float("nan")
        after[n] = weights(model)
        return out

    monkeypatch.setattr(torch.optim.Adam, "step", poisoned_step)
    res = train(parity_cfg(epochs=10, check_every=5), model=model)
    assert res.record.status == "failed" and "non-finite after the update at step 7" in res.record.reason, res.record.reason
    assert "weights of step 5" in res.record.reason
    assert res.record.steps == 5 and len(after) == 10
    assert same_weights(weights(res.model), after[5])
    assert all(torch.isfinite(p).all() for p in res.model.parameters())


def test_a_divergence_found_after_cancel_is_reported_as_failed():
    """Cancel arrives while a bad step is still unchecked: the run is failed, not cancelled."""
    model = tiny_model("parity", max_steps=6)
    cancel = threading.Event()
    seen = forward_counter(model, bad_from=3)
    real = model.step_fn.loss

    def loss(y, t):
        if seen["passes"]() >= 4:
            cancel.set()
        return real(y, t)

    model.step_fn.loss = loss
    res = train(parity_cfg(epochs=10, check_every=50), model=model, cancel=cancel)
    assert res.record.status == "failed" and "at step 3" in res.record.reason and res.record.steps == 2
    assert same_weights(weights(res.model), seen["before"][3])


# ----------------------------------------------------------------------------- the weights' finiteness check

def per_parameter_check(params) -> bool:
    """The check after_update replaces: isfinite per parameter, stacked (2 kernels a parameter on CUDA)."""
    return bool(torch.stack([torch.isfinite(p).all() for p in params]).all())


BAD = (float("nan"), float("inf"), float("-inf"))
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
# parameter lists: 1 to 6 non-empty tensors (every parameter of a model has elements) of any float dtype,
# values over float32's whole range (squares that overflow float32) with NaN and infinities; a large float32
# turns infinite in float16
param_lists = st.lists(st.tuples(st.lists(st.floats(width=32), min_size=1, max_size=30), st.sampled_from(DTYPES),
                                 st.booleans()), min_size=1, max_size=6)


def tensors(drawn):
    return [torch.tensor(v).to(dt).view(-1, 1) if col else torch.tensor(v).to(dt) for v, dt, col in drawn]


@pytest.mark.long
@settings(max_examples=150, deadline=None)
@given(drawn=param_lists, step=st.integers(1, 10**6))
def test_weights_check_agrees_with_the_per_parameter_check(drawn, step):
    params = tensors(drawn)
    guard = DivergenceGuard("cpu")
    guard.count.fill_(step)                                      # the update being checked
    guard.after_update(params)
    expected = None if per_parameter_check(params) else (step, WEIGHTS)
    failure = guard.first_failure()
    assert (failure and failure[:2]) == expected
    assert failure is None or math.isnan(failure[2])


@settings(max_examples=40, deadline=None)
@given(n_steps=st.integers(1, 12), data=st.data())
def test_a_poisoned_weight_is_recorded_at_its_step_and_kept(n_steps, data):
    """Updates 1..n_steps; one weight of one parameter turns NaN or infinite after update `bad` and stays so:
    WEIGHTS at step `bad`, not overwritten by the later non-finite steps."""
    model = tiny_model("parity", max_steps=3)
    params = list(model.parameters())
    bad = data.draw(st.integers(1, n_steps), label="bad")
    which = data.draw(st.integers(0, len(params) - 1), label="parameter")
    guard = DivergenceGuard("cpu")
    for step in range(1, n_steps + 1):
        guard.before_update(torch.tensor(1.0), torch.tensor(1.0))
        if step == bad:
            with torch.no_grad():
                p = params[which].view(-1)
                p[data.draw(st.integers(0, p.numel() - 1), label="index")] = data.draw(st.sampled_from(BAD))
        guard.after_update(model.parameters())
        assert (guard.first_failure() is None) == (step < bad)
    step, kind, value = guard.first_failure()
    assert (step, kind) == (bad, WEIGHTS) and math.isnan(value)


def test_check_every_is_validated():
    for bad in (0, -1, 1.5, True, "10", 10 ** 6):
        with pytest.raises(ConfigError, match="check_every"):
            TrainConfig(check_every=bad).validate()
    for bad in (1, "yes", None):
        with pytest.raises(ConfigError, match="cuda_graph"):
            TrainConfig(cuda_graph=bad).validate()
    assert TrainConfig().check_every >= 1 and TrainConfig().cuda_graph is True


# ----------------------------------------------------------------------------- the CUDA-graph step: selection and fallback

def test_graph_step_selection():
    cuda = torch.device("cuda")                               # constructing a device object needs no GPU
    assert choose_step_mode(TrainConfig(), cuda) == ("cuda_graph", "")
    mode, why = choose_step_mode(TrainConfig(cuda_graph=False), cuda)
    assert mode == "eager" and "cuda_graph is off" in why
    mode, why = choose_step_mode(TrainConfig(compile=True), cuda)
    assert mode == "eager" and "compile" in why
    # the paper's N: the steps unrolled depend on the batch's lambdas, a captured graph replays a fixed N
    mode, why = choose_step_mode(TrainConfig(halt_epsilon=0.05), cuda)
    assert mode == "eager" and "halt_epsilon = 0.05" in why and "fixed N" in why
    for dev in ("cpu", "mps"):
        mode, why = choose_step_mode(TrainConfig(), torch.device(dev))
        assert mode == "eager" and "CUDA" in why


def test_cpu_training_is_eager_and_says_why():
    res = train(parity_cfg(steps_per_epoch=3))
    assert res.step_mode == "eager" and "CUDA graphs need a CUDA device" in res.step_mode_reason


class FakeGraph:
    """Stands in for torch.cuda.CUDAGraph on CPU: replay() reruns the step on the static buffers
    and writes the results into the static outputs, as a replay does."""

    def __init__(self, fn, sx, sy, outputs):
        self.fn, self.sx, self.sy, self.outputs = fn, sx, sy, outputs

    def replay(self):
        self.outputs.copy_(self.fn(self.sx, self.sy))


def test_graphed_step_warms_captures_once_per_shape_and_replays(monkeypatch):
    captured = []

    def fake_capture(self, x, y):
        sx, sy = x.clone(), y.clone()
        captured.append(tuple(x.shape))
        outputs = torch.empty_like(self.step(sx, sy))           # a capture records, it does not run
        return FakeGraph(self.step, sx, sy, outputs), sx, sy, outputs

    monkeypatch.setattr(GraphedStep, "_warm", lambda self, x, y: self.step(x, y))
    monkeypatch.setattr(GraphedStep, "_capture", fake_capture)
    def step(x, y):
        return x.sum(1) * y                                      # [B]

    g = GraphedStep(step, "cpu", warmup=2)
    shapes = [8, 8, 8, 8, 5, 5, 5, 8, 5]                        # a short last batch every "epoch"
    for i, b in enumerate(shapes):
        x, y = torch.randn(b, 3), torch.randn(b)
        out = g(x, y)
        assert torch.allclose(out, x.sum(1) * y), i             # the replay computed this batch, not a stale one
    assert captured == [(8, 3), (5, 3)]                          # one capture per shape, after 2 warm steps each
    assert set(g.graphs) == {((8, 3), torch.float32, (8,), torch.float32), ((5, 3), torch.float32, (5,), torch.float32)}
    assert g.fallback == ""


def test_capture_failure_falls_back_to_eager_with_the_reason(monkeypatch):
    def broken_capture(self, x, y):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(GraphedStep, "_warm", lambda self, x, y: self.step(x, y))
    monkeypatch.setattr(GraphedStep, "_capture", broken_capture)
    g = GraphedStep(lambda x, y: x * y, "cpu", warmup=1)
    for _ in range(4):
        x, y = torch.randn(4), torch.randn(4)
        assert torch.equal(g(x, y), x * y)
    assert "capture failed" in g.fallback and "not permitted" in g.fallback and not g.graphs


def test_train_with_the_graph_path_forced_on_cpu_falls_back_and_trains_on(monkeypatch):
    """Force the CUDA-graph path on a CPU: warm-up steps run, the real capture fails (no CUDA here),
    the run records why and finishes with eager steps, training the same model as the eager path."""
    monkeypatch.setattr(T, "choose_step_mode", lambda cfg, device: ("cuda_graph", ""))
    monkeypatch.setattr(GraphedStep, "_warm", lambda self, x, y: self.step(x, y))
    model = tiny_model("parity", max_steps=6)
    eager = train(parity_cfg(log_every=6, cuda_graph=False), model=copy.deepcopy(model))
    res = train(parity_cfg(log_every=6), model=model)
    assert res.record.status == "completed" and res.record.steps == 24
    assert res.step_mode == "eager" and "capture failed" in res.step_mode_reason
    # capturable Adam with the learning rate as a tensor: the same update up to rounding
    for k, v in weights(res.model).items():
        assert torch.allclose(v, eager.model.state_dict()[k], rtol=1e-5, atol=1e-6), k
    assert [r["step"] for r in res.history] == [6, 12, 18, 24]
