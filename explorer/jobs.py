"""Background training jobs for the explorer.

A JobRegistry lives once per process (the pages hold it in st.cache_resource), so a job survives
reruns, page switches, reloads and closed tabs. A Job trains one or more configs one after the other
(a sweep is a queue of short runs) in a daemon thread that never calls st.*. Each run is one call of
ponder.lifecycle.run (train, save, measure, record): it reports progress and its phase through
callbacks into the job's buffer, behind a threading.Lock. Pages read snapshots (plain copies) and
poll them. A sweep job (submit(..., plan=)) hands its plan to ponder.sweep.run_sweep instead, the code
`python -m ponder sweep` runs: the trials land in the sweep folder with its sweep.json, and a trial
completed there before is not trained again.

Limits: one active job per browser session, and at most `max_jobs` active jobs in the process
($PONDER_MAX_JOBS, default 1). A job's time is capped ($PONDER_MAX_JOB_SECONDS, default 1800 s =
30 min, counted from its start): at the cap training stops as if cancelled, and the run is saved as
partial with a reason naming the cap (a sweep's trials not started yet are not started). Cancel sets
the job's StopFlag, which train() checks every step, from any session; what was trained so far is
saved as a partial run. Every run that trained at least one step is saved in a fresh folder
new_run_dir(runs_root(), name), made when it is saved -- completed, cancelled (partial) or failed
alike -- so it shows up in every model picker. A runs folder that cannot be written is refused
before training; one that fails at the save (a full disk) gets the run saved in a temporary folder
instead, named in the run's reason, and leaves no empty folder behind.

Finding a job again: every job has an id; get(id) finds it (the pages keep it in the URL as
?job=<id>, so a reload of the tab comes back to it, running or finished), active() lists the
running ones (a page shows the machine's running job to every session, with its Cancel button), and
recent() the newest ones. When the browser tab closes (or reloads, or the network drops) nothing
stops the job: its thread belongs to the process, so it trains to the end (its epochs, its time
budget or the cap) and saves the run as usual. The registry forgets all but the newest 50 finished
jobs; their runs stay in the runs folder ($PONDER_RUNS) and in every model picker (unless the save
there failed, see above). Threads are named ponder-job-<id> and end when their job ends.
"""
from __future__ import annotations

import copy
import threading
import time
import traceback
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence

from ponder import lifecycle
from ponder.atomic import SaveError, check_writable
from ponder.config import TrainConfig
from ponder.card import CARD
from ponder.memory import fit_message
from ponder.runs import new_run_dir, runs_root
from ponder.sweep import Plan, run_sweep
from ponder.progress import intra_op_threads
from ponder.train import Progress

from .limits import JobLimitError, StopFlag, job_threads_from_env, max_jobs_from_env, max_seconds_from_env

ACTIVE = ("queued", "running")
EVAL_LIMIT = 2000          # test images (or parity problems) measured when a run is saved


@dataclass
class RunState:
    """One training run inside a job."""
    name: str
    config: TrainConfig
    status: str = "queued"          # queued / running / completed / cancelled / failed
    phase: str = ""                 # what it is doing now: loading data, training, evaluating, saving
    reason: str = ""                # why it ended that way (time budget, cancel, NaN loss, error)
    progress: list = field(default_factory=list)   # Progress dicts (+ 'fraction')
    run_dir: Optional[str] = None   # where it was saved
    started: Optional[float] = None
    seconds: float = 0.0
    steps: int = 0
    metrics: Optional[dict] = None  # test metrics measured after training
    saved_elsewhere: bool = False   # the runs folder failed at the save: run_dir is a temporary folder

    @property
    def partial(self) -> bool:
        return self.status in ("cancelled", "failed")


@dataclass
class JobView:
    """A snapshot of a job: plain data, safe to read without the lock."""
    id: str
    session: str
    kind: str
    status: str                     # queued / running / done
    runs: list                      # RunState copies
    created: float
    finished: Optional[float]
    cancel_requested: bool
    stop_reason: str = ""           # why it was stopped: 'cancelled', '... time cap ...'
    cap: Optional[float] = None     # the job's time cap in seconds

    @property
    def name(self) -> str:
        """Its run's name, or 'sweep of 6 runs' (for lists of jobs)."""
        return self.runs[0].name if len(self.runs) == 1 else f"{self.kind} of {len(self.runs)} runs"

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def current(self) -> Optional[RunState]:
        """The running run, else the last one that started."""
        for r in self.runs:
            if r.status == "running":
                return r
        started = [r for r in self.runs if r.status != "queued"]
        return started[-1] if started else (self.runs[0] if self.runs else None)


class Job:
    def __init__(self, session: str, kind: str, specs: Sequence[tuple], root: Path,
                 mnist_loader: Callable, eval_limit: int = EVAL_LIMIT, plan: Optional[Plan] = None,
                 cap: Optional[float] = None):
        self.id = uuid.uuid4().hex[:12]
        self.session, self.kind, self.root = session, kind, Path(root)
        self.plan = plan                    # a sweep's plan: its trials train into the sweep folder `root`
        self.runs = [RunState(name=n, config=c) for n, c in specs]
        self.status = "queued"
        self.created, self.finished = time.time(), None
        self.lock = threading.Lock()
        self.cancel_event = StopFlag(cap)   # Cancel and the time cap
        self.mnist_loader = mnist_loader
        self.eval_limit = eval_limit
        self.thread = threading.Thread(target=self._work, name=f"ponder-job-{self.id}", daemon=True)

    # -- read side (pages) ------------------------------------------------------------------
    def snapshot(self) -> JobView:
        with self.lock:
            runs = [RunState(name=r.name, config=copy.copy(r.config), status=r.status, phase=r.phase,
                             reason=r.reason, progress=list(r.progress), run_dir=r.run_dir, started=r.started,
                             seconds=r.seconds, steps=r.steps, metrics=r.metrics,
                             saved_elsewhere=r.saved_elsewhere) for r in self.runs]
            return JobView(id=self.id, session=self.session, kind=self.kind, status=self.status, runs=runs,
                           created=self.created, finished=self.finished,
                           cancel_requested=self.cancel_event.is_set(), stop_reason=self.cancel_event.why,
                           cap=self.cancel_event.cap)

    @property
    def active(self) -> bool:
        with self.lock:
            return self.status in ACTIVE

    def cancel(self, session: Optional[str] = None) -> None:
        """Stop after the current step; anyone may (session: who asked, to say so in the reason)."""
        self.cancel_event.stop("cancelled" if session in (None, self.session) else "cancelled from another session")

    def join(self, timeout: Optional[float] = None) -> bool:
        self.thread.join(timeout)
        return not self.thread.is_alive()

    # -- the thread ---------------------------------------------------------------------------
    def _set(self, run: RunState, **kw) -> None:
        with self.lock:
            for k, v in kw.items():
                setattr(run, k, v)

    def _work(self) -> None:
        with self.lock:
            self.status = "running"
        self.cancel_event.start()
        try:
            with intra_op_threads(job_threads_from_env()):
                if self.plan is not None:
                    self._train_sweep()
                for run in self.runs:
                    if run.status != "queued":
                        continue
                    if self.cancel_event.is_set():
                        self._set(run, status="cancelled", reason=f"{self.cancel_event.why} before it started", phase="")
                        continue
                    self._train_one(run)
        finally:
            with self.lock:
                self.status = "done"
                self.finished = time.time()

    def _train_one(self, run: RunState) -> None:
        """One run through ponder.lifecycle.run: train, save in the runs folder, measure, record."""
        self._set(run, status="running", phase="starting", started=time.time())
        t0 = time.time()

        try:
            done = lifecycle.run(run.config, lambda: new_run_dir(self.root, run.name), load_data=self.mnist_loader,
                                 callback=lambda p: self._progress(run, p), cancel=self.cancel_event,
                                 on_phase=lambda ph: self._set(run, phase=ph), eval_limit=self.eval_limit,
                                 rescue=True)
        except OSError as e:                        # SaveError: the runs folder and the fallback both failed
            self._set(run, status="failed", phase="", reason=f"could not save the run: {_one_line(e)}",
                      seconds=time.time() - t0)
            return
        except Exception as e:                      # bad device, missing data, out of memory, ...
            self._set(run, status="failed", phase="", reason=_one_line(e), seconds=time.time() - t0)
            return
        res = done.result
        reason = done.reason or ("cancelled" if res.status == "cancelled" else "")
        self._set(run, status=res.status, reason=reason, phase="", seconds=res.seconds, steps=res.steps,
                  run_dir=str(done.run_dir) if done.run_dir else None, metrics=done.recorded,
                  saved_elsewhere=bool(done.saved_elsewhere))


    def _progress(self, run: RunState, p: Progress) -> None:
        row = asdict(p)
        row["fraction"] = p.fraction_done()
        row["wall"] = time.time()                   # when it was reported (for the time-left estimate)
        with self.lock:
            run.progress.append(row)
            run.phase = "training"
            run.steps = p.step

    def _train_sweep(self) -> None:
        """A sweep: ponder.sweep.run_sweep trains the plan's trials here, one after the other, into the
        sweep folder (sweep.json, sweep.md, a run folder per trial); trials it completed before are kept."""
        runs = {r.name: r for r in self.runs}

        def on_trial(t) -> None:
            run = runs[t.name]
            if t.status == "running":
                self._set(run, status="running", phase="starting", started=time.time())
                return
            saved = (self.root / t.name / CARD).is_file()
            self._set(run, status=t.status, reason=t.reason, phase="", seconds=t.seconds, steps=t.steps,
                      run_dir=str(self.root / t.name) if saved else None,
                      metrics={"test": t.metrics} if t.metrics else None)

        try:
            trials = run_sweep(self.plan, self.root, "local", eval_limit=self.eval_limit, cancel=self.cancel_event,
                               on_trial=on_trial, callback=lambda t, p: self._progress(runs[t.name], p),
                               on_phase=lambda t, ph: self._set(runs[t.name], phase=ph), load_data=self.mnist_loader)
        except Exception as e:                      # the sweep folder cannot be written, ...
            for run in self.runs:
                if run.status in ACTIVE:
                    self._set(run, status="failed", phase="", reason=_one_line(e))
            return
        for t in trials:
            if t.resumed:
                on_trial(t)
                self._set(runs[t.name], reason="completed in an earlier run of this sweep (not trained again)")


def _pages(jobs) -> str:
    """Where these jobs are shown: 'Train', 'λp sweep' or 'Train and λp sweep'."""
    return " and ".join(sorted({"λp sweep" if j.kind == "sweep" else "Train" for j in jobs}))


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split()) or e.__class__.__name__
    if not str(e).strip():
        text = e.__class__.__name__ + ": " + (traceback.format_exception_only(e)[-1].strip())
    return text[:500]


def _default_mnist_loader():
    from .digits import mnist_dataset
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
               root: Optional[Path] = None, plan: Optional[Plan] = None) -> Job:
        """Start a job training [(name, TrainConfig), ...] one after the other, each into a fresh
        folder in root (default: the runs folder). With a sweep `plan`, specs are ignored: the plan's
        trials train through ponder.sweep into the sweep folder `root`.

        Raises ConfigError for a bad config, JobLimitError when this session already has a job
        running, the machine is at its limit, the runs folder cannot be written or a run's estimated
        peak memory (ponder.memory.estimate) does not fit in the memory free. When the save
        fails after training all the same (a full disk), the run is saved in a temporary folder
        instead and its reason says where (ponder.lifecycle.run's rescue).
        """
        if plan is not None:
            specs = [(t.name, t.config) for t in plan.trials()]
        specs = [(str(n), c.validate()) for n, c in specs]
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
                                    f"set PONDER_MAX_JOBS to change it), shown on the {_pages(active)} page, "
                                    f"where anyone can cancel it. Try again when "
                                    f"{'they finish' if len(active) > 1 else 'it finishes'}.")
            job = Job(session, kind, specs, root, self.mnist_loader, self.eval_limit, plan, cap=self.max_seconds)
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

    def busy_message(self, session: str) -> str:
        """'' when this session may start a job now, else why not."""
        with self._lock:
            if any(j.session == session and j.active for j in self._jobs.values()):
                return "You already have a training job running."
            n = sum(j.active for j in self._jobs.values())
        if n >= self.max_jobs:
            return (f"The machine is busy: {n} training job{'s' if n > 1 else ''} running (limit {self.max_jobs}), "
                    f"shown on the {_pages(self.active())} page. Try again when it finishes.")
        return ""

    def shutdown(self, timeout: float = 10.0) -> None:
        """Cancel every job and wait for the threads (tests)."""
        with self._lock:
            jobs = list(self._jobs.values())
        for j in jobs:
            j.cancel()
        for j in jobs:
            j.join(timeout)
