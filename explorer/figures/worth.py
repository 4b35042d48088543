"""Figures of "is the extra thought worth it?": accuracy against mean steps for the fixed-depth and
confidence-exit policies and the learned halting (ponder.analysis.baselines), per-step accuracy by group,
and the sentence on where one input's answer settled (plain functions; no Streamlit)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative
import torch

from ponder.analysis.baselines import settle_steps, verdict

from .style import LEARNED_COLOR, PALETTE, layout, set_layout, step_axis, steps

FIXED_COLOR, CONFIDENCE_COLOR, Q_COLOR = PALETTE[2], PALETTE[4], PALETTE[3]      # one model: a colour per policy


def _points(at: dict) -> dict:
    """{policy: (mean steps, accuracy)} of the three deterministic policies at equal compute on the test set."""
    if "policies" in at:
        return {k: (at["policies"][k]["mean_steps"], at["policies"][k]["accuracy"])
                for k in ("learned_q", "fixed_depth", "confidence_exit")}
    return {k: (at["mean_steps"], at[k]) for k in ("fixed_depth", "confidence_exit")}     # measured before Q-exit


def y_range(series: Sequence[dict]) -> list:
    """An accuracy axis that shows the differences at equal steps: from a little under the lowest of the policies'
    accuracies there (or the sampled interval's end) to the top of the curves."""
    lows, highs, spread = [], [], 0.002
    for s in series:
        at = s["at"]
        vals = [at["learned"], *at["learned_interval"], *(a for _, a in _points(at).values())]
        lows.append(min(vals))
        curves = s["fixed_depth"] + s["confidence_exit"] + s.get("learned_q", [])
        highs.append(max(vals + [r["accuracy"] for r in curves]))
        spread = max(spread, max(vals) - min(vals))
    lo, hi = min(lows), max(highs)
    return [max(0.0, lo - 2 * spread), min(1.0, hi) + 0.25 * spread]


def worth_fig(series: Sequence[dict], title: str = "") -> go.Figure:
    """series: [{name, fixed_depth: [{steps, accuracy}], confidence_exit: [{threshold, mean_steps, accuracy}],
    learned_q: [{q, mean_steps, accuracy}] (the Q-exit frontier), at: at_equal_steps}]. Per model: the accuracy-
    compute frontier of each deterministic policy (fixed depth dotted, confidence exit solid, Q-exit dashed), the
    sampled halting as a diamond at its mean E[n] with its 95 % sampling interval, and open circles where each
    deterministic policy's validation-chosen operating point lands on the test set. One model: a colour per
    policy; several: a colour per model."""
    fig = go.Figure()
    one = len(series) == 1
    n_max = 1
    for i, s in enumerate(series):
        name, at = s["name"], s["at"]
        prefix = "" if one else f"{name}: "
        fd, ce = s["fixed_depth"], sorted(s["confidence_exit"], key=lambda r: (r["mean_steps"], r["threshold"]))
        lq = sorted(s.get("learned_q", []), key=lambda r: (r["mean_steps"], r["q"]))
        n_max = max(n_max, len(fd))
        colors = dict(fixed_depth=FIXED_COLOR, confidence_exit=CONFIDENCE_COLOR, learned_q=Q_COLOR,
                      learned=LEARNED_COLOR) if one else dict.fromkeys(
                          ("fixed_depth", "confidence_exit", "learned_q", "learned"), PALETTE[i % 10])
        fig.add_trace(go.Scatter(
            x=[r["steps"] for r in fd], y=[r["accuracy"] for r in fd], mode="lines+markers", name=prefix + "fixed depth",
            line=dict(color=colors["fixed_depth"], dash="dot"), marker=dict(size=5), legendgroup=name,
            hovertemplate=f"{prefix}always answer at step %{{x}}<br>accuracy %{{y:.4f}}<extra></extra>"))
        fig.add_trace(go.Scatter(
            x=[r["mean_steps"] for r in ce], y=[r["accuracy"] for r in ce], mode="lines+markers",
            name=prefix + "confidence exit", line=dict(color=colors["confidence_exit"]), marker=dict(size=5),
            legendgroup=name, customdata=[r["threshold"] for r in ce],
            hovertemplate=f"{prefix}exit at probability ≥ %{{customdata:.5f}}<br>mean steps %{{x:.2f}}<br>"
                          f"accuracy %{{y:.4f}}<extra></extra>"))
        if lq:
            fig.add_trace(go.Scatter(
                x=[r["mean_steps"] for r in lq], y=[r["accuracy"] for r in lq], mode="lines+markers",
                name=prefix + "Q-exit (learned λ, deterministic)", line=dict(color=colors["learned_q"], dash="dash"),
                marker=dict(size=5, symbol="square"), legendgroup=name, customdata=[r["q"] for r in lq],
                hovertemplate=f"{prefix}stop once Σ p_n ≥ %{{customdata:.3f}}<br>mean steps %{{x:.2f}}<br>"
                              f"accuracy %{{y:.4f}}<extra></extra>"))
        lo, hi = at["learned_interval"]
        fig.add_trace(go.Scatter(
            x=[at["mean_steps"]], y=[at["learned"]], mode="markers", name=prefix + "sampled halting",
            marker=dict(color=colors["learned"], size=12, symbol="diamond", line=dict(color="black", width=1)),
            error_y=dict(type="data", symmetric=False, array=[hi - at["learned"]], arrayminus=[at["learned"] - lo],
                         visible=True, thickness=1.5, width=6), legendgroup=name,
            hovertemplate=f"{prefix}sampled halting (draw the halt from p_n)<br>mean E[n] %{{x:.2f}}<br>accuracy "
                          f"%{{y:.4f}} (95% sampling interval {lo:.4f}–{hi:.4f})<extra></extra>"))
        pts = _points(at)
        fig.add_trace(go.Scatter(      # each rule at equal compute (its operating point from validation), open
            x=[x for x, _ in pts.values()], y=[y for _, y in pts.values()], mode="markers",
            marker=dict(color=[colors[k] for k in pts], size=9, symbol="circle-open", line=dict(width=2)),
            showlegend=False, text=[POLICY_WORDS[k] for k in pts], legendgroup=name,
            hovertemplate=f"{prefix}%{{text}} at equal compute<br>mean steps %{{x:.2f}}<br>accuracy %{{y:.4f}}"
                          "<extra></extra>"))
    set_layout(fig, xaxis={**step_axis(n_max, title="mean steps per input"), "tickformat": None},
               yaxis=dict(title="test accuracy", range=y_range(series)))
    return layout(fig, title or "Accuracy at equal compute: the learned halting and two rules")


COMPETITOR_DASH = {"confidence_exit": "solid", "patience": "dashdot", "fixed_depth": "dot"}


def add_competitor(fig: go.Figure, front: dict, name: str, color: str = PALETTE[5]) -> go.Figure:
    """A competitor's frontiers (ponder.analysis.against: budgets' rows) on a worth_fig: each of its rules at every
    budget, its operating point chosen on validation, at the mean steps it spends on the test set, with the 95 %
    interval of Q-exit − it at that budget in the hover; the accuracy axis widened to hold them."""
    rows = sorted(front["rows"], key=lambda r: r["budget"])
    top = 0.0
    for key in front["contenders"]:
        prefix, _, rule = key.rpartition(".")
        if not prefix:
            continue
        pts = [(r["chosen"]["policies"][key], r["chosen"]["ci95"].get(f"learned_q-{key}", [None, None])) for r in rows]
        top = max([top] + [p["accuracy"] for p, _ in pts])
        fig.add_trace(go.Scatter(
            x=[p["mean_steps"] for p, _ in pts], y=[p["accuracy"] for p, _ in pts], mode="lines+markers",
            name=f"{name}: {POLICY_WORDS.get(rule, rule)}", line=dict(color=color, dash=COMPETITOR_DASH.get(rule)),
            marker=dict(size=5, symbol="x"), legendgroup=name,
            customdata=[[r["budget"], lo if lo is not None else float("nan"), hi if hi is not None else float("nan")]
                        for r, (_, (lo, hi)) in zip(rows, pts)],
            hovertemplate=f"{name}: {POLICY_WORDS.get(rule, rule)} at budget %{{customdata[0]:.2f}}<br>test steps "
                          "%{x:.2f}<br>accuracy %{y:.4f}<br>Q-exit − it: 95 % interval %{customdata[1]:+.4f} to "
                          "%{customdata[2]:+.4f}<extra></extra>"))
    lo, hi = fig.layout.yaxis.range or (None, None)
    if lo is not None and top > hi:
        fig.update_yaxes(range=[lo, min(1.0, top) + 0.002])
    return fig


POLICY_WORDS = {"learned_q": "Q-exit", "patience": "patience", "fixed_depth": "fixed depth", "confidence_exit": "confidence exit",
                "sampled": "sampled halting"}


def difference_rows(at: dict) -> list:
    """[{difference, value, 95 % interval, verdict}] of every paired difference at equal compute (the verdict
    by ponder.analysis.baselines.verdict); [] for a result without intervals."""
    pol = at.get("policies")
    if not pol or "ci95" not in at:
        return []
    rows = []
    for key, (lo, hi) in at["ci95"].items():
        a, b = key.split("-")
        d = pol[a]["accuracy"] - pol[b]["accuracy"]
        rows.append({"difference": f"{POLICY_WORDS[a]} − {POLICY_WORDS[b]}", "value": f"{d:+.4f}",
                     "95 % interval": f"{lo:+.4f} to {hi:+.4f}", "verdict": verdict(d, (lo, hi)).replace("is ", "")})
    return rows


def shift_table(rows: Sequence[dict]) -> list:
    """One row per shifted test set (baselines.shift): each policy's accuracy (mean steps) at the clean operating
    points, Q-exit − confidence exit with its interval and verdict, and Q-exit against each rule matched to the steps
    Q-exit spends there (at_q_steps)."""
    out = []
    for r in rows:
        p, (lo, hi) = r["policies"], r["ci95"]["learned_q-confidence_exit"]
        d = p["learned_q"]["accuracy"] - p["confidence_exit"]["accuracy"]
        out.append({"inputs": r["name"], "items": r["n"],
                    **{POLICY_WORDS[k]: f"{p[k]['accuracy']:.4f} ({p[k]['mean_steps']:.2f})"
                       for k in ("sampled", "learned_q", "confidence_exit", "fixed_depth")},
                    "Q-exit − confidence": f"{d:+.4f} [{lo:+.4f}, {hi:+.4f}]: {verdict(d, (lo, hi)).replace('is ', '')}"})
        if eq := r.get("at_q_steps"):         # the two rules matched to Q-exit's steps on these inputs
            for k, col in (("confidence_exit", "confidence"), ("fixed_depth", "fixed depth")):
                (lo, hi), pe = eq["ci95"][f"learned_q-{k}"], eq["policies"]
                d = pe["learned_q"]["accuracy"] - pe[k]["accuracy"]
                out[-1][f"Q-exit − {col} at Q-exit's {eq['mean_steps']:.2f} steps"] = (
                    f"{d:+.4f} [{lo:+.4f}, {hi:+.4f}]: {verdict(d, (lo, hi)).replace('is ', '')}")
    return out


def by_group_fig(groups: dict, title: str = "Accuracy if it stopped at step n, by group") -> go.Figure:
    """{group name: [N] per-step accuracy} as one line per group."""
    fig = go.Figure()
    n = 1
    many = len(groups) > len(PALETTE)                  # more groups than colours: 24 distinct ones (a ramp's neighbours look alike)
    for i, (name, acc) in enumerate(groups.items()):
        acc = np.asarray(acc, np.float64)
        n = max(n, len(acc))
        color = (qualitative.Dark24 if many else PALETTE)[i % 24]
        fig.add_trace(go.Scatter(x=steps(len(acc)), y=acc, mode="lines+markers", name=name,
                                 line=dict(color=color), marker=dict(size=5),
                                 hovertemplate=f"{name}<br>step %{{x}}<br>accuracy %{{y:.4f}}<extra></extra>"))
    lo = min([float(np.min(a)) for a in groups.values()] + [1.0])
    set_layout(fig, xaxis=step_axis(n), yaxis=dict(title="accuracy", range=[max(0.0, lo - 0.02), 1.005]))
    return layout(fig, title)


def family(groups: dict, prefix: str) -> dict:
    """The groups whose name starts with `prefix` ('E[n] Q', 'digit ', 'k=', 'rotation ')."""
    return {k: v for k, v in groups.items() if k.startswith(prefix)}


def settle_sentence(probs: np.ndarray, target: int, halt_step: int, expected_steps: float,
                    truth_known: bool = True) -> str:
    """Where one input's answer settled beside when it halted and E[n]. probs [N, C]: the answer at each step;
    target: the true label (truth_known) or the last step's answer. Settled: the first step from which every
    later answer is the target. That step is known only by reading the later answers (and the label): an oracle,
    which no rule that stops as it goes can follow, so steps after it are not all waste; the sentence gives the
    answer's probability there, what a causal rule would have seen."""
    answers = torch.as_tensor(np.asarray(probs)).argmax(1)                          # [N]
    s = int(settle_steps((answers == target).unsqueeze(1))[0])
    what = "right" if truth_known else f"its final answer ({target})"
    if s == 0:
        return (f"Its answer at the last step is wrong: it never settled on the right answer; it halted at step "
                f"{halt_step}, E[n] = {expected_steps:.2f}.")
    after = expected_steps - s
    return (f"Its answer settled at step {s} ({what} from then on, which only the later steps show: at step {s} "
            f"that answer had probability {float(np.asarray(probs)[s - 1][target]):.1%}); it halted at step "
            f"{halt_step}, and E[n] = {expected_steps:.2f} is {abs(after):.2f} steps {'after' if after >= 0 else 'before'} "
            "it settled.")
