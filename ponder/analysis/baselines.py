"""Is the extra thought worth it? The learned halting against two simple policies at equal compute.

Everything here is a pure function of one full unroll of a model over an input set:
    correct [N, B]  is the answer at step n right (the answer if it stopped at n)
    conf    [N, B]  the probability of that answer (the top class's probability at step n)
    p       [N, B]  the learned halting distribution p_n

The policies:
    fixed depth      always answer at step n (n = 1..N);
    confidence exit  answer at the first step whose answer's probability is >= τ (step N otherwise);
    learned halting  halt at n with probability p_n: expected accuracy Σ_n p_n·correct_n at mean steps E[n].
The baselines are compared with the learned halting at its own mean E[n] ("equal compute"), read off
each policy's curve of (mean steps, accuracy) by linear interpolation between its two nearest points.

Settle step of an input: the first step from which every later per-step answer is right (never settled:
the last answer is wrong). E[n] − settle is how long the model ponders after it already knows.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch

Z95 = 1.959964      # two-sided 95 % normal quantile


def fixed_depth(correct: torch.Tensor) -> torch.Tensor:
    """Accuracy of always answering at step n, for n = 1..N. [N]"""
    return correct.double().mean(1)


def exit_steps(conf: torch.Tensor, tau: float, peak: Optional[torch.Tensor] = None) -> torch.Tensor:
    """1-based step of the first answer with probability >= tau, N where none is. [B]
    peak: conf.cummax(0).values if already computed (the first step whose running maximum reaches tau is the
    first step that reaches it, and the steps below it are counted, not searched)."""
    peak = conf.cummax(0).values if peak is None else peak                      # [N, B] nondecreasing in n
    return ((peak < tau).sum(0) + 1).clamp(max=conf.shape[0])                  # [B]


def confidence_exit(correct: torch.Tensor, conf: torch.Tensor, tau: float,
                    peak: Optional[torch.Tensor] = None) -> tuple:
    """(mean steps, accuracy) of the confidence exit at threshold tau (peak: as exit_steps)."""
    s = exit_steps(conf, tau, peak)                                             # [B]
    right = correct.gather(0, (s - 1).unsqueeze(0))[0]                         # [B]
    return s.double().mean().item(), right.double().mean().item()


def default_thresholds(conf: torch.Tensor, correct: Optional[torch.Tensor] = None, k: int = 25) -> list:
    """Thresholds spread over the answers' probabilities (k quantiles, so the curve has points where the
    probabilities lie: for a confident model most are above 0.99), from 0 (every input answers at step 1) to one
    above any probability (every input runs N steps); with `correct`, also the two thresholds that bracket every
    half step of mean steps, so that no stretch of the curve between two points is longer than half a step."""
    flat = conf.flatten().double()
    if len(flat) > 1_000_000:                                                   # torch.quantile's size limit
        flat = flat[torch.linspace(0, len(flat) - 1, 1_000_000).long()]
    taus = {0.0, 1.01, *torch.quantile(flat, torch.linspace(0, 1, k - 2, dtype=torch.float64)).tolist()}
    if correct is not None:
        N, cands = conf.shape[0], candidates(conf)
        for m in torch.linspace(1, N, 2 * (N - 1) + 1).tolist():
            taus.update(_bracket(correct, conf, m, cands)[:2])
    return sorted(taus)


def confidence_curve(correct: torch.Tensor, conf: torch.Tensor, thresholds=None) -> list:
    """[{threshold, mean_steps, accuracy}] of the confidence exit, in order of the threshold."""
    rows, peak = [], conf.cummax(0).values
    for tau in (default_thresholds(conf, correct) if thresholds is None else thresholds):
        ms, acc = confidence_exit(correct, conf, float(tau), peak)
        rows.append({"threshold": float(tau), "mean_steps": ms, "accuracy": acc})
    return rows


def candidates(conf: torch.Tensor) -> torch.Tensor:
    """Every threshold that makes a different policy: 0 (step 1), the answers' distinct probabilities, 2 (step N)."""
    return torch.cat([torch.zeros(1, dtype=torch.float64), conf.double().flatten().unique(),
                      torch.tensor([2.0], dtype=torch.float64)])                # sorted


def _bracket(correct: torch.Tensor, conf: torch.Tensor, mean_steps: float, taus: Optional[torch.Tensor] = None) -> tuple:
    """(τ_lo, τ_hi, (steps, accuracy) at τ_lo, at τ_hi): two neighbouring thresholds among the candidates whose
    mean steps bracket `mean_steps` (both ends the same outside the range). Mean steps rise with the threshold,
    so a bisection finds them."""
    taus = candidates(conf) if taus is None else taus
    peak = conf.cummax(0).values
    lo, hi = 0, len(taus) - 1
    at = {i: confidence_exit(correct, conf, taus[i].item(), peak) for i in (lo, hi)}
    if mean_steps <= at[lo][0]:
        hi = lo
    elif mean_steps >= at[hi][0]:
        lo = hi
    while hi - lo > 1:                                                          # at[lo] < mean_steps <= at[hi]
        mid = (lo + hi) // 2
        at[mid] = confidence_exit(correct, conf, taus[mid].item(), peak)
        lo, hi = (mid, hi) if at[mid][0] < mean_steps else (lo, mid)
    return taus[lo].item(), taus[hi].item(), at[lo], at[hi]


def confidence_exit_at(correct: torch.Tensor, conf: torch.Tensor, mean_steps: float) -> dict:
    """The confidence exit at a given mean number of steps: {accuracy, threshold, minus_settle}, the accuracy and
    its mean exit step − settle step (over the inputs that settle; None when none does) interpolated between the
    two neighbouring thresholds whose mean steps bracket `mean_steps` (threshold: the lower)."""
    t0, t1, (m0, a0), (m1, a1) = _bracket(correct, conf, mean_steps)
    w = 0.0 if m1 == m0 else (mean_steps - m0) / (m1 - m0)
    s = settle_steps(correct)                                                   # [B]
    ok = s > 0
    g0, g1 = ((exit_steps(conf, t)[ok] - s[ok]).double().mean().item() if ok.any() else None for t in (t0, t1))
    return {"accuracy": a0 + w * (a1 - a0), "threshold": t0, "minus_settle": None if g0 is None else g0 + w * (g1 - g0)}


def interpolate(steps, accuracy, mean_steps: float) -> float:
    """Accuracy of a policy's curve at `mean_steps`, linear between its two nearest points (points sorted by steps)."""
    order = np.argsort(np.asarray(steps, np.float64), kind="stable")
    return float(np.interp(mean_steps, np.asarray(steps, np.float64)[order], np.asarray(accuracy, np.float64)[order]))


def expected_steps(p: torch.Tensor) -> torch.Tensor:
    """E[n] = Σ_n n·p_n per input. [B]"""
    n = torch.arange(1, p.shape[0] + 1, dtype=torch.float64).unsqueeze(1)      # [N, 1]
    return (n * p.double()).sum(0)


def learned(correct: torch.Tensor, p: torch.Tensor, sampled: Optional[torch.Tensor] = None) -> dict:
    """The learned halting: mean E[n], expected accuracy (1/B) Σ_b Σ_n p_n,b·correct_n,b, and the 95 % interval of
    the accuracy of one sampled halting pass (a sum of independent Bernoulli(q_b), q_b = Σ_n p_n,b·correct_n,b:
    half width 1.96·sqrt(Σ q_b(1 − q_b))/B). sampled [B]: the correctness of one such pass, if measured."""
    q = (p.double() * correct.double()).sum(0).clamp(0, 1)                      # [B] chance each input is right
    B = q.numel()
    acc = q.mean().item()
    half = Z95 * (q * (1 - q)).sum().sqrt().item() / B
    out = {"mean_steps": expected_steps(p).mean().item(), "accuracy": acc, "interval": [acc - half, acc + half]}
    if sampled is not None:
        out["sampled_accuracy"] = sampled.double().mean().item()
    return out


def settle_steps(correct: torch.Tensor) -> torch.Tensor:
    """First step from which every later per-step answer is right; 0 where the last answer is wrong. [B]"""
    right_from = correct.long().flip(0).cumprod(0).flip(0)                      # [N, B] right at n and every step after
    count = right_from.sum(0)                                                   # [B]
    return torch.where(count > 0, correct.shape[0] - count + 1, torch.zeros_like(count))


def settle(correct: torch.Tensor, p: torch.Tensor) -> dict:
    """{mean_settle_step, mean_expected_minus_settle, never_settled, count} over the inputs that settled
    (E[n] − settle: steps pondered after the answer was already right for good)."""
    s = settle_steps(correct)                                                   # [B]
    ok = s > 0
    gap = expected_steps(p)[ok] - s[ok].double()
    return {"mean_settle_step": s[ok].double().mean().item() if ok.any() else None,
            "mean_expected_minus_settle": gap.mean().item() if ok.any() else None,
            "never_settled": int((~ok).sum()), "count": int(s.numel())}


def quartile_groups(en: torch.Tensor) -> dict:
    """{'E[n] Q1' .. 'E[n] Q4': mask [B]}: the inputs by quartile of their E[n] (Q1 pondered least)."""
    edges = torch.quantile(en.double(), torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64))
    q = torch.bucketize(en.double(), edges, right=True)                         # [B] 0..3
    return {f"E[n] Q{i + 1}": q == i for i in range(4)}


def class_groups(labels: torch.Tensor, name: str = "class") -> dict:
    """{'class 0': mask [B], ...}: the inputs by label."""
    return {f"{name} {int(c)}": labels == c for c in labels.unique()}


def range_groups(k: torch.Tensor, ranges: dict) -> dict:
    """{name: mask [B]} of the inputs whose k lies in each named (lo, hi) range (inclusive), then one group per k."""
    out = {name: (k >= lo) & (k <= hi) for name, (lo, hi) in ranges.items()}
    return {**out, **{f"k={int(v)}": k == v for v in k.unique()}}


def at_equal_steps(correct: torch.Tensor, conf: torch.Tensor, p: torch.Tensor,
                   sampled: Optional[torch.Tensor] = None) -> dict:
    """The three policies at the learned halting's mean E[n]: {mean_steps, learned (expected accuracy),
    learned_interval, fixed_depth, confidence_exit, confidence_threshold, confidence_minus_settle (the confidence
    exit's mean exit step − settle step)} (+ learned_sampled)."""
    ln = learned(correct, p, sampled)
    m = ln["mean_steps"]
    fd = fixed_depth(correct)
    ce = confidence_exit_at(correct, conf, m)
    out = {"mean_steps": m, "learned": ln["accuracy"], "learned_interval": ln["interval"],
           "fixed_depth": interpolate(range(1, len(fd) + 1), fd.tolist(), m),
           "confidence_exit": ce["accuracy"], "confidence_threshold": ce["threshold"],
           "confidence_minus_settle": ce["minus_settle"]}
    if sampled is not None:
        out["learned_sampled"] = ln["sampled_accuracy"]
    return out


def worth_it(stats: dict, groups: Optional[dict] = None, val: Optional[dict] = None,
             shifted: Optional[dict] = None) -> dict:
    """The policies at equal steps, settle steps, per-step accuracy and the learned halting (mean E[n], expected
    accuracy) by group of one unroll (ponder.analysis.unroll.unroll_stats: per_step_correct, per_step_confidence,
    p [N, B]; correct [B] of the mode's own halting). groups: {name: bool mask [B]}; empty groups are left out.
    val: the unroll of the validation set, where operating points are chosen (ponder.analysis.equal_steps; the
    test set itself when None, and `tuned_on` says so). shifted: {name: mask [B]} of test items under a shift,
    compared at the same operating points. JSON-ready."""
    from .equal_steps import at_equal_steps as tuned, frontiers, shift_rows, tune
    correct, conf, p = stats["per_step_correct"], stats["per_step_confidence"], stats["p"]
    groups = {k: m for k, m in (groups or {}).items() if m.any()}
    fd = fixed_depth(correct).tolist()
    ln = learned(correct, p, stats.get("correct"))
    t = tune(val if val is not None else stats)
    at = {"mean_steps": ln["mean_steps"], "learned": ln["accuracy"], "learned_interval": ln["interval"],
          "sampled": ln["accuracy"], **tuned(stats, val, tuned=t)}
    if "sampled_accuracy" in ln:
        at["learned_sampled"] = ln["sampled_accuracy"]
    ops = t["ops"]
    sub = lambda m: {k: stats[k][:, m] for k in ("per_step_correct", "per_step_confidence", "p")}  # noqa: E731
    return {
        "baselines": {"fixed_depth": [{"steps": n, "accuracy": a} for n, a in enumerate(fd, 1)],
                      "confidence_exit": confidence_curve(correct, conf),
                      "tuned_on": at["tuned_on"], "at_equal_steps": at, "frontier": frontiers(stats),
                      "shift": shift_rows({k: sub(m) for k, m in (shifted or {}).items() if m.any()}, ops)},
        "settle": {**settle(correct, p), "by_group": {k: settle(correct[:, m], p[:, m]) for k, m in groups.items()}},
        "per_step_accuracy_by_group": {k: fixed_depth(correct[:, m]).tolist() for k, m in groups.items()},
        "learned_by_group": {k: {key: ln[key] for key in ("mean_steps", "accuracy")}
                             for k, m in groups.items() for ln in [learned(correct[:, m], p[:, m])]},
    }


def _versus(diff: float, half: float, rule: str) -> str:
    if abs(diff) <= half:
        return f"matches {rule}"
    return f"is {abs(diff):.4f} {'below' if diff < 0 else 'above'} {rule}"


def worth_sentence(at: dict) -> str:
    """One sentence saying what the "worth it?" chart shows, from at_equal_steps: a difference within the learned
    halting's 95 % sampling interval is called a match."""
    lo, hi = at["learned_interval"]
    half = (hi - lo) / 2
    L = at["learned"]
    return (f"At equal compute ({at['mean_steps']:.2f} mean steps), learned halting "
            f"{_versus(L - at['confidence_exit'], half, 'a confidence rule')} ({L:.4f} vs {at['confidence_exit']:.4f}) "
            f"and {_versus(L - at['fixed_depth'], half, 'a fixed depth')} ({at['fixed_depth']:.4f}).")


def summary_lines(at: dict) -> list:
    """The human-readable lines of the CLI: one per policy at equal steps."""
    lo, hi = at["learned_interval"]
    return [f"learned halting:  accuracy {at['learned']:.4f} (95% sampling interval {lo:.4f}-{hi:.4f}) "
            f"at mean E[n] {at['mean_steps']:.2f}",
            f"fixed depth:      accuracy {at['fixed_depth']:.4f} at {at['mean_steps']:.2f} steps (interpolated)",
            f"confidence exit:  accuracy {at['confidence_exit']:.4f} at {at['mean_steps']:.2f} mean steps "
            f"(threshold {at['confidence_threshold']:.5f})"]
