"""explorer/compute.py and explorer/data.py: traces, the rotation study and its verdict, parity helpers."""
import numpy as np
import pytest
import torch

from conftest import tiny_model
from explorer import compute
from explorer.data import DigitPool, digit_pool, example_digits


def test_trace_matches_the_core_and_replays_with_its_seed():
    model = tiny_model("mnist", max_steps=8)
    x = torch.randn(1, 1, 28, 28)
    tr = compute.trace_input(model, x, "sample", seed=11)
    assert tr.probs.shape == (8, 10) and np.allclose(tr.probs.sum(1), 1, atol=1e-5)
    assert abs(tr.p.sum() - 1) < 1e-5 and abs(tr.cdf[-1] - 1) < 1e-5 and tr.lambdas[-1] == 1.0
    assert abs(tr.expected_steps - (np.arange(1, 9) * tr.p).sum()) < 1e-4
    assert np.allclose(tr.answer_probs, tr.probs[tr.halt_step - 1], atol=1e-5)      # answer = the halting step's
    again = compute.trace_input(model, x, "sample", seed=11)
    assert (again.halt_step, again.pred) == (tr.halt_step, tr.pred)
    draws = {compute.trace_input(model, x, "sample", seed=s).halt_step for s in range(30)}
    assert len(draws) > 1                                                            # the seed matters
    det = compute.trace_input(model, x, "deterministic")
    assert det.halt_step == int(np.argmax(det.cdf >= 0.5) + 1)
    exp = compute.trace_input(model, x, "expected")
    assert exp.halt_step == 8 and np.allclose(exp.answer_probs, (exp.p[:, None] * exp.probs).sum(0), atol=1e-5)


def test_trace_of_a_parity_input():
    model = tiny_model("parity", max_steps=5, n_elems=8)
    x = compute.parity_vector(8, 3, seed=0)
    assert x.shape == (1, 8) and int((x != 0).sum()) == 3
    tr = compute.trace_input(model, x, "deterministic")
    assert tr.probs.shape == (5, 2)


def test_parse_helpers():
    assert compute.parse_numbers("0, 15 30;45", 0, 180, "angles") == [0, 15, 30, 45]
    with pytest.raises(ValueError, match="angles: 'x'"):
        compute.parse_numbers("0, x", 0, 180, "angles")
    with pytest.raises(ValueError, match="outside"):
        compute.parse_numbers("200", 0, 180, "angles")
    with pytest.raises(ValueError, match="at least one"):
        compute.parse_numbers(" , ", 0, 180, "angles")
    assert compute.parse_vector("1 -1 0 +1", 4).tolist() == [[1, -1, 0, 1]]
    assert compute.parse_vector("+-0+", 4).tolist() == [[1, -1, 0, 1]]
    with pytest.raises(ValueError, match="takes 4 values, got 3"):
        compute.parse_vector("1 0 1", 4)
    with pytest.raises(ValueError, match="not one of"):
        compute.parse_vector("1 2 0 0", 4)


def test_parity_sets_by_difficulty():
    assert compute.parity_sets(16, (1, 16)) == {"easy (k 1–8)": (1, 8), "hard (k 9–16)": (9, 16)}
    sets = compute.parity_sets(16, (1, 8))
    assert list(sets.values()) == [(1, 4), (5, 8), (9, 16)] and "extrapolation" in list(sets)[2]
    model = tiny_model("parity", max_steps=4, n_elems=8)
    res = compute.parity_set_stats(model, 8, compute.parity_sets(8, (1, 6)), size=200)
    assert len(res["sets"]) == 3 and [r["k"] for r in res["by_k"]] == list(range(1, 9))
    for s in res["sets"].values():
        assert abs(sum(s["halting"]) - 1) < 1e-4 and 1 <= s["mean_steps"] <= 4


def test_rotation_study_rows():
    model = tiny_model("mnist", max_steps=5)
    pool = example_digits()
    seen = []
    rows = compute.rotation_study(model, torch.as_tensor(pool.x), torch.as_tensor(pool.y), [0, 90], [45],
                                  progress=lambda f, what: seen.append(f))
    assert [(r["kind"], r["angle"]) for r in rows] == [("fixed", 0), ("fixed", 90), ("uniform", 45)]
    assert seen[-1] == 1.0
    for r in rows:
        assert r["n"] == 20 and len(r["steps"]) == len(r["confidence"]) == len(r["correct"]) == 20
        assert r["lo"] <= r["q1"] <= r["median_steps"] <= r["q3"] <= r["hi"]
        assert abs(np.mean(r["steps"]) - r["mean_steps"]) < 1e-9
        assert abs(sum(r["halting"]) - 1) < 1e-4


def _row(angle, acc, steps, kind="fixed", n=100, wrong_steps=None):
    s = np.full(n, float(steps))
    correct = np.arange(n) < round(acc * n)
    if wrong_steps is not None:
        s[~correct] = wrong_steps
    return dict(kind=kind, angle=angle, n=n, accuracy=float(correct.mean()), mean_steps=float(s.mean()),
                steps=s.tolist(), correct=correct.tolist())


def test_verdict_says_longer_when_steps_grow_with_difficulty():
    rows = [_row(0, 0.99, 3), _row(45, 0.8, 4), _row(90, 0.3, 6, wrong_steps=7)]
    answer, text = compute.ponder_verdict(rows)
    assert answer == "longer" and text.startswith("Yes")
    assert "99.0%" in text and "30.0%" in text and "r = +" in text


def test_verdict_says_no_when_steps_stay_flat():
    rows = [_row(0, 0.99, 4.66), _row(45, 0.55, 4.75), _row(90, 0.2, 4.70)]
    answer, text = compute.ponder_verdict(rows)
    assert answer == "no" and text.startswith("No:") and "4.66" in text and "4.70" in text


def test_verdict_says_shorter_and_unclear():
    assert compute.ponder_verdict([_row(0, 0.99, 6), _row(45, 0.6, 4), _row(90, 0.2, 3)])[0] == "shorter"
    assert compute.ponder_verdict([_row(0, 0.99, 3), _row(10, 0.98, 6)])[0] == "unclear"
    assert compute.ponder_verdict([])[0] == "unclear"


def test_sweep_rows_and_card_description():
    card = {"name": "r", "task": "mnist", "lambda_p": 0.3, "max_steps": 20, "status": "failed", "reason": "NaN",
            "train": {"beta": 0.01, "hidden": 64}, "metrics": {}}
    row = compute.sweep_row("r", card)
    assert row["status"] == "failed" and row["reason"] == "NaN" and row["accuracy"] is None and row["lambda_p"] == 0.3
    text = compute.describe_card(card)
    assert "λp = 0.3" in text and "failed" in text and "NaN" in text


def test_digit_pools():
    ex = example_digits()
    assert len(ex) == 20 and ex.x.shape == (20, 28, 28) and ex.x.dtype == np.uint8
    assert sorted(set(ex.y.tolist())) == list(range(10))
    assert digit_pool(None).source == "bundled examples"
    rng = np.random.default_rng(0)
    assert all(ex.y[ex.choose(7, rng)] == 7 for _ in range(10))
    assert isinstance(DigitPool(ex.x, ex.y, ex.index, "x").choose(None, rng), int)


def test_example_digits_are_the_mnist_test_images(mnist):
    ex = example_digits()
    assert torch.equal(mnist.test_x[torch.as_tensor(ex.index)], torch.as_tensor(ex.x))
    assert torch.equal(mnist.test_y[torch.as_tensor(ex.index)], torch.as_tensor(ex.y))


def test_training_eta_uses_the_training_clock_and_the_budget():
    # 100 of 1,000 steps in 10 s of training, reported 2 s ago: 900 steps × 0.1 s = 90 s, less 2 s
    row = dict(step=100, total_steps=1000, elapsed=10.0, wall=50.0, max_seconds=None)
    assert compute.training_eta(row, now=52.0) == ("step 100 of 1,000", 88.0)
    # a 15 s budget ends it first: 15 − 10 = 5 s left at the report, 3 s now; about 150 steps in all
    text, left = compute.training_eta(dict(row, max_seconds=15.0), now=52.0)
    assert text == "step 100 of about 150 (15 s budget)" and left == 3.0
    # a budget longer than the epochs need changes nothing
    assert compute.training_eta(dict(row, max_seconds=600.0), now=52.0) == ("step 100 of 1,000", 88.0)
    # before the first timed step there is no estimate; past the end it is 0, never negative
    assert compute.training_eta(dict(row, step=0, elapsed=0.0), now=52.0)[1] is None
    assert compute.training_eta(dict(row, max_seconds=15.0), now=60.0)[1] == 0.0
