"""Analyses of a trained model, one function per analysis (torch / numpy; no Streamlit, no plots).

The CLI, `reproduce` and the explorer's pages all measure through these functions (and
ponder.analysis.unroll's test_metrics); a new measurement is a new function here.

trace_input       one input through every step, and the halting decision of a mode
seen_at_steps     the image each step sees (readers whose evidence grows), or None
pondering_gallery the inputs with the fewest and the most expected steps E[n]
rotation_study    accuracy and halting steps per rotation: fixed angles θ and uniform ranges ±d
rotation_verdict  "does it ponder longer on harder inputs?" from rotation rows, in plain words
parity_sets       the test sets of k a parity preset reports: easy / hard (ponder.tasks.parity.task.easy_hard),
                  and the trained range and the extrapolation beyond it where those lie outside them
parity_study      accuracy, halting steps and p_n per set of k, and per k
prior_mean        mean of the geometric prior truncated to N steps (what the KL term pulls to)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import torch

from .. import data as D
from ..halting import PonderNet, expected_steps, step_probs
from ..inference import ponder
from ..losses import log_geometric_prior
from ..tasks.parity.data import parity_eval_set
from ..tasks.parity.task import easy_hard
from .unroll import by_k_rows, expected_steps_per_input, group_stats, summarize, unroll_stats


MAX_PRIOR_STEPS = 10000     # the most steps N a prior is computed over here (a run's N is at most 200)


def prior_mean(lambda_p: float, max_steps: int) -> float:
    """Σ n p_G(n) over the prior truncated to N steps and renormalised (1/λp when N is large). ValueError for an N
    over MAX_PRIOR_STEPS (it allocates per step: N = 10**9 took 8 GB)."""
    if not 1 <= max_steps <= MAX_PRIOR_STEPS:
        raise ValueError(f"N must be in [1, {MAX_PRIOR_STEPS:,}], got {max_steps}")
    p = log_geometric_prior(lambda_p, max_steps).double().exp()             # [N]
    return float((torch.arange(1, max_steps + 1, dtype=torch.float64) * p).sum())


# ----------------------------------------------------------------------------- one input

@dataclass
class Trace:
    """One input through all N steps, and the halting decision of one mode."""
    probs: np.ndarray          # [N, C] class probabilities at each step (the answer if it stopped at n)
    lambdas: np.ndarray        # [N] λ_n (λ_N = 1)
    p: np.ndarray              # [N] p_n
    cdf: np.ndarray            # [N] P(halted by n)
    expected_steps: float      # E[n] = Σ n p_n
    mode: str                  # sample / deterministic / expected
    seed: int                  # seed of the halting draws ('sample' mode)
    halt_step: int             # the step whose answer was used (N in 'expected' mode)
    pred: int                  # the answer
    answer_probs: np.ndarray   # [C] probabilities of the answer
    lambda_p: float            # the model's prior parameter
    max_steps: int             # N
    q: float = 0.5             # the Q-exit's q ('deterministic' mode)

    @property
    def confidence(self) -> float:
        return float(self.answer_probs[self.pred])


def trace_rows(tr: Trace, class_names: Sequence[str]) -> list:
    """One row per step n of a trace, the numbers its charts draw: the answer if it stopped at n and that
    answer's probability, every class's probability, λ_n, p_n, P(halted by n) and the prior p_G(n); JSON-ready."""
    prior = log_geometric_prior(tr.lambda_p, tr.max_steps).exp().tolist()           # [N]
    return [{"step": n + 1, "answer": class_names[int(tr.probs[n].argmax())],
             "answer_probability": float(tr.probs[n].max()),
             **{f"p({c})": float(tr.probs[n][i]) for i, c in enumerate(class_names)},
             "lambda_n": float(tr.lambdas[n]), "p_n": float(tr.p[n]), "halted_by_n": float(tr.cdf[n]),
             "prior_p_n": prior[n], "halted_here": n + 1 == tr.halt_step}
            for n in range(tr.max_steps)]


@torch.no_grad()
def trace_input(model: PonderNet, x: torch.Tensor, mode: str = "sample", seed: int = 0, q: float = 0.5) -> Trace:
    """x: one input with a batch dimension ([1, 1, 28, 28] or [1, n]).

    The charts come from a full unroll (what it would do at every step); the decision comes
    from ponder(), the real early-exit inference, with a seeded generator so a draw replays.
    """
    model.eval()
    out = model(x)
    n = out.log_p.shape[0]
    probs = step_probs(model, out.y)[:, 0]                                                     # [N, C]
    p = out.log_p.exp()[:, 0]                                                                  # [N]
    res = ponder(model, x, mode, generator=torch.Generator().manual_seed(int(seed)), q=q)
    f64 = lambda t: t.numpy().astype(np.float64)          # noqa: E731
    return Trace(probs=f64(probs), lambdas=f64(out.lambdas[:, 0]), p=f64(p), cdf=f64(p.cumsum(0)),
                 expected_steps=float(expected_steps(out.log_p)[0]), mode=mode, seed=int(seed),
                 halt_step=int(res.halt_step[0]), pred=int(res.pred[0]), answer_probs=f64(res.probs[0]),
                 lambda_p=model.lambda_p, max_steps=model.max_steps, q=float(q))


@torch.no_grad()
def seen_at_steps(model: PonderNet, x: torch.Tensor) -> Optional[torch.Tensor]:
    """The input as each step sees it, [N, *x.shape[1:]] for one input x [1, ...]; None when every
    step sees the whole input (the step function has no view())."""
    view = getattr(model.step_fn, "view", None)
    if view is None:
        return None
    return torch.cat([view(x, n) for n in range(model.max_steps)])


def view_labels(model: PonderNet) -> Optional[list]:
    """A few words per step on what it has seen ("rows 1–4 of 28 read"), or None like seen_at_steps."""
    label = getattr(model.step_fn, "view_label", None)
    return None if label is None else [label(n) for n in range(model.max_steps)]


@torch.no_grad()
def pondering_gallery(model: PonderNet, x: torch.Tensor, y: torch.Tensor, k: int = 8,
                      batch_size: int = 1000) -> dict:
    """The k inputs with the fewest and the k with the most expected steps E[n] = Σ n p_n.

    x: ready inputs [M, ...], y: labels [M]. Returns {'least': rows, 'most': rows}, each row
    {index, expected_steps, pred, label, confidence}, pred being the answer of the p-weighted
    mixture (expected mode: no random draw, so a gallery is the same every time).
    """
    stats = unroll_stats(model, x, y, "expected", batch_size)
    en = expected_steps_per_input(stats)                                      # [M]
    order = torch.argsort(en)

    def rows(idx):
        return [dict(index=int(i), expected_steps=float(en[i]), pred=int(stats["pred"][i]), label=int(y[i]),
                     confidence=float(stats["confidence"][i])) for i in idx]
    return {"least": rows(order[:k]), "most": rows(order.flip(0)[:k])}


# ----------------------------------------------------------------------------- rotation

def box_stats(s: np.ndarray) -> dict:
    """Quartiles and whiskers (1.5 IQR, clipped to the data) of halting steps s [M]."""
    q1, q3 = (float(v) for v in np.percentile(s, [25, 75]))
    iqr = q3 - q1
    inside = s[(s >= q1 - 1.5 * iqr) & (s <= q3 + 1.5 * iqr)]
    return dict(q1=q1, q3=q3, lo=float(inside.min()), hi=float(inside.max()))


@torch.no_grad()
def all_seen_step(model: PonderNet, x: torch.Tensor) -> Optional[torch.Tensor]:
    """[M] the first step (1-based) whose view of each input x [M, ...] is the whole input, N if none: when a
    reader whose input grows with the steps (rows, resolution) has seen all of it. None for a model that sees
    its whole input at every step (no view())."""
    view = getattr(model.step_fn, "view", None)
    if view is None:
        return None
    out = torch.full((len(x),), model.max_steps, dtype=torch.long)
    done = torch.zeros(len(x), dtype=torch.bool)
    for n in range(model.max_steps):
        now = (view(x, n) == x).flatten(1).all(1) & ~done                       # [M] whole at step n + 1
        out[now], done = n + 1, done | now
    return out


def rotation_study(model: PonderNet, x_uint8: torch.Tensor, y: torch.Tensor, angles: Sequence[float] = (),
                   ranges: Sequence[float] = (), mode: str = "sample", seed: int = 0,
                   per_sample: bool = False, batch_size: int = 1000, compare=None, q: float = 0.5) -> list:
    """One row per fixed angle θ (every image rotated by θ), then per range d (each image by its own
    angle ~ U(−d, d), drawn with seed + 1).

    Row: kind ('fixed' / 'uniform'), angle, n, accuracy, mean/median/std steps, halting_distribution
    [N] (mean p_n), per_step_accuracy [N]; all_seen_step, the mean step by which a reader whose input grows with
    the steps has seen the whole rotated image, for such a model. per_sample adds steps, confidence, correct
    (lists) and q1, q3, lo, hi (box). compare: stats -> dict (ponder.analysis.equal_steps.comparison at clean
    operating points), kept as row["policies"]. q: the Q-exit's of 'deterministic' mode.
    """
    rows = []
    for kind, a in [("fixed", float(a)) for a in angles] + [("uniform", float(d)) for d in ranges]:
        if kind == "fixed":
            x = D.mnist_inputs(x_uint8, angle=a)
        else:
            x = D.mnist_inputs(x_uint8, angles=D.uniform_angles(len(y), a, torch.Generator().manual_seed(seed + 1)))
        stats = unroll_stats(model, x, y, mode, batch_size, seed, q)
        s = summarize(stats, y, model.lambda_p, by_class=False)
        row = dict(kind=kind, angle=a, expected_steps=s["expected_steps"]["mean"],
                   **{k: s[k] for k in ("n", "accuracy", "mean_steps", "median_steps", "std_steps", "halting_distribution",
                                   "per_step_accuracy")})
        if compare is not None:
            row["policies"] = compare(stats)
        seen = all_seen_step(model, x)
        if seen is not None:
            row["all_seen_step"] = float(seen.double().mean())
        if per_sample:
            steps = stats["halt_step"].numpy().astype(np.float64)
            row.update(steps=steps.tolist(), confidence=stats["confidence"].numpy().astype(np.float64).tolist(),
                       correct=stats["correct"].numpy().astype(bool).tolist(), **box_stats(steps))
        rows.append(row)
    return rows


def rotation_label(r: dict) -> str:
    return f"±{r['angle']:g}°" if r.get("kind") == "uniform" else f"{r['angle']:g}°"


def correlation(a: Sequence[float], b: Sequence[float]) -> Optional[float]:
    """Pearson r, or None with fewer than 3 points or a constant series."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if len(a) < 3 or a.std() < 1e-12 or b.std() < 1e-12:
        return None
    return float(np.corrcoef(a, b)[0, 1])


FEW_SETS = 5      # a correlation over fewer test sets than this is flagged as saying little


def rotation_verdict(rows: Sequence[dict], step: tuple[str, str] = ("", "")) -> tuple[str, str]:
    """(answer, explanation): does the model ponder longer on harder (less accurate) inputs?

    answer is 'longer', 'shorter', 'no' or 'unclear'. Computed from the rows: the easiest and
    hardest test sets by accuracy, their mean halting steps, the correlation across sets between
    error rate and mean steps, and right vs wrong answers over all samples (per-sample rows).
    step: (what a step is, its confound) for the model (ponder.tasks.step_meaning), said after the answer.
    """
    rows = [r for r in rows if r.get("n", 1)]                 # an empty test set says nothing
    if not rows:
        return "unclear", "No results yet."
    easy = max(rows, key=lambda r: r["accuracy"])
    hard = min(rows, key=lambda r: r["accuracy"])
    acc_gap = easy["accuracy"] - hard["accuracy"]
    rel = (hard["mean_steps"] - easy["mean_steps"]) / max(easy["mean_steps"], 1e-9)
    r = correlation([1 - x["accuracy"] for x in rows], [x["mean_steps"] for x in rows])
    lo_s, hi_s = min(x["mean_steps"] for x in rows), max(x["mean_steps"] for x in rows)
    facts = [f"Accuracy goes from {easy['accuracy']:.1%} ({rotation_label(easy)}) down to {hard['accuracy']:.1%} "
             f"({rotation_label(hard)}), while the mean halting step is {easy['mean_steps']:.2f} at "
             f"{rotation_label(easy)} and {hard['mean_steps']:.2f} at {rotation_label(hard)} ({rel:+.0%}); across "
             f"all {len(rows)} test sets it stays between {lo_s:.2f} and {hi_s:.2f}."]
    if r is not None:
        few = f" (over only {len(rows)} test sets, so it says little)" if len(rows) < FEW_SETS else ""
        facts.append(f"Correlation between error rate and mean steps across the test sets: r = {r:+.2f}{few}.")
    if all("all_seen_step" in x for x in rows):
        facts.append(f"Its steps reveal the image bit by bit, and the whole rotated digit is in view by step "
                     f"{easy['all_seen_step']:.2f} on average at {rotation_label(easy)} and {hard['all_seen_step']:.2f} "
                     f"at {rotation_label(hard)}: rotation changes how many steps its ink takes to read as well as "
                     "how hard it is, and this study does not separate the two.")
    if all("steps" in x for x in rows):
        steps = np.concatenate([np.asarray(x["steps"], np.float64) for x in rows])
        ok = np.concatenate([np.asarray(x["correct"], bool) for x in rows])
        if ok.any() and (~ok).any():
            facts.append(f"Over all {len(steps):,} samples, wrong answers halted after {steps[~ok].mean():.2f} "
                         f"steps on average and right ones after {steps[ok].mean():.2f}.")
    if acc_gap < 0.05:
        answer = "unclear"
        head = ("Can't tell: these rotations are not much harder for this model (accuracy varies by less "
                "than 5 points), so there is no hard set to compare with.")
    elif rel >= 0.10 and (r is None or r >= 0.5):
        answer, head = "longer", "Yes: on the harder (more rotated) inputs this model halts later."
    elif rel <= -0.10 and (r is None or r <= -0.5):
        answer, head = "shorter", "No, the opposite: this model halts earlier on the harder inputs."
    else:
        answer = "no"
        head = ("No: this model does not ponder longer on harder inputs; its halting steps barely move "
                "while accuracy drops.")
    meaning, caveat = step
    if meaning:
        head += f" What a step is for this model: {meaning}{f', {caveat}' if caveat else ''}."
    return answer, head + " " + " ".join(facts)


# ----------------------------------------------------------------------------- parity

def parity_sets(preset: dict) -> dict:
    """The test sets of k a parity preset is measured on, {name: (k_lo, k_hi)}: its easy and hard ranges
    (ponder.tasks.parity.task.easy_hard, what its test metrics report), the trained range when it lies below the
    easy one, and the extrapolation above both the trained and the hard range when the vectors are longer."""
    (lo, mid), (mid1, hi) = easy_hard(preset)
    t_lo, t_hi = (int(v) for v in preset["train_k"])
    sets = {f"trained (k {t_lo}–{t_hi})": (t_lo, t_hi)} if t_hi < lo else {}
    sets[f"easy (k {lo}–{mid})"] = (lo, mid)
    sets[f"hard (k {mid1}–{hi})"] = (mid1, hi)
    top, n = max(t_hi, hi), int(preset["n_elems"])
    if top < n:
        sets[f"extrapolation (k {top + 1}–{n})"] = (top + 1, n)
    return sets


def parity_study(model: PonderNet, n: int, sets: dict, size: int = 2000, mode: str = "sample",
                 seed: int = 0, layout: str = "random") -> dict:
    """{'sets': {name: {k_range, count, accuracy, mean_steps, halting_distribution}}, 'by_k': rows}.

    Each set is its own fixed test set of `size` problems with k in its range, its non-zeros placed as the run's
    were in training (layout: random positions, or the first k entries).
    """
    out, by_k = {}, {}
    for name, (lo, hi) in sets.items():
        x, y, k = parity_eval_set(n, lo, hi, size, layout=layout)
        stats = unroll_stats(model, x, y, mode, batch_size=1000, seed=seed)
        out[name] = dict(k_range=[lo, hi], **group_stats(stats, torch.ones_like(y, dtype=torch.bool)))
        by_k.update({r["k"]: r for r in by_k_rows(stats, k)})
    return {"sets": out, "by_k": [by_k[v] for v in sorted(by_k)]}
