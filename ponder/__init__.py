"""ponder: PonderNet (Banino et al. 2021) — halting math, losses, models, training, evaluation.

What a user imports, by name from here:
    PonderNet        the model: a step function s(x, h_n) -> (y_n, h_{n+1}, λ_n) run again and again (ponder.halting)
    ponder           inference that samples a halt at each step and really stops (ponder.inference)
    TrainConfig      everything a run needs (ponder.config)
    get_task, TASKS, register   the task registry (ponder.tasks)
    train            the training loop: a TrainConfig in, a trained PonderNet out (ponder.training.loop)
    run              one run start to end: train, save a run folder, measure, record (ponder.training.lifecycle)
    load_checkpoint  a saved run folder back as its model and card, nothing unpickled (ponder.store.checkpoint)
    measure_test     the standard test measurement of a model (ponder.analysis.unroll)

Each is imported on first use (a module __getattr__): `import ponder` stays light, and the parts it names pull
in torch only when touched.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .version import __version__  # noqa: F401  (the public face names it)

_HOMES = {                                 # name -> the module that defines it
    "PonderNet": "ponder.halting",
    "ponder": "ponder.inference",
    "TrainConfig": "ponder.config",
    "get_task": "ponder.tasks",
    "TASKS": "ponder.tasks",
    "register": "ponder.tasks",
    "train": "ponder.training.loop",
    "run": "ponder.training.lifecycle",
    "load_checkpoint": "ponder.store.checkpoint",
    "measure_test": "ponder.analysis.unroll",
}
__all__ = ["__version__", "PonderNet", "ponder", "TrainConfig", "get_task", "TASKS", "register", "train", "run",
           "load_checkpoint", "measure_test"]


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'ponder' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value                # found here directly from now on
    return value


def __dir__():
    return sorted(set(globals()) | set(_HOMES))


if TYPE_CHECKING:                          # for type checkers and editors; never run
    from .analysis.unroll import measure_test
    from .config import TrainConfig
    from .halting import PonderNet
    from .inference import ponder
    from .store.checkpoint import load_checkpoint
    from .tasks import TASKS, get_task, register
    from .training.lifecycle import run
    from .training.loop import train
