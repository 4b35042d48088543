"""Plotly figure builders: plain functions of numbers returning go.Figure (no Streamlit, no torch).

Conventions on every page: the prior is always PRIOR_COLOR and a learned halting distribution
LEARNED_COLOR; step axes have integer ticks; every trace has hover text with its values.
Steps are 1-based (step n = 1..N).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

PRIOR_COLOR = "#F58518"       # the geometric prior, everywhere
LEARNED_COLOR = "#4C78A8"     # the learned halting distribution p_n, everywhere
CORRECT_COLOR = "#54A24B"
WRONG_COLOR = "#E45756"
NEUTRAL_COLOR = "#7F7F7F"
# for series that are neither prior nor learned-vs-prior (runs in an overlay, loss terms, sets)
PALETTE = ["#4C78A8", "#54A24B", "#B279A2", "#E45756", "#72B7B2", "#9D755D", "#EECA3B", "#FF9DA6",
           "#BAB0AC", "#1F77B4"]
HEIGHT = 320


# ----------------------------------------------------------------------------- helpers

def geometric_prior(lambda_p: float, n_steps: int) -> np.ndarray:
    """p_G(n) = λp (1 − λp)^(n−1), n = 1..N: the prior as the paper writes it (not renormalised)."""
    n = np.arange(n_steps, dtype=np.float64)
    return lambda_p * (1.0 - lambda_p) ** n


def truncated_prior_mean(lambda_p: float, n_steps: int) -> float:
    """Mean of the prior truncated to N steps and renormalised (what the KL term pulls towards)."""
    p = geometric_prior(lambda_p, n_steps)
    return float((np.arange(1, n_steps + 1) * p).sum() / p.sum())


def steps(n: int) -> np.ndarray:
    return np.arange(1, n + 1)


def step_dtick(n: int, max_ticks: int = 20) -> int:
    """An integer tick spacing that keeps at most about max_ticks ticks on a step axis."""
    return max(1, int(math.ceil(n / max_ticks)))


def _step_axis(n: int, title: str = "step n", max_ticks: int = 20) -> dict:
    return dict(title=title, tickmode="linear", tick0=1, dtick=step_dtick(n, max_ticks), tickformat="d",
                range=[0.4, n + 0.6])


def _count_axis(xmax: float, title: str = "training step", max_ticks: int = 6) -> dict:
    """An axis of whole counts (training steps): integer ticks from 0, never repeated labels."""
    xmax = float(xmax) if xmax and math.isfinite(float(xmax)) else 1.0
    raw = max(1.0, xmax / max_ticks)
    mag = 10 ** math.floor(math.log10(raw))
    dtick = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return dict(title=title, tickmode="linear", tick0=0, dtick=int(max(1, dtick)), tickformat="d",
                rangemode="tozero")


def _log_ticks(values) -> dict:
    """Readable ticks for a log axis: powers of ten over wide ranges, 1-2-5 over narrow ones."""
    v = np.asarray([x for x in np.asarray(values, np.float64).reshape(-1) if math.isfinite(x) and x > 0])
    if not len(v):
        return {}
    lo, hi = math.floor(math.log10(v.min())), math.ceil(math.log10(v.max()))
    hi = max(hi, lo + 1)
    mults = (1,) if hi - lo > 2 else (1, 2, 5)
    vals = [m * 10.0 ** e for e in range(lo, hi + 1) for m in mults]
    keep = [t for t in vals if v.min() / 2.5 <= t <= v.max() * 2.5] or vals
    return dict(tickmode="array", tickvals=keep, ticktext=[f"{t:.3g}" for t in keep])


def _layout(fig: go.Figure, title: str = "", height: int = HEIGHT, **kw) -> go.Figure:
    fig.update_layout(title=dict(text=title, x=0, xanchor="left", y=0.98, yanchor="top", yref="container",
                                 font=dict(size=15)) if title else None,
                      height=height + (25 if title else 0), margin=dict(l=55, r=20, t=70 if title else 40, b=45),
                      legend=dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0),
                      hoverlabel=dict(namelength=-1), **kw)
    return fig


def _arr(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).reshape(-1)


def _rule(fig: go.Figure, x: Optional[float] = None, y: Optional[float] = None, line: Optional[dict] = None,
          text: str = "", draw: bool = True) -> None:
    """A line across the whole plot, vertical at x= or horizontal at y=, named in the legend.

    The line is a layout shape (plotly's add_vline/add_hline spent ~10 ms each resolving subplot
    references, most of a digit's figure time); its label is a legend entry with the same line
    style, an empty trace, so labels never collide with each other, the data or the plot's edge.
    draw=False lists the entry without the line (a value beyond the axis, named as such)."""
    line = line or {}
    if draw and x is not None:      # vertical: spans the plot's height (paper coordinates on y)
        fig.add_shape(type="line", xref="x", yref="paper", x0=x, x1=x, y0=0, y1=1, line=line)
    elif draw:                      # horizontal: spans the plot's width
        fig.add_shape(type="line", xref="paper", yref="y", x0=0, x1=1, y0=y, y1=y, line=line)
    if text:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=text, line=line,
                                 hovertemplate=text + "<extra></extra>"))


def _halt_marker(fig: go.Figure, halt_step: Optional[int]) -> None:
    if halt_step:
        _rule(fig, x=halt_step, line=dict(color="black", dash="dot", width=1.5), text=f"halted at step {halt_step}")


# ----------------------------------------------------------------------------- halting distributions

def prior_trace(lambda_p: float, n: int, as_bars: bool = False, name: Optional[str] = None, **kw):
    """The prior p_G(n) = λp(1−λp)^(n−1) as bars or as a line with markers."""
    p = geometric_prior(lambda_p, n)
    name = name or f"prior λp={lambda_p:g}"
    hover = "step %{x}<br>prior p_G = %{y:.4f}<extra>" + name + "</extra>"
    if as_bars:
        return go.Bar(x=steps(n), y=p, name=name, marker_color=PRIOR_COLOR, hovertemplate=hover, **kw)
    return go.Scatter(x=steps(n), y=p, name=name, mode="lines+markers",
                      line=dict(color=PRIOR_COLOR, width=2, dash="dash"), marker=dict(size=6),
                      hovertemplate=hover, **kw)


def prior_fig(lambda_p: float, n_steps: int, title: str = "") -> go.Figure:
    """The geometric prior as bars, with its mean 1/λp (and the mean truncated at N) marked."""
    fig = go.Figure(prior_trace(lambda_p, n_steps, as_bars=True))
    mean = 1.0 / lambda_p
    beyond = mean > n_steps + 0.5                                # off the step axis: named, not drawn
    _rule(fig, x=mean, line=dict(color=PRIOR_COLOR, dash="dash"), draw=not beyond,
          text=f"mean 1/λp = {mean:.2f}" + (f" (beyond N = {n_steps})" if beyond else ""))
    tmean = truncated_prior_mean(lambda_p, n_steps)
    if abs(tmean - mean) > 0.05:
        _rule(fig, x=tmean, line=dict(color=NEUTRAL_COLOR, dash="dot"), text=f"mean truncated at N: {tmean:.2f}")
    fig.update_xaxes(**_step_axis(n_steps))
    fig.update_yaxes(title="probability of halting at n", rangemode="tozero")
    return _layout(fig, title or f"Geometric prior, λp = {lambda_p:g}, N = {n_steps}")


def halting_fig(p: Sequence[float], lambda_p: Optional[float] = None, title: str = "",
                halt_step: Optional[int] = None, name: str = "learned p_n", max_ticks: int = 20) -> go.Figure:
    """Learned p_n as bars, with the geometric prior of the model's λp overlaid as a line."""
    p = _arr(p)
    n = len(p)
    fig = go.Figure(go.Bar(x=steps(n), y=p, name=name, marker_color=LEARNED_COLOR,
                           hovertemplate="step %{x}<br>p_n = %{y:.4f}<extra>" + name + "</extra>"))
    if lambda_p is not None:
        fig.add_trace(prior_trace(lambda_p, n))
    _halt_marker(fig, halt_step)
    fig.update_xaxes(**_step_axis(n, max_ticks=max_ticks))
    fig.update_yaxes(title="p_n (halt exactly at n)", rangemode="tozero")
    return _layout(fig, title or "Halting distribution p_n vs prior")


def lambda_fig(lambdas: Sequence[float], lambda_p: Optional[float] = None, title: str = "",
               halt_step: Optional[int] = None) -> go.Figure:
    """λ_n, the chance to halt at step n if not halted before (λ_N = 1 by definition)."""
    lam = _arr(lambdas)
    n = len(lam)
    fig = go.Figure(go.Scatter(x=steps(n), y=lam, mode="lines+markers", name="λ_n",
                               line=dict(color=LEARNED_COLOR), marker=dict(size=7),
                               hovertemplate="step %{x}<br>λ_n = %{y:.4f}<extra></extra>"))
    if lambda_p is not None:
        _rule(fig, y=lambda_p, line=dict(color=PRIOR_COLOR, dash="dash"), text=f"prior's constant λp = {lambda_p:g}")
    _halt_marker(fig, halt_step)
    fig.update_xaxes(**_step_axis(n))
    fig.update_yaxes(title="λ_n", range=[0, 1.05])
    return _layout(fig, title or "λ_n: chance to halt at step n (if still running)")


def cumulative_fig(p: Sequence[float], title: str = "", halt_step: Optional[int] = None) -> go.Figure:
    """The cumulative halting probability Σ_{j≤n} p_j with the 0.5 line (the deterministic halt)."""
    p = _arr(p)
    n = len(p)
    cdf = np.cumsum(p)
    median = int(np.argmax(cdf >= 0.5 - 1e-9) + 1) if (cdf >= 0.5 - 1e-9).any() else n
    fig = go.Figure(go.Scatter(x=steps(n), y=cdf, mode="lines+markers", name="P(halted by n)",
                               line=dict(color=LEARNED_COLOR, shape="hv"), marker=dict(size=6),
                               hovertemplate="step %{x}<br>P(halted by n) = %{y:.4f}<extra></extra>"))
    _rule(fig, y=0.5, line=dict(color=NEUTRAL_COLOR, dash="dash"))
    _rule(fig, x=median, line=dict(color=NEUTRAL_COLOR, dash="dot"), text=f"median step {median} (P ≥ 0.5)")
    _halt_marker(fig, halt_step)
    fig.update_xaxes(**_step_axis(n))
    fig.update_yaxes(title="P(halted by step n)", range=[0, 1.05], tickvals=[0, 0.25, 0.5, 0.75, 1])
    return _layout(fig, title or "Cumulative halting probability")


def step_probs_heatmap(probs, class_names: Optional[Sequence[str]] = None, title: str = "",
                       halt_step: Optional[int] = None, truth: Optional[int] = None) -> go.Figure:
    """Per-step class probabilities: row n = what the network would answer if it stopped at step n."""
    z = np.asarray(probs, dtype=np.float64)
    n, c = z.shape
    names = [str(k) for k in (class_names if class_names is not None else range(c))]
    fig = go.Figure(go.Heatmap(
        z=z, x=names, y=steps(n), zmin=0, zmax=1, colorscale="Blues",
        colorbar=dict(title="p", thickness=12),
        hovertemplate="step %{y}<br>class %{x}<br>probability %{z:.4f}<extra></extra>"))
    if halt_step:
        fig.add_shape(type="rect", x0=-0.5, x1=c - 0.5, y0=halt_step - 0.5, y1=halt_step + 0.5,
                      line=dict(color="black", width=2, dash="dot"))
    fig.update_yaxes(title="step n", autorange="reversed", tickmode="linear", tick0=1,
                     dtick=step_dtick(n, max_ticks=10), tickformat="d")      # ~20 px a label at HEIGHT
    fig.update_xaxes(title="class" + (f" (true: {names[truth]})" if truth is not None else ""), type="category")
    return _layout(fig, title or "Class probabilities at each step")


def trace_figures(tr, class_names: Sequence[str], truth: Optional[int] = None) -> dict:
    """The four per-step figures of one input (an explorer.compute.Trace), as the digit and parity
    pages show them: {"heat", "p", "lambda", "cdf"}. No halt marker in expected mode (it runs all N)."""
    halt = tr.halt_step if tr.mode != "expected" else None
    return {"heat": step_probs_heatmap(tr.probs, class_names, halt_step=halt, truth=truth,
                                       title="Per-step answer: class probabilities at step n"),
            "p": halting_fig(tr.p, tr.lambda_p, halt_step=halt, title="Learned p_n vs prior"),
            "lambda": lambda_fig(tr.lambdas, tr.lambda_p, halt_step=halt),
            "cdf": cumulative_fig(tr.p, halt_step=halt)}


# ----------------------------------------------------------------------------- training curves

def _hist(history, key) -> tuple[np.ndarray, np.ndarray]:
    rows = [h for h in history if isinstance(h, dict) and h.get(key) is not None and h.get("step") is not None]
    return (np.array([h["step"] for h in rows], dtype=np.float64),
            np.array([h[key] for h in rows], dtype=np.float64))


def training_fig(history: Sequence[dict], lambda_p: Optional[float] = None, n_steps: Optional[int] = None,
                 title: str = "") -> go.Figure:
    """Loss terms (total, reconstruction, KL), accuracy and mean halting step against training step."""
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.08,
                        subplot_titles=("loss (log scale)", "accuracy", "mean halting step E[n]"))
    few = len([h for h in history if isinstance(h, dict)]) < 30      # markers, so a first point shows
    line_mode = "lines+markers" if few else "lines"
    losses, xmax = [], 1.0
    for key, name, color, dash in (("loss", "total loss", "#1F2430", "solid"),
                                   ("rec", "reconstruction", PALETTE[2], "dot"), ("reg", "KL(p‖p_G)", PALETTE[5], "solid")):
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
        m = truncated_prior_mean(lambda_p, n_steps)
        fig.add_trace(go.Scatter(x=[0, max(float(x.max()), 1.0)], y=[m, m], name="prior mean", mode="lines",
                                 line=dict(color=PRIOR_COLOR, dash="dash"),
                                 hovertemplate="prior mean (truncated at N) %{y:.2f}<extra></extra>"), 1, 3)
    fig.update_yaxes(type="log", row=1, col=1, **_log_ticks(np.concatenate(losses) if losses else []))
    fig.update_yaxes(range=[0, 1.02], row=1, col=2)
    fig.update_yaxes(rangemode="tozero", row=1, col=3)
    fig.update_xaxes(**_count_axis(xmax))
    _layout(fig, title, height=360)
    fig.update_layout(legend=dict(y=-0.28, yanchor="top"), margin=dict(t=40 if not title else 70, b=20))
    return fig


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
    fig.update_xaxes(**_count_axis(xmax))
    fig.update_yaxes(title=ytitle, type="log" if log else "linear",
                     **(_log_ticks(np.concatenate(ys)) if log and ys else {}))
    return _layout(fig, title)


# ----------------------------------------------------------------------------- several models

def overlay_halting_fig(series: Sequence[dict], title: str = "") -> go.Figure:
    """Several halting distributions as lines: series = [{name, p, lambda_p}]; priors in the prior colour."""
    fig = go.Figure()
    n_max = 1
    shown_priors = set()
    for i, s in enumerate(series):
        p = _arr(s["p"])
        n_max = max(n_max, len(p))
        fig.add_trace(go.Scatter(x=steps(len(p)), y=p, name=s["name"], mode="lines+markers",
                                 line=dict(color=PALETTE[i % len(PALETTE)], width=2.5), marker=dict(size=6),
                                 hovertemplate=s["name"] + "<br>step %{x}<br>p_n = %{y:.4f}<extra></extra>"))
    for s in series:
        key = (s.get("lambda_p"), len(_arr(s["p"])))
        if s.get("lambda_p") and key not in shown_priors:
            shown_priors.add(key)
            fig.add_trace(prior_trace(s["lambda_p"], key[1], name=f"prior λp={s['lambda_p']:g}, N={key[1]}"))
    fig.update_xaxes(**_step_axis(n_max))
    fig.update_yaxes(title="p_n", rangemode="tozero")
    return _layout(fig, title or "Halting distributions")


def overlay_steps_fig(series: Sequence[dict], key: str, title: str, ytitle: str,
                      yrange: Optional[list] = None) -> go.Figure:
    """Several per-step curves (e.g. accuracy if stopped at n): series = [{name, <key>: [N]}]."""
    fig = go.Figure()
    n_max = 1
    for i, s in enumerate(series):
        y = _arr(s[key])
        n_max = max(n_max, len(y))
        fig.add_trace(go.Scatter(x=steps(len(y)), y=y, name=s["name"], mode="lines+markers",
                                 line=dict(color=PALETTE[i % len(PALETTE)]), marker=dict(size=6),
                                 hovertemplate=s["name"] + "<br>step %{x}<br>" + ytitle + " %{y:.4f}<extra></extra>"))
    fig.update_xaxes(**_step_axis(n_max))
    fig.update_yaxes(title=ytitle, range=yrange)
    return _layout(fig, title)


# ----------------------------------------------------------------------------- λp sweep

def sweep_grid_fig(rows: Sequence[dict], cols: int = 3) -> go.Figure:
    """Small multiples: each run's learned halting distribution over its prior.

    rows: [{name, lambda_p, status, reason, halting (list or None)}]; failed runs without a
    distribution get a panel saying so.
    """
    rows = list(rows)
    if not rows:
        return _layout(go.Figure(), "No runs yet")
    cols = max(1, min(cols, len(rows)))
    nrows = int(math.ceil(len(rows) / cols))
    titles = [f"λp={r['lambda_p']:g} · {r.get('status', '')}" for r in rows]
    fig = make_subplots(rows=nrows, cols=cols, subplot_titles=titles, horizontal_spacing=0.06,
                        vertical_spacing=0.22 if nrows > 1 else 0.1)
    for i, r in enumerate(rows):
        rr, cc = i // cols + 1, i % cols + 1
        p = r.get("halting")
        if p:
            p = _arr(p)
            n = len(p)
            fig.add_trace(go.Bar(x=steps(n), y=p, name="learned p_n", marker_color=LEARNED_COLOR,
                                 showlegend=i == 0, legendgroup="learned",
                                 hovertemplate=f"{r['name']}<br>step %{{x}}<br>p_n = %{{y:.4f}}<extra></extra>"),
                          rr, cc)
            fig.add_trace(prior_trace(r["lambda_p"], n, name="prior", showlegend=i == 0, legendgroup="prior"),
                          rr, cc)
            ticks = [1] + list(range(5, n + 1, 5)) if n > 10 else list(range(1, n + 1))
            fig.update_xaxes(tickmode="array", tickvals=ticks, tickformat="d", range=[0.4, n + 0.6], row=rr, col=cc)
        else:
            failed = r.get("status") == "failed"
            text = (("failed: " if failed else "") + (r.get("reason") or "")) or r.get("status") or "no distribution"
            fig.update_xaxes(visible=False, row=rr, col=cc)
            fig.update_yaxes(visible=False, row=rr, col=cc)
            xd = fig.layout[f"xaxis{i + 1 if i else ''}"].domain       # the panel, in figure coordinates:
            yd = fig.layout[f"yaxis{i + 1 if i else ''}"].domain       # (axis refs misplace text on empty panels)
            fig.add_annotation(text=_wrap(text, 34), showarrow=False, xref="paper", yref="paper",
                               x=(xd[0] + xd[1]) / 2, y=(yd[0] + yd[1]) / 2, xanchor="center", yanchor="middle",
                               align="center", font=dict(color=WRONG_COLOR if failed else NEUTRAL_COLOR, size=12))
    _layout(fig, "", height=240 * nrows + 40)
    fig.update_layout(margin=dict(t=80),           # the legend sits above the panel titles
                      legend=dict(orientation="h", yref="container", y=1.0, yanchor="top", x=0, xanchor="left"))
    return fig


def _wrap(text: str, width: int) -> str:
    words, lines, cur = str(text).split(), [], ""
    for w in words:
        if len(cur) + len(w) + 1 > width and cur:
            lines.append(cur)
            cur = w
        else:
            cur = (cur + " " + w).strip()
    lines.append(cur)
    return "<br>".join(lines[:6])


def sweep_steps_fig(rows: Sequence[dict], n_steps: int = 20) -> go.Figure:
    """Mean halting step vs λp for finished runs, with 1/λp (and the prior's mean truncated at N)."""
    ok = sorted((r for r in rows if r.get("mean_steps") is not None), key=lambda r: r["lambda_p"])
    grid = np.linspace(0.05, 1.0, 96)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=grid, y=1 / grid, name="1/λp", mode="lines",
                             line=dict(color=PRIOR_COLOR, dash="dash"),
                             hovertemplate="λp %{x:.2f}<br>1/λp = %{y:.2f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=grid, y=[truncated_prior_mean(g, n_steps) for g in grid],
                             name=f"prior mean truncated at N={n_steps}", mode="lines",
                             line=dict(color=PRIOR_COLOR, dash="dot", width=1),
                             hovertemplate="λp %{x:.2f}<br>truncated prior mean %{y:.2f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[r["lambda_p"] for r in ok], y=[r["mean_steps"] for r in ok],
                             text=[r["name"] for r in ok], name="mean halting step (sampled)",
                             mode="lines+markers", line=dict(color=LEARNED_COLOR), marker=dict(size=9),
                             hovertemplate="%{text}<br>λp %{x:g}<br>mean steps %{y:.2f}<extra></extra>"))
    ymax = max([r["mean_steps"] for r in ok] + [truncated_prior_mean(0.05, n_steps), 2.0]) * 1.1
    fig.update_xaxes(title="λp", range=[0, 1.02])
    fig.update_yaxes(title="mean halting step", range=[0, ymax])
    return _layout(fig, "Mean halting step vs λp")


def sweep_accuracy_fig(rows: Sequence[dict]) -> go.Figure:
    ok = sorted((r for r in rows if r.get("accuracy") is not None), key=lambda r: r["lambda_p"])
    fig = go.Figure(go.Scatter(x=[r["lambda_p"] for r in ok], y=[r["accuracy"] for r in ok],
                               text=[r["name"] for r in ok], mode="lines+markers", name="test accuracy",
                               line=dict(color=CORRECT_COLOR), marker=dict(size=9),
                               hovertemplate="%{text}<br>λp %{x:g}<br>accuracy %{y:.4f}<extra></extra>"))
    lo = min([r["accuracy"] for r in ok] + [0.9])
    fig.update_xaxes(title="λp", range=[0, 1.02])
    fig.update_yaxes(title="test accuracy", range=[max(0.0, lo - 0.02), 1.0])
    return _layout(fig, "Accuracy vs λp", showlegend=False)


# ----------------------------------------------------------------------------- rotation study

def _label(r: dict) -> str:
    return f"±{r['angle']:g}°" if r.get("kind") == "uniform" else f"{r['angle']:g}°"


def rotation_accuracy_fig(rows: Sequence[dict]) -> go.Figure:
    """Accuracy vs angle (fixed angles as a line, uniform ±d ranges as separate markers)."""
    fig = go.Figure()
    for kind, color, name, sym in (("fixed", LEARNED_COLOR, "fixed angle θ", "circle"),
                                   ("uniform", PALETTE[2], "uniform in ±d", "diamond")):
        rr = [r for r in rows if r["kind"] == kind]
        if rr:
            fig.add_trace(go.Scatter(x=[r["angle"] for r in rr], y=[r["accuracy"] for r in rr],
                                     text=[_label(r) for r in rr], name=name, mode="lines+markers",
                                     line=dict(color=color), marker=dict(size=9, symbol=sym),
                                     hovertemplate="%{text}<br>accuracy %{y:.4f}<extra></extra>"))
    fig.update_xaxes(title="rotation angle θ, or range d (degrees)", dtick=15, tickformat="d")
    fig.update_yaxes(title="accuracy", range=[0, 1.02])
    return _layout(fig, "Accuracy vs rotation")


def rotation_steps_fig(rows: Sequence[dict]) -> go.Figure:
    """Halting steps per angle as box plots (quartiles, whiskers at 1.5 IQR), with the mean."""
    labels = [_label(r) for r in rows]
    fig = go.Figure(go.Box(
        x=labels, q1=[r["q1"] for r in rows], median=[r["median_steps"] for r in rows],
        q3=[r["q3"] for r in rows], lowerfence=[r["lo"] for r in rows], upperfence=[r["hi"] for r in rows],
        mean=[r["mean_steps"] for r in rows], name="halting step", marker_color=LEARNED_COLOR,
        boxmean=True, hoverinfo="x+y"))
    for kind, name in (("fixed", "mean, fixed angles"), ("uniform", "mean, uniform ranges")):
        rr = [r for r in rows if (r.get("kind") == "uniform") == (kind == "uniform")]   # one line per kind
        if rr:
            fig.add_trace(go.Scatter(x=[_label(r) for r in rr], y=[r["mean_steps"] for r in rr],
                                     mode="markers+lines", name=name, marker=dict(size=6),
                                     line=dict(color=NEUTRAL_COLOR, dash="dot" if kind == "fixed" else "dash"),
                                     hovertemplate="%{x}<br>mean halting step %{y:.2f}<extra></extra>"))
    fig.update_xaxes(title="rotation", type="category")
    fig.update_yaxes(title="halting step", tickformat="d", rangemode="tozero")
    return _layout(fig, "Halting steps vs rotation")


def rotation_halting_fig(rows: Sequence[dict]) -> go.Figure:
    """The mean halting distribution per angle, as a heatmap (angle × step)."""
    z = np.array([_arr(r["halting"]) for r in rows])
    n = z.shape[1] if z.ndim == 2 else 1
    labels = [_label(r) for r in rows]
    fig = go.Figure(go.Heatmap(z=z, x=steps(n), y=labels, colorscale="Blues", zmin=0,
                               colorbar=dict(title="p_n", thickness=12),
                               hovertemplate="%{y}<br>step %{x}<br>mean p_n %{z:.4f}<extra></extra>"))
    fig.update_xaxes(**_step_axis(n))
    fig.update_yaxes(title="rotation", type="category", autorange="reversed")
    return _layout(fig, "Halting distribution per rotation", height=max(HEIGHT, 24 * len(rows) + 100))


def confidence_scatter_fig(halt_steps, confidence, correct, title: str = "", seed: int = 0) -> go.Figure:
    """Per sample: halting step (jittered) vs confidence, coloured by right / wrong."""
    s, c, ok = _arr(halt_steps), _arr(confidence), np.asarray(correct, bool).reshape(-1)
    jitter = np.random.default_rng(seed).uniform(-0.18, 0.18, len(s))
    fig = go.Figure()
    for mask, name, color in ((ok, "right", CORRECT_COLOR), (~ok, "wrong", WRONG_COLOR)):
        fig.add_trace(go.Scattergl(x=s[mask] + jitter[mask], y=c[mask], customdata=s[mask], mode="markers",
                                   name=f"{name} ({int(mask.sum())})",
                                   marker=dict(color=color, size=5, opacity=0.55),
                                   hovertemplate="halting step %{customdata:d}<br>confidence %{y:.3f}<extra>"
                                                 + name + "</extra>"))
    n = int(np.nanmax(s)) if len(s) else 1
    fig.update_xaxes(**_step_axis(max(n, 1), "halting step (jittered)"))
    fig.update_yaxes(title="confidence (probability of the answer)", range=[0, 1.02])
    return _layout(fig, title or "Halting step vs confidence")


# ----------------------------------------------------------------------------- parity

def parity_input_fig(x: Sequence[float]) -> go.Figure:
    """The parity input vector as one row of cells (-1, 0, +1)."""
    v = _arr(x)
    fig = go.Figure(go.Heatmap(z=[v], x=np.arange(1, len(v) + 1), y=[""], zmin=-1, zmax=1,
                               colorscale=[[0, "#4C78A8"], [0.5, "#F2F2F2"], [1, "#E45756"]], showscale=False,
                               text=[[f"{int(t):+d}" if t else "0" for t in v]], texttemplate="%{text}",
                               hovertemplate="position %{x}<br>value %{z:+.0f}<extra></extra>", xgap=2))
    fig.update_xaxes(title="position", tickmode="linear", tick0=1, dtick=1 if len(v) <= 32 else 4, tickformat="d")
    fig.update_yaxes(visible=False)
    n_plus = int((v == 1).sum())
    return _layout(fig, f"Input: {int((v != 0).sum())} non-zeros, {n_plus} of them +1 → parity "
                        f"{'odd' if n_plus % 2 else 'even'}", height=150)


def sets_halting_fig(sets: dict, lambda_p: Optional[float] = None, title: str = "") -> go.Figure:
    """Halting distributions of several test sets (easy / hard / extrapolation) with the prior."""
    fig = go.Figure()
    n = 1
    for i, (name, p) in enumerate(sets.items()):
        p = _arr(p)
        n = len(p)
        fig.add_trace(go.Bar(x=steps(n), y=p, name=name,
                             marker_color=[LEARNED_COLOR, PALETTE[2], PALETTE[3], PALETTE[4]][i % 4],
                             hovertemplate=name + "<br>step %{x}<br>mean p_n %{y:.4f}<extra></extra>"))
    if lambda_p is not None:
        fig.add_trace(prior_trace(lambda_p, n))
    fig.update_layout(barmode="group")
    fig.update_xaxes(**_step_axis(n))
    fig.update_yaxes(title="mean p_n", rangemode="tozero")
    return _layout(fig, title or "Halting distributions by difficulty")


def by_k_fig(rows: Sequence[dict], train_k: Optional[Sequence[int]] = None) -> go.Figure:
    """Mean halting step and accuracy per number of non-zeros k."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    k = [r["k"] for r in rows]
    fig.add_trace(go.Scatter(x=k, y=[r["mean_steps"] for r in rows], name="mean halting step",
                             mode="lines+markers", line=dict(color=LEARNED_COLOR),
                             hovertemplate="k=%{x}<br>mean steps %{y:.2f}<extra></extra>"), secondary_y=False)
    fig.add_trace(go.Scatter(x=k, y=[r["accuracy"] for r in rows], name="accuracy", mode="lines+markers",
                             line=dict(color=CORRECT_COLOR, dash="dot"),
                             hovertemplate="k=%{x}<br>accuracy %{y:.4f}<extra></extra>"), secondary_y=True)
    if train_k:
        fig.add_vrect(x0=train_k[0] - 0.5, x1=train_k[1] + 0.5, fillcolor=NEUTRAL_COLOR, opacity=0.08,
                      line_width=0, annotation_text=f"trained on k {train_k[0]}–{train_k[1]}",
                      annotation_position="bottom left")
    fig.update_xaxes(title="number of non-zeros k", tickmode="linear", dtick=1 if len(k) <= 32 else 4,
                     tickformat="d")
    fig.update_yaxes(title="mean halting step", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title="accuracy", range=[0, 1.02], dtick=0.2, tickformat=".0%", showgrid=False,
                     secondary_y=True)
    return _layout(fig, "Steps and accuracy by number of non-zeros")
