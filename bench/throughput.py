"""Benchmark 1: training throughput (train images per second), MNIST, N = 20, batch 128.

    (a) default     the project's default model (CNN 16->32 ch, 128-d embedding once, GRU 64)
                    trained by ponder.training.loop.train, the loop every run uses
    (b) reference   the MNIST article's design (bench/reference.py): CNN 10->20 ch, 64-d, MLP
                    cell 64, the embedding recomputed at every step, DataLoader + per-image PIL
    (c) same-size   the project's design at (b)'s sizes (10->20 ch, 64-d embedding, hidden 64):
                    isolates the design difference from the size difference
    (d) classifier  (a)'s CNN with a linear head, no pondering: a PonderNet with N = 1 whose step is
                    the head alone (p_1 = 1, the loss is plain cross-entropy), trained by the same
                    loop as (a), so the only difference is the pondering: the floor for its overhead
    (e) compiled    (a) with TrainConfig.compile = True (only with --compile)
    (a0) plain      (a)'s network computed the plain way (NCHW activations, relu before max-pool,
                    nn.GRUCell re-projecting the embedding at every step, both heads applied step
                    by step): same weights, same loop, so (a0) / (a) is what ponder/tasks/mnist/readers.py's
                    channels-last, pool-first, projection-once computation buys
    (r) rows        the design of the explorer's default model (assets/mnist-adaptive: the row reader, its
                    card's model and training settings), trained by the same loop

Each variant runs `warm` steps untimed, then `steps` timed steps, one after the other in one
process; with rounds > 1 the sequence repeats and each variant keeps its fastest round.
Each variant's FLOPs per step are counted (bench/flops.py) and its achieved GFLOP/s set against a large
matmul's on the same cores, measured once per round in the same process (the best round kept).
Targets (2 CPU cores): (c) >= 10x (b) images/s; (a) <= 1.5x the time per image of (d); (r) >= 40% of the
matmul's rate and >= 7x (b)'s images/s.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, replace
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from ponder.tasks.mnist.task import MnistConfig
from ponder.config import TrainConfig
from ponder.halting import PonderNet
from ponder.tasks import count_parameters
from ponder.tasks.mnist.readers import MnistStep
from ponder.tasks import build_model, model_config
from ponder.training.loop import train

from . import common
from .flops import matmul_gflops, reference_flops, step_flops
from .reference import ReferenceConfig, build_reference, article_loader, reference_train_step

TARGET_C_OVER_B = 10.0          # (c) images/s over (b) images/s, at least
TARGET_A_OVER_D = 1.5           # (a) time per image over (d) time per image, at most
TARGET_R_SHARE = 0.40           # (r)'s GFLOP/s over a large matmul's on the same cores, at least
TARGET_R_OVER_B = 7.0           # (r) images/s over (b) images/s, at least
DEFAULT_MODEL = "mnist-adaptive"   # the shipped model whose design (r) trains


@dataclass
class ThroughputConfig:
    batch_size: int = 128     # images per optimiser step
    max_steps: int = 20       # N
    warm: int = 10            # untimed steps first (allocator, caches, lazy init)
    steps: int = 50           # timed steps per variant and round
    rounds: int = 3           # repeat the whole sequence; each variant keeps its fastest round
    reference_steps: Optional[int] = None   # timed steps for (b), the slow one (None: same as steps)
    compile: bool = False     # also time (a) with torch.compile
    threads: Optional[int] = None
    seed: int = 0
    matmul_n: int = 2048      # the large matmul: [n, n] @ [n, n] float32

    @classmethod
    def quick(cls, **kw) -> "ThroughputConfig":
        return cls(**{**dict(batch_size=32, max_steps=20, warm=1, steps=2, rounds=1, reference_steps=1,
                             matmul_n=256), **kw})


# ----------------------------------------------------------------------------- (d) the classifier floor

class ClassifierStep(nn.Module):
    """(a)'s CNN embedding and a linear head; one 'step' that is just the head. No recurrent cell.

    Wrapped in PonderNet(max_steps=1): lambda_1 = 1 so p_1 = 1, the reconstruction loss is the plain
    cross-entropy and KL(p || p_G) over one step is 0. Same data, optimiser and loop as (a).
    """

    def __init__(self, cfg: MnistConfig):
        super().__init__()
        self.cnn = MnistStep(cfg, lambda_p=0.5)   # only its conv1 / conv2 / fc / dropout are used
        del self.cnn.cell, self.cnn.out_head, self.cnn.lambda_head
        self.head = nn.Linear(cfg.embed, 10)

    def encode(self, x):
        return self.cnn.embed(x)                                    # [B, E]

    def init_hidden(self, ctx):
        return ctx.new_zeros(ctx.shape[0], 0)                       # no state

    def step(self, ctx, h, n=0):
        return self.head(ctx), h, ctx.new_zeros(ctx.shape[0])       # y [B, 10], h, lambda logit [B] (unused: N = 1)

    def loss(self, y, target):
        return torch.nn.functional.cross_entropy(y.float(), target, reduction="none")

    def probs(self, y):
        return torch.softmax(y.float(), -1)


def classifier_model(cfg: MnistConfig) -> PonderNet:
    return PonderNet(ClassifierStep(cfg), max_steps=1, lambda_p=0.5)


class BeforeMnistStep(MnistStep):
    """(a0): MnistStep's parameters, computed the plain way (see the module docstring)."""

    unroll = None                                               # PonderNet.forward loops over step()

    def encode(self, x):
        z = F.max_pool2d(F.relu(self.conv1(x)), 2)              # [B, C1, 14, 14], NCHW
        z = F.max_pool2d(F.relu(self.conv2(z)), 2)              # [B, C2, 7, 7]
        return self.drop(F.relu(self.fc(z.flatten(1))))         # [B, E]

    def step(self, ctx, h, n=0):
        h = self.cell(ctx, h)                                   # W_ih e recomputed every step
        return self.out_head(h), h, self.lambda_head(h).squeeze(-1)


def before_model(cfg: MnistConfig, max_steps: int, lambda_p: float) -> PonderNet:
    return PonderNet(BeforeMnistStep(cfg, lambda_p), max_steps=max_steps, lambda_p=lambda_p)


# ----------------------------------------------------------------------------- timing

def time_project(cfg: TrainConfig, mnist, model: PonderNet, warm: int, steps: int) -> float:
    """Seconds for `steps` optimiser steps of ponder.training.loop.train after `warm` untimed ones."""
    return time_train(cfg, mnist, model, warm, steps)[0]


def time_train(cfg: TrainConfig, mnist, model: PonderNet, warm: int, steps: int):
    """(seconds, TrainResult): `steps` optimiser steps of ponder.training.loop.train after `warm` untimed ones.

    The train callback fires every log_every steps; the clock is read there after a device sync,
    and the run is cancelled once the timed steps are done.
    """
    every = math.gcd(warm, steps)
    per_epoch = math.ceil(len(mnist.train_y) / cfg.batch_size) if cfg.task == "mnist" else cfg.steps_per_epoch
    # plan a few more steps than we time: the last planned step would run a validation pass
    cfg = replace(cfg, log_every=every, epochs=(warm + steps + 2 * every) / per_epoch, max_seconds=None)
    marks, cancel = {}, threading.Event()

    def on_progress(p):
        if p.step in (warm, warm + steps):
            common.sync(cfg.device if cfg.device != "auto" else "cpu")
            marks[p.step] = time.perf_counter()
        if p.step >= warm + steps:
            cancel.set()

    res = train(cfg, data=mnist, callback=on_progress, cancel=cancel, model=model)
    if warm + steps not in marks or warm not in marks:
        raise RuntimeError(f"training stopped early ({res.record.status}: {res.record.reason})")
    return marks[warm + steps] - marks[warm], res


def time_reference(data_dir: str, rcfg: ReferenceConfig, warm: int, steps: int, seed: int = 0) -> float:
    """Seconds for `steps` steps of the article-style loop (DataLoader fetch included)."""
    model, opt, rcfg = build_reference(rcfg, seed)
    loader = iter(article_loader(data_dir, rcfg, seed))
    for _ in range(warm):
        x, y = next(loader)
        reference_train_step(model, opt, x, y, rcfg)
    t0 = time.perf_counter()
    for _ in range(steps):
        x, y = next(loader)
        reference_train_step(model, opt, x, y, rcfg)
    return time.perf_counter() - t0


def default_design():
    """(model config mapping, TrainConfig) of the explorer's default model, from its shipped card."""
    from ponder.store.card import read_card
    card = read_card(common.ASSETS / DEFAULT_MODEL)
    return card["model"], TrainConfig.from_dict(card["train"])


def variants(cfg: ThroughputConfig) -> dict:
    """name -> (label, design, model config (ReferenceConfig for (b)), model factory (None for (b)), the
    TrainConfig whose loss and optimiser settings it trains with)."""
    base = TrainConfig()
    default_cfg = model_config(base)                                                  # (a)
    ref = ReferenceConfig(batch_size=cfg.batch_size, max_steps=cfg.max_steps)
    same = MnistConfig(channels1=ref.channels1, channels2=ref.channels2, embed=ref.embed,
                       hidden=ref.hidden, dropout=ref.conv_dropout)                    # (c)
    rows_model, rows_train = default_design()                                         # (r)
    out = {
        "a0_before": ("(a0) (a) before the optimisations", "cnn reader, computed the plain way", default_cfg,
                      lambda: before_model(default_cfg, cfg.max_steps, base.lambda_p), base),
        "a_default": ("(a) project default, TrainConfig()", "cnn reader", default_cfg,
                      lambda: build_model("mnist", default_cfg, cfg.max_steps, base.lambda_p), base),
        "r_rows": (f"(r) explorer default design ({DEFAULT_MODEL})", "rows reader", rows_model,
                   lambda: build_model("mnist", rows_model, cfg.max_steps, rows_train.lambda_p), rows_train),
        "b_reference": ("(b) article-style reference", "the article's (CNN re-run every step)", ref, None, None),
        "c_same_size": ("(c) project design, (b)'s sizes", "cnn reader", same,
                        lambda: build_model("mnist", same, cfg.max_steps, base.lambda_p), base),
        "d_classifier": ("(d) (a)'s CNN as a plain classifier", "no pondering", default_cfg,
                         lambda: classifier_model(default_cfg), base),
    }
    if cfg.compile:
        out["e_compiled"] = ("(e) (a) + torch.compile", "cnn reader", default_cfg,
                             lambda: build_model("mnist", default_cfg, cfg.max_steps, base.lambda_p), base)
    return out


def train_config(cfg: ThroughputConfig, base: TrainConfig, model: PonderNet, compiled: bool) -> TrainConfig:
    """base's loss and optimiser settings at this benchmark's batch, steps, seed, on the CPU."""
    return replace(base, batch_size=cfg.batch_size, max_steps=model.max_steps, device="cpu", seed=cfg.seed,
                   compile=compiled, max_seconds=None, options={})


def run(cfg: ThroughputConfig, mnist=None, data_dir: Optional[str] = None, out=None, quick: bool = False) -> dict:
    from ponder.data import mnist_inputs
    threads = common.set_threads(cfg.threads)
    machine = common.machine_info("cpu")
    ddir = common.data_dir(data_dir)
    mnist = mnist if mnist is not None else common.load_mnist(ddir)
    x, y = mnist_inputs(mnist.train_x[:cfg.batch_size]), mnist.train_y[:cfg.batch_size]   # the FLOP count's batch
    found, flops, matmul = {}, {}, 0.0
    table = variants(cfg)
    for rnd in range(cfg.rounds):
        matmul = max(matmul, matmul_gflops(cfg.matmul_n, 3 if quick else 5))
        print(f"  round {rnd + 1}/{cfg.rounds} [{cfg.matmul_n}]^2 matmul: {matmul:,.0f} GFLOP/s (best so far)")
        for key, (label, design, mcfg, factory, base) in table.items():
            if key == "e_compiled" and rnd > 0:
                continue                        # compiling takes about a minute on 2 cores: once is enough
            if key == "b_reference":
                n = cfg.reference_steps or cfg.steps
                secs = time_reference(ddir, mcfg, max(1, min(cfg.warm, 5)), n, cfg.seed)
                model, opt, _ = build_reference(mcfg, cfg.seed)
                params = count_parameters(model)
                if key not in flops:
                    flops[key] = reference_flops(model, opt, x, y, mcfg, reference_train_step)
            else:
                torch.manual_seed(cfg.seed)
                model = factory()
                params = count_parameters(model)
                tcfg = train_config(cfg, base, model, key == "e_compiled")
                if key not in flops:
                    flops[key] = step_flops(model, replace(tcfg, compile=False), x, y)
                n = cfg.steps
                secs = time_project(tcfg, mnist, model, cfg.warm, n)
            ips = n * cfg.batch_size / secs
            row = found.get(key)
            if row is None or ips > row["images_per_s"]:
                found[key] = {"label": label, "design": design, "params": params, "timed_steps": n,
                              "seconds": secs, "ms_per_step": 1000 * secs / n, "images_per_s": ips,
                              "us_per_image": 1e6 * secs / (n * cfg.batch_size), "round": rnd,
                              "gflop_per_step": flops[key] / 1e9, "gflops": flops[key] / 1e9 * n / secs}
            print(f"  round {rnd + 1}/{cfg.rounds} {label}: {ips:,.0f} images/s ({1000 * secs / n:.1f} ms/step)")
    for row in found.values():
        row["matmul_share"] = row["gflops"] / matmul           # of the best matmul rate over the rounds
    a, b, c, d, r = (found[k]["images_per_s"] for k in ("a_default", "b_reference", "c_same_size", "d_classifier",
                                                         "r_rows"))
    share = found["r_rows"]["matmul_share"]
    ratios = {
        "c_over_b": c / b,                      # how much faster the project's design is at equal sizes
        "a_over_b": a / b,
        "r_over_b": r / b,                      # the explorer's default design against the article's
        "a_time_over_d": d / a,                 # time per image of (a) over that of (d)
        "matmul_gflops": matmul, "matmul_n": cfg.matmul_n, "r_matmul_share": share,
        "target_c_over_b": TARGET_C_OVER_B, "target_a_time_over_d": TARGET_A_OVER_D,
        "target_r_matmul_share": TARGET_R_SHARE, "target_r_over_b": TARGET_R_OVER_B,
        "met_c_over_b": c / b >= TARGET_C_OVER_B, "met_a_time_over_d": d / a <= TARGET_A_OVER_D,
        "met_r_matmul_share": share >= TARGET_R_SHARE, "met_r_over_b": r / b >= TARGET_R_OVER_B,
    }
    if "e_compiled" in found:
        ratios["e_over_a"] = found["e_compiled"]["images_per_s"] / a
    if "a0_before" in found:
        ratios["a_over_a0"] = a / found["a0_before"]["images_per_s"]
    common.print_table(["variant", "design", "params", "ms/step", "images/s", "GFLOP/step", "GFLOP/s", "of matmul"],
                       [[r["label"], r["design"], r["params"], r["ms_per_step"], r["images_per_s"], r["gflop_per_step"],
                         r["gflops"], f"{100 * r['matmul_share']:.0f}%"] for r in found.values()],
                       title=f"Training throughput, N = {cfg.max_steps}, batch {cfg.batch_size}, {threads} threads; "
                             f"[{cfg.matmul_n}]^2 matmul {matmul:,.0f} GFLOP/s")
    print(f"(c)/(b) = {ratios['c_over_b']:.1f}x (target >= {TARGET_C_OVER_B:g}x); "
          f"(a) time/image over (d) = {ratios['a_time_over_d']:.2f}x (target <= {TARGET_A_OVER_D:g}x); "
          f"(r) {100 * share:.0f}% of the matmul's rate (target >= {100 * TARGET_R_SHARE:.0f}%), "
          f"(r)/(b) = {ratios['r_over_b']:.1f}x (target >= {TARGET_R_OVER_B:g}x)")
    return common.write_result("throughput", out, quick, machine, cfg, {"variants": found, "ratios": ratios})
