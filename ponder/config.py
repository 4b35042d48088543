"""Configuration dataclasses and their validation. One place says what values are allowed."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Optional

TASKS = ("mnist", "parity")
DEVICES = ("auto", "cpu", "cuda", "mps")
MAX_SEED = 2 ** 63 - 1


class ConfigError(ValueError):
    """A bad hyperparameter. The message names the field and the allowed range."""


MNIST_READERS = ("cnn", "rows", "coarse")
REGULARISERS = ("kl", "kl-reverse")
# Per-reader model sizes over MnistConfig's: the row reader's fc sees a 14 x 7 map per channel, so
# 16 second-layer channels keep it at 1568 x 128 weights (~1 MB a model, like the "cnn" reader's).
READER_DEFAULTS = {"rows": dict(channels2=16)}     # KL(p || p_G) (paper), KL(p_G || p) (reverse); see ponder/losses.py
ROWS_PER_STEP = (2, 4, 14, 28)   # the row reader's feature map has 14 rows, each 2 image rows high


@dataclass
class MnistConfig:
    """A CNN embedding + GRU cell over steps. `reader` says what the cell sees at step n."""
    channels1: int = 16      # first conv layer's channels (5x5, then 2x2 max-pool)
    channels2: int = 32      # second conv layer's channels (5x5, then a max-pool)
    embed: int = 128         # size of the image embedding fed to the cell
    hidden: int = 64         # GRU hidden size
    dropout: float = 0.0     # dropout on the embedding during training
    reader: str = "cnn"      # "cnn": the whole image at every step (step 1 is a full classifier);
                             # "rows": the first rows_per_step * n rows at step n (evidence grows);
                             # "coarse": the image at a growing resolution, 2x2 ... 28x28
    rows_per_step: int = 2   # "rows" reader: image rows revealed per step (2 -> all 28 rows by step 14)


@dataclass
class ParityConfig:
    """GRU cell fed the input vector at every step (paper / labml parity setting)."""
    n_elems: int = 8         # input vector length
    hidden: int = 64         # GRU hidden size


PARITY_PRESETS = {
    # name: n_elems, the k (number of non-zeros) trained on and tested on, and the test's easy and
    # hard ranges of k (what evaluate reports as `easy` / `hard`; without them: the two halves)
    "small": dict(n_elems=8, train_k=(1, 8), test_k=(1, 8)),          # ~1 minute on 2 CPU cores
    "medium": dict(n_elems=16, train_k=(1, 16), test_k=(1, 16)),
    "medium-extrapolation": dict(n_elems=16, train_k=(1, 8), test_k=(9, 16)),   # the paper's split, scaled to 16
    "large": dict(n_elems=32, train_k=(1, 32), test_k=(1, 32)),
    "video-15": dict(n_elems=15, train_k=(1, 15), test_k=(1, 15), easy=(1, 4), hard=(11, 15)),   # the video seed's
    # the video seed's extrapolation: trained on k <= 25, tested on all k; easy = seen k, hard = unseen 26..30
    "video-30-extrapolation": dict(n_elems=30, train_k=(1, 25), test_k=(1, 30), easy=(1, 25), hard=(26, 30)),
    "paper": dict(n_elems=64, train_k=(1, 64), test_k=(1, 64)),       # the paper's interpolation
    "extrapolation": dict(n_elems=96, train_k=(1, 48), test_k=(49, 96)),  # the paper's extrapolation
}


# Per-task defaults layered over TrainConfig's (parity needs a wider cell and more steps).
TASK_DEFAULTS = {
    "mnist": {},
    # parity: the reverse KL(p_G || p) by default: on the video's n = 15 it makes hard vectors take more expected
    # steps (+2.07 +- 0.84 at 15k steps, +0.66 +- 0.21 at 40k; 3 seeds each), the paper's KL(p || p_G) does not
    # (-0.72 +- 1.21 at 40k) (docs/findings.md §5)
    "parity": dict(hidden=128, lr=3e-3, epochs=6.0, batch_size=128, regulariser="kl-reverse"),
}


@dataclass
class TrainConfig:
    """Everything a run needs. Saved in the run folder; defaults give a useful MNIST model in ~1 min on 2 CPU cores."""
    task: str = "mnist"              # "mnist" or "parity"
    lambda_p: float = 0.2            # geometric prior parameter, prior mean 1/lambda_p steps
    beta: float = 0.01               # weight of the regulariser
    regulariser: str = "kl"          # "kl": KL(p || p_G), the paper's direction (the learned p first);
                                     # "kl-reverse": KL(p_G || p), the prior first (labml's, the video's)
    max_steps: int = 20              # N, the most steps a sample can take
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
    steps_per_epoch: int = 500       # parity only: batches per "epoch" (data is generated, endless)
    log_every: int = 10              # report progress every this many optimiser steps
    compile: bool = False            # torch.compile the step function (helps on GPU only)
    lr_schedule: str = "onecycle"    # "onecycle" (warm-up then cosine decay) or "constant"
    check_every: int = 50            # read the device's divergence flag (and snapshot the weights) every this many
                                     # steps and at log points; a NaN/inf run stops at most this many steps late
    cuda_graph: bool = True          # on CUDA: capture the whole training step in a CUDA graph and replay it
                                     # (eager steps where capture fails; ignored on CPU/MPS and with compile)

    @classmethod
    def for_task(cls, task: str, **overrides) -> "TrainConfig":
        """Defaults that suit the task; overrides win."""
        base = dict(TASK_DEFAULTS.get(task, {}))
        base.update(overrides)
        return cls(task=task, **base)

    def validate(self) -> "TrainConfig":
        _check(_choice(self.task, TASKS), "task", f"one of {', '.join(TASKS)}", self.task)
        _check(finite(self.lambda_p) and 0.0 < self.lambda_p <= 1.0, "lambda_p", "(0, 1]", self.lambda_p)
        _check(finite(self.beta) and self.beta >= 0.0, "beta", ">= 0", self.beta)
        _check(_choice(self.regulariser, REGULARISERS), "regulariser", f"one of {', '.join(REGULARISERS)}", self.regulariser)
        _check(_choice(self.reader, MNIST_READERS), "reader", f"one of {', '.join(MNIST_READERS)}", self.reader)
        _check(is_int(self.rows_per_step) and self.rows_per_step in ROWS_PER_STEP, "rows_per_step",
               f"one of {', '.join(map(str, ROWS_PER_STEP))}", self.rows_per_step)
        _check(is_int(self.max_steps) and 1 <= self.max_steps <= 200, "max_steps", "an integer in [1, 200]", self.max_steps)
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
        _check(_choice(self.parity_preset, PARITY_PRESETS), "parity_preset", f"one of {', '.join(PARITY_PRESETS)}", self.parity_preset)
        _check(is_int(self.steps_per_epoch) and self.steps_per_epoch >= 1, "steps_per_epoch", "an integer >= 1", self.steps_per_epoch)
        _check(is_int(self.log_every) and self.log_every >= 1, "log_every", "an integer >= 1", self.log_every)
        _check(_choice(self.lr_schedule, ("onecycle", "constant")), "lr_schedule", "onecycle or constant", self.lr_schedule)
        _check(isinstance(self.compile, bool), "compile", "true or false", self.compile)
        _check(is_int(self.check_every) and 1 <= self.check_every <= 100000, "check_every", "an integer in [1, 100000]", self.check_every)
        _check(isinstance(self.cuda_graph, bool), "cuda_graph", "true or false", self.cuda_graph)
        return self

    def model_config(self):
        """The model dataclass this run trains."""
        if self.task == "mnist":
            return MnistConfig(hidden=self.hidden, reader=self.reader, rows_per_step=self.rows_per_step,
                               **READER_DEFAULTS.get(self.reader, {}))
        return ParityConfig(n_elems=PARITY_PRESETS[self.parity_preset]["n_elems"], hidden=self.hidden)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        return from_mapping(cls, d, "a training config", "config field(s)")


def model_config_from_dict(task: str, d: dict):
    cls = {"mnist": MnistConfig, "parity": ParityConfig}.get(task) if isinstance(task, str) else None
    if cls is None:
        raise ConfigError(f"task must be one of {', '.join(TASKS)}, got {task!r}")
    cfg = from_mapping(cls, d, f"a {task} model config", f"{task} model field(s)")
    for f in fields(cls):
        v = getattr(cfg, f.name)
        if f.name == "dropout":
            _check(finite(v) and 0.0 <= v < 1.0, f.name, "[0, 1)", v)
        elif f.name == "reader":
            _check(_choice(v, MNIST_READERS), f.name, f"one of {', '.join(MNIST_READERS)}", v)
        elif f.name == "rows_per_step":
            _check(is_int(v) and v in ROWS_PER_STEP, f.name, f"one of {', '.join(map(str, ROWS_PER_STEP))}", v)
        else:
            _check(is_int(v) and 1 <= v <= 4096, f.name, "an integer in [1, 4096]", v)
    return cfg


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
