"""Halting methods on the same step function: THE table (METHODS), one entry each, as the regularisers are.

Each method says two things about an unroll of N steps of s(x, h_n) -> (y_n, h_{n+1}, u_n):
    halting   the halting distribution p over steps, given as the equivalent lambda logits, so that
              ponder.halting.halting_log_probs(logits) is the method's log p_n and every reader of lambda and p
              (charts, traces, E[n], the policies) works unchanged; a logit of +HALT_LOGIT is lambda = 1
    loss      what one training update minimises, from the per-step losses L_n = L(y, y_n) [N, B]

    ponder  PonderNet (Banino et al. 2021): lambda_n = sigma(u_n), p_n = lambda_n prod_{j<n}(1 - lambda_j);
            loss sum_n p_n L_n + beta KL (ponder.losses.train_loss, the regulariser of TrainConfig.regulariser)
    act     Adaptive Computation Time (Graves 2016): halting units h_n = sigma(u_n); N(t) the first n with
            sum_{j<=n} h_j >= 1 - eps (eps: TrainConfig.act_epsilon), or N; the remainder R = 1 - sum_{j<N(t)} h_j;
            p_n = h_n for n < N(t), R at N(t), 0 after. Output: the mean field y = sum_n p_n y_n (of the output
            logits); loss L(y, sum_n p_n y_n) + tau (N(t) + R), tau = TrainConfig.beta (the ponder cost; its gradient
            flows through R only, N(t) is a count). Answers at N(t), deterministically.
    repeat  Repeat-RNN (Fojo et al. 2018): a fixed rho = N steps, the loss at the last; p a point mass on N
    deep    deep supervision: no halting is trained, the loss averaged over all N steps (every step's answer
            trained to be right); p a point mass on N, so its plain answer is the fixed depth N, and any exit
            rule (confidence, patience, a fixed depth < N) reads its per-step answers
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

HALT_LOGIT = 30.0          # lambda = sigma(30) = 1 - 9e-14: the step halts; the mass left after it is ~e^-30


def ponder_logits(u: torch.Tensor, eps: float) -> torch.Tensor:
    """PonderNet's lambda logits are the head's: u [N, B] -> u."""
    return u


def act_halting(u: torch.Tensor, eps: float) -> tuple:
    """ACT's halting from the halting units' logits u [N, B]: (N(t) [B] 1-based, p [N, B] float32).
    p_n = h_n (n < N(t)), R = 1 - sum_{j<N(t)} h_j at N(t), 0 after; the last step N halts whatever the sum is."""
    h = torch.sigmoid(u.float())                                             # [N, B] halting units h_n
    cum = h.cumsum(0)                                                        # [N, B] sum_{j<=n} h_j
    reached = cum >= 1.0 - eps                                               # [N, B]
    reached[-1] = True
    n_t = reached.float().argmax(0)                                          # [B] 0-based index of N(t)
    steps = torch.arange(u.shape[0], device=u.device).unsqueeze(1)          # [N, 1]
    before = steps < n_t                                                     # [N, B] n < N(t)
    at = steps == n_t                                                        # [N, B] n = N(t)
    prev = torch.where(before, h, torch.zeros_like(h)).sum(0)                # [B] sum_{j<N(t)} h_j
    p = torch.where(before, h, torch.zeros_like(h)) + at.float() * (1.0 - prev)   # [N, B]
    return n_t + 1, p


def act_logits(u: torch.Tensor, eps: float) -> torch.Tensor:
    """The lambda logits whose halting distribution is ACT's p: lambda_n = p_n / (1 - sum_{j<n} p_j), i.e.
    logit_n = log h_n - log(1 - sum_{j<=n} h_j) before N(t) (1 - sum > eps there, so finite), +HALT_LOGIT from
    N(t) on. Differentiable in u where N(t) does not move. [N, B] -> [N, B] float32."""
    u = u.float()
    n_t, _ = act_halting(u.detach(), eps)
    h = torch.sigmoid(u)
    steps = torch.arange(u.shape[0], device=u.device).unsqueeze(1)          # [N, 1]
    before = steps < (n_t - 1)                                               # [N, B]
    rest = (1.0 - h.cumsum(0)).clamp_min(eps * 0.5)                          # [N, B] 1 - sum_{j<=n} h_j (> eps before N(t))
    logit = F.logsigmoid(u) - rest.log()
    return torch.where(before, logit, torch.full_like(logit, HALT_LOGIT))


def act_unroll(step_fn, ctx: torch.Tensor, h: torch.Tensor, max_steps: int, eps: float) -> tuple:
    """ACT's training unroll: step until every input's halting units sum to 1 - eps (at most N steps); the steps
    after that carry p = 0 and no gradient, so they are not run. Reads the sums on the host after every step.
    Returns (y [n, B, ...], u [n, B]) for the n steps run."""
    ys, us = [], []
    cum = torch.zeros(ctx.shape[0], device=ctx.device)                      # [B] sum_{j<=n} h_j
    for n in range(max_steps):
        y, h, u = step_fn.step(ctx, h, n)
        ys.append(y)
        us.append(u)
        cum = cum + torch.sigmoid(u.detach().float())
        if bool((cum >= 1.0 - eps).all()):
            break
    return torch.stack(ys), torch.stack(us)


def last_step_logits(u: torch.Tensor, eps: float) -> torch.Tensor:
    """A point mass on step N: lambda_n = 0 before it (logit -HALT_LOGIT), lambda_N = 1. [N, B] -> [N, B]."""
    return torch.full_like(u.float(), -HALT_LOGIT)


@dataclass(frozen=True)
class LossParts:
    """One update's loss: total = rec + beta * reg (rec: the answers' loss; reg: the method's halting cost)."""
    total: torch.Tensor
    rec: torch.Tensor
    reg: torch.Tensor


def ponder_loss_of(step_losses, y, target, log_p, lambda_logits, correct, cfg, halt_weight, step_fn) -> LossParts:
    from .losses import train_loss
    total, rec, reg = train_loss(step_losses, correct, log_p, cfg.lambda_p, cfg.beta, cfg.regulariser,
                                 cfg.answer_loss, cfg.halting_loss, cfg.step_cost, lambda_logits, halt_weight)
    return LossParts(total, rec, reg)


def mean_field(y: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """ACT's output sum_n p_n y_n: y [N, B, ...] output logits, p [N, B] -> [B, ...]."""
    return (p.view(*p.shape, *([1] * (y.dim() - 2))).to(y.dtype) * y).sum(0)


def act_loss_of(step_losses, y, target, log_p, lambda_logits, correct, cfg, halt_weight, step_fn) -> LossParts:
    p = log_p.float().exp()                                                   # [N, B] ACT's p (act_logits)
    n_t = (lambda_logits.detach() >= HALT_LOGIT).float().argmax(0)            # [B] 0-based N(t): the first +HALT_LOGIT
    remainder = p.gather(0, n_t.unsqueeze(0)).squeeze(0)                     # [B] R(t) = p_{N(t)}
    rec = step_fn.loss(mean_field(y, p), target).float().mean()              # L(y, sum_n p_n y_n)
    reg = ((n_t + 1).float() + remainder).mean()                             # ponder cost N(t) + R(t)
    return LossParts(rec + cfg.beta * reg, rec, reg)


def repeat_loss_of(step_losses, y, target, log_p, lambda_logits, correct, cfg, halt_weight, step_fn) -> LossParts:
    rec = step_losses[-1].float().mean()                                      # L(y, y_N), rho = N
    return LossParts(rec, rec, rec.new_zeros(()))


def deep_loss_of(step_losses, y, target, log_p, lambda_logits, correct, cfg, halt_weight, step_fn) -> LossParts:
    rec = step_losses.float().mean(0).mean()                                  # mean_b (1/N) sum_n L_n
    return LossParts(rec, rec, rec.new_zeros(()))


@dataclass(frozen=True)
class Method:
    """A halting method: its halting (equivalent lambda logits), its training loss and how readers name it."""
    logits: Callable          # (u [N, B] the head's logits, eps) -> lambda logits [N, B]
    loss: Callable            # (step_losses, y, target, log_p, lambda_logits, correct, cfg, halt_weight, step_fn)
    label: str                # the method's name in tables and charts
    choice: str               # a form's choice: a few words that fit the sidebar's box
    help: str                 # what it trains and how it stops, one clause
    mean_field: bool = False  # its answer is sum_n p_n y_n at its halting step (ACT), not the halting step's y_n
    learns_halting: bool = True   # a trained halting distribution (False: a point mass on N)


# THE method table: name -> Method. A new method is one entry here (a test may add one for its duration).
METHODS: dict[str, Method] = {
    "ponder": Method(ponder_logits, ponder_loss_of, "PonderNet", "PonderNet, the paper's",
                     "p_n = λ_n ∏(1 − λ_j), trained by Σ p_n L_n + β·KL; halts by a draw from p"),
    "act": Method(act_logits, act_loss_of, "ACT", "ACT (Graves 2016)",
                  "halting units summed to 1 − ε, the remainder, ponder cost τ = β; answers the p-weighted "
                  "output, deterministically", mean_field=True),
    "repeat": Method(last_step_logits, repeat_loss_of, "Repeat-RNN", "repeat N steps",
                     "a fixed N steps, the loss at the last (Fojo et al. 2018)", learns_halting=False),
    "deep": Method(last_step_logits, deep_loss_of, "deep supervision", "deep supervision",
                   "no halting trained, the loss averaged over all N steps: every step answers; exits by "
                   "confidence, patience or a fixed depth", learns_halting=False),
}


def get_method(name: str) -> Method:
    if name not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {name!r}")
    return METHODS[name]


def method_help(sep: str = "; ") -> str:
    """Every method named and what it does, e.g. for a form's or the CLI's help."""
    return sep.join(f"{name}: {m.help}" for name, m in METHODS.items())


def check_epsilon(eps) -> bool:
    """ACT's eps in [1e-6, 0.5]: below 1e-6 the float32 sums of the halting units cannot tell 1 - eps from 1."""
    return isinstance(eps, (int, float)) and not isinstance(eps, bool) and math.isfinite(eps) and 1e-6 <= eps <= 0.5
