"""The training loop. It knows nothing about the CLI or the UI: progress goes to a callback,
and it stops cleanly on a cancel flag, a time budget, or a non-finite loss. One update and the
divergence checks: ponder/training/step.py.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

import torch

from .. import data as D
from ..config import TrainConfig
from .fastpath import choose_step_mode
from ..halting import PonderNet, answer_mixture, expected_steps, step_probs
from .progress import StepForecast, StepTimer, cancel_reason
from ..store.record import RunRecord, new_record
from ..tasks import build_model, get_task, model_config, validate
from .resume import TrainState, restore, snapshot
from .step import Health, StepOut, Update


@dataclass
class Progress:
    """One progress report. Training metrics are over the last logged batch."""
    step: int                  # optimiser steps done
    total_steps: int           # steps planned from `epochs` (the time budget may end sooner)
    epoch: float               # fractional epoch
    loss: float                # rec + beta * reg
    rec: float                 # reconstruction loss
    reg: float                 # the regulariser: KL(p || p_G), KL(p_G || p) for "kl-reverse", their sum for "kl-both"
    accuracy: float            # batch accuracy of the p-weighted prediction
    mean_steps: float          # batch mean of E[n] = sum_n n p_n
    elapsed: float             # seconds since training started
    lr: float
    halting: Optional[list] = None         # mean p_n over the batch, [N]
    val_accuracy: Optional[float] = None   # set on epoch ends
    max_seconds: Optional[float] = None
    forecast_steps: Optional[int] = None   # the step the run is expected to end at (ponder.training.progress.StepForecast)

    def fraction_done(self) -> float:
        f = self.step / max(self.total_steps, 1)
        if self.max_seconds:
            f = max(f, self.elapsed / self.max_seconds)
        return min(f, 1.0)


@dataclass
class TrainResult:
    """The trained model and how training ended: its record (status, reason, steps, seconds, device; the
    lifecycle adds the name and test metrics) plus what a card does not hold."""
    model: PonderNet
    record: RunRecord                        # status / reason / steps / train_seconds (the training loop's, the time
                                             # budget's clock; not the final validation) / device (its full name)
    validation_seconds: float = 0.0          # the final validation pass after the loop
    device: str = "cpu"                      # the torch device the model is on ('cuda', 'cpu')
    history: list = field(default_factory=list)   # Progress dicts
    step_mode: str = "eager"                 # how the steps ran: "cuda_graph" (captured and replayed) or "eager"
    step_mode_reason: str = ""               # why eager where a CUDA graph was possible or asked for



def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' asked for, but no CUDA GPU is available")
    return torch.device(name)


def device_name(dev) -> str:
    """'cuda (NVIDIA H100 80GB HBM3)' or 'cpu': what a card records."""
    dev = torch.device(dev)
    if dev.type == "cuda" and torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name(dev)})"
    return str(dev)


def trains_on(name: str = "auto") -> str:
    """What a run with TrainConfig.device = name trains on, as its card names it: 'cpu', 'mps' or
    'cuda (NVIDIA H100 80GB HBM3)' ("auto": cuda > mps > cpu). The train form shows it."""
    return device_name(pick_device(name))


def lr_at(cfg: TrainConfig, progress: float) -> float:
    """Learning rate at a fraction of training done: 5% linear warm-up then cosine to 2% (onecycle)."""
    if cfg.lr_schedule == "constant":
        return cfg.lr
    warm = 0.05
    if progress < warm:
        return cfg.lr * (0.1 + 0.9 * progress / warm)
    t = min((progress - warm) / (1 - warm), 1.0)
    return cfg.lr * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * t)))


def batch_accuracy_t(model: PonderNet, y_steps: torch.Tensor, log_p: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Accuracy of the p-weighted mixture sum_n p_n probs(y_n), a 0-d tensor on the device (no sync).
    y_steps [N, B, ...], log_p [N, B], target [B]."""
    mix = answer_mixture(step_probs(model, y_steps), log_p)                # [B, C]
    return (mix.argmax(1) == target.long()).float().mean()


def batch_accuracy(model: PonderNet, y_steps: torch.Tensor, log_p: torch.Tensor, target: torch.Tensor) -> float:
    return batch_accuracy_t(model, y_steps, log_p, target).item()


@torch.no_grad()
def validation_accuracy(model: PonderNet, x: torch.Tensor, y: torch.Tensor, autocast, chunk: int = 1000,
                        cancel: Optional[threading.Event] = None) -> Optional[float]:
    """Accuracy on a validation set, in chunks; None when `cancel` is set between two chunks."""
    was = model.training
    model.eval()
    correct = 0
    for i in range(0, len(y), chunk):
        if cancel is not None and cancel.is_set():
            model.train(was)
            return None
        with autocast():
            out = model(x[i:i + chunk])
        correct += batch_accuracy(model, out.y, out.log_p, y[i:i + chunk]) * len(y[i:i + chunk])
    model.train(was)
    return correct / len(y)


# ----------------------------------------------------------------------------- the loop

def setup(cfg: TrainConfig, data: Optional[D.Mnist], data_dir: Optional[str], model: Optional[PonderNet]):
    """What every training loop starts from: (device, model on it in train mode, the task's batches, total steps).
    Validates cfg and seeds torch; builds the model from cfg when none is given."""
    validate(cfg)
    torch.manual_seed(cfg.seed)
    device = pick_device(cfg.device)
    if model is None:
        model = build_model(cfg.task, model_config(cfg), cfg.max_steps, cfg.lambda_p, cfg.lambda_input, cfg.lambda_head,
                            cfg.method, cfg.act_epsilon)
    model.to(device).train()
    task = get_task(cfg.task)
    if task.uses_data and data is None:
        data = task.load_data(data_dir)
    batches = task.batches(cfg, device, data)
    return device, model, batches, max(1, math.ceil(cfg.epochs * batches.per_epoch))


@dataclass
class Reports:
    """The run's progress reports: each goes to the callback and into `history` (one row per step: the
    final report of a step already reported, which adds its validation, takes that row's place)."""
    model: PonderNet
    cfg: TrainConfig
    total: int                                 # steps the epochs plan
    per_epoch: int                             # batches per epoch
    callback: Optional[Callable[[Progress], None]] = None
    history: list = field(default_factory=list)    # Progress dicts

    def __post_init__(self):
        self.forecast = StepForecast(self.total, self.cfg.max_seconds)

    def last(self, key: str):
        return self.history[-1][key] if self.history else None

    def report(self, out: StepOut, step: int, lr: float, elapsed: float, val: Optional[float] = None,
               final: bool = False) -> None:
        N = out.log_p.shape[0]
        acc = batch_accuracy_t(self.model, out.y, out.log_p, out.target)
        mean_steps = expected_steps(out.log_p).mean()
        halting = out.log_p.exp().mean(1)                                               # [N]
        # everything this report shows in one read from the device
        values = torch.cat([torch.stack([out.loss, out.rec, out.reg, acc, mean_steps]).float(), halting]).tolist()
        p = Progress(step=step, total_steps=self.total, epoch=step / self.per_epoch, loss=values[0], rec=values[1],
                     reg=values[2], accuracy=values[3], mean_steps=values[4], elapsed=elapsed, lr=lr,
                     halting=values[5:5 + N], val_accuracy=val, max_seconds=self.cfg.max_seconds,
                     forecast_steps=self.forecast.finish(step) if final else self.forecast.update(step, elapsed))
        if final and self.last("step") == step:
            self.history.pop()
        self.history.append(asdict(p))
        if self.callback is not None:
            self.callback(p)

    def ended_at(self, step: int) -> None:
        """The run ended at `step` (a failed one at the step of the weights kept): the last report says so."""
        if self.history:
            self.history[-1]["forecast_steps"] = step


def host_stop(cfg: TrainConfig, cancel: Optional[threading.Event], timer: StepTimer, elapsed: float,
              step: int) -> Optional[tuple]:
    """(status, reason) when the run must stop before its next step: cancelled, or the time budget used up."""
    if cancel is not None and cancel.is_set():
        return "cancelled", f"{cancel_reason(cancel)} at step {step}"
    if timer.out_of_time(elapsed):
        return "completed", f"stopped by the time budget of {cfg.max_seconds:g} s at step {step}"
    return None


def train(cfg: TrainConfig, data: Optional[D.Mnist] = None, data_dir: Optional[str] = None,
          callback: Optional[Callable[[Progress], None]] = None,
          cancel: Optional[threading.Event] = None, model: Optional[PonderNet] = None,
          on_phase: Optional[Callable[[str], None]] = None,
          on_model: Optional[Callable[[PonderNet], None]] = None, resume: Optional[TrainState] = None,
          on_checkpoint: Optional[Callable[[TrainState], None]] = None,
          checkpoint_seconds: float = 180.0) -> TrainResult:
    """Train a PonderNet. Returns the model (last good weights) and how training ended.

    data:     the data set of a task that uses one (MNIST), from data_dir when not given; batches: Task.batches.
    cancel:   set it from another thread to stop after the current step ("cancelled"), or between the 1,000-sample
              chunks of an epoch-end validation pass; a cancelled run gets no final validation pass, so train()
              returns within one step of the cancel. A ponder.training.progress.Cancel also says why (its reason's start).
    cfg.max_seconds: the time budget of the training loop (result.record.train_seconds): the loop stops before a
              step it expects to end past the budget (ponder.training.progress.StepTimer), so it ends at the budget
              give or take one step's jitter. The LR schedule follows whichever of steps or time is further
              along, so a budgeted run still anneals. The final validation pass comes after the budget
              (result.validation_seconds; 5,000 MNIST images: ~0.7 s on 2 idle CPU cores), announced by
              on_phase("validating").
    on_model: told the model once built, before the first step (the explorer reads it between steps).
    Each progress report carries forecast_steps, the step the run is expected to end at
    (ponder.training.progress.StepForecast: never rises above what it said, never below the current step).
    A step never waits for the device. A non-finite loss, gradient norm or weight is detected on
    the device (DivergenceGuard); the host reads that every cfg.check_every steps and at log
    points, so a diverging run stops at most check_every steps late, "failed" with the step it
    went bad at. A non-finite loss or gradient makes the (fused) optimiser skip that update and
    all later ones, so the returned weights are those of the last good step; an update that made a
    weight non-finite is undone from the snapshot taken at the last check that found the run
    healthy. On CUDA the step is captured in a CUDA graph and replayed (cfg.cuda_graph).
    resume:   a TrainState (ponder.training.resume) of this cfg to go on from: its weights, Adam's moments, the
              batch stream, the step, the seconds spent and the history.
    on_checkpoint: given a TrainState after a healthy check once checkpoint_seconds have passed since the last.
    """
    device, model, batches, total = setup(cfg, data, data_dir, model)
    if on_model is not None:
        on_model(model)
    update = Update(cfg, model, device, *choose_step_mode(cfg, device))
    if resume is not None:
        restore(resume, cfg, model, update, batches)
    health = Health(update)                    # the weights of the last healthy check
    reports = Reports(model, cfg, total, batches.per_epoch, callback)
    timer = StepTimer(cfg.max_seconds)
    status, reason = "completed", ""
    stop = None                # (status, reason) of a host-side stop: cancel or the time budget
    step, last, lr = 0, None, cfg.lr          # optimiser steps run (after a failure: the step of the weights kept)
    t0 = time.perf_counter()
    if resume is not None:
        step, t0, reports.history = resume.step, t0 - resume.elapsed, list(resume.history)
        health.good_step = health.checked = step
    saved_at = time.perf_counter()
    for x, y in batches:
        elapsed = time.perf_counter() - t0
        if step >= total:
            break
        stop = host_stop(cfg, cancel, timer, elapsed, step)
        if stop is not None:
            break
        lr = lr_at(cfg, max(step / total, elapsed / cfg.max_seconds if cfg.max_seconds else 0.0))
        update.set_lr(lr, step / total)
        last = update(x, y)                    # queued on the device: no wait
        step += 1
        epoch_end = step % batches.per_epoch == 0
        log = step % cfg.log_every == 0 or epoch_end or step == total
        failure = health.check(step) if log or step % cfg.check_every == 0 else None
        if failure is not None:
            status, (reason, step) = "failed", failure
            break
        if log and step < total:               # the last step's report comes after the loop
            val = validation_accuracy(model, *batches.validation(), update.autocast, cancel=cancel) if epoch_end else None
            reports.report(last, step, lr, time.perf_counter() - t0, val)
        if on_checkpoint is not None and health.checked == step and time.perf_counter() - saved_at >= checkpoint_seconds:
            on_checkpoint(snapshot(cfg, step, time.perf_counter() - t0, reports.history, model, update, batches))
            saved_at = time.perf_counter()
        timer.add(time.perf_counter() - t0 - elapsed)          # this step, its check and report included

    failure = health.check(step) if status != "failed" and health.checked != step else None
    if failure is not None:                    # the steps since the last check
        status, (reason, step) = "failed", failure
    if on_checkpoint is not None and status != "failed" and stop is not None and stop[0] == "cancelled":
        on_checkpoint(snapshot(cfg, step, time.perf_counter() - t0, reports.history, model, update, batches))
    seconds = time.perf_counter() - t0         # the training loop: what the budget limits
    if status != "failed" and stop is not None:
        status, reason = stop
    if status != "failed" and last is not None:
        reported = reports.last("step") == step
        if status == "completed" and not (reported and reports.last("val_accuracy") is not None):
            if on_phase is not None:           # a completed run ends on a validation pass (not counted
                on_phase("validating")         # in the budget); a cancel returns at once, without one
            val = validation_accuracy(model, *batches.validation(), update.autocast, cancel=cancel)
            reports.report(last, step, lr, seconds, val, final=True)
        elif not reported:
            reports.report(last, step, lr, seconds, final=True)
    reports.ended_at(step)
    model.eval()
    mode, mode_reason = update.step_mode()
    record = new_record(cfg, {}, status=status, reason=reason, device=device_name(device),   # model config: when saved
                        train_seconds=seconds, steps=step)
    return TrainResult(model=model, record=record, validation_seconds=time.perf_counter() - t0 - seconds,
                       device=str(device), history=reports.history, step_mode=mode, step_mode_reason=mode_reason)
