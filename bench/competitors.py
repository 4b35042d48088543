"""The fair competitors of the shipped pondering models: the same step function, data, batch, updates and learning
rate, trained with deep supervision (method "deep": no halting, the loss averaged over all N steps), so that "is
the thought worth it?" compares the learned halting with a network trained to answer at every step; and parity-15
trained again on today's stream (its held-out test and validation vectors never drawn). Resumable like the ladder:

    python -m bench.competitors run --out runs/competitors --data-dir ../shared/data [--seed S]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench.parity_ladder import RUNGS, run_queue

MNIST_ADAPTIVE = ["--task", "mnist", "--reader", "rows", "--rows-per-step", "2", "--lambda-p", "0.5", "--beta", "0.02",
                  "--regulariser", "kl", "--max-steps", "20", "--hidden", "64", "--batch-size", "128", "--lr", "2e-3",
                  "--epochs", "6", "--lr-schedule", "onecycle"]
PARITY_15 = ["--task", "parity", "--parity-preset", "video-15", "--lambda-p", "0.5", "--beta", "0.01", "--regulariser",
             "kl-reverse", "--max-steps", "20", "--hidden", "32", "--batch-size", "1024", "--lr", "3e-3", "--epochs",
             "20", "--steps-per-epoch", "1000", "--lr-schedule", "constant"]
COMPETITORS = {
    "parity-15-deep": [*PARITY_15, "--method", "deep"],
    "mnist-adaptive-deep": [*MNIST_ADAPTIVE, "--method", "deep"],
    "parity-15-heldout": [*PARITY_15, "--method", "ponder"],
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.competitors", description=__doc__.splitlines()[0])
    p.add_argument("command", choices=["run"])
    p.add_argument("--out", default="runs/competitors")
    p.add_argument("--data-dir", default=None, help="MNIST root holding MNIST/raw")
    p.add_argument("--only", default=None, help="comma-separated names (default: all)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    names = args.only.split(",") if args.only else list(COMPETITORS)
    extra = ["--data-dir", args.data_dir] if args.data_dir else []
    RUNGS.update({n: [*COMPETITORS[n], *extra] for n in names})
    run_queue(names, Path(args.out), args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
