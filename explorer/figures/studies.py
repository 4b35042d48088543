"""Plotly figures of the studies: the λp sweep, the rotation study and parity by difficulty
(plain functions of numbers returning go.Figure; no Streamlit). Style: explorer.figures.style.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ponder.analysis.studies import prior_mean, rotation_label

from .style import (CORRECT_COLOR, HEIGHT, LEARNED_COLOR, NEUTRAL_COLOR, PALETTE, PRIOR_COLOR, WRONG_COLOR, arr,
                    layout, prior_trace, set_layout, step_axis, steps)


# ----------------------------------------------------------------------------- λp sweep

PANEL_PX = 240           # the sweep grid's height a row of panels, gap included
GRID_GAP_PX = 90         # between two rows: the lower row's panel titles and the upper row's step ticks
GRID_MARGIN = dict(t=30, l=70, b=60)     # room for the panel titles and the shared axis titles


MAX_PANELS = 12          # panels the sweep grid draws (a panel is ~20 traces' worth: 300 took 37 s, 1,000 minutes)
MAX_HEAT_ROWS = 400      # runs the sweep heat map draws (evenly spaced; the table lists every run)


def spread(rows: Sequence, limit: int) -> list:
    """At most `limit` of rows, evenly spaced, the first and the last among them (all when there are no more)."""
    rows = list(rows)
    if len(rows) <= limit:
        return rows
    return [rows[round(i * (len(rows) - 1) / (limit - 1))] for i in range(limit)] if limit > 1 else rows[:1]


def sweep_grid_fig(rows: Sequence[dict], cols: int = 3, limit: int = MAX_PANELS) -> go.Figure:
    """Small multiples: each run's learned halting distribution over its prior; at most `limit` panels, evenly
    spaced over the runs in their order (sweep_heatmap_fig shows them all).

    rows: [{name, lambda_p, status, reason, halting (list or None)}]; failed runs without a
    distribution get a panel saying so.
    """
    rows = spread(rows, limit)
    if not rows:
        return layout(go.Figure(), "No runs yet")
    cols = max(1, min(cols, len(rows)))
    nrows = int(math.ceil(len(rows) / cols))
    # a panel's title is its λp (a third of a phone's 390 px fits ~12 characters): the status only for a partial
    # distribution; a panel without one says its status inside
    titles = [f"λp={r['lambda_p']:g}" + (f" · {r['status']}" if r.get("halting") and r.get("status") not in
                                          (None, "", "completed") else "") for r in rows]
    # rows PANEL_PX tall and GRID_GAP_PX apart whatever their number: Plotly takes the gap as a fraction of the
    # plot area (height less the top and bottom margins), which must stay under 1 / (rows - 1)
    plot_px = PANEL_PX * nrows + 40 - GRID_MARGIN["t"] - GRID_MARGIN["b"]
    fig = make_subplots(rows=nrows, cols=cols, subplot_titles=titles, horizontal_spacing=0.06,
                        vertical_spacing=GRID_GAP_PX / plot_px if nrows > 1 else 0.1, x_title="step n",
                        y_title="p_n (halt at n)")
    for i, r in enumerate(rows):
        rr, cc = i // cols + 1, i % cols + 1
        p = r.get("halting")
        if p:
            p = arr(p)
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
    layout(fig, "", height=PANEL_PX * nrows + 40)
    set_layout(fig, margin=GRID_MARGIN)
    return fig


def sweep_heatmap_fig(rows: Sequence[dict], limit: int = MAX_HEAT_ROWS) -> go.Figure:
    """Every run's learned halting distribution in one chart (at most `limit` runs, evenly spaced): a row per run
    in their order, p_n by colour over the steps n; a run without one is an empty row."""
    rows = spread(rows, limit)
    n = max([len(r.get("halting") or []) for r in rows] + [1])
    z = [list(r.get("halting") or []) + [None] * (n - len(r.get("halting") or [])) for r in rows]
    labels = [f"λp={r['lambda_p']:g} · {r['name']}" for r in rows]
    fig = go.Figure(go.Heatmap(z=z, x=steps(n), y=list(range(len(rows))), colorscale="Blues", zmin=0,
                               customdata=[[lab] * n for lab in labels], colorbar=dict(title="p_n"),
                               hovertemplate="%{customdata}<br>step %{x}<br>p_n = %{z:.4f}<extra></extra>"))
    fig.update_yaxes(tickmode="array", tickvals=list(range(len(rows))), ticktext=labels if len(rows) <= 40 else None,
                     showticklabels=len(rows) <= 40, autorange="reversed", title="run (by λp)")
    return layout(fig, "", height=min(900, 160 + 18 * len(rows)), xaxis_title="step n")


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
    fig.add_trace(go.Scatter(x=grid, y=[prior_mean(g, n_steps) for g in grid],
                             name=f"prior mean truncated at N={n_steps}", mode="lines",
                             line=dict(color=PRIOR_COLOR, dash="dot", width=1),
                             hovertemplate="λp %{x:.2f}<br>truncated prior mean %{y:.2f}<extra></extra>"))
    fig.add_trace(go.Scatter(x=[r["lambda_p"] for r in ok], y=[r["mean_steps"] for r in ok],
                             text=[r["name"] for r in ok], name="mean halting step (sampled)",
                             mode="lines+markers", line=dict(color=LEARNED_COLOR), marker=dict(size=9),
                             hovertemplate="%{text}<br>λp %{x:g}<br>mean steps %{y:.2f}<extra></extra>"))
    ymax = max([r["mean_steps"] for r in ok] + [prior_mean(0.05, n_steps), 2.0]) * 1.1
    set_layout(fig, xaxis=dict(title="λp", range=[0, 1.02]),
               yaxis=dict(title="mean halting step", range=[0, ymax]))
    return layout(fig, "Mean halting step vs λp")


def sweep_accuracy_fig(rows: Sequence[dict]) -> go.Figure:
    ok = sorted((r for r in rows if r.get("accuracy") is not None), key=lambda r: r["lambda_p"])
    fig = go.Figure(go.Scatter(x=[r["lambda_p"] for r in ok], y=[r["accuracy"] for r in ok],
                               text=[r["name"] for r in ok], mode="lines+markers", name="test accuracy",
                               line=dict(color=CORRECT_COLOR), marker=dict(size=9),
                               hovertemplate="%{text}<br>λp %{x:g}<br>accuracy %{y:.4f}<extra></extra>"))
    lo = min([r["accuracy"] for r in ok] + [0.9])
    set_layout(fig, xaxis=dict(title="λp", range=[0, 1.02]),
               yaxis=dict(title="test accuracy", range=[max(0.0, lo - 0.02), 1.0]))
    return layout(fig, "Accuracy vs λp", showlegend=False)


# ----------------------------------------------------------------------------- rotation study

def rotation_accuracy_fig(rows: Sequence[dict]) -> go.Figure:
    """Accuracy vs angle (fixed angles as a line, uniform ±d ranges as separate markers)."""
    fig = go.Figure()
    for kind, color, name, sym in (("fixed", LEARNED_COLOR, "fixed angle θ", "circle"),
                                   ("uniform", PALETTE[2], "uniform in ±d", "diamond")):
        rr = [r for r in rows if r["kind"] == kind]
        if rr:
            fig.add_trace(go.Scatter(x=[r["angle"] for r in rr], y=[r["accuracy"] for r in rr],
                                     text=[rotation_label(r) for r in rr], name=name, mode="lines+markers",
                                     line=dict(color=color), marker=dict(size=9, symbol=sym),
                                     hovertemplate="%{text}<br>accuracy %{y:.4f}<extra></extra>"))
    set_layout(fig, xaxis=dict(title="rotation angle θ, or range d (degrees)", dtick=15, tickformat="d"),
               yaxis=dict(title="accuracy", range=[0, 1.02]))
    return layout(fig, "Accuracy vs rotation")


def rotation_steps_fig(rows: Sequence[dict]) -> go.Figure:
    """Halting steps per angle as box plots (quartiles, whiskers at 1.5 IQR), with the mean."""
    labels = [rotation_label(r) for r in rows]
    fig = go.Figure(go.Box(
        x=labels, q1=[r["q1"] for r in rows], median=[r["median_steps"] for r in rows],
        q3=[r["q3"] for r in rows], lowerfence=[r["lo"] for r in rows], upperfence=[r["hi"] for r in rows],
        mean=[r["mean_steps"] for r in rows], name="halting step", marker_color=LEARNED_COLOR,
        boxmean=True, hoverinfo="x+y"))
    for kind, name in (("fixed", "mean, fixed angles"), ("uniform", "mean, uniform ranges")):
        rr = [r for r in rows if (r.get("kind") == "uniform") == (kind == "uniform")]   # one line per kind
        if rr:
            fig.add_trace(go.Scatter(x=[rotation_label(r) for r in rr], y=[r["mean_steps"] for r in rr],
                                     mode="markers+lines", name=name, marker=dict(size=6),
                                     line=dict(color=NEUTRAL_COLOR, dash="dot" if kind == "fixed" else "dash"),
                                     hovertemplate="%{x}<br>mean halting step %{y:.2f}<extra></extra>"))
    set_layout(fig, xaxis=dict(title="rotation", type="category"),
               yaxis=dict(title="halting step", tickformat="d", rangemode="tozero"))
    return layout(fig, "Halting steps vs rotation")


def rotation_halting_fig(rows: Sequence[dict]) -> go.Figure:
    """The mean halting distribution per angle, as a heatmap (angle × step)."""
    z = np.array([arr(r["halting_distribution"]) for r in rows])
    n = z.shape[1] if z.ndim == 2 else 1
    labels = [rotation_label(r) for r in rows]
    fig = go.Figure(go.Heatmap(z=z, x=steps(n), y=labels, colorscale="Blues", zmin=0,
                               colorbar=dict(title="p_n", thickness=12),
                               hovertemplate="%{y}<br>step %{x}<br>mean p_n %{z:.4f}<extra></extra>"))
    set_layout(fig, xaxis=step_axis(n),
               yaxis=dict(title="rotation", type="category", autorange="reversed"))
    return layout(fig, "Halting distribution per rotation", height=max(HEIGHT, 24 * len(rows) + 100))


def confidence_scatter_fig(halt_steps, confidence, correct, title: str = "", seed: int = 0) -> go.Figure:
    """Per sample: halting step (jittered) vs confidence, coloured by right / wrong."""
    s, c, ok = arr(halt_steps), arr(confidence), np.asarray(correct, bool).reshape(-1)
    jitter = np.random.default_rng(seed).uniform(-0.18, 0.18, len(s))
    fig = go.Figure()
    for mask, name, color in ((ok, "right", CORRECT_COLOR), (~ok, "wrong", WRONG_COLOR)):
        fig.add_trace(go.Scattergl(x=s[mask] + jitter[mask], y=c[mask], customdata=s[mask], mode="markers",
                                   name=f"{name} ({int(mask.sum())})",
                                   marker=dict(color=color, size=5, opacity=0.55),
                                   hovertemplate="halting step %{customdata:d}<br>confidence %{y:.3f}<extra>"
                                                 + name + "</extra>"))
    n = int(np.nanmax(s)) if len(s) else 1
    set_layout(fig, xaxis=step_axis(max(n, 1), "halting step (jittered)"),
               yaxis=dict(title="confidence (probability of the answer)", range=[0, 1.02]))
    return layout(fig, title or "Halting step vs confidence")


# ----------------------------------------------------------------------------- parity

def parity_input_fig(x: Sequence[float]) -> go.Figure:
    """The parity input vector as one row of cells (-1, 0, +1)."""
    v = arr(x)
    fig = go.Figure(go.Heatmap(z=[v], x=np.arange(1, len(v) + 1), y=[""], zmin=-1, zmax=1,
                               colorscale=[[0, "#4C78A8"], [0.5, "#F2F2F2"], [1, "#E45756"]], showscale=False,
                               text=[[f"{int(t):+d}" if t else "0" for t in v]], texttemplate="%{text}",
                               hovertemplate="position %{x}<br>value %{z:+.0f}<extra></extra>", xgap=2))
    set_layout(fig, xaxis=dict(title="position", tickmode="linear", tick0=1, dtick=1 if len(v) <= 32 else 4,
                               tickformat="d"), yaxis=dict(visible=False))
    n_plus, nz = int((v == 1).sum()), int((v != 0).sum())
    return layout(fig, f"Input: {nz} non-zero{'s' * (nz != 1)}, {n_plus} of them +1 → parity "
                        f"{'odd' if n_plus % 2 else 'even'}", height=150)


def sets_halting_fig(sets: dict, lambda_p: Optional[float] = None, title: str = "") -> go.Figure:
    """Halting distributions of several test sets (easy / hard / extrapolation) with the prior."""
    fig = go.Figure()
    n = 1
    for i, (name, p) in enumerate(sets.items()):
        p = arr(p)
        n = len(p)
        fig.add_trace(go.Bar(x=steps(n), y=p, name=name,
                             marker_color=[LEARNED_COLOR, PALETTE[2], PALETTE[3], PALETTE[4]][i % 4],
                             hovertemplate=name + "<br>step %{x}<br>mean p_n %{y:.4f}<extra></extra>"))
    if lambda_p is not None:
        fig.add_trace(prior_trace(lambda_p, n))
    set_layout(fig, barmode="group", xaxis=step_axis(n), yaxis=dict(title="mean p_n", rangemode="tozero"))
    return layout(fig, title or "Halting distributions by difficulty")


def unmeasured_k(rows: Sequence[dict]) -> str:
    """The numbers of non-zeros k between the smallest and largest measured that no row has, as ranges
    ('5–10'; '' when none): by_k_fig's lines break there (video-15's easy k 1–4 and hard k 11–15 leave 5–10)."""
    have = {int(r["k"]) for r in rows}
    missing = [k for k in range(min(have), max(have)) if k not in have] if have else []
    gaps = []                                            # [first, last] of each run of consecutive missing k
    for k in missing:
        if gaps and gaps[-1][1] == k - 1:
            gaps[-1][1] = k
        else:
            gaps.append([k, k])
    return ", ".join(f"{a}" if a == b else f"{a}–{b}" for a, b in gaps)


def by_k_fig(rows: Sequence[dict], train_k: Optional[Sequence[int]] = None) -> go.Figure:
    """Mean halting step and accuracy per number of non-zeros k; the lines break at a k that was not measured."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    by = {r["k"]: r for r in rows}
    k = list(range(min(by), max(by) + 1)) if by else []

    def col(key: str, missing=None) -> list:                 # None: a gap in the line (not measured)
        return [by[v].get(key, missing) if v in by else missing for v in k]
    fig.add_trace(go.Scatter(x=k, y=col("mean_steps"), name="mean halting step",
                             mode="lines+markers", line=dict(color=LEARNED_COLOR),
                             hovertemplate="k=%{x}<br>mean steps %{y:.2f}<extra></extra>"), secondary_y=False)
    if all("expected_steps" in r for r in rows):
        fig.add_trace(go.Scatter(x=k, y=col("expected_steps"), name="E[n] (± std over inputs)",
                                 mode="lines+markers", line=dict(color=PALETTE[2]),
                                 error_y=dict(type="data", array=col("expected_steps_std", 0.0),
                                              visible=True, thickness=1),
                                 hovertemplate="k=%{x}<br>E[n] %{y:.2f}<extra></extra>"), secondary_y=False)
    fig.add_trace(go.Scatter(x=k, y=col("accuracy"), name="accuracy", mode="lines+markers",
                             line=dict(color=CORRECT_COLOR, dash="dot"),
                             hovertemplate="k=%{x}<br>accuracy %{y:.4f}<extra></extra>"), secondary_y=True)
    if train_k:
        fig.add_vrect(x0=train_k[0] - 0.5, x1=train_k[1] + 0.5, fillcolor=NEUTRAL_COLOR, opacity=0.08,
                      line_width=0, annotation_text=f"trained on k {train_k[0]}–{train_k[1]}",
                      annotation_position="bottom left")
    fig.update_xaxes(title="number of non-zeros k", tickmode="linear", dtick=1 if len(k) <= 16 else 2 if len(k) <= 32
                     else 4, tickangle=0, tickformat="d")
    fig.update_yaxes(title="steps (sampled mean, E[n])", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title="accuracy", range=[0, 1.02], dtick=0.2, tickformat=".0%", showgrid=False,
                     secondary_y=True)
    return layout(fig, "Steps and accuracy by number of non-zeros")
