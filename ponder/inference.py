"""PonderNet inference with per-sample early exit: ponder(model, x, mode) -> PonderResult.

'sample' and 'deterministic' exit early per sample: halted samples leave the batch, only the still-active
ones run the next step; 'expected' runs all N steps (PonderNet.forward) and answers the p-weighted mixture.
Each step runs the step function's stepper() where it has one (the state update and lambda_n only; the answer
head once at the end, on the states the inputs halted at) and gathers nothing while every input still runs.
The halting math (log p_n, lambda_N = 1, the modes) is ponder/halting.py's.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F

from .halt_features import Tracker
from .analysis.policies import q_for_steps
from .methods import HALT_LOGIT, get_method, mean_field
from .halting import (MODES, PonderNet, answer_mixture, check_q, expected_steps, q_exit_halted_from_log_survive,
                      step_probs)


@dataclass
class PonderResult:
    """Inference output.

    probs      [B, C]  class probabilities of the answer
    pred       [B]     predicted class
    halt_step  [B]     1-based step whose output was used (N for 'expected')
    steps_run  [B]     steps actually computed for each sample
    expected_steps [B] sum_n n p_n ('expected' mode only, else None)
    trace_probs  [N, B, C] per-step class probabilities, NaN after the sample halted (trace=True)
    trace_lambda [N, B]    lambda_n, NaN after halting (trace=True)
    trace_p      [N, B]    p_n, NaN after halting (trace=True)
    """
    probs: torch.Tensor
    pred: torch.Tensor
    halt_step: torch.Tensor
    steps_run: torch.Tensor
    expected_steps: Optional[torch.Tensor] = None
    trace_probs: Optional[torch.Tensor] = None
    trace_lambda: Optional[torch.Tensor] = None
    trace_p: Optional[torch.Tensor] = None


def draw_uniforms(max_steps: int, batch: int, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """The Bernoulli(lambda_n) draws of 'sample' mode as uniforms u [N, B] (CPU).

    Drawn up front, one per (step, sample), so early exit and a full unroll see the
    same draws and a seeded generator replays a result exactly.
    """
    return torch.rand(max_steps, batch, generator=generator)


class WholeEncoding:
    """encode(x) once for every input; step n gathers what it reads (the step function's at_step, else all of ctx)
    for the inputs still running, and reads ctx itself while all run (the same tensor every step, nothing copied).
    The lazy_encode protocol (ponder.tasks.mnist.levels) for step functions whose encoding is needed whole from
    step 1 on."""

    def __init__(self, fn, x: torch.Tensor):
        self.ctx = fn.encode(x)                                       # [B, ...]
        self.at_step = getattr(fn, "at_step", None)

    def at(self, n: int, idx: Optional[torch.Tensor]) -> torch.Tensor:
        if idx is None:
            return self.ctx                                           # [B, ...] step(ctx, h, n) reads its part
        c = self.ctx if self.at_step is None else self.at_step(self.ctx, n)
        return c.index_select(0, idx)                                 # [b, ...]

    def keep(self, pos: torch.Tensor) -> None:
        pass                                                          # ctx stays whole; at() gathers by position


class PlainStep:
    """A step function's own step() in the early-exit loop: s(c, h, n) -> (h_{n+1}, lambda_logit_n, y_n), y_n what
    a halt keeps; answer(y) -> y. For step functions without stepper(), and where every step's answer is read (the
    feature head's lambda, trace)."""

    def __init__(self, fn):
        self.step = fn.step

    def __call__(self, c, h, n: int):
        y, h, l = self.step(c, h, n)
        return h, l, y

    @staticmethod
    def answer(y):
        return y


@torch.no_grad()
def ponder(model: PonderNet, x: torch.Tensor, mode: str = "sample",
           generator: Optional[torch.Generator] = None, trace: bool = False,
           uniforms: Optional[torch.Tensor] = None, q: float = 0.5) -> PonderResult:
    """Inference. 'sample' and 'deterministic' exit early per sample; 'expected' runs all N.

    sample:        at each step halt with probability lambda_n (u_n < lambda_n); answer y at the halt.
    deterministic: Q-exit at q: halt at the first step whose CDF sum_{j<=n} p_j reaches q (halting.q_exit_halted;
                   q = 0.5, the median step, by default; budget_q picks the q that spends a mean number of steps).
    expected:      answer sum_n p_n probs(y_n), the p-weighted mixture (no early exit).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    q = check_q(q)
    if x.is_floating_point() and not bool(torch.isfinite(x).all()):
        # NaN would make every lambda_n NaN: no sample would ever halt and every answer is NaN
        raise ValueError("the input contains NaN or infinite values")
    N = model.max_steps
    if mode == "expected":
        return _ponder_expected(model, x, trace)
    if model.method != "ponder":                          # its own deterministic rule, whatever the mode
        return _method_answer(model, x, trace)
    fn = model.step_fn
    enc = (fn.lazy_encode(x) if hasattr(fn, "lazy_encode") else None) or WholeEncoding(fn, x)
    c = enc.at(0, None)                                   # [B, ...] what step 1 reads, of every input
    h = fn.init_hidden(c)
    B, dev = c.shape[0], c.device
    # the step split (the state and lambda_n a step, the answer once on the halting states) where no step's answer
    # is read before the halt
    plain = trace or model.confidence_head is not None or not hasattr(fn, "stepper")
    step = PlainStep(fn) if plain else fn.stepper(c)
    if mode == "sample" and uniforms is None:
        uniforms = draw_uniforms(N, B, generator)
    if uniforms is not None:
        u_at = uniforms.to(dev).unbind(0)                 # N x [B], split once

    idx = torch.arange(B, device=dev)                     # original index of each active sample
    need_survive = trace or mode == "deterministic"       # sample mode needs only lambda_n
    if mode == "deterministic":
        # -q as the float32 the CDF is compared in (a Python float is converted to it at every comparison)
        neg_q = torch.tensor(-q, dtype=torch.float32, device=dev)
    if need_survive:
        log_survive = torch.zeros(B, device=dev)          # log prod_{j<n}(1 - lambda_j), active only
    halt_step = torch.full((B,), N, dtype=torch.long, device=dev)
    out = None                                            # [B, ...] what each sample's halt kept (y_n, or h_{n+1})
    if trace:
        t_lam = torch.full((N, B), float("nan"), device=dev)
        t_p = torch.full((N, B), float("nan"), device=dev)
        t_probs = None
    track = Tracker(model.lambda_input)                   # what the feature head reads, of the active samples
    for n in range(N):
        b = len(idx)
        if n:
            c = enc.at(n, idx if b < B else None)                      # [b, ...] step n's, of the inputs still running
        h_new, l, kept = step(c, h, n)                                 # kept: y_n (plain) or h_{n+1}
        l = l.float()
        if model.confidence_head is not None:
            cur = fn.probs(kept).float()                               # [b, C]
            l = model.with_features(l, model.step_logit(track, cur, h_new, h))
        h = h_new
        last = n == N - 1
        if need_survive:
            log_not = F.logsigmoid(-l)                                 # log(1 - lambda_n)
        if trace:
            probs = cur if model.confidence_head is not None else fn.probs(kept).float()   # [b, C]
            if t_probs is None:
                t_probs = torch.full((N, B, probs.shape[1]), float("nan"), device=dev)
            lam = torch.ones_like(l) if last else torch.sigmoid(l)     # lambda_n, lambda_N = 1
            log_lam = torch.zeros_like(l) if last else F.logsigmoid(l)
            t_lam[n, idx] = lam
            t_p[n, idx] = (log_lam + log_survive).exp()                # p_n
            t_probs[n, idx] = probs
        if need_survive and not last:
            log_survive = log_survive + log_not                        # log prod_{j<=n}(1 - lambda_j)
        if last:
            n_hit = b                                                  # lambda_N = 1: all halt, nothing read
        else:
            if mode == "sample":
                u = u_at[n] if b == B else u_at[n].index_select(0, idx)
                halt_now = u < torch.sigmoid(l)                        # u_n < lambda_n
            else:
                halt_now = q_exit_halted_from_log_survive(log_survive, neg_q)
            # the step's one host read: how many halt; the positions then come from nonzero_static, whose size is
            # given, so no further sync
            n_hit = int(halt_now) if b == 1 else int(halt_now.count_nonzero())
        if n_hit == b:                                                 # every input still running halts
            if b == B:
                out = kept                                             # none halted before: no scatter
                halt_step.fill_(n + 1)
            else:
                out.index_copy_(0, idx, kept)
                halt_step.index_fill_(0, idx, n + 1)
            break
        if n_hit:
            if out is None:
                out = kept.new_zeros((B, *kept.shape[1:]))
            hit = torch.nonzero_static(halt_now, size=n_hit).squeeze(1)           # positions in the active batch
            done = idx.index_select(0, hit)                                       # their original index
            out.index_copy_(0, done, kept.index_select(0, hit))
            halt_step.index_fill_(0, done, n + 1)
            keep = torch.nonzero_static(~halt_now, size=b - n_hit).squeeze(1)     # the rest runs the next step
            idx, h = idx.index_select(0, keep), h.index_select(0, keep)
            if need_survive:
                log_survive = log_survive.index_select(0, keep)
            track.keep(keep)
            enc.keep(keep)
    out_probs = fn.probs(step.answer(out)).float()                     # [B, C], once for all samples
    res = PonderResult(probs=out_probs, pred=out_probs.argmax(1), halt_step=halt_step,
                       steps_run=halt_step.clone())
    if trace:
        res.trace_probs, res.trace_lambda, res.trace_p = t_probs, t_lam, t_p
    return res


@torch.no_grad()
def budget_q(model: PonderNet, x_val: torch.Tensor, budget: float, batch_size: int = 1000) -> float:
    """Q-exit at a compute budget: the q whose 'deterministic' mode spends about `budget` steps on average over
    x_val, validation inputs never trained on (ponder.analysis.policies.q_for_steps on their full unroll). The
    mean steps it spends on other inputs follow from their own halting distributions."""
    if not 1 <= budget <= model.max_steps:
        raise ValueError(f"a budget is a mean number of steps in [1, N = {model.max_steps}], got {budget:g}")
    model.eval()
    p = torch.cat([model(x_val[i:i + batch_size]).log_p.exp().cpu() for i in range(0, len(x_val), batch_size)], 1)
    return q_for_steps(p, budget)                                       # p [N, B_val]


def _ponder_expected(model: PonderNet, x: torch.Tensor, trace: bool) -> PonderResult:
    out = model(x)
    probs = step_probs(model, out.y)                                    # [N, B, C]
    p = out.log_p.exp()                                                 # [N, B]
    mix = answer_mixture(probs, out.log_p)                              # [B, C]
    B = mix.shape[0]
    full = torch.full((B,), model.max_steps, dtype=torch.long, device=mix.device)
    res = PonderResult(probs=mix, pred=mix.argmax(1), halt_step=full, steps_run=full.clone(),
                       expected_steps=expected_steps(out.log_p))
    if trace:
        res.trace_probs, res.trace_lambda, res.trace_p = probs, out.lambdas, p
    return res


def method_answer(model: PonderNet, out) -> tuple:
    """(probs [B, C], halt step [B]) of a method other than PonderNet by its own rule (ponder.methods), from its
    full unroll `out`: ACT the mean field sum_n p_n y_n at N(t), where its p ends; Repeat-RNN and deep supervision
    the answer of step N."""
    N = out.log_p.shape[0]
    steps = torch.arange(1, N + 1, device=out.log_p.device).unsqueeze(1)             # [N, 1]
    halt = torch.where(out.lambda_logits >= HALT_LOGIT, steps, N).min(0).values     # [B] the first lambda = 1
    answer = mean_field(out.y, out.log_p.exp()) if get_method(model.method).mean_field else out.y[-1]
    return model.step_fn.probs(answer).float(), halt


def _method_answer(model: PonderNet, x: torch.Tensor, trace: bool) -> PonderResult:
    """ponder() for a method other than PonderNet: its own deterministic rule on a full unroll (method_answer)."""
    out = model(x)
    probs, halt = method_answer(model, out)
    res = PonderResult(probs=probs, pred=probs.argmax(1), halt_step=halt, steps_run=halt.clone())
    if trace:
        steps = torch.arange(1, out.log_p.shape[0] + 1, device=halt.device).unsqueeze(1)
        after = steps > halt.unsqueeze(0)                               # [N, B] past the halt
        res.trace_probs = step_probs(model, out.y).masked_fill(after.unsqueeze(-1), float("nan"))
        res.trace_lambda = out.lambdas.masked_fill(after, float("nan"))
        res.trace_p = out.log_p.exp().masked_fill(after, float("nan"))
    return res
