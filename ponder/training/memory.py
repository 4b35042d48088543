"""How much memory a training run needs at its peak, from its config's sizes, and whether that fits in
what the machine has free, so that a run too big is refused before it starts rather than OOM-killed.

A run at hidden 1024, batch 4096, N 200 needs ~32 GiB by a rough count of its tensors (41.8 GB for MNIST
by this estimate): enough to get a server OOM-killed. A run's peak is
    params     5 float32 copies of the weights: the weights, their gradients, Adam's two moments
               and the divergence guard's snapshot (ponder.training.loop)
  + max(train, inference)
      train      batch x (CNN feature maps + N x the cell's saved tensors): what autograd keeps for
                 the backward pass of one step, and the gradients it makes from them
      inference  a no-grad forward of 1,000 samples over N steps: the validation pass's chunk
                 (ponder.training.loop.validation_accuracy) and MNIST's test batch (ponder.analysis.unroll; parity's
                 test batch is 2,000, which this term undercounts, by half of a small term)
  + data       MNIST (training and validation images and labels) held by the loop
  + OVERHEAD   autograd and allocator bookkeeping that does not grow with the sizes
in floats per sample: the CNN's feature maps (C1 x 28 x 28 + C2 x 14 x 14 + the 784-pixel input; 8
times that for the coarse reader, which embeds 8 resolutions) and N x (hidden, and 10 logits etc.).
The constants K_* count how many tensors of those sizes are alive at the peak. They were fitted to
the peak RSS of train() measured on this project's 2-core CPU machine (bench/train_memory.py, torch
2.14.1, one thread, 2026-11-23; its output is in the comment below), then rounded up: the estimate is
meant to be on the safe side: 1.2x to 1.7x the measurement for the calibration configs (2.6x for a
tiny run, where OVERHEAD is most of it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..config import TrainConfig
from ..env import MAX_MB, env_number
from ..store.card import CheckpointError

FLOAT = 4                          # bytes of a float32
INFER_CHUNK = 1000                 # samples per no-grad forward: validation chunk and evaluation batch
K_ENC, K_STEP, K_HEAD = 3, 13, 40     # training: floats alive at the peak per CNN-map float, per hidden unit and
                                      # step (the cell's saved tensors and their gradients), per step (heads, loss)
K_ENC_INFER, K_HEAD_INFER = 1.8, 40   # the same for a no-grad forward (most tensors are freed at once), whose
                                      # hidden states kept per step are the task's infer_states (MNIST's readers:
                                      # all N, one stacked [N, B, H] tensor; the parity cell only the current one)
OVERHEAD = 48 * 2**20              # bytes that do not grow with the sizes (a 5-step parity run: 20 MB)
# Calibration: `python -m bench.train_memory` (one torch thread; measured = peak RSS of train() minus the
# RSS before it, in a fresh process; the estimate without the data, which the measurement does not count),
# 2026-11-23, this project's 2-core CPU machine, torch 2.14.1; the fitted constants above then give:
#   config (others: defaults)                    measured MB  estimated MB  est/meas
#   mnist hidden 64, N 20, batch 128                    148.4         200.9      1.35
#   mnist hidden 64, N 20, batch 512                    161.5         201.7      1.25
#   mnist hidden 256, N 50, batch 128                   199.7         300.6      1.51
#   mnist hidden 64, N 20, batch 2048                   532.5         648.4      1.22
#   mnist hidden 512, N 100, batch 256                  655.9         782.3      1.19
#   mnist coarse reader, hidden 64, N 20, batch 128     894.3        1143.0      1.28
#   parity hidden 512, N 100, batch 64                  144.2         226.8      1.57
#   parity hidden 256, N 100, batch 1024                848.6        1367.5      1.61
#   parity hidden 256, N 50, batch 256                  128.3         216.4      1.69
#   parity hidden 16, N 5, batch 8                       19.1          49.0      2.57
# From the first rounds (N x hidden dominated: parity H512 N100 B64 and H256 N100 B1024 give K_STEP 7.8
# for the parity cell, mnist H512 N100 B256 11; mnist B2048 gives K_ENC 2.3; the 1,000-image no-grad chunk
# 1.0 to 1.5 per CNN-map float), each constant rounded up.


@dataclass
class MemoryEstimate:
    """A training run's peak memory in bytes, by part."""
    params: int             # weights, gradients, Adam's moments, the divergence snapshot
    train: int              # one training step's activations and their gradients
    inference: int          # one no-grad chunk of INFER_CHUNK samples
    data: int               # the training data the loop holds
    overhead: int = OVERHEAD

    @property
    def total(self) -> int:
        return self.params + max(self.train, self.inference) + self.data + self.overhead

    def parts(self) -> dict:
        return {k: round(v / 2**20, 1) for k, v in
                dict(params=self.params, train=self.train, inference=self.inference, data=self.data,
                     overhead=self.overhead, total=self.total).items()}


def parameter_count(cfg: TrainConfig) -> int:
    """The model's parameters: ponder.tasks.build_model on the meta device (shapes only, no memory), so
    checking a huge config costs nothing and the count follows the model's layers."""
    import torch
    from ..tasks import build_model, model_config
    with torch.device("meta"):
        model = build_model(cfg.task, model_config(cfg), cfg.max_steps, cfg.lambda_p, cfg.lambda_input, cfg.lambda_head)
    return sum(p.numel() for p in model.parameters())


def _input_bytes(task, model_cfg, n: int) -> int:
    """Bytes one input adds to a no-grad forward of a model of model_cfg over n steps."""
    h = model_cfg.hidden
    return int(FLOAT * (K_ENC_INFER * task.feature_floats(model_cfg, n) + n * (task.infer_states * h + K_HEAD_INFER) + 3 * h))


def estimate(cfg: TrainConfig) -> MemoryEstimate:
    """The peak memory of ponder.training.loop.train(cfg) (and of the evaluation after it), in bytes."""
    from ..tasks import get_task
    task = get_task(cfg.task)
    enc, n, h = task.feature_floats(task.model_config(cfg), cfg.max_steps), cfg.max_steps, cfg.hidden
    train = int(FLOAT * cfg.batch_size * (K_ENC * enc + n * (K_STEP * h + K_HEAD)))
    infer = INFER_CHUNK * _input_bytes(task, task.model_config(cfg), n)
    return MemoryEstimate(params=5 * FLOAT * parameter_count(cfg), train=train, inference=infer, data=task.data_bytes)


def available_bytes(device: str = "cpu") -> Optional[int]:
    """Memory a job may use: $PONDER_MAX_JOB_MEMORY_MB when set (EnvError, one line, unless it is a finite number
    of megabytes); else the free memory of the GPU for a run that trains on one, or MemAvailable from /proc/meminfo
    (None where it cannot be read: no check)."""
    env = env_number("PONDER_MAX_JOB_MEMORY_MB", None, 0.0, MAX_MB)      # EnvError unless a finite number
    if env is not None:
        return int(env * 2**20)
    if device in ("auto", "cuda"):
        import torch
        if torch.cuda.is_available():
            return int(torch.cuda.mem_get_info()[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def mb(n: int) -> str:
    return f"{n / 2**20:,.0f} MB" if n < 10 * 2**30 else f"{n / 2**30:,.1f} GB"


def fit_message(cfg: TrainConfig, available: Optional[int] = None) -> str:
    """'' when cfg's estimated peak fits in `available` bytes (default: available_bytes()), else one line
    naming the estimate, the limit and what drives it."""
    available = available_bytes(cfg.device) if available is None else available
    if available is None:
        return ""
    est = estimate(cfg)
    if est.total <= available:
        return ""
    return (f"this run needs about {mb(est.total)} of memory at its peak (batch {cfg.batch_size} x N {cfg.max_steps} "
            f"steps x hidden {cfg.hidden}), more than the {mb(available)} available; use a smaller batch, N or "
            f"hidden size")


# ----------------------------------------------------------------------------- measuring a model

# The memory one measurement of one model may use (a page's or a command's test unroll, in batches): the Train
# form's largest model (coarse reader, hidden 512, N 100) needs 1,488 MB for a 1,000-image batch by this
# estimate, so no model the explorer trains measures in smaller batches than its training's own evaluation did.
MEASURE_MB = 2048
# The estimate against the peak RSS of unroll_stats (one torch thread, this machine, torch 2.14.1, 2026-11-25):
#   model (MNIST, hidden 64, N 20)            batch  measured MB  estimated MB  est/meas
#   cnn reader, channels 16 / 32               1000         86.6         148.1      1.71
#   cnn reader, channels 1024 / 16              300       1608.7        1665.9      1.04
#   cnn reader, channels 4096 / 8                20        429.2         441.6      1.03
#   cnn reader, channels 16 / 512               500        343.9         397.1      1.15
#   coarse reader, channels 16 / 32            1000        790.8        1090.2      1.38
#   coarse reader, channels 1024 / 16            20        980.6         886.6      0.90
#   coarse reader, channels 4096 / 8              5        980.5         882.7      0.90
# (python -m bench.infer_memory), so a measurement's batch is sized for MEASURE_MARGIN times the estimate (wide
# coarse readers: 1.12x their measurement).
MEASURE_MARGIN = 1.25


class MeasureMemoryError(CheckpointError):
    """A model that cannot be measured within the memory budget, not even one input at a time (one line)."""


def measure_budget() -> int:
    """Bytes one model's measurement may use: $PONDER_MAX_MEASURE_MEMORY_MB (default MEASURE_MB) megabytes; EnvError
    (one line) unless a finite number."""
    return int(env_number("PONDER_MAX_MEASURE_MEMORY_MB", float(MEASURE_MB), 0.0, MAX_MB) * 2**20)


def input_bytes(model) -> int:
    """Bytes one input adds to a no-grad forward of this PonderNet (the estimate's inference term, per input),
    from its step function's own config: an imported card's conv widths count, not the defaults. 0 for a step
    function of no registered task (nothing to estimate from)."""
    from ..tasks import TASKS
    mcfg = getattr(model.step_fn, "cfg", None)
    task = next((t for t in TASKS.values() if t.model_config_cls and isinstance(mcfg, t.model_config_cls)), None)
    return _input_bytes(task, mcfg, model.max_steps) if task is not None else 0


def measure_batch(model, wanted: int, budget: Optional[int] = None) -> int:
    """The batch a measurement of `model` runs: `wanted` inputs, or as many fewer as one forward needs to fit in
    the budget (default measure_budget()) beside the weights and OVERHEAD, MEASURE_MARGIN x the estimate an input. MeasureMemoryError (one line) when not
    even one input fits."""
    budget = measure_budget() if budget is None else budget
    fixed = FLOAT * sum(p.numel() for p in model.parameters()) + OVERHEAD
    per = int(MEASURE_MARGIN * input_bytes(model))
    fits = (budget - fixed) // per if per else wanted
    if fits < 1:
        cfg = model.step_fn.cfg
        widths = ", ".join(f"{k} {getattr(cfg, k)}" for k in ("channels1", "channels2") if hasattr(cfg, k))
        raise MeasureMemoryError(
            f"measuring this model needs about {mb(fixed + per)} for a single input (N {model.max_steps}, hidden "
            f"{cfg.hidden}{', ' + widths if widths else ''}), more than the {mb(budget)} a measurement may use "
            f"(PONDER_MAX_MEASURE_MEMORY_MB)")
    return int(min(wanted, fits))
