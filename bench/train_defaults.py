"""What the Train page's defaults reach on this machine: one run started as the page starts it.

    PONDER_DATA=/work/shared/data python -m bench.train_defaults --task mnist

JobRegistry.submit with the form untouched (train_config(task) and the task's time budget, device
auto), into a temporary runs folder; prints one JSON line: the job's wall time (submit to saved and
measured), training seconds and steps, why it stopped, the test accuracy on the items a saved run is
measured on (explorer.jobs.job.EVAL_LIMIT) and the 1-minute load average before and after. The Train page's
sentence on what the defaults reach (explorer.app.train_views.DEFAULTS_MEASURED) quotes these lines.
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from explorer.jobs.registry import JobRegistry
from ponder.config import TrainConfig
from ponder.tasks import TASKS, get_task, train_config


def measure(task: str) -> dict:
    cfg = train_config(task, max_seconds=float(get_task(task).budget_seconds), device="auto")
    with tempfile.TemporaryDirectory() as runs:
        load0, t0 = os.getloadavg()[0], time.time()
        job = JobRegistry().submit("bench", [(f"{task}-defaults", cfg)], root=runs)
        job.join()
        run = job.snapshot().runs[0]
        test = run.record.test
        planned = run.progress[-1]["total_steps"] if run.progress else None
        return dict(task=task, wall_s=round(time.time() - t0, 1), train_s=round(run.record.train_seconds, 1), steps=run.steps,
                    planned_steps=planned, status=run.status,
                    reason=run.record.reason, test_accuracy=test.accuracy, test_n=test.n,
                    load_before=round(load0, 2), load_after=round(os.getloadavg()[0], 2))


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", choices=list(TASKS), default="mnist")
    print(json.dumps(measure(ap.parse_args().task)))
