"""explorer/figures/studies.py: the data inside the λp-sweep, rotation and parity figures."""
import numpy as np
import plotly.graph_objects as go
import pytest

from explorer.figures import studies as sf
from explorer.figures.style import CORRECT_COLOR, LEARNED_COLOR, PRIOR_COLOR, WRONG_COLOR
from explorer.tables import sweep_row
from ponder.analysis.studies import box_stats
from ponder.store.record import RunRecord


def _prior_traces(fig):
    return [t for t in fig.data if getattr(t, "marker", None) is not None and t.marker.color == PRIOR_COLOR
            or getattr(t, "line", None) is not None and getattr(t.line, "color", None) == PRIOR_COLOR]


def test_sweep_figures_keep_failed_runs():
    rows = [sweep_row("a", RunRecord(train={"lambda_p": 0.2}, status="completed", metrics={"test": {
                "accuracy": 0.99, "mean_steps": 4.7, "halting_distribution": [0.3, 0.3, 0.4]}})),
            sweep_row("b", None, status="failed", reason="loss became nan at step 3", lambda_p=0.9)]
    grid = sf.sweep_grid_fig(rows)
    assert any("loss became nan" in (a.text or "") for a in grid.layout.annotations)
    assert any(isinstance(t, go.Bar) and t.marker.color == LEARNED_COLOR for t in grid.data)
    assert any(t.line.color == PRIOR_COLOR for t in grid.data if isinstance(t, go.Scatter))
    steps = sf.sweep_steps_fig(rows, 20)
    learned = next(t for t in steps.data if t.name.startswith("mean halting step"))
    assert list(learned.x) == [0.2] and list(learned.y) == [4.7]               # the failed run has no point
    ref = next(t for t in steps.data if t.name == "1/λp")
    assert np.allclose(np.array(ref.y) * np.array(ref.x), 1.0)
    acc = sf.sweep_accuracy_fig(rows)
    assert list(acc.data[0].y) == [0.99]


def _rows():
    rng = np.random.default_rng(0)
    rows = []
    for kind, a, acc in (("fixed", 0, 0.99), ("fixed", 90, 0.2), ("uniform", 45, 0.9)):
        s = rng.integers(1, 8, 200).astype(float)
        rows.append(dict(kind=kind, angle=a, n=200, accuracy=acc, halting_distribution=[0.5, 0.3, 0.2], steps=s.tolist(),
                         confidence=rng.uniform(0, 1, 200).tolist(), correct=(rng.uniform(0, 1, 200) < acc).tolist(),
                         **box_stats(s), mean_steps=float(s.mean()), median_steps=float(np.median(s))))
    return rows


def test_rotation_figures():
    rows = _rows()
    acc = sf.rotation_accuracy_fig(rows)
    fixed = next(t for t in acc.data if t.name == "fixed angle θ")
    assert list(fixed.x) == [0, 90] and list(fixed.y) == [0.99, 0.2]
    box = sf.rotation_steps_fig(rows)
    b = next(t for t in box.data if isinstance(t, go.Box))
    assert list(b.x) == ["0°", "90°", "±45°"]
    assert all(lo <= q1 <= m <= q3 <= hi for lo, q1, m, q3, hi in zip(b.lowerfence, b.q1, b.median, b.q3, b.upperfence))
    means = {t.name: list(t.x) for t in box.data if isinstance(t, go.Scatter)}   # fixed and ranges not joined
    assert means == {"mean, fixed angles": ["0°", "90°"], "mean, uniform ranges": ["±45°"]}
    heat = sf.rotation_halting_fig(rows)
    assert np.array(heat.data[0].z).shape == (3, 3)
    sc = sf.confidence_scatter_fig(rows[1]["steps"], rows[1]["confidence"], rows[1]["correct"])
    right, wrong = sc.data
    assert len(right.x) + len(wrong.x) == 200 and right.marker.color == CORRECT_COLOR
    assert np.all(np.abs(np.array(right.x) - np.array(right.customdata)) < 0.2)      # jitter only


def test_parity_figures():
    fig = sf.parity_input_fig([1, -1, 0, 1, 1])
    assert "3 of them +1" in fig.layout.title.text and "odd" in fig.layout.title.text
    fig = sf.sets_halting_fig({"easy": [0.5, 0.5], "hard": [0.1, 0.9]}, 0.2)
    assert len(_prior_traces(fig)) == 1
    fig = sf.by_k_fig([{"k": 1, "accuracy": 1.0, "mean_steps": 3.0}, {"k": 2, "accuracy": 0.5, "mean_steps": 4.0}],
                     train_k=(1, 1))
    assert list(fig.data[0].y) == [3.0, 4.0] and len(fig.data) == 2          # rows without E[n]: no E[n] series
    rows = [{"k": 1, "accuracy": 1.0, "mean_steps": 3.0, "expected_steps": 2.5, "expected_steps_std": 0.4},
            {"k": 2, "accuracy": 0.5, "mean_steps": 4.0, "expected_steps": 3.5, "expected_steps_std": 0.1}]
    en = next(t for t in sf.by_k_fig(rows).data if t.name.startswith("E[n]"))
    assert list(en.y) == [2.5, 3.5] and list(en.error_y.array) == [0.4, 0.1]
    # k 5-10 not measured: the lines break there instead of joining k 4 to k 11
    gap = sf.by_k_fig([dict(rows[0], k=4), dict(rows[1], k=11)])
    assert list(gap.data[0].x) == list(range(4, 12)) and list(gap.data[0].y) == [3.0] + [None] * 6 + [4.0]
    assert not gap.data[0].connectgaps
    # and the page's caption names the k no test set holds
    assert sf.unmeasured_k([dict(rows[0], k=4), dict(rows[1], k=11)]) == "5–10"
    assert sf.unmeasured_k([{"k": v} for v in (1, 3, 4, 7)]) == "2, 5–6"
    assert sf.unmeasured_k([{"k": v} for v in range(1, 16)]) == "" and sf.unmeasured_k([]) == ""
    assert "1 non-zero," in sf.parity_input_fig([0, 1, 0]).layout.title.text          # not "1 non-zeros"
    thirty = sf.by_k_fig([dict(rows[0], k=v) for v in range(1, 31)])            # k 1-30: every other tick, upright
    assert thirty.layout.xaxis.dtick == 2 and thirty.layout.xaxis.tickangle == 0


def test_sweep_grid_text_panels_sit_in_their_own_panel():
    rows = [dict(name="a", lambda_p=0.2, status="completed", reason="", halting=[0.5, 0.3, 0.2]),
            dict(name="b", lambda_p=0.7, status="failed", reason="gradient norm became inf at step 1", halting=None),
            dict(name="c", lambda_p=0.8, status="running 38%", reason="", halting=None),
            dict(name="d", lambda_p=0.9, status="queued", reason="", halting=None)]
    fig = sf.sweep_grid_fig(rows)
    notes = {a.text.replace("<br>", " "): a for a in fig.layout.annotations if a.xref == "paper" and a.yref == "paper"
             and not a.text.startswith("λp=")}
    failed = next(a for t, a in notes.items() if "became inf" in t)
    assert failed.font.color == WRONG_COLOR and "failed" in failed.text
    for i, key in ((1, "became inf"), (2, "running 38%"), (3, "queued")):
        a = next(a for t, a in notes.items() if key in t)
        xd, yd = fig.layout[f"xaxis{i + 1}"].domain, fig.layout[f"yaxis{i + 1}"].domain
        assert xd[0] < a.x < xd[1] and yd[0] < a.y < yd[1], (key, a.x, a.y, xd, yd)
    assert fig.layout.legend.yref == "container"                  # under the panels, not over their titles
    shared = {a.text for a in fig.layout.annotations if not a.text.startswith("λp=")}
    assert {"step n", "p_n (halt at n)"} <= shared                # axis titles of the small multiples
    # panel titles short enough for a third of a phone's width: the status said once, inside a panel without bars
    assert [a.text for a in fig.layout.annotations if a.text.startswith("λp=")] == ["λp=0.2", "λp=0.7", "λp=0.8", "λp=0.9"]
    partial = sf.sweep_grid_fig([dict(rows[0], status="cancelled")])
    assert partial.layout.annotations[0].text == "λp=0.2 · cancelled"


@pytest.mark.long
@pytest.mark.parametrize("trials", [16, 100])
def test_sweep_grid_of_a_large_sweep_keeps_its_rows_apart(trials):
    """4 λp x 4 seeds (6 rows) and the form's largest sweep, 10 λp x 10 seeds (34 rows): a grid whose rows are all
    as tall and about GRID_GAP_PX apart (Plotly refuses a vertical spacing over 1 / (rows - 1)); drawn whole here
    (limit: the page draws at most MAX_PANELS of them)."""
    rows = [dict(name=f"t{i}", lambda_p=0.1 * (i % 10 + 1), status="completed", reason="", halting=[0.5, 0.3, 0.2])
            for i in range(trials)]
    fig = sf.sweep_grid_fig(rows, limit=trials)
    plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    ys = sorted({tuple(fig.layout[k].domain) for k in fig.layout if k.startswith("yaxis")}, reverse=True)
    assert len(ys) == -(-trials // 3)
    tall = [(hi - lo) * plot_px for lo, hi in ys]
    gaps = [(a[0] - b[1]) * plot_px for a, b in zip(ys, ys[1:])]
    assert max(tall) - min(tall) < 1 and min(tall) > 100, tall
    assert max(gaps) - min(gaps) < 1 and sf.GRID_GAP_PX <= min(gaps) < 1.1 * sf.GRID_GAP_PX, gaps   # + the legend's row


def test_every_trace_has_hover_text():
    rows = _rows()
    made = [sf.rotation_accuracy_fig(rows), sf.rotation_steps_fig(rows), sf.rotation_halting_fig(rows),
            sf.sweep_steps_fig([], 20), sf.parity_input_fig([1, 0]), sf.sets_halting_fig({"a": [0.5, 0.5]}, 0.2)]
    for fig in made:
        for t in fig.data:
            assert t.hovertemplate or t.hoverinfo, (fig.layout.title.text, t.name)


def _many(n):
    return [sweep_row(f"t{i}", RunRecord(train={"lambda_p": 0.01 + 0.98 * i / max(1, n - 1)}, status="completed",
                                         metrics={"test": {"accuracy": 0.9, "mean_steps": 2.0,
                                                           "halting_distribution": [0.5, 0.3, 0.2]}}))
            for i in range(n)] + [sweep_row("bad", None, status="failed", reason="out of memory", lambda_p=0.5)]


@pytest.mark.parametrize("n", [5, 300, 10_000])
def test_the_sweep_grid_draws_a_bounded_number_of_panels_and_one_heat_map_holds_the_rest(n):
    """One Plotly panel per trial: 300 trials took 37 s to draw, 1,000 more than 5 minutes, 10,000 over 30."""
    rows = _many(n)
    grid = sf.sweep_grid_fig(rows)
    panels = [k for k in grid.layout if k.startswith("xaxis")]
    assert len(panels) == min(len(rows), sf.MAX_PANELS) and len(grid.data) <= 2 * sf.MAX_PANELS
    names = {t.hovertemplate.split("<br>")[0] for t in grid.data if isinstance(t, go.Bar)}
    assert "t0" in names and (n == 5 or f"t{n - 1}" not in names)         # the first run, spaced to the last one
    heat = sf.sweep_heatmap_fig(rows)
    (h,) = heat.data
    assert len(h.z) == min(len(rows), sf.MAX_HEAT_ROWS) and list(h.z[0]) == [0.5, 0.3, 0.2]
    assert list(h.z[-1]) == [None, None, None] and h.customdata[-1][0] == "λp=0.5 · bad"   # a failed run: empty


def test_spread_keeps_the_first_and_last_and_is_even():
    assert sf.spread(range(10), 4) == [0, 3, 6, 9] and sf.spread(range(3), 4) == [0, 1, 2] and sf.spread(range(5), 1) == [0]
