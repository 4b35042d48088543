"""Pure computations behind the pages (torch / numpy, no Streamlit, no plotting).

trace_input      one input: every step's answer, λ_n, p_n, and the halting decision of a mode
rotation_study   accuracy and halting-step spread per rotation angle, per-sample points
ponder_verdict   "does it ponder longer on harder inputs?" in plain words, from those numbers
parity_*         parity inputs and the easy / hard / extrapolation test sets
sweep_row        one λp-sweep run as a table row
training_eta     where a running training job is and how long it has left
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
import torch

from ponder import data as D
from ponder.evaluate import unroll_stats
from ponder.halting import PonderNet, expected_steps, ponder


# ----------------------------------------------------------------------------- one input

@dataclass
class Trace:
    """One input through all N steps, and the halting decision of one mode."""
    probs: np.ndarray          # [N, C] class probabilities at each step (the answer if it stopped at n)
    lambdas: np.ndarray        # [N] λ_n (λ_N = 1)
    p: np.ndarray              # [N] p_n
    cdf: np.ndarray            # [N] P(halted by n)
    expected_steps: float      # E[n] = Σ n p_n
    mode: str
    seed: int
    halt_step: int             # the step whose answer was used (N in 'expected' mode)
    pred: int                  # the answer
    answer_probs: np.ndarray   # [C] probabilities of the answer
    lambda_p: float
    max_steps: int

    @property
    def confidence(self) -> float:
        return float(self.answer_probs[self.pred])


@torch.no_grad()
def trace_input(model: PonderNet, x: torch.Tensor, mode: str = "sample", seed: int = 0) -> Trace:
    """x: one input with a batch dimension ([1, 1, 28, 28] or [1, n]).

    The charts come from a full unroll (what it would do at every step); the decision comes
    from ponder(), the real early-exit inference, with a seeded generator so a draw replays.
    """
    model.eval()
    out = model(x)
    n = out.log_p.shape[0]
    probs = model.step_fn.probs(out.y.flatten(0, 1)).float().view(n, x.shape[0], -1)[:, 0]    # [N, C]
    p = out.log_p.exp()[:, 0]
    res = ponder(model, x, mode, generator=torch.Generator().manual_seed(int(seed)))
    return Trace(probs=probs.numpy().astype(np.float64), lambdas=out.lambdas[:, 0].numpy().astype(np.float64),
                 p=p.numpy().astype(np.float64), cdf=p.cumsum(0).numpy().astype(np.float64),
                 expected_steps=float(expected_steps(out.log_p)[0]), mode=mode, seed=int(seed),
                 halt_step=int(res.halt_step[0]), pred=int(res.pred[0]),
                 answer_probs=res.probs[0].numpy().astype(np.float64), lambda_p=model.lambda_p,
                 max_steps=model.max_steps)


# ----------------------------------------------------------------------------- rotation study

DEFAULT_ANGLES = tuple(range(0, 181, 15))
DEFAULT_RANGES = (22.5, 45.0, 90.0)


def parse_numbers(text: str, lo: float, hi: float, what: str) -> list:
    """'0, 15, 30' -> [0.0, 15.0, 30.0]; ValueError naming the bad item or range."""
    out = []
    for tok in re.split(r"[,\s;]+", str(text).strip()):
        if not tok:
            continue
        try:
            v = float(tok)
        except ValueError:
            raise ValueError(f"{what}: {tok!r} is not a number") from None
        if not (math.isfinite(v) and lo <= v <= hi):
            raise ValueError(f"{what}: {tok} is outside [{lo:g}, {hi:g}]")
        if v not in out:
            out.append(v)
    if not out:
        raise ValueError(f"{what}: give at least one number")
    return out


def _box_stats(s: np.ndarray) -> dict:
    q1, med, q3 = (float(v) for v in np.percentile(s, [25, 50, 75]))
    iqr = q3 - q1
    inside = s[(s >= q1 - 1.5 * iqr) & (s <= q3 + 1.5 * iqr)]
    return dict(q1=q1, median_steps=med, q3=q3, lo=float(inside.min()), hi=float(inside.max()),
                mean_steps=float(s.mean()), std_steps=float(s.std(ddof=1)) if len(s) > 1 else 0.0)


def rotation_study(model: PonderNet, x_uint8: torch.Tensor, y: torch.Tensor, angles: Sequence[float],
                   ranges: Sequence[float] = (), mode: str = "sample", seed: int = 0,
                   progress: Optional[Callable[[float, str], None]] = None) -> list:
    """One row per fixed angle θ (every image rotated by θ) and per range d (each image by U(−d, d)).

    Row: kind, angle, n, accuracy, mean/median/std steps, q1, q3, lo, hi (box whiskers), halting [N]
    (mean p_n), and per sample: steps, confidence, correct (lists).
    """
    jobs = [("fixed", float(a)) for a in angles] + [("uniform", float(d)) for d in ranges]
    rows = []
    for i, (kind, a) in enumerate(jobs):
        if progress:
            progress(i / len(jobs), f"{'±' if kind == 'uniform' else ''}{a:g}°")
        if kind == "fixed":
            x = D.mnist_inputs(x_uint8, angle=a)
        else:
            x = D.mnist_inputs(x_uint8, angles=D.uniform_angles(len(y), a, torch.Generator().manual_seed(seed + 1)))
        st = unroll_stats(model, x, y, mode, batch_size=500, seed=seed)
        s = st["halt_step"].numpy().astype(np.float64)
        rows.append(dict(kind=kind, angle=a, n=int(len(y)), accuracy=float(st["correct"].float().mean()),
                         halting=st["p"].mean(1).tolist(), steps=s.tolist(),
                         confidence=st["confidence"].numpy().astype(np.float64).tolist(),
                         correct=st["correct"].numpy().astype(bool).tolist(), **_box_stats(s)))
    if progress:
        progress(1.0, "done")
    return rows


def _corr(a: Sequence[float], b: Sequence[float]) -> Optional[float]:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if len(a) < 3 or a.std() < 1e-12 or b.std() < 1e-12:
        return None
    return float(np.corrcoef(a, b)[0, 1])


def ponder_verdict(rows: Sequence[dict]) -> tuple[str, str]:
    """(answer, explanation): does the model ponder longer on harder (less accurate) inputs?

    answer is 'longer', 'shorter', 'no' or 'unclear'. Computed from the rows on screen: the
    easiest and hardest test sets by accuracy, their mean halting steps, the correlation across
    sets between error rate and mean steps, and right vs wrong answers over all samples.
    """
    rows = [r for r in rows if r.get("n")]
    if not rows:
        return "unclear", "No results yet."
    label = lambda r: f"±{r['angle']:g}°" if r["kind"] == "uniform" else f"{r['angle']:g}°"   # noqa: E731
    easy = max(rows, key=lambda r: r["accuracy"])
    hard = min(rows, key=lambda r: r["accuracy"])
    acc_gap = easy["accuracy"] - hard["accuracy"]
    d_steps = hard["mean_steps"] - easy["mean_steps"]
    rel = d_steps / max(easy["mean_steps"], 1e-9)
    r = _corr([1 - x["accuracy"] for x in rows], [x["mean_steps"] for x in rows])
    steps_all = np.concatenate([np.asarray(x["steps"], np.float64) for x in rows]) if all("steps" in x for x in rows) else np.array([])
    ok_all = np.concatenate([np.asarray(x["correct"], bool) for x in rows]) if len(steps_all) else np.array([], bool)
    lo_s, hi_s = min(x["mean_steps"] for x in rows), max(x["mean_steps"] for x in rows)
    facts = [f"Accuracy goes from {easy['accuracy']:.1%} ({label(easy)}) down to {hard['accuracy']:.1%} "
             f"({label(hard)}), while the mean halting step is {easy['mean_steps']:.2f} at {label(easy)} and "
             f"{hard['mean_steps']:.2f} at {label(hard)} ({rel:+.0%}); across all {len(rows)} test sets it stays "
             f"between {lo_s:.2f} and {hi_s:.2f}."]
    if r is not None:
        facts.append(f"Correlation between error rate and mean steps across the test sets: r = {r:+.2f}.")
    if ok_all.any() and (~ok_all).any():
        sr, sw = steps_all[ok_all].mean(), steps_all[~ok_all].mean()
        facts.append(f"Over all {len(steps_all):,} samples, wrong answers halted after {sw:.2f} steps on average "
                     f"and right ones after {sr:.2f}.")
    if acc_gap < 0.05:
        answer = "unclear"
        head = ("Can't tell: these rotations are not much harder for this model (accuracy varies by less "
                "than 5 points), so there is no hard set to compare with.")
    elif rel >= 0.10 and (r is None or r >= 0.5):
        answer = "longer"
        head = "Yes: on the harder (more rotated) inputs this model halts later."
    elif rel <= -0.10 and (r is None or r <= -0.5):
        answer = "shorter"
        head = "No, the opposite: this model halts earlier on the harder inputs."
    else:
        answer = "no"
        head = ("No: this model does not ponder longer on harder inputs; its halting steps barely move "
                "while accuracy drops.")
    return answer, head + " " + " ".join(facts)


# ----------------------------------------------------------------------------- parity

def parity_vector(n: int, k: int, seed: int) -> torch.Tensor:
    """A random parity input [1, n] with exactly k non-zeros (±1), seeded."""
    k = int(min(max(k, 0), n))
    x, _, _ = D.parity_batch(1, n, k, k, torch.Generator().manual_seed(int(seed)))
    return x


def parse_vector(text: str, n: int) -> torch.Tensor:
    """'1 -1 0 ...' or '+-0...' -> [1, n] float in {-1, 0, 1}. ValueError with a plain message."""
    s = str(text).strip()
    if re.fullmatch(r"[+\-0]+", s):
        vals = [1.0 if t == "+" else -1.0 if t == "-" else 0.0 for t in s]       # compact: +-0+0-
    else:
        vals = []
        for tok in re.split(r"[,\s;]+", s):
            if not tok:
                continue
            if tok not in ("1", "+1", "-1", "0", "+", "-"):
                raise ValueError(f"{tok!r} is not one of -1, 0, 1")
            vals.append(1.0 if tok in ("1", "+1", "+") else -1.0 if tok in ("-1", "-") else 0.0)
    if len(vals) != n:
        raise ValueError(f"this model takes {n} values, got {len(vals)}")
    return torch.tensor([vals])


def parity_sets(n: int, train_k: Sequence[int]) -> dict:
    """Test sets by difficulty: easy / hard halves of the training range of k, and extrapolation
    (k above the training range) when the model was not trained up to n. {name: (k_lo, k_hi)}."""
    lo, hi = int(train_k[0]), int(train_k[1])
    mid = (lo + hi) // 2
    sets = {f"easy (k {lo}–{mid})": (lo, mid)}
    if hi > mid:
        sets[f"hard (k {mid + 1}–{hi})"] = (mid + 1, hi)
    if hi < n:
        sets[f"extrapolation (k {hi + 1}–{n})"] = (hi + 1, n)
    return sets


def parity_set_stats(model: PonderNet, n: int, sets: dict, size: int = 2000, mode: str = "sample",
                     seed: int = 0) -> dict:
    """{set name: {k_range, accuracy, mean_steps, halting [N]}} and 'by_k' rows over all sets."""
    out, by_k = {}, {}
    for name, (lo, hi) in sets.items():
        x, y, k = D.parity_eval_set(n, lo, hi, size)
        st = unroll_stats(model, x, y, mode, batch_size=1000, seed=seed)
        out[name] = dict(k_range=[lo, hi], count=int(len(y)), accuracy=float(st["correct"].float().mean()),
                         mean_steps=float(st["halt_step"].mean()), halting=st["p"].mean(1).tolist())
        for v in k.unique().tolist():
            m = k == v
            by_k[int(v)] = dict(k=int(v), accuracy=float(st["correct"][m].float().mean()),
                                mean_steps=float(st["halt_step"][m].mean()))
    return {"sets": out, "by_k": [by_k[v] for v in sorted(by_k)]}


# ----------------------------------------------------------------------------- cards

def test_metrics(card: dict) -> dict:
    m = card.get("metrics") if isinstance(card, dict) else None
    t = m.get("test") if isinstance(m, dict) else None
    return t if isinstance(t, dict) else {}


def sweep_row(name: str, card: Optional[dict], status: Optional[str] = None, reason: str = "",
              lambda_p: Optional[float] = None) -> dict:
    """A λp-sweep table row from a run card (or from a job's state when there is no card yet)."""
    card = card or {}
    t = test_metrics(card)
    lp = card.get("lambda_p", lambda_p)
    return dict(name=name, lambda_p=float(lp) if lp is not None else float("nan"),
                status=status or card.get("status", ""), reason=reason or card.get("reason", ""),
                accuracy=t.get("accuracy"), mean_steps=t.get("mean_steps"),
                expected_steps=t.get("expected_steps"), halting=t.get("halting_distribution"),
                steps=card.get("steps"), seconds=card.get("train_seconds"))


def describe_card(card: dict) -> str:
    """A few lines about a run for a tooltip: task, λp, β, N, size, training, status, test numbers."""
    tr = card.get("train") or {}
    t = test_metrics(card)
    parts = [f"**{card.get('name', '?')}** · {card.get('task', '?')} · status **{card.get('status', '?')}**"
             + (f" ({card['reason']})" if card.get("reason") else ""),
             f"λp = {card.get('lambda_p')}, β = {tr.get('beta')}, N = {card.get('max_steps')}, "
             f"hidden = {tr.get('hidden')}, batch = {tr.get('batch_size')}, lr = {tr.get('lr')}",
             f"epochs = {tr.get('epochs')}, time budget = {tr.get('max_seconds') or 'none'}, "
             f"train rotation ±{tr.get('rotate_train', 0)}°, seed = {tr.get('seed')}"
             + (f", parity preset {tr.get('parity_preset')}" if card.get("task") == "parity" else ""),
             f"trained {card.get('steps', '?')} steps in {card.get('train_seconds', '?')} s on {card.get('device', '?')}"]
    if t.get("accuracy") is not None:
        parts.append(f"test accuracy {t['accuracy']:.4f}, mean halting step {t.get('mean_steps', float('nan')):.2f}"
                     f" (n = {t.get('n', '?')})")
    return "  \n".join(parts)


# ----------------------------------------------------------------------------- training progress

def training_eta(row: dict, now: float) -> tuple[str, Optional[float]]:
    """("step 190 of 1,290", seconds left) for a running job, from its last progress row.

    row: a Progress dict with 'wall', the time.time() when it was reported. Times are on the
    training clock (row['elapsed'], which starts after the data is loaded) plus the time since
    that report, so start-up is not mistaken for training. Steps are limited by the epochs and,
    when there is one, by the time budget: the run ends at whichever comes first.
    """
    step, total, train_s = int(row["step"]), int(row["total_steps"]), float(row["elapsed"])
    since = max(0.0, now - float(row.get("wall", now)))
    if step <= 0 or train_s <= 0:
        return f"step {step:,} of {total:,}", None
    per_step = train_s / step                                            # seconds per step so far
    left = (total - step) * per_step                                     # to the end of the epochs
    text = f"step {step:,} of {total:,}"
    budget = row.get("max_seconds")
    if budget and budget - train_s < left:                               # the budget ends it first
        left = budget - train_s
        text = f"step {step:,} of about {min(total, int(budget / per_step)):,} ({budget:g} s budget)"
    return text, max(0.0, left - since)

