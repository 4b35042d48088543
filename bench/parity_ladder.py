"""The paper's parity experiment, rung by rung (Banino et al. 2021 §3.1, App. B.1; Fojo et al. 2018 Table 1).

Every rung is an ordinary `ponder train` run with --resume: a queue runs its rungs one after the other on one core,
each writing its training state every few minutes, so the same command continues after a stop (a killed session)
and skips the rungs already done. `report` reads the run folders and writes what each rung reached.

    python -m bench.parity_ladder run --queue A --out runs/ladder        # in the background, one core
    python -m bench.parity_ladder run --queue B --out runs/ladder        # a second core
    python -m bench.parity_ladder report --out runs/ladder --to docs/studies/parity_ladder.json

The rungs (all: batch 128, Adam at a constant learning rate, gradients clipped at norm 1, validation on 2,000
held-out vectors of the trained k every 1,000 updates):
    a  Fojo et al. exactly: 64 elements, k non-zeros in the first k entries, a tanh RNN of 128 units fed
       [first-step flag, x], lr 1e-3: Repeat-RNN rho = 2 and ACT (tau 1e-2, then 1e-3 after 1e-2 collapsed to one
       step); theirs reached >= 0.98 in 22k and 53-55k updates
    b  the same with the non-zeros at random positions (the paper's vectors)
    c  PonderNet on that cell, the paper's KL(p || p_G), beta 0.01, N 20, the training N by eps = 0.05:
       lr 1e-3 and 3e-4, lambda_p 0.1 / 0.2 / 0.5
    A rung's "-tf" variant trains as Fojo et al.'s TensorFlow code did (TF: Glorot weights, zero biases, no clipping),
    which moved Repeat-RNN rho = 2 from 0.85 to 0.96; the rungs after that finding run with it.
    d  the 96-element extrapolation (trained on k 1-48, tested on 49-96) for every method
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

UPDATES = 60_000                 # each rung's updates (Fojo's slowest solved setting: 55k)
PER_EPOCH = 1_000                # updates between two validations
FOJO = ["--cell", "tanh", "--first-flag", "true", "--hidden", "128", "--batch-size", "128",
        "--lr-schedule", "constant", "--steps-per-epoch", str(PER_EPOCH)]
PONDER = ["--method", "ponder", "--regulariser", "kl", "--beta", "0.01", "--max-steps", "20", "--halt-epsilon", "0.05"]


def rung(preset: str, layout: str, method: list, lr: str, updates: int = UPDATES) -> list:
    return ["--task", "parity", "--parity-preset", preset, "--layout", layout, *FOJO, *method, "--lr", lr,
            "--epochs", str(updates // PER_EPOCH)]


RUNGS = {
    "a-repeat2-prefix": rung("paper", "prefix", ["--method", "repeat", "--max-steps", "2"], "1e-3"),
    "a-repeat2-prefix-noclip": rung("paper", "prefix", ["--method", "repeat", "--max-steps", "2", "--grad-clip", "1e6"],
                                    "1e-3"),
    "a-repeat2-prefix-tf": rung("paper", "prefix", ["--method", "repeat", "--max-steps", "2", "--grad-clip", "1e6",
                                                    "--init", "glorot"], "1e-3"),
    "a-act-prefix": rung("paper", "prefix", ["--method", "act", "--beta", "0.01", "--max-steps", "20"], "1e-3"),
    "b-repeat2-random": rung("paper", "random", ["--method", "repeat", "--max-steps", "2"], "1e-3"),
    "a-act-prefix-tau1e-3": rung("paper", "prefix", ["--method", "act", "--beta", "0.001", "--max-steps", "20"], "1e-3"),
    "b-act-random": rung("paper", "random", ["--method", "act", "--beta", "0.01", "--max-steps", "20"], "1e-3"),
    "b-act-random-tau1e-3": rung("paper", "random", ["--method", "act", "--beta", "0.001", "--max-steps", "20"],
                                 "1e-3"),
    "b-deep5-random": rung("paper", "random", ["--method", "deep", "--max-steps", "5"], "1e-3"),
    **{f"c-ponder-lr{lr}-lp{lp}": rung("paper", "random", [*PONDER, "--lambda-p", lp], lr)
       for lr in ("1e-3", "3e-4") for lp in ("0.2", "0.5", "0.1")},
    "c-ponder-lr1e-3-lp0.2-prefix": rung("paper", "prefix", [*PONDER, "--lambda-p", "0.2"], "1e-3"),
    # d: the 96-element extrapolation (trained on k 1-48, tested on 49-96), every method
    "d-repeat2": rung("extrapolation", "random", ["--method", "repeat", "--max-steps", "2"], "1e-3"),
    "d-act-tau1e-3": rung("extrapolation", "random", ["--method", "act", "--beta", "0.001", "--max-steps", "20"], "1e-3"),
    "d-deep5": rung("extrapolation", "random", ["--method", "deep", "--max-steps", "5"], "1e-3"),
    "d-ponder-lr1e-3-lp0.2": rung("extrapolation", "random", [*PONDER, "--lambda-p", "0.2"], "1e-3"),
}
TF = ["--init", "glorot", "--grad-clip", "1e6"]    # Fojo et al.'s TensorFlow training: Glorot weights, zero biases,
                                                    # no clipping (Repeat-RNN rho 2: 0.96 at 60k, PyTorch's init 0.85)
RUNGS.update({f"{name}-tf": [*flags, *TF] for name, flags in list(RUNGS.items())
              if name not in ("a-repeat2-prefix-noclip", "a-repeat2-prefix-tf")})
QUEUES = {
    "A": ["a-repeat2-prefix", "a-act-prefix", "a-act-prefix-tau1e-3", "b-repeat2-random-tf",
          "b-act-random-tau1e-3-tf", "b-deep5-random-tf", "d-repeat2-tf", "d-act-tau1e-3-tf", "d-deep5-tf",
          "a-act-prefix-tau1e-3-tf"],
    "B": ["c-ponder-lr1e-3-lp0.2", "c-ponder-lr1e-3-lp0.5", "c-ponder-lr1e-3-lp0.2-tf", "c-ponder-lr1e-3-lp0.5-tf",
          "c-ponder-lr1e-3-lp0.1-tf", "c-ponder-lr3e-4-lp0.2-tf", "c-ponder-lr3e-4-lp0.5-tf", "c-ponder-lr3e-4-lp0.1-tf"],
    "C": ["a-repeat2-prefix-noclip"],
    "D": ["a-repeat2-prefix-tf", "c-ponder-lr1e-3-lp0.2-prefix-tf", "d-ponder-lr1e-3-lp0.2-tf"],
}


def run_queue(names: list, out: Path, seed: int = 0) -> None:
    """Each rung in turn, one thread; a rung whose folder holds a finished run is skipped."""
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        folder = out / (name if seed == 0 else f"{name}-s{seed}")
        if (folder / "run.json").exists() and not (folder / "resume.safetensors").exists():
            print(f"{name}: done", flush=True)
            continue
        cmd = [sys.executable, "-m", "ponder", "train", *RUNGS[name], "--seed", str(seed), "--out", str(folder),
               "--resume", "--checkpoint-minutes", "2", "--threads", "1", "--quiet", "--device", "cpu"]
        print(f"{time.strftime('%H:%M:%S')} {name}: {' '.join(cmd[2:])}", flush=True)
        subprocess.run(cmd, check=False)


def curve(folder: Path) -> list:
    """[(update, validation accuracy)] of a run's history (its metrics.jsonl, or its saved training state)."""
    rows = []
    hist = folder / "metrics.jsonl"
    if hist.exists():
        rows = [json.loads(line) for line in hist.read_text().splitlines() if line.strip()]
    elif (folder / "resume.safetensors").exists():
        from ponder.training.resume import load_state
        rows = load_state(folder).history
    return [(r["step"], r["val_accuracy"]) for r in rows if r.get("val_accuracy") is not None]


def first_reaching(points: list, mark: float = 0.98):
    """The first update whose validation accuracy reached `mark` (None: never)."""
    return next((s for s, a in points if a >= mark), None)


def measured(folder: Path, size: int) -> dict:
    """The finished run measured as the paper's experiment (ponder.tasks.parity.experiment), as a dict."""
    from ponder.store.checkpoint import load_checkpoint
    from ponder.tasks.parity.experiment import measure
    ck = load_checkpoint(folder)
    return measure(ck.model, ck.record.config, size=size).to_dict()


def report(out: Path, size: int = 4000) -> dict:
    """{rung: {status, updates, last, best, to_098, seconds, curve, experiment}} of every rung folder under out;
    `experiment` (ponder.tasks.parity.experiment) once the run is finished."""
    rows = {}
    for folder in sorted(p for p in out.iterdir() if p.is_dir()):
        pts = curve(folder)
        running = (folder / "resume.safetensors").exists() or not (folder / "run.json").exists()
        card = {} if running else json.loads((folder / "run.json").read_text())
        config = card.get("train")
        if config is None and (folder / "resume.safetensors").exists():
            from ponder.training.resume import load_state
            config = load_state(folder).config
        rows[folder.name] = dict(
            status="running" if running else card.get("status"), config=config,
            updates=pts[-1][0] if pts else 0, last=pts[-1][1] if pts else None,
            best=max((a for _, a in pts), default=None), to_098=first_reaching(pts),
            seconds=card.get("train_seconds"), curve=pts,
            experiment=None if running else measured(folder, size))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.parity_ladder", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a queue of rungs, resumably")
    r.add_argument("--queue", choices=QUEUES, default=None)
    r.add_argument("--rungs", default=None, help="comma-separated rung names instead of a queue")
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--out", default="runs/ladder")
    s = sub.add_parser("report", help="what each rung reached")
    s.add_argument("--out", default="runs/ladder")
    s.add_argument("--to", default=None, help="write the JSON here too")
    s.add_argument("--size", type=int, default=4000, help="vectors in each measured set (seen, unseen, validation)")
    args = p.parse_args(argv)
    if args.command == "run":
        names = args.rungs.split(",") if args.rungs else QUEUES[args.queue or "A"]
        unknown = [n for n in names if n not in RUNGS]
        if unknown:
            p.error(f"unknown rung(s): {', '.join(unknown)}")
        run_queue(names, Path(args.out), args.seed)
        return 0
    rows = report(Path(args.out), args.size)
    for name, r in rows.items():
        e = r["experiment"] or {}
        seen, unseen = e.get("seen") or {}, e.get("unseen") or {}
        print(f"{name:34s} {r['status']:10s} updates {r['updates']:>6} last val {r['last']} best {r['best']} "
              f"to 0.98 {r['to_098']} seen {seen.get('accuracy')} ({seen.get('mean_steps')} steps) "
              f"unseen {unseen.get('accuracy')}")
    if args.to:
        Path(args.to).write_text(json.dumps({"kind": "ladder", "rungs": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
