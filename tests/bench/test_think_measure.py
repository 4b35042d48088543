"""bench/think_measure.py: the rules at equal steps through ponder.analysis.policies (the toy of
tests/ponder/test_policies.py, validation = test)."""
import pytest
import torch

from bench.think_measure import PAIRS, RULES, equal_steps

CORRECT = torch.tensor([[0, 1, 0], [1, 0, 0], [1, 1, 0]]).bool()
CONF = torch.tensor([[0.5, 0.6, 0.6], [0.8, 0.8, 0.95], [0.99, 0.7, 0.7]], dtype=torch.float64)
P = torch.tensor([[0.2, 0.5, 0.1], [0.5, 0.25, 0.4], [0.3, 0.25, 0.5]], dtype=torch.float64)
U = {"per_step_correct": CORRECT, "per_step_confidence": CONF, "p": P}


def test_every_rule_spends_the_learned_halting_steps_and_q_exit_is_the_libraries():
    out = equal_steps(U, U)
    assert out["target_steps"] == pytest.approx(2.083333, abs=1e-6)        # the sampled E[n] (worked in test_policies)
    for k in RULES:
        assert out[k]["steps"] == pytest.approx(out["target_steps"])
    assert out["learned_q"]["accuracy"] == pytest.approx(0.458333, abs=1e-6)
    # fixed depth at 2.083: step 2 (right: a only) w.p. 11/12, step 3 (a, b) w.p. 1/12: (1 + 1/12)/3 = 0.361111
    assert out["fixed_depth"]["accuracy"] == pytest.approx(0.361111, abs=1e-6)
    assert out["learned_q-fixed_depth"]["diff"] == pytest.approx(0.458333 - 0.361111, abs=1e-6)
    for a, b in PAIRS:
        lo, hi = out[f"{a}-{b}"]["interval"]
        assert lo <= hi


def test_a_target_outside_the_range_puts_every_rule_at_its_end():
    out = equal_steps(U, U, target=1.0)
    assert all(out[k]["steps"] == 1.0 for k in RULES)
    assert out["learned_q-fixed_depth"]["diff"] == 0.0 and out["learned_q-fixed_depth"]["interval"] == [0.0, 0.0]
