"""The signals a halting rule can read at step n, and how well each tells a right answer from a wrong one; and the
halts that N forced rather than a rule chose. Pure functions of one full unroll (ponder.analysis.unroll.unroll_stats):
    correct [N, B]  is the answer at step n right
    conf    [N, B]  the probability of that answer
    answers [N, B]  the answer (the top class) at step n
    p       [N, B]  the learned halting distribution p_n

    patience      how many steps in a row the answer has not changed by step n (0 at step 1, and at a step whose
                  answer differs from the step before): PABEE's counter (Zhou et al., NeurIPS 2020). The patience
                  exit at t stops at the first step whose counter reaches t (t = 0: step 1), step N where none does.
    Σ p up to n   the learned halting's P(halted by n), what the Q-exit reads
    confidence    the answer's probability, what the confidence exit reads

Forced stops: λ_N = 1, so a halt at step N is N's, not the rule's. The sampled halting lands there with
probability p_N = Π_{j<N}(1 − λ_j): every such halt is forced (the draw never stopped it earlier), so its forced
share is the mass on step N. The Q-exit at q is forced where Σ_{j<N} p_j < q (its CDF never reached q before N);
the confidence exit where no step before N reached τ; the patience exit where no step before N reached t.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..halt_features import next_run

def run_lengths(answers: torch.Tensor) -> torch.Tensor:
    """[N, B] PABEE's patience counter: steps in a row, up to n, whose answer equals the step before's (the run r_n
    a stability λ head reads, ponder.halt_features.next_run, less 1)."""
    out, run = [], None
    for n in range(answers.shape[0]):                       # a counter that resets: N is at most a few hundred
        run = next_run(answers[n], answers[n - 1] if n else None, run)
        out.append(run)
    return torch.stack(out).long() - 1


def patience_steps(runs: torch.Tensor, t: float, peak: Optional[torch.Tensor] = None) -> torch.Tensor:
    """1-based first step whose patience counter reaches t (t ≤ 0: step 1), N where none does. [B]
    peak: runs.cummax(0).values if already computed."""
    peak = runs.cummax(0).values if peak is None else peak
    return ((peak < t).sum(0) + 1).clamp(max=runs.shape[0])


def q_exit_forced(p: torch.Tensor, q: float) -> float:
    """The share of inputs whose CDF Σ_{j<N} p_j never reached q before step N: the Q-exit at q forced by N."""
    if p.shape[0] == 1:
        return 1.0
    return (p.double()[:-1].sum(0) < q).double().mean().item()


def exit_forced(signal: torch.Tensor, threshold: float) -> float:
    """The share of inputs whose signal [N, B] reached `threshold` at no step before N (forced by N)."""
    if signal.shape[0] == 1:
        return 1.0
    return (signal[:-1].max(0).values < threshold).double().mean().item()


def forced_stops(p: torch.Tensor, conf: Optional[torch.Tensor] = None, answers: Optional[torch.Tensor] = None,
                 ops: Optional[dict] = None, q: float = 0.5) -> dict:
    """The halts N forced on one set: mass_on_last_step (mean p_N), sampled (the same: every sampled halt at N is
    forced), q_exit at `q` (deterministic mode's q), and each rule at its operating point (ops: {name: Operating};
    a mixed point's share is the mix of its two knobs'), where its signal is given. JSON-ready."""
    mass = p.double()[-1].mean().item()
    out = {"steps": int(p.shape[0]), "mass_on_last_step": mass, "sampled": mass, "q_exit": {"q": q, "share":
                                                                                       q_exit_forced(p, q)}}
    signals = {"learned_q": (p.double().cumsum(0), q_exit_forced_signal)}
    if conf is not None:
        signals["confidence_exit"] = (conf.double(), exit_forced)
    if answers is not None:
        signals["patience"] = (run_lengths(answers).double(), exit_forced)
    at = {}
    for name, op in (ops or {}).items():
        if name in signals:
            sig, share = signals[name]
            at[name] = (1 - op.w) * share(sig, op.lo) + op.w * share(sig, op.hi)
    if at:
        out["at_equal_steps"] = at
    return out


def q_exit_forced_signal(cdf: torch.Tensor, q: float) -> float:
    """q_exit_forced from the CDF [N, B] rather than p."""
    return 1.0 if cdf.shape[0] == 1 else (cdf[-2] < q).double().mean().item()


def auroc(score: torch.Tensor, label: torch.Tensor) -> Optional[float]:
    """Area under the ROC curve of score [B] ranking label [B] (True above False): the chance that a random right
    item scores above a random wrong one, ties counted half (Mann–Whitney U from average ranks). None when every
    label is the same (nothing to rank)."""
    label = label.bool()
    pos, neg = int(label.sum()), int((~label).sum())
    if pos == 0 or neg == 0:
        return None
    s = score.double().flatten()
    order = torch.argsort(s)
    sorted_s = s[order]
    _, inverse, counts = torch.unique_consecutive(sorted_s, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).double()                        # 1-based rank of each tie group's last item
    avg = ends - (counts.double() - 1) / 2                  # the group's average rank
    ranks = torch.empty_like(s)
    ranks[order] = avg[inverse]
    return ((ranks[label].sum() - pos * (pos + 1) / 2) / (pos * neg)).item()


SIGNALS = ("halted_by_n", "confidence", "patience")
SIGNAL_WORDS = {"halted_by_n": "the learned halting (Σ p up to n)", "confidence": "the answer's confidence",
                "patience": "patience (steps the answer has not changed)"}


def step_aurocs(correct: torch.Tensor, conf: torch.Tensor, p: Optional[torch.Tensor] = None,
                answers: Optional[torch.Tensor] = None) -> dict:
    """{signal: [N] AUROC of that signal at step n ranking "the answer at step n is right"} for the learned
    halting's Σ_{j≤n} p_j (when p is given), the answer's confidence and patience (when answers are given);
    None at a step where every answer is right (or every one wrong). `best`: [N] the signal with the highest AUROC
    at each step (None where none is defined); `mean`: each signal's mean over the defined steps."""
    sig = {}
    if p is not None:
        sig["halted_by_n"] = p.double().cumsum(0)
    sig["confidence"] = conf.double()
    if answers is not None:
        sig["patience"] = run_lengths(answers).double()
    out = {name: [auroc(s[n], correct[n]) for n in range(correct.shape[0])] for name, s in sig.items()}
    best = []
    for n in range(correct.shape[0]):
        vals = {k: v[n] for k, v in out.items() if v[n] is not None}
        best.append(max(vals, key=vals.get) if vals else None)
    means = {k: (sum(x for x in v if x is not None) / len([x for x in v if x is not None])
                 if any(x is not None for x in v) else None) for k, v in out.items()}
    return {**out, "best": best, "mean": means}
