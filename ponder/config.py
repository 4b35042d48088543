"""Configuration dataclasses and their validation. One place says what values are allowed."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Optional

DEVICES = ("auto", "cpu", "cuda", "mps")
MAX_SEED = 2 ** 63 - 1


class ConfigError(ValueError):
    """A bad hyperparameter. The message names the field and the allowed range."""


ANSWER_LOSSES = ("halting", "mean")           # what trains the answer heads; see ponder/losses.py, train_loss
HALTING_LOSSES = ("ce", "accuracy", "exit")          # what trains the halting


@dataclass
class TrainConfig:
    """Everything a run needs. Saved in the run folder; defaults give a useful MNIST model in ~1 min on 2 CPU cores."""
    task: str = "mnist"              # a task of the registry ponder.tasks.TASKS (ponder.tasks.validate checks it)
    method: str = "ponder"           # a name of ponder.methods.METHODS: "ponder" (PonderNet, the paper's), "act"
                                     # (Graves' ACT), "repeat" (a fixed N steps, loss at the last), "deep" (every
                                     # step's answer trained, no halting); beta is ACT's ponder cost tau
    act_epsilon: float = 0.01        # ACT's eps: it halts once its halting units sum to 1 - eps (Graves: 0.01)
    lambda_p: float = 0.2            # geometric prior parameter, prior mean 1/lambda_p steps
    beta: float = 0.01               # weight of the regulariser
    regulariser: str = "kl"          # a name of ponder.losses.REGULARISERS: "kl", KL(p || p_G), the paper's direction
                                     # (the learned p first); "kl-reverse", KL(p_G || p); "kl-both", their sum
    answer_loss: str = "halting"     # "halting": sum_n p_n L_n trains the answers and the halting (the paper's);
                                     # "mean": deep supervision, every step's answer weighted 1/N, and the
                                     # halting term below sees the step losses detached (it shapes no answer head)
    halting_loss: str = "ce"         # with answer_loss "mean": "ce", sum_n p_n L_n (detached L_n); "accuracy",
                                     # -sum_n p_n (1[y_n right] - step_cost n), expected accuracy minus compute;
                                     # "exit", lambda_n trained towards "the answer is right from step n on" (BCE)
    step_cost: float = 0.0           # c of halting_loss "accuracy": accuracy one more step must buy
    halting_warmup: float = 0.0      # with answer_loss "mean": the fraction of the updates before the halting term
                                     # and the regulariser are on (the answers train alone first, so the halting
                                     # starts from answers that are already good at every step)
    max_steps: int = 20              # N, the most steps a sample can take
    halt_epsilon: Optional[float] = None  # None: training unrolls all max_steps; ε: it unrolls until every input
                                     # of the batch has halted with probability Σ_{j≤n} p_j ≥ 1 − ε (the paper's
                                     # N, ε = 0.05 there), max_steps then the cap; evaluation runs to max_steps
    hidden: int = 64                 # recurrent cell hidden size
    batch_size: int = 128            # training batch size
    lr: float = 2e-3                 # Adam learning rate
    epochs: float = 3.0              # passes over the 55k training images (parity: over steps_per_epoch batches)
    max_seconds: Optional[float] = None  # wall-clock budget; training stops cleanly when it runs out
    rotate_train: float = 0.0        # MNIST augmentation: rotate each image by uniform(-d, d) degrees
    reader: str = "cnn"              # MNIST step function: "cnn" (whole image each step), "rows", "coarse"
    rows_per_step: int = 2           # MNIST "rows" reader: image rows revealed per step
    seed: int = 0                    # seeds weights, data order, augmentation and parity data
    device: str = "auto"             # auto picks cuda > mps > cpu
    grad_clip: float = 1.0           # max global gradient norm
    weight_decay: float = 0.0        # Adam weight decay
    parity_preset: str = "small"     # parity data preset: small / paper / extrapolation
    steps_per_epoch: int = 500       # tasks that generate their data (parity): batches per "epoch"
    log_every: int = 10              # report progress every this many optimiser steps
    compile: bool = False            # torch.compile the step function (helps on GPU only)
    lr_schedule: str = "onecycle"    # "onecycle" (warm-up then cosine decay) or "constant"
    check_every: int = 50            # read the device's divergence flag (and snapshot the weights) every this many
                                     # steps and at log points; a NaN/inf run stops at most this many steps late
    lambda_input: str = "hidden"     # what the lambda head reads: "hidden" (h_{n+1}, the paper's), "confidence"
                                     # (also the answer's top probability and its change from step n-1) or
                                     # "stability" (also for how long the answer has held and how far h moves;
                                     # ponder.halt_features)
    lambda_head: str = "linear"      # the head on those features: "linear" or "mlp" (16 tanh units)
    cuda_graph: bool = True          # on CUDA: capture the whole training step in a CUDA graph and replay it
                                     # (eager steps where capture fails; ignored on CPU/MPS and with compile)
    options: dict = field(default_factory=dict)   # the task's options that have no field above, {name: value}
                                     # (ponder.tasks.options; each task checks its own)

    def validate(self) -> "TrainConfig":
        """Check the fields every run has (ConfigError naming the first bad one); returns self. The task and the
        fields a task reads are checked by ponder.tasks.validate, which calls this."""
        _check(finite(self.lambda_p) and 0.0 < self.lambda_p <= 1.0, "lambda_p", "(0, 1]", self.lambda_p)
        _check(finite(self.beta) and self.beta >= 0.0, "beta", ">= 0", self.beta)
        from .halting import LAMBDA_INPUTS
        from .losses import REGULARISERS
        from .methods import METHODS, check_epsilon
        _check(_choice(self.method, METHODS), "method", f"one of {', '.join(METHODS)}", self.method)
        _check(check_epsilon(self.act_epsilon), "act_epsilon", "in [1e-06, 0.5]", self.act_epsilon)
        if self.method != "ponder":         # the options below shape PonderNet's halting only
            for name, plain in (("answer_loss", "halting"), ("halting_loss", "ce"), ("lambda_input", "hidden"),
                                ("halt_epsilon", None)):
                _check(getattr(self, name) == plain, name, f"{plain!r} with method {self.method!r}",
                       getattr(self, name))
        _check(_choice(self.lambda_input, LAMBDA_INPUTS), "lambda_input", f"one of {', '.join(LAMBDA_INPUTS)}",
               self.lambda_input)
        from .halt_features import LAMBDA_HEADS
        _check(_choice(self.lambda_head, LAMBDA_HEADS), "lambda_head", f"one of {', '.join(LAMBDA_HEADS)}",
               self.lambda_head)
        _check(_choice(self.regulariser, REGULARISERS), "regulariser", f"one of {', '.join(REGULARISERS)}", self.regulariser)
        _check(_choice(self.answer_loss, ANSWER_LOSSES), "answer_loss", f"one of {', '.join(ANSWER_LOSSES)}",
               self.answer_loss)
        _check(_choice(self.halting_loss, HALTING_LOSSES), "halting_loss", f"one of {', '.join(HALTING_LOSSES)}",
               self.halting_loss)
        _check(self.halting_loss == "ce" or self.answer_loss == "mean", "halting_loss",
               "'ce' unless answer_loss is 'mean' (the others train no answer)", self.halting_loss)
        _check(finite(self.step_cost) and 0.0 <= self.step_cost <= 1.0, "step_cost", "in [0, 1]", self.step_cost)
        _check(finite(self.halting_warmup) and 0.0 <= self.halting_warmup < 1.0, "halting_warmup", "in [0, 1)",
               self.halting_warmup)
        _check(self.halting_warmup == 0.0 or self.answer_loss == "mean", "halting_warmup",
               "0 unless answer_loss is 'mean' (the paper's halting term trains the answers)", self.halting_warmup)
        _check(is_int(self.max_steps) and 1 <= self.max_steps <= 200, "max_steps", "an integer in [1, 200]", self.max_steps)
        _check(self.halt_epsilon is None or (finite(self.halt_epsilon) and 0.0 < self.halt_epsilon < 1.0),
               "halt_epsilon", "in (0, 1) (or unset)", self.halt_epsilon)
        _check(is_int(self.hidden) and 1 <= self.hidden <= 4096, "hidden", "an integer in [1, 4096]", self.hidden)
        _check(is_int(self.batch_size) and 1 <= self.batch_size <= 65536, "batch_size", "an integer in [1, 65536]", self.batch_size)
        _check(finite(self.lr) and 0.0 < self.lr <= 1.0, "lr", "(0, 1]", self.lr)
        _check(finite(self.epochs) and self.epochs > 0, "epochs", "> 0", self.epochs)
        _check(self.max_seconds is None or (finite(self.max_seconds) and self.max_seconds > 0),
               "max_seconds", "> 0 (or unset)", self.max_seconds)
        _check(finite(self.rotate_train) and 0.0 <= self.rotate_train <= 180.0, "rotate_train", "[0, 180] degrees", self.rotate_train)
        _check(is_int(self.seed) and 0 <= self.seed <= MAX_SEED, "seed", "an integer in [0, 2**63 - 1]", self.seed)
        _check(_choice(self.device, DEVICES), "device", f"one of {', '.join(DEVICES)}", self.device)
        _check(finite(self.grad_clip) and self.grad_clip > 0, "grad_clip", "> 0", self.grad_clip)
        # an upper bound: Adam adds weight_decay * w to the gradient after clipping, and a huge
        # value (~1e38) overflows that sum and writes NaN into the weights in one step
        _check(finite(self.weight_decay) and 0 <= self.weight_decay <= 1, "weight_decay", "in [0, 1]", self.weight_decay)
        _check(is_int(self.steps_per_epoch) and self.steps_per_epoch >= 1, "steps_per_epoch", "an integer >= 1", self.steps_per_epoch)
        _check(is_int(self.log_every) and self.log_every >= 1, "log_every", "an integer >= 1", self.log_every)
        _check(_choice(self.lr_schedule, ("onecycle", "constant")), "lr_schedule", "onecycle or constant", self.lr_schedule)
        _check(isinstance(self.compile, bool), "compile", "true or false", self.compile)
        _check(is_int(self.check_every) and 1 <= self.check_every <= 100000, "check_every", "an integer in [1, 100000]", self.check_every)
        _check(isinstance(self.cuda_graph, bool), "cuda_graph", "true or false", self.cuda_graph)
        _check(isinstance(self.options, dict) and all(isinstance(k, str) and (isinstance(v, (str, bool)) or finite(v))
                                                      for k, v in self.options.items()),
               "options", "a mapping of option names to strings, numbers or true / false", self.options)
        return self

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        return from_mapping(cls, d, "a training config", "config field(s)")


def from_mapping(cls, d, what: str, fields_name: str):
    """cls(**d), refusing a d that is not a mapping or names fields cls does not have."""
    if not isinstance(d, dict):
        raise ConfigError(f"{what} must be a mapping of field names to values, got {type(d).__name__}")
    unknown = sorted(set(d) - {f.name for f in fields(cls)})
    if unknown:
        raise ConfigError(f"unknown {fields_name}: {', '.join(unknown)}")
    return cls(**d)


def finite(v) -> bool:
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:          # an int too large for a float (e.g. 10**400)
        return False


def _choice(v, allowed) -> bool:
    """v is a string among allowed (no TypeError for unhashable junk such as lists)."""
    return isinstance(v, str) and v in allowed


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def short_repr(value, limit: int = 60) -> str:
    """repr for an error message: one line, at most `limit` characters, never raises."""
    try:
        r = repr(value)
    except Exception:                     # e.g. ints over Python's 4300-digit str limit
        r = f"<{type(value).__name__}>"
    r = " ".join(r.split())
    return r if len(r) <= limit else r[: limit - 3] + "..."


def _check(ok: bool, name: str, allowed: str, value) -> None:
    if not ok:
        raise ConfigError(f"{name} must be {allowed}, got {short_repr(value)}")
