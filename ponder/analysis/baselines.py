"""Is the extra thought worth it? The learned halting against two simple policies at equal compute.

Everything here is a pure function of one full unroll of a model over an input set:
    correct [N, B]  is the answer at step n right (the answer if it stopped at n)
    conf    [N, B]  the probability of that answer (the top class's probability at step n)
    p       [N, B]  the learned halting distribution p_n

The curves (each policy's accuracy against its mean steps) and groups live here; the policies themselves
(sampled, Q-exit, confidence exit, fixed depth, the oracle) are ponder.analysis.policies, compared at equal
compute with operating points chosen on validation data in ponder.analysis.equal_steps. worth_it gathers
them for one test measurement; verdict() is the one rule that words every comparison.

Settle step of an input: the first step from which every later per-step answer is right (never settled:
the last answer is wrong). E[n] − settle is how long the model ponders after it already knows.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..halting import expected_steps

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


def learned(correct: torch.Tensor, p: torch.Tensor, sampled: Optional[torch.Tensor] = None) -> dict:
    """The learned halting: mean E[n], expected accuracy (1/B) Σ_b Σ_n p_n,b·correct_n,b, and the 95 % interval of
    the accuracy of one sampled halting pass (a sum of independent Bernoulli(q_b), q_b = Σ_n p_n,b·correct_n,b:
    half width 1.96·sqrt(Σ q_b(1 − q_b))/B). sampled [B]: the correctness of one such pass, if measured."""
    q = (p.double() * correct.double()).sum(0).clamp(0, 1)                      # [B] chance each input is right
    B = q.numel()
    acc = q.mean().item()
    half = Z95 * (q * (1 - q)).sum().sqrt().item() / B
    out = {"mean_steps": expected_steps(p.double().log()).mean().item(), "accuracy": acc, "interval": [acc - half, acc + half]}
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
    gap = expected_steps(p.double().log())[ok] - s[ok].double()
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


NAMES = {"sampled": "sampled halting", "learned_q": "Q-exit", "confidence_exit": "a confidence exit",
         "fixed_depth": "a fixed depth"}


def verdict(diff: float, ci) -> str:
    """The one rule of every verdict: "no difference" when the 95 % interval of the difference holds 0 or the
    difference rounds to 0 at 4 decimals, else "is D above" / "is D below" by the measured difference D."""
    lo, hi = ci
    if lo <= 0 <= hi or round(diff, 4) == 0:
        return "no difference"
    return f"is {abs(diff):.4f} {'above' if diff > 0 else 'below'}"


HEADLINE = (("learned_q", "confidence_exit"), ("learned_q", "fixed_depth"), ("sampled", "learned_q"))
SHORT = {"sampled": "sampled", "learned_q": "Q-exit", "confidence_exit": "confidence", "fixed_depth": "fixed depth"}


def difference(at: dict, a: str, b: str) -> tuple:
    """(a − b in test accuracy, its 95 % interval [lo, hi]) from a comparison (policies, ci95)."""
    return at["policies"][a]["accuracy"] - at["policies"][b]["accuracy"], at["ci95"][f"{a}-{b}"]


def difference_text(at: dict, a: str, b: str) -> str:
    """'+0.0001 [−0.0007, +0.0010]': a − b with its 95 % interval."""
    d, (lo, hi) = difference(at, a, b)
    return f"{d:+.4f} [{lo:+.4f}, {hi:+.4f}]"


def differences_table(results: dict) -> list:
    """One row per model of the headline differences at equal steps: {model, test items, tuned on, mean steps,
    'Q-exit − confidence', 'Q-exit − fixed depth', 'sampled − Q-exit'} (each 'd [lo, hi]: verdict'), from
    {name: TestMetrics}; a result measured without intervals has '-' there. The CLI prints it, the Compare
    page shows it."""
    rows = []
    for name, res in results.items():
        at = res.baselines["at_equal_steps"]
        t = at.get("tuned_on")
        row = {"model": name, "test items": res.n, "tuned on": f"{t['set']} ({t['n']:,})" if t else "-",
               "mean steps": round(at["target_steps"] if "target_steps" in at else at["mean_steps"], 2)}
        for a, b in HEADLINE:
            row[f"{SHORT[a]} − {SHORT[b]}"] = ("-" if "ci95" not in at else f"{difference_text(at, a, b)}: "
                                              f"{verdict(*difference(at, a, b)).removeprefix('is ')}")
        rows.append(row)
    return rows


def _versus(at: dict, a: str, b: str) -> str:
    pol, (lo, hi) = at["policies"], at["ci95"][f"{a}-{b}"]
    d = pol[a]["accuracy"] - pol[b]["accuracy"]
    said = verdict(d, (lo, hi))
    if said == "no difference":               # no signed zero and no interval of zeros
        return f"shows no difference from {NAMES[b]} ({pol[a]['accuracy']:.4f} and {pol[b]['accuracy']:.4f})"
    return (f"{said} {NAMES[b]} ({pol[a]['accuracy']:.4f} vs {pol[b]['accuracy']:.4f}; "
            f"difference {d:+.4f}, 95 % interval {lo:+.4f} to {hi:+.4f})")


def worth_sentence(at: dict) -> str:
    """One sentence saying what the "worth it?" chart shows, from an at_equal_steps result: the learned halting
    used deterministically (Q-exit) against a confidence exit and a fixed depth, and the sampled halting against
    Q-exit, each worded by verdict()."""
    if "ci95" not in at:              # a result measured before the policies had intervals
        return (f"At {at['mean_steps']:.2f} mean steps the sampled learned halting scores {at['learned']:.4f}, a "
                f"confidence exit {at['confidence_exit']:.4f} and a fixed depth {at['fixed_depth']:.4f} (no intervals "
                "were measured, so no verdict: measure it again with python -m ponder evaluate).")
    t = at["tuned_on"]
    return (f"At equal compute ({at['target_steps']:.2f} mean steps: the sampled halting's E[n] on the {t['n']:,} "
            f"{t['set']} items where each rule's operating point was chosen), "
            f"the learned halting used deterministically (Q-exit) {_versus(at, 'learned_q', 'confidence_exit')} and "
            f"{_versus(at, 'learned_q', 'fixed_depth')}; sampling the halt instead "
            f"{_versus(at, 'sampled', 'learned_q')}.")


def summary_lines(baselines: dict) -> list:
    """The human-readable lines of the CLI: each policy at equal steps, the differences with their intervals and
    the same on every shifted set."""
    at = baselines["at_equal_steps"]
    lo, hi = at["learned_interval"]
    t = at["tuned_on"]
    pol = at["policies"]
    out = [f"operating points chosen on the {t['set']} set ({t['n']:,} items) to spend the sampled halting's mean "
           f"E[n] there ({at['target_steps']:.2f}); accuracy on the test set:",
           f"learned halting:  accuracy {at['learned']:.4f} (95% sampling interval {lo:.4f}-{hi:.4f}) "
           f"at mean E[n] {at['mean_steps']:.2f} (sampled)",
           f"Q-exit:           accuracy {at['learned_q']:.4f} at {pol['learned_q']['mean_steps']:.2f} mean steps "
           f"(q {at['q']:.4f})",
           f"fixed depth:      accuracy {at['fixed_depth']:.4f} at {pol['fixed_depth']['mean_steps']:.2f} steps",
           f"confidence exit:  accuracy {at['confidence_exit']:.4f} at {pol['confidence_exit']['mean_steps']:.2f} "
           f"mean steps (threshold {at['confidence_threshold']:.5f})",
           f"oracle (settle step; knows the later answers): accuracy {at['oracle']['accuracy']:.4f} at "
           f"{at['oracle']['mean_steps']:.2f} mean steps"]
    out += _diff_lines(at)
    for row in baselines.get("shift", []):
        p = row["policies"]
        out.append(f"{row['name']} ({row['n']:,} items), same operating points: " + ", ".join(
            f"{NAMES[k].removeprefix('a ')} {p[k]['accuracy']:.4f} at {p[k]['mean_steps']:.2f}" for k in NAMES))
        out += _diff_lines(row)
        if eq := row.get("at_q_steps"):
            out.append(f"  at Q-exit's {eq['mean_steps']:.2f} mean steps (the two rules matched on these inputs):")
            out += _diff_lines(eq)
    return out


def _diff_lines(at: dict) -> list:
    return [f"  {a} - {b}: {d:+.4f} (95% interval {lo:+.4f} to {hi:+.4f})"
            for key in at["ci95"] for a, b in [key.split("-")] for d, (lo, hi) in [difference(at, a, b)]]
