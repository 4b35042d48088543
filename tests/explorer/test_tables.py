"""explorer/tables.py: λp-sweep rows and tooltip text from run records, and where a running job is."""
import re

from explorer import tables
from ponder.analysis.metrics import TestMetrics
from ponder.store.record import RunRecord

M = TestMetrics.from_dict                 # a test mapping as TestMetrics


def R(card: dict) -> RunRecord:
    """A card as its record (a card here may leave out its train block)."""
    return RunRecord.from_card({"train": {}, **card})


def test_sweep_rows_and_card_description():
    card = {"name": "r", "status": "failed", "reason": "NaN", "model": {"reader": "cnn"},
            "train": {"task": "mnist", "lambda_p": 0.3, "max_steps": 20, "beta": 0.01, "hidden": 64, "regulariser": "kl"},
            "metrics": {}}
    row = tables.sweep_row("r", R(card))
    assert row["status"] == "failed" and row["reason"] == "NaN" and row["accuracy"] is None and row["lambda_p"] == 0.3
    text = tables.describe_run(R(card))
    assert "λp = 0.3" in text and "failed" in text and "NaN" in text
    assert "regulariser KL(p ‖ p_G)" in text and "reader cnn" in text
    assert "λ head reads h," in text                         # a card without lambda_input: the paper's head
    conf = tables.describe_run(R({**card, "train": {**card["train"], "lambda_input": "confidence"}}))
    assert "λ head reads h and the answer's confidence," in conf
    # a card that does not say is not given the defaults: '?' for the regulariser, no reader
    bare = tables.describe_run(R({**card, "model": {}, "train": {"beta": 0.01}}))
    assert "regulariser ?" in bare and "reader" not in bare
    assert "N = 20," in text and "ε" not in text
    # the paper's N: each batch ran until every input halted with probability >= 1 - ε, 20 the cap
    eps = tables.describe_run(R({**card, "train": {**card["train"], "halt_epsilon": 0.05}}))
    assert "N ≤ 20 where Σp ≥ 1 − ε, ε = 0.05," in eps


def test_card_description_gives_the_budget_in_seconds_and_the_rotation_only_where_the_task_has_one():
    parity = {"name": "p", "status": "completed",
              "train": {"task": "parity", "lambda_p": 0.2, "max_seconds": 20.0, "rotate_train": 0.0}}
    text = tables.describe_run(R(parity))
    assert "time budget = 20 s," in text and "rotation" not in text        # parity vectors are not rotated
    mnist = {**parity, "train": {**parity["train"], "task": "mnist", "max_seconds": None, "rotate_train": 22.5}}
    assert "time budget = none, train rotation ±22.5°," in tables.describe_run(R(mnist))


def test_regulariser_and_reader_names_and_new_metric_shape():
    card = {"name": "a", "status": "completed", "model": {"reader": "rows", "rows_per_step": 2},
            "train": {"task": "mnist", "lambda_p": 0.5, "max_steps": 20, "beta": 0.01, "regulariser": "kl-reverse"},
            "metrics": {"test": {"accuracy": 0.99, "mean_steps": 10.0, "n": 10,
                                 "expected_steps": {"mean": 10.5, "std": 1.8, "min": 5.0, "max": 19.0}}}}
    text = tables.describe_run(R(card))
    assert "KL(p_G ‖ p)" in text and "reader rows (2 a step)" in text and "mean E[n] 10.50" in text
    assert tables.sweep_row("a", R(card))["expected_steps"] == 10.5
    assert tables.task_settings(R({"model": {}, "train": {"task": "parity", "parity_preset": "small"}})) == "parity preset small"
    assert tables.task_settings(R({"train": {"task": "unknown"}})) == ""


def test_training_eta_uses_the_training_clock_and_the_budget():
    # 100 of 1,000 steps in 10 s of training, reported 2 s ago: 900 steps × 0.1 s = 90 s, less 2 s
    row = dict(step=100, total_steps=1000, elapsed=10.0, wall=50.0, max_seconds=None)
    assert tables.training_eta(row, now=52.0) == ("step 100 of 1,000", 88.0)
    # a 15 s budget ends it first: 15 − 10 = 5 s left at the report, 3 s now; about 150 steps in all
    text, left = tables.training_eta(dict(row, max_seconds=15.0, forecast_steps=150), now=52.0)
    assert text == "step 100 of about 150 (15 s budget)" and left == 3.0
    # a budget longer than the epochs need changes nothing (the forecast is the plan's 1,000 steps)
    assert tables.training_eta(dict(row, max_seconds=600.0, forecast_steps=1000), now=52.0) == ("step 100 of 1,000", 88.0)
    # before the first timed step there is no estimate; past the end it is 0, never negative
    assert tables.training_eta(dict(row, step=0, elapsed=0.0), now=52.0)[1] is None
    assert tables.training_eta(dict(row, max_seconds=15.0, forecast_steps=150), now=60.0)[1] == 0.0


def test_training_eta_shows_the_librarys_forecast_and_never_a_count_below_the_step():
    row = dict(step=84, total_steps=1290, elapsed=14.0, wall=50.0, max_seconds=15.0)
    # a forecast below the step it is at (steps so far / seconds so far, past the budget) shows the step
    assert tables.training_eta(dict(row, elapsed=17.7, forecast_steps=80), now=50.0)[0] == "step 84 of about 84 (15 s budget)"
    assert tables.training_eta(dict(row, forecast_steps=90), now=51.0) == ("step 84 of about 90 (15 s budget)", 0.0)
    # a forecast at the plan: the epochs end it, time left from the steps per second so far
    text, left = tables.training_eta(dict(row, forecast_steps=1290, max_seconds=600.0), now=50.0)
    assert text == "step 84 of 1,290" and abs(left - 1206 * 14.0 / 84) < 1e-9


def test_training_eta_of_a_budgeted_run_never_promises_more_than_its_budget():
    # a 60 s run at step 10 after 1.7 s (slow first steps), no forecast yet: the epochs' 1,280 steps left at
    # 0.17 s a step would be 218 s, but the budget ends it in 60 − 1.7 = 58.3 s, so "at most" the plan's steps
    row = dict(step=10, total_steps=1290, elapsed=1.7, wall=50.0, max_seconds=60.0, forecast_steps=1290)
    text, left = tables.training_eta(row, now=50.0)
    assert text == "step 10 of at most 1,290 (60 s budget)" and abs(left - 58.3) < 1e-9
    # the same without a budget: the epochs' estimate, 1,280 × 0.17 s
    assert abs(tables.training_eta(dict(row, max_seconds=None), now=50.0)[1] - 217.6) < 1e-9


def test_training_eta_counts_down_from_what_it_showed_before():
    # 20 s shown 1 s ago; the run slowed, so the pace gives 36 s (400 × 9 / 100): 19 s, counting down, not 36 s
    row = dict(step=100, total_steps=500, elapsed=9.0, wall=50.0, max_seconds=None)
    assert tables.training_eta(row, now=50.0)[1] == 36.0
    assert tables.training_eta(row, now=50.0, shown=(20.0, 49.0))[1] == 19.0
    # a faster pace than shown before is shown as it is; past the shown time it is 0, never negative
    assert tables.training_eta(row, now=50.0, shown=(60.0, 49.0))[1] == 36.0
    assert tables.training_eta(row, now=50.0, shown=(0.5, 40.0))[1] == 0.0


def test_a_sweep_row_from_a_job_without_a_card_yet():
    row = tables.sweep_row("sweep-lp0.3", None, status="running 40%", lambda_p=0.3)
    assert (row["lambda_p"], row["status"], row["accuracy"], row["halting"]) == (0.3, "running 40%", None, None)
    card = {"train": {"lambda_p": 0.2}, "status": "completed", "metrics": {"test": {"accuracy": 0.99, "mean_steps": 4.7,
                                                                           "halting_distribution": [0.6, 0.4]}}}
    row = tables.sweep_row("r", R(card))
    assert (row["accuracy"], row["mean_steps"], row["halting"]) == (0.99, 4.7, [0.6, 0.4])


INJECTION = ("[win a prize](http://evil.example/x) ![tracker](https://evil.example/pixel.png) <img src=x> "
             ":red[alarm] $\\frac{1}{0}$ **bold** www.evil.example `code`")


def test_card_text_renders_as_plain_text():
    card = {"name": "imported [x](http://evil.example)", "status": "cancelled", "reason": INJECTION,
            "device": "![d](http://evil.example/d.png)",
            "train": {"task": "mnist", "lambda_p": 0.3, "max_steps": 20, "beta": 0.01}, "metrics": {}}
    text = tables.describe_run(R(card))
    for raw in ("](", "![", "<img", ":red[", "$\\frac", "**bold**", "http://", "https://", "www.evil", "`code`"):
        assert not re.search(r"(?<!\\)" + re.escape(raw), text), raw          # only escaped, if at all
    assert "λp = 0.3" in text and "status **cancelled**" in text          # the tooltip's own markdown stays


def test_plain_text_reads_back_as_the_original():
    from helpers import shown
    for s in (INJECTION, "a\\b", "C:\\runs\\x_y", "λp 0.3 · E[n] 2", "line one\nline two"):
        out = tables.plain(s)
        assert shown(out) == " ".join(s.split()) and "\n" not in out


def test_renamed_says_what_a_name_became_and_why():
    assert tables.renamed("mnist-lp0.2", "mnist-lp0.2") == ""
    assert tables.renamed("same name", "same-name") == \
        "The name same name became same-name (a name keeps only letters, digits, '.', '_' and '-', at most 64 characters)."
    assert tables.renamed("same-name", "same-name-2") == "The name same-name became same-name-2 (same-name was taken)."
    both = tables.renamed("my run!", "my-run-3")                 # made safe, then taken twice
    assert both.startswith("The name my run! became my-run-3 (a name keeps only") and both.endswith("; my-run was taken).")


def test_compare_rows_leave_missing_values_missing_and_drop_an_empty_sweep_column():
    from pathlib import Path
    from ponder.store.runs import ModelEntry
    card = {"status": "completed", "device": "cpu",
            "train": {"task": "mnist", "lambda_p": 0.2, "max_steps": 20, "regulariser": "kl"}}
    a, b = ModelEntry("a", Path("a"), "run", R(card)), ModelEntry("b", Path("b"), "run", R({**card, "train_seconds": 7.5}))
    rows = tables.compare_rows([a, b], {"a": M({"accuracy": 0.5, "mean_steps": 2.0, "n": 8}), "b": M({})})
    assert "sweep" not in rows[0] and rows[0]["accuracy"] == 0.5 and rows[0]["train s"] is None
    assert rows[1]["accuracy"] is None and rows[1]["train s"] == 7.5 and rows[1]["device"] == "cpu"
    rows = tables.compare_rows([a, ModelEntry("s/t", Path("t"), "run", R(card), sweep="s")], {})
    assert [r["sweep"] for r in rows] == [None, "s"]      # shown as "—" (the page's placeholder), not "None"
    assert rows[0]["regulariser"] == "KL(p ‖ p_G)" and rows[0]["E[n]"] is None and rows[0]["E[n] hard − easy"] is None
    assert rows[0]["ε"] is None                          # no halt_epsilon: every batch ran all N steps
    assert rows[0]["λ head reads"] == "h"                  # no lambda_input: the paper's λ head, on h alone
    (conf,) = tables.compare_rows([ModelEntry("c", Path("c"), "run", R({**card, "train": {**card["train"],
                                                                                         "lambda_input": "confidence"}}))], {})
    assert conf["λ head reads"] == "h and the answer's confidence"
    (row,) = tables.compare_rows([ModelEntry("e", Path("e"), "run", R({**card, "train": {**card["train"],
                                                                                        "halt_epsilon": 0.05}}))], {})
    assert row["N"] == 20 and row["ε"] == 0.05
    # the design (what each step sees) is its own column: the main reason two MNIST models differ
    rows = tables.compare_rows([ModelEntry("r", Path("r"), "run", R({**card, "model": {"reader": "rows",
                                                                                  "rows_per_step": 2}})), a], {})
    assert [r["design"] for r in rows] == ["reader rows (2 a step)", None]


def test_compare_rows_name_the_regulariser_and_the_parity_gap():
    from pathlib import Path
    from ponder.store.runs import ModelEntry
    card = {"train": {"task": "parity", "lambda_p": 0.1, "max_steps": 20, "regulariser": "kl-reverse"}}
    m = M({"accuracy": 0.99, "expected_steps": {"mean": 8.6}, "easy": {"expected_steps": 8.25},
           "hard": {"expected_steps": 9.0}})
    (row,) = tables.compare_rows([ModelEntry("p", Path("p"), "run", R(card))], {"p": m})
    assert row["regulariser"] == "KL(p_G ‖ p)" and row["E[n]"] == 8.6 and row["E[n] hard − easy"] == 0.75   # 9.0 - 8.25


def test_the_parity_card_line_gives_the_cards_accuracy_and_expected_steps():
    card = {"metrics": {"test": {"n": 10000, "accuracy": 0.99871, "expected_steps": {"mean": 8.6},
                                 "easy": {"k_range": [1, 4], "expected_steps": 8.2168},
                                 "hard": {"k_range": [11, 15], "expected_steps": 9.0663}}}}
    line = tables.parity_card_line(R(card))
    # 9.0663 - 8.2168 = 0.8495 -> "+0.85"
    assert "10,000 problems" in line and "accuracy 99.87\u00a0%" in line and "hard − easy +0.85" in line
    assert tables.signed(-4.389) == "\u22124.39" and tables.signed(0.85) == "+0.85"     # a minus like the label's
    assert "8.22 on easy k 1–4, 9.07 on hard k 11–15" in line
    assert tables.parity_card_line(R({"metrics": {"test": {"accuracy": 0.5}}})) == "" == tables.parity_card_line(RunRecord(train={}))


def test_compare_rows_put_the_test_numbers_next_to_the_model_and_say_when_test_sets_differ():
    from pathlib import Path
    from ponder.store.runs import ModelEntry
    card = {"status": "completed", "train": {"task": "mnist", "lambda_p": 0.2, "max_steps": 20}}
    a, b = ModelEntry("mnist-adaptive", Path("a"), "shipped", R(card)), ModelEntry("runs/mine", Path("b"), "run", R(card))
    rows = tables.compare_rows([a, b], {"mnist-adaptive": M({"accuracy": 0.99, "n": 10000}),
                                    "runs/mine": M({"accuracy": 0.98, "n": 2000})})
    assert list(rows[0])[:4] == ["model", "accuracy", "mean steps", "E[n]"]
    # 2 × √(0.99 × 0.01 / 2000) = 0.00445: ±0.44 points
    assert tables.test_sizes_note(rows) == (
        "The test numbers come from test sets of different sizes (mnist-adaptive on 10,000; runs/mine on 2,000 items): "
        "an accuracy near 99 % measured on 2,000 items is uncertain by about ±0.44 points (two standard errors), so a "
        "smaller difference between them may be noise.")
    assert tables.test_sizes_note([rows[0], {**rows[1], "test n": 10000}]) == ""
    assert tables.test_sizes_note([rows[0], {**rows[1], "accuracy": None}]) == ""       # not measured: no size to compare


def test_every_lambda_input_has_words_and_a_sidebar_label():
    from explorer.app.forms import LAMBDA_INPUT_LABELS
    from ponder.halting import LAMBDA_INPUTS
    assert set(LAMBDA_INPUT_LABELS) == set(LAMBDA_INPUTS)
    names = {k: tables.lambda_input_name({"lambda_input": k}) for k in LAMBDA_INPUTS}
    assert names["hidden"] == "h" and len(set(names.values())) == len(LAMBDA_INPUTS)
    assert tables.lambda_input_name({}) == "h"


def test_a_run_says_how_it_halts_and_an_old_card_is_ponder_nets():
    assert tables.method_name({"method": "act"}) == "ACT" and tables.method_name({}) == "PonderNet"
    assert tables.method_name({"method": "deep"}) == "deep supervision" and tables.method_name({"method": 3}) == "?"
    rec = RunRecord.from_card({"name": "r", "status": "completed", "train": {"task": "parity", "method": "repeat",
                                                                            "max_steps": 2, "lambda_p": 0.2},
                               "model": {}, "metrics": {}})
    assert "halting: Repeat-RNN" in tables.describe_run(rec)
