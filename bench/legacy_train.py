"""The training loop as it was before issue 14 (ponder/train.py at 0c66495), kept as the `old` side of
`python -m bench gpu`'s side-by-side comparison. Not used by the project itself.

Each step reads the device several times (loss.item(), the gradient norm's isfinite, a stack of
isfinite over every parameter) and copies every parameter into `good`; on CUDA it runs eagerly.
The helpers (batches, schedule, validation, result types) are the current ones, unchanged in
behaviour; only the loop body below is the old one.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import asdict
from typing import Callable, Optional

import torch

from ponder import data as D
from ponder.config import TrainConfig
from ponder.halting import PonderNet, expected_steps
from ponder.losses import ponder_loss
from ponder.train import Progress, TrainResult, batch_accuracy, lr_at, setup, validation_accuracy


def legacy_train(cfg: TrainConfig, mnist: Optional[D.Mnist] = None, data_dir: Optional[str] = None,
          callback: Optional[Callable[[Progress], None]] = None,
          cancel: Optional[threading.Event] = None, model: Optional[PonderNet] = None) -> TrainResult:
    """Train a PonderNet. Returns the model (last good weights) and how training ended.

    cancel:   set it from another thread to stop after the current step ("cancelled").
    cfg.max_seconds: stop when the budget runs out ("timeout"); the LR schedule follows
              whichever of steps or time is further along, so a budgeted run still anneals.
              The budget covers the training steps; the final validation pass comes after it
              (5,000 MNIST images: about 0.7 s on 2 CPU cores).
    A non-finite loss or gradient stops before the optimiser step ("failed"); an update that
    makes a weight non-finite is undone; either way the returned weights are the last good ones.
    """
    device, model, batches, total = setup(cfg, mnist, data_dir, model)      # the same start as ponder.train
    # fused Adam: one kernel for all parameters instead of a loop of small ops (0.55 -> 0.16 ms a step on 2 CPU cores)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay,
                           fused=device.type in ("cpu", "cuda"))
    use_amp = device.type == "cuda"

    def autocast():
        return torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp)

    forward = torch.compile(model) if cfg.compile else model
    history, status, reason = [], "completed", ""
    t0 = time.perf_counter()
    step = 0

    def report(loss, rec, reg, out, y, val=None):
        p = Progress(step=step, total_steps=total, epoch=step / batches.per_epoch,
                     loss=float(loss), rec=float(rec), reg=float(reg),
                     accuracy=batch_accuracy(model, out.y.detach(), out.log_p.detach(), y),
                     mean_steps=expected_steps(out.log_p.detach()).mean().item(),
                     elapsed=time.perf_counter() - t0, lr=opt.param_groups[0]["lr"],
                     halting=out.log_p.detach().exp().mean(1).tolist(), val_accuracy=val,
                     max_seconds=cfg.max_seconds)
        history.append(asdict(p))
        if callback is not None:
            callback(p)

    last = None        # (loss, rec, reg, out, y) of the last good step
    params = [p for p in model.parameters()]
    good = [p.detach().clone() for p in params]      # last weights known to be finite
    for x, y in batches:
        elapsed = time.perf_counter() - t0
        if cancel is not None and cancel.is_set():
            status, reason = "cancelled", f"cancelled at step {step}"
            break
        if cfg.max_seconds is not None and elapsed >= cfg.max_seconds:
            reason = f"stopped by the time budget of {cfg.max_seconds:g} s at step {step}"
            break
        if step >= total:
            break
        frac = step / total
        if cfg.max_seconds:
            frac = max(frac, elapsed / cfg.max_seconds)
        for g in opt.param_groups:
            g["lr"] = lr_at(cfg, frac)

        with autocast():
            out = forward(x)
        N, B = out.log_p.shape
        step_losses = model.step_fn.loss(out.y.flatten(0, 1), y.repeat(N)).view(N, B)   # [N, B]
        loss, rec, reg = ponder_loss(step_losses, out.log_p, cfg.lambda_p, cfg.beta)
        loss_v = loss.item()
        if not math.isfinite(loss_v):
            status, reason = "failed", f"loss became {loss_v} at step {step + 1}"
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        if not torch.isfinite(gnorm):
            status, reason = "failed", f"gradient norm became {gnorm.item()} at step {step + 1}"
            break
        opt.step()
        if not bool(torch.stack([torch.isfinite(p).all() for p in params]).all()):
            # finite loss and gradient, yet the update overflowed: put the last good weights back
            with torch.no_grad():
                for p, g in zip(params, good):
                    p.copy_(g)
            status, reason = "failed", f"the weights became non-finite after the update at step {step + 1}"
            break
        with torch.no_grad():
            for p, g in zip(params, good):
                g.copy_(p)
        step += 1
        last = (loss_v, rec.item(), reg.item(), out, y)
        epoch_end = step % batches.per_epoch == 0
        if step % cfg.log_every == 0 or epoch_end or step == total:
            val = validation_accuracy(model, *batches.validation(), autocast) if (epoch_end or step == total) else None
            report(*last, val)

    if last is not None and (not history or history[-1]["step"] != step):
        report(*last, validation_accuracy(model, *batches.validation(), autocast))
    model.eval()
    return TrainResult(model=model, config=cfg, status=status, reason=reason, steps=step,
                       seconds=time.perf_counter() - t0, device=str(device), history=history)
