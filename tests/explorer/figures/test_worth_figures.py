"""explorer/figures/worth.py: the data inside the "worth it?" and by-group figures, and the settle sentence."""
import numpy as np
import pytest
import torch

from explorer.figures import worth as wf
from ponder.analysis.equal_steps import worth_it

# a toy unroll (tests/ponder/test_baselines.py works its numbers out by hand)
STATS = {"per_step_correct": torch.tensor([[0, 1, 0], [1, 0, 0], [1, 1, 0]]).bool(),
         "per_step_confidence": torch.tensor([[0.5, 0.6, 0.6], [0.8, 0.8, 0.95], [0.99, 0.7, 0.7]], dtype=torch.float64),
         "p": torch.tensor([[0.2, 0.5, 0.1], [0.5, 0.25, 0.4], [0.3, 0.25, 0.5]], dtype=torch.float64)}


def _series(name="toy"):
    b = worth_it(STATS)["baselines"]
    return {"name": name, "fixed_depth": b["fixed_depth"], "confidence_exit": b["confidence_exit"],
            "learned_q": b["frontier"]["learned_q"], "at": b["at_equal_steps"]}


def test_one_model_draws_the_frontiers_the_sampled_point_and_each_rule_at_equal_compute():
    s = _series()
    fig = wf.worth_fig([s])
    by = {t.name: t for t in fig.data if t.name}
    assert set(by) == {"fixed depth", "confidence exit", "Q-exit (learned λ, deterministic)", "sampled halting"}
    assert list(by["fixed depth"].x) == [1, 2, 3] and list(by["fixed depth"].y) == pytest.approx([1 / 3, 1 / 3, 2 / 3])
    ce = by["confidence exit"]
    assert list(ce.x) == sorted(ce.x) and len(ce.x) == len(s["confidence_exit"])
    q = by["Q-exit (learned λ, deterministic)"]
    assert len(q.x) == len(s["learned_q"]) >= 10 and list(q.x) == sorted(q.x)
    learned = by["sampled halting"]
    at = s["at"]
    assert (learned.x[0], learned.y[0]) == pytest.approx((at["mean_steps"], at["learned"]))
    lo, hi = at["learned_interval"]
    assert learned.error_y.array[0] == pytest.approx(hi - at["learned"])
    assert learned.error_y.arrayminus[0] == pytest.approx(at["learned"] - lo)
    (open_,) = [t for t in fig.data if not t.name]                      # each rule at equal compute
    # tuned on the toy itself: Q-exit 0.458333, fixed depth 0.361111, confidence exit 0.375 (test_equal_steps)
    assert list(open_.y) == pytest.approx([0.458333, 0.361111, 0.375], abs=1e-6)
    assert list(open_.text) == ["Q-exit", "fixed depth", "confidence exit"]
    y0, y1 = fig.layout.yaxis.range
    assert y0 <= min(at["fixed_depth"], at["confidence_exit"], lo) and y1 >= max(at["learned"], 2 / 3)


def test_several_models_a_colour_each_and_named_in_the_legend():
    fig = wf.worth_fig([_series("a"), _series("b")])
    names = [t.name for t in fig.data if t.name]
    assert names == [f"{m}: {p}" for m in "ab" for p in ("fixed depth", "confidence exit",
                                                         "Q-exit (learned λ, deterministic)", "sampled halting")]
    colours = {t.name.split(":")[0]: t.line.color for t in fig.data if t.name and t.name.endswith("fixed depth")}
    assert colours["a"] != colours["b"]


def test_difference_and_shift_rows_word_each_interval_by_the_one_rule():
    at = {"policies": {"learned_q": {"accuracy": 0.9924, "mean_steps": 9.6}, "confidence_exit": {"accuracy": 0.9923,
          "mean_steps": 9.6}, "fixed_depth": {"accuracy": 0.9698, "mean_steps": 9.6}, "sampled": {"accuracy": 0.9905,
          "mean_steps": 9.6}},
          "ci95": {"learned_q-confidence_exit": [-0.0008, 0.001], "sampled-learned_q": [-0.0025, -0.0013]}}
    rows = wf.difference_rows(at)
    assert rows == [{"difference": "Q-exit − confidence exit", "value": "+0.0001", "95 % interval": "-0.0008 to +0.0010",
                     "verdict": "no difference"},
                    {"difference": "sampled halting − Q-exit", "value": "-0.0019", "95 % interval": "-0.0025 to -0.0013",
                     "verdict": "0.0019 below"}]
    assert wf.difference_rows({"learned": 0.9}) == []
    (row,) = wf.shift_table([{"name": "rotation 45°", "n": 2000, **at}])
    assert row["Q-exit"] == "0.9924 (9.60)" and row["Q-exit − confidence"] == "+0.0001 [-0.0008, +0.0010]: no difference"


def test_by_group_figure_and_families():
    groups = {"E[n] Q1": [0.5, 0.9, 1.0], "E[n] Q2": [0.4, 0.8, 0.9], "digit 3": [0.1, 0.2, 0.3]}
    assert list(wf.family(groups, "E[n] Q")) == ["E[n] Q1", "E[n] Q2"]
    fig = wf.by_group_fig(wf.family(groups, "E[n] Q"))
    assert [t.name for t in fig.data] == ["E[n] Q1", "E[n] Q2"] and list(fig.data[1].y) == [0.4, 0.8, 0.9]
    assert fig.layout.yaxis.range[0] <= 0.4


def _probs(answers, classes=3):
    return np.eye(classes)[answers] * 0.8 + 0.2 / classes        # [N, C], the answer at step n on top


@pytest.mark.parametrize("answers, target, known, says", [
    # the answer's probability at the settle step: 0.8 + 0.2/3 = 86.7 %
    ([1, 0, 2, 2], 2, True, "settled at step 3 (right from then on, which only the later steps show: at step 3 that "
                            "answer had probability 86.7%); it halted at step 4, and E[n] = 4.50 is 1.50 steps after"),
    ([2, 2, 2, 2], 2, True, "settled at step 1"),
    ([1, 0, 2, 0], 2, True, "never settled on the right answer"),
    ([1, 0, 2, 2], 2, False, "settled at step 3 (its final answer (2) from then on, "),
])
def test_the_settle_sentence(answers, target, known, says):
    assert says in wf.settle_sentence(_probs(answers), target, 4, 4.5, known)


def test_the_settle_sentence_when_it_halts_before_it_settles():
    assert "0.50 steps before it settled" in wf.settle_sentence(_probs([0, 1, 1, 2]), 2, 2, 3.5)


def test_many_groups_get_colours_no_two_alike():
    # 16 rotations drew pairs of lines in the same colour (a 10-colour palette, repeated)
    fig = wf.by_group_fig({f"rotation {a}°": [0.5, 0.9] for a in range(0, 240, 15)})
    assert len({t.line.color for t in fig.data}) == 16
    few = wf.by_group_fig({"easy": [0.5, 0.9], "hard": [0.4, 0.8]})
    assert len({t.line.color for t in few.data}) == 2


def test_a_competitors_frontiers_are_drawn_at_the_steps_they_spend_on_the_test_set():
    import plotly.graph_objects as go
    from helpers import fake_unroll
    from ponder.analysis.against import against
    from explorer.figures.worth import add_competitor
    out = against(fake_unroll(200, 4, 0), fake_unroll(200, 4, 1), fake_unroll(200, 4, 2, 0.3), fake_unroll(200, 4, 3, 0.3),
                  "deep")
    fig = go.Figure(layout=dict(yaxis=dict(range=[0.3, 0.5])))
    add_competitor(fig, out["budgets"], "deep")
    names = [t.name for t in fig.data]
    assert names == ["deep: confidence exit", "deep: fixed depth", "deep: patience"]     # never its own rules
    rows = sorted(out["budgets"]["rows"], key=lambda r: r["budget"])
    pts = [r["chosen"]["policies"]["competitor.fixed_depth"] for r in rows]
    assert list(fig.data[1].x) == pytest.approx([p["mean_steps"] for p in pts])
    assert list(fig.data[1].y) == pytest.approx([p["accuracy"] for p in pts])
    top = max(max(t.y) for t in fig.data)
    assert fig.layout.yaxis.range[1] >= min(1.0, top)                  # widened to hold them
