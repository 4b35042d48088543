"""Time budget, cancel latency and the step estimate of a training job, as the explorer runs it.

    PONDER_DATA=/work/shared/data python -m bench.job_timing [--budget 15] [--cancel-after 5] [--task mnist]

Each run goes through ponder.training.lifecycle.run with the explorer's evaluation limit (explorer.jobs.job.EVAL_LIMIT)
and torch threads (explorer.jobs.limits.job_threads_from_env), what a Train-page job does, with every phase
change timestamped:
  budget: the time budget against the training seconds reported and the wall time of the whole job
          (load data -> train -> save -> evaluate), and the sequence of "step k of about K" texts the
          Train page would show at each progress report (explorer.tables.training_eta);
  cancel: the time from cancel.set() to train() returning (the "saving" phase starts) and to the
          whole job returning.
Prints one block per run; nothing is written. Load the machine yourself to measure under load
(e.g. `python -c "while True: pass" &` twice, killed afterwards).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time

from explorer.jobs.job import EVAL_LIMIT
from explorer.tables import training_eta
from ponder import data as D
from ponder.training import lifecycle
from ponder.config import TrainConfig
from ponder.tasks import train_config

from explorer.jobs.limits import job_threads_from_env
from ponder.training.progress import intra_op_threads


def timed_run(cfg: TrainConfig, mnist, cancel_after=None) -> dict:
    """One lifecycle.run; returns phase times (s since the call), progress rows and the cancel timings."""
    marks, rows, cancel = {}, [], threading.Event()
    t0 = time.perf_counter()

    def on_phase(ph):
        marks.setdefault(ph, time.perf_counter() - t0)

    def callback(p):
        row = dict(p.__dict__, wall=time.time())
        row["eta"] = training_eta(row, row["wall"])[0]
        rows.append(row)

    timer = None
    if cancel_after is not None:
        def fire():
            marks["cancel"] = time.perf_counter() - t0
            cancel.set()
        timer = threading.Timer(cancel_after, fire)
    with tempfile.TemporaryDirectory() as tmp:
        if timer is not None:
            # start the timer when training starts, so cancel_after is on the training clock
            inner = on_phase

            def on_phase(ph):   # noqa: F811
                inner(ph)
                if ph == "training":
                    timer.start()
        out = lifecycle.run(cfg, os.path.join(tmp, "run"), load_data=lambda: mnist, callback=callback,
                            cancel=cancel, on_phase=on_phase, eval_limit=EVAL_LIMIT)
    marks["end"] = time.perf_counter() - t0
    return dict(marks=marks, rows=rows, outcome=out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--task", default="mnist", choices=("mnist", "parity"))
    ap.add_argument("--budget", type=float, default=15.0, help="time budget of the budget run (s)")
    ap.add_argument("--cancel-after", type=float, default=5.0, help="training seconds before the cancel")
    ap.add_argument("--skip", default="", help="comma list of runs to skip: budget,cancel")
    ap.add_argument("--threads", type=int, default=job_threads_from_env(),
                    help="torch intra-op threads, as an explorer job sets them (default: $PONDER_JOB_THREADS or 1)")
    args = ap.parse_args(argv)
    mnist = D.load_mnist() if args.task == "mnist" else None
    with intra_op_threads(args.threads):
        measure(args, mnist)


def measure(args, mnist) -> None:
    print(f"load average {os.getloadavg()[0]:.2f}, torch threads {__import__('torch').get_num_threads()}")
    if "budget" not in args.skip:
        r = timed_run(train_config(args.task, max_seconds=args.budget, device="cpu"), mnist)
        res, m = r["outcome"].result, r["marks"]
        print(f"[budget {args.budget:g} s] {res.record.steps} steps, training seconds reported "
              f"{res.record.train_seconds:.2f}, "
              f"whole job {m['end']:.2f} s; phases at " + ", ".join(f"{k} {v:.2f}" for k, v in m.items()))
        print("  estimates: " + " | ".join(row["eta"] for row in r["rows"]))
        print(f"  reason: {r['outcome'].reason}")
    if "cancel" not in args.skip:
        r = timed_run(train_config(args.task, device="cpu"), mnist, cancel_after=args.cancel_after)
        m = r["marks"]
        ret = m.get("saving", m["end"]) - m["cancel"]
        print(f"[cancel after {args.cancel_after:g} s] {r['outcome'].result.record.steps} steps; cancel.set() -> train() "
              f"returned {ret:.2f} s; -> job done {m['end'] - m['cancel']:.2f} s; phases at "
              + ", ".join(f"{k} {v:.2f}" for k, v in m.items()))
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
