"""Benchmark 3: inference with per-sample early exit vs a full N-step unroll.

For every shipped model (assets/, each on its own task's test set, each row labelled by its design:
the MNIST reader or the task), plus mnist-default with its lambda-head bias lowered until the mean
sampled halting step is about 10 (a timing stand-in: the same network and cost per step, only the
halting moves; its accuracy is not the point).

    early  ponder(model, x, mode) with mode 'sample' (the paper's inference, seeded draws) and
           'deterministic' (the median step): halted samples leave the batch
    full   ponder(model, x, 'expected'): all N steps for every sample (PonderNet.forward)
Timed twice: the whole thing from images, and the recurrent part alone, from precomputed CNN
embeddings (the same ponder() on a step function whose encode() returns its input), plus the
embedding alone. Each timing is the best of `repeats`, early and full interleaved.
Batch sizes: the whole 10,000-image test set in one call (offline evaluation; the target is judged
here), 1,000 per call, and one image per call (the explorer). Early exit saves compute in
proportion to the samples still running, but every step also costs a fixed amount of Python and
operator overhead, which only a large batch amortises; the three sizes show that.
Target: recurrent-part speed-up >= 0.7 x (N / mean steps).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Optional, Sequence

import torch
import torch.nn as nn

from ponder.store.checkpoint import load_checkpoint
from ponder.tasks import get_task
from ponder.halting import PonderNet, first_true, halt_mask
from ponder.inference import draw_uniforms, ponder

from . import common

TARGET_FRACTION = 0.7          # of the ideal speed-up N / mean steps


@dataclass
class EarlyExitConfig:
    models: Optional[Sequence[str]] = None    # shipped models in assets/ (None: every one)
    synthetic_steps: Optional[float] = 10.0   # also mnist-default shifted to this mean step (None: skip)
    modes: Sequence[str] = ("sample", "deterministic")
    n_images: int = 10000      # test items of each model's task
    batch_sizes: Sequence[int] = (10000, 1000, 1)   # images per ponder() call; the first judges the target
    single_images: int = 100   # images timed at batch size 1 (one call each)
    repeats: int = 2           # best of
    threads: Optional[int] = None
    clock: str = "wall"        # "cpu": the process's CPU time (with threads=1, on a machine other work keeps busy)
    seed: int = 0

    @classmethod
    def quick(cls, **kw) -> "EarlyExitConfig":
        return cls(**{**dict(models=("mnist-adaptive", "parity-15"), n_images=256, batch_sizes=(256, 1), single_images=4,
                             repeats=1), **kw})


class FromEmbedding(nn.Module):
    """A step function that takes precomputed ctx (the CNN embedding) as its input: times the
    recurrent part alone with the real ponder()."""

    def __init__(self, fn: nn.Module):
        super().__init__()
        self.fn = fn
        if not hasattr(fn, "unroll"):
            self.unroll = None                  # PonderNet.forward then loops over step()
        if hasattr(fn, "at_step"):
            self.at_step = fn.at_step           # early exit gathers the one level a step reads
        if hasattr(fn, "stepper"):
            self.stepper = fn.stepper           # early exit's split step (the answer once, at the halts)

    def encode(self, ctx):
        return ctx

    def init_hidden(self, ctx):
        return self.fn.init_hidden(ctx)

    def step(self, ctx, h, n):
        return self.fn.step(ctx, h, n)

    def unroll(self, ctx, h, n_steps):
        return self.fn.unroll(ctx, h, n_steps)

    def loss(self, y, target):
        return self.fn.loss(y, target)

    def probs(self, y):
        return self.fn.probs(y)


@torch.no_grad()
def shift_to_mean_steps(model: PonderNet, x: torch.Tensor, target: float, seed: int = 0):
    """A copy of the model whose lambda-head bias is lowered by delta so that the mean sampled
    halting step on x is ~target. Lambda logits are W h + b and h does not depend on b, so one full
    unroll gives the logits for every delta; bisection on delta."""
    out = model(x)
    u = draw_uniforms(model.max_steps, x.shape[0], torch.Generator().manual_seed(seed))

    def mean_steps(delta):
        return first_true(halt_mask(out.lambda_logits + delta, "sample", u)).float().mean().item()

    lo, hi = -20.0, 0.0                  # mean_steps is non-increasing in delta
    for _ in range(40):
        mid = (lo + hi) / 2
        if mean_steps(mid) > target:
            lo = mid
        else:
            hi = mid
    delta = (lo + hi) / 2
    shifted = copy.deepcopy(model)
    shifted.step_fn.lambda_head.bias += delta
    return shifted, delta, mean_steps(delta)


def time_model(model: PonderNet, xs: list, ys: list, cfg: EarlyExitConfig) -> dict:
    """Timings for one model. xs: batches of inputs [b, 1, 28, 28]; ys: labels."""
    model.eval()
    N = model.max_steps
    with torch.no_grad():
        ctxs = [model.step_fn.encode(x) for x in xs]                        # [b, ...] embeddings
    rec_model = PonderNet(FromEmbedding(model.step_fn), N, model.lambda_p).eval()
    n_img = sum(len(x) for x in xs)

    def runner(m, inputs, mode, limit=None):
        def go():
            outs = []
            for i, x in enumerate(inputs[:limit]):
                g = torch.Generator().manual_seed(cfg.seed + i)              # the same draws every time
                outs.append(ponder(m, x, mode, generator=g))
            return outs
        return go

    def encoder(limit=None):
        def go():
            with torch.no_grad():
                for x in xs[:limit]:
                    model.step_fn.encode(x)
        return go

    def all_jobs(limit=None):
        jobs = {"full": runner(model, xs, "expected", limit), "rec_full": runner(rec_model, ctxs, "expected", limit),
                "encode": encoder(limit)}
        for mode in cfg.modes:
            jobs[f"early_{mode}"] = runner(model, xs, mode, limit)
            jobs[f"rec_early_{mode}"] = runner(rec_model, ctxs, mode, limit)
        return jobs

    for job in all_jobs(limit=2).values():    # untimed warm-up on the first batches (lazy init, allocator)
        job()
    jobs = all_jobs()
    best = dict.fromkeys(jobs, float("inf"))
    for _ in range(cfg.repeats):
        for name, job in jobs.items():
            best[name] = min(best[name], common.best_of(job, 1, clock=cfg.clock))

    out = {"max_steps": N, "images": n_img, "encode_seconds": best["encode"],
           "full_seconds": best["full"], "rec_full_seconds": best["rec_full"],
           "full_images_per_s": n_img / best["full"], "modes": {}}
    for mode in cfg.modes:
        res = runner(model, xs, mode)()
        steps = torch.cat([r.steps_run for r in res]).float()
        acc = torch.cat([(r.pred == y) for r, y in zip(res, ys)]).float().mean().item()
        mean_steps = steps.mean().item()
        ideal = N / mean_steps
        rec_speedup = best["rec_full"] / best[f"rec_early_{mode}"]
        out["modes"][mode] = {
            "mean_steps": mean_steps, "accuracy": acc,
            "early_seconds": best[f"early_{mode}"], "rec_early_seconds": best[f"rec_early_{mode}"],
            "early_images_per_s": n_img / best[f"early_{mode}"],
            "whole_speedup": best["full"] / best[f"early_{mode}"],
            "rec_speedup": rec_speedup, "ideal_speedup": ideal,
            "target_speedup": TARGET_FRACTION * ideal, "fraction_of_ideal": rec_speedup / ideal,
            "met": rec_speedup >= TARGET_FRACTION * ideal,
        }
    return out


def shipped_models() -> list:
    """The names of the shipped models (assets/ folders with a run card)."""
    return sorted(p.name for p in common.ASSETS.iterdir() if (p / "run.json").is_file())


def design(record) -> str:
    """A model's design in words (a RunRecord): its MNIST reader ("rows reader") or its task."""
    reader = record.model.get("reader")
    return f"{reader} reader" if reader else record.task


def test_items(ck, mnist, n: int):
    """The first n items (x, y) of the test set of the model's task."""
    ts = get_task(ck.task).test_set(ck.model, ck.record.config, mnist, n)
    return ts.x[:n], ts.y[:n]


def run(cfg: EarlyExitConfig, mnist=None, data_dir: Optional[str] = None, out=None, quick: bool = False) -> dict:
    if cfg.clock not in common.CLOCKS:
        raise ValueError(f"clock must be one of {', '.join(common.CLOCKS)}, got {cfg.clock!r}")
    threads = common.set_threads(cfg.threads)
    machine = common.machine_info("cpu")
    mnist = mnist if mnist is not None else common.load_mnist(data_dir)
    models = []
    for name in cfg.models or shipped_models():
        ck = load_checkpoint(common.ASSETS / name)
        x, y = test_items(ck, mnist, cfg.n_images)
        models.append((name, ck.model, x, y, {"design": design(ck.record),
                                              "card_mean_steps": ck.record.test.mean_steps}))
    if cfg.synthetic_steps:
        ck = load_checkpoint(common.ASSETS / "mnist-default")
        x, y = test_items(ck, mnist, cfg.n_images)
        shifted, delta, got = shift_to_mean_steps(ck.model, x[:1000], cfg.synthetic_steps, cfg.seed)
        models.append((f"mnist-default, lambda bias {delta:+.2f}", shifted, x, y,
                       {"design": design(ck.record), "synthetic": True, "bias_shift": delta,
                        "target_mean_steps": cfg.synthetic_steps}))
    by_batch = []
    for bs in cfg.batch_sizes:
        rows = {}
        for name, model, x, y, extra in models:
            m_img = min(len(x), cfg.single_images) if bs == 1 else len(x)
            xs, ys = list(x[:m_img].split(bs)), list(y[:m_img].split(bs))
            r = time_model(model, xs, ys, cfg)
            r.update(extra)
            rows[name] = r
            for mode, m in r["modes"].items():
                print(f"  batch {bs}, {name} ({extra['design']}) [{mode}]: mean steps {m['mean_steps']:.2f}, recurrent "
                      f"x{m['rec_speedup']:.2f} (ideal x{m['ideal_speedup']:.2f}), whole x{m['whole_speedup']:.2f}")
        by_batch.append({"batch_size": bs, "images": m_img, "models": rows})
        table = []
        for name, r in rows.items():
            for mode, m in r["modes"].items():
                table.append([name, r["design"], mode, m["mean_steps"], m["accuracy"], r["full_images_per_s"],
                              m["early_images_per_s"], m["whole_speedup"], m["rec_speedup"], m["target_speedup"], m["met"]])
        common.print_table(["model", "design", "mode", "mean steps", "accuracy", "full img/s", "early img/s", "whole x",
                            "recurrent x", "target x", "met"], table,
                           title=f"Early exit vs full N-step unroll ({m_img} test images, batch {bs}, {threads} threads)")
    return common.write_result("early_exit", out, quick, machine, cfg,
                               {"by_batch": by_batch, "primary_batch_size": cfg.batch_sizes[0],
                                "target_fraction": TARGET_FRACTION})
