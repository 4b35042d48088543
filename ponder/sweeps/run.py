"""Sweeps: a grid of TrainConfig values x seeds, each trial one ordinary run through ponder.training.lifecycle.run (the
plan, its --grid / --seeds parsing and the table: ponder/sweeps/plan.py).

A sweep folder DIR holds one run folder per trial (the same card and files as `python -m ponder train`
writes), DIR/sweep.json (the grid, and each trial's config, status, reason and test metrics) and
DIR/sweep.md (the same as a Markdown table), both written when the sweep starts and when it ends. In
between, each trial's record is appended to DIR/sweep.log as it starts and ends (ponder/sweeps/journal.py,
which both backends tell), and read_sweep (ponder/sweeps/record.py) reads sweep.json with the log's newer
records, so a killed sweep still says what it finished.

Backends: "local" trains the trials one after the other in this process. "ray" hands each trial to a
Ray task (a local Ray started here, or a running cluster by its address) with its own CPU / GPU share
(fractions pack small runs on one GPU); the task trains into a temporary folder on its node and sends
the run's files back, so the sweep folder looks the same whichever backend ran it, with or without a
shared file system (ponder/sweeps/ray_backend.py). Ray is imported only for that backend.

Resume: running the same sweep again skips every trial whose run folder's card says completed, with the same
config, and whose record says completed or whose card holds its test metrics (a full disk may have stopped the
sweep before it could record the trial); failed, cancelled and missing trials run again.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable, Optional

from ..config import ConfigError
from ..files import folder_lock
from ..store.card import CARD, CheckpointError, one_line, read_record
from ..store.record import RunRecord
from ..store.runs import SWEEP, inside
from ..tasks import get_task
from .journal import SweepJournal
from .plan import Plan, Trial
from .record import read_sweep
from .trial import run_trial

BACKENDS = ("local", "ray")


# ----------------------------------------------------------------------------- the sweep

def run_sweep(plan: Plan, folder, backend: str = "local", *, address: Optional[str] = None,
              cpus_per_trial: float = 1.0, gpus_per_trial: float = 0.0, data_dir: Optional[str] = None,
              eval_limit: Optional[int] = None, cancel: Optional[threading.Event] = None, on_trial: Optional[Callable] = None,
              callback: Optional[Callable] = None, on_phase: Optional[Callable] = None,
              load_data: Optional[Callable] = None) -> list:
    """Train every trial of `plan` not completed before into `folder`; returns the trials.

    on_trial(trial) is told when a trial starts (status 'running') and ends. The local backend also
    passes callback(trial, Progress) and on_phase(trial, phase) on, stops after the running trial when
    `cancel` is set (the trials left stay 'pending'), and gets MNIST from load_data() (default: from
    data_dir or $PONDER_DATA), once for the whole sweep. Ray needs `pip install ray`; `address` joins
    a running cluster (default: start a local one), cpus / gpus per trial may be fractions. eval_limit:
    measure each trial on that many test items (default: the whole test set, as `train` does).
    """
    if backend not in BACKENDS:
        raise ConfigError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if not (cpus_per_trial > 0 and gpus_per_trial >= 0):
        raise ConfigError(f"cpus per trial must be > 0 and gpus per trial >= 0, got {cpus_per_trial}, {gpus_per_trial}")
    folder = Path(folder)
    trials = plan.trials()
    _check_sweep_folder(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with folder_lock(folder):              # one sweep at a time per folder, not deleted meanwhile (ponder.store.manage)
        before = read_sweep(folder)            # SweepError (one line) for a sweep.json its writer did not write
        old = {r.name: r for r in before.trials} if before else {}
        for t in trials:
            _check_trial_folder(folder, t)
        for t in trials:
            saved = _trial_record(folder, t)
            if saved is not None and saved.status == "completed" and (
                    getattr(old.get(t.name), "status", "") == "completed" or saved.test):
                t.end(saved)                   # its card says it completed, with this config, and was measured
                t.resumed = True               # (or the sweep said so: a run saved before its measurement)
        kept = [r.to_dict() for n, r in old.items() if n not in {t.name for t in trials}]   # an earlier, other grid
        journal = SweepJournal(folder, plan, trials, backend, kept, on_trial)
        todo = [t for t in trials if not t.resumed]
        journal.write()
        if backend == "local":
            data = []                         # the task's data set, loaded by the first trial that needs it

            def load_once():
                if not data:
                    data.append(load_data() if load_data is not None else get_task(plan.task).load_data(data_dir))
                return data[0]

            try:
                for t in todo:
                    if cancel is not None and cancel.is_set():
                        break
                    journal.started(t)
                    journal.finished(t, run_trial(t.config, folder / t.name, load_once, cancel,
                                                  callback=callback and (lambda p, t=t: callback(t, p)),
                                                  on_phase=on_phase and (lambda ph, t=t: on_phase(t, ph)),
                                                  eval_limit=eval_limit))
            except OSError as e:              # sweep.log could not be written (a full disk): say in sweep.json
                try:                          # how the ended trials ended and that the others never will, if it
                    journal.unfinished("cancelled", f"the sweep stopped: {one_line(e)}")    # still can be written
                except OSError:
                    pass                      # a resume still finds each saved trial by its card (and read_sweep
                raise                         # tells a stopped sweep's pending trials from a running one's)
        else:
            from .ray_backend import run_on_ray              # imports Ray, only for this backend
            try:
                run_on_ray(todo, folder, journal, address, cpus_per_trial, gpus_per_trial, data_dir, eval_limit, cancel)
            except BaseException as e:            # the file says what happened to the trials that did not end
                journal.unfinished(*(("cancelled", "interrupted (Ctrl-C)") if isinstance(e, KeyboardInterrupt)
                                     else ("failed", one_line(e))))
                raise
        journal.write()
        return trials


def _check_sweep_folder(folder: Path) -> None:
    """ConfigError unless `folder` is new, empty or a sweep folder (holds sweep.json): a run's folder or
    any other folder never gets trials written into it."""
    if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
        raise ConfigError(f"{folder} is not a folder a sweep can use (a file or a symbolic link)")
    if folder.is_dir() and not (folder / SWEEP).is_file() and any(folder.iterdir()):
        what = "a run" if (folder / CARD).exists() else "other files"
        raise ConfigError(f"{folder} holds {what}, not a sweep: give a new folder (or an earlier sweep's, to "
                          f"resume it)")


def _check_trial_folder(folder: Path, t: Trial) -> None:
    """ConfigError when the trial's run folder is a symbolic link or leads out of the sweep folder: a rerun
    clears and rewrites that folder, which would then be another run's."""
    p = folder / t.name
    if p.is_symlink() or (p.exists() and not inside(folder, p)):
        raise ConfigError(f"{p} is a symbolic link, not the run folder of trial {t.name}: nothing is written "
                          f"through it; remove it or give the sweep a new folder")


def _trial_record(folder: Path, t: Trial) -> Optional[RunRecord]:
    """The record of the run in the trial's folder; None when there is none (or an unreadable one: rerun in
    place). ConfigError when it was trained with another config: a sweep resumes its own trials and reruns
    unfinished ones, but never replaces a run of another sweep."""
    try:
        record = read_record(folder / t.name)
    except CheckpointError:
        return None
    if record.train != t.config.to_dict():
        before = record.train
        diff = ", ".join(f"{k} {before.get(k)!r} -> {v!r}" for k, v in t.config.to_dict().items()
                         if before.get(k) != v)
        raise ConfigError(f"{folder / t.name} holds a run trained with another config ({diff}); it is not "
                          f"replaced: give the sweep a new folder")
    return record
