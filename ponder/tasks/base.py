"""The task interface (Task, the records it hands over: EvalSet, Batches) and the registry: get_task, and the
checks and defaults of a TrainConfig that depend on its task (train_config, validate, model_config), so
ponder.config knows no task. ponder.tasks imports every task module, which registers its task.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Optional

import torch

from ..config import ConfigError, TrainConfig, from_mapping, is_int, short_repr, _check
from .options import check_options, option_defaults, option_fields, split_options


@dataclass
class EvalSet:
    """A task's test items and the groups its test metrics report."""
    x: torch.Tensor                         # [M, ...] ready inputs
    y: torch.Tensor                         # [M] targets
    info: dict = field(default_factory=dict)     # copied into the metrics (e.g. split, test_k)
    rows: Optional[tuple] = None            # (metrics key, row key, values [M]): one metrics row per value,
                                            # e.g. ("by_class", "label", digits) or ("by_k", "k", k)
    blocks: dict = field(default_factory=dict)   # {name: (extra fields, mask [M])}: one metrics block each,
                                                 # e.g. parity's {"easy": ({"k_range": [1, 4]}, k <= 4), ...}
    batch_size: int = 1000                  # items per forward pass (a sampled halting step's draws follow it)
    row_group: str = "{key}={value}"        # the name of a rows value's group in per-step accuracy by group


class Batches:
    """Endless training batches (iterate) and a fixed validation set; per_epoch batches make an epoch."""
    per_epoch: int = 1

    def __iter__(self):
        raise NotImplementedError

    def validation(self) -> tuple:
        raise NotImplementedError

    def state(self) -> dict:
        """{name: tensor}: what a resumed run needs to go on drawing the same stream ({}: nothing to keep)."""
        return {}

    def load_state(self, state: dict) -> None:
        """Go on from a state() taken after some batches were drawn (before the next one is)."""


class Task:
    """One task. Subclasses set the class attributes and implement build_step, batches and test_set."""
    name: str = ""                  # the registry key, stored in every run card as `task`
    label: str = ""                 # how pages name it ("MNIST")
    model_config_cls: type = None   # the step function's config dataclass (a card's `model`)
    options_cls: type = None        # its options dataclass (ponder.tasks.options.option fields): what its runs set
                                    # that other tasks' do not; the CLI's flags and the Train form's widgets for them
    defaults: dict = {}             # TrainConfig fields that differ from TrainConfig's defaults for this task
                                    # (its options' defaults are those of options_cls)
    chance: float = 0.5             # test accuracy of guessing
    presets: dict = {}              # named data settings (TrainConfig.parity_preset); {} when it has none
    uses_data: bool = False         # load_data() reads a data set from disk before training / measuring
    pages: tuple = ()               # explorer pages with a single-model picker that show this task's models
    default_model: str = ""         # the shipped model those pickers start on
    shown_groups: tuple = ("E[n] Q", "by quartile of E[n] (Q1: the quarter of inputs it ponders least)")
                                    # per-step accuracy by group on its pages: a name prefix (or names), in words
    budget_seconds: int = 60        # the training form's default time budget
    data_bytes: int = 0             # bytes of data the training loop holds (ponder.training.memory's estimate)
    infer_states: int = 0           # floats per hidden unit and step a no-grad unroll keeps alive (ponder.training.memory)

    @property
    def reads(self) -> tuple:
        """The names of its options (the forms enable those)."""
        return tuple(f.name for f in option_fields(self))

    def load_data(self, data_dir: Optional[str] = None):
        """The task's data set (None when it generates its data)."""
        return None

    def model_config(self, cfg: TrainConfig):
        """The model config a run of cfg trains (default: the dataclass with cfg.hidden)."""
        return self.model_config_cls(hidden=cfg.hidden)

    def model_config_from_dict(self, d: dict):
        """A card's `model` mapping, checked: every field an integer in [1, 4096] unless check_model_field
        says otherwise."""
        cfg = from_mapping(self.model_config_cls, d, f"a {self.name} model config", f"{self.name} model field(s)")
        for f in fields(self.model_config_cls):
            v = getattr(cfg, f.name)
            if not self.check_model_field(f.name, v):
                _check(is_int(v) and 1 <= v <= 4096, f.name, "an integer in [1, 4096]", v)
        return cfg

    def check_model_field(self, name: str, value) -> bool:
        """Check a model field that is not a size (raise ConfigError when bad); False: check it as a size."""
        return False

    def check(self, cfg: TrainConfig) -> None:
        """Raise ConfigError for what its options' fields cannot say alone (each option's choices and range are
        checked from its field, ponder.tasks.options.check_option)."""

    def build_step(self, model_cfg, lambda_p: float) -> torch.nn.Module:
        """The step function (ponder.halting.StepFunction) for model_cfg, keeping it as .cfg (a run's card
        stores it); its lambda head started at the prior (init_lambda_head)."""
        raise NotImplementedError

    def batches(self, cfg: TrainConfig, device, data) -> Batches:
        """Training batches of cfg on `device` (data: load_data()'s set, None when the task generates its data)."""
        raise NotImplementedError

    def test_set(self, model, cfg: TrainConfig, data, limit: Optional[int] = None) -> EvalSet:
        """The standard test set (the first `limit` items when given); model: the trained PonderNet."""
        raise NotImplementedError

    def validation_set(self, model, cfg: TrainConfig, data, limit: Optional[int] = None) -> Optional[EvalSet]:
        """Items never trained on and not in the test set, where operating points are chosen (the first `limit`);
        None: the task has none (they are then chosen on the test set, and results say so)."""
        return None

    def shifted(self, model, cfg: TrainConfig, values: torch.Tensor) -> dict:
        """{name: mask [M]} of test items under a shift the training never saw, by the test set's rows values
        (parity: the unseen k); {} for none."""
        return {}

    def rotation_inputs(self, data, limit: Optional[int] = None):
        """(uint8 images, labels) that ponder.analysis.studies.rotation_study rotates; None: not an image task."""
        return None

    def feature_floats(self, model_cfg, n_steps: int = 1) -> int:
        """Floats per sample of the encoder's input and feature maps for a model of model_cfg (ponder.training.memory);
        0: plain vectors."""
        return 0

    def probe_inputs(self, model_cfg, n: int = 4) -> Optional[torch.Tensor]:
        """n fixed inputs spanning what the pages feed a model of model_cfg (blank, saturated, random): loading a
        run unrolls them once, so weights that overflow inside the network are refused. None: no probe."""
        return None

    def describe(self, record) -> str:
        """A run's (ponder.store.record.RunRecord) task-specific settings in a few words ('reader rows (2 a step)', 'parity preset small');
        '' for none."""
        return ""

    def step_meaning(self, model: dict) -> tuple[str, str]:
        """What one step is for a model of this task (its card's `model` mapping), in words, and what follows
        from it for reading its halting (a confound; '' for none). The explorer says both on its pages."""
        return "", ""


def init_lambda_head(head: torch.nn.Linear, lambda_p: float) -> None:
    """Start near the prior: lambda_n ~= lambda_p at every step, so p starts ~geometric.

    Small weights and bias = logit(lambda_p); an untrained net does not halt at step 1.
    """
    if head.weight.is_meta:       # shapes only (ponder.training.memory counts parameters there): no values to set, and
        return                    # normal_ on the meta device imports torch._dynamo (1.7 s of a process's start)
    lp = min(max(lambda_p, 1e-4), 1 - 1e-4)
    torch.nn.init.normal_(head.weight, std=1e-3)
    torch.nn.init.constant_(head.bias, math.log(lp / (1 - lp)))


def model_config_dict(model) -> dict:
    """A PonderNet's step-function config as a card's `model` mapping."""
    return asdict(model.step_fn.cfg)


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


TASKS: dict = {}


def register(task: Task) -> Task:
    """Add a task to the registry (a test's toy task, a new module's task); returns it."""
    TASKS[task.name] = task
    return task


def get_task(name) -> Task:
    """The registered task of that name; ConfigError naming the known ones otherwise."""
    task = TASKS.get(name) if isinstance(name, str) else None
    if task is None:
        raise ConfigError(f"task must be one of {', '.join(TASKS)}, got {short_repr(name)}")
    return task


def step_meaning(record) -> tuple[str, str]:
    """(what one step is, the confound it brings or '') for a run (its RunRecord; Task.step_meaning)."""
    model = record.model
    return get_task(record.train.get("task", "mnist")).step_meaning(model if isinstance(model, dict) else {})


def train_config(task: str, **overrides) -> TrainConfig:
    """A TrainConfig with the defaults that suit the task (its options' defaults, Task.defaults); overrides win.
    An option without a TrainConfig field of its name goes into TrainConfig.options."""
    t = TASKS.get(task) if isinstance(task, str) else None
    if t is None:                              # validate() names the unknown task
        return TrainConfig(task=task, **overrides)
    return TrainConfig(task=task, **split_options(t, {**option_defaults(t), **t.defaults, **overrides}))


def validate(cfg: TrainConfig) -> TrainConfig:
    """cfg, checked: its task is registered, the fields every run has (TrainConfig.validate), each task's options
    stored as TrainConfig fields whatever the run's task, the run's task's own options (TrainConfig.options) and
    Task.check. ConfigError naming the first bad field."""
    own = get_task(cfg.task)
    cfg.validate()
    for task in TASKS.values():
        check_options(task, cfg, own=task is own)
        task.check(cfg)
    return cfg


def model_config(cfg: TrainConfig):
    """The model config dataclass a run of cfg trains."""
    return get_task(cfg.task).model_config(cfg)


def model_config_from_dict(task: str, d: dict):
    """A card's `model` mapping as its task's model config, checked (ConfigError when it is not)."""
    return get_task(task).model_config_from_dict(d)


def build_model(task: str, model_cfg, max_steps: int, lambda_p: float, lambda_input: str = "hidden",
                lambda_head: str = "linear", method: str = "ponder", act_epsilon: float = 0.01):
    """The PonderNet of a task: its step function (from a model config or a card's mapping) and halting
    (lambda_input: what its lambda head reads, ponder.halting.LAMBDA_INPUTS; lambda_head: the features' head;
    method: a name of ponder.methods.METHODS, with ACT's eps)."""
    from ..halting import PonderNet
    t = get_task(task)
    if isinstance(model_cfg, dict):
        model_cfg = t.model_config_from_dict(model_cfg)
    return PonderNet(t.build_step(model_cfg, lambda_p), max_steps=max_steps, lambda_p=lambda_p,
                     lambda_input=lambda_input, lambda_head=lambda_head, method=method, act_epsilon=act_epsilon)
