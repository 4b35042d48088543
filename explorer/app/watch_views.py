"""Watch it learn to halt, on the Train page: the input a run watches (your drawing from the digit page, else a
bundled test digit) and, live, its halting distribution, λ_n and answer at the latest look, with E[n] and the
answer's confidence over the training steps (the looks themselves: explorer.watch)."""
from __future__ import annotations

from typing import Optional

import plotly.graph_objects as go
import streamlit as st

from ..drawing import canvas, digits
from ..figures import halting as figures
from .. import inputs
from . import views
from .forms import all_presets
from ..figures.style import LEARNED_COLOR, NEUTRAL_COLOR, layout, set_layout, step_axis
from .ui import chart


def watched_input(cfg) -> tuple:
    """(input with its batch dimension, where it comes from) for a run of TrainConfig cfg: MNIST, the digit drawn on
    the digit page, else the first bundled test digit; parity, the Parity page's vector when it has the run's
    length n, else one with n/2 non-zeros."""
    if cfg.task == "parity":
        n = all_presets()[cfg.parity_preset]["n_elems"]
        kept = st.session_state.get("_parity_vector")
        if kept is not None and kept.shape[-1] == n:
            return kept, "the vector from the Parity page"
        return inputs.parity_vector(n, n // 2, 0), f"a vector with {n // 2} non-zeros (the Parity page's, when it " \
            f"has n = {n}, is watched instead)"
    kept = st.session_state.get("_drawing") or {}
    if kept.get("digit") is not None:
        return canvas.model_input(kept["digit"]), "your drawing from the Ponder-a-digit page"
    pool = digits.example_digits()
    return canvas.model_input(pool.x[0]), f"a test digit (label {int(pool.y[0])}; draw one on the digit page to watch it)"


PROBABILITY_TICKS = [0, 0.25, 0.5, 0.75, 1]     # the right axis's: left to itself it followed the left axis's
                                                # ticks (0 / 33 / 66 / 99 %)


def history_fig(watched: list) -> go.Figure:
    """E[n] (left axis) and the answer's confidence (right axis) at each look, against the training step."""
    x = [w["step"] for w in watched]
    fig = go.Figure([
        go.Scatter(x=x, y=[w["expected_steps"] for w in watched], name="E[n]", mode="lines",
                   line=dict(color=LEARNED_COLOR), hovertemplate="training step %{x}<br>E[n] = %{y:.2f}<extra></extra>"),
        go.Scatter(x=x, y=[w["confidence"] for w in watched], name="answer's probability", yaxis="y2", mode="lines",
                   line=dict(color=NEUTRAL_COLOR, dash="dot"), text=[str(w["pred"]) for w in watched],
                   hovertemplate="training step %{x}<br>answer %{text} at %{y:.1%}<extra></extra>")])
    fig.update_layout(yaxis2=dict(title="probability", overlaying="y", side="right", range=[0, 1], tickformat=".0%",
                                  tickmode="array", tickvals=PROBABILITY_TICKS, showgrid=False))   # round ticks
    set_layout(fig, xaxis=dict(title="training step"), yaxis=dict(title="E[n]", rangemode="tozero"))
    layout(fig, "E[n] and the answer as it trains")
    return set_layout(fig, margin=dict(r=55))             # room for the right axis


def watch_ui(watched: list, x, lambda_p: float, key: str, where: Optional[str] = None) -> None:
    """The panel: the input, what the model does on it now (p_n against the prior, λ_n) and how that moved."""
    if not watched:
        return
    w = watched[-1]
    st.markdown(f"**Watch it learn to halt**: at training step {w['step']:,} the model answers **{w['pred']}** "
                f"({w['confidence']:.0%}) on this input, halting at step {w['halt_step']} (deterministic mode), "
                f"E[n] {w['expected_steps']:.2f}." + (f" The input: {where}." if where else ""))
    c0, c1, c2, c3 = st.columns([0.6, 1, 1, 1.2])
    with c0:
        if x is not None and x.dim() == 4:                       # an image
            views.seen_image_ui(canvas.seen_image(x), "the watched input")
        elif x is not None:                                      # a vector (parity)
            st.caption("the watched input: " + " ".join(f"{v:+g}" for v in x[0].tolist()))
    with c1:
        chart(figures.halting_fig(w["p"], lambda_p, title="p_n now", max_ticks=10),
              "Its halting distribution p_n (bars) against the prior (line).", key=f"{key}_watch_p")
    with c2:
        lam = set_layout(figures.lambda_fig(w["lambdas"], lambda_p, title="λ_n now"),
                         xaxis=step_axis(len(w["lambdas"]), max_ticks=10))       # a quarter of the width: fewer ticks
        chart(lam,
              "Its chance to halt at step n if still running.", key=f"{key}_watch_l")
    with c3:
        chart(history_fig(watched), "E[n] (solid) and the answer's probability (dotted) at each look, about once a "
              "second.", key=f"{key}_watch_h")
