"""python -m ponder reproduce: retrain (or re-evaluate) the shipped models and write results.

Writes OUT/results.json and OUT/results.md; retrained models go to OUT/models/<name>/ (copy them to assets/ to ship
them). --quick uses small settings that finish in under 5 minutes on 2 CPU cores, and says so in its output."""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

import torch

from .. import data as D
from ..training import lifecycle
from ..analysis.metrics import TestMetrics
from ..analysis.pays import marks, pays
from ..analysis.studies import prior_mean, rotation_study, rotation_verdict
from ..analysis.unroll import measure_test
from ..store import card as C, checkpoint
from .results_worth import table, worth_section
from ..config import ConfigError, TrainConfig
from ..tasks import get_task, validate
from ..sweeps.study import load_studies
from .results_ladder import ladder_section, load_ladder
from .results_studies import load_think, studies_section, think_section
from ..training.loop import device_name, pick_device

ASSETS = Path(__file__).resolve().parents[2] / "assets"
STUDIES = Path(__file__).resolve().parents[2] / "docs" / "studies"   # `python -m ponder study DIR --to` writes these
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
        # evidence grows with the steps: the first 2n image rows at step n (docs/findings.md §2, "Digits that make it
        # think"); β 0.02 prices each step enough to halt ~1 step sooner than β 0.01 at the same accuracy (§8)
        Spec("mnist-adaptive", dict(task="mnist", reader="rows", rows_per_step=2, lambda_p=0.5, beta=0.02,
                                    max_steps=20, epochs=6), dict(epochs=1.0, max_seconds=45), "adaptive"),
    ]
    for lp in SWEEP:
        out.append(Spec(f"sweep-lp{lp:g}", dict(task="mnist", lambda_p=lp, beta=0.01, max_steps=20, epochs=3),
                        dict(epochs=0.25, max_seconds=10), "sweep"))
    # the shipped parity models, the reverse KL, batch 1024, a constant learning rate: the video seed's n = 15 (easy k
    # 1-4, hard 11-15) with a narrow cell (hidden 32) at λp 0.5, 20,000 steps (~500-700 s on one CPU core), whose
    # hard vectors need their extra steps (docs/findings.md §8), and its n = 30 extrapolation (trained on k <= 25),
    # 40,000 steps (~5,900 s on one CPU core; at batch 128 it stayed at chance on the unseen k 26-30; §5)
    parity = dict(task="parity", regulariser="kl-reverse", beta=0.01, hidden=128, batch_size=1024, lr=3e-3,
                  epochs=40, steps_per_epoch=1000, lr_schedule="constant")
    out.append(Spec("parity-15", dict(parity, parity_preset="video-15", lambda_p=0.5, hidden=32, epochs=20),
                    dict(epochs=3.0, max_seconds=35, batch_size=128), "parity"))
    out.append(Spec("parity-30-extrapolation", dict(parity, parity_preset="video-30-extrapolation", lambda_p=0.2),
                    dict(epochs=3.0, max_seconds=35, batch_size=128), "parity"))
    if gpu:                        # the paper's settings, attempted on a GPU (not shipped: they did not learn)
        out.append(Spec("parity-paper", dict(task="parity", parity_preset="paper", hidden=128, lr=3e-4,
                                              batch_size=256, epochs=40, steps_per_epoch=1000, max_seconds=400,
                                              lr_schedule="constant"), {}, "parity"))
        out.append(Spec("parity-extrapolation", dict(task="parity", parity_preset="extrapolation", hidden=128,
                                                      lr=3e-4, batch_size=256, epochs=40, steps_per_epoch=1000,
                                                      max_seconds=400, lr_schedule="constant"), {}, "parity"))
    return out


def evaluate_spec(model, cfg: TrainConfig, mnist: Optional[D.Mnist], quick: bool) -> TestMetrics:
    """Full test metrics of one model (ponder.analysis.unroll.measure_test): 'sample' mode, its task's groups
    (digit class; parity's easy / hard and by k), plus the other two modes and, for an image model trained on
    rotations or reading a growing part of the image, the rotation study."""
    limit = 2000 if quick else None
    out = measure_test(model, cfg, mnist, limit)
    out.modes = {"sample": halting_steps(out)}
    for mode in ("deterministic", "expected"):
        out.modes[mode] = halting_steps(measure_test(model, cfg, mnist, limit, mode))
    images = get_task(cfg.task).rotation_inputs(mnist, limit)
    if images is not None:
        rot = cfg.rotate_train > 0
        grows = cfg.reader != "cnn"                                 # does E[n] rise with the angle?
        rows = rotation_study(model, *images, FIXED_ANGLES if rot or grows else (), UNIFORM_RANGES if rot else ())
        out.rotations = [r for r in rows if r["kind"] == "fixed"]
        out.uniform_rotations = [r for r in rows if r["kind"] == "uniform"]
    return out


def halting_steps(m: TestMetrics) -> TestMetrics:
    """A mode's row of a measurement: its accuracy and halting steps (mean, median, std)."""
    return TestMetrics(accuracy=m.accuracy, mean_steps=m.mean_steps, median_steps=m.median_steps,
                       std_steps=m.std_steps)


def run(quick: bool = False, from_assets: bool = False, out: str = "results", data_dir: Optional[str] = None,
        device: str = "auto", only: Optional[list] = None, log=print) -> int:
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    dev = pick_device(device)
    gpu = dev.type == "cuda"
    if quick:
        log("QUICK MODE: small settings (short training, 2,000-image test subsets). "
            "These numbers are not the shipped models' numbers.")
    todo = specs(gpu)
    if from_assets:
        todo = [Spec(p.name, {}, role=_role(p.name)) for p in sorted(ASSETS.iterdir()) if (p / "run.json").exists()]
    if only is not None:
        unknown = sorted(set(only) - {s.name for s in todo})
        if unknown or not only:
            raise ConfigError(f"--only: {', '.join(map(repr, unknown)) or 'no name given'} is not a model "
                             f"{'in assets/' if from_assets else 'reproduce trains'}; known: "
                             f"{', '.join(s.name for s in todo)}")
        todo = [s for s in todo if s.name in only]
    mnist = D.load_mnist(data_dir)
    results = {"quick": quick, "from_assets": from_assets, "device": str(dev),
               "date": time.strftime("%Y-%m-%d"), "torch": torch.__version__, "models": {}}
    for spec in todo:
        t0 = time.perf_counter()
        if from_assets:
            ck = checkpoint.load_checkpoint(ASSETS / spec.name, device=dev)
            record = ck.record
            log(f"[{spec.name}] loaded from assets")
            metrics = evaluate_spec(ck.model, record.config, mnist, quick)
            if not quick:
                C.update_card(ASSETS / spec.name, metrics=lifecycle.card_metrics(metrics, measured_on=device_name(dev)))
        else:
            tc = validate(TrainConfig(**dict(spec.config, device=device, log_every=50, **(spec.quick if quick else {}))))
            log(f"[{spec.name}] training {tc.task} lambda_p={tc.lambda_p} N={tc.max_steps} on {dev} ...")
            done = lifecycle.run(tc, out_dir / "models" / spec.name, load_data=lambda: mnist,
                                 measure_fn=lambda model, _: evaluate_spec(model, tc, mnist, quick))
            record, metrics = done.record.completed(reason=done.reason), done.metrics
            log(f"[{spec.name}] {record.status} after {record.steps} steps, {record.train_seconds:.1f} s {done.reason}")
            if metrics is None:
                log(f"[{spec.name}] not measured: {done.reason}")
                continue
        results["models"][spec.name] = {"role": spec.role or _role(spec.name), "status": record.status,
                                        "reason": record.reason, "train": record.train,
                                        "train_seconds": record.train_seconds, "device": record.device,
                                        "lambda_p": record.lambda_p, "max_steps": record.max_steps,
                                        "metrics": metrics.to_dict(), "eval_seconds": round(time.perf_counter() - t0, 1)}
        log(f"[{spec.name}] accuracy {metrics.accuracy:.4f}, mean steps {metrics.mean_steps:.2f}")
    results["studies"], results["think"] = load_studies(STUDIES), load_think(STUDIES)
    results["ladder"] = load_ladder(STUDIES)
    (out_dir / "results.json").write_text(json.dumps(results, indent=1))
    (out_dir / "results.md").write_text(results_markdown(results))
    log(f"wrote {out_dir / 'results.md'} and {out_dir / 'results.json'}")
    return 0


def _role(name: str) -> str:
    for prefix, role in (("mnist-default", "default"), ("mnist-adaptive", "adaptive"), ("mnist-rot", "rotation"),
                         ("sweep", "sweep"), ("parity", "parity")):
        if name.startswith(prefix):
            return role
    return ""


def stats_cells(r: TestMetrics, expected: bool = False) -> str:
    """'accuracy | mean | median | std' table cells. In 'expected' mode every sample runs all N steps
    and the steps are E[n], a real number: its median keeps two decimals."""
    median = f"{r.median_steps:.2f}" if expected else f"{r.median_steps:.0f}"
    return f"{r.accuracy:.4f} | {r.mean_steps:.2f} | {median} | {r.std_steps:.2f}"


def default_section(name: str, m: dict) -> list:
    t = TestMetrics.from_dict(m["metrics"])
    lines = table(f"MNIST default model `{name}` (lambda_p={m['lambda_p']}, N={m['max_steps']})",
                  "| mode | test accuracy | mean steps | median | std |")
    for mode, v in (t.modes or {}).items():
        label = f"expected (steps run: {m['max_steps']} (all); expected steps E[n])" if mode == "expected" else mode
        lines.append(f"| {label} | {stats_cells(v, mode == 'expected')} |")
    lines += ["", "| step n | learned p_n | prior p_G(n) | accuracy if stopped at n |", "|---|---|---|---|"]
    for n, (p, q, a) in enumerate(zip(t.halting_distribution, t.prior, t.per_step_accuracy), 1):
        if n <= 10 or p > 0.005:
            lines.append(f"| {n} | {p:.4f} | {q:.4f} | {a:.4f} |")
    return lines + [""]


def adaptive_section(name: str, m: dict) -> list:
    """A model whose evidence grows with the steps: the default tables, then E[n] per input."""
    t, tr = TestMetrics.from_dict(m["metrics"]), m["train"]
    lines = default_section(name, m)
    lines[0] = (f"## MNIST adaptive model `{name}` (reader {tr.get('reader')}, {tr.get('rows_per_step')} rows a step, "
                f"lambda_p={m['lambda_p']}, N={m['max_steps']})")
    en, bc = t.expected_steps, t.by_correctness
    lines += [f"E[n] per test digit: mean {en['mean']:.2f}, std {en['std']:.2f}, min {en['min']:.2f}, max {en['max']:.2f}; "
              f"right answers ({bc['correct']['count']}) {bc['correct']['expected_steps']:.2f}, wrong answers "
              f"({bc['wrong']['count']}) {bc['wrong']['expected_steps']:.2f}.", "",
              "| digit | " + " | ".join(str(c["label"]) for c in t.by_class) + " |",
              "|---|" + "---|" * len(t.by_class),
              "| E[n] | " + " | ".join(f"{c['expected_steps']:.2f}" for c in t.by_class) + " |", ""]
    if t.rotations:
        lines += ["| test rotation | " + " | ".join(f"{r['angle']:g} deg" for r in t.rotations) + " |",
                  "|---|" + "---|" * len(t.rotations),
                  "| accuracy | " + " | ".join(f"{r['accuracy']:.4f}" for r in t.rotations) + " |",
                  "| E[n] | " + " | ".join(f"{r['expected_steps']:.2f}" for r in t.rotations) + " |", ""]
    return lines


def rotation_section(name: str, m: dict) -> list:
    t = TestMetrics.from_dict(m["metrics"])
    lines = table(f"Rotation study `{name}` (trained on U(+-{m['train']['rotate_train']:g}) deg)",
                  "| test rotation | accuracy | mean steps | median | std |")
    for row in (t.rotations or []) + (t.uniform_rotations or []):
        label = f"fixed {row['angle']:g} deg" if row["kind"] == "fixed" else f"uniform +-{row['angle']:g} deg"
        lines.append(f"| {label} | {stats_cells(TestMetrics.from_dict(row))} |")
    fixed = t.rotations or []
    return lines + (["", rotation_verdict(fixed)[1], ""] if len(fixed) >= 2 else [])


def results_markdown(r: dict) -> str:
    """Tables for results.md from results.json."""
    lines = [f"# Results ({'QUICK settings, not the shipped models' if r['quick'] else 'full settings'})",
             "", f"Device: {r['device']}, torch {r['torch']}, {r['date']}.", ""]
    if r.get("notes"):                       # models re-measured later, on their own (reproduce --only)
        lines += [f"Notes: {r['notes']}.", ""]
    models = r["models"]
    for role, section in (("default", default_section), ("adaptive", adaptive_section), ("rotation", rotation_section)):
        for name, m in models.items():
            if m["role"] == role:
                lines += section(name, m)
    sweep = [(n, m) for n, m in models.items() if m["role"] == "sweep"]
    if sweep:
        lines += ["## lambda_p sweep", "",
                  "| lambda_p | 1/lambda_p | prior mean, truncated at N | mean steps (sampled) | E[n] under learned p | accuracy | status |",
                  "|---|---|---|---|---|---|---|"]
        for name, m in sorted(sweep, key=lambda nm: nm[1]["lambda_p"]):
            t = TestMetrics.from_dict(m["metrics"])
            status = m["status"] + (f" ({m['reason']})" if m["status"] == "failed" else "")
            lines.append(f"| {m['lambda_p']:g} | {1 / m['lambda_p']:.2f} | {prior_mean(m['lambda_p'], m['max_steps']):.2f} | {t.mean_steps:.2f} | "
                         f"{t.mean_expected_steps:.2f} | {t.accuracy:.4f} | {status} |")
        failed = [n for n, m in sweep if m["status"] == "failed"]
        lines += ["", f"Failed runs: {', '.join(failed) if failed else 'none (every run finished with a finite loss)'}.", ""]
    lines += [line for name, m in models.items() if "by_k" in m["metrics"] for line in parity_section(name, m)]
    lines += worth_section(models)
    lines += marks_section(models)
    lines += studies_section(r.get("studies") or {})
    lines += think_section(r.get("think"))
    lines += ladder_section(r.get("ladder"))
    return "\n".join(lines) + "\n"


def marks_section(models: dict) -> list:
    """The marks each shipped model is held to (ponder.analysis.pays.MARKS), its measured value and whether it
    meets them."""
    rows = [(n, mk) for n, m in models.items() for mk in marks(n, pays(TestMetrics.from_dict(m["metrics"])))]
    if not rows:
        return []
    lines = table("Does the thought pay? The shipped models against their marks",
                  "| model | mark | needs | measured | met |")
    for n, mk in rows:
        v = "-" if mk["value"] is None else f"{mk['value']:.4f}"
        met = "yes" if mk["met"] else "**no**"
        ci = models[n]["metrics"].get("baselines", {}).get("at_equal_steps", {}).get("ci95", {}).get(
            MARK_INTERVALS.get(mk["key"], ""))
        if ci:                                   # a difference: its 95 % interval, and whether the mark lies inside
            v += f" [{ci[0]:+.4f}, {ci[1]:+.4f}]"
            met += " (the mark is inside the interval: not settled)" if ci[0] <= mk["mark"] <= ci[1] else ""
        lines.append(f"| {n} | {mk['what']} | {mk['op']} {mk['mark']:g} | {v} | {met} |")
    return lines + [""]


MARK_INTERVALS = {"learned_minus_confidence": "sampled-confidence_exit", "learned_minus_fixed": "sampled-fixed_depth"}


def parity_section(name: str, m: dict) -> list:
    t, p = TestMetrics.from_dict(m["metrics"]), m["train"]["parity_preset"]
    preset = get_task(m["train"]["task"]).presets[p]
    lines = table(f"Parity `{name}` (preset {p}: n={preset['n_elems']}, trained on k in "
                  f"{list(preset['train_k'])}, tested on k in {t.test_k})",
                  "| set | k range | accuracy | mean steps | E[n] |")
    for k, r in (("all", replace(t, k_range=t.test_k)), ("easy", t.easy), ("hard", t.hard)):
        lines.append(f"| {k} | {r.k_range} | {r.accuracy:.4f} | {r.mean_steps:.2f} | "
                     f"{C.two_decimals(r.mean_expected_steps)} |")
    return lines + [""]
