"""ponder/analysis/studies.py: one input's trace, what each step sees, the least / most pondered inputs, the
rotation study and its verdict, parity by difficulty, the prior's mean."""
import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from helpers import tiny_model
from ponder.analysis import studies
from ponder.analysis.unroll import measure_test
from ponder.config import TrainConfig
from ponder.store.record import RunRecord
from ponder.tasks.mnist.task import mnist_split
from ponder.tasks.parity.task import PARITY_PRESETS


def test_trace_matches_the_core_and_replays_with_its_seed():
    model = tiny_model("mnist", max_steps=8)
    x = torch.randn(1, 1, 28, 28)
    tr = studies.trace_input(model, x, "sample", seed=11)
    assert tr.probs.shape == (8, 10) and np.allclose(tr.probs.sum(1), 1, atol=1e-5)
    assert abs(tr.p.sum() - 1) < 1e-5 and abs(tr.cdf[-1] - 1) < 1e-5 and tr.lambdas[-1] == 1.0
    assert abs(tr.expected_steps - (np.arange(1, 9) * tr.p).sum()) < 1e-4
    assert np.allclose(tr.answer_probs, tr.probs[tr.halt_step - 1], atol=1e-5)      # answer = the halting step's
    again = studies.trace_input(model, x, "sample", seed=11)
    assert (again.halt_step, again.pred) == (tr.halt_step, tr.pred)
    draws = {studies.trace_input(model, x, "sample", seed=s).halt_step for s in range(30)}
    assert len(draws) > 1                                                            # the seed matters
    det = studies.trace_input(model, x, "deterministic")
    assert det.halt_step == int(np.argmax(det.cdf >= 0.5) + 1)
    exp = studies.trace_input(model, x, "expected")
    assert exp.halt_step == 8 and np.allclose(exp.answer_probs, (exp.p[:, None] * exp.probs).sum(0), atol=1e-5)


def test_trace_of_a_parity_input():
    model = tiny_model("parity", max_steps=5, n_elems=8)
    x = torch.tensor([[1.0, -1, 0, 0, 1, 0, 0, 0]])
    tr = studies.trace_input(model, x, "deterministic")
    assert tr.probs.shape == (5, 2)


def _preset(n, train_k, test_k=None, **ranges):
    return dict(n_elems=n, train_k=train_k, test_k=test_k or (1, n), **ranges)


def test_parity_sets_by_difficulty():
    # no ranges of its own: the halves of the test range (1..16 -> 1..8, 9..16)
    assert studies.parity_sets(_preset(16, (1, 16))) == {"easy (k 1–8)": (1, 8), "hard (k 9–16)": (9, 16)}
    # trained on 1..8, tested on 9..16 (medium-extrapolation): the trained range, then the halves of the test range
    sets = studies.parity_sets(PARITY_PRESETS["medium-extrapolation"])
    assert sets == {"trained (k 1–8)": (1, 8), "easy (k 9–12)": (9, 12), "hard (k 13–16)": (13, 16)}
    # trained and tested on 1..6 of 8: the extrapolation above both
    sets = studies.parity_sets(_preset(8, (1, 6), (1, 6)))
    assert list(sets.values()) == [(1, 3), (4, 6), (7, 8)] and "extrapolation" in list(sets)[2]
    # a preset's own ranges: the video seed's n = 15 (easy 1–4, hard 11–15) and its extrapolation
    assert studies.parity_sets(PARITY_PRESETS["video-15"]) == {"easy (k 1–4)": (1, 4), "hard (k 11–15)": (11, 15)}
    assert studies.parity_sets(PARITY_PRESETS["video-30-extrapolation"]) == {"easy (k 1–25)": (1, 25),
                                                                             "hard (k 26–30)": (26, 30)}
    model = tiny_model("parity", max_steps=4, n_elems=8)
    res = studies.parity_study(model, 8, studies.parity_sets(_preset(8, (1, 6), (1, 6))), size=200)
    assert len(res["sets"]) == 3 and [r["k"] for r in res["by_k"]] == list(range(1, 9))
    for s in res["sets"].values():
        assert abs(sum(s["halting_distribution"]) - 1) < 1e-4 and 1 <= s["mean_steps"] <= 4 and s["count"] == 200


def test_rotation_study_rows(mnist):
    model = tiny_model("mnist", max_steps=5)
    x, y = mnist_split(mnist, "test", 60)
    rows = studies.rotation_study(model, x, y, [0, 90], [45], per_sample=True)
    assert [(r["kind"], r["angle"]) for r in rows] == [("fixed", 0), ("fixed", 90), ("uniform", 45)]
    for r in rows:
        assert r["n"] == 60 and len(r["steps"]) == len(r["confidence"]) == len(r["correct"]) == 60
        assert r["lo"] <= r["q1"] <= r["median_steps"] <= r["q3"] <= r["hi"]
        assert r["mean_steps"] == pytest.approx(np.mean(r["steps"]), abs=1e-5)
        assert r["accuracy"] == pytest.approx(np.mean(r["correct"]), abs=1e-6)
        assert abs(sum(r["halting_distribution"]) - 1) < 1e-4
    # the 0° row is the unrotated evaluation: the same numbers as the test measurement on those images
    plain = measure_test(model, TrainConfig(), mnist, 60)
    assert rows[0]["accuracy"] == plain.accuracy and rows[0]["mean_steps"] == pytest.approx(plain.mean_steps)
    # without per_sample: the same summary, no per-sample lists
    lean = studies.rotation_study(model, x, y, [0, 90], [45])
    assert [{k: r[k] for k in lr} for r, lr in zip(rows, lean)] == lean and "steps" not in lean[0]


def _row(angle, acc, steps, kind="fixed", n=100, wrong_steps=None):
    s = np.full(n, float(steps))
    correct = np.arange(n) < round(acc * n)
    if wrong_steps is not None:
        s[~correct] = wrong_steps
    return dict(kind=kind, angle=angle, n=n, accuracy=float(correct.mean()), mean_steps=float(s.mean()),
                steps=s.tolist(), correct=correct.tolist())


def test_verdict_says_longer_when_steps_grow_with_difficulty():
    rows = [_row(0, 0.99, 3), _row(45, 0.8, 4), _row(90, 0.3, 6, wrong_steps=7)]
    answer, text = studies.rotation_verdict(rows)
    assert answer == "longer" and text.startswith("Yes")
    assert "99.0%" in text and "30.0%" in text and "r = +" in text
    assert "over only 3 test sets, so it says little" in text                  # few sets: flagged
    five = rows + [_row(22.5, 0.95, 3.5), _row(67.5, 0.5, 5)]
    assert "says little" not in studies.rotation_verdict(five)[1]


def test_verdict_says_no_when_steps_stay_flat():
    rows = [_row(0, 0.99, 4.66), _row(45, 0.55, 4.75), _row(90, 0.2, 4.70)]
    answer, text = studies.rotation_verdict(rows)
    assert answer == "no" and text.startswith("No:") and "4.66" in text and "4.70" in text


def test_verdict_names_what_a_step_is_and_the_rows_confound():
    # "halts later on the more rotated inputs" said nothing of the row reader, whose steps reveal rows: rotation
    # also moves the ink to other rows
    from ponder.tasks import step_meaning
    rows = [_row(0, 0.99, 3), _row(45, 0.8, 4), _row(90, 0.3, 6, wrong_steps=7)]
    card = {"train": {"task": "mnist"}, "model": {"reader": "rows", "rows_per_step": 2}}
    answer, text = studies.rotation_verdict(rows, step_meaning(RunRecord.from_card(card)))
    head = text.split(" Accuracy goes from")[0]
    assert answer == "longer" and "each step reveals 2 more rows" in head and "moves its ink to other rows" in head
    bare = RunRecord.from_card({"train": {}, "model": {}})
    assert "every step sees the whole image" in studies.rotation_verdict(rows, step_meaning(bare))[1]


def test_the_step_a_row_reader_has_seen_all_of_a_digit_moves_with_its_rotation():
    # the rows confound, measured: a bar of ink on rows 3-4 is all in view by step 2 (2 rows a step); turned 90° it
    # is a column reaching row 28, in view only at step 14. A whole-image model has no such step.
    from ponder.data import mnist_inputs
    model = tiny_model("mnist", max_steps=20, reader="rows", rows_per_step=2)
    img = torch.zeros(1, 28, 28, dtype=torch.uint8)
    img[0, 2:4, :] = 255                                                      # rows 3-4 of 28
    assert studies.all_seen_step(model, mnist_inputs(img)).tolist() == [2]
    assert studies.all_seen_step(model, mnist_inputs(img, angle=90.0)).tolist() == [14]
    assert studies.all_seen_step(tiny_model("mnist", max_steps=5), mnist_inputs(img)) is None
    rows = studies.rotation_study(model, img.repeat(4, 1, 1), torch.zeros(4, dtype=torch.long), angles=[0, 90])
    assert [r["all_seen_step"] for r in rows] == [2.0, 14.0]
    text = studies.rotation_verdict([dict(r, accuracy=a) for r, a in zip(rows, (1.0, 0.5))])[1]
    assert "in view by step 2.00 on average at 0° and 14.00 at 90°" in text and "does not separate" in text


def test_verdict_says_shorter_and_unclear():
    assert studies.rotation_verdict([_row(0, 0.99, 6), _row(45, 0.6, 4), _row(90, 0.2, 3)])[0] == "shorter"
    assert studies.rotation_verdict([_row(0, 0.99, 3), _row(10, 0.98, 6)])[0] == "unclear"
    assert studies.rotation_verdict([])[0] == "unclear"


def test_verdict_on_two_fixed_angles():
    # what reproduce's rotation section says from its fixed-angle rows (no per-sample lists, two sets)
    rows = [dict(kind="fixed", angle=0.0, n=10000, mean_steps=4.66, std_steps=4.03, accuracy=0.9938),
            dict(kind="fixed", angle=90.0, n=10000, mean_steps=4.70, std_steps=4.03, accuracy=0.2079)]
    # (4.70 - 4.66) / 4.66 = +0.9%, under 10%, while accuracy falls 78.6 points: flat
    answer, text = studies.rotation_verdict(rows)
    assert answer == "no" and "99.4% (0°) down to 20.8% (90°)" in text and "4.66 at 0° and 4.70 at 90°" in text
    grow = [rows[0], dict(rows[1], mean_steps=6.0)]                          # +29%: longer
    assert studies.rotation_verdict(grow)[0] == "longer"
    assert studies.rotation_verdict([rows[0], dict(rows[1], mean_steps=3.0)])[0] == "shorter"    # -36%


def test_prior_mean_by_hand():
    # lambda_p = 0.5, N = 3: prior (4/7, 2/7, 1/7), mean 1*4/7 + 2*2/7 + 3/7 = 11/7
    assert studies.prior_mean(0.5, 3) == pytest.approx(11 / 7, abs=1e-6)
    assert studies.prior_mean(0.5, 200) == pytest.approx(2.0, abs=1e-6)          # 1/lambda_p for large N
    assert studies.prior_mean(0.2, 20) == pytest.approx(4.77, abs=0.005)        # docs/results.md's sweep table
    assert studies.prior_mean(1.0, 20) == pytest.approx(1.0, abs=1e-5)


def test_box_stats_by_hand():
    # 1..8 and an outlier 40: 9 values, so q1 and q3 are the 3rd and 7th (3 and 7), IQR 4; whiskers reach the
    # data inside [3 - 6, 7 + 6] = [-3, 13]: 1 and 8 (40 is an outlier)
    b = studies.box_stats(np.array([1, 2, 3, 4, 5, 6, 7, 8, 40], float))
    assert b == {"q1": 3.0, "q3": 7.0, "lo": 1.0, "hi": 8.0}


def test_seen_at_steps_follows_the_reader():
    x = torch.randn(1, 1, 28, 28)
    assert studies.seen_at_steps(tiny_model("mnist", max_steps=4), x) is None       # "cnn": the whole image every step
    views = studies.seen_at_steps(tiny_model("mnist", max_steps=16, reader="rows", rows_per_step=2), x)
    assert views.shape == (16, 1, 28, 28)
    rows_shown = [(v[0] != x.min()).any(1).nonzero().max().item() + 1 if (v[0] != x.min()).any() else 0 for v in views]
    assert rows_shown[0] <= 2 and rows_shown == sorted(rows_shown)        # more rows each step
    assert torch.equal(views[-1], x[0])                                    # all 28 rows by step 14


def test_pondering_gallery_is_sorted_by_expected_steps():
    model = tiny_model("mnist", max_steps=8, lambda_std=3.0)
    x, y = torch.randn(50, 1, 28, 28), torch.randint(0, 10, (50,))
    g = studies.pondering_gallery(model, x, y, k=5)
    least, most = [r["expected_steps"] for r in g["least"]], [r["expected_steps"] for r in g["most"]]
    assert least == sorted(least) and most == sorted(most, reverse=True) and least[-1] <= most[-1]
    with torch.no_grad():
        en = studies.expected_steps(model(x).log_p)
    assert least[0] == pytest.approx(en.min().item(), abs=1e-5) and most[0] == pytest.approx(en.max().item(), abs=1e-5)
    assert all(r["label"] == int(y[r["index"]]) and 0 <= r["pred"] < 10 for r in g["least"] + g["most"])


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2 ** 16), st.sampled_from(["sample", "deterministic", "expected"]))
def test_trace_rows_are_the_trace_step_by_step(seed, mode):
    # what the digit and parity pages offer as CSV / JSON: one row per step, the charts' numbers
    model = tiny_model("mnist", max_steps=6, lambda_std=3.0)
    tr = studies.trace_input(model, torch.randn(1, 1, 28, 28, generator=torch.Generator().manual_seed(seed)), mode, seed)
    rows = studies.trace_rows(tr, [str(c) for c in range(10)])
    assert [r["step"] for r in rows] == list(range(1, 7))
    assert sum(r["p_n"] for r in rows) == pytest.approx(1, abs=1e-5) and rows[-1]["halted_by_n"] == pytest.approx(1, abs=1e-5)
    assert sum(r["prior_p_n"] for r in rows) == pytest.approx(1, abs=1e-5) and rows[-1]["lambda_n"] == 1.0
    assert [r["step"] for r in rows if r["halted_here"]] == [tr.halt_step]
    for r in rows:
        probs = [r[f"p({c})"] for c in range(10)]
        assert sum(probs) == pytest.approx(1, abs=1e-5) and r["answer_probability"] == max(probs)
        assert r["answer"] == str(probs.index(max(probs)))
    json.dumps(rows)                                                   # JSON-ready


def test_a_parity_study_draws_its_vectors_in_the_runs_layout():
    from ponder.analysis.studies import parity_study
    from ponder.tasks.parity.data import parity_eval_set
    model = tiny_model("parity", max_steps=3, n_elems=16)
    prefix = parity_study(model, 16, {"all": (1, 16)}, size=300, layout="prefix")
    x, y, _ = parity_eval_set(16, 1, 16, 300, layout="prefix")
    from ponder.analysis.unroll import unroll_stats
    assert prefix["sets"]["all"]["accuracy"] == pytest.approx(unroll_stats(model, x, y)["correct"].float().mean().item())
