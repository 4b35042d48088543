"""PonderNet losses, as pure functions of tensors. Everything here runs in float32.

    L = L_rec + beta * L_reg
    L_rec = mean_b sum_n p_n * L(y, y_n)          (reconstruction)
    L_reg = mean_b KL(p || p_G(lambda_p))         (regularisation, the paper's direction)

The caller applies beta: total = rec + beta * reg.
"""
from __future__ import annotations

import math

import torch

# (1 - lambda_p) is clamped here so lambda_p = 1 gives a finite log-prior: the prior then
# puts ~1e-6 of relative weight on step 2, instead of log 0 = -inf, which would make
# KL infinite (and 0 * inf = NaN) for any p that is not exactly a point mass at step 1.
MIN_ONE_MINUS_LAMBDA_P = 1e-6


def log_geometric_prior(lambda_p: float, max_steps: int, device=None) -> torch.Tensor:
    """log p_G(n) of the geometric prior truncated to N steps and renormalised. [N] float32.

    p_G(n) = lambda_p (1 - lambda_p)^(n-1) / Z,   Z = sum_{n<=N} lambda_p (1 - lambda_p)^(n-1)
                                                    = 1 - (1 - lambda_p)^N.
    Why renormalise: the learned p is a distribution over exactly N steps (lambda_N = 1),
    so the prior must be one too for KL(p || p_G) to be a divergence: >= 0, and 0 exactly
    when p equals the prior. Dividing by Z keeps the geometric shape (p_G(n+1)/p_G(n) =
    1 - lambda_p); it only rescales. For lambda_p = 0.2, N = 20, Z = 1 - 0.8^20 = 0.9885.
    """
    if not 0.0 < lambda_p <= 1.0:
        raise ValueError(f"lambda_p must be in (0, 1], got {lambda_p}")
    q = max(1.0 - lambda_p, MIN_ONE_MINUS_LAMBDA_P)
    n = torch.arange(max_steps, dtype=torch.float64, device=device)
    log_p = math.log(lambda_p) + n * math.log(q)                      # [N] log lambda_p (1-lambda_p)^(n-1)
    return (log_p - torch.logsumexp(log_p, 0)).float()                # renormalise over N steps


def reconstruction_loss(step_losses: torch.Tensor, log_p: torch.Tensor) -> torch.Tensor:
    """L_rec = mean_b sum_n p_n L_n. step_losses, log_p: [N, B] -> scalar."""
    p = log_p.float().exp()                                            # [N, B]
    return (p * step_losses.float()).sum(0).mean()


def kl_to_prior_per_sample(log_p: torch.Tensor, log_prior: torch.Tensor) -> torch.Tensor:
    """KL(p || p_G) = sum_n p_n (log p_n - log p_G(n)) for each sample. [N, B], [N] -> [B].

    Direction: the learned halting distribution p is the first argument (the one the
    expectation is taken under), the geometric prior p_G the second, as in the paper.
    (Several public implementations call KLDivLoss(p.log(), p_G), which is KL(p_G || p),
    the reverse, and p.log() is NaN/-inf once p underflows.) We take log p as input, so
    a p_n that underflows to 0 contributes exactly 0 and nothing is NaN.
    """
    log_p = log_p.float()
    return (log_p.exp() * (log_p - log_prior.float().unsqueeze(1))).sum(0)


def kl_to_prior(log_p: torch.Tensor, lambda_p: float) -> torch.Tensor:
    """L_reg = mean_b KL(p || p_G(lambda_p)), p_G truncated to N = log_p.shape[0] and renormalised."""
    log_prior = log_geometric_prior(lambda_p, log_p.shape[0], device=log_p.device)
    return kl_to_prior_per_sample(log_p, log_prior).mean()


def ponder_loss(step_losses: torch.Tensor, log_p: torch.Tensor, lambda_p: float, beta: float):
    """(total, rec, reg) with total = rec + beta * reg."""
    rec = reconstruction_loss(step_losses, log_p)
    reg = kl_to_prior(log_p, lambda_p)
    return rec + beta * reg, rec, reg
