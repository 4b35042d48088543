"""The training loop. It knows nothing about the CLI or the UI: progress goes to a callback,
and it stops cleanly on a cancel flag, a time budget, or a non-finite loss.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

import torch

from . import data as D
from .config import TrainConfig
from .fastpath import GRADIENT, GRAPH_WARMUP, LOSS, DivergenceGuard, GraphedStep, choose_step_mode
from .halting import PonderNet, answer_mixture, expected_steps, step_probs
from .losses import ponder_loss
from .progress import StepForecast, StepTimer
from .tasks import build_model, get_task


@dataclass
class Progress:
    """One progress report. Training metrics are over the last logged batch."""
    step: int                  # optimiser steps done
    total_steps: int           # steps planned from `epochs` (the time budget may end sooner)
    epoch: float               # fractional epoch
    loss: float                # rec + beta * reg
    rec: float                 # reconstruction loss
    reg: float                 # the regulariser: KL(p || p_G), or KL(p_G || p) for "kl-reverse"
    accuracy: float            # batch accuracy of the p-weighted prediction
    mean_steps: float          # batch mean of E[n] = sum_n n p_n
    elapsed: float             # seconds since training started
    lr: float
    halting: Optional[list] = None         # mean p_n over the batch, [N]
    val_accuracy: Optional[float] = None   # set on epoch ends
    max_seconds: Optional[float] = None
    forecast_steps: Optional[int] = None   # the step the run is expected to end at (ponder.progress.StepForecast)

    def fraction_done(self) -> float:
        f = self.step / max(self.total_steps, 1)
        if self.max_seconds:
            f = max(f, self.elapsed / self.max_seconds)
        return min(f, 1.0)


@dataclass
class TrainResult:
    model: PonderNet
    config: TrainConfig
    status: str                              # completed / cancelled / failed (a used-up time budget: completed)
    reason: str = ""
    steps: int = 0
    seconds: float = 0.0                     # the training loop (the time budget's clock), not the final validation
    validation_seconds: float = 0.0          # the final validation pass after the loop
    device: str = "cpu"
    history: list = field(default_factory=list)   # Progress dicts
    step_mode: str = "eager"                 # how the steps ran: "cuda_graph" (captured and replayed) or "eager"
    step_mode_reason: str = ""               # why eager where a CUDA graph was possible or asked for

    @property
    def partial(self) -> bool:
        return self.status in ("cancelled", "failed")


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

@dataclass
class StepOut:
    """What one training step leaves on the device (detached; in a graph these are its static outputs)."""
    loss: torch.Tensor         # 0-d
    rec: torch.Tensor          # 0-d
    reg: torch.Tensor          # 0-d
    y: torch.Tensor            # [N, B, ...] per-step outputs
    log_p: torch.Tensor        # [N, B]
    target: torch.Tensor       # [B]


def setup(cfg: TrainConfig, mnist: Optional[D.Mnist], data_dir: Optional[str], model: Optional[PonderNet]):
    """What every training loop starts from: (device, model on it in train mode, the task's batches, total steps).
    Validates cfg and seeds torch; builds the model from cfg when none is given."""
    cfg.validate()
    torch.manual_seed(cfg.seed)
    device = pick_device(cfg.device)
    if model is None:
        model = build_model(cfg.task, cfg.model_config(), cfg.max_steps, cfg.lambda_p)
    model.to(device).train()
    task = get_task(cfg.task)
    if task.uses_data and mnist is None:
        mnist = task.load_data(data_dir)
    batches = task.batches(cfg, device, mnist)
    return device, model, batches, max(1, math.ceil(cfg.epochs * batches.per_epoch))


def train(cfg: TrainConfig, mnist: Optional[D.Mnist] = None, data_dir: Optional[str] = None,
          callback: Optional[Callable[[Progress], None]] = None,
          cancel: Optional[threading.Event] = None, model: Optional[PonderNet] = None,
          on_phase: Optional[Callable[[str], None]] = None) -> TrainResult:
    """Train a PonderNet. Returns the model (last good weights) and how training ended.

    mnist:    the data set of a task that uses one (ponder.tasks: MNIST), loaded from data_dir when not given;
              training batches come from the task (ponder.tasks.Task.batches).
    cancel:   set it from another thread to stop after the current step ("cancelled"), or between the
              1,000-sample chunks of an epoch-end validation pass; a cancelled run gets no final
              validation pass, so train() returns within one step of the cancel.
    cfg.max_seconds: the time budget of the training loop (result.seconds): the loop stops before a
              step it expects to end past the budget (ponder.progress.StepTimer), so it ends at the
              budget give or take one step's jitter. The LR schedule follows whichever of steps or
              time is further along, so a budgeted run still anneals. The final validation pass
              comes after the budget (result.validation_seconds; 5,000 MNIST images: ~0.7 s on 2 idle
              CPU cores), announced by on_phase("validating").
    Each progress report carries forecast_steps, the step the run is expected to end at
    (ponder.progress.StepForecast: never rises above what it said, never below the current step).
    A step never waits for the device. A non-finite loss, gradient norm or weight is detected on
    the device (DivergenceGuard); the host reads that every cfg.check_every steps and at log
    points, so a diverging run stops at most check_every steps late, "failed" with the step it
    went bad at. A non-finite loss or gradient makes the (fused) optimiser skip that update and
    all later ones, so the returned weights are those of the last good step; an update that made a
    weight non-finite is undone from the snapshot taken at the last check that found the run
    healthy. On CUDA the step is captured in a CUDA graph and replayed (cfg.cuda_graph).
    """
    device, model, batches, total = setup(cfg, mnist, data_dir, model)
    mode, mode_reason = choose_step_mode(cfg, device)
    graphed = mode == "cuda_graph"
    params = [p for p in model.parameters()]
    # fused Adam: one kernel for all parameters instead of a loop of small ops (0.55 -> 0.16 ms a step on 2 CPU cores).
    # In a CUDA graph it must be capturable, and its learning rate a device tensor that each step refills.
    lr = torch.tensor(cfg.lr, dtype=torch.float32, device=device) if graphed else cfg.lr
    opt = torch.optim.Adam(params, lr=lr, weight_decay=cfg.weight_decay,
                           fused=device.type in ("cpu", "cuda"), capturable=graphed)
    guard = DivergenceGuard(device)
    skips = bool(opt.param_groups[0]["fused"])      # only the fused Adam takes found_inf
    if skips:
        opt.found_inf = guard.skip
    use_amp = device.type == "cuda"

    def autocast():
        # no cast cache inside a captured step: its cached bf16 weights would outlive the capture
        return torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp, cache_enabled=not graphed)

    forward = torch.compile(model) if cfg.compile else model

    def train_step(x: torch.Tensor, y: torch.Tensor) -> StepOut:
        """One update: forward, loss, backward, clipping, Adam, divergence record. Queues device work, never syncs."""
        with autocast():
            out = forward(x)
        N, B = out.log_p.shape
        step_losses = model.step_fn.loss(out.y.flatten(0, 1), y.repeat(N)).view(N, B)   # [N, B]
        loss, rec, reg = ponder_loss(step_losses, out.log_p, cfg.lambda_p, cfg.beta, cfg.regulariser)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)                   # 0-d, on the device
        guard.before_update(loss, gnorm)
        opt.step()
        guard.after_update(params)
        return StepOut(loss.detach(), rec.detach(), reg.detach(), out.y.detach(), out.log_p.detach(), y)

    run_step = GraphedStep(train_step, device) if graphed else train_step

    def set_lr(value: float) -> None:
        for g in opt.param_groups:
            if isinstance(g["lr"], torch.Tensor):
                g["lr"].fill_(value)                     # a kernel with the value as its argument: no sync
            else:
                g["lr"] = value

    history, status, reason = [], "completed", ""
    forecast, timer = StepForecast(total, cfg.max_seconds), StepTimer(cfg.max_seconds)
    t0 = time.perf_counter()
    step = 0                   # optimiser steps run (after a failure: the step of the weights kept)
    lr_now = cfg.lr

    def report(last: StepOut, val=None, elapsed=None, final=False):
        N = last.log_p.shape[0]
        acc = batch_accuracy_t(model, last.y, last.log_p, last.target)
        mean_steps = expected_steps(last.log_p).mean()
        halting = last.log_p.exp().mean(1)                                               # [N]
        # everything this report shows in one read from the device
        values = torch.cat([torch.stack([last.loss, last.rec, last.reg, acc, mean_steps]).float(), halting]).tolist()
        loss, rec, reg, acc, mean_steps = values[:5]
        elapsed = time.perf_counter() - t0 if elapsed is None else elapsed
        p = Progress(step=step, total_steps=total, epoch=step / batches.per_epoch,
                     loss=loss, rec=rec, reg=reg, accuracy=acc, mean_steps=mean_steps,
                     elapsed=elapsed, lr=lr_now, halting=values[5:5 + N], val_accuracy=val,
                     max_seconds=cfg.max_seconds,
                     forecast_steps=forecast.finish(step) if final else forecast.update(step, elapsed))
        history.append(asdict(p))
        if callback is not None:
            callback(p)

    good = [p.detach().clone() for p in params]      # weights at the last healthy check
    good_step, checked = 0, 0

    def check() -> bool:
        """Read the device's divergence record (the loop's only regular host sync). Healthy: snapshot
        the weights and return True. Diverged: keep the last good weights, set the failure, return False."""
        nonlocal status, reason, step, good_step, checked
        bad = guard.first_failure()
        if bad is None:
            with torch.no_grad():
                for p, g in zip(params, good):
                    g.copy_(p)
            good_step = checked = step
            return True
        at, kind, value = bad
        status = "failed"
        if kind == LOSS:
            reason = f"loss became {value} at step {at}"
        elif kind == GRADIENT:
            reason = f"gradient norm became {value} at step {at}"
        else:
            reason = f"the weights became non-finite after the update at step {at}"
        if kind in (LOSS, GRADIENT) and skips:
            step = at - 1          # the optimiser skipped update `at` and all later ones
        else:
            with torch.no_grad():
                for p, g in zip(params, good):
                    p.copy_(g)
            if good_step < at - 1:
                reason += f"; the weights of step {good_step}, the last check, are kept"
            step = good_step
        return False

    stop = None                # (status, reason) of a host-side stop: cancel or the time budget
    last = None                # StepOut of the last step run
    for x, y in batches:
        elapsed = time.perf_counter() - t0
        if step >= total:
            break
        if cancel is not None and cancel.is_set():
            stop = ("cancelled", f"{getattr(cancel, 'why', '') or 'cancelled'} at step {step}")   # why: explorer.limits.StopFlag
            break
        if timer.out_of_time(elapsed):
            stop = ("completed", f"stopped by the time budget of {cfg.max_seconds:g} s at step {step}")
            break
        frac = step / total
        if cfg.max_seconds:
            frac = max(frac, elapsed / cfg.max_seconds)
        lr_now = lr_at(cfg, frac)
        set_lr(lr_now)

        last = run_step(x, y)
        step += 1
        epoch_end = step % batches.per_epoch == 0
        log = step % cfg.log_every == 0 or epoch_end or step == total
        if (log or step % cfg.check_every == 0) and not check():
            break
        if log and step < total:                     # the last step's report comes after the loop
            val = validation_accuracy(model, *batches.validation(), autocast, cancel=cancel) if epoch_end else None
            report(last, val)
        timer.add(time.perf_counter() - t0 - elapsed)          # this step, its check and report included

    if status != "failed" and checked != step:
        check()                                      # the steps since the last check
    seconds = time.perf_counter() - t0               # the training loop: what the budget limits
    if status != "failed":
        if stop is not None:
            status, reason = stop
        ends = not history or history[-1]["step"] != step
        if last is not None and status != "cancelled" and (ends or history[-1]["val_accuracy"] is None):
            if on_phase is not None:                 # a completed run ends on a validation pass (not counted
                on_phase("validating")               # in the budget); a cancel returns at once, without one
            val = validation_accuracy(model, *batches.validation(), autocast, cancel=cancel)
            if not ends:
                history.pop()                        # the loop's report of this step, now with its validation
            report(last, val, elapsed=seconds, final=True)
        elif last is not None and ends:
            report(last, None, elapsed=seconds, final=True)
    if history and history[-1]["forecast_steps"] != step:
        history[-1]["forecast_steps"] = step        # a failed run: it ended here
    if graphed and not run_step.graphs:
        mode, mode_reason = "eager", run_step.fallback or f"the run ended before a capture ({GRAPH_WARMUP} eager steps come first)"
    model.eval()
    return TrainResult(model=model, config=cfg, status=status, reason=reason, steps=step, seconds=seconds,
                       validation_seconds=time.perf_counter() - t0 - seconds, device=str(device), history=history,
                       step_mode=mode, step_mode_reason=mode_reason)
