"""ponder/analysis/pays.py: a run's pays() numbers on a hand-worked toy, their spread over seeds, the marks."""
import math

import pytest
import torch
from hypothesis import given, strategies as st

from ponder.analysis.equal_steps import worth_it
from ponder.analysis.metrics import TestMetrics
from ponder.analysis.pays import KEYS, MARKS, marks, over_seeds, pays


def toy_result():
    """N = 3 steps, 4 inputs: two easy ones right from step 1 and halting there; two hard ones, one right from
    step 3 and halting there, one right from step 2 and halting at step 2 or 3 with p = (0, 1/2, 1/2)."""
    correct = torch.tensor([[1, 1, 0, 0], [1, 1, 0, 1], [1, 1, 1, 1]], dtype=torch.bool)     # [N, B]
    p = torch.tensor([[1., 1., 0., 0.], [0., 0., 0., .5], [0., 0., 1., .5]])                 # [N, B]
    conf = torch.tensor([[.9, .9, .5, .5], [.95, .95, .6, .8], [.99, .99, .9, .9]])          # [N, B]
    easy, hard = torch.tensor([True, True, False, False]), torch.tensor([False, False, True, True])
    stats = {"per_step_correct": correct, "per_step_confidence": conf, "p": p}
    # E[n] = (1, 1, 3, 2.5): easy mean 1, hard mean 2.75; std over the four inputs (sample std) computed below
    en = torch.tensor([1., 1., 3., 2.5])
    return TestMetrics.from_dict({"accuracy": 1.0, "expected_steps": {"mean": en.mean().item(), "std": en.std().item()},
                                  "easy": {"count": 2, "expected_steps": 1.0}, "hard": {"count": 2, "expected_steps": 2.75},
                                  **worth_it(stats, {"easy": easy, "hard": hard})})


def test_pays_by_hand():
    r = pays(toy_result())
    assert set(r) == set(KEYS)
    # learned: every input's Σ p_n·correct_n is 1 -> 1.0, at mean E[n] (1 + 1 + 3 + 2.5) / 4 = 1.875
    assert r["learned"] == pytest.approx(1.0) and r["mean_steps"] == pytest.approx(1.875)
    # fixed depth: accuracy 0.5, 0.75, 1.0 at n = 1, 2, 3 -> at 1.875: 0.5 + 0.875 * 0.25 = 0.71875
    assert r["fixed_depth"] == pytest.approx(0.71875) and r["learned_minus_fixed"] == pytest.approx(0.28125)
    assert r["learned_minus_confidence"] == pytest.approx(r["learned"] - r["confidence_exit"])
    # Q-exit (tuned on the toy itself): Σ_{j<=n} p_j reaches q = 0.5 at steps 1, 1, 3, 2 (1.75 steps) and q = 1 at
    # 1, 1, 3, 3 (2 steps); 1.875 mixes them half and half, every answer right at both -> 1.0
    assert r["learned_q"] == pytest.approx(1.0) and r["sampled_minus_learned_q"] == pytest.approx(0.0)
    assert r["learned_q_minus_fixed"] == pytest.approx(0.28125)
    # settle steps 1, 1, 3, 2 -> E[n] - settle = 0, 0, 0, 0.5 -> mean 0.125
    assert r["expected_minus_settle"] == pytest.approx(0.125)
    # hard - easy: 2.75 - 1; needed: the hard inputs are all right under the learned halting (1.0) but none is
    # at a fixed depth of the easy inputs' mean E[n], 1 step (hard accuracy at n = 1: 0) -> 1.0
    assert r["hard_minus_easy"] == pytest.approx(1.75) and r["needed"] == pytest.approx(1.0)
    assert r["en_std"] == pytest.approx(torch.tensor([1., 1., 3., 2.5]).std().item())


def test_pays_without_groups_or_baselines():
    res = toy_result()
    res.easy = res.hard = None
    r = pays(res)
    assert r["hard_minus_easy"] is None and r["needed"] is None and r["learned"] == pytest.approx(1.0)
    assert pays(TestMetrics(accuracy=0.5)) is None                    # a measurement without the baselines


def test_over_seeds_by_hand():
    rows = [dict.fromkeys(KEYS), *({**dict.fromkeys(KEYS), "learned": v} for v in (0.97, 0.98, 0.99))]
    s = over_seeds(rows)
    # 0.97, 0.98, 0.99: mean 0.98, sample std sqrt((0.01² + 0 + 0.01²) / 2) = 0.01
    assert s["learned"]["mean"] == pytest.approx(0.98) and s["learned"]["std"] == pytest.approx(0.01)
    assert (s["learned"]["min"], s["learned"]["max"], s["learned"]["n"]) == (0.97, 0.99, 3)
    assert s["needed"] is None                                # no run measured it
    assert over_seeds([{**dict.fromkeys(KEYS), "learned": 0.5}])["learned"]["std"] == 0.0


@given(st.lists(st.floats(-1, 1), min_size=1, max_size=8))
def test_over_seeds_mean_lies_between_min_and_max(values):
    s = over_seeds([{**dict.fromkeys(KEYS), "needed": v} for v in values])["needed"]
    assert s["min"] - 1e-12 <= s["mean"] <= s["max"] + 1e-12 and s["std"] >= 0 and s["n"] == len(values)


def test_marks():
    r = pays(toy_result())
    rows = marks("parity-15", r)
    assert [m["key"] for m in rows] == [k for k, *_ in MARKS["parity-15"]]
    by = {m["key"]: m for m in rows}
    assert by["accuracy"]["met"] and by["hard_minus_easy"]["met"] and by["needed"]["met"]
    assert by["expected_minus_settle"]["met"]                 # 0.125 <= 2.5
    # a value exactly at the mark meets it; a missing or NaN one does not
    assert marks("parity-15", {**r, "accuracy": 0.99})[0]["met"]
    assert not marks("parity-15", {**r, "accuracy": None})[0]["met"]
    assert not marks("parity-15", {**r, "accuracy": math.nan})[0]["met"]
    assert not marks("mnist-adaptive", {**r, "expected_minus_settle": 2.51})[3]["met"]
    assert marks("a-model-without-marks", r) == []
