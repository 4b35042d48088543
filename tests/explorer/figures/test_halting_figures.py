"""explorer/figures/halting.py: the data inside the halting figures (prior, one input's steps, training curves,
overlays), checked without Streamlit."""
import math

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from explorer.figures import halting as figs
from explorer.figures.style import CORRECT_COLOR, CURSOR_COLOR, LEARNED_COLOR, PRIOR_COLOR
from helpers import tiny_model
from ponder.analysis.studies import prior_mean, trace_input


def _prior_traces(fig):
    return [t for t in fig.data if getattr(t, "marker", None) is not None and t.marker.color == PRIOR_COLOR
            or getattr(t, "line", None) is not None and getattr(t.line, "color", None) == PRIOR_COLOR]


def _assert_integer_step_axis(axis):
    assert axis.tickformat == "d"
    assert axis.tickmode == "linear" and float(axis.dtick).is_integer() and axis.tick0 == 1


def test_prior_bars_by_hand():
    # λp = 0.5, N = 3: 0.5, 0.25, 0.125 renormalised by Z = 0.875: 4/7, 2/7, 1/7 (the loss's prior)
    [bars] = [t for t in figs.prior_fig(0.5, 3).data if isinstance(t, go.Bar)]
    assert list(bars.x) == [1, 2, 3] and np.allclose(bars.y, [4 / 7, 2 / 7, 1 / 7], atol=1e-7)


@pytest.mark.parametrize("lp,n", [(0.2, 20), (0.05, 100), (1.0, 3)])
def test_prior_bars_are_the_geometric_prior(lp, n):
    fig = figs.prior_fig(lp, n)
    [bars] = [t for t in fig.data if isinstance(t, go.Bar)]
    steps = np.arange(1, n + 1)
    assert list(bars.x) == list(steps)
    # λp (1 − λp)^(n−1) / (1 − (1 − λp)^N): the geometric shape, summing to 1 over the N steps
    assert np.allclose(bars.y, lp * (1 - lp) ** (steps - 1) / (1 - (1 - lp) ** n), atol=1e-5)
    assert math.isclose(sum(bars.y), 1.0, rel_tol=1e-6)
    assert bars.marker.color == PRIOR_COLOR
    assert any(f"{1 / lp:.2f}" in name for name in _legend(fig))                       # the mean 1/λp
    _assert_integer_step_axis(fig.layout.xaxis)


def test_halting_fig_overlays_the_prior_of_the_models_lambda_p():
    p = np.array([0.5, 0.3, 0.15, 0.05])
    fig = figs.halting_fig(p, 0.3, halt_step=2)
    bars = [t for t in fig.data if isinstance(t, go.Bar)]
    assert len(bars) == 1 and bars[0].marker.color == LEARNED_COLOR and np.allclose(bars[0].y, p)
    [prior] = _prior_traces(fig)
    # 0.3 (0.7)^(n−1), n = 1..4, over Z = 1 − 0.7^4 = 0.7599: 0.394789, 0.276352, 0.193446, 0.135412
    assert np.allclose(prior.y, [0.394789, 0.276352, 0.193446, 0.135412], atol=1e-6)
    assert all(t.hovertemplate for t in fig.data)
    _assert_integer_step_axis(fig.layout.xaxis)


def test_heatmap_rows_sum_to_one_for_a_real_trace():
    model = tiny_model("mnist", max_steps=6)
    tr = trace_input(model, torch.randn(1, 1, 28, 28), "sample", seed=3)
    fig = figs.step_probs_heatmap(tr.probs, [str(c) for c in range(10)], halt_step=tr.halt_step)
    z = np.array(fig.data[0].z)
    assert z.shape == (6, 10)                                   # step x class
    assert np.allclose(z.sum(1), 1.0, atol=1e-5)
    assert list(fig.data[0].y) == list(range(1, 7)) and list(fig.data[0].x) == [str(c) for c in range(10)]
    assert "%{z" in fig.data[0].hovertemplate
    assert fig.layout.yaxis.tickformat == "d" and fig.layout.yaxis.dtick == 1
    assert any(s.type == "rect" for s in fig.layout.shapes)     # the halting step is marked


def test_lambda_and_cumulative_figures():
    lam = [0.1, 0.2, 0.5, 1.0]
    fig = figs.lambda_fig(lam, 0.2, halt_step=3)
    assert np.allclose(fig.data[0].y, lam)
    assert any(abs(s.y0 - 0.2) < 1e-12 and s.line.color == PRIOR_COLOR for s in fig.layout.shapes)
    p = np.array([0.1, 0.18, 0.36, 0.36])
    fig = figs.cumulative_fig(p)
    assert np.allclose(fig.data[0].y, np.cumsum(p)) and abs(fig.data[0].y[-1] - 1) < 1e-12
    assert any(s.y0 == 0.5 == s.y1 for s in fig.layout.shapes)                 # the 0.5 line
    assert "median step 3 (P ≥ 0.5)" in _legend(fig)
    _assert_integer_step_axis(fig.layout.xaxis)


def _legend(fig) -> list:
    """Names of the legend-only entries that label the rules (empty traces)."""
    return [t.name for t in fig.data if isinstance(t, go.Scatter) and list(t.x) == [None]]


def test_rules_are_labelled_in_the_legend_even_at_the_last_step_or_off_the_axis():
    # a halt at the last step N: the line is at x = N and its label is a legend entry, which
    # cannot be clipped at the plot's right edge (a text label anchored there is cut to "halted")
    p = np.full(20, 0.05)
    for fig in (figs.halting_fig(p, 0.2, halt_step=20), figs.lambda_fig(np.full(20, 0.2), 0.2, halt_step=20),
                figs.cumulative_fig(p, halt_step=20)):
        assert "halted at step 20" in _legend(fig)
        assert any(s.x0 == s.x1 == 20 and s.yref == "paper" for s in fig.layout.shapes)
        assert not fig.layout.annotations
    # λp = 0.03, N = 20: the mean 1/λp = 33.33 lies beyond the step axis, so it is named, not drawn;
    # the truncated mean (Σ n p_G(n) / Σ p_G(n), about 9.2 here) is drawn
    fig = figs.prior_fig(0.03, 20)
    names = _legend(fig)
    assert "mean 1/λp = 33.33 (beyond N = 20)" in names
    assert not any(abs(s.x0 - 100 / 3) < 1e-6 for s in fig.layout.shapes)
    [tname] = [n for n in names if n.startswith("mean truncated")]
    tmean = float(tname.split(": ")[1])
    assert any(abs(s.x0 - tmean) < 0.01 for s in fig.layout.shapes) and 1 < tmean < 20


def test_training_fig_has_the_three_losses_accuracy_and_mean_steps():
    hist = [dict(step=s, loss=1 / s, rec=0.9 / s, reg=0.01, accuracy=0.5 + s / 100, mean_steps=5 - s / 50,
                 val_accuracy=0.9 if s == 40 else None, halting=[0.5, 0.5]) for s in (10, 20, 30, 40)]
    fig = figs.training_fig(hist, lambda_p=0.2, n_steps=20)
    names = [t.name for t in fig.data]
    for want in ("total loss", "reconstruction", "KL(p ‖ p_G)", "batch accuracy", "validation accuracy", "mean E[n]",
                 "prior mean"):
        assert want in names
    val = next(t for t in fig.data if t.name == "validation accuracy")
    assert list(val.x) == [40] and list(val.y) == [0.9]
    prior = next(t for t in fig.data if t.name == "prior mean")
    assert prior.line.color == PRIOR_COLOR and abs(prior.y[0] - prior_mean(0.2, 20)) < 1e-12


def test_every_trace_has_hover_text():
    made = [figs.prior_fig(0.3, 10), figs.halting_fig([0.5, 0.5], 0.3), figs.lambda_fig([0.5, 1.0]),
            figs.cumulative_fig([0.5, 0.5]), figs.step_probs_heatmap(np.full((3, 2), 0.5))]
    for fig in made:
        for t in fig.data:
            assert t.hovertemplate or t.hoverinfo, (fig.layout.title.text, t.name)


def test_training_axes_have_whole_steps_and_readable_log_ticks():
    one = [dict(step=10, loss=1.2, rec=1.1, reg=0.05, accuracy=0.7, mean_steps=5.5)]
    fig = figs.training_fig(one, lambda_p=0.2, n_steps=20)
    assert all("markers" in t.mode for t in fig.data if t.name != "prior mean")      # a first point shows
    for ax in (fig.layout.xaxis, fig.layout.xaxis2, fig.layout.xaxis3):
        assert ax.tickformat == "d" and ax.tickmode == "linear" and ax.tick0 == 0 and ax.dtick >= 1
        assert float(ax.dtick).is_integer()                         # never 9.5 / 10 / 10.5 shown as 10, 10, 11
    ticks = list(fig.layout.yaxis.tickvals)                        # 1-2-5 ticks, labelled as numbers
    nice = {m * 10.0 ** e for m in (1, 2, 5) for e in range(-6, 3)}
    assert ticks and all(any(math.isclose(t, v) for v in nice) for t in ticks)
    assert list(fig.layout.yaxis.ticktext) == [f"{t:.3g}" for t in ticks]
    long = [dict(step=s, loss=10 ** (-s / 1000), rec=0.5, reg=0.01, accuracy=0.9, mean_steps=4) for s in range(10, 4010, 10)]
    fig = figs.training_fig(long, 0.2, 20)
    assert fig.layout.xaxis.dtick in (500, 1000)
    assert all(t.mode == "lines" for t in fig.data if t.name in ("total loss", "batch accuracy", "mean E[n]"))
    assert set(fig.layout.yaxis.tickvals) <= {10.0 ** e for e in range(-6, 3)}       # decades over wide ranges
    ov = figs.overlay_training_fig({"a": long, "b": one}, "loss", "Training loss", "loss", log=True)
    assert ov.layout.xaxis.tick0 == 0 and ov.layout.yaxis.tickvals


def test_overlays_of_several_runs():
    series = [{"name": "a", "p": [0.6, 0.4], "lambda_p": 0.5, "per_step_accuracy": [0.9, 0.95]},
              {"name": "b", "p": [0.2, 0.8], "lambda_p": 0.5, "per_step_accuracy": [0.8, 0.97]}]
    fig = figs.overlay_halting_fig(series)
    assert [t.name for t in fig.data][:2] == ["a", "b"]
    priors = [t for t in fig.data if t.name.startswith("prior")]
    assert len(priors) == 1 and priors[0].line.color == fig.data[0].line.color          # one prior per λp, a's colour
    # three λp: three priors, each in its first model's colour and with a dash pattern of its own
    three = figs.overlay_halting_fig([dict(s, name=n, lambda_p=lp) for s, n, lp in
                                      zip(series * 2, "abc", (0.2, 0.5, 0.8))])
    priors = [t for t in three.data if t.name.startswith("prior")]
    assert [t.line.color for t in priors] == [t.line.color for t in three.data[:3]]
    assert len({t.line.color for t in priors}) == 3 and len({t.line.dash for t in priors}) == 3
    fig = figs.overlay_steps_fig(series, "per_step_accuracy", "t", "accuracy")
    assert list(fig.data[1].y) == [0.8, 0.97]


def test_topk_fig_shows_the_three_most_probable_classes_in_order():
    p = [0.05, 0.6, 0.0, 0.25, 0.1, 0, 0, 0, 0, 0]
    bars = figs.topk_fig(p, [str(c) for c in range(10)], truth=3).data[0]
    assert list(bars.y) == ["1", "3", "4"] and np.allclose(bars.x, [0.6, 0.25, 0.1])
    assert list(bars.text) == ["60.0%", "25.0%", "10.0%"]
    assert list(bars.marker.color) == [LEARNED_COLOR, CORRECT_COLOR, LEARNED_COLOR]       # green: the true label
    tie = figs.topk_fig([0.5, 0.5, 0.0], ["a", "b", "c"], k=2).data[0]
    assert list(tie.y) == ["a", "b"]                                       # ties keep the class order


@pytest.mark.long
def test_the_step_slider_is_a_band_on_every_per_step_chart():
    from ponder.analysis.studies import trace_input
    tr = trace_input(tiny_model("mnist", max_steps=5), torch.zeros(1, 1, 28, 28), "deterministic")
    figs_ = figs.trace_figures(tr, [str(c) for c in range(10)], cursor=3)
    for name, fig in figs_.items():
        band = [s for s in fig.layout.shapes if s.type == "rect" and s.fillcolor == CURSOR_COLOR or
                s.type == "rect" and s.line.color == "rgb(255, 170, 0)"]
        lo, hi = ("y0", "y1") if name == "heat" else ("x0", "x1")               # the heatmap's steps are its rows
        assert len(band) == 1 and (band[0][lo], band[0][hi]) == (2.5, 3.5), name
    assert not any(s.fillcolor == CURSOR_COLOR for s in figs.trace_figures(tr, list("0123456789"))["p"].layout.shapes)


def test_the_training_chart_names_the_runs_kl_direction():
    rows = [{"step": s, "loss": 1.0, "rec": 0.9, "reg": 0.1, "accuracy": 0.5, "mean_steps": 3.0} for s in (1, 2)]
    assert "KL(p_G ‖ p)" in [t.name for t in figs.training_fig(rows, 0.2, 5, regulariser="kl-reverse").data]
    assert "KL(p ‖ p_G)" in [t.name for t in figs.training_fig(rows, 0.2, 5).data]


def test_the_heatmap_labels_every_step_and_draws_the_halting_box_over_the_slider_band():
    # it labelled only odd steps (step 20 unlabelled), and its caption's "dotted box" lay under the slider's solid
    # band where the two met (the slider opens on the halting step)
    fig = figs.step_probs_heatmap(np.full((20, 10), 0.1), halt_step=7, cursor=7)
    y = fig.layout.yaxis
    assert (y.tickmode, y.tick0, y.dtick) == ("linear", 1, 1)                 # 1, 2, ..., 20: every step
    assert fig.layout.height >= 110 + 18 * 20                                 # ~18 px a label
    *under, top = fig.layout.shapes
    assert top.line.dash == "dot" and (top.y0, top.y1) == (6.5, 7.5)          # the halting box, drawn last
    assert [(s.y0, s.y1, s.line.dash) for s in under] == [(6.5, 7.5, None)]   # the slider's box, solid, under it
    assert figs.step_probs_heatmap(np.full((200, 2), 0.5)).layout.yaxis.dtick == 20     # too many to label each


def test_the_heatmap_caption_names_what_is_drawn():
    from ponder.analysis.studies import trace_input
    from explorer.app.views import heat_caption
    model, x = tiny_model("mnist", max_steps=5), torch.zeros(1, 1, 28, 28)
    tr = trace_input(model, x, "deterministic")
    assert f"dotted box is step {tr.halt_step}, where it halted" in heat_caption(tr, 2)
    assert "orange box is step 2" in heat_caption(tr, 2)
    dotted = [s for s in figs.trace_figures(tr, list("0123456789"), cursor=2)["heat"].layout.shapes if s.line.dash == "dot"]
    assert len(dotted) == 1
    ex = trace_input(model, x, "expected")                                   # no halting box in expected mode
    assert "dotted" not in heat_caption(ex, 2)
    assert not [s for s in figs.trace_figures(ex, list("0123456789"), cursor=2)["heat"].layout.shapes
                if s.line.dash == "dot"]


def test_charts_side_by_side_share_one_y_scale_and_upright_step_labels():
    # p_n charts of two models beside each other read 0-0.5 and 0-0.2, one with rotated step labels
    a, b = figs.halting_fig([0.5, 0.3, 0.2], 0.5), figs.halting_fig(np.full(20, 0.05), 0.1)
    figs.side_by_side([a, b])
    prior_top = 0.5 / (1 - 0.5 ** 3)                                        # λp = 0.5 renormalised over N = 3: 0.571
    assert a.layout.yaxis.range == b.layout.yaxis.range == pytest.approx((0, prior_top * 1.08))
    assert (a.layout.xaxis.tickangle, b.layout.xaxis.tickangle) == (0, 0) and b.layout.xaxis.dtick == 2


def test_the_halting_mass_accumulates_to_one_as_stacked_bars_of_each_steps_p():
    p = np.array([0.1, 0.18, 0.36, 0.36])
    fig = figs.cumulative_fig(p)
    bars = [t for t in fig.data if isinstance(t, go.Bar)]
    assert fig.layout.barmode == "stack" and len(bars) == 4                   # one layer a step
    assert [list(b.x) for b in bars] == [[1, 2, 3, 4], [2, 3, 4], [3, 4], [4]]   # p_j in every bar from step j on
    height = {n: sum(float(b.y[list(b.x).index(n)]) for b in bars if n in list(b.x)) for n in range(1, 5)}
    assert [height[n] for n in range(1, 5)] == pytest.approx(np.cumsum(p)) and height[4] == pytest.approx(1.0)
    assert [t.name for t in fig.data if t.showlegend is not False and isinstance(t, go.Bar)] == ["p_j, stacked"]


def test_the_expected_answer_is_drawn_as_the_mixture_of_the_step_answers():
    from ponder.analysis.studies import trace_input
    tr = trace_input(tiny_model("mnist", max_steps=5), torch.zeros(1, 1, 28, 28), "expected")
    fig = figs.mixture_fig(tr.p, tr.probs, list("0123456789"), truth=3)
    bars = [t for t in fig.data if isinstance(t, go.Bar)]
    assert fig.layout.barmode == "stack" and len(bars) == 5                    # one share a step
    top = list(bars[0].y)
    for c in top:                                                             # the shares add up to the answer
        total = sum(float(b.x[list(b.y).index(c)]) for b in bars)
        assert total == pytest.approx(tr.answer_probs[int(c)], abs=1e-6)
        assert float(bars[1].x[top.index(c)]) == pytest.approx(tr.p[1] * tr.probs[1][int(c)])   # p_2·P(c | step 2)
    assert top[0] == str(tr.pred)                                             # the answer on top


@pytest.mark.long
def test_a_regulariser_added_to_the_table_validates_trains_and_is_named_on_the_training_chart(monkeypatch):
    # one entry in ponder.losses.REGULARISERS and nothing else: the config takes it, a run trains with it, the CLI
    # offers it, and the chart names its term by the entry's label (an unknown name was once labelled KL(p‖p_G))
    from dataclasses import asdict

    from ponder.cli.args import build_parser
    from ponder.config import TrainConfig
    from ponder.losses import REGULARISERS, Regulariser, kl_to_prior
    from ponder.tasks import validate
    from ponder.training.loop import train

    def total_variation(log_p, log_prior):                                   # [N, B], [N] -> [B]
        return 0.5 * (log_p.exp() - log_prior.exp().unsqueeze(1)).abs().sum(0)

    monkeypatch.setitem(REGULARISERS, "tv", Regulariser(total_variation, "TV(p, p_G)", "total variation",
                                                        "half the L1 distance"))
    # p = (1/2, 1/2) against the prior of λp = 0.5, N = 2 renormalised (2/3, 1/3): TV = 0.5 (1/6 + 1/6) = 1/6
    assert kl_to_prior(torch.full((2, 1), 0.5).log(), 0.5, "tv").item() == pytest.approx(1 / 6, abs=1e-6)
    cfg = validate(TrainConfig(task="parity", regulariser="tv", hidden=8, batch_size=8, max_steps=3, epochs=1.0,
                               steps_per_epoch=2, log_every=1, device="cpu", cuda_graph=False))
    rows = []
    train(cfg, callback=lambda p: rows.append(asdict(p)))
    assert rows and all(math.isfinite(r["reg"]) and r["reg"] >= 0 for r in rows)
    names = [t.name for t in figs.training_fig(rows, cfg.lambda_p, cfg.max_steps, regulariser="tv").data]
    assert "TV(p, p_G)" in names and not any(n.startswith("KL") for n in names)
    assert build_parser().parse_args(["train", "--out", "r", "--regulariser", "tv"]).regulariser == "tv"
