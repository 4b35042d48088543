"""What a web job may use, read from the environment: its time cap ($PONDER_MAX_JOB_SECONDS, default 30 min,
enforced by its StopFlag), its torch threads ($PONDER_JOB_THREADS, default 1) and how many jobs run at once
($PONDER_MAX_JOBS, default 1). explorer.jobs.job applies them; the pages word them with fmt_duration."""
from __future__ import annotations

import time
from typing import Optional

from ponder.env import EnvError, env_number
from ponder.training.progress import Cancel

MAX_JOB_SECONDS = 1800.0   # a web job's time cap: 30 min, 40x the default MNIST run ($PONDER_MAX_JOB_SECONDS)


class JobLimitError(RuntimeError):
    """A job cannot start now; the message says why in plain words."""


def _from_env(name: str, default, lo: float, hi: float):
    """$name read by ponder.env.env_number; the default where it is unset or not a finite number in [lo, hi]
    (a job limit set wrong is the safe default, not a page that cannot open)."""
    try:
        v = env_number(name, None, lo, hi)
    except EnvError:
        return default
    return default if v is None else v


def job_threads_from_env(default: int = 1) -> int:
    """torch intra-op threads a job trains with ($PONDER_JOB_THREADS, default 1). One: on a loaded 2-core
    machine two threads wait on each other (4 steps in 8 s against 69 with one, bench/job_timing.py),
    and the pages' own inference keeps the other core."""
    return max(1, int(_from_env("PONDER_JOB_THREADS", default, 0, 1024)))


def max_jobs_from_env(default: int = 1) -> int:
    return max(1, int(_from_env("PONDER_MAX_JOBS", default, 0, 10**6)))


def max_seconds_from_env(default: float = MAX_JOB_SECONDS) -> float:
    """$PONDER_MAX_JOB_SECONDS, a positive number of seconds (the default where unset or not a number)."""
    v = float(_from_env("PONDER_MAX_JOB_SECONDS", default, 0, 1e9))
    return v if v > 0 else default


def fmt_duration(s: float) -> str:
    """1800 -> '30 min', 90 -> '1 min 30 s', 0.25 -> '0.25 s'."""
    if s < 60:
        return f"{s:g} s"
    m, rest = divmod(int(round(s)), 60)
    return f"{m} min" + (f" {rest} s" if rest else "")


class StopFlag(Cancel):
    """A job's stop flag, which train() checks every step: set by Cancel (from any session), and by
    itself once the job's time cap has passed. `why` (ponder.training.progress.Cancel) says which, in words
    train() puts before 'at step n' in the run's reason."""

    def __init__(self, cap: Optional[float] = None):
        super().__init__()
        self.cap, self.deadline = cap, None

    def start(self) -> None:
        """The job starts now: its cap counts from here."""
        if self.cap:
            self.deadline = time.monotonic() + self.cap

    def is_set(self) -> bool:
        if not super().is_set() and self.deadline is not None and time.monotonic() >= self.deadline:
            self.stop(f"stopped by the server's time cap on web jobs ({fmt_duration(self.cap)}, "
                      f"PONDER_MAX_JOB_SECONDS)")
        return super().is_set()
