"""Plotly figures of halting: the prior, one input's steps, training curves and run overlays
(plain functions of numbers returning go.Figure; no Streamlit). Style: explorer.figures.style.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ponder.analysis.studies import prior_mean
from ponder.losses import REGULARISERS

from .style import (CORRECT_COLOR, HEIGHT, LEARNED_COLOR, NEUTRAL_COLOR, PALETTE, PRIOR_COLOR, arr, count_axis,
                    halt_marker, layout, log_ticks, prior_trace, rule, set_layout, step_axis, step_cursor, step_dtick, steps,
                    step_shades)


def prior_fig(lambda_p: float, n_steps: int, title: str = "") -> go.Figure:
    """The geometric prior as bars, with its mean 1/λp (and the mean truncated at N) marked."""
    fig = go.Figure(prior_trace(lambda_p, n_steps, as_bars=True))
    mean = 1.0 / lambda_p
    beyond = mean > n_steps + 0.5                                # off the step axis: named, not drawn
    rule(fig, x=mean, line=dict(color=PRIOR_COLOR, dash="dash"), draw=not beyond,
          text=f"mean 1/λp = {mean:.2f}" + (f" (beyond N = {n_steps})" if beyond else ""))
    tmean = prior_mean(lambda_p, n_steps)
    if abs(tmean - mean) > 0.05:
        rule(fig, x=tmean, line=dict(color=NEUTRAL_COLOR, dash="dot"), text=f"mean truncated at N: {tmean:.2f}")
    set_layout(fig, xaxis=step_axis(n_steps),
               yaxis=dict(title="probability of halting at n", rangemode="tozero"))
    return layout(fig, title or f"Geometric prior, λp = {lambda_p:g}, N = {n_steps}")


def halting_fig(p: Sequence[float], lambda_p: Optional[float] = None, title: str = "",
                halt_step: Optional[int] = None, name: str = "learned p_n", max_ticks: int = 20) -> go.Figure:
    """Learned p_n as bars, with the geometric prior of the model's λp overlaid as a line."""
    p = arr(p)
    n = len(p)
    fig = go.Figure(go.Bar(x=steps(n), y=p, name=name, marker_color=LEARNED_COLOR,
                           hovertemplate="step %{x}<br>p_n = %{y:.4f}<extra>" + name + "</extra>"))
    if lambda_p is not None:
        fig.add_trace(prior_trace(lambda_p, n))
    halt_marker(fig, halt_step)
    set_layout(fig, xaxis=step_axis(n, max_ticks=max_ticks),
               yaxis=dict(title="p_n (halt exactly at n)", rangemode="tozero"))
    return layout(fig, title or "Halting distribution p_n vs prior")


def side_by_side(figs: Sequence[go.Figure], max_ticks: int = 10) -> Sequence[go.Figure]:
    """Per-step charts shown side by side, made to read alike: one y scale (0 to the highest value of any of
    them), upright step labels, at most max_ticks of them (a narrow column rotated crowded labels on its own)."""
    ys = [np.asarray(t.y, np.float64) for f in figs for t in f.data if t.y is not None]
    top = max([float(y[np.isfinite(y)].max()) for y in ys if np.isfinite(y).any()] + [1e-9])
    for f in figs:
        n = max([len(t.x) for t in f.data if t.x is not None] + [1])
        set_layout(f, yaxis=dict(range=[0, top * 1.08], autorange=False),
                   xaxis=dict(tickangle=0, dtick=step_dtick(n, max_ticks)))
    return figs


def lambda_fig(lambdas: Sequence[float], lambda_p: Optional[float] = None, title: str = "",
               halt_step: Optional[int] = None) -> go.Figure:
    """λ_n, the chance to halt at step n if not halted before (λ_N = 1 by definition)."""
    lam = arr(lambdas)
    n = len(lam)
    fig = go.Figure(go.Scatter(x=steps(n), y=lam, mode="lines+markers", name="λ_n",
                               line=dict(color=LEARNED_COLOR), marker=dict(size=7),
                               hovertemplate="step %{x}<br>λ_n = %{y:.4f}<extra></extra>"))
    if lambda_p is not None:
        rule(fig, y=lambda_p, line=dict(color=PRIOR_COLOR, dash="dash"), text=f"prior's constant λp = {lambda_p:g}")
    halt_marker(fig, halt_step)
    set_layout(fig, xaxis=step_axis(n),
               yaxis=dict(title="λ_n", range=[0, 1.05]))
    return layout(fig, title or "λ_n: chance to halt at step n (if still running)")


def cumulative_fig(p: Sequence[float], title: str = "", halt_step: Optional[int] = None) -> go.Figure:
    """The halting mass as it accumulates to 1: P(halted by n) = Σ_{j≤n} p_j (the line, with the 0.5 line where
    deterministic mode stops), its bar at step n stacked from the mass p_j that halted at each step j ≤ n (one
    colour a step, light to dark)."""
    p = arr(p)
    n = len(p)
    cdf = np.cumsum(p)
    median = int(np.argmax(cdf >= 0.5 - 1e-9) + 1) if (cdf >= 0.5 - 1e-9).any() else n
    fig = go.Figure(go.Scatter(x=steps(n), y=cdf, mode="lines+markers", name="P(halted by n)",
                               line=dict(color=LEARNED_COLOR, shape="hv"), marker=dict(size=6),
                               hovertemplate="step %{x}<br>P(halted by n) = %{y:.4f}<extra></extra>"))
    shades = step_shades(n)
    for j in range(1, n + 1):                           # the mass that halted at step j, in every bar from j on
        fig.add_trace(go.Bar(x=steps(n)[j - 1:], y=np.full(n - j + 1, p[j - 1]), marker_color=shades[j - 1],
                             name="p_j, stacked", legendgroup="mass", showlegend=j == 1, opacity=0.75,
                             hovertemplate=f"by step %{{x}}: p_{j} = {p[j - 1]:.4f} halted at step {j}<extra></extra>"))
    rule(fig, y=0.5, line=dict(color=NEUTRAL_COLOR, dash="dash"))
    rule(fig, x=median, line=dict(color=NEUTRAL_COLOR, dash="dot"), text=f"median step {median} (P ≥ 0.5)")
    halt_marker(fig, halt_step)
    set_layout(fig, xaxis=step_axis(n), barmode="stack", bargap=0.15,
               yaxis=dict(title="P(halted by step n)", range=[0, 1.05], tickvals=[0, 0.25, 0.5, 0.75, 1]))
    return layout(fig, title or "Halting mass by step n: p_1 + … + p_n")


HALT_BOX = dict(color="black", width=2, dash="dot")      # the heatmap's halting step: a dotted box
ROW_PX, LABEL_EVERY_STEP = 18, 40                       # px a step's row on the heatmap; it labels each step up to 40


def step_probs_heatmap(probs, class_names: Optional[Sequence[str]] = None, title: str = "",
                       halt_step: Optional[int] = None, truth: Optional[int] = None,
                       cursor: Optional[int] = None) -> go.Figure:
    """Per-step class probabilities: row n = what the network would answer if it stopped at step n. Every step is
    labelled (up to LABEL_EVERY_STEP steps; the figure grows ROW_PX a step); the slider's step (cursor) is an
    orange box, and the halting step a dotted black one drawn over it, so both show where they meet."""
    z = np.asarray(probs, dtype=np.float64)
    n, c = z.shape
    names = [str(k) for k in (class_names if class_names is not None else range(c))]
    fig = go.Figure(go.Heatmap(
        z=z, x=names, y=steps(n), zmin=0, zmax=1, colorscale="Blues",
        colorbar=dict(title="p", thickness=12),
        hovertemplate="step %{y}<br>class %{x}<br>probability %{z:.4f}<extra></extra>"))
    step_cursor(fig, cursor, across="y")
    if halt_step:
        fig.add_shape(type="rect", x0=-0.5, x1=c - 0.5, y0=halt_step - 0.5, y1=halt_step + 0.5, line=HALT_BOX)
    every = n <= LABEL_EVERY_STEP
    set_layout(fig, yaxis=dict(title="step n", autorange="reversed", tickmode="linear", tick0=1,
                               dtick=1 if every else step_dtick(n, max_ticks=10), tickformat="d"),
               xaxis=dict(title="class" + (f" (true: {names[truth]})" if truth is not None else ""), type="category"))
    return layout(fig, title or "Class probabilities at each step", height=max(HEIGHT, 110 + ROW_PX * n) if every
                  else HEIGHT)


def trace_figures(tr, class_names: Sequence[str], truth: Optional[int] = None, cursor: Optional[int] = None) -> dict:
    """The four per-step figures of one input (a ponder.analysis.studies.Trace), as the digit and parity
    pages show them: {"heat", "p", "lambda", "cdf"}. No halt marker in expected mode (it runs all N);
    cursor: the step the step slider is on, marked on each."""
    halt = tr.halt_step if tr.mode != "expected" else None
    figs = {"heat": step_probs_heatmap(tr.probs, class_names, halt_step=halt, truth=truth, cursor=cursor,
                                       title="Per-step answer: class probabilities at step n"),
            "p": halting_fig(tr.p, tr.lambda_p, halt_step=halt, title="Learned p_n vs prior"),
            "lambda": lambda_fig(tr.lambdas, tr.lambda_p, halt_step=halt),
            "cdf": cumulative_fig(tr.p, halt_step=halt)}
    for name in ("p", "lambda", "cdf"):
        step_cursor(figs[name], cursor)
    return figs


def topk_fig(probs: Sequence[float], class_names: Sequence[str], k: int = 3, truth: Optional[int] = None,
             title: str = "") -> go.Figure:
    """The k most probable classes of an answer as horizontal bars, the most probable on top, each labelled
    with its probability; the true class (if known) in the correct colour, the others in the learned one."""
    p = arr(probs)
    top = [int(i) for i in np.argsort(-p, kind="stable")[:k]]
    names = [str(class_names[i]) for i in top]
    colors = [CORRECT_COLOR if truth is not None and i == truth else LEARNED_COLOR for i in top]
    fig = go.Figure(go.Bar(x=p[top], y=names, orientation="h", marker_color=colors, text=[f"{p[i]:.1%}" for i in top],
                           textposition="outside", cliponaxis=False, name="probability",
                           hovertemplate="class %{y}<br>probability %{x:.4f}<extra></extra>"))
    set_layout(fig, xaxis=dict(range=[0, 1.6], tickvals=[0, 0.5, 1], tickformat=".0%", title=None),   # "100.0%" fits
               yaxis=dict(type="category", autorange="reversed", title=None))
    layout(fig, title, height=40 + 34 * len(top), showlegend=False)
    set_layout(fig, margin=dict(l=30, r=10, t=40 if title else 10, b=25))
    return fig


def mixture_fig(p: Sequence[float], probs, class_names: Sequence[str], k: int = 3, truth: Optional[int] = None,
                title: str = "") -> go.Figure:
    """Expected mode's answer as the mixture of the step answers: for each of the k most probable classes c, a bar
    of Σ_n p_n·P(c | step n) stacked from each step's share p_n·P(c | step n) (the halting-mass chart's shades)."""
    p, z = arr(p), np.asarray(probs, np.float64)                                     # [N], [N, C]
    share, answer = p[:, None] * z, (p[:, None] * z).sum(0)                          # [N, C] step n's share, [C]
    top = [int(i) for i in np.argsort(-answer, kind="stable")[:k]]
    names, shades, fig = [str(class_names[i]) for i in top], step_shades(len(p)), go.Figure()
    for n in range(len(p)):
        fig.add_trace(go.Bar(x=share[n, top], y=names, orientation="h", marker_color=shades[n], name="step shares",
                             legendgroup="steps", showlegend=n == 0, customdata=z[n, top],
                             hovertemplate=f"class %{{y}}<br>step {n + 1}: p_n = {p[n]:.3f} × P(class) = "
                                           "%{customdata:.3f} → %{x:.4f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=answer[top], y=names, mode="text", text=[f"{answer[i]:.1%}" for i in top],
                             textposition="middle right", name="the mixture", showlegend=False, cliponaxis=False,
                             hovertemplate="class %{y}<br>Σ_n p_n·P(class | step n) = %{x:.4f}<extra></extra>"))
    set_layout(fig, barmode="stack", xaxis=dict(range=[0, 1.6], tickvals=[0, 0.5, 1], tickformat=".0%", title=None),
               yaxis=dict(type="category", autorange="reversed", title=None,
                          ticktext=[f"{n} ✓" if truth is not None and i == truth else n for n, i in zip(names, top)],
                          tickvals=names))
    layout(fig, title, height=40 + 34 * len(top), showlegend=False)
    set_layout(fig, margin=dict(l=30, r=10, t=40 if title else 10, b=25))
    return fig


# ----------------------------------------------------------------------------- training curves

def _hist(history, key) -> tuple[np.ndarray, np.ndarray]:
    rows = [h for h in history if isinstance(h, dict) and h.get(key) is not None and h.get("step") is not None]
    return (np.array([h["step"] for h in rows], dtype=np.float64),
            np.array([h[key] for h in rows], dtype=np.float64))


def training_fig(history: Sequence[dict], lambda_p: Optional[float] = None, n_steps: Optional[int] = None,
                 title: str = "", regulariser: str = "kl") -> go.Figure:
    """Loss terms (total, reconstruction, the run's regulariser), accuracy and mean halting step by training step."""
    kl = REGULARISERS[regulariser].label if regulariser in REGULARISERS else regulariser   # as named if unknown
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08,
                        subplot_titles=("loss (log scale)", "accuracy", "mean halting step E[n]"))
    few = len([h for h in history if isinstance(h, dict)]) < 30      # markers, so a first point shows
    line_mode = "lines+markers" if few else "lines"
    losses, xmax = [], 1.0
    for key, name, color, dash in (("loss", "total loss", "#1F2430", "solid"),
                                   ("rec", "reconstruction", PALETTE[2], "dot"), ("reg", kl, PALETTE[5], "solid")):
        x, y = _hist(history, key)
        y = np.clip(y, 1e-6, None)
        losses.append(y)
        xmax = max([xmax] + list(x))
        fig.add_trace(go.Scatter(x=x, y=y, name=name, mode=line_mode, marker=dict(size=5),
                                 line=dict(color=color, dash=dash),
                                 hovertemplate="step %{x}<br>" + name + " = %{y:.4g}<extra></extra>"), 1, 1)
    x, y = _hist(history, "accuracy")
    fig.add_trace(go.Scatter(x=x, y=y, name="batch accuracy", mode=line_mode, line=dict(color=PALETTE[4]),
                             marker=dict(size=5),
                             hovertemplate="step %{x}<br>batch accuracy %{y:.3f}<extra></extra>"), 1, 2)
    x, y = _hist(history, "val_accuracy")
    fig.add_trace(go.Scatter(x=x, y=y, name="validation accuracy", mode="lines+markers",
                             line=dict(color=CORRECT_COLOR), marker=dict(size=7),
                             hovertemplate="step %{x}<br>validation accuracy %{y:.4f}<extra></extra>"), 1, 2)
    x, y = _hist(history, "mean_steps")
    fig.add_trace(go.Scatter(x=x, y=y, name="mean E[n]", mode=line_mode, line=dict(color=LEARNED_COLOR),
                             marker=dict(size=5),
                             hovertemplate="step %{x}<br>E[n] = %{y:.2f}<extra></extra>"), 1, 3)
    if lambda_p and n_steps and len(x):
        m = prior_mean(lambda_p, n_steps)
        fig.add_trace(go.Scatter(x=[0, max(float(x.max()), 1.0)], y=[m, m], name="prior mean", mode="lines",
                                 line=dict(color=PRIOR_COLOR, dash="dash"),
                                 hovertemplate="prior mean (truncated at N) %{y:.2f}<extra></extra>"), 1, 3)
    fig.update_yaxes(type="log", row=1, col=1, **log_ticks(np.concatenate(losses) if losses else []))
    fig.update_yaxes(range=[0, 1.02], row=1, col=2)
    fig.update_yaxes(rangemode="tozero", row=1, col=3)
    fig.update_xaxes(**count_axis(xmax))
    layout(fig, title, height=330)
    return set_layout(fig, margin=dict(t=35 if not title else 12))       # room for the subplot titles


def overlay_training_fig(histories: dict, key: str, title: str, ytitle: str, log: bool = False) -> go.Figure:
    """One training metric for several runs: {run name: history}."""
    fig = go.Figure()
    ys, xmax = [], 1.0
    for i, (name, hist) in enumerate(histories.items()):
        x, y = _hist(hist, key)
        if log:
            y = np.clip(y, 1e-6, None)
        ys.append(y)
        xmax = max([xmax] + list(x))
        fig.add_trace(go.Scatter(x=x, y=y, name=name, mode="lines+markers" if len(x) < 30 else "lines",
                                 line=dict(color=PALETTE[i % len(PALETTE)]),
                                 hovertemplate=f"{name}<br>step %{{x}}<br>{ytitle} %{{y:.4g}}<extra></extra>"))
    set_layout(fig, xaxis=count_axis(xmax), yaxis=dict(title=ytitle, type="log" if log else "linear",
                                                       **(log_ticks(np.concatenate(ys)) if log and ys else {})))
    return layout(fig, title)


# ----------------------------------------------------------------------------- several models

PRIOR_DASHES = ("dash", "dot", "dashdot", "longdash")     # one per distinct prior on an overlay

def overlay_halting_fig(series: Sequence[dict], title: str = "") -> go.Figure:
    """Several halting distributions as lines: series = [{name, p, lambda_p}]; each distinct prior (λp, N)
    once, dashed, in the colour of the first model that has it and with a dash pattern of its own."""
    fig = go.Figure()
    n_max = 1
    shown_priors = set()
    for i, s in enumerate(series):
        p = arr(s["p"])
        n_max = max(n_max, len(p))
        fig.add_trace(go.Scatter(x=steps(len(p)), y=p, name=s["name"], mode="lines+markers",
                                 line=dict(color=PALETTE[i % len(PALETTE)], width=2.5), marker=dict(size=6),
                                 hovertemplate=s["name"] + "<br>step %{x}<br>p_n = %{y:.4f}<extra></extra>"))
    for i, s in enumerate(series):
        key = (s.get("lambda_p"), len(arr(s["p"])))
        if s.get("lambda_p") and key not in shown_priors:
            dash = PRIOR_DASHES[len(shown_priors) % len(PRIOR_DASHES)]
            shown_priors.add(key)
            fig.add_trace(prior_trace(s["lambda_p"], key[1], name=f"prior λp={s['lambda_p']:g}, N={key[1]}",
                                      color=PALETTE[i % len(PALETTE)], dash=dash))
    set_layout(fig, xaxis=step_axis(n_max),
               yaxis=dict(title="p_n", rangemode="tozero"))
    return layout(fig, title or "Halting distributions")


def overlay_steps_fig(series: Sequence[dict], key: str, title: str, ytitle: str,
                      yrange: Optional[list] = None) -> go.Figure:
    """Several per-step curves (e.g. accuracy if stopped at n): series = [{name, <key>: [N]}]."""
    fig = go.Figure()
    n_max = 1
    for i, s in enumerate(series):
        y = arr(s[key])
        n_max = max(n_max, len(y))
        fig.add_trace(go.Scatter(x=steps(len(y)), y=y, name=s["name"], mode="lines+markers",
                                 line=dict(color=PALETTE[i % len(PALETTE)]), marker=dict(size=6),
                                 hovertemplate=s["name"] + "<br>step %{x}<br>" + ytitle + " %{y:.4f}<extra></extra>"))
    set_layout(fig, xaxis=step_axis(n_max),
               yaxis=dict(title=ytitle, range=yrange))
    return layout(fig, title)


