"""python -m ponder sweep: a grid of configs x seeds trained through ponder.sweeps.run (here or on Ray), a line
per trial as it ends and the results table at the end."""
from __future__ import annotations

import threading

from .args import config_from_args, ctrl_c_cancels
from ..config import ConfigError


def cmd_sweep(args) -> int:
    import time
    from pathlib import Path

    from ..store.runs import SWEEP, TABLE
    from ..sweeps import run as S
    from ..sweeps.plan import Plan, markdown_table, parse_grid, parse_seeds

    if args.seed is not None:
        raise ConfigError("sweep takes its seeds from --seeds, not --seed")
    base = config_from_args(args).to_dict()
    base.pop("task")
    plan = Plan(task=args.task, base=base, grid=parse_grid(args.grid), seeds=parse_seeds(args.seeds))
    n = len(plan.trials())                    # every trial's config is checked before anything trains
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a folder")
    shape = " x ".join([f"{len(v)} {k}" for k, v in plan.grid.items()] + [f"{len(plan.seeds)} seed(s)"])
    print(f"sweep: {n} trials ({shape}) on {args.backend}, into {out}", flush=True)
    ended = []

    def on_trial(t) -> None:
        if t.status == "running":
            return
        ended.append(t)
        m = t.metrics
        acc = f", test accuracy {m.accuracy:.4f}, mean halting step {m.mean_steps:.2f}" if m else ""
        print(f"[{len(ended)}/{n}] {t.name}: {t.status}, {t.steps} steps in {t.seconds:.1f} s{acc}"
              + (f" ({t.reason})" if t.reason else ""), flush=True)

    cancel = threading.Event()
    t0 = time.time()
    with ctrl_c_cancels(cancel):
        trials = S.run_sweep(plan, out, args.backend, address=args.address, cpus_per_trial=args.cpus_per_trial,
                             gpus_per_trial=args.gpus_per_trial, data_dir=args.data_dir, cancel=cancel,
                             on_trial=on_trial)
    print(markdown_table(plan, trials), end="")
    count = {s: sum(t.status == s for t in trials) for s in ("completed", "failed")}
    resumed = sum(t.resumed for t in trials)
    print(f"{count['completed']} completed ({resumed} in an earlier run, skipped), {count['failed']} failed, "
          f"{n - count['completed'] - count['failed']} not finished, in {time.time() - t0:.1f} s; "
          f"wrote {out / SWEEP} and {out / TABLE}")
    if cancel.is_set():
        return 130
    return 3 if count["failed"] else 0
