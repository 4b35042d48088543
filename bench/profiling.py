"""Where the time of one training step goes (the profile behind the optimisations).

Two views of the default model's training step (N = 20, batch 128):
  phases  the step of ponder/training/loop.py written out with a clock between its parts: batch, CNN
          embedding forward, the N recurrent steps forward, halting + loss, backward, gradient
          clipping, Adam, the finite-weights safety copy. Also for (a)'s CNN as a plain
          classifier, so the pondering overhead shows phase by phase.
  ops     torch.profiler over the real ponder.training.loop.train loop: the top operators by self time.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, replace
from typing import Optional

import torch

from ponder.config import TrainConfig
from ponder.halting import halting_log_probs
from ponder.losses import ponder_loss
from ponder.tasks import build_model, model_config
from ponder.tasks.mnist.task import MnistBatches
from ponder.training.loop import train

from . import common
from .throughput import classifier_model

PHASES = ("batch", "embed_fwd", "recurrent_fwd", "loss_fwd", "backward", "clip", "adam", "safety")


@dataclass
class ProfileConfig:
    batch_size: int = 128
    max_steps: int = 20       # N
    warm: int = 10            # untimed steps first
    steps: int = 40           # timed steps (phases)
    profiled_steps: int = 10  # steps under torch.profiler (ops)
    top: int = 15             # operators listed
    threads: Optional[int] = None
    seed: int = 0

    @classmethod
    def quick(cls, **kw) -> "ProfileConfig":
        return cls(**{**dict(batch_size=32, warm=1, steps=2, profiled_steps=2, top=8), **kw})


def phase_times(model, batches, cfg: ProfileConfig) -> dict:
    """ms per step of each phase, the step of ponder/training/loop.py written out with clocks in between."""
    fn = model.step_fn
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=True)     # as ponder/training/loop.py on CPU
    params = list(model.parameters())
    good = [p.detach().clone() for p in params]
    totals = dict.fromkeys(PHASES, 0.0)
    it = iter(batches)

    def one(record: bool):
        marks = [time.perf_counter()]
        x, y = next(it)                                                       # x [B, 1, 28, 28]
        marks.append(time.perf_counter())
        ctx = fn.encode(x)                                                    # [B, ...]
        marks.append(time.perf_counter())
        h = fn.init_hidden(ctx)
        if hasattr(fn, "unroll"):                                             # what PonderNet.forward runs
            y_steps, lam = fn.unroll(ctx, h, model.max_steps)                 # [N, B, 10], [N, B]
        else:
            ys, logits = [], []
            for n in range(model.max_steps):
                out, h, l = fn.step(ctx, h, n)
                ys.append(out)
                logits.append(l)
            y_steps, lam = torch.stack(ys), torch.stack(logits)
        marks.append(time.perf_counter())
        lam = lam.float()
        log_p = halting_log_probs(lam)                                        # [N, B]
        N, B = log_p.shape
        step_losses = fn.loss(y_steps.flatten(0, 1), y.repeat(N)).view(N, B)  # [N, B]
        loss, _, _ = ponder_loss(step_losses, log_p, model.lambda_p, 0.01)
        math.isfinite(loss.item())
        marks.append(time.perf_counter())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        marks.append(time.perf_counter())
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        bool(torch.isfinite(gnorm))
        marks.append(time.perf_counter())
        opt.step()
        marks.append(time.perf_counter())
        bool(torch.stack([torch.isfinite(p).all() for p in params]).all())
        with torch.no_grad():
            for p, g in zip(params, good):
                g.copy_(p)
        marks.append(time.perf_counter())
        if record:
            for k, a, b in zip(PHASES, marks, marks[1:]):
                totals[k] += b - a

    for _ in range(cfg.warm):
        one(False)
    for _ in range(cfg.steps):
        one(True)
    out = {k: 1000 * v / cfg.steps for k, v in totals.items()}
    out["total"] = sum(out.values())
    return out


def op_table(cfg: ProfileConfig, mnist) -> list:
    """torch.profiler over `profiled_steps` steps of the real training loop (after `warm` steps)."""
    from torch.profiler import ProfilerActivity, profile

    tcfg = TrainConfig(batch_size=cfg.batch_size, max_steps=cfg.max_steps, device="cpu", seed=cfg.seed,
                       log_every=math.gcd(cfg.warm, cfg.profiled_steps))
    per_epoch = math.ceil(len(mnist.train_y) / cfg.batch_size)
    end = cfg.warm + cfg.profiled_steps
    tcfg.epochs = (end + 2 * tcfg.log_every) / per_epoch         # the last planned step would validate
    prof = profile(activities=[ProfilerActivity.CPU])
    cancel = threading.Event()

    def on_progress(p):
        if p.step == cfg.warm:
            prof.start()
        if p.step >= end:
            prof.stop()
            cancel.set()

    torch.manual_seed(cfg.seed)
    model = build_model("mnist", model_config(tcfg), cfg.max_steps, tcfg.lambda_p)
    train(tcfg, data=mnist, callback=on_progress, cancel=cancel, model=model)
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events) or 1.0
    rows = sorted(events, key=lambda e: e.self_cpu_time_total, reverse=True)[:cfg.top]
    return [{"op": e.key, "calls_per_step": e.count / cfg.profiled_steps,
             "self_ms_per_step": e.self_cpu_time_total / 1000 / cfg.profiled_steps,
             "self_percent": 100 * e.self_cpu_time_total / total} for e in rows]


def layout_check(cfg: ProfileConfig, repeats: int = 10) -> dict:
    """max_pool2d forward + backward on (a)'s first conv output [B, 16, 28, 28], NCHW vs channels-last:
    the measurement behind MnistStep's channels-last activations on CPU."""
    import torch.nn.functional as F

    z = torch.randn(cfg.batch_size, 16, 28, 28)
    out = {}
    for name, t in (("nchw", z), ("channels_last", z.contiguous(memory_format=torch.channels_last))):
        t = t.detach().requires_grad_()

        def go():
            F.max_pool2d(t, 2).sum().backward()
        go()
        out[f"{name}_ms"] = 1000 * common.best_of(go, repeats)
    out["speedup"] = out["nchw_ms"] / out["channels_last_ms"]
    return out


def by_hand_check(cfg: ProfileConfig, mnist, repeats: int = 10, levels: int = 14, hidden: int = 64) -> dict:
    """The readers' training unroll on CPU, its N GRU updates recorded by autograd step by step
    (GruUpdate.by_hand off) against one node with the hand-written backward (ponder.tasks.mnist.gru): the N updates
    alone, forward + backward from level inputs [B, L, 3H], and whole training updates (ponder.training.step.Update)
    of the cnn reader (TrainConfig()) and the row reader (the explorer default's design, bench/throughput.py's (r)),
    the two ways alternating on copies of one model. ms, best of each."""
    import copy

    from ponder.data import mnist_inputs
    from ponder.tasks.mnist.readers import GruUpdate
    from ponder.training.step import Update
    from .throughput import default_design

    torch.manual_seed(cfg.seed)
    cell = torch.nn.GRUCell(128, hidden)
    gi = torch.randn(cfg.batch_size, levels, 3 * hidden, requires_grad=True)
    h0 = torch.zeros(cfg.batch_size, hidden)
    x, y = mnist_inputs(mnist.train_x[:cfg.batch_size]), mnist.train_y[:cfg.batch_size]
    rows_model, rows_train = default_design()
    jobs = {"updates": lambda: GruUpdate(cell, gi).states(gi, h0, cfg.max_steps).square().sum().backward()}
    for key, tcfg, mcfg in (("cnn_step", TrainConfig(), None), ("rows_step", rows_train, rows_model)):
        tcfg = replace(tcfg, batch_size=cfg.batch_size, max_steps=cfg.max_steps, device="cpu", seed=cfg.seed)
        torch.manual_seed(cfg.seed)
        model = build_model("mnist", mcfg or model_config(tcfg), cfg.max_steps, tcfg.lambda_p)
        for hand in (False, True):                              # copies of one model, each its own optimiser
            update = Update(tcfg, copy.deepcopy(model).train(), torch.device("cpu"), "eager", "")
            jobs[(key, hand)] = lambda u=update: u(x, y)
    out = {}
    try:
        for _ in range(max(1, repeats)):
            for hand in (False, True):
                GruUpdate.by_hand = hand
                for key, fn in jobs.items():
                    if isinstance(key, tuple) and key[1] != hand:
                        continue
                    name = f"{key[0] if isinstance(key, tuple) else key}_{'by_hand' if hand else 'autograd'}_ms"
                    fn()
                    out[name] = min(out.get(name, float("inf")), 1000 * common.best_of(fn, 2))
    finally:
        GruUpdate.by_hand = True
    for key in ("updates", "cnn_step", "rows_step"):
        out[f"{key}_speedup"] = out[f"{key}_autograd_ms"] / out[f"{key}_by_hand_ms"]
    return out


def run(cfg: ProfileConfig, mnist=None, data_dir: Optional[str] = None, out=None, quick: bool = False) -> dict:
    threads = common.set_threads(cfg.threads)
    machine = common.machine_info("cpu")
    mnist = mnist if mnist is not None else common.load_mnist(data_dir)
    tcfg = TrainConfig(batch_size=cfg.batch_size, max_steps=cfg.max_steps, device="cpu", seed=cfg.seed)
    phases = {}
    for key, factory in (("a_default", lambda: build_model("mnist", model_config(tcfg), cfg.max_steps, tcfg.lambda_p)),
                         ("d_classifier", lambda: classifier_model(model_config(tcfg)))):
        torch.manual_seed(cfg.seed)
        model = factory().train()
        phases[key] = phase_times(model, MnistBatches(mnist, tcfg, "cpu"), cfg)
    ops = op_table(cfg, mnist)
    layout = layout_check(cfg, repeats=3 if quick else 10)
    unroll = by_hand_check(cfg, mnist, repeats=2 if quick else 10)
    common.print_table(["phase", "(a) ms/step", "(d) ms/step", "(a) share"],
                       [[k, phases["a_default"][k], phases["d_classifier"][k],
                         f"{100 * phases['a_default'][k] / phases['a_default']['total']:.0f}%"] for k in (*PHASES, "total")],
                       title=f"One training step by phase, N = {cfg.max_steps}, batch {cfg.batch_size}, {threads} threads")
    common.print_table(["op", "calls/step", "self ms/step", "self %"],
                       [[r["op"], r["calls_per_step"], r["self_ms_per_step"], r["self_percent"]] for r in ops],
                       title="Top operators (torch.profiler, self CPU time, real training loop)")
    print(f"max_pool2d fwd+bwd on [{cfg.batch_size}, 16, 28, 28]: NCHW {layout['nchw_ms']:.2f} ms, "
          f"channels-last {layout['channels_last_ms']:.2f} ms ({layout['speedup']:.1f}x)")
    for key, what in (("updates", f"the {cfg.max_steps} GRU updates fwd+bwd"), ("cnn_step", "cnn reader's step"),
                      ("rows_step", "row reader's step")):
        print(f"{what} at batch {cfg.batch_size}: autograd step by step {unroll[key + '_autograd_ms']:.2f} ms, "
              f"one node by hand {unroll[key + '_by_hand_ms']:.2f} ms ({unroll[key + '_speedup']:.2f}x)")
    return common.write_result("profile", out, quick, machine, cfg, {"phases": phases, "ops": ops, "layout": layout,
                                                                     "unroll": unroll})
