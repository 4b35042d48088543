"""explorer/app/watch_views.py: the watched input's history chart."""
from explorer.app import watch_views


def test_the_history_charts_right_axis_has_round_percentages():
    watched = [{"step": s, "expected_steps": 2.0 + s / 100, "confidence": 0.3 + s / 1000, "pred": 7} for s in (1, 50, 300)]
    fig = watch_views.history_fig(watched)
    right = fig.layout.yaxis2
    assert list(right.tickvals) == [0, 0.25, 0.5, 0.75, 1] and right.tickformat == ".0%" and tuple(right.range) == (0, 1)
    assert right.overlaying == "y" and right.side == "right" and right.showgrid is False   # no second grid
    assert [t.yaxis for t in fig.data] == [None, "y2"]              # E[n] on the left, the answer's probability right
