"""ponder/analysis/pays.py: a run's pays() numbers on a hand-worked toy, their spread over seeds, the marks."""
import math

import pytest
import torch
from hypothesis import given, strategies as st

from ponder.analysis.equal_steps import worth_it
from ponder.analysis.metrics import TestMetrics
from ponder.analysis.pays import KEYS, MARKS, choose_setting, marks, over_seeds, pays, seed_interval, seed_rank


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


def test_the_interval_over_seeds_by_hand():
    # 0.97, 0.98, 0.99: mean 0.98, std 0.01, n 3: t(2) = 4.303, half-width 4.303 · 0.01 / √3 = 0.024844
    rows = [{**dict.fromkeys(KEYS), "learned_q_minus_fixed": v} for v in (0.97, 0.98, 0.99)]
    s = over_seeds(rows)["learned_q_minus_fixed"]
    assert s["ci95"] == pytest.approx([0.955156, 1.004844], abs=1e-6)
    # five seeds 0.01, 0.02, 0.03, 0.04, 0.05: mean 0.03, std 0.015811, t(4) = 2.776: half-width 0.019630
    five = over_seeds([{**dict.fromkeys(KEYS), "learned": v / 100} for v in range(1, 6)])["learned"]
    assert five["ci95"] == pytest.approx([0.010370, 0.049630], abs=1e-6)
    assert seed_interval({"mean": 0.5, "std": 0.0, "n": 1}) is None and over_seeds(rows[:1])["learned_q_minus_fixed"]["ci95"] is None
    # 14 seeds: 13 degrees of freedom have no row of their own and take 12's wider 2.179
    assert seed_interval({"mean": 0, "std": 1, "n": 14}) == pytest.approx([-2.179 / 14 ** 0.5, 2.179 / 14 ** 0.5])


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


def _val_setting(test: dict, val: dict, seeds=(0, 1, 2)) -> dict:
    means = lambda d: {k: None if d.get(k) is None else {"mean": d[k], "std": 0.0, "min": d[k], "max": d[k], "n": 3}  # noqa: E731
                       for k in KEYS}
    return {"setting": {"beta": test["beta"]}, "seeds": list(seeds), "over_seeds": means(test),
            **({"validation_over_seeds": means(val)} if val else {})}


def test_a_setting_is_chosen_on_validation_numbers_and_ships_its_default_seed():
    # mnist-adaptive's marks: accuracy >= 0.990, E[n] std >= 1.5, learned − confidence >= −0.002, E[n] − settle <= 2.5.
    # β 0.01 meets all four on the test set but two on validation; β 0.02 three on validation: β 0.02 is chosen
    a = _val_setting({"beta": 0.01, "accuracy": 0.992, "en_std": 1.8, "learned_minus_confidence": 0.0,
                      "expected_minus_settle": 2.0},
                     {"accuracy": 0.991, "en_std": 1.8, "learned_minus_confidence": -0.003, "expected_minus_settle": 3.0})
    b = _val_setting({"beta": 0.02, "accuracy": 0.985, "en_std": 1.2, "learned_minus_confidence": -0.004,
                      "expected_minus_settle": 3.0},
                     {"accuracy": 0.991, "en_std": 1.6, "learned_minus_confidence": -0.001, "expected_minus_settle": 3.0},
                     seeds=(1, 2, 3))
    unmeasured = _val_setting({"beta": 0.05, "accuracy": 1.0}, None)
    c = choose_setting([unmeasured, a, b], "mnist-adaptive")
    assert c == {"index": 2, "setting": {"beta": 0.02}, "met": ["accuracy", "en_std", "learned_minus_confidence"],
                 "of": 4, "seed": 1, "on": "validation"}                     # no seed 0 there: its lowest seed
    # a tie in marks goes to the higher validation Q-exit accuracy, then to the first
    a["validation_over_seeds"]["learned_q"] = {"mean": 0.99, "std": 0.0, "min": 0.99, "max": 0.99, "n": 3}
    a["validation_over_seeds"]["learned_minus_confidence"]["mean"] = 0.0
    assert choose_setting([a, b], "mnist-adaptive")["index"] == 0
    assert choose_setting([unmeasured], "mnist-adaptive") is None and choose_setting([a], "mnist-default") is None


def test_where_a_seed_ranks_among_its_setting():
    trials = [{"seed": s, "pays": {"accuracy": a}} for s, a in ((0, 0.991), (1, 0.995), (2, 0.990), (3, None))]
    assert seed_rank(trials, 0, "accuracy") == (2, 3) and seed_rank(trials, 1, "accuracy") == (1, 3)
    assert seed_rank(trials, 3, "accuracy") is None and seed_rank(trials, 9, "accuracy") is None
