"""Benchmark 5 (GPU only): ponder.training.loop.train's two ways to run a step, side by side in one process.

    side by side      MNIST, N = 20, batch 128 / 512 / 2048: train images per second of
                      eager  TrainConfig.cuda_graph = False: forward, backward, clipping and the fused
                             Adam launched kernel by kernel every step (still no per-step host sync)
                      graph  the default: on CUDA the whole step captured in a CUDA graph and replayed
                      each through the same harness (bench/throughput.time_train: `warm` untimed
                      steps, then `steps` timed ones, the clock read after a device sync); eager and
                      graph alternate for `rounds` rounds and each keeps its fastest round.
    parity            ms per step, eager and graph, at parity vector length n = 15 and n = 64 (GRU 128,
                      batch 1024, N = 20, the settings of bench/train_parity_gpu.sh).
    time to accuracy  the default (graph) step with `batch_size`, `lr`, `epochs`; the weights are copied (on the GPU)
                      every `snapshot_every` seconds of training from the train callback, the copies'
                      time is subtracted, and every copy is evaluated on the 10,000 test images
                      afterwards (as in bench/time_to_accuracy.py).
Targets (one H100): time to 99.0% test accuracy <= 2 s of training; parity n = 15, batch 1024:
<= 2 ms per step (graph). The graph / eager ratio is what capturing the step buys, with no target.
Without CUDA it exits with a message and writes nothing (`--device cpu` runs the same code on the
CPU as a smoke test of this file, not as a GPU measurement).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Optional, Sequence

import torch

from ponder import data as D
from ponder.analysis.unroll import evaluate
from ponder.config import TrainConfig
from ponder.tasks import build_model, model_config, train_config
from ponder.tasks.parity.task import PARITY_PRESETS
from ponder.training.loop import device_name

from . import common
from .throughput import time_train
from .time_to_accuracy import train_with_snapshots

TARGET_ACCURACY = 0.99
TARGET_SECONDS = 2.0              # of training to TARGET_ACCURACY, graph step (stretch 1 s)
TARGET_PARITY_MS = 2.0            # graph step, parity n = 15, batch 1024, ms per step
LOOPS = {"eager": dict(cuda_graph=False), "graph": dict(cuda_graph=True)}   # the TrainConfig each side trains with


class NoGpu(RuntimeError):
    pass


@dataclass
class GpuConfig:
    device: str = "cuda"
    throughput_batches: Sequence[int] = (128, 512, 2048)   # batch sizes for images/s at N = 20
    warm: int = 20            # untimed steps (cuDNN autotuning, allocator, the CUDA graph's capture)
    steps: int = 200          # timed steps per loop, batch size and round
    rounds: int = 2           # eager and graph alternate; each keeps its fastest round
    parity_sizes: Sequence[int] = (15, 64)   # parity vector lengths n
    parity_batch: int = 1024
    parity_hidden: int = 128
    parity_steps: int = 200   # timed parity steps per loop and size (after `warm`)
    batch_size: int = 128     # time to accuracy: the project's default config ...
    lr: float = 2e-3
    epochs: float = 5.0       # ... trained for this many epochs (onecycle schedule over them)
    max_seconds: Optional[float] = None
    snapshot_every: float = 0.25
    eval_limit: Optional[int] = None
    compile: bool = False     # TrainConfig.compile (torch.compile the model; both sides then step eagerly)
    seed: int = 0

    @classmethod
    def quick(cls, **kw) -> "GpuConfig":
        return cls(**{**dict(throughput_batches=(32,), warm=2, steps=2, rounds=1, parity_sizes=(15,), parity_batch=32,
                             parity_hidden=16, parity_steps=2, epochs=0.02, snapshot_every=0.5, eval_limit=500), **kw})


def check_device(device: str) -> None:
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise NoGpu("python -m bench gpu: no CUDA GPU is available here (torch.cuda.is_available() is False, "
                    f"torch {torch.__version__}). Run it on a machine with an NVIDIA GPU; nothing was written.")


def parity_preset(n: int) -> str:
    """The parity preset with vector length n and k drawn from 1..n; registers a bench-only one
    (in this process's PARITY_PRESETS) where the project has none, e.g. n = 15."""
    for name, p in PARITY_PRESETS.items():
        if p["n_elems"] == n and tuple(p["train_k"]) == (1, n):
            return name
    name = f"bench-n{n}"
    PARITY_PRESETS[name] = dict(n_elems=n, train_k=(1, n), test_k=(1, n))
    return name


def side_by_side(make_cfg, keys, warm: int, steps: int, rounds: int, mnist=None) -> dict:
    """{loop: {key: row}} for loop eager / graph, alternating the two, each key keeping its fastest round."""
    rows = {loop: {} for loop in LOOPS}
    for rnd in range(rounds):
        for key in keys:
            for loop, fields in LOOPS.items():
                tcfg = replace(make_cfg(key), **fields)
                torch.manual_seed(tcfg.seed)
                model = build_model(tcfg.task, model_config(tcfg), tcfg.max_steps, tcfg.lambda_p)
                secs, res = time_train(tcfg, mnist, model, warm, steps)
                row = {"batch_size": tcfg.batch_size, "steps": steps, "seconds": secs, "round": rnd,
                       "images_per_s": steps * tcfg.batch_size / secs, "ms_per_step": 1000 * secs / steps,
                       "step_mode": getattr(res, "step_mode", "eager"), "step_mode_reason": getattr(res, "step_mode_reason", "")}
                best = rows[loop].get(str(key))
                if best is None or row["seconds"] < best["seconds"]:
                    rows[loop][str(key)] = row
                print(f"  round {rnd + 1}/{rounds} {loop} {key}: {row['ms_per_step']:.2f} ms/step, "
                      f"{row['images_per_s']:,.0f} items/s ({row['step_mode']})")
    return rows


def run(cfg: GpuConfig, mnist=None, data_dir: Optional[str] = None, out=None, quick: bool = False) -> dict:
    check_device(cfg.device)
    dev = torch.device(cfg.device)
    if dev.type == "cpu":
        print("note: --device cpu runs this GPU benchmark's code on the CPU (a smoke test, not a GPU figure)",
              file=sys.stderr)
    machine = common.machine_info(cfg.device)
    machine["device_name"] = device_name(dev)
    mnist = mnist if mnist is not None else common.load_mnist(data_dir)

    # MNIST, N = 20: eager and graph steps, images per second by batch size
    mn = side_by_side(lambda bs: TrainConfig(batch_size=bs, max_steps=20, device=cfg.device, seed=cfg.seed,
                                             compile=cfg.compile),
                      cfg.throughput_batches, cfg.warm, cfg.steps, cfg.rounds, mnist=mnist)
    keys = [str(b) for b in cfg.throughput_batches]
    speedup = {k: mn["graph"][k]["images_per_s"] / mn["eager"][k]["images_per_s"] for k in keys}
    sbs = {loop: {"loop": f"ponder.training.loop.train, cuda_graph={LOOPS[loop]['cuda_graph']}",
                  "images_per_s": {k: mn[loop][k]["images_per_s"] for k in keys},
                  "ms_per_step": {k: mn[loop][k]["ms_per_step"] for k in keys},
                  "step_mode": {k: mn[loop][k]["step_mode"] for k in keys},
                  "step_mode_reason": {k: mn[loop][k]["step_mode_reason"] for k in keys}} for loop in LOOPS}
    sbs.update(speedup=speedup, speedup_128=speedup.get("128"), rows=mn)

    # parity, GRU 128, batch 1024: ms per step at n = 15 and 64
    def parity_cfg(n):
        return train_config("parity", parity_preset=parity_preset(n), hidden=cfg.parity_hidden,
                                    batch_size=cfg.parity_batch, lr=1e-3, lr_schedule="constant", max_steps=20,
                                    device=cfg.device, seed=cfg.seed, compile=cfg.compile)
    par = side_by_side(parity_cfg, cfg.parity_sizes, cfg.warm, cfg.parity_steps, cfg.rounds)
    pkeys = [str(n) for n in cfg.parity_sizes]
    parity = {
        "batch_size": cfg.parity_batch, "hidden": cfg.parity_hidden, "max_steps": 20,
        "eager_ms_per_step": {k: par["eager"][k]["ms_per_step"] for k in pkeys},
        "graph_ms_per_step": {k: par["graph"][k]["ms_per_step"] for k in pkeys},
        "graph_step_mode": {k: par["graph"][k]["step_mode"] for k in pkeys},
        "target_ms_n15": TARGET_PARITY_MS,
        "met_n15": par["graph"]["15"]["ms_per_step"] <= TARGET_PARITY_MS if "15" in par["graph"] else None,
        "rows": par,
    }

    # time to accuracy, the default (graph) step
    tcfg = train_config("mnist", batch_size=cfg.batch_size, lr=cfg.lr, epochs=cfg.epochs,
                                max_seconds=cfg.max_seconds, device=cfg.device, seed=cfg.seed, compile=cfg.compile)
    res, snaps, overhead = train_with_snapshots(tcfg, mnist, cfg.snapshot_every)
    n = cfg.eval_limit or len(mnist.test_y)
    x, y = D.mnist_inputs(mnist.test_x[:n].to(dev)), mnist.test_y[:n].to(dev)
    model = build_model("mnist", model_config(tcfg), tcfg.max_steps, tcfg.lambda_p).to(dev)
    points = []
    for step, secs, state in snaps:
        model.load_state_dict(state)
        points.append({"step": step, "train_seconds": secs,
                       "test_accuracy": evaluate(model, x, y, "sample", seed=cfg.seed, by_class=False)["accuracy"]})
    final = evaluate(res.model, x, y, "sample", seed=cfg.seed, by_class=False)["accuracy"]
    points.append({"step": res.record.steps, "train_seconds": res.record.train_seconds - overhead, "test_accuracy": final, "final": True})
    hit = next((p for p in points if p["test_accuracy"] >= TARGET_ACCURACY), None)
    results = {
        "side_by_side": sbs,
        "parity": parity,
        "throughput": mn["graph"],                                   # the default step's rows
        "images_per_s_batch128": mn["graph"].get("128", {}).get("images_per_s"),
        "time_to_accuracy": {
            "target_accuracy": TARGET_ACCURACY, "target_seconds": TARGET_SECONDS, "reached": hit is not None,
            "seconds_to_target": hit["train_seconds"] if hit else None, "step_at_target": hit["step"] if hit else None,
            "met": hit is not None and hit["train_seconds"] <= TARGET_SECONDS, "final_accuracy": final,
            "train_seconds": res.record.train_seconds, "steps": res.record.steps, "status": res.record.status, "reason": res.record.reason,
            "step_mode": res.step_mode, "step_mode_reason": res.step_mode_reason,
            "snapshot_overhead_seconds": overhead, "train_config": tcfg.to_dict(), "curve": points,
        },
    }
    common.print_table(["batch", "eager ms/step", "graph ms/step", "eager images/s", "graph images/s", "graph / eager"],
                       [[k, mn["eager"][k]["ms_per_step"], mn["graph"][k]["ms_per_step"], mn["eager"][k]["images_per_s"],
                         mn["graph"][k]["images_per_s"], speedup[k]] for k in keys],
                       title=f"MNIST training, N = 20, eager and graph steps on {machine['device_name']}")
    common.print_table(["parity n", "eager ms/step", "graph ms/step"],
                       [[k, parity["eager_ms_per_step"][k], parity["graph_ms_per_step"][k]] for k in pkeys],
                       title=f"Parity, hidden {cfg.parity_hidden}, batch {cfg.parity_batch}, N = 20")
    common.print_table(["step", "train s", "test accuracy"],
                       [[p["step"], p["train_seconds"], f"{p['test_accuracy']:.4f}"] for p in points],
                       title=f"Test accuracy during training ({res.step_mode} step) on {machine['device_name']}")
    print(f"{'reached' if hit else 'did not reach'} {TARGET_ACCURACY:.1%}"
          + (f" after {hit['train_seconds']:.2f} s of training (target <= {TARGET_SECONDS:g} s)" if hit else f" (final {final:.4f})"))
    return common.write_result("gpu", out, quick, machine, cfg, results)


def history_summary(run_dir=None, target: float = TARGET_ACCURACY) -> Optional[dict]:
    """What the shipped assets/mnist-default training history shows (validation, not test):
    the first epoch-end validation at or above `target`, read from its metrics.jsonl and run.json."""
    from ponder.store.card import CheckpointError, read_card, read_history
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
        "batch_size": tr.get("batch_size"), "epochs": tr.get("epochs"), "max_steps": tr.get("max_steps"),
        "test_accuracy": card.get("metrics", {}).get("test", {}).get("accuracy"),
        "target": target,
        "first_val_at_target": {"step": hit["step"], "epoch": hit["epoch"], "elapsed": hit["elapsed"],
                                "val_accuracy": hit["val_accuracy"]} if hit else None,
        "previous_val": {"step": before[-1]["step"], "elapsed": before[-1]["elapsed"],
                         "val_accuracy": before[-1]["val_accuracy"]} if before else None,
        "val_points": [{"epoch": h["epoch"], "elapsed": h["elapsed"], "val_accuracy": h["val_accuracy"]} for h in vals],
        "images_per_s": (last["step"] * tr["batch_size"] / last["elapsed"]) if last.get("elapsed") and tr.get("batch_size") else None,
    }
