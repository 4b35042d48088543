"""The explorer's chart style: colours, step axes, layout, labelled rules and the prior trace.

Conventions on every page: the prior is always PRIOR_COLOR and a learned halting distribution
LEARNED_COLOR; step axes have integer ticks; every trace has hover text with its values.
Steps are 1-based (step n = 1..N).
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from ponder.losses import log_geometric_prior

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

def steps(n: int) -> np.ndarray:
    return np.arange(1, n + 1)


def step_dtick(n: int, max_ticks: int = 20) -> int:
    """An integer tick spacing that keeps at most about max_ticks ticks on a step axis."""
    return max(1, int(math.ceil(n / max_ticks)))


def step_axis(n: int, title: str = "step n", max_ticks: int = 20) -> dict:
    return dict(title=title, tickmode="linear", tick0=1, dtick=step_dtick(n, max_ticks), tickformat="d",
                range=[0.4, n + 0.6])


def count_axis(xmax: float, title: str = "training step", max_ticks: int = 6) -> dict:
    """An axis of whole counts (training steps): integer ticks from 0, never repeated labels."""
    xmax = float(xmax) if xmax and math.isfinite(float(xmax)) else 1.0
    raw = max(1.0, xmax / max_ticks)
    mag = 10 ** math.floor(math.log10(raw))
    dtick = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    return dict(title=title, tickmode="linear", tick0=0, dtick=int(max(1, dtick)), tickformat="d",
                rangemode="tozero")


def log_ticks(values) -> dict:
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


LEGEND_ROW = 21           # px of one legend row (12 px font and its gap)
LEGEND_WIDTH = 330        # px a legend row is assumed to have: a half-width column at 1280 px


def legend_names(fig: go.Figure) -> list:
    """The names the legend lists: named traces not hidden from it, one per legend group."""
    names, groups = [], set()
    for t in fig.data:
        if t.showlegend is False or not t.name or (t.legendgroup and t.legendgroup in groups):
            continue
        groups.add(t.legendgroup)
        names.append(t.name)
    return names if len(names) > 1 or any(t.showlegend for t in fig.data) else []


def legend_rows(names, width: int = LEGEND_WIDTH) -> int:
    """Rows a horizontal legend of these names takes at `width` px (about 6.5 px a character and 45 px
    for the symbol and gap of an entry; an estimate that errs on the side of more rows)."""
    rows, used = (1, 0.0) if names else (0, 0.0)
    for name in names:
        w = 45 + 6.5 * len(str(name))
        if used and used + w > width:
            rows, used = rows + 1, 0.0
        used += w
    return rows


def layout(fig: go.Figure, title: str = "", height: int = HEIGHT, **kw) -> go.Figure:
    """Title, legend and margins of every figure, placed so that nothing covers anything: the title
    at the top left, in lines that fit a phone (wrap_title), pushes the plot down (automargin), the legend sits under the plot (at the bottom of
    the figure, where it reserves its own rows), and the figure grows by those rows so the plot keeps
    its height. Plotly's toolbar is off (explorer.app.ui.PLOTLY_CONFIG): it covered titles and legends."""
    rows = legend_rows(legend_names(fig)) if kw.get("showlegend", True) else 0
    title, lines = wrap_title(title)
    # a title of several lines sits on the plot area (Plotly puts the first of several lines anchored at the
    # figure's top above the figure, out of sight)
    place = (dict(y=1, yanchor="top", yref="container", pad=dict(t=8, l=6)) if lines == 1 else
             dict(y=1, yanchor="bottom", yref="paper", pad=dict(b=10, l=6)))
    return set_layout(fig, title=dict(text=title, x=0, xanchor="left", xref="container", **place, automargin=True,
                                      font=dict(size=15)) if title else None,
                      height=height + (25 + TITLE_LINE_PX * (lines - 1) if title else 0)
                      + (LEGEND_ROW * rows + 12 if rows else 0),
                      margin=dict(l=55, r=20, t=12 if title else 20, b=45),
                      legend=dict(orientation="h", xref="container", x=0, xanchor="left", yref="container",
                                  y=0, yanchor="bottom"),
                      hoverlabel=dict(namelength=-1), **kw)


TITLE_CHARS = 40        # a title line: a chart on a 390 px phone is ~330 px wide, ~44 characters of the 15 px title
TITLE_LINE_PX = 20      # the height a title's second line adds


def wrap_title(title: str, width: int = TITLE_CHARS) -> tuple[str, int]:
    """A title broken at spaces into lines of at most `width` characters (Plotly never wraps one: it is cut at the
    figure's edge) -> (text with <br> between lines, lines). A single word longer than `width` keeps its line."""
    title = str(title or "")
    if "<br>" in title:                                  # broken by its figure already
        return title, title.count("<br>") + 1
    lines: list = []
    for word in title.split(" "):
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "<br>".join(lines), max(1, len(lines))


def set_layout(fig: go.Figure, **props) -> go.Figure:
    """fig.update_layout(**props) for top-level layout properties, at a tenth of its cost: update_layout
    parses every nested key as a property path (~9 ms a call, half of a digit page's figure time); this
    assigns each property once, a dict merged into what the property already holds (~0.5 ms); None clears a
    property, as update_layout does."""
    lo = fig.layout
    for key, value in props.items():
        if isinstance(value, dict):
            value = _merged(lo[key].to_plotly_json(), value)
        lo[key] = value
    return fig


def _merged(into: dict, new: dict) -> dict:
    for k, v in new.items():
        into[k] = _merged(into[k], v) if isinstance(v, dict) and isinstance(into.get(k), dict) else v
    return into


def arr(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).reshape(-1)


def rule(fig: go.Figure, x: Optional[float] = None, y: Optional[float] = None, line: Optional[dict] = None,
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


CURSOR_COLOR = "rgba(255, 170, 0, 0.25)"     # the step the slider is on, a band across a per-step chart


def step_shades(n: int) -> list:
    """n colours, light to dark: one a step where a chart stacks the steps' shares (halting mass, the mixture)."""
    return sample_colorscale("Blues", list(np.linspace(0.25, 0.9, n)))


def step_cursor(fig: go.Figure, step: Optional[int], across: str = "x") -> None:
    """A band at `step` on a per-step chart (its steps on the x axis, or on y with across="y"): where the
    step slider is."""
    if not step:
        return
    if across == "x":
        fig.add_shape(type="rect", xref="x", yref="paper", x0=step - 0.5, x1=step + 0.5, y0=0, y1=1,
                      fillcolor=CURSOR_COLOR, line_width=0, layer="below")
    else:
        fig.add_shape(type="rect", xref="paper", yref="y", x0=0, x1=1, y0=step - 0.5, y1=step + 0.5,
                      line=dict(color="rgb(255, 170, 0)", width=3))


def halt_marker(fig: go.Figure, halt_step: Optional[int]) -> None:
    if halt_step:
        rule(fig, x=halt_step, line=dict(color="black", dash="dot", width=1.5), text=f"halted at step {halt_step}")


# ----------------------------------------------------------------------------- halting distributions

def prior_trace(lambda_p: float, n: int, as_bars: bool = False, name: Optional[str] = None,
                color: str = PRIOR_COLOR, dash: str = "dash", **kw):
    """The prior p_G(n) ∝ λp(1−λp)^(n−1), renormalised over N steps (the KL term's target), as bars
    or as a line with markers (dashed, in the prior's colour unless told otherwise)."""
    p = log_geometric_prior(lambda_p, n).exp().numpy()                       # [N]
    name = name or f"prior λp={lambda_p:g}"
    hover = "step %{x}<br>prior p_G = %{y:.4f}<extra>" + name + "</extra>"
    if as_bars:
        return go.Bar(x=steps(n), y=p, name=name, marker_color=color, hovertemplate=hover, **kw)
    return go.Scatter(x=steps(n), y=p, name=name, mode="lines+markers",
                      line=dict(color=color, width=2, dash=dash), marker=dict(size=6),
                      hovertemplate=hover, **kw)


