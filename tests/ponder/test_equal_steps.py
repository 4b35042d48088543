"""ponder/analysis/equal_steps.py: operating points tuned on validation, scored on test, with paired intervals."""
import pytest
import torch

from ponder.analysis.equal_steps import PAIRS, at_equal_steps, comparison, frontiers, shift_rows, tune

# The toy of tests/ponder/test_policies.py (worked by hand there): matched on itself, Q-exit mixes q = 0.5 and
# 0.7 with w = 0.625 (accuracy 0.458333 at 2.083333 steps); fixed depth mixes steps 2 and 3 with w = 0.083333
# (1/3 + 0.083333/3 = 0.361111); the confidence exit τ = 0.8 and 0.95 with w = 0.125 (0.375, test_baselines).
TOY = {"per_step_correct": torch.tensor([[0, 1, 0], [1, 0, 0], [1, 1, 0]]).bool(),
       "per_step_confidence": torch.tensor([[0.5, 0.6, 0.6], [0.8, 0.8, 0.95], [0.99, 0.7, 0.7]], dtype=torch.float64),
       "p": torch.tensor([[0.2, 0.5, 0.1], [0.5, 0.25, 0.4], [0.3, 0.25, 0.5]], dtype=torch.float64)}


def test_the_toy_tuned_on_itself():
    at = at_equal_steps(TOY, TOY, resamples=50)
    assert at["tuned_on"] == {"set": "validation", "n": 3}
    assert at["target_steps"] == pytest.approx(2.083333, abs=1e-6)
    assert at["learned_q"] == pytest.approx(0.458333, abs=1e-6)
    assert at["fixed_depth"] == pytest.approx(0.361111, abs=1e-6)
    assert at["confidence_exit"] == pytest.approx(0.375)
    assert at["confidence_threshold"] == pytest.approx(0.8) and at["q"] == pytest.approx(0.5)
    assert at["confidence_minus_settle"] == pytest.approx(-0.375)
    assert at["operating_points"]["learned_q"] == pytest.approx({"q_lo": 0.5, "q_hi": 0.7, "w": 0.625})
    assert at["oracle"] == pytest.approx({"mean_steps": 8 / 3, "accuracy": 2 / 3})
    assert set(at["ci95"]) == {f"{a}-{b}" for a, b in PAIRS}
    assert all(lo <= hi for lo, hi in at["ci95"].values())
    assert at_equal_steps(TOY, None, resamples=50)["tuned_on"] == {"set": "test", "n": 3}


def test_operating_points_come_from_validation_not_from_the_test_set():
    # validation: every input's answer right from step 1 with all p at step 3 -> target 3 steps: Q-exit at q
    # above 0 waits for step 3, fixed depth 3; on the toy's test unroll those answer at step 3: a, b right.
    val = {"per_step_correct": torch.ones(3, 4).bool(), "per_step_confidence": torch.full((3, 4), 0.9, dtype=torch.float64),
           "p": torch.tensor([[0.0] * 4, [0.0] * 4, [1.0] * 4], dtype=torch.float64)}
    ops = tune(val)["ops"]
    assert tune(val)["target_steps"] == 3.0 and ops["fixed_depth"].lo == 3
    c = comparison(TOY, ops, resamples=50)
    assert c["policies"]["fixed_depth"] == pytest.approx({"mean_steps": 3.0, "accuracy": 2 / 3})
    assert c["policies"]["learned_q"] == pytest.approx({"mean_steps": 3.0, "accuracy": 2 / 3})
    assert c["ci95"]["learned_q-fixed_depth"] == [0.0, 0.0]
    rows = shift_rows({"first two": {k: v[:, :2] for k, v in TOY.items()}}, ops)
    assert rows[0]["name"] == "first two" and rows[0]["n"] == 2
    assert rows[0]["policies"]["fixed_depth"]["accuracy"] == 1.0
    # at Q-exit's own steps there (3: q = 1 waits for the last step), the two rules matched on these items: step 3
    eq = rows[0]["at_q_steps"]
    assert eq["mean_steps"] == 3.0 and eq["policies"]["confidence_exit"] == {"mean_steps": 3.0, "accuracy": 1.0}
    assert eq["ci95"] == {"learned_q-confidence_exit": [0.0, 0.0], "learned_q-fixed_depth": [0.0, 0.0]}


def test_frontiers_of_the_three_deterministic_policies():
    f = frontiers(TOY)
    assert set(f) == {"learned_q", "confidence_exit", "fixed_depth"} and len(f["learned_q"]) >= 10
    assert {"q", "mean_steps", "accuracy"} == set(f["learned_q"][0])
    steps = [r["mean_steps"] for r in f["learned_q"]]
    assert steps == sorted(steps) and steps[0] == 1.0
