"""Benchmark 2: seconds of training until >= 98.5% MNIST test accuracy, explorer "quick run" settings.

The run is exactly what the explorer's Train page starts with its form untouched
(explorer/app/forms.py train_form_ui): ponder.tasks.train_config("mnist") (the row reader, lambda_p 0.5, beta 0.01,
N 20, hidden 64, batch 128, lr 2e-3, 3 epochs, onecycle) with the form's 60-second time budget.
(docs/benchmarks.md's figures were measured when that default was the cnn reader at lambda_p 0.2.)

How evaluation time is kept out of the training time: the train callback (every log_every = 10
steps) copies the weights to a snapshot every `snapshot_every` seconds of training and does
nothing else; the copies' own time is measured and subtracted. After training, every snapshot is
evaluated on the 10,000 test images with ponder.analysis.unroll (mode 'sample', seed 0: the accuracy run
cards report). Time to accuracy = the training time of the first snapshot at or above the target,
an upper bound with a resolution of one snapshot interval. The loop's own epoch-end validation
passes are part of every real run, so they stay in. Loading MNIST (before train() starts its
clock) is not counted.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

import torch

from ponder import data as D
from ponder.config import TrainConfig
from ponder.analysis.unroll import evaluate
from ponder.tasks import build_model, model_config, train_config
from ponder.training.loop import train

from . import common

TARGET = 0.985             # test accuracy
TARGET_SECONDS = 60.0      # of training, on 2 CPU cores


@dataclass
class TimeToAccuracyConfig:
    target: float = TARGET             # test accuracy to reach
    max_seconds: float = 60.0          # the explorer form's time budget for MNIST (explorer/app/ui.py)
    epochs: Optional[float] = None     # None: TrainConfig's default (3 epochs)
    snapshot_every: float = 2.0        # seconds of training between weight snapshots
    eval_limit: Optional[int] = None   # test images per evaluation (None: all 10,000)
    mode: str = "sample"               # halting mode of the accuracy (as in run cards)
    device: str = "cpu"
    threads: Optional[int] = None
    seed: int = 0

    @classmethod
    def quick(cls, **kw) -> "TimeToAccuracyConfig":
        return cls(**{**dict(max_seconds=2.0, snapshot_every=0.5, eval_limit=500), **kw})


def train_with_snapshots(tcfg: TrainConfig, mnist, snapshot_every: float):
    """Train; return (TrainResult, [(step, train_seconds, state_dict)], snapshot overhead seconds)."""
    snaps, copies = [], []                                     # copies: (report's elapsed, seconds the copy took)
    torch.manual_seed(tcfg.seed)
    model = build_model(tcfg.task, model_config(tcfg), tcfg.max_steps, tcfg.lambda_p)

    def on_progress(p):
        t0 = time.perf_counter()
        train_s = p.elapsed - sum(c for _, c in copies)        # this report's time, without earlier copies
        if not snaps or train_s - snaps[-1][1] >= snapshot_every:
            state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            snaps.append((p.step, train_s, state))
        copies.append((p.elapsed, time.perf_counter() - t0))

    res = train(tcfg, data=mnist, callback=on_progress, model=model)
    # the copies inside the training loop's clock (res.record.train_seconds); the final report comes after the loop
    # stopped its clock (its elapsed is res.record.train_seconds), so its copy is not in res.record.train_seconds
    return res, snaps, sum(c for e, c in copies if e < res.record.train_seconds)


def run(cfg: TimeToAccuracyConfig, mnist=None, data_dir: Optional[str] = None, out=None, quick: bool = False) -> dict:
    threads = common.set_threads(cfg.threads)
    machine = common.machine_info(cfg.device)
    mnist = mnist if mnist is not None else common.load_mnist(data_dir)
    over = dict(max_seconds=cfg.max_seconds, device=cfg.device, seed=cfg.seed)
    if cfg.epochs is not None:
        over["epochs"] = cfg.epochs
    tcfg = train_config("mnist", **over)
    res, snaps, overhead = train_with_snapshots(tcfg, mnist, cfg.snapshot_every)
    print(f"  trained {res.record.steps} steps in {res.record.train_seconds:.1f} s ({res.record.status}{': ' + res.record.reason if res.record.reason else ''}); "
          f"{len(snaps)} snapshots, copies took {overhead * 1000:.0f} ms")

    dev = torch.device(res.device)
    n = cfg.eval_limit or len(mnist.test_y)
    x, y = D.mnist_inputs(mnist.test_x[:n].to(dev)), mnist.test_y[:n].to(dev)
    model = build_model("mnist", model_config(tcfg), tcfg.max_steps, tcfg.lambda_p).to(dev)
    points, t_eval = [], time.perf_counter()
    for step, secs, state in snaps:
        model.load_state_dict(state)
        acc = evaluate(model, x, y, cfg.mode, seed=cfg.seed, by_class=False)["accuracy"]
        points.append({"step": step, "train_seconds": secs, "test_accuracy": acc})
    final = evaluate(res.model, x, y, cfg.mode, seed=cfg.seed, by_class=False)
    t_eval = time.perf_counter() - t_eval
    points.append({"step": res.record.steps, "train_seconds": res.record.train_seconds - overhead, "test_accuracy": final["accuracy"],
                   "final": True})
    hit = next((p for p in points if p["test_accuracy"] >= cfg.target), None)
    after = [p for p in points if hit is not None and p["train_seconds"] >= hit["train_seconds"]]
    results = {
        "target_accuracy": cfg.target,
        "target_seconds": TARGET_SECONDS,
        "reached": hit is not None,
        "seconds_to_target": hit["train_seconds"] if hit else None,
        "step_at_target": hit["step"] if hit else None,
        "accuracy_at_target": hit["test_accuracy"] if hit else None,
        "stays_above_after": all(p["test_accuracy"] >= cfg.target for p in after) if hit else None,
        "met": hit is not None and hit["train_seconds"] <= TARGET_SECONDS,
        "final_accuracy": final["accuracy"], "final_mean_steps": final["mean_steps"],
        "train_seconds": res.record.train_seconds, "snapshot_overhead_seconds": overhead, "steps": res.record.steps,
        "status": res.record.status, "reason": res.record.reason, "eval_images": n, "eval_seconds": t_eval,
        "images_per_second": res.record.steps * tcfg.batch_size / res.record.train_seconds if res.record.train_seconds > 0 else None,
        "train_config": tcfg.to_dict(), "curve": points,
    }
    common.print_table(["step", "train s", "test accuracy"],
                       [[p["step"], p["train_seconds"], f"{p['test_accuracy']:.4f}"] for p in points],
                       title=f"Test accuracy during the quick run ({threads} threads, {n} test images)")
    if hit:
        print(f"reached {cfg.target:.1%} after {hit['train_seconds']:.1f} s of training (step {hit['step']}; target <= {TARGET_SECONDS:g} s)")
    else:
        print(f"did not reach {cfg.target:.1%} (final {final['accuracy']:.4f})")
    return common.write_result("time_to_accuracy", out, quick, machine, cfg, results)
