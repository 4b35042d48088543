"""Figures of "is the extra thought worth it?": accuracy against mean steps for the fixed-depth and
confidence-exit policies and the learned halting (ponder.analysis.baselines), per-step accuracy by group,
and the sentence on where one input's answer settled (plain functions; no Streamlit)."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.colors import qualitative
import torch

from ponder.analysis.baselines import settle_steps

from .style import LEARNED_COLOR, PALETTE, layout, set_layout, step_axis, steps

FIXED_COLOR, CONFIDENCE_COLOR = PALETTE[2], PALETTE[4]      # one model: a colour per policy


def y_range(series: Sequence[dict]) -> list:
    """An accuracy axis that shows the differences at equal steps: from a little under the lowest of the three
    policies' accuracies there (or the learned interval's end) to the top of the curves."""
    lows, highs, spread = [], [], 0.002
    for s in series:
        at = s["at"]
        vals = [at["learned"], at["fixed_depth"], at["confidence_exit"], *at["learned_interval"]]
        lows.append(min(vals))
        highs.append(max(vals + [r["accuracy"] for r in s["fixed_depth"] + s["confidence_exit"]]))
        spread = max(spread, max(vals) - min(vals))
    lo, hi = min(lows), max(highs)
    return [max(0.0, lo - 2 * spread), min(1.0, hi) + 0.25 * spread]


def worth_fig(series: Sequence[dict], title: str = "") -> go.Figure:
    """series: [{name, fixed_depth: [{steps, accuracy}], confidence_exit: [{threshold, mean_steps, accuracy}],
    at: at_equal_steps}]. Per model: the fixed-depth curve (dotted), the confidence-exit curve (solid) and the
    learned halting as a diamond at its mean E[n] with its 95 % sampling interval. One model: a colour per
    policy; several: a colour per model."""
    fig = go.Figure()
    one = len(series) == 1
    n_max = 1
    for i, s in enumerate(series):
        name, at = s["name"], s["at"]
        prefix = "" if one else f"{name}: "
        fd, ce = s["fixed_depth"], sorted(s["confidence_exit"], key=lambda r: (r["mean_steps"], r["threshold"]))
        n_max = max(n_max, len(fd))
        c_fixed, c_conf, c_learned = (FIXED_COLOR, CONFIDENCE_COLOR, LEARNED_COLOR) if one else (PALETTE[i % 10],) * 3
        fig.add_trace(go.Scatter(
            x=[r["steps"] for r in fd], y=[r["accuracy"] for r in fd], mode="lines+markers", name=prefix + "fixed depth",
            line=dict(color=c_fixed, dash="dot"), marker=dict(size=5), legendgroup=name,
            hovertemplate=f"{prefix}always answer at step %{{x}}<br>accuracy %{{y:.4f}}<extra></extra>"))
        fig.add_trace(go.Scatter(
            x=[r["mean_steps"] for r in ce], y=[r["accuracy"] for r in ce], mode="lines+markers",
            name=prefix + "confidence exit", line=dict(color=c_conf), marker=dict(size=5), legendgroup=name,
            customdata=[r["threshold"] for r in ce],
            hovertemplate=f"{prefix}exit at probability ≥ %{{customdata:.5f}}<br>mean steps %{{x:.2f}}<br>"
                          f"accuracy %{{y:.4f}}<extra></extra>"))
        lo, hi = at["learned_interval"]
        fig.add_trace(go.Scatter(
            x=[at["mean_steps"]], y=[at["learned"]], mode="markers", name=prefix + "learned halting",
            marker=dict(color=c_learned, size=12, symbol="diamond", line=dict(color="black", width=1)),
            error_y=dict(type="data", symmetric=False, array=[hi - at["learned"]], arrayminus=[at["learned"] - lo],
                         visible=True, thickness=1.5, width=6), legendgroup=name,
            hovertemplate=f"{prefix}learned halting<br>mean E[n] %{{x:.2f}}<br>accuracy %{{y:.4f}} "
                          f"(95% sampling interval {lo:.4f}–{hi:.4f})<extra></extra>"))
        fig.add_trace(go.Scatter(      # the two baselines at the same mean steps: open markers on their curves
            x=[at["mean_steps"]] * 2, y=[at["fixed_depth"], at["confidence_exit"]], mode="markers",
            marker=dict(color=[c_fixed, c_conf], size=9, symbol="circle-open", line=dict(width=2)),
            showlegend=False, text=["fixed depth", "confidence exit"], legendgroup=name,
            hovertemplate=f"{prefix}%{{text}} at %{{x:.2f}} mean steps<br>accuracy %{{y:.4f}}<extra></extra>"))
    set_layout(fig, xaxis={**step_axis(n_max, title="mean steps per input"), "tickformat": None},
               yaxis=dict(title="test accuracy", range=y_range(series)))
    return layout(fig, title or "Accuracy at equal compute: learned halting vs two rules")


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
    later answer is the target."""
    answers = torch.as_tensor(np.asarray(probs)).argmax(1)                          # [N]
    s = int(settle_steps((answers == target).unsqueeze(1))[0])
    what = "right" if truth_known else f"its final answer ({target})"
    if s == 0:
        return (f"Its answer at the last step is wrong: it never settled on the right answer; it halted at step "
                f"{halt_step}, E[n] = {expected_steps:.2f}.")
    after = expected_steps - s
    return (f"Its answer settled at step {s} ({what} from then on); it halted at step {halt_step}, and E[n] = "
            f"{expected_steps:.2f} is {abs(after):.2f} steps {'after' if after >= 0 else 'before'} it settled.")
