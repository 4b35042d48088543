"""One training update and the divergence checks around it; ponder.training.loop's loop drives both.

Update: forward (bf16 autocast on CUDA), the PonderNet loss, backward, gradient clipping, fused Adam and the
device's divergence record, all queued on the device (never a host sync), replayed from a CUDA graph where
the device allows it (ponder.training.fastpath.GraphedStep).
Health: the weights at the last healthy check, and the check that reads the divergence record: the loop's
only regular host sync.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from ..config import TrainConfig
from .fastpath import GRADIENT, GRAPH_WARMUP, LOSS, DivergenceGuard, GraphedStep
from ..halting import PonderNet
from ..methods import get_method


@dataclass
class StepOut:
    """What one training step leaves on the device (detached; in a graph these are its static outputs)."""
    loss: torch.Tensor         # 0-d
    rec: torch.Tensor          # 0-d
    reg: torch.Tensor          # 0-d
    y: torch.Tensor            # [N, B, ...] per-step outputs (N: the steps run, fewer with halt_epsilon)
    log_p: torch.Tensor        # [N, B]
    target: torch.Tensor       # [B]


class Update:
    """update(x, y) -> StepOut: one optimiser update of `model` under cfg. mode, mode_reason: how the steps
    should run (ponder.training.fastpath.choose_step_mode): "cuda_graph" captures the step and replays it."""

    def __init__(self, cfg: TrainConfig, model: PonderNet, device: torch.device, mode: str, mode_reason: str):
        self.cfg, self.model, self.mode, self.mode_reason = cfg, model, mode, mode_reason
        self.method = get_method(cfg.method)
        self.graphed = mode == "cuda_graph"
        self.params = list(model.parameters())
        # fused Adam: one kernel for all parameters instead of a loop of small ops (0.55 -> 0.16 ms a step on 2
        # CPU cores). In a CUDA graph it must be capturable, and its learning rate a device tensor each step refills.
        lr = torch.tensor(cfg.lr, dtype=torch.float32, device=device) if self.graphed else cfg.lr
        self.halt_weight = torch.ones((), device=device)         # 0 during the halting warm-up (set_lr sets it)
        self.opt = torch.optim.Adam(self.params, lr=lr, weight_decay=cfg.weight_decay,
                                    fused=device.type in ("cpu", "cuda"), capturable=self.graphed)
        self.guard = DivergenceGuard(device)
        self.skips = bool(self.opt.param_groups[0]["fused"])      # only the fused Adam takes found_inf
        if self.skips:
            self.opt.found_inf = self.guard.skip
        self.use_amp = device.type == "cuda"
        self.forward = torch.compile(model) if cfg.compile else model
        self.run = GraphedStep(self.step, device) if self.graphed else self.step

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> StepOut:
        return self.run(x, y)

    def autocast(self):
        # no cast cache inside a captured step: its cached bf16 weights would outlive the capture
        return torch.autocast("cuda", dtype=torch.bfloat16, enabled=self.use_amp, cache_enabled=not self.graphed)

    def step(self, x: torch.Tensor, y: torch.Tensor) -> StepOut:
        """One update: forward, loss, backward, clipping, Adam, divergence record. Queues device work, never syncs."""
        cfg = self.cfg
        with self.autocast():
            out = self.forward(x, halt_epsilon=cfg.halt_epsilon)              # N steps, fewer with halt_epsilon
        N, B = out.log_p.shape
        step_losses = self.model.step_fn.loss(out.y.flatten(0, 1), y.repeat(N)).view(N, B)   # [N, B]
        correct = None
        if cfg.halting_loss in ("accuracy", "exit"):                                          # [N, B] no gradient
            correct = self.model.step_fn.probs(out.y.detach().flatten(0, 1)).argmax(-1).view(N, B) == y
        parts = self.method.loss(step_losses, out.y, y, out.log_p, out.lambda_logits, correct, cfg,
                                 self.halt_weight, self.model.step_fn)     # the method's (ponder.methods)
        loss, rec, reg = parts.total, parts.rec, parts.reg
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(self.params, cfg.grad_clip)                   # 0-d, on the device
        self.guard.before_update(loss, gnorm)
        self.opt.step()
        self.guard.after_update(self.params)
        return StepOut(loss.detach(), rec.detach(), reg.detach(), out.y.detach(), out.log_p.detach(), y)

    def set_lr(self, value: float, progress: float = 1.0) -> None:
        """The learning rate, and the halting term's weight at `progress` (the fraction of the updates done)."""
        self.halt_weight.fill_(float(progress >= self.cfg.halting_warmup))
        for g in self.opt.param_groups:
            if isinstance(g["lr"], torch.Tensor):
                g["lr"].fill_(value)                     # a kernel with the value as its argument: no sync
            else:
                g["lr"] = value

    def step_mode(self) -> tuple:
        """(mode, reason) of how the steps ran: a graphed run that never captured a step ran eager."""
        if self.graphed and not self.run.graphs:
            return "eager", self.run.fallback or f"the run ended before a capture ({GRAPH_WARMUP} eager steps come first)"
        return self.mode, self.mode_reason


class Health:
    """The weights at the last healthy check (`good`, of step `good_step`) and the step last checked."""

    def __init__(self, update: Update):
        self.update = update
        self.good = [p.detach().clone() for p in update.params]
        self.good_step = self.checked = 0

    def check(self, step: int) -> Optional[tuple]:
        """Read the device's divergence record after `step` steps. Healthy: snapshot the weights, None.
        Diverged: (reason, the step whose weights are kept), with those weights back in the model."""
        bad = self.update.guard.first_failure()
        if bad is None:
            with torch.no_grad():
                for p, g in zip(self.update.params, self.good):
                    g.copy_(p)
            self.good_step = self.checked = step
            return None
        at, kind, value = bad
        if kind == LOSS:
            reason = f"loss became {value} at step {at}"
        elif kind == GRADIENT:
            reason = f"gradient norm became {value} at step {at}"
        else:
            reason = f"the weights became non-finite after the update at step {at}"
        if kind in (LOSS, GRADIENT) and self.update.skips:
            return reason, at - 1          # the optimiser skipped update `at` and all later ones
        with torch.no_grad():
            for p, g in zip(self.update.params, self.good):
                p.copy_(g)
        if self.good_step < at - 1:
            reason += f"; the weights of step {self.good_step}, the last check, are kept"
        return reason, self.good_step
