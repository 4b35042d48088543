"""PonderNet halting math and the generic pondering wrapper.

Notation (Banino et al. 2021):
    step function  s(x, h_n) -> (y_n, h_{n+1}, lambda_n)
                   (the code passes the 0-based step index too: a step function whose
                   evidence grows with the steps, e.g. reading more rows, needs to know n)
    lambda_n       chance to halt at step n given it has not halted yet
    p_n            = lambda_n * prod_{j<n} (1 - lambda_j)   (halt exactly at step n)
    N              the maximum number of steps; lambda_N = 1, so sum_n p_n = 1.

Everything about halting is computed in log space and in float32, whatever the
autocast dtype of the step function:
    log p_n = log sigma(l_n) + sum_{j<n} log sigma(-l_j)     for n < N
    log p_N =                  sum_{j<N} log sigma(-l_j)     (the remaining mass)
where l_n is the lambda logit. log sigma(.) is finite for any finite logit, so
log p is finite and exp(log p) never gives NaN even when p underflows to 0.

Two paths, kept separate:
    PonderNet.forward   full unroll of all N steps (training and evaluation); with halt_epsilon, the
                        paper's N: the fewest steps by which every input halts with probability 1 - ε
    ponder()            inference with per-sample early exit (ponder/inference.py): halted samples leave
                        the batch, only the still-active ones run the next step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Protocol

import torch
import torch.nn as nn
import torch.nn.functional as F

from .methods import act_unroll, get_method
from .halt_features import FEATURES, Tracker, combine, features, make_head, runs, state_change

MODES = ("sample", "deterministic", "expected")
LOG_HALF = math.log(0.5)
LAMBDA_INPUTS = ("hidden", *FEATURES)       # what the lambda head reads (PonderNet.lambda_input; ponder.halt_features)


# ----------------------------------------------------------------------------- pure helpers

def halting_log_probs(lambda_logits: torch.Tensor) -> torch.Tensor:
    """log p_n from lambda logits. [N, B] -> [N, B], float32.

    log p_n = log lambda_n + sum_{j<n} log(1 - lambda_j), with lambda_N = 1.
    """
    l = lambda_logits.float()                                   # [N, B]
    log_lambda = F.logsigmoid(l)                                # log lambda_n
    log_not = F.logsigmoid(-l)                                  # log (1 - lambda_n)
    zeros = torch.zeros_like(log_not[:1])                       # [1, B]
    log_survive = torch.cat([zeros, log_not[:-1]]).cumsum(0)    # [N, B] log prod_{j<n}(1-lambda_j)
    # lambda_N = 1: the last step takes all the mass that has not halted before it.
    log_lambda = torch.cat([log_lambda[:-1], zeros])            # [N, B]
    return log_lambda + log_survive


def halting_lambdas(lambda_logits: torch.Tensor) -> torch.Tensor:
    """lambda_n = sigma(l_n), with lambda_N = 1. [N, B] -> [N, B] float32."""
    lam = torch.sigmoid(lambda_logits.float())
    return torch.cat([lam[:-1], torch.ones_like(lam[:1])])


def first_true(mask: torch.Tensor) -> torch.Tensor:
    """1-based index of the first True along dim 0. [N, B] bool -> [B] long.

    The last row must be all True (lambda_N = 1 guarantees a halt by step N).
    """
    n = mask.shape[0]
    steps = torch.arange(1, n + 1, device=mask.device).unsqueeze(1)   # [N, 1]
    return torch.where(mask, steps, n + 1).min(0).values               # [B]


def check_q(q: float) -> float:
    """q of the Q-exit as a float in [0, 1]; ValueError otherwise."""
    q = float(q)
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be in [0, 1], got {q:g}")
    return q


def q_exit_halted(cdf: torch.Tensor, q) -> torch.Tensor:
    """The Q-exit rule: halted by step n once the halting CDF sum_{j<=n} p_j reaches q (PALBERT's rule; q = 0.5 is
    the median step, the 'deterministic' mode). cdf [...] -> bool [...]; step N halts whatever it says (lambda_N = 1).
    q: a float, or a 0-dim tensor of it in cdf's dtype (the float a Python q is converted to, made once).
    The one definition: halt_mask and ponder.analysis.policies call it; early-exit inference calls
    q_exit_halted_from_log_survive, the same rule on the log-survival it keeps (a property test checks they agree)."""
    return cdf >= q


def q_exit_halted_from_log_survive(log_survive: torch.Tensor, neg_q) -> torch.Tensor:
    """q_exit_halted(cdf_from_log_survive(log_survive), q) in one operator fewer, for early exit's test at every
    step: -expm1(s) >= q exactly when expm1(s) <= -q (a negation is exact). neg_q: -q, a float or 0-dim tensor."""
    return torch.expm1(log_survive) <= neg_q


def cdf_from_log_survive(log_survive: torch.Tensor) -> torch.Tensor:
    """sum_{j<=n} p_j = 1 - prod_{j<=n}(1 - lambda_j), from log prod_{j<=n}(1 - lambda_j)."""
    return -torch.expm1(log_survive)


def halt_mask(lambda_logits: torch.Tensor, mode: str, uniforms: Optional[torch.Tensor] = None,
              q: float = 0.5) -> torch.Tensor:
    """Where each sample would halt, for a full unroll. [N, B] -> [N, B] bool.

    sample:        halt at n if u_n < lambda_n (u_n ~ U(0,1) given in `uniforms` [N, B]).
    deterministic: Q-exit at q: halt at the first n where the CDF sum_{j<=n} p_j >= q (q = 0.5: the median step).
    The last row is always True (lambda_N = 1).
    """
    l = lambda_logits.float()
    if mode == "sample":
        if uniforms is None:
            raise ValueError("mode 'sample' needs uniforms [N, B]")
        mask = uniforms.to(l.device) < torch.sigmoid(l)
    elif mode == "deterministic":
        mask = q_exit_halted(cdf_from_log_survive(F.logsigmoid(-l).cumsum(0)), check_q(q))
    else:
        raise ValueError(f"halt_mask: mode must be 'sample' or 'deterministic', got {mode!r}")
    mask[-1] = True
    return mask


def expected_steps(log_p: torch.Tensor) -> torch.Tensor:
    """E[n] = sum_n n p_n. [N, B] -> [B], in float64 for a float64 log p, else float32."""
    dtype = torch.float64 if log_p.dtype == torch.float64 else torch.float32
    n = torch.arange(1, log_p.shape[0] + 1, device=log_p.device, dtype=dtype)
    return (log_p.exp() * n.unsqueeze(1)).sum(0)


# ----------------------------------------------------------------------------- step functions

class StepFunction(Protocol):
    """What PonderNet needs from a task model.

    encode(x) -> ctx          computed once per input (e.g. a CNN embedding) [B, ...]
    init_hidden(ctx) -> h     h_1 [B, H]
    step(ctx, h, n) -> (y_n, h_{n+1}, lambda_logit_n)   n: 0-based step index; y_n [B, ...], lambda_logit_n [B]
    unroll(ctx, h, N) -> (y [N, B, ...], lambda_logits [N, B])   optional: all N steps at once, the
                              same values as N step() calls; PonderNet.forward uses it when present
    at_step(ctx, n) -> ctx_n  optional: the part of ctx that step n reads, such that step(ctx_n, h, n) equals
                              step(ctx, h, n); early exit gathers only that part for the inputs still running
    lazy_encode(x) -> levels  optional: the encoding built step by step for the inputs still running (levels.at(n,
                              idx) -> ctx_n, levels.keep(pos); ponder.tasks.mnist.levels), or None where encode's one
                              pass is faster; early exit then uses it instead of encode
    stepper(ctx) -> s         optional: step() split for early exit, set up once a call: s(c, h, n) -> (h_{n+1},
                              lambda_logit_n, what a halt keeps), s.answer(kept) -> y_n, the same values as step(c, h,
                              n); the answer head then runs once, on the states the inputs halted at
    loss(y, target) -> [B]    per-sample loss L(y, y_n) for one step
    probs(y) -> [B, C]        class probabilities of an output
    """

    def encode(self, x: torch.Tensor) -> torch.Tensor: ...
    def init_hidden(self, ctx: torch.Tensor) -> torch.Tensor: ...
    def step(self, ctx: torch.Tensor, h: torch.Tensor, n: int): ...
    def loss(self, y: torch.Tensor, target: torch.Tensor) -> torch.Tensor: ...
    def probs(self, y: torch.Tensor) -> torch.Tensor: ...


@dataclass
class PonderForward:
    """A full unroll. y: [N, B, ...] per-step outputs; log_p, lambdas: [N, B] float32."""
    y: torch.Tensor
    log_p: torch.Tensor
    lambdas: torch.Tensor
    lambda_logits: torch.Tensor


class PonderNet(nn.Module):
    """Runs a step function for up to N steps and owns the halting distribution."""

    def __init__(self, step_fn: nn.Module, max_steps: int, lambda_p: float, lambda_input: str = "hidden",
                 lambda_head: str = "linear", method: str = "ponder", act_epsilon: float = 0.01):
        super().__init__()
        if lambda_input not in LAMBDA_INPUTS:
            raise ValueError(f"lambda_input must be one of {LAMBDA_INPUTS}, got {lambda_input!r}")
        self.method = method                # a name of ponder.methods.METHODS: how the halting is made and trained
        self.act_epsilon = float(act_epsilon)   # ACT's eps (method "act")
        self.halting_logits = get_method(method).logits   # the head's logits -> the method's lambda logits
        self.step_fn = step_fn
        self.max_steps = int(max_steps)     # N
        self.lambda_p = float(lambda_p)     # the prior's lambda_p (kept for charts and losses)
        self.lambda_input = lambda_input
        self.lambda_head = lambda_head
        # lambda_input other than "hidden": lambda_n = sigma(head(h_{n+1}) + g(f_n)), f_n the answers' features
        # (ponder.halt_features), detached (the answer is not bent to move the halting); g's last layer starts at
        # 0, so step 1 of training is the plain head's
        self.confidence_head = make_head(lambda_input, lambda_head) if lambda_input != "hidden" else None
        self.needs_change = lambda_input == "stability"    # reads h_n and h_{n+1}: the step loop, not unroll()
        if self.confidence_head is not None and lambda_head.endswith("-only"):
            lp = min(max(self.lambda_p, 1e-6), 1 - 1e-6)
            nn.init.constant_(self.confidence_head[-1].bias, math.log(lp / (1 - lp)))   # logit(lambda_p)

    def with_features(self, step_logit: torch.Tensor, feature_logit: torch.Tensor) -> torch.Tensor:
        return combine(self.lambda_head, step_logit, feature_logit)

    def confidence_logit(self, probs: torch.Tensor, prev: torch.Tensor, run: Optional[torch.Tensor] = None,
                         change: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The feature head's share of lambda_n's logit: probs, prev [..., C] (run, change [...]) -> [...]."""
        return self.confidence_head(features(self.lambda_input, probs, prev, run, change)).squeeze(-1)

    def step_logit(self, track: Tracker, probs: torch.Tensor, h_new: torch.Tensor, h_old: torch.Tensor):
        """The feature head's share of lambda_n's logit one step at a time (track: the inputs' feature state). [b]"""
        return self.confidence_head(track.feats(probs, h_new, h_old)).squeeze(-1)

    def forward(self, x: torch.Tensor, halt_epsilon: Optional[float] = None) -> PonderForward:
        """Full unroll of all N steps (training / evaluation). halt_epsilon ε: the paper's N instead, the
        steps run until every input has halted with probability >= 1 - ε, N the cap (unroll_to_epsilon)."""
        ctx = self.step_fn.encode(x)
        h = self.step_fn.init_hidden(ctx)
        unroll = None if self.needs_change else getattr(self.step_fn, "unroll", None)
        change = None                                           # [N, B] the state's relative change (needs_change)
        if halt_epsilon is not None:
            y, lambda_logits, change = unroll_to_epsilon(self, ctx, h, halt_epsilon)
        elif self.method == "act" and self.training:            # only the steps some input has not halted by
            y, lambda_logits = act_unroll(self.step_fn, ctx, h, self.max_steps, self.act_epsilon)
        elif unroll is not None:                                # the step function's own all-steps path
            y, lambda_logits = unroll(ctx, h, self.max_steps)   # [N, B, ...], [N, B]
        else:
            ys, logits, changes = [], [], []
            for n in range(self.max_steps):
                y, h_new, l = self.step_fn.step(ctx, h, n)
                changes.append(state_change(h_new, h) if self.needs_change else None)
                h = h_new
                ys.append(y)
                logits.append(l)
            y, lambda_logits = torch.stack(ys), torch.stack(logits)
            change = torch.stack(changes) if self.needs_change else None
        lambda_logits = lambda_logits.float()                   # [N, B]
        if self.confidence_head is not None:
            probs = step_probs(self, y)                         # [N, B, C]
            prev = torch.cat([torch.full_like(probs[:1], 1.0 / probs.shape[-1]), probs[:-1]])   # P_{n-1}, P_0 uniform
            run = runs(probs) if self.needs_change else None                                      # [N, B] r_n
            lambda_logits = self.with_features(lambda_logits, self.confidence_logit(probs, prev, run, change))
        lambda_logits = self.halting_logits(lambda_logits, self.act_epsilon)   # [N, B] the method's (ponder.methods)
        return PonderForward(
            y=y,                                                # [N, B, ...]
            log_p=halting_log_probs(lambda_logits),             # [N, B]
            lambdas=halting_lambdas(lambda_logits),             # [N, B]
            lambda_logits=lambda_logits,
        )


def unroll_to_epsilon(model: PonderNet, ctx: torch.Tensor, h: torch.Tensor, epsilon: float):
    """The paper's N: step until every input's cumulative halting probability reaches 1 - ε, at most N steps.

    sum_{j<=n} p_j = 1 - prod_{j<=n} (1 - lambda_j) >= 1 - ε   <=>   sum_{j<=n} log(1 - lambda_j) <= log ε,
    read on the host after every step (the number of steps decides the shapes that follow). The step it stops
    at is N for this batch: halting_log_probs then gives it the remaining mass (<= ε), so sum_n p_n = 1.
    Returns (y [n, B, ...], lambda_logits [n, B], the state's relative change [n, B] or None) for the n steps run.
    """
    log_eps = math.log(epsilon)
    ys, logits, changes = [], [], []
    log_survive = torch.zeros(ctx.shape[0], device=ctx.device)             # [B] log prod_{j<n}(1 - lambda_j)
    track = Tracker(model.lambda_input)                                     # what the feature head reads
    for n in range(model.max_steps):
        y, h_new, l = model.step_fn.step(ctx, h, n)
        ys.append(y)
        logits.append(l)
        lam = l.detach().float()                                            # lambda_n's logit as forward() makes it
        if model.confidence_head is not None:
            cur = model.step_fn.probs(y).float()
            lam = model.with_features(lam, model.step_logit(track, cur, h_new, h).detach())
        changes.append(state_change(h_new, h) if model.needs_change else None)
        h = h_new
        log_survive = log_survive + F.logsigmoid(-lam)                     # [B] + log(1 - lambda_n)
        if bool((log_survive <= log_eps).all()):
            break
    change = torch.stack(changes) if model.needs_change else None
    return torch.stack(ys), torch.stack(logits), change                    # [n, B, ...], [n, B], [n, B]


def with_max_steps(model: PonderNet, cap: int) -> PonderNet:
    """The same model (its step function shared, not copied) run for up to `cap` steps: lambda_N = 1 only at
    step cap, so evaluation can run past the N it trained with (the paper's N -> infinity, under a cap)."""
    out = PonderNet(model.step_fn, max_steps=cap, lambda_p=model.lambda_p, lambda_input=model.lambda_input,
                    lambda_head=model.lambda_head, method=model.method, act_epsilon=model.act_epsilon)
    out.confidence_head = model.confidence_head                            # shared too
    return out.train(model.training)


def step_probs(model: PonderNet, y: torch.Tensor) -> torch.Tensor:
    """Class probabilities of every step's output y [N, B, ...] -> [N, B, C] (float32)."""
    N, B = y.shape[:2]
    return model.step_fn.probs(y.flatten(0, 1)).float().view(N, B, -1)


def answer_mixture(probs: torch.Tensor, log_p: torch.Tensor) -> torch.Tensor:
    """The p-weighted answer sum_n p_n probs(y_n): probs [N, B, C], log_p [N, B] -> [B, C].
    What 'expected' mode answers, and what training's batch accuracy scores."""
    return (log_p.exp().unsqueeze(-1) * probs).sum(0)                  # [B, C]
