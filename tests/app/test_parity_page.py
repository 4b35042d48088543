"""The Parity page under AppTest: generated, typed and click-edited vectors, and the numbers of parity-15's card."""
import pytest

from helpers import ASSETS, charts, one_line_errors, open_app, run_ok, texts
from ponder.store.card import read_card
from explorer import inputs
from page_helpers import _step_slider

# under pytest-xdist one worker runs the page tests: their runs folders, the job registry and the pages' first
# imports are set up once
pytestmark = pytest.mark.xdist_group("pages")


def test_parity_page_generated_and_typed_vectors(runs):
    at = open_app(page="parity", model="runs/tiny-parity")         # a shared link: page and model in the URL
    assert at.title[0].value == "Parity"
    assert at.sidebar.selectbox(key="pick_model_parity").value == "runs/tiny-parity"
    at.slider(key="par_k").set_value(3)
    run_ok(at)
    assert "3 non-zeros" in charts(at)[0]["layout"]["title"]["text"]
    at.segmented_control(key="par_how").set_value("Type")
    run_ok(at)
    at.text_input(key="par_text").input("1 1 1 0 0 0 0 -1")
    run_ok(at)
    assert "3 of them +1" in charts(at)[0]["layout"]["title"]["text"]
    assert {m.label for m in at.metric} >= {"Prediction", "E[n]"}
    (bars,) = [f["data"][0] for f in charts(at) if f["data"][0].get("orientation") == "h"]     # both classes
    assert len(bars["y"]) == 2 and "The answer's probability for each class (green: the true label)." in texts(at)
    df = at.dataframe[0].value
    assert len(df) == 2 and all(0 <= a <= 1 for a in df["accuracy"]) and all(1 <= e <= 5 for e in df["E[n]"])   # N = 5
    at.text_input(key="par_text").input("1 0 1")
    run_ok(at)
    assert "takes 8 values" in at.error[0].value
    assert len(at.dataframe[0].value) == 2 and len(charts(at)) == 1      # easy vs hard's open tab still shows
    at.text_input(key="par_text").set_value("1 " * 5_000_000 + "x" * 1000)   # 10 MB sent: cut to the widget's limit
    run_ok(at)
    assert len(at.text_input(key="par_text").value) == inputs.vector_chars(8)
    (err,) = one_line_errors(at)
    assert "takes 8 values" in err and len(err) < 200, err[:300]


def test_parity_page_draws_one_easy_vs_hard_chart_at_a_time(runs):
    at = open_app(page="parity", model="runs/tiny-parity")
    titles = lambda: [f["layout"].get("title", {}).get("text", "").replace("<br>", " ")   # noqa: E731
                      for f in charts(at)]                                            # lines a phone shows whole
    assert "Halting distributions by difficulty" in titles() and "Steps and accuracy by number of non-zeros" not in titles()
    at.session_state["par_sets_tab"] = "Steps and accuracy by k"
    run_ok(at)
    assert "Halting distributions by difficulty" not in titles() and "Steps and accuracy by number of non-zeros" in titles()


def test_a_click_on_a_parity_cell_changes_it_and_the_page_ponders_the_edited_vector(runs):
    at = open_app(page="parity", model="runs/tiny-parity")
    at.slider(key="par_k").set_value(3)
    run_ok(at)
    title = lambda a: charts(a)[0]["layout"]["title"]["text"]        # noqa: E731 - the input chart's
    cells = [at.button(key=f"cell_{i}").label for i in range(8)]
    assert sum(c != "0" for c in cells) == 3 and "3 non-zeros" in title(at)
    zero = cells.index("0")
    at.button(key=f"cell_{zero}").click()                               # 0 -> +1: one more non-zero, one more +1
    run_ok(at)
    assert at.button(key=f"cell_{zero}").label == "+" and at.segmented_control(key="par_how").value == "Type"
    plus = sum(c == "+" for c in cells) + 1
    assert at.text_input(key="par_text").value[zero] == "+" and f"{plus} of them +1" in title(at)
    assert any(f".st-key-cell_{zero} button{{background:#E45756" in h.proto.body for h in at.get("html")) and not at.warning
    at.button(key=f"cell_{zero}").click()                               # +1 -> −1
    run_ok(at)
    assert at.button(key=f"cell_{zero}").label == "−" and f"{plus - 1} of them +1" in title(at)


def test_parity_page_opens_on_parity_15_with_the_numbers_of_its_card():
    """The default parity model is the shipped n = 15 one; the page gives its card's E[n] gap, docs/findings.md's."""
    at = open_app(page="parity")
    assert at.sidebar.selectbox(key="pick_model_parity").value == "parity-15"
    t = read_card(ASSETS / "parity-15")["metrics"]["test"]
    gap = t["hard"]["expected_steps"] - t["easy"]["expected_steps"]
    assert any(f"hard − easy {gap:+.2f}" in c.value and "10,000 problems" in c.value for c in at.caption)
    # video-15's test sets are easy k 1–4 and hard k 11–15 (ponder.tasks.parity.task): the by-k chart's caption says
    # why its lines break between them
    at.session_state["par_sets_tab"] = "Steps and accuracy by k"
    run_ok(at)
    assert any("No test set has k 5–10" in c.value for c in at.caption)


def test_deterministic_mode_halts_where_the_q_exit_says(runs):
    # q = 0: the CDF reaches 0 at step 1; q = 1: only at step N (5); the sentence names the q it used
    at = open_app(page="parity", model="runs/tiny-parity")
    at.segmented_control(key="par_mode").set_value("deterministic")
    run_ok(at)
    assert "the Q-exit at q = 0.5 halts at the first step where P(halted by n) ≥ 0.5" in texts(at)
    for q, step in ((0.0, 1), (1.0, 5)):
        at.slider(key="par_q").set_value(q)
        run_ok(at)
        assert f"Q-exit at q = {q:g} halts" in texts(at) and f"step **{step}**" in texts(at)
        # at step N the CDF never reached q: λ_N = 1 stopped it (never "the draw stopped it")
        assert ("it never chose to stop; N stopped it at step **5**" in texts(at)) == (step == 5)


def test_the_papers_experiment_compares_every_run_of_its_vectors_and_their_answers_on_the_vector(runs):
    from helpers import tiny_model
    from ponder.store.checkpoint import save_run
    from ponder.config import TrainConfig
    made = []
    try:
        for method in ("ponder", "act"):
            m = tiny_model("parity", max_steps=4, n_elems=64, method=method)
            cfg = TrainConfig(task="parity", max_steps=4, lambda_p=0.3, hidden=16, parity_preset="paper", method=method)
            made.append(save_run(runs / f"paper-{method}", m, cfg, steps=10))
        shipped = [p.name for p in ASSETS.iterdir() if (p / "run.json").exists()
                   and read_card(p)["train"].get("parity_preset") == "paper"]          # the shipped runs of n = 64
        at = open_app(page="parity", model="runs/paper-act")
        assert f"Compare the {2 + len(shipped)} runs" in " ".join(e.label for e in at.expander)
        assert not any("Each method by number of non-zeros k" in c["layout"].get("title", {}).get("text", "")
                       for c in charts(at))                                # measured only when opened
        at.session_state["par_paper_open"] = True
        run_ok(at)
        names = [c["layout"].get("title", {}).get("text", "") for c in charts(at)]
        assert "Each method by number of non-zeros k" in names
        table = next(d.value for d in at.dataframe if "method" in d.value.columns and "seen k accuracy" in d.value.columns)
        assert len(table) == 2 + len(shipped) and {"ACT", "PonderNet"} <= set(table["method"])
        assert "unseen k accuracy" not in table.columns                     # n = 64 trains on every k: no column
        assert all(0 <= a <= 1 for a in table["seen k accuracy"])
        on_vector = next(d.value for d in at.dataframe if "answer" in d.value.columns)
        assert {"runs/paper-act", "runs/paper-ponder"} <= set(on_vector["run"]) and len(on_vector) == 2 + len(shipped)
        assert all(1 <= s <= 20 for s in on_vector["steps"])
        assert any("None solved the trained k" in m.value or "Solved on the trained k" in m.value for m in at.markdown)
    finally:
        import shutil
        for d in made:
            shutil.rmtree(d, ignore_errors=True)


def test_pause_keeps_the_step_on_screen_when_the_next_one_was_cut_short(runs):
    """On a loaded machine Pause landed a step late: the server had ticked to step 4 and was still sending it when
    Pause was pressed (outside the playing fragment, a press cuts that run short). Pause keeps step 3, the last one
    whose panel and slider were sent; the button is outside the fragment, so it is not sent again at each step."""
    from dataclasses import replace
    from explorer.app.stepper import Playing, paused_at
    at = open_app(page="parity", model="runs/tiny-parity")
    at.button(key="par_step_play").click()
    run_ok(at)
    run_ok(at)
    run_ok(at)                                                  # the third tick: step 3, sent
    play = at.session_state["par_step_playing"]
    assert _step_slider(at).value == 3 and _step_slider(at).disabled and (play.step, play.shown) == (3, 3)
    at.session_state["par_step_playing"] = replace(play, step=4)   # ticked to 4, its run cut short by the press
    at.button(key="par_step_play").click()
    run_ok(at)
    assert _step_slider(at).value == 3 and not _step_slider(at).disabled and "Step 3 of 5" in texts(at)
    assert [paused_at(Playing("a", 4, shown=s), 5) for s in (0, 3, 4)] == [4, 3, 4]     # none sent yet: the tick
