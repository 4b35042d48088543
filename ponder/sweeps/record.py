"""A sweep folder's record as typed values: read_sweep, the one reader of DIR/sweep.json and DIR/sweep.log (the λp
sweep page, `python -m ponder study` and a sweep's resume all read through it).

Anyone who can put a folder in the runs folder can write a sweep.json, so nothing in it is trusted: the files are
read bounded (regular files only, no links, at most MAX_SWEEP_BYTES, nested at most ponder.store.card.MAX_JSON_DEPTH deep,
every string usable text: ponder.text),
and every field is checked as its writer (ponder.sweeps.run, Trial.entry) writes it: the plan as a Plan, each trial's
config as a validated TrainConfig (so N <= 200), its test metrics as a card's, its name as one run folder directly
inside the sweep folder (never a path). Anything else is a SweepError: one line naming the file and the field.
"""
from __future__ import annotations

import errno
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..config import ConfigError, TrainConfig, finite, short_repr
from ..files import SaveError, folder_lock, holds_lock
from ..store.card import MAX_JSON_DEPTH, CheckpointError, json_depth, one_line, read_json, read_regular
from ..store.card_checks import MAX_CARD_TEXT, MAX_RUN_SECONDS, MAX_RUN_STEPS, check_number, check_test_metrics
from ..store.runs import LOG, SWEEP, RunNameError, files_inside, safe_name
from .plan import MAX_TRIALS, NOT_IN_GRID, Plan
from ..tasks import validate
from ..text import walk_problem

MAX_SWEEP_BYTES = 32 * 1024 * 1024     # sweep.json / sweep.log: 1,000 trials with their metrics are a few MB
STATUSES = ("pending", "running", "completed", "cancelled", "failed")
MAX_VALUE_TEXT = 200                   # a grid value that is text (a regulariser, a reader, a preset)
MAX_RECORDS = 10 * MAX_TRIALS          # trials one sweep.json may list (a resume keeps the trials of earlier grids)


class SweepError(ConfigError):
    """A sweep folder whose sweep.json or sweep.log cannot be used. One line naming the file."""


@dataclass
class TrialEntry:
    """One trial as sweep.json records it (ponder.sweeps.plan.Trial.entry writes it)."""
    name: str                        # its run folder: a child of the sweep folder
    config: TrainConfig              # the config it trains, validated
    values: dict                     # its grid values and seed, e.g. {"lambda_p": 0.2, "seed": 0}
    status: str                      # one of STATUSES
    reason: str = ""                 # why it failed or stopped early
    steps: int = 0                   # optimiser steps done
    seconds: float = 0.0             # training time
    device: str = ""                 # where it trained
    resumed: bool = False            # completed by an earlier run of the sweep
    metrics: Optional[dict] = None   # its test metrics (a card's metrics.test); None until measured

    def to_dict(self) -> dict:
        return dict(name=self.name, values=self.values, status=self.status, reason=self.reason, steps=self.steps,
                    seconds=self.seconds, device=self.device, resumed=self.resumed, metrics=self.metrics,
                    config=self.config.to_dict())


@dataclass
class SweepRecord:
    """What a sweep folder's sweep.json says, with sweep.log's newer trial records in place of its own."""
    folder: Path
    plan: Plan
    trials: list = field(default_factory=list)     # [TrialEntry], in sweep.json's order
    backend: str = "local"

    @property
    def max_steps(self) -> int:
        """The largest N of its trials (1 without trials)."""
        return max([t.config.max_steps for t in self.trials] + [1])


def read_sweep(folder) -> Optional[SweepRecord]:
    """The sweep record of `folder`; None when it holds no sweep.json. SweepError (one line) when sweep.json or
    sweep.log cannot be read or holds anything its writer would not have written."""
    folder = Path(folder)
    f = folder / SWEEP
    if not (f.exists() or f.is_symlink()):
        return None
    d = _read(f)
    if not isinstance(d, dict):
        raise SweepError(f"{f}: not a sweep record (a mapping with plan and trials), got {short_repr(d)}")
    try:
        for k in ("plan", "trials"):
            if k not in d:
                raise ConfigError(f"{k} is missing")
        plan = plan_from_dict(d["plan"])
        backend = d.get("backend", "local")
        if not (isinstance(backend, str) and len(backend) <= 20):
            raise ConfigError(f"backend must be a name, got {short_repr(backend)}")
        if not (isinstance(d["trials"], list) and len(d["trials"]) <= MAX_RECORDS):
            raise ConfigError(f"trials must be a list of at most {MAX_RECORDS:,} trials, got {short_repr(d['trials'])}")
        trials = [trial_from_dict(r, plan.task, i) for i, r in enumerate(d["trials"])]
    except ConfigError as e:
        raise SweepError(f"{f}: {one_line(e)}") from None
    names = [t.name for t in trials]
    if len(set(names)) < len(names):
        raise SweepError(f"{f}: two trials are named {next(n for n in names if names.count(n) > 1)!r}")
    newer = _log_records(folder, plan.task)
    trials = [newer.get(t.name, t) for t in trials]
    if any(t.status in ("pending", "running") for t in trials) and not sweep_running(folder):
        for t in trials:                   # killed, or stopped by a full disk before it could say so
            if t.status in ("pending", "running"):
                t.status, t.reason = "cancelled", STOPPED
    return SweepRecord(folder, plan, trials, backend)


STOPPED = "the sweep stopped before this trial ended (killed, or its disk was full)"


def sweep_running(folder: Path) -> bool:
    """Whether a sweep (another thread's or process's) is running in `folder` now: it holds the folder's lock
    (ponder.sweeps.run.run_sweep). A sweep that is not running has no pending or running trials, whatever its
    files say."""
    if holds_lock(folder):                 # this thread's sweep (run_sweep, or a callback of it)
        return True
    try:
        with folder_lock(folder, shared=True):
            return False
    except SaveError as e:
        return e.errno == errno.EBUSY


def trial_folder(record: SweepRecord, t: TrialEntry) -> Path:
    """The run folder of trial t: a folder directly in the sweep folder, no link, no file of it a link.
    SweepError otherwise."""
    p = record.folder / t.name
    if p.is_symlink() or not p.is_dir() or not files_inside(record.folder, p):
        raise SweepError(f"{p}: trial {t.name!r} of {record.folder / SWEEP} has no run folder of its own there "
                         f"(missing, a file, or a symbolic link)")
    return p


def _read(f: Path):
    try:
        return read_json(f, MAX_SWEEP_BYTES, "a sweep record", follow_links=False)
    except CheckpointError as e:
        raise SweepError(str(e)) from None


def _log_records(folder: Path, task: str) -> dict:
    """{name: TrialEntry} of sweep.log, the last record of each name. A line a kill cut short is skipped."""
    f = folder / LOG
    if not (f.exists() or f.is_symlink()):
        return {}
    try:
        lines = read_regular(f, MAX_SWEEP_BYTES, follow_links=False).decode("utf-8", errors="replace").splitlines()
    except (OSError, CheckpointError) as e:
        raise SweepError(f"{f}: cannot read ({one_line(e)})") from None
    out = {}
    for i, line in enumerate(lines, 1):
        try:
            r = json.loads(line)
        except (ValueError, RecursionError):     # a line cut by a kill (or nested past the parser's limit)
            continue
        if json_depth(r) > MAX_JSON_DEPTH:
            raise SweepError(f"{f}, line {i}: nested more than {MAX_JSON_DEPTH} levels deep")
        if (problem := walk_problem(r)) is not None:
            raise SweepError(f"{f}, line {i}: {problem}")
        try:
            t = trial_from_dict(r, task, i - 1)
        except ConfigError as e:
            raise SweepError(f"{f}, line {i}: {one_line(e)}") from None
        out[t.name] = t
    return out


def plan_from_dict(d) -> Plan:
    """A sweep.json's plan, checked as `python -m ponder sweep` makes one: every trial it makes validates."""
    if not isinstance(d, dict):
        raise ConfigError(f"plan must be a mapping (task, base, grid, seeds), got {short_repr(d)}")
    names = set(TrainConfig.__dataclass_fields__)
    base, grid, seeds = d.get("base", {}), d.get("grid", {}), d.get("seeds", [0])
    if not isinstance(d.get("task"), str):
        raise ConfigError(f"plan.task must be a task's name, got {short_repr(d.get('task'))}")
    if not (isinstance(base, dict) and set(base) <= names - {"task"}):
        raise ConfigError(f"plan.base must map training config fields to values, got {short_repr(base)}")
    if not (isinstance(grid, dict) and set(grid) <= names - set(NOT_IN_GRID)
            and all(isinstance(v, list) and 1 <= len(v) <= MAX_TRIALS for v in grid.values())):
        raise ConfigError(f"plan.grid must map training config fields to lists of values, got {short_repr(grid)}")
    if not (isinstance(seeds, list) and 1 <= len(seeds) <= MAX_TRIALS):
        raise ConfigError(f"plan.seeds must be a list of seeds, got {short_repr(seeds)}")
    plan = Plan(task=d["task"], base=base, grid=grid, seeds=seeds)
    try:
        plan.trials()                          # each trial's config validated; ConfigError names the trial
    except (TypeError, ValueError) as e:       # ConfigError is a ValueError
        raise ConfigError(f"plan: {one_line(e)}") from None
    return plan


def trial_from_dict(r, task: str, i: int) -> TrialEntry:
    """One trial's record, checked (ConfigError naming it)."""
    if not isinstance(r, dict):
        raise ConfigError(f"trial {i + 1} must be a mapping, got {short_repr(r)}")
    name = r.get("name")
    try:
        if not (isinstance(name, str) and safe_name(name) == name):
            raise RunNameError("")
    except RunNameError:
        raise ConfigError(f"trial {i + 1}: name must be a run folder's name (letters, digits, '.', '_', '-'; "
                          f"not a path), got {short_repr(name)}") from None
    where = f"trial {name}"
    for k in ("config", "values", "status"):
        if k not in r:
            raise ConfigError(f"{where}: {k} is missing")
    try:
        config = validate(TrainConfig.from_dict(r["config"]))
    except (ConfigError, TypeError) as e:
        raise ConfigError(f"{where}: config: {one_line(e)}") from None
    if config.task != task:
        raise ConfigError(f"{where}: config.task {config.task!r} is not the plan's task {task!r}")
    values = r["values"]
    if not (isinstance(values, dict) and set(values) <= set(TrainConfig.__dataclass_fields__)
            and all(_scalar(v) for v in values.values())):
        raise ConfigError(f"{where}: values must map config fields to numbers or names, got {short_repr(values)}")
    for k, v in values.items():            # its grid values and seed are its config's (a study pools seeds by them)
        if v is not None and (isinstance(v, bool) != isinstance(getattr(config, k), bool) or getattr(config, k) != v):
            raise ConfigError(f"{where}: values.{k} {short_repr(v)} is not its config's {k} "
                              f"{short_repr(getattr(config, k))}")
    if not (isinstance(r["status"], str) and r["status"] in STATUSES):
        raise ConfigError(f"{where}: status must be one of {', '.join(STATUSES)}, got {short_repr(r['status'])}")
    for k in ("reason", "device"):
        v = r.get(k)
        if v is not None and not (isinstance(v, str) and len(v) <= MAX_CARD_TEXT):
            raise ConfigError(f"{where}: {k} must be text, got {short_repr(v)}")
    steps, seconds, resumed = r.get("steps", 0), r.get("seconds", 0.0), r.get("resumed", False)
    check_number(f"{where}: steps", steps, 0, MAX_RUN_STEPS, integer=True)
    check_number(f"{where}: seconds", seconds, 0, MAX_RUN_SECONDS)
    if not isinstance(resumed, bool):
        raise ConfigError(f"{where}: resumed must be true or false, got {short_repr(resumed)}")
    metrics = r.get("metrics")
    if metrics is not None:
        if not isinstance(metrics, dict):
            raise ConfigError(f"{where}: metrics must be a mapping, got {short_repr(metrics)}")
        check_test_metrics(metrics, config.max_steps, f"{where}: metrics")
    return TrialEntry(name=name, config=config, values=values, status=r["status"], reason=r.get("reason") or "",
                      steps=steps, seconds=float(seconds), device=r.get("device") or "", resumed=resumed,
                      metrics=metrics or None)


def _scalar(v) -> bool:
    return v is None or isinstance(v, bool) or finite(v) or (isinstance(v, str) and len(v) <= MAX_VALUE_TEXT)
