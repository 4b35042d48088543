"""What a sweep trains: the grid of TrainConfig values x seeds as a Plan, each trial's name and config
(validated before anything trains), --grid and --seeds parsed into it, and the results as a Markdown table
(sweep.md). Running the trials: ponder/sweeps/run.py."""
from __future__ import annotations

import itertools
import typing
from dataclasses import dataclass, field, fields
from typing import Optional

from ..config import ConfigError, TrainConfig
from ..analysis.metrics import TestMetrics
from ..store.record import RunRecord, card_text
from ..store.runs import safe_name
from ..tasks import get_task, train_config, validate

NOT_IN_GRID = {"task": "a sweep has one task (--task)", "seed": "give the seeds with --seeds",
               "options": "a task's options without a config field of their own are not swept"}
MAX_TRIALS = 1000                                     # grid points x seeds one sweep may train


@dataclass
class Trial:
    """One point of the grid with one seed: a run folder DIR/<name>."""
    name: str                       # its run folder under the sweep folder, e.g. "lambda_p0.2-seed0"
    config: TrainConfig             # the full config it trains (task defaults, train flags, grid values, seed)
    values: dict                    # what makes it this trial: its grid values and seed, e.g. {"lambda_p": 0.2, "seed": 0}
    status: str = "pending"         # pending / running, then its record's: completed / cancelled / failed
    record: Optional[RunRecord] = None   # how it ended (ponder.sweeps.trial.run_trial); None until it ends
    resumed: bool = False           # completed by an earlier run of this sweep, so not trained again

    def end(self, record: RunRecord) -> None:
        self.record, self.status = record, record.status

    @property
    def reason(self) -> str:        # why it failed or stopped early (divergence, an error, the time budget)
        return self.record.reason if self.record else ""

    @property
    def metrics(self) -> Optional[TestMetrics]:   # its test metrics as its card records them (None until measured)
        return (self.record.test or None) if self.record else None

    @property
    def steps(self) -> int:
        return (self.record.steps or 0) if self.record else 0          # a card may not say (None)

    @property
    def seconds(self) -> float:     # training time
        return (self.record.train_seconds or 0.0) if self.record else 0.0

    @property
    def device(self) -> str:        # where it trained, e.g. "cpu" or the GPU's name
        return self.record.device if self.record else ""

    def entry(self) -> dict:
        """Its entry in sweep.json."""
        return dict(name=self.name, values=self.values, status=self.status, reason=card_text(self.reason),
                    steps=self.steps, seconds=self.seconds, device=card_text(self.device), resumed=self.resumed,
                    metrics=self.metrics.to_dict() if self.metrics else None, config=self.config.to_dict())


@dataclass
class Plan:
    """What a sweep trains: the task, the fields set for every trial, the grid and the seeds."""
    task: str                                       # a task of the registry ponder.tasks.TASKS
    base: dict = field(default_factory=dict)        # TrainConfig fields every trial gets (the train flags given)
    grid: dict = field(default_factory=dict)        # field -> the values it takes, in order
    seeds: list = field(default_factory=lambda: [0])  # every grid point is trained once per seed

    def trials(self) -> list:
        """The cartesian product of the grid's values, times the seeds (seeds vary fastest). Each
        trial's config is validated here: a bad value fails before anything trains."""
        get_task(self.task)                   # ConfigError naming the known tasks
        if not self.seeds:
            raise ConfigError("--seeds needs at least one seed")
        count = len(self.seeds)
        for values in self.grid.values():
            count *= len(values)
        if count > MAX_TRIALS:
            raise ConfigError(f"the grid makes {count:,} trials (values x seeds); a sweep trains at most "
                              f"{MAX_TRIALS:,}: give fewer values or seeds")
        out = []
        for point in itertools.product(*self.grid.values()):
            for seed in self.seeds:
                values = {**dict(zip(self.grid, point)), "seed": seed}
                try:
                    cfg = validate(train_config(self.task, **{**self.base, **values}))
                except ConfigError as e:
                    raise ConfigError(f"trial {trial_name(values)}: {e}") from None
                out.append(Trial(name=trial_name(values), config=cfg, values=values))
        names = [t.name for t in out]
        if len(set(names)) < len(names):        # names cut at 64 characters can meet: number them
            for i, t in enumerate(out, 1):
                t.name = safe_name(f"t{i:03d}-{t.name}")
        return out

    def to_dict(self) -> dict:
        return dict(task=self.task, base=self.base, grid=self.grid, seeds=self.seeds)


def trial_name(values: dict) -> str:
    """'lambda_p0.2-beta0.01-seed0': each field and its value, file-system safe."""
    return safe_name("-".join(f"{k}{v:g}".replace("e+", "e") if isinstance(v, float) else f"{k}{v}"
                              for k, v in values.items()))


# ----------------------------------------------------------------------------- parsing --grid and --seeds

def parse_value(name: str, text: str):
    """One grid value, typed as TrainConfig's field `name` is (int, float, optional float, bool, str)."""
    kind = typing.get_type_hints(TrainConfig)[name]
    text = text.strip()
    try:
        if kind is bool:
            return {"true": True, "false": False}[text.lower()]
        if kind is int:
            return int(text)
        if kind is float or kind == Optional[float]:
            if kind != float and text.lower() in ("none", ""):
                return None
            return float(text)
        return text
    except (KeyError, ValueError):
        what = {bool: "true or false", int: "a whole number"}.get(kind, "a number")
        raise ConfigError(f"--grid {name}: expected {what}, got {text!r}") from None


def parse_grid(items) -> dict:
    """['lambda_p=0.2,0.5', 'regulariser=kl,kl-reverse'] -> {'lambda_p': [0.2, 0.5], 'regulariser': [...]}."""
    names = [f.name for f in fields(TrainConfig)]
    grid = {}
    for item in items or []:
        name, sep, values = str(item).partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not values.strip():
            raise ConfigError(f"--grid expects FIELD=V1,V2,..., got {item!r}")
        if name in NOT_IN_GRID:
            raise ConfigError(f"--grid {name}: {NOT_IN_GRID[name]}")
        if name not in names:
            raise ConfigError(f"--grid {name}: not a training config field (one of "
                              f"{', '.join(n for n in names if n not in NOT_IN_GRID)})")
        if name in grid:
            raise ConfigError(f"--grid {name} is given twice; list all its values in one --grid")
        vals = [parse_value(name, v) for v in values.split(",") if v.strip()]
        if len(set(map(repr, vals))) < len(vals):
            raise ConfigError(f"--grid {name}: a value is listed twice in {values!r}")
        grid[name] = vals
    return grid


def parse_seeds(text: str) -> list:
    """'0,1,2' -> [0, 1, 2]."""
    try:
        seeds = [int(s) for s in str(text).split(",") if s.strip()]
    except ValueError:
        raise ConfigError(f"--seeds expects comma-separated whole numbers, got {text!r}") from None
    if not seeds or len(set(seeds)) < len(seeds):
        raise ConfigError(f"--seeds expects one or more different seeds, got {text!r}")
    return seeds


# ----------------------------------------------------------------------------- the table

def markdown_table(plan: Plan, trials) -> str:
    """One row per trial: its grid values and seed, status, test accuracy, mean halting step, E[n], the learned
    halting's lead over a confidence exit at equal steps and its E[n] − settle (ponder.analysis.pays), time."""
    cols = list(plan.grid) + ["seed"]
    head = ["trial", *cols, "status", "test accuracy", "mean steps", "E[n]", "learned − confidence", "E[n] − settle",
            "steps", "train s", "reason"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for t in trials:
        m = t.metrics or TestMetrics()
        pays = m.pays or {}
        cells = [t.name, *(_cell(t.values.get(c)) for c in cols), t.status + (" (resumed)" if t.resumed else ""),
                 _cell(m.accuracy, "{:.4f}"), _cell(m.mean_steps, "{:.2f}"), _cell(m.mean_expected_steps, "{:.2f}"),
                 _cell(pays.get("learned_minus_confidence"), "{:+.4f}"), _cell(pays.get("expected_minus_settle"), "{:.2f}"),
                 str(t.steps), _cell(t.seconds, "{:.1f}"), t.reason.replace("|", "/")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _cell(v, fmt: str = "{}") -> str:
    if v is None:
        return "-"
    return f"{v:g}" if isinstance(v, float) and fmt == "{}" else fmt.format(v)
