"""python -m ponder reproduce: retrain (or re-evaluate) the shipped models and write results.

Writes OUT/results.json and OUT/results.md; retrained models go to OUT/models/<name>/
(copy them to assets/ to ship them). --quick uses small settings that finish in under
5 minutes on 2 CPU cores, and says so in its output.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import torch

from . import data as D
from .card import read_card, update_card
from .checkpoint import load_checkpoint, save_run
from .config import PARITY_PRESETS, TrainConfig
from .evaluate import evaluate_mnist, evaluate_parity
from .train import device_name, pick_device, train

ASSETS = Path(__file__).resolve().parent.parent / "assets"
FIXED_ANGLES = (0, 22.5, 45, 67.5, 90, 135, 180)
UNIFORM_RANGES = (22.5, 45, 67.5, 90)
SWEEP = (0.1, 0.2, 0.3, 0.5, 0.7, 0.9)


@dataclass
class Spec:
    name: str                      # folder name under assets/ (or OUT/models/)
    config: dict                   # TrainConfig fields
    quick: dict = field(default_factory=dict)    # overrides for --quick
    role: str = ""                 # default / rotation / sweep / parity


def specs(gpu: bool) -> list:
    """The shipped models. On a GPU the parity models use the paper's settings."""
    out = [
        Spec("mnist-default", dict(task="mnist", lambda_p=0.2, beta=0.01, max_steps=20, epochs=8, batch_size=128),
             dict(epochs=1.0, max_seconds=45), "default"),
        Spec("mnist-rot22", dict(task="mnist", lambda_p=0.2, beta=0.01, max_steps=20, epochs=10, rotate_train=22.5),
             dict(epochs=1.0, max_seconds=45), "rotation"),
    ]
    for lp in SWEEP:
        out.append(Spec(f"sweep-lp{lp:g}", dict(task="mnist", lambda_p=lp, beta=0.01, max_steps=20, epochs=3),
                        dict(epochs=0.25, max_seconds=10), "sweep"))
    if gpu:
        out.append(Spec("parity-paper", dict(task="parity", parity_preset="paper", hidden=128, lr=3e-4,
                                              batch_size=256, epochs=40, steps_per_epoch=1000, max_seconds=400,
                                              lr_schedule="constant"), {}, "parity"))
        out.append(Spec("parity-extrapolation", dict(task="parity", parity_preset="extrapolation", hidden=128,
                                                      lr=3e-4, batch_size=256, epochs=40, steps_per_epoch=1000,
                                                      max_seconds=400, lr_schedule="constant"), {}, "parity"))
    else:
        out.append(Spec("parity-small", dict(task="parity", parity_preset="small", hidden=128, lr=3e-3, epochs=8),
                        dict(epochs=3.0, max_seconds=35), "parity"))
    return out


def evaluate_spec(model, card: dict, mnist: Optional[D.Mnist], quick: bool) -> dict:
    limit = 2000 if quick else None
    if card["task"] == "parity":
        return evaluate_parity(model, PARITY_PRESETS[card["train"]["parity_preset"]], "sample",
                               size=2000 if quick else 10000)
    rot = card["train"].get("rotate_train", 0) > 0
    res = {"sample": evaluate_mnist(model, mnist, "sample", limit=limit,
                                    rotations=FIXED_ANGLES if rot else (),
                                    uniform_rotations=UNIFORM_RANGES if rot else ())}
    for mode in ("deterministic", "expected"):
        r = evaluate_mnist(model, mnist, mode, limit=limit)
        res[mode] = {k: r[k] for k in ("accuracy", "mean_steps", "median_steps", "std_steps")}
    out = res["sample"]
    out["modes"] = {m: res[m] if m != "sample" else {k: out[k] for k in ("accuracy", "mean_steps", "median_steps", "std_steps")}
                    for m in ("sample", "deterministic", "expected")}
    return out


def run(quick: bool = False, from_assets: bool = False, out: str = "results", data_dir: Optional[str] = None,
        device: str = "auto", only: Optional[list] = None, log=print) -> int:
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    dev = pick_device(device)
    gpu = dev.type == "cuda"
    if quick:
        log("QUICK MODE: small settings (short training, 2,000-image test subsets). "
            "These numbers are not the shipped models' numbers.")
    mnist = D.load_mnist(data_dir)
    results = {"quick": quick, "from_assets": from_assets, "device": str(dev),
               "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "models": {}}
    todo = specs(gpu)
    if from_assets:
        todo = [Spec(p.name, {}, role=_role(p.name)) for p in sorted(ASSETS.iterdir()) if (p / "run.json").exists()]
    if only:
        todo = [s for s in todo if s.name in only]
    for spec in todo:
        t0 = time.perf_counter()
        if from_assets:
            ck = load_checkpoint(ASSETS / spec.name, device=dev)
            model, card = ck.model, ck.card
            log(f"[{spec.name}] loaded from assets")
        else:
            cfg = dict(spec.config, device=device, log_every=50)
            if quick:
                cfg.update(spec.quick)
            tc = TrainConfig(**cfg).validate()
            log(f"[{spec.name}] training {tc.task} lambda_p={tc.lambda_p} N={tc.max_steps} on {dev} ...")
            res = train(tc, mnist=mnist if tc.task == "mnist" else None)
            model = res.model
            run_dir = save_run(out_dir / "models" / spec.name, model, tc, status=res.status, reason=res.reason,
                               device=device_name(dev), train_seconds=res.seconds, steps=res.steps,
                               history=res.history)
            card = json.loads((run_dir / "run.json").read_text())
            log(f"[{spec.name}] {res.status} after {res.steps} steps, {res.seconds:.1f} s {res.reason}")
        metrics = evaluate_spec(model, card, mnist, quick)
        card_metrics = {"test": {k: v for k, v in metrics.items() if k not in ("by_class", "by_k")},
                        "measured_on": device_name(dev), "quick": quick}
        if not from_assets:
            update_card(out_dir / "models" / spec.name, metrics=card_metrics)
        elif not quick:
            update_card(ASSETS / spec.name, metrics=card_metrics)
        results["models"][spec.name] = {"role": spec.role or _role(spec.name), "status": card["status"],
                                        "reason": card.get("reason", ""), "train": card["train"],
                                        "train_seconds": card.get("train_seconds"), "device": card.get("device"),
                                        "lambda_p": card["lambda_p"], "max_steps": card["max_steps"],
                                        "metrics": metrics, "eval_seconds": round(time.perf_counter() - t0, 1)}
        log(f"[{spec.name}] accuracy {metrics['accuracy']:.4f}, mean steps {metrics['mean_steps']:.2f}")
    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    (out_dir / "results.md").write_text(results_markdown(results))
    log(f"wrote {out_dir / 'results.md'} and {out_dir / 'results.json'}")
    return 0


def _role(name: str) -> str:
    for prefix, role in (("mnist-default", "default"), ("mnist-rot", "rotation"), ("sweep", "sweep"), ("parity", "parity")):
        if name.startswith(prefix):
            return role
    return ""


def results_markdown(r: dict) -> str:
    """Tables for README/results.md from results.json."""
    lines = [f"# Results ({'QUICK settings, not the shipped models' if r['quick'] else 'full settings'})",
             "", f"Device: {r['device']}, torch {r['torch']}, {r['date']}.", ""]
    models = r["models"]
    for name, m in models.items():
        if m["role"] != "default":
            continue
        t = m["metrics"]
        lines += [f"## MNIST default model `{name}` (lambda_p={m['lambda_p']}, N={m['max_steps']})", "",
                  "| mode | test accuracy | mean steps | median | std |", "|---|---|---|---|---|"]
        for mode, v in t.get("modes", {}).items():
            lines.append(f"| {mode} | {v['accuracy']:.4f} | {v['mean_steps']:.2f} | {v['median_steps']:.0f} | {v['std_steps']:.2f} |")
        lines += ["", "| step n | learned p_n | prior p_G(n) | accuracy if stopped at n |", "|---|---|---|---|"]
        for n, (p, q, a) in enumerate(zip(t["halting_distribution"], t["prior"], t["per_step_accuracy"]), 1):
            if n <= 10 or p > 0.005:
                lines.append(f"| {n} | {p:.4f} | {q:.4f} | {a:.4f} |")
        lines.append("")
    for name, m in models.items():
        if m["role"] != "rotation":
            continue
        t = m["metrics"]
        lines += [f"## Rotation study `{name}` (trained on U(+-{m['train']['rotate_train']:g}) deg)", "",
                  "| test rotation | accuracy | mean steps | median | std |", "|---|---|---|---|---|"]
        for row in t.get("rotations", []):
            lines.append(f"| fixed {row['angle']:g} deg | {row['accuracy']:.4f} | {row['mean_steps']:.2f} | "
                         f"{row['median_steps']:.0f} | {row['std_steps']:.2f} |")
        for row in t.get("uniform_rotations", []):
            lines.append(f"| uniform +-{row['angle']:g} deg | {row['accuracy']:.4f} | {row['mean_steps']:.2f} | "
                         f"{row['median_steps']:.0f} | {row['std_steps']:.2f} |")
        fixed = t.get("rotations", [])
        if len(fixed) >= 2:
            lines += ["", steps_vs_angle_sentence(fixed), ""]
    sweep = [(n, m) for n, m in models.items() if m["role"] == "sweep"]
    if sweep:
        lines += ["## lambda_p sweep", "",
                  "| lambda_p | 1/lambda_p | prior mean, truncated at N | mean steps (sampled) | E[n] under learned p | accuracy | status |",
                  "|---|---|---|---|---|---|---|"]
        for name, m in sorted(sweep, key=lambda nm: nm[1]["lambda_p"]):
            t = m["metrics"]
            prior_mean = sum(n * q for n, q in enumerate(t["prior"], 1))
            status = m["status"] + (f" ({m['reason']})" if m["status"] == "failed" else "")
            lines.append(f"| {m['lambda_p']:g} | {1 / m['lambda_p']:.2f} | {prior_mean:.2f} | {t['mean_steps']:.2f} | "
                         f"{t['expected_steps']:.2f} | {t['accuracy']:.4f} | {status} |")
        failed = [n for n, m in sweep if m["status"] == "failed"]
        lines += ["", f"Failed runs: {', '.join(failed) if failed else 'none (every run finished with a finite loss)'}.", ""]
    for name, m in models.items():
        if m["role"] != "parity":
            continue
        t = m["metrics"]
        p = m["train"]["parity_preset"]
        lines += [f"## Parity `{name}` (preset {p}: n={PARITY_PRESETS[p]['n_elems']}, trained on k in "
                  f"{list(PARITY_PRESETS[p]['train_k'])}, tested on k in {t['test_k']})", "",
                  "| set | k range | accuracy | mean steps |", "|---|---|---|---|",
                  f"| all | {t['test_k']} | {t['accuracy']:.4f} | {t['mean_steps']:.2f} |"]
        for k in ("easy", "hard"):
            lines.append(f"| {k} | {t[k]['k_range']} | {t[k]['accuracy']:.4f} | {t[k]['mean_steps']:.2f} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def steps_vs_angle_sentence(rows: list) -> str:
    """Say, from the numbers, whether halting steps grow with the rotation angle."""
    a0, a1 = rows[0], max(rows, key=lambda r: r["angle"])
    grow = a1["mean_steps"] - a0["mean_steps"]
    spread = max(a0["std_steps"], 1e-9)
    if abs(grow) < 0.25 * spread:
        verdict = "stay about flat"
    elif grow > 0:
        verdict = "grow"
    else:
        verdict = "shrink"
    return (f"Mean halting steps {verdict} with the angle: {a0['mean_steps']:.2f} at {a0['angle']:g} deg vs "
            f"{a1['mean_steps']:.2f} at {a1['angle']:g} deg (std at 0 deg {a0['std_steps']:.2f}), while accuracy "
            f"goes from {a0['accuracy']:.3f} to {a1['accuracy']:.3f}.")
