"""Benchmark 5 (GPU only): time to >= 99.0% MNIST test accuracy, and train images per second at N = 20.

Uses the project's own training loop, which on CUDA keeps MNIST as one uint8 tensor on the GPU,
batches, normalises and rotates there, and runs the forward pass under bf16 autocast.
    throughput        ponder.train.train for `warm` + `steps` steps per batch size (N = 20)
    time to accuracy  train with `batch_size`, `lr`, `epochs`; the weights are copied (on the GPU)
                      every `snapshot_every` seconds of training from the train callback, the copies'
                      time is subtracted, and every copy is evaluated on the 10,000 test images
                      afterwards (as in bench/time_to_accuracy.py). Target <= 15 s to 99.0%.
Without CUDA it exits with a message and writes nothing (`--device cpu` runs the same code on the
CPU as a smoke test of this file, not as a GPU measurement).
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from typing import Optional, Sequence

import torch

from ponder import data as D
from ponder.config import TrainConfig
from ponder.evaluate import evaluate
from ponder.models import build_model
from ponder.train import device_name

from . import common
from .throughput import time_project
from .time_to_accuracy import train_with_snapshots

TARGET_ACCURACY = 0.99
TARGET_SECONDS = 15.0


class NoGpu(RuntimeError):
    pass


@dataclass
class GpuConfig:
    device: str = "cuda"
    throughput_batches: Sequence[int] = (128, 512)   # batch sizes for images/s at N = 20 (128 is the target's)
    warm: int = 20            # untimed steps (cuDNN autotuning, allocator)
    steps: int = 200          # timed steps per batch size
    batch_size: int = 128     # time to accuracy: the project's default config ...
    lr: float = 2e-3
    epochs: float = 5.0       # ... trained for this many epochs (onecycle schedule over them)
    max_seconds: Optional[float] = None
    snapshot_every: float = 1.0
    eval_limit: Optional[int] = None
    compile: bool = False     # TrainConfig.compile (torch.compile the model)
    seed: int = 0

    @classmethod
    def quick(cls, **kw) -> "GpuConfig":
        return cls(**{**dict(throughput_batches=(32,), warm=1, steps=2, epochs=0.02, snapshot_every=0.5,
                             eval_limit=500), **kw})


def check_device(device: str) -> None:
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise NoGpu("python -m bench gpu: no CUDA GPU is available here (torch.cuda.is_available() is False, "
                    f"torch {torch.__version__}). Run it on a machine with an NVIDIA GPU; nothing was written.")


def run(cfg: GpuConfig, mnist=None, data_dir: Optional[str] = None, out=None, quick: bool = False) -> dict:
    check_device(cfg.device)
    dev = torch.device(cfg.device)
    if dev.type == "cpu":
        print("note: --device cpu runs this GPU benchmark's code on the CPU (a smoke test, not a GPU figure)",
              file=sys.stderr)
    machine = common.machine_info(cfg.device)
    machine["device_name"] = device_name(dev)
    mnist = mnist if mnist is not None else common.load_mnist(data_dir)

    rows = {}
    for bs in cfg.throughput_batches:
        torch.manual_seed(cfg.seed)
        tcfg = TrainConfig(batch_size=bs, max_steps=20, device=cfg.device, seed=cfg.seed, compile=cfg.compile)
        model = build_model("mnist", tcfg.model_config(), tcfg.max_steps, tcfg.lambda_p)
        secs = time_project(tcfg, mnist, model, cfg.warm, cfg.steps)
        rows[str(bs)] = {"batch_size": bs, "steps": cfg.steps, "seconds": secs,
                         "images_per_s": cfg.steps * bs / secs, "ms_per_step": 1000 * secs / cfg.steps}
        print(f"  batch {bs}: {rows[str(bs)]['images_per_s']:,.0f} train images/s ({rows[str(bs)]['ms_per_step']:.2f} ms/step)")

    tcfg = TrainConfig.for_task("mnist", batch_size=cfg.batch_size, lr=cfg.lr, epochs=cfg.epochs,
                                max_seconds=cfg.max_seconds, device=cfg.device, seed=cfg.seed, compile=cfg.compile)
    res, snaps, overhead = train_with_snapshots(tcfg, mnist, cfg.snapshot_every)
    n = cfg.eval_limit or len(mnist.test_y)
    x, y = D.mnist_inputs(mnist.test_x[:n].to(dev)), mnist.test_y[:n].to(dev)
    model = build_model("mnist", tcfg.model_config(), tcfg.max_steps, tcfg.lambda_p).to(dev)
    points = []
    for step, secs, state in snaps:
        model.load_state_dict(state)
        points.append({"step": step, "train_seconds": secs,
                       "test_accuracy": evaluate(model, x, y, "sample", seed=cfg.seed, by_class=False)["accuracy"]})
    final = evaluate(res.model, x, y, "sample", seed=cfg.seed, by_class=False)["accuracy"]
    points.append({"step": res.steps, "train_seconds": res.seconds - overhead, "test_accuracy": final, "final": True})
    hit = next((p for p in points if p["test_accuracy"] >= TARGET_ACCURACY), None)
    results = {
        "throughput": rows,
        "images_per_s_batch128": rows.get("128", {}).get("images_per_s"),
        "time_to_accuracy": {
            "target_accuracy": TARGET_ACCURACY, "target_seconds": TARGET_SECONDS, "reached": hit is not None,
            "seconds_to_target": hit["train_seconds"] if hit else None, "step_at_target": hit["step"] if hit else None,
            "met": hit is not None and hit["train_seconds"] <= TARGET_SECONDS, "final_accuracy": final,
            "train_seconds": res.seconds, "steps": res.steps, "status": res.status, "reason": res.reason,
            "snapshot_overhead_seconds": overhead, "train_config": tcfg.to_dict(), "curve": points,
        },
    }
    common.print_table(["step", "train s", "test accuracy"],
                       [[p["step"], p["train_seconds"], f"{p['test_accuracy']:.4f}"] for p in points],
                       title=f"Test accuracy during training on {machine['device_name']}")
    print(f"{'reached' if hit else 'did not reach'} {TARGET_ACCURACY:.1%}"
          + (f" after {hit['train_seconds']:.1f} s of training (target <= {TARGET_SECONDS:g} s)" if hit else f" (final {final:.4f})"))
    return common.write_result("gpu", out, quick, machine, cfg, results)


def history_summary(run_dir=None, target: float = TARGET_ACCURACY) -> Optional[dict]:
    """What the shipped assets/mnist-default training history shows (validation, not test):
    the first epoch-end validation at or above `target`, read from its metrics.jsonl and run.json."""
    from ponder.card import CheckpointError, read_card, read_history
    run_dir = run_dir or (common.ASSETS / "mnist-default")
    try:
        card, hist = read_card(run_dir), read_history(run_dir)
    except CheckpointError:
        return None
    vals = [h for h in hist if h.get("val_accuracy") is not None]
    hit = next((h for h in vals if h["val_accuracy"] >= target), None)
    before = [h for h in vals if hit is not None and h["step"] < hit["step"]]
    last = hist[-1] if hist else {}
    tr = card.get("train", {})
    return {
        "run": run_dir.name, "device": card.get("device"), "created": card.get("created"),
        "train_seconds": card.get("train_seconds"), "steps": card.get("steps"),
        "batch_size": tr.get("batch_size"), "epochs": tr.get("epochs"), "max_steps": card.get("max_steps"),
        "test_accuracy": card.get("metrics", {}).get("test", {}).get("accuracy"),
        "target": target,
        "first_val_at_target": {"step": hit["step"], "epoch": hit["epoch"], "elapsed": hit["elapsed"],
                                "val_accuracy": hit["val_accuracy"]} if hit else None,
        "previous_val": {"step": before[-1]["step"], "elapsed": before[-1]["elapsed"],
                         "val_accuracy": before[-1]["val_accuracy"]} if before else None,
        "val_points": [{"epoch": h["epoch"], "elapsed": h["elapsed"], "val_accuracy": h["val_accuracy"]} for h in vals],
        "images_per_s": (last["step"] * tr["batch_size"] / last["elapsed"]) if last.get("elapsed") and tr.get("batch_size") else None,
    }
