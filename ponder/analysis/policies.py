"""Halting policies as objects: each is a pure function of one full unroll of a model over an input set,
    correct [N, B]  is the answer at step n right (the answer if it stopped at n)
    conf    [N, B]  the probability of that answer (the top class's probability at step n)
    p       [N, B]  the learned halting distribution p_n
and gives the step at which each input answers (so its mean steps, its accuracy and each input's correctness).

    sampled          halt at n with probability p_n: input b is right with probability Σ_n p_n,b·correct_n,b
                     (its expected correctness), at mean steps E[n] (the inference mode 'sample')
    Q-exit at q      the same λ's used deterministically: stop at the first n with Σ_{j≤n} p_j ≥ q
                     (PALBERT's rule; q = 0.5 is the inference mode 'deterministic')
    confidence exit  stop at the first step whose answer's probability is ≥ τ (step N where none is)
    patience         stop at the first step whose answer has not changed for t steps (PABEE; step N where none has;
                     ponder.analysis.signals), given the answers [N, B]
    λ-exit at t      stop at the first n with λ_n ≥ t: the learned hazards as exit scores, read back from p
                     (what a λ trained as an exit classifier, halting_loss "exit", is scored by)
    fixed depth      always answer at step n
    oracle           stop at the settle step: the first step from which every later answer is right (step N where
                     the last answer is wrong). An ORACLE: it reads the later answers and the label, so no causal
                     rule can follow it; it is a floor on the steps a perfect exit would spend.

Each deterministic policy has one knob (q, τ, the depth) whose mean steps never fall as it rises. An operating
point matches a target mean number of steps on one set (the validation set) as a mix of two neighbouring knob
values: each input answers at the lower one with probability 1 − w, at the higher with w, so an input's
correctness is (1 − w)·right_lo + w·right_hi. The same knobs and w are then scored on another set (the test set).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Callable, Optional

import torch

from ..halting import first_true, q_exit_halted
from .baselines import candidates, default_thresholds, exit_steps, settle_steps
from .signals import patience_steps, run_lengths

Q_GRID = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.999, 1.0)


@dataclass
class Point:
    """What a policy does on one set: its mean steps, its accuracy and each input's correctness [B]
    (a probability for the sampled policy and for a mixed operating point)."""
    mean_steps: float
    accuracy: float
    per_item: torch.Tensor          # [B] float64 in [0, 1]


def answer_at(correct: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
    """Correctness [B] of answering at the 1-based steps [B]."""
    return correct.gather(0, (steps.long() - 1).unsqueeze(0))[0].double()


def point(correct: torch.Tensor, steps: torch.Tensor) -> Point:
    """The Point of answering at steps [B]."""
    right = answer_at(correct, steps)
    return Point(steps.double().mean().item(), right.mean().item(), right)


def sampled(correct: torch.Tensor, p: torch.Tensor) -> Point:
    """Halting drawn from p_n: expected correctness Σ_n p_n·correct_n per input, at mean E[n]."""
    n = torch.arange(1, p.shape[0] + 1, dtype=torch.float64).unsqueeze(1)      # [N, 1]
    right = (p.double() * correct.double()).sum(0).clamp(0, 1)                 # [B]
    return Point((n * p.double()).sum(0).mean().item(), right.mean().item(), right)


def q_exit_steps(p: torch.Tensor, q: float) -> torch.Tensor:
    """1-based first step n with Σ_{j≤n} p_j ≥ q (ponder.halting.q_exit_halted, the rule early-exit inference
    follows); N where the sum stays below q (rounding at q = 1). [B]"""
    halted = q_exit_halted(p.double().cumsum(0), q)                            # [N, B]
    halted[-1] = True                                                           # λ_N = 1
    return first_true(halted)


def fixed_steps(correct: torch.Tensor, depth: float) -> torch.Tensor:
    """Step `depth` for every input. [B]"""
    return torch.full((correct.shape[1],), int(depth), dtype=torch.long)


def oracle(correct: torch.Tensor) -> Point:
    """The settle step (an oracle: it knows the later answers); step N for an input never settled."""
    s = settle_steps(correct)                                                   # [B] 0: never settled
    return point(correct, torch.where(s > 0, s, torch.full_like(s, correct.shape[0])))


@dataclass
class Policy:
    """A deterministic policy: its name in results, its knob's name, steps(knob) -> [B], and the knob values that
    make every different policy on a set (sorted; mean steps nondecreasing along them)."""
    name: str
    knob: str
    steps: Callable[[float], torch.Tensor]
    knobs: Callable[[], list]
    frontier_knobs: Callable[[], list]
    mean_steps: Optional[Callable[[float], float]] = None     # steps(knob)'s mean without the per-item steps


def counted(signal: torch.Tensor) -> Callable[[float], float]:
    """The mean steps of "stop at the first step whose signal reaches the knob, step N where none does" (signal
    [N, B] nondecreasing in n: a running maximum, a CDF), from one sort: an input stops at 1 + the number of steps
    n < N whose signal is below the knob, so the mean is 1 + #(signal[:-1] < knob) / B, the knob compared in the
    signal's dtype as the rule compares it."""
    B = signal.shape[1]
    flat = signal[:-1].flatten().sort().values
    return lambda k: (B + int(torch.searchsorted(flat, torch.tensor(k, dtype=flat.dtype)))) / B


def q_policy(p: torch.Tensor) -> Policy:
    """Q-exit on the halting distributions p [N, B]: its knobs are 0 and every value the CDFs take."""
    cdf = p.double().cumsum(0)
    return Policy("learned_q", "q", lambda q: q_exit_steps(p, q), cache(lambda: [0.0, *cdf.flatten().unique().tolist()]),
                  lambda: list(Q_GRID), counted(cdf))


def patience(answers: torch.Tensor) -> Policy:
    """The patience exit on the answers [N, B]: its knob t runs over 0..N − 1 (t = N − 1 runs every input N steps)."""
    N = answers.shape[0]
    peak = run_lengths(answers).cummax(0).values                                # [N, B]
    return Policy("patience", "patience", lambda t: patience_steps(peak, t, peak), lambda: list(range(N)),
                  lambda: list(range(N)), counted(peak.to(torch.get_default_dtype())))   # as `peak < t` compares


def policies(correct: torch.Tensor, conf: torch.Tensor, p: torch.Tensor, answers=None) -> dict:
    """{name: Policy} of the deterministic policies on one unroll: Q-exit, confidence exit and fixed depth, and the
    patience exit when the answers [N, B] are given."""
    N = correct.shape[0]
    peak = conf.cummax(0).values                                                # [N, B]
    return {
        "learned_q": q_policy(p),
        "confidence_exit": Policy("confidence_exit", "threshold", lambda t: exit_steps(conf, t, peak),
                                  cache(lambda: candidates(conf).tolist()), lambda: default_thresholds(conf, correct),
                                  counted(peak)),
        "fixed_depth": Policy("fixed_depth", "steps", lambda d: fixed_steps(correct, d),
                              lambda: list(range(1, N + 1)), lambda: list(range(1, N + 1))),
        **({} if answers is None else {"patience": patience(answers)}),
    }


def hazards(p: torch.Tensor) -> torch.Tensor:
    """λ_n = p_n / (1 − Σ_{j<n} p_j), λ_N = 1: the learned hazards back from p. [N, B] float64"""
    before = torch.cat([torch.zeros_like(p[:1]), p.double().cumsum(0)[:-1]])    # [N, B] Σ_{j<n} p_j
    lam = (p.double() / (1 - before).clamp_min(1e-12)).clamp(0, 1)
    lam[-1] = 1.0
    return lam


def lambda_exit(p: torch.Tensor) -> Policy:
    """The λ-exit policy on one unroll (not among policies(): only a λ trained as an exit score reads well so)."""
    lam = hazards(p)
    peak = lam.cummax(0).values                                                 # [N, B]
    return Policy("lambda_exit", "threshold", lambda t: exit_steps(lam, t, peak), lambda: candidates(lam).tolist(),
                  lambda: default_thresholds(lam))


@dataclass
class Operating:
    """A policy's operating point: answer at knob `lo` with probability 1 − w, at `hi` with w."""
    lo: float
    hi: float
    w: float

    def as_dict(self, knob: str) -> dict:
        return {f"{knob}_lo": self.lo, f"{knob}_hi": self.hi, "w": self.w}


def match(policy: Policy, correct: torch.Tensor, mean_steps: float) -> Operating:
    """The operating point whose mean steps on this set equal `mean_steps`: the two neighbouring knob values
    that bracket it (found by bisection) mixed linearly; the end knob when it lies outside the range."""
    knobs = policy.knobs()
    ms = ((lambda i: policy.mean_steps(knobs[i])) if policy.mean_steps is not None else     # noqa: E731
          (lambda i: policy.steps(knobs[i]).double().mean().item()))
    lo, hi = 0, len(knobs) - 1
    m_lo, m_hi = ms(lo), ms(hi)
    if mean_steps <= m_lo:
        return Operating(knobs[lo], knobs[lo], 0.0)
    if mean_steps >= m_hi:
        return Operating(knobs[hi], knobs[hi], 0.0)
    while hi - lo > 1:                                                          # m_lo < mean_steps <= m_hi
        mid = (lo + hi) // 2
        m = ms(mid)
        if m < mean_steps:
            lo, m_lo = mid, m
        else:
            hi, m_hi = mid, m
    w = 0.0 if m_hi == m_lo else (mean_steps - m_lo) / (m_hi - m_lo)
    return Operating(knobs[lo], knobs[hi], w)


def q_for_steps(p: torch.Tensor, mean_steps: float) -> float:
    """The one q whose Q-exit spends about `mean_steps` on average over the inputs of p [N, B] (a validation set's
    unroll): of the two knob values match() mixes, the one with the larger weight (the inference mode
    'deterministic' at a compute budget; mean steps move by at most one input's step between neighbouring knobs)."""
    op = match(q_policy(p), p, mean_steps)
    return min(1.0, op.hi if op.w >= 0.5 else op.lo)           # a CDF may round past 1


def op_steps(policy: Policy, op: Operating) -> float:
    """The mean steps of a policy at an operating point on its own set (what score() gives, without the items')."""
    ms = policy.mean_steps or (lambda k: policy.steps(k).double().mean().item())
    return (1 - op.w) * ms(op.lo) + op.w * ms(op.hi)


def score(policy: Policy, correct: torch.Tensor, op: Operating) -> Point:
    """A policy at an operating point (from any set) on this set."""
    s_lo, s_hi = policy.steps(op.lo), policy.steps(op.hi)
    right = (1 - op.w) * answer_at(correct, s_lo) + op.w * answer_at(correct, s_hi)
    m_lo, m_hi = s_lo.double().mean().item(), s_hi.double().mean().item()
    steps = min(max((1 - op.w) * m_lo + op.w * m_hi, min(m_lo, m_hi)), max(m_lo, m_hi))   # between the two, rounding too
    return Point(steps, right.mean().item(), right)


def frontier(policy: Policy, correct: torch.Tensor) -> list:
    """[{knob, mean_steps, accuracy}] of the policy over its frontier knobs (in the knob's order)."""
    return [{policy.knob: float(k), "mean_steps": pt.mean_steps, "accuracy": pt.accuracy}
            for k in policy.frontier_knobs() for pt in [point(correct, policy.steps(k))]]


def paired_bootstrap(per_item: dict, pairs: list, resamples: int = 1000, seed: int = 0, chunk: int = 100) -> dict:
    """95 % percentile intervals of the differences of mean correctness, {f"{a}-{b}": [lo, hi]} for (a, b) in
    pairs, over `resamples` resamplings of the items with replacement (the same resamples for every pair:
    paired). per_item: {name: [B] correctness}."""
    names = sorted({n for ab in pairs for n in ab})
    vals = torch.stack([per_item[n].double() for n in names])                  # [P, B]
    B = vals.shape[1]
    g = torch.Generator().manual_seed(seed)
    means = []
    for start in range(0, resamples, chunk):
        idx = torch.randint(0, B, (min(chunk, resamples - start), B), generator=g)   # [R, B]
        # each resample as how often it draws each item: its means are matrix-vector products (4x faster than
        # gathering [P, R, B] values at 10,000 items); one product per policy, so equal policies get equal means
        counts = torch.zeros(idx.shape, dtype=vals.dtype).scatter_add_(1, idx, torch.ones(idx.shape, dtype=vals.dtype))
        means.append(torch.stack([counts @ v for v in vals]) / B)               # [P, R]
    means = torch.cat(means, 1)                                                 # [P, resamples]
    out = {}
    for a, b in pairs:
        d = means[names.index(a)] - means[names.index(b)]                       # [resamples]
        lo, hi = torch.quantile(d, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
        out[f"{a}-{b}"] = [lo, hi]
    return out
