"""'Is the extra thought worth it?' on the digit, parity, rotation and Compare pages under AppTest: accuracy against
mean steps for a fixed depth, a confidence exit and the learned halting, the sentence under it, and per-step
accuracy by group, drawn when its section is opened; numbers as ponder.analysis.unroll.measure_test gives them on the
same first 2,000 test items (explorer.app.worth.ITEMS)."""
import pytest

from helpers import charts, open_app, run_ok, save_tiny_run, shown, texts
from ponder.store.checkpoint import load_checkpoint
from ponder.config import TrainConfig
from ponder.analysis.baselines import worth_sentence
from ponder.analysis.worth_text import headline
from ponder.analysis.unroll import measure_test
from page_helpers import _rotation_study, _worth
from explorer.app.worth import TITLE, open_key

# under pytest-xdist one worker runs the page tests: their runs folders, the job registry and the pages' first
# imports are set up once
pytestmark = pytest.mark.xdist_group("pages")


def _by_group(at):
    return next(f for f in charts(at) if f["layout"].get("title", {}).get("text", "").startswith("Accuracy if it stopped at step n, by"))


def _learned(fig, name="sampled halting"):
    return next(t for t in fig["data"] if t.get("name") == name)


def test_digit_page_worth_it_chart_sentence_groups_and_where_the_answer_settled(runs, mnist):
    from explorer.app.worth import ITEMS
    at = open_app(model="runs/tiny-mnist")
    at.segmented_control(key="digit_source").set_value("MNIST test digit")
    run_ok(at)
    (box,) = [e for e in at.expander if TITLE in e.label]        # closed: neither measured nor drawn
    assert not _worth(at) and not box.children
    at.session_state[open_key("digit")] = True
    run_ok(at)
    ck = load_checkpoint(runs / "tiny-mnist")
    want = measure_test(ck.model, TrainConfig.from_dict(ck.record.train), mnist, ITEMS)
    eq = want.baselines["at_equal_steps"]
    (fig,) = _worth(at)
    point = _learned(fig)
    assert point["x"][0] == pytest.approx(eq["mean_steps"]) and point["y"][0] == pytest.approx(eq["learned"])
    assert {t.get("name") for t in fig["data"]} >= {"fixed depth", "confidence exit", "Q-exit (learned λ, deterministic)"}
    assert worth_sentence(eq) in texts(at) and "2,000 test items" in texts(at)
    said = [shown(m.value) for m in at.markdown]             # the answer first: before the numbers' sentence
    assert said.index(f"**{headline(want.baselines)}**") < said.index(worth_sentence(eq))
    assert headline(want.baselines).split(":")[0] in ("Yes", "No", "No difference", "Mixed")
    assert "the signal that best tells a right answer" in texts(at) and "of the sampled halts on the test items" in texts(at)
    assert eq["tuned_on"] == {"set": "validation", "n": ITEMS}
    diffs = next(d.value for d in at.table if "difference" in d.value.columns)        # the intervals, one rule
    assert list(diffs["difference"]) == ["Q-exit − confidence exit", "Q-exit − fixed depth", "sampled halting − Q-exit",
                                         "sampled halting − confidence exit", "sampled halting − fixed depth"]
    groups = _by_group(at)
    assert [t["name"] for t in groups["data"]] == ["E[n] Q1", "E[n] Q2", "E[n] Q3", "E[n] Q4"]
    assert list(groups["data"][0]["y"]) == pytest.approx(want.per_step_accuracy_by_group["E[n] Q1"])
    halted = {m.label: m.value for m in at.metric}["Halted at step"].split(" / ")[0]          # "3 / 5"
    said = [c.value for c in at.caption if "settled" in c.value]
    assert len(said) == 1 and f"halted at step {halted}" in said[0] and "No rule that decides as it goes" in said[0]


def test_parity_page_worth_it_chart_and_easy_hard_per_step_accuracy(runs):
    from explorer.app.worth import ITEMS
    at = open_app(page="parity", model="runs/tiny-parity")
    assert not _worth(at)
    at.session_state[open_key("par")] = True
    run_ok(at)
    ck = load_checkpoint(runs / "tiny-parity")
    want = measure_test(ck.model, TrainConfig.from_dict(ck.record.train), None, ITEMS)
    eq = want.baselines["at_equal_steps"]
    (fig,) = _worth(at)
    assert _learned(fig)["y"][0] == pytest.approx(eq["learned"])
    assert worth_sentence(eq) in texts(at)
    groups = _by_group(at)
    assert [t["name"] for t in groups["data"]] == ["easy", "hard"]
    assert list(groups["data"][1]["y"]) == pytest.approx(want.per_step_accuracy_by_group["hard"])


def test_parity_page_answers_against_its_competitor_with_both_frontiers(runs):
    from explorer.app.worth import ITEMS
    rival = runs / "tiny-parity-deep"                        # NAME-deep beside NAME: its shipped competitor
    save_tiny_run(rival, max_steps=5, seed=3)
    try:
        at = open_app(page="parity", model="runs/tiny-parity")
        at.session_state[open_key("par")] = True
        run_ok(at)
        ck, ck2 = load_checkpoint(runs / "tiny-parity"), load_checkpoint(rival)
        want = measure_test(ck.model, ck.record.config, None, ITEMS,
                            against=(ck2.model, ck2.record.config, ck2.name)).against
        (box,) = [e for e in at.expander if TITLE in e.label]
        said = [shown(m.value) for m in box.markdown]          # the section opens with the answer
        assert said[0] == f"**{want['verdict']['sentence']}**" and "tiny-parity-deep" in said[0]
        (fig,) = _worth(at)
        line = next(t for t in fig["data"] if t.get("name") == "tiny-parity-deep: confidence exit")
        rows = sorted(want["budgets"]["rows"], key=lambda r: r["budget"])
        assert list(line["y"]) == pytest.approx([r["chosen"]["policies"]["competitor.confidence_exit"]["accuracy"]
                                                 for r in rows])
        table = next(d.value for d in at.dataframe if "leads" in d.value.columns)
        assert "tiny-parity-deep: patience" in table.columns and len(table) == len(rows)
        assert "tiny-parity-deep: the signal that best tells" in texts(at)
    finally:
        import shutil
        shutil.rmtree(rival)


@pytest.mark.long
def test_rotation_page_per_step_accuracy_by_rotation(runs):
    at = open_app("pages/rotation.py", model="runs/tiny-mnist")
    at.session_state[open_key("rot")] = True
    at = _rotation_study(at, "0, 90", "45", 100)
    assert len(_worth(at)) == 1 and "At equal compute" in texts(at)
    groups = _by_group(at)
    assert [t["name"] for t in groups["data"]] == ["0°", "90°", "±45°"] and all(len(t["y"]) == 5 for t in groups["data"])
    assert "100 test images per rotation" in texts(at)
    shift = next(d.value for d in at.dataframe if "inputs" in d.value.columns)   # the policies on rotated digits
    assert list(shift["inputs"]) == ["rotation 22.5°", "rotation 45°"]
    assert all(": no difference" in v or " above" in v or " below" in v for v in shift["Q-exit − confidence"])


def test_compare_page_overlays_the_worth_it_chart_with_a_sentence_per_model(runs):
    at = open_app("pages/compare.py")
    at.multiselect(key="compare_models").set_value(["runs/tiny-mnist", "runs/tiny-parity"])
    run_ok(at)
    assert not _worth(at)
    at.session_state[open_key("compare")] = True
    run_ok(at)
    (fig,) = _worth(at)
    names = [t.get("name") for t in fig["data"]]
    assert "runs/tiny-mnist: sampled halting" in names and "runs/tiny-parity: sampled halting" in names
    said = texts(at)
    assert said.count("At equal compute") == 2 and "runs/tiny-parity" in said
