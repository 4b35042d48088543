"""What a measurement of a model may cost in compute, beside what it may use in memory (ponder.training.memory):
a page view's measurement of one model (its test items through all N steps) may cost at most
$PONDER_MAX_MEASURE_GFLOP (default MEASURE_GFLOP) billion floating-point operations. A measurement that would cost
more runs on fewer items (affordable_items: the numbers it shows say on how many), and a model of which not even
one item fits is refused in one line before anything runs; an import is refused at once for that.

The cost of one item is counted, not guessed: one probe input of the model's task through a full unroll, counting
every matrix product's and convolution's multiply-adds at torch's dispatch (the numbers torch's FlopCounterMode gives,
without its import of torch._dynamo), so a 1,024-wide first conv counts its 784 positions, which its parameter
count, 2 x parameters x N, undercounts 8-fold. Measured on this project's 2-core machine
(2026-11-28, one torch thread, load 8; a batch of 256 probe inputs): 10 to 23 GFLOP/s, so the default, 60 GFLOP,
is 3 to 6 s a measurement there. The shipped MNIST models cost 4.7 to 6.6 MFLOP an item (2,000 items: 13 GFLOP),
parity-15 0.18 MFLOP; an MNIST import with a 1,024-wide first conv 362 MFLOP (166 items fit), a parity model of
n 2,000, hidden 512, N 100 772 MFLOP (77 items).
"""
from __future__ import annotations

import weakref
from typing import Optional

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..env import env_number
from ..store.card import CheckpointError

MEASURE_GFLOP = 60.0        # default budget of one measurement (PONDER_MAX_MEASURE_GFLOP), in 10^9 FLOP
MAX_GFLOP = 1e9             # the largest the variable may say
_COUNTED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()     # model -> FLOP of one item


class MeasureComputeError(CheckpointError):
    """A model of which not even one item can be measured within the compute budget (one line)."""


def compute_budget() -> float:
    """FLOP one measurement may cost: $PONDER_MAX_MEASURE_GFLOP (default MEASURE_GFLOP) x 10^9; EnvError (one line)
    unless a finite number."""
    return env_number("PONDER_MAX_MEASURE_GFLOP", MEASURE_GFLOP, 0.0, MAX_GFLOP) * 1e9


class _FlopCount(TorchDispatchMode):
    """Counts the multiply-adds of the matrix products and convolutions that run under it (2 FLOP each), as torch's
    FlopCounterMode does, without its import of torch._dynamo (seconds, and a cache folder written in /tmp)."""

    def __init__(self):
        super().__init__()
        self.flops = 0

    @classmethod
    def _should_skip_dynamo(cls) -> bool:      # no torch.compile runs under it: its __torch_dispatch__ is left as it
        return False                          # is, not wrapped in torch._dynamo.disable (whose import it would pay)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name in ("mm", "addmm", "bmm", "baddbmm"):
            a, b = (args[0], args[1]) if name in ("mm", "bmm") else (args[1], args[2])
            self.flops += 2 * a.numel() * b.shape[-1]                     # [.., m, k] @ [.., k, n]: 2 m k n
        elif name in ("convolution", "_convolution"):
            w = args[1]
            self.flops += 2 * out.numel() * w[0].numel()                  # each output: in/groups x kernel weights
        return out


def item_flops(model) -> int:
    """FLOP of one item through all of the model's N steps (no grad), counted on its task's probe input; counted
    once per model object. 2 x parameters x N for a step function of no registered task."""
    if model in _COUNTED:
        return _COUNTED[model]
    from ..tasks import TASKS
    mcfg = getattr(model.step_fn, "cfg", None)
    task = next((t for t in TASKS.values() if t.model_config_cls and isinstance(mcfg, t.model_config_cls)), None)
    x = task.probe_inputs(mcfg) if task is not None else None
    n = 2 * sum(p.numel() for p in model.parameters()) * model.max_steps
    if x is not None:
        counter = _FlopCount()
        was = model.training
        model.eval()
        try:
            with torch.no_grad(), counter:
                model(x[-1:])
            n = max(1, counter.flops)
        finally:
            model.train(was)
    _COUNTED[model] = n
    return n


def affordable_items(model, wanted: int, times: int = 1, budget: Optional[float] = None) -> int:
    """How many of `wanted` items a measurement of `model` runs (each measured `times` times: sets, rotations)
    within the compute budget (default compute_budget()): all of them, or as many fewer as fit. MeasureComputeError
    (one line) when not even one fits."""
    budget = compute_budget() if budget is None else budget
    per = item_flops(model) * max(1, times)
    fits = int(budget // per)
    if fits < 1:
        raise MeasureComputeError(
            f"measuring this model costs about {per / 1e9:,.2f} GFLOP for a single input (N {model.max_steps}, "
            f"{sum(p.numel() for p in model.parameters()):,} parameters), more than the {budget / 1e9:,.0f} GFLOP a "
            f"measurement may cost (PONDER_MAX_MEASURE_GFLOP)")
    return int(min(wanted, fits))
