"""Background training jobs for the explorer: a Job trains its runs in a daemon thread.

A Job trains one or more configs one after the other (a sweep is a queue of short runs) in a daemon
thread that never calls st.*. Each run is one call of ponder.training.lifecycle.run (train, save, measure,
record): it reports progress and its phase through callbacks into the job's buffer, behind a
threading.Lock. Pages read snapshots (JobView, plain copies) and poll them. A sweep job (a Plan) hands
its plan to ponder.sweeps.run.run_sweep instead, the code `python -m ponder sweep` runs: the trials land in
the sweep folder with its sweep.json, and a trial completed there before is not trained again.

Cancel sets the job's StopFlag, which train() checks every step, from any session; what was trained
so far is saved as a partial run, and so is a run stopped by the job's time cap (a sweep's trials not
started yet are not started). Every run that trained at least one step is saved in a fresh folder
new_run_dir(runs_root(), name), made when it is saved -- completed, cancelled (partial) or failed
alike -- so it shows up in every model picker. A save that fails (a full disk) gets the run saved in a
temporary folder instead, named in the run's reason, and leaves no empty folder behind. Threads are
named ponder-job-<id> and end when their job ends. Jobs are started and found through
explorer.jobs.registry.JobRegistry.
"""
from __future__ import annotations

import copy
import os
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional, Sequence

from ponder.training import lifecycle
from ponder.config import TrainConfig
from ponder.store.card import CARD, WEIGHTS, one_line
from ponder.store.record import RunRecord, new_record
from ponder.store.runs import new_run_dir
from ponder.sweeps.run import run_sweep
from ponder.sweeps.plan import Plan
from ponder.training.progress import intra_op_threads
from ponder.training.loop import Progress

from .limits import StopFlag, job_threads_from_env
from .. import heap
from ..watch import MAX_SNAPSHOTS, Watcher

ACTIVE = ("queued", "running")
MAX_REASON = 500                          # characters of an error kept as a run's reason
EVAL_LIMIT = lifecycle.QUICK_TEST_ITEMS   # test images (or parity problems) measured when a run is saved


@dataclass
class RunState:
    """One training run inside a job: its live state while it trains, then its record."""
    name: str
    config: TrainConfig
    status: str = "queued"          # queued / running, then its record's: completed / cancelled / failed
    phase: str = ""                 # what it is doing now: loading data, training, evaluating, saving
    progress: list = field(default_factory=list)   # Progress dicts (+ 'fraction')
    run_dir: Optional[str] = None   # where it was saved
    started: Optional[float] = None
    saved_elsewhere: bool = False   # the runs folder failed at the save: run_dir is a temporary folder
    run_key: Optional[tuple] = None  # which run it saved, whatever its name later (saved_key): found by where_now
    record: Optional[RunRecord] = None   # how it ended, as its card holds it (ponder.store.record); None until then
    watched: list = field(default_factory=list)    # the watched input as training went: explorer.watch snapshots

    @property
    def steps(self) -> int:         # optimiser steps: the record's, or the last progress report's while training
        if self.record:
            return self.record.steps
        return self.progress[-1]["step"] if self.progress else 0

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
                 cap: Optional[float] = None, watch=None):
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
        self.watch, self.watch_where = watch or (None, "")   # (input [1, ...], where it is from): looked at as it trains
        self.thread = threading.Thread(target=self._work, name=f"ponder-job-{self.id}", daemon=True)

    # -- read side (pages) ------------------------------------------------------------------
    def snapshot(self) -> JobView:
        with self.lock:
            runs = [replace(r, config=copy.copy(r.config), progress=list(r.progress), watched=list(r.watched))
                    for r in self.runs]
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

    def _end(self, run: RunState, record: RunRecord, **kw) -> None:
        """The run ended: its record (and status) and any live state given."""
        self._set(run, record=record, status=record.status, phase="", **kw)

    def _fail(self, run: RunState, status: str, reason: str, seconds: float = 0.0) -> None:
        """The run ended without a record of training (an error, a cancel before it started): one saying so."""
        self._end(run, new_record(run.config, {}, status=status, reason=reason, device="", train_seconds=seconds))

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
                        self._fail(run, "cancelled", f"{self.cancel_event.why} before it started")
                        continue
                    self._train_one(run)
        finally:
            release_freed_memory()
            with self.lock:
                self.status = "done"
                self.finished = time.time()

    def _train_one(self, run: RunState) -> None:
        """One run through ponder.training.lifecycle.run: train, save in the runs folder, measure, record."""
        self._set(run, status="running", phase="starting", started=time.time())
        t0 = time.time()
        watcher = Watcher(self.watch, run.config.task) if self.watch is not None else None

        def progress(p: Progress) -> None:
            self._progress(run, p)
            if watcher is not None and (snap := watcher.look(p.step)) is not None:     # between two steps
                with self.lock:
                    run.watched = (run.watched + [snap])[-MAX_SNAPSHOTS:]

        try:
            done = lifecycle.run(run.config, lambda: new_run_dir(self.root, run.name), load_data=self.mnist_loader,
                                 callback=progress, cancel=self.cancel_event,
                                 on_model=watcher.attach if watcher is not None else None,
                                 on_phase=lambda ph: self._set(run, phase=ph), eval_limit=self.eval_limit,
                                 rescue=True)
        except OSError as e:                        # SaveError: the runs folder and the fallback both failed
            self._fail(run, "failed", f"could not save the run: {one_line(e, MAX_REASON)}", time.time() - t0)
            return
        except Exception as e:                      # bad device, missing data, out of memory, ...
            self._fail(run, "failed", one_line(e, MAX_REASON), time.time() - t0)
            return
        reason = done.reason or ("cancelled" if done.record.status == "cancelled" else "")
        self._end(run, done.record.completed(reason=reason), run_dir=str(done.run_dir) if done.run_dir else None,
                  saved_elsewhere=bool(done.saved_elsewhere), run_key=saved_key(done.run_dir))


    def _progress(self, run: RunState, p: Progress) -> None:
        row = asdict(p)
        row["fraction"] = p.fraction_done()
        row["wall"] = time.time()                   # when it was reported (for the time-left estimate)
        with self.lock:
            run.progress.append(row)
            run.phase = "training"

    def _train_sweep(self) -> None:
        """A sweep: ponder.sweeps.run.run_sweep trains the plan's trials here, one after the other, into the
        sweep folder (sweep.json, sweep.md, a run folder per trial); trials it completed before are kept."""
        runs = {r.name: r for r in self.runs}

        def on_trial(t) -> None:
            run = runs[t.name]
            if t.status == "running":
                self._set(run, status="running", phase="starting", started=time.time())
                return
            saved = (self.root / t.name / CARD).is_file()
            self._end(run, t.record, run_dir=str(self.root / t.name) if saved else None,
                      run_key=saved_key(self.root / t.name) if saved else None)

        try:
            trials = run_sweep(self.plan, self.root, "local", eval_limit=self.eval_limit, cancel=self.cancel_event,
                               on_trial=on_trial, callback=lambda t, p: self._progress(runs[t.name], p),
                               on_phase=lambda t, ph: self._set(runs[t.name], phase=ph), load_data=self.mnist_loader)
        except Exception as e:                      # the sweep folder cannot be written, ...
            for run in self.runs:
                if run.status in ACTIVE:
                    self._fail(run, "failed", one_line(e, MAX_REASON))
            return
        for t in trials:
            if t.resumed:
                t.end(t.record.completed(reason="completed in an earlier run of this sweep (not trained again)"))
                on_trial(t)


def release_freed_memory() -> None:
    """Hand the heap a finished job freed back to the system (explorer.heap.release_freed): glibc keeps freed pages
    for later allocations, so the server held on to what a job had trained with."""
    heap.release_freed()


def saved_key(run_dir) -> Optional[tuple]:
    """Which run a folder holds, whatever its name: the folder's device and inode (a rename keeps them) and its
    weights file's inode, size and mtime (another save, or another run later given the same inode, changes
    them). None when there is no such run."""
    try:
        folder, weights = os.lstat(run_dir), os.lstat(Path(run_dir) / WEIGHTS)
    except (OSError, TypeError, ValueError):
        return None
    return folder.st_dev, folder.st_ino, weights.st_ino, weights.st_size, weights.st_mtime_ns


def where_now(run: RunState) -> tuple:
    """(the folder holding the run a job saved now, what became of it): (run_dir, 'there') while it is there,
    (its new folder, 'renamed') after a rename (in any session), (None, 'replaced') when another run holds its
    folder now, (None, 'deleted') when it is gone. A run saved outside the runs folder, or one whose key was not
    taken, is taken to be where it was saved."""
    if not run.run_dir:
        return None, "deleted"
    path = Path(run.run_dir)
    if run.run_key is None or run.saved_elsewhere or saved_key(path) == run.run_key:
        return path, "there"
    try:
        with os.scandir(path.parent) as it:           # a rename keeps the folder's inode: one stat per match
            for e in it:
                if e.inode() == run.run_key[1] and not e.name.startswith(".") and saved_key(e.path) == run.run_key:
                    return Path(e.path), "renamed"
    except OSError:
        pass
    return None, "replaced" if (path / CARD).is_file() else "deleted"
