"""The paper's parity experiment drawn: each run's accuracy and mean steps by the number of non-zeros k, one colour
a run, the trained range of k shaded (ponder.tasks.parity.experiment's by_k rows)."""
from __future__ import annotations

from typing import Optional, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import NEUTRAL_COLOR, PALETTE, layout


def methods_by_k_fig(named: dict, train_k: Optional[Sequence[int]] = None) -> go.Figure:
    """Accuracy (top) and mean steps (bottom) by k for each run {name: Experiment dict}."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=("accuracy of its own answer", "mean steps it took"))
    for i, (name, e) in enumerate(named.items()):
        rows = sorted(e["by_k"], key=lambda r: r["k"])
        k = [r["k"] for r in rows]
        color = PALETTE[i % len(PALETTE)]
        label = f"{name} ({e['label']})"
        fig.add_trace(go.Scatter(x=k, y=[r["accuracy"] for r in rows], name=label, legendgroup=name,
                                 mode="lines", line=dict(color=color),
                                 hovertemplate=f"{name}<br>k=%{{x}}<br>accuracy %{{y:.3f}}<extra></extra>"), row=1, col=1)
        fig.add_trace(go.Scatter(x=k, y=[r["mean_steps"] for r in rows], name=label, legendgroup=name,
                                 showlegend=False, mode="lines", line=dict(color=color, dash="dot"),
                                 hovertemplate=f"{name}<br>k=%{{x}}<br>mean steps %{{y:.2f}}<extra></extra>"),
                      row=2, col=1)
    if train_k:
        for row in (1, 2):
            fig.add_vrect(x0=train_k[0] - 0.5, x1=train_k[1] + 0.5, fillcolor=NEUTRAL_COLOR, opacity=0.08,
                          line_width=0, row=row, col=1)
    fig.add_hline(y=0.5, line=dict(color=NEUTRAL_COLOR, dash="dash", width=1), row=1, col=1)   # chance
    fig.update_yaxes(title="accuracy", range=[0, 1.02], tickformat=".0%", row=1, col=1)
    fig.update_yaxes(title="steps", rangemode="tozero", row=2, col=1)
    fig.update_xaxes(title="number of non-zeros k", tickformat="d", row=2, col=1)
    return layout(fig, "Each method by number of non-zeros k", height=520)
