"""How far a training run is and where it will end: the step forecast, the time budget's stop rule and
the cancel flag. Pure bookkeeping on (step, seconds) pairs; ponder.training.loop's loop feeds it.

What a user is promised (README, Train page, docs/development.md):
  - the time budget covers the training steps: the loop stops before a step it expects to end past
    the budget, so training ends at the budget give or take one step's jitter; the final validation
    pass, saving and the test measurement follow, each shown as its own phase;
  - cancel stops the training loop after the step running when it is set (and between validation
    chunks); nothing long runs after it inside train();
  - "step k of about K": K starts at the steps the epochs plan, goes up only if the step itself reaches
    it (the machine got faster than ever before in this run), never falls below k, and is the last step
    at the end.
"""
from __future__ import annotations

import contextlib
import os
import threading
from collections import deque
from typing import Optional

import torch

OPTIMISM = 1.25        # the rate the forecast assumes for the time left: 1.25 x the fastest seen so far


class StepForecast:
    """The step a run will end at, from its progress reports.

    total: the steps the epochs plan; budget: the time budget in seconds (None: the epochs end it).
    Without a budget the forecast is `total`. With one, it is step + (budget - elapsed) * rate, capped at
    `total`, where rate is OPTIMISM x the fastest report-to-report rate seen so far (steps per second;
    the first report's interval holds the start-up and is not used). Optimistic on purpose: slow
    stretches (an epoch-end validation pass, another process taking the CPU) lower the forecast only as
    their time is really lost, a run that speeds up by less than OPTIMISM never catches up with it, and
    the margin shrinks with the time left, so the forecast comes down smoothly to the last step. It
    never goes up unless the step itself reaches it (value <= max(previous value, step)), never falls
    below the current step, and finish() pins it to the last step.
    """

    def __init__(self, total: int, budget: Optional[float] = None):
        self.total, self.budget = int(total), budget
        self.value = int(total)                # the current forecast
        self.last = None                       # (step, elapsed) of the previous report
        self.rate: Optional[float] = None      # the fastest report-to-report rate so far (steps per second)

    def update(self, step: int, elapsed: float) -> int:
        """A progress report at `step` after `elapsed` training seconds; returns the forecast."""
        if self.last is not None and step > self.last[0] and elapsed > self.last[1]:
            r = (step - self.last[0]) / (elapsed - self.last[1])
            self.rate = r if self.rate is None else max(self.rate, r)
        if self.last is None or step > self.last[0]:
            self.last = (step, elapsed)
        raw = self.total
        if self.budget is not None and self.rate is not None:
            raw = step + max(0.0, self.budget - elapsed) * OPTIMISM * self.rate
        self.value = max(int(step), min(self.value, int(raw)))
        return self.value

    def finish(self, step: int) -> int:
        """The run ended at `step`: that is the forecast now."""
        self.value = int(step)
        return self.value


class StepTimer:
    """The budget's stop rule: stop before a step that is expected to end past the budget.

    The expected length of the next step is the median of the last three (a single slow one, e.g. the
    first or an epoch end's validation, does not stop a run early by much)."""

    def __init__(self, budget: Optional[float]):
        self.budget = budget
        self.recent = deque(maxlen=3)

    def add(self, seconds: float) -> None:
        self.recent.append(seconds)

    def next_step(self) -> float:
        return sorted(self.recent)[len(self.recent) // 2] if self.recent else 0.0

    def out_of_time(self, elapsed: float) -> bool:
        return self.budget is not None and elapsed + self.next_step() >= self.budget


def free_cores(cores: int, load: float) -> int:
    """Torch threads for a run on a machine with `cores` cores and 1-minute load average `load`: the cores
    the other work leaves free, at least one. Two threads where only one core is free wait on each other
    (a CLI run on a loaded 2-core machine got 202 steps in 60 s with 2 threads, the explorer's 1-thread
    jobs 491 in 15 s)."""
    return min(cores, max(1, cores - round(load)))


def machine_cores_and_load() -> tuple:
    """(cores this process may run on, the 1-minute load average)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):          # not on Linux
        cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):          # no load average (Windows)
        load = 0.0
    return cores, load


def free_threads(environ=None) -> int:
    """Torch threads for a model run now: the process's own number where $OMP_NUM_THREADS is set (torch
    already follows it), else the cores the 1-minute load average leaves free (free_cores). The CLI's
    training, `bench` and the explorer's pages all choose their threads with it."""
    env = os.environ if environ is None else environ
    if env.get("OMP_NUM_THREADS", "").strip():
        return PROCESS_THREADS
    return free_cores(*machine_cores_and_load())


class Cancel(threading.Event):
    """A cancel flag that says why: stop(why) sets it with the words a cancelled run's reason starts with
    (before "at step n"); set() is stop("cancelled"). train() takes any threading.Event as its cancel flag
    (cancel_reason reads the words of this kind; a plain Event's run is "cancelled"). The first reason stays."""

    def __init__(self):
        super().__init__()
        self.why = ""
        self._why_lock = threading.Lock()

    def stop(self, why: str = "cancelled") -> None:
        with self._why_lock:
            if not super().is_set():
                self.why = why
                super().set()

    def set(self) -> None:
        self.stop()


def cancel_reason(cancel: threading.Event) -> str:
    """The words a cancelled run's reason starts with: a Cancel's `why`, else "cancelled"."""
    return (cancel.why if isinstance(cancel, Cancel) else "") or "cancelled"


PROCESS_THREADS = torch.get_num_threads()      # torch's intra-op threads when this module was imported


@contextlib.contextmanager
def intra_op_threads(n: Optional[int]):
    """torch's intra-op threads set to n for the calling thread inside the block (None: unchanged); the
    explorer's jobs train with one (explorer.jobs.limits.job_threads_from_env: two threads on a loaded 2-core
    machine wait on each other, a step then takes seconds). torch starts new threads with the last number
    set, so it goes back to PROCESS_THREADS on the way out (not to this thread's own number, which a
    concurrent block may have lowered)."""
    if n:
        torch.set_num_threads(int(n))
    try:
        yield
    finally:
        if n:
            torch.set_num_threads(PROCESS_THREADS)
