"""The explorer's training jobs of this process: starting them within limits and finding them again.

A JobRegistry lives once per process (the pages hold it in st.cache_resource), so a job survives
reruns, page switches, reloads and closed tabs.

Limits: one active job per browser session, and at most `max_jobs` active jobs in the process
($PONDER_MAX_JOBS, default 1). A job's time is capped ($PONDER_MAX_JOB_SECONDS, default 1800 s =
30 min, counted from its start): at the cap training stops as if cancelled, and the run is saved as
partial with a reason naming the cap. A run whose estimated peak memory does not fit, and a runs
folder that cannot be written, are refused before anything trains.

Finding a job again: every job has an id; get(id) finds it (the pages keep it in the URL as
?job=<id>, so a reload of the tab comes back to it, running or finished), active() lists the
running ones (a page shows the machine's running job to every session, with its Cancel button), and
recent() the newest ones. When the browser tab closes (or reloads, or the network drops) nothing
stops the job: its thread belongs to the process, so it trains to the end (its epochs, its time
budget or the cap) and saves the run as usual. The registry forgets all but the newest 50 finished
jobs; their runs stay in the runs folder ($PONDER_RUNS) and in every model picker (unless the save
there failed).
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable, Optional, Sequence

from ponder.files import SaveError, check_writable
from ponder.training.memory import fit_message
from ponder.store.runs import runs_root
from ponder.sweeps.plan import Plan
from ponder.tasks import validate

from .job import EVAL_LIMIT, Job
from .limits import JobLimitError, max_jobs_from_env, max_seconds_from_env


def _pages(jobs, here: str = "") -> str:
    """Where these jobs are shown: 'the Train page', 'the λp sweep page', 'the Train and λp sweep pages', or 'this
    page' for here's kind of job (here: the kind of job the asking page shows, 'train' or 'sweep')."""
    kinds = {j.kind for j in jobs}
    if kinds == {here}:
        return "this page"
    names = " and ".join(sorted({"λp sweep" if k == "sweep" else "Train" for k in kinds}))
    return f"the {names} page{'s' if len(kinds) > 1 else ''}"


def _default_mnist_loader():
    from ..drawing.digits import mnist_dataset
    return mnist_dataset()


class JobRegistry:
    """All jobs of this process. Thread-safe; pages call submit / session_job / cancel."""

    def __init__(self, max_jobs: Optional[int] = None, mnist_loader: Optional[Callable] = None,
                 eval_limit: int = EVAL_LIMIT, max_seconds: Optional[float] = None):
        self.max_jobs = max_jobs or max_jobs_from_env()
        self.max_seconds = max_seconds or max_seconds_from_env()      # each job's time cap
        self.mnist_loader = mnist_loader or _default_mnist_loader
        self.eval_limit = eval_limit
        self._lock = threading.Lock()
        self._jobs: dict = {}                 # id -> Job, in submission order

    def submit(self, session: str, specs: Sequence[tuple], kind: str = "train",
               root: Optional[Path] = None, plan: Optional[Plan] = None, watch=None) -> Job:
        """Start a job training [(name, TrainConfig), ...] one after the other, each into a fresh
        folder in root (default: the runs folder). With a sweep `plan`, specs are ignored: the plan's
        trials train through ponder.sweeps.run into the sweep folder `root`. watch: (one input, where it is from) whose
        halting each run records as it trains (explorer.watch).

        Raises ConfigError for a bad config, JobLimitError when this session already has a job
        running, the machine is at its limit, the runs folder cannot be written or a run's estimated
        peak memory (ponder.training.memory.estimate) does not fit in the memory free. When the save
        fails after training all the same (a full disk), the run is saved in a temporary folder
        instead and its reason says where (ponder.training.lifecycle.run's rescue).
        """
        if plan is not None:
            specs = [(t.name, t.config) for t in plan.trials()]
        specs = [(str(n), validate(c)) for n, c in specs]
        if not specs:
            raise ValueError("nothing to train")
        for n, c in specs:                  # what does not fit in memory is refused, not OOM-killed
            too_big = fit_message(c)
            if too_big:
                raise JobLimitError(f"Not started: {n}: {too_big}.")
        root = Path(root or runs_root())
        try:
            check_writable(root, "cannot save runs in the runs folder")   # before training, not after it
        except SaveError as e:
            raise JobLimitError(f"{e}; nothing was started (set PONDER_RUNS to a writable folder).") from None
        with self._lock:
            mine = [j for j in self._jobs.values() if j.session == session and j.active]
            if mine:
                page = "λp sweep" if mine[0].kind == "sweep" else "Train"
                raise JobLimitError(f"You already have a training job running (on the {page} page). Wait "
                                    "for it to finish or cancel it there.")
            active = [j for j in self._jobs.values() if j.active]
            if len(active) >= self.max_jobs:
                raise JobLimitError(f"The machine is busy: {len(active)} training job"
                                    f"{'s are' if len(active) > 1 else ' is'} running (limit {self.max_jobs}, "
                                    f"set PONDER_MAX_JOBS to change it), shown on {_pages(active)}, "
                                    f"where anyone can cancel it. Try again when "
                                    f"{'they finish' if len(active) > 1 else 'it finishes'}.")
            job = Job(session, kind, specs, root, self.mnist_loader, self.eval_limit, plan, cap=self.max_seconds,
                      watch=watch)
            self._jobs[job.id] = job
            self._forget_old()
            job.thread.start()
        return job

    def _forget_old(self, keep: int = 50) -> None:
        done = [k for k, j in self._jobs.items() if not j.active]
        for k in done[:-keep] if len(done) > keep else []:
            del self._jobs[k]

    def get(self, job_id: Optional[str], kind: Optional[str] = None) -> Optional[Job]:
        """The job with this id (of that kind), None if there is none (a bad id, or forgotten)."""
        with self._lock:
            job = self._jobs.get(str(job_id)) if job_id else None
        return job if job is not None and (kind is None or job.kind == kind) else None

    def active(self, kind: Optional[str] = None) -> list:
        """The running (or queued) jobs of that kind, oldest first, whoever started them."""
        with self._lock:
            return [j for j in self._jobs.values() if j.active and (kind is None or j.kind == kind)]

    def recent(self, kind: Optional[str] = None, n: int = 5) -> list:
        """The newest n jobs of that kind, newest first, running or finished."""
        with self._lock:
            jobs = [j for j in self._jobs.values() if kind is None or j.kind == kind]
        return jobs[::-1][:n]

    def session_job(self, session: str, kind: Optional[str] = None) -> Optional[Job]:
        """This session's newest job (of that kind)."""
        with self._lock:
            jobs = [j for j in self._jobs.values() if j.session == session and (kind is None or j.kind == kind)]
        return jobs[-1] if jobs else None

    def busy_message(self, session: str, here: str = "") -> str:
        """'' when this session may start a job now, else why not (here: the kind of job the asking page shows)."""
        with self._lock:
            mine = [j for j in self._jobs.values() if j.session == session and j.active]
            if mine:
                where = _pages(mine, here)
                return (f"Your training job is running, shown on {where}: start another when it ends, or cancel it"
                        + (" with its Cancel button." if where == "this page" else " there."))
            n = sum(j.active for j in self._jobs.values())
        if n >= self.max_jobs:
            return (f"The machine is busy: {n} training job{'s' if n > 1 else ''} running (limit {self.max_jobs}), "
                    f"shown on {_pages(self.active(), here)}. Try again when it finishes.")
        return ""

    def shutdown(self, timeout: float = 10.0) -> None:
        """Cancel every job and wait for the threads (tests)."""
        with self._lock:
            jobs = list(self._jobs.values())
        for j in jobs:
            j.cancel()
        for j in jobs:
            j.join(timeout)
