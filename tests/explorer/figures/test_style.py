"""explorer/figures/style.py: step axes, log ticks, labelled rules and the prior trace, by hand."""
import numpy as np
import plotly.graph_objects as go
from hypothesis import given, strategies as st

from explorer.figures import style


def test_step_ticks_by_hand():
    # at most ~20 ticks: N = 20 -> every step, 100 -> every 5th, 7 with max 3 ticks -> every 3rd
    assert (style.step_dtick(20), style.step_dtick(100), style.step_dtick(7, max_ticks=3)) == (1, 5, 3)
    assert style.step_axis(20)["range"] == [0.4, 20.6] and style.step_axis(20)["tick0"] == 1
    # training steps up to 4,000 with 6 ticks: 4000 / 6 = 667 -> the next 1-2-5 step is 1,000
    assert style.count_axis(4000)["dtick"] == 1000 and style.count_axis(7)["dtick"] == 2


def test_log_ticks_by_hand():
    # 0.03 .. 0.9 spans two decades: 1-2-5 ticks from 0.02 to 2 (within a factor 2.5 of the data)
    t = style.log_ticks([0.03, 0.9])
    assert np.allclose(t["tickvals"], [0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0]) and t["ticktext"][0] == "0.02"
    # 1e-5 .. 10 spans six decades: powers of ten only
    assert np.allclose(style.log_ticks([1e-5, 10])["tickvals"], [1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1, 10])
    assert style.log_ticks([0, -1, float("nan")]) == {}


def test_set_layout_does_what_update_layout_does():
    # every figure helper sets its layout through set_layout (a tenth of update_layout's cost); these cases
    # are the kinds of value they pass: a dict merged into what is there, a title as a plain string (its
    # text), a list (replaced), None (clears the property), a plain value
    def made():
        fig = go.Figure(go.Scatter(x=[1, 2], y=[3, 4]))
        fig.layout.margin = dict(l=5, t=7)
        fig.layout.xaxis = dict(title=dict(text="old", font=dict(size=9)), range=[0, 1])
        fig.layout.title = dict(text="kept")
        return fig

    props = dict(margin=dict(l=55, b=45), xaxis=dict(title="step n", range=[0.4, 20.6], tickvals=[1, 5]),
                 yaxis=dict(title=None, rangemode="tozero"), title=None, height=345, showlegend=False)
    fast, slow = style.set_layout(made(), **props), made().update_layout(**props)

    def shown(d):                                        # an empty property ({}) is the same as none
        d = {k: shown(v) if isinstance(v, dict) else v for k, v in d.items()}
        return {k: v for k, v in d.items() if v != {}}
    assert shown(fast.layout.to_plotly_json()) == shown(slow.layout.to_plotly_json())
    assert fast.layout.margin.l == 55 and fast.layout.margin.t == 7 and fast.layout.title.text is None
    assert fast.layout.xaxis.title.text == "step n" and fast.layout.xaxis.range == (0.4, 20.6)


def test_a_rule_is_a_shape_and_a_legend_entry():
    fig = go.Figure()
    style.rule(fig, x=3, line=dict(color="red"), text="halted at step 3")
    style.rule(fig, x=40, text="mean 1/λp = 40 (beyond N = 20)", draw=False)
    assert [(s.x0, s.x1, s.yref) for s in fig.layout.shapes] == [(3, 3, "paper")]
    assert [t.name for t in fig.data] == ["halted at step 3", "mean 1/λp = 40 (beyond N = 20)"]


def test_prior_trace_is_the_renormalised_prior():
    # λp = 0.5, N = 2: 0.5, 0.25 over Z = 0.75: 2/3, 1/3
    t = style.prior_trace(0.5, 2)
    assert list(t.x) == [1, 2] and np.allclose(t.y, [2 / 3, 1 / 3]) and t.line.color == style.PRIOR_COLOR
    assert isinstance(style.prior_trace(0.5, 2, as_bars=True), go.Bar)


def test_the_legend_sits_under_the_plot_and_the_figure_grows_by_its_rows():
    # a legend beside or over the plot covers the titles: it goes under the plot
    fig = go.Figure([go.Scatter(x=[1], y=[1], name="λ_n"), go.Scatter(x=[1], y=[1], name="prior's constant λp = 0.5"),
                     go.Scatter(x=[1], y=[1], name="halted at step 11")])
    # widths 45 + 6.5 × characters: 64.5, 207.5, 155.5 px; at 330 px a row: [λ_n, prior's] then [halted]: 2 rows
    assert style.legend_rows(style.legend_names(fig)) == 2
    style.layout(fig, "λ_n: chance to halt at step n")
    lg, t = fig.layout.legend, fig.layout.title
    assert (lg.yref, lg.y, lg.yanchor, lg.orientation) == ("container", 0, "bottom", "h")     # at the bottom
    assert (t.yref, t.y, t.yanchor, t.automargin) == ("container", 1, "top", True)         # pushes the plot down
    assert fig.layout.height == style.HEIGHT + 25 + 2 * style.LEGEND_ROW + 12
    one = style.layout(go.Figure(go.Bar(x=[1], y=[1], name="p")), "")          # a lone trace lists no legend
    assert one.layout.height == style.HEIGHT


def test_the_plotly_toolbar_holds_one_button_that_saves_a_png():
    from explorer.app.ui import PLOTLY_CONFIG
    assert PLOTLY_CONFIG["modeBarButtons"] == [["toImage"]] and PLOTLY_CONFIG["toImageButtonOptions"]["format"] == "png"
    assert PLOTLY_CONFIG["displaylogo"] is False


@given(st.lists(st.text(alphabet="abcdefghij:·", min_size=1, max_size=50), max_size=12))
def test_a_title_wraps_at_spaces_into_lines_that_fit_a_phone(words):
    title = " ".join(words)
    text, lines = style.wrap_title(title)
    parts = text.split("<br>")
    assert len(parts) == lines and " ".join(parts) == title              # nothing lost, broken only at spaces
    assert all(len(p) <= style.TITLE_CHARS or " " not in p for p in parts)     # a line fits, or is one long word
    # greedy: no line's next word would have fitted on it
    assert all(len(a) + 1 + len(b.split(" ")[0]) > style.TITLE_CHARS for a, b in zip(parts, parts[1:]))


def test_the_worth_charts_title_fits_a_phone_in_two_lines():
    # "…the learned halting and two ru" was cut at 390 px: 60 characters on one line
    text, lines = style.wrap_title("Accuracy at equal compute: the learned halting and two rules")
    assert text == "Accuracy at equal compute: the learned<br>halting and two rules" and lines == 2
    one = style.layout(go.Figure(), "Short title", height=300)
    two = style.layout(go.Figure(), "Accuracy at equal compute: the learned halting and two rules", height=300)
    assert two.layout.height == one.layout.height + style.TITLE_LINE_PX     # the plot keeps its height
    # two lines sit on the plot area: anchored at the figure's top, Plotly put the first line above the figure
    assert (two.layout.title.yref, two.layout.title.yanchor, one.layout.title.yref) == ("paper", "bottom", "container")
