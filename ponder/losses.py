"""PonderNet losses, as pure functions of tensors. Everything here runs in float32.

    L = L_rec + beta * L_reg
    L_rec = mean_b sum_n p_n * L(y, y_n)          (reconstruction)
    L_reg = mean_b KL(p || p_G(lambda_p))         (regulariser "kl": the paper's direction)
         or mean_b KL(p_G || p)                   (regulariser "kl-reverse": labml's and the video seed's)
         or mean_b KL(p || p_G) + KL(p_G || p)    (regulariser "kl-both": the symmetric, Jeffreys divergence)

Why the direction matters. Per input, the best halting distribution under each is
    "kl":          p*_n ∝ p_G(n) exp(-L_n / beta)        (mode-seeking: p_n ~ 0 wherever L_n is a
                   little above its minimum; those steps then get no reconstruction gradient, never
                   improve, and every input ends up halting where the loss first got low)
    "kl-reverse":  p*_n = beta p_G(n) / (L_n + mu)       (mass-covering: every step keeps some weight,
                   so every step keeps training, and p moves smoothly with the per-step losses)
    "kl-both":     the sum. The reverse term keeps weight on every step (every step trains, as with
                   "kl-reverse"); the forward term prices each expected step past the prior's
                   (sum_n p_n log 1/p_G(n) grows by log 1/(1 - lambda_p) a step), which the reverse term
                   alone does not: under "kl-reverse" mass on late steps costs almost nothing, so p drifts
                   to the steps where L_n is lowest, however long after the answer was right.
All are computed from log p, so a p_n that underflows is finite in each.

The caller applies beta: total = rec + beta * reg.

What trains the answer heads and what trains the halting can be chosen apart (train_loss):
    answer_loss "halting":  the paper's, one term L_rec = sum_n p_n L_n trains both
    answer_loss "mean":     deep supervision, every step's answer with the fixed weight 1/N:
                            L_ans = mean_b (1/N) sum_n L_n; the halting term then sees the L_n detached
    halting_loss "ce":      sum_n p_n L_n (the paper's reconstruction, as a halting objective)
    halting_loss "accuracy": -sum_n p_n (1[y_n right] - c n), the correctness detached: p_n is analytic in the
                            lambdas, so this is the exact expected accuracy minus c times the expected steps of
                            halting by p, what a halting policy is judged on; c (step_cost) traces the frontier
    halting_loss "exit":    supervised exit (learning to exit, as in BERxiT): lambda_n is trained by binary cross-
                            entropy towards "the answer at step n is right and stays right to step N" (detached),
                            every step n < N whatever p is, so no step's lambda stops learning when its p_n is ~0
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

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


def kl_from_prior_per_sample(log_p: torch.Tensor, log_prior: torch.Tensor) -> torch.Tensor:
    """KL(p_G || p) = sum_n p_G(n) (log p_G(n) - log p_n) for each sample. [N, B], [N] -> [B].

    Direction: the prior p_G is the first argument (the expectation is under the prior), the
    learned p the second: the reverse of the paper's. F.kl_div(log p, p_G) computes this one.
    log p comes from log-sigmoids, so it is finite even where p_n underflows to 0 in float32;
    a p_n far below p_G(n) then costs a large but finite amount (no log 0 = -inf).
    """
    log_prior = log_prior.float().unsqueeze(1)                           # [N, 1]
    return (log_prior.exp() * (log_prior - log_p.float())).sum(0)


def kl_both_per_sample(log_p: torch.Tensor, log_prior: torch.Tensor) -> torch.Tensor:
    """KL(p || p_G) + KL(p_G || p) for each sample (the symmetric, Jeffreys divergence). [N, B], [N] -> [B]."""
    return kl_to_prior_per_sample(log_p, log_prior) + kl_from_prior_per_sample(log_p, log_prior)


@dataclass(frozen=True)
class Regulariser:
    """A halting regulariser: its per-sample divergence and how every reader (config, CLI, forms, tables, charts)
    names it."""
    per_sample: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]   # (log p [N, B], log p_G [N]) -> [B]
    label: str                 # the divergence in symbols, as the tables and the training chart name it
    choice: str                # a form's choice: a few words that fit the sidebar's box
    help: str                  # what it does to the halting, one clause


# THE regulariser table: name -> Regulariser. A new one is one entry here (a test may add one for its duration).
REGULARISERS: dict[str, Regulariser] = {
    "kl": Regulariser(kl_to_prior_per_sample, "KL(p ‖ p_G)", "KL(p ‖ p_G), the paper's",
                      "the paper's direction, the learned p first: lets p ≈ 0 on early steps (mode-seeking)"),
    "kl-reverse": Regulariser(kl_from_prior_per_sample, "KL(p_G ‖ p)", "KL(p_G ‖ p), reverse",
                              "the prior first (labml's, the video's): keeps weight on every step (mass-covering)"),
    "kl-both": Regulariser(kl_both_per_sample, "KL(p ‖ p_G) + KL(p_G ‖ p)", "both: their sum",
                           "their sum: every step trains and every step is priced"),
}


def regulariser_help(sep: str = "; ") -> str:
    """Every regulariser named by its label and what it does, e.g. for a form's or the CLI's help."""
    return sep.join(f"{name}: {r.label}, {r.help}" for name, r in REGULARISERS.items())


def kl_to_prior(log_p: torch.Tensor, lambda_p: float, regulariser: str = "kl") -> torch.Tensor:
    """L_reg averaged over the batch, p_G truncated to N = log_p.shape[0] and renormalised; the regulariser a name
    of REGULARISERS ("kl": KL(p || p_G), the paper's direction; "kl-reverse": KL(p_G || p); "kl-both": their sum)."""
    if regulariser not in REGULARISERS:
        raise ValueError(f"regulariser must be one of {', '.join(map(repr, REGULARISERS))}, got {regulariser!r}")
    log_prior = log_geometric_prior(lambda_p, log_p.shape[0], device=log_p.device)
    return REGULARISERS[regulariser].per_sample(log_p, log_prior).mean()


def ponder_loss(step_losses: torch.Tensor, log_p: torch.Tensor, lambda_p: float, beta: float,
                regulariser: str = "kl"):
    """(total, rec, reg) with total = rec + beta * reg."""
    rec = reconstruction_loss(step_losses, log_p)
    reg = kl_to_prior(log_p, lambda_p, regulariser)
    return rec + beta * reg, rec, reg


def accuracy_minus_compute(correct: torch.Tensor, log_p: torch.Tensor, step_cost: float) -> torch.Tensor:
    """-mean_b sum_n p_n (1[y_n right] - c n): the halting loss "accuracy". correct [N, B] (bool or 0/1, no
    gradient), log_p [N, B] -> scalar. Minimised, it moves each p's mass to the steps that are right, earlier
    ones by c a step."""
    n = torch.arange(1, log_p.shape[0] + 1, device=log_p.device, dtype=torch.float32).unsqueeze(1)   # [N, 1]
    gain = correct.detach().float() - step_cost * n                                                  # [N, B]
    return -(log_p.float().exp() * gain).sum(0).mean()


def settled(correct: torch.Tensor) -> torch.Tensor:
    """[N, B] bool: the answer at step n is right and right at every later step (to N)."""
    return correct.bool().flip(0).cumprod(0).flip(0).bool()


def exit_loss(correct: torch.Tensor, lambda_logits: torch.Tensor) -> torch.Tensor:
    """mean over n < N and b of BCE(lambda_n, settled_n): the halting loss "exit". [N, B], [N, B] -> scalar."""
    target = settled(correct.detach())[:-1].float()                                  # [N-1, B]
    if target.numel() == 0:
        return lambda_logits.float().sum() * 0.0                                     # N = 1: lambda_1 = 1
    return F.binary_cross_entropy_with_logits(lambda_logits[:-1].float(), target)


def train_loss(step_losses: torch.Tensor, correct: torch.Tensor, log_p: torch.Tensor, lambda_p: float,
               beta: float, regulariser: str = "kl", answer_loss: str = "halting", halting_loss: str = "ce",
               step_cost: float = 0.0, lambda_logits: torch.Tensor = None, halt_weight=1.0):
    """(total, rec, reg): rec the answers' loss (sum_n p_n L_n, or (1/N) sum_n L_n under "mean"), reg the
    regulariser; total = rec + w (the halting term under "mean" + beta * reg), w = halt_weight (0 in a warm-up:
    a float or a 0-d tensor). step_losses, correct, log_p, lambda_logits (read by "exit") [N, B]."""
    if answer_loss == "halting":                    # the paper's loss
        if halting_loss != "ce":
            raise ValueError("answer_loss 'halting' trains the answers with the halting term: halting_loss must be 'ce'")
        return ponder_loss(step_losses, log_p, lambda_p, beta, regulariser)
    reg = kl_to_prior(log_p, lambda_p, regulariser)
    if answer_loss != "mean":
        raise ValueError(f"answer_loss must be 'halting' or 'mean', got {answer_loss!r}")
    rec = step_losses.float().mean(0).mean()                                 # mean_b (1/N) sum_n L_n
    if halting_loss == "ce":
        halt = reconstruction_loss(step_losses.detach(), log_p)
    elif halting_loss == "accuracy":
        halt = accuracy_minus_compute(correct, log_p, step_cost)
    elif halting_loss == "exit":
        halt = exit_loss(correct, lambda_logits)
    else:
        raise ValueError(f"halting_loss must be 'ce', 'accuracy' or 'exit', got {halting_loss!r}")
    return rec + halt_weight * (halt + beta * reg), rec, reg
