"""ponder/analysis/baselines.py: fixed depth, confidence exit and the learned halting at equal compute; settle
steps; per-step accuracy by group; the sentence under the "worth it?" chart."""
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from helpers import tiny_model
from ponder.tasks.parity import data as D
from ponder.analysis.metrics import TestMetrics
from ponder.analysis.baselines import (class_groups, confidence_curve, confidence_exit, differences_table,
                                       exit_steps, fixed_depth, learned, quartile_groups, range_groups, settle, settle_steps, verdict,
                                       worth_sentence)
from ponder.analysis.equal_steps import worth_it
from ponder.analysis.unroll import unroll_stats

# The toy: three inputs a, b, c (columns), N = 3 steps (rows).
CORRECT = torch.tensor([[0, 1, 0],        # step 1: only b right
                        [1, 0, 0],        # step 2: only a right
                        [1, 1, 0]]).bool()  # step 3: a and b right; c is never right
CONF = torch.tensor([[0.5, 0.6, 0.6],
                     [0.8, 0.8, 0.95],
                     [0.99, 0.7, 0.7]], dtype=torch.float64)
P = torch.tensor([[0.2, 0.5, 0.1],
                  [0.5, 0.25, 0.4],
                  [0.3, 0.25, 0.5]], dtype=torch.float64)
# Worked by hand:
# fixed depth: step 1 1/3, step 2 1/3, step 3 2/3.
# E[n]: a 0.2 + 2·0.5 + 3·0.3 = 2.1; b 0.5 + 0.5 + 0.75 = 1.75; c 0.1 + 0.8 + 1.5 = 2.4; mean 6.25/3 = 2.083333.
# learned expected accuracy Σ p_n·correct_n: a 0.5 + 0.3 = 0.8; b 0.5 + 0.25 = 0.75; c 0; mean 1.55/3 = 0.516667;
#   95 % half width 1.959964·sqrt(0.8·0.2 + 0.75·0.25 + 0)/3 = 1.959964·0.589491/3 = 0.385127.
# confidence exit τ = 0.7: a 0.5 < τ, 0.8 >= τ -> step 2 (right); b 0.6, 0.8 -> 2 (wrong); c 0.6, 0.95 -> 2 (wrong):
#   mean steps 2, accuracy 1/3.
# τ = 0.95: a -> 3 (0.99, right); b never -> 3 (right); c -> 2 (0.95, wrong): mean steps 8/3, accuracy 2/3.
# at the learned mean 2.083333: fixed depth between step 2 (1/3) and step 3 (2/3): 1/3 + 0.083333·1/3 = 0.361111;
#   confidence exit: the distinct probabilities as thresholds give mean steps 1 (0.5), 4/3 (0.6), 2 (0.7, 0.8),
#   8/3 (0.95), 3 (0.99); 2.083333 lies between τ = 0.8 (2, 1/3) and τ = 0.95 (8/3, 2/3):
#   w = 0.083333/0.666667 = 0.125, accuracy 1/3 + 0.125·1/3 = 0.375, threshold 0.8.
# settle: a right at steps 2 and 3 -> 2; b wrong at 2, right at 3 -> 3; c never. Mean settle 2.5;
#   E[n] − settle: a 0.1, b −1.25, mean −0.575; never settled 1.
# the confidence exit's exit − settle (a and b, which settle): τ = 0.8 exits a, b at 2, 2 -> 0, −1, mean −0.5;
#   τ = 0.95 at 3, 3 -> 1, 0, mean 0.5; at w = 0.125: −0.5 + 0.125·1 = −0.375.


def test_the_toy_worked_by_hand():
    assert fixed_depth(CORRECT).tolist() == pytest.approx([1 / 3, 1 / 3, 2 / 3])
    assert exit_steps(CONF, 0.7).tolist() == [2, 2, 2]
    assert confidence_exit(CORRECT, CONF, 0.7) == pytest.approx((2.0, 1 / 3))
    assert exit_steps(CONF, 0.95).tolist() == [3, 3, 2]
    assert confidence_exit(CORRECT, CONF, 0.95) == pytest.approx((8 / 3, 2 / 3))
    ln = learned(CORRECT, P)
    assert ln["mean_steps"] == pytest.approx(2.083333, abs=1e-6)
    assert ln["accuracy"] == pytest.approx(0.516667, abs=1e-6)
    assert ln["interval"] == pytest.approx([0.516667 - 0.385127, 0.516667 + 0.385127], abs=1e-6)
    assert settle_steps(CORRECT).tolist() == [2, 3, 0]
    s = settle(CORRECT, P)
    assert s["mean_settle_step"] == pytest.approx(2.5)
    assert s["mean_expected_minus_settle"] == pytest.approx(-0.575)
    assert (s["never_settled"], s["count"]) == (1, 3)


def test_the_toy_through_worth_it_with_groups():
    stats = {"per_step_correct": CORRECT, "per_step_confidence": CONF, "p": P,
             "correct": torch.tensor([True, True, False])}
    w = worth_it(stats, {"ab": torch.tensor([True, True, False]), "none": torch.zeros(3, dtype=torch.bool)})
    assert [r["steps"] for r in w["baselines"]["fixed_depth"]] == [1, 2, 3]
    assert len(w["baselines"]["confidence_exit"]) >= 5
    at = w["baselines"]["at_equal_steps"]
    assert at["learned_sampled"] == pytest.approx(2 / 3)
    # tuned on the test set itself (no validation unroll given), the values of tests/ponder/test_equal_steps.py
    assert w["baselines"]["tuned_on"] == {"set": "test", "n": 3}
    assert (at["mean_steps"], at["fixed_depth"], at["confidence_exit"]) == pytest.approx((2.083333, 0.361111, 0.375),
                                                                                      abs=1e-6)
    assert len(w["baselines"]["frontier"]["learned_q"]) >= 10 and w["baselines"]["shift"] == []
    assert list(w["per_step_accuracy_by_group"]) == ["ab"]                    # an empty group is left out
    assert w["per_step_accuracy_by_group"]["ab"] == pytest.approx([0.5, 0.5, 1.0])
    assert w["settle"]["by_group"]["ab"]["never_settled"] == 0


# ----------------------------------------------------------------------------- invariants, over random unrolls

@st.composite
def unrolls(draw):
    """(correct [N, B], conf [N, B], p [N, B]) with p a distribution over the N steps of each input."""
    N, B = draw(st.integers(1, 6)), draw(st.integers(1, 8))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    correct = torch.rand(N, B, generator=g) < draw(st.floats(0, 1))
    conf = torch.rand(N, B, generator=g, dtype=torch.float64).round(decimals=1)   # ties happen
    p = torch.rand(N, B, generator=g, dtype=torch.float64) ** 3
    return correct, conf, p / p.sum(0)


@pytest.mark.long
@settings(max_examples=150, deadline=None)
@given(unrolls())
def test_expected_accuracy_is_the_sum_of_p_n_times_correct_n(u):
    correct, _, p = u
    N, B = p.shape
    by_hand = sum(p[n, b].item() * bool(correct[n, b]) for n in range(N) for b in range(B)) / B
    assert learned(correct, p)["accuracy"] == pytest.approx(by_hand, abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(unrolls())
def test_fixed_depth_at_n_and_the_two_extreme_thresholds(u):
    correct, conf, p = u
    N = correct.shape[0]
    fd = fixed_depth(correct)
    assert fd[-1].item() == pytest.approx(correct[-1].double().mean().item())
    assert confidence_exit(correct, conf, 0.0) == pytest.approx((1.0, fd[0].item()))      # everything exits at 1
    assert confidence_exit(correct, conf, 1.5) == pytest.approx((float(N), fd[-1].item()))  # nothing is that sure


@settings(max_examples=150, deadline=None)
@given(unrolls(), st.floats(0, 1.1))
def test_the_exit_step_is_the_first_step_at_or_above_the_threshold(u, tau):
    _, conf, _ = u
    N = conf.shape[0]
    for b, s in enumerate(exit_steps(conf, tau).tolist()):
        col = conf[:, b].tolist()
        assert s == next((n for n, c in enumerate(col, 1) if c >= tau), N)


@pytest.mark.long
@settings(max_examples=150, deadline=None)
@given(unrolls(), st.floats(0, 1), st.floats(0, 1))
def test_a_higher_threshold_never_exits_earlier(u, t1, t2):
    _, conf, _ = u
    lo, hi = sorted((t1, t2))
    assert (exit_steps(conf, lo) <= exit_steps(conf, hi)).all()


@pytest.mark.long
@settings(max_examples=150, deadline=None)
@given(unrolls())
def test_settle_step_is_where_the_answers_stay_right(u):
    correct = u[0]
    for b, s in enumerate(settle_steps(correct).tolist()):
        col = correct[:, b].tolist()
        if s == 0:
            assert not col[-1]
        else:
            assert all(col[s - 1:]) and (s == 1 or not col[s - 2])


@pytest.mark.long
@settings(max_examples=100, deadline=None)
@given(unrolls())
def test_a_group_of_every_input_is_the_fixed_depth_curve(u):
    correct, conf, p = u
    stats = {"per_step_correct": correct, "per_step_confidence": conf, "p": p}
    w = worth_it(stats, {"all": torch.ones(correct.shape[1], dtype=torch.bool)})
    assert w["per_step_accuracy_by_group"]["all"] == pytest.approx([r["accuracy"] for r in w["baselines"]["fixed_depth"]])
    assert w["settle"]["by_group"]["all"] == {k: v for k, v in w["settle"].items() if k != "by_group"}


def test_groups_quartiles_classes_and_k_ranges():
    q = quartile_groups(torch.arange(1.0, 9.0))                     # E[n] 1..8: two inputs per quartile
    assert [m.nonzero().flatten().tolist() for m in q.values()] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert list(class_groups(torch.tensor([3, 1, 3]), "digit")) == ["digit 1", "digit 3"]
    g = range_groups(torch.tensor([1, 2, 5, 6]), {"easy": (1, 2), "hard": (5, 6)})
    assert g["easy"].tolist() == [True, True, False, False] and g["hard"].tolist() == [False, False, True, True]
    assert g["k=5"].tolist() == [False, False, True, False]


def test_a_sampled_pass_averages_to_the_expected_accuracy_on_a_model():
    """The expected accuracy is what the sampled halting gets on average: 40 seeds of halting draws on a tiny
    parity model, within 5 standard errors of the mean of 40 passes."""
    model = tiny_model("parity", max_steps=6, n_elems=8)
    x, y, _ = D.parity_eval_set(8, 1, 8, 400)
    runs = [unroll_stats(model, x, y, "sample", seed=s) for s in range(40)]
    ln = learned(runs[0]["per_step_correct"], runs[0]["p"])
    mean_sampled = torch.stack([r["correct"].double().mean() for r in runs]).mean().item()
    se = (ln["interval"][1] - ln["interval"][0]) / 2 / 1.959964 / math.sqrt(40)
    assert abs(mean_sampled - ln["accuracy"]) <= 5 * se + 1e-9
    assert runs[0]["per_step_confidence"].shape == runs[0]["p"].shape
    assert (runs[0]["per_step_confidence"] >= 0.5 - 1e-6).all()                # two classes: the top one has >= 1/2


def _at(q, conf, fixed, sampled, ci):
    pol = {"learned_q": q, "confidence_exit": conf, "fixed_depth": fixed, "sampled": sampled}
    return {"target_steps": 9.6, "tuned_on": {"set": "validation", "n": 5000},
            "policies": {k: {"accuracy": v, "mean_steps": 9.6} for k, v in pol.items()},
            "ci95": {"learned_q-confidence_exit": ci[0], "learned_q-fixed_depth": ci[1], "sampled-learned_q": ci[2]}}


@pytest.mark.parametrize("at, says", [
    # an interval that holds 0 is "no difference" whatever the size of the difference; one that does not is the
    # difference
    (_at(0.9924, 0.9923, 0.9698, 0.9905, [[-0.0008, 0.0010], [0.0199, 0.0254], [-0.0025, -0.0013]]),
     ["Q-exit) shows no difference from a confidence exit (0.9924 and 0.9923)",
      "is 0.0226 above a fixed depth", "sampling the halt instead is 0.0019 below Q-exit", "5,000 validation items"]),
    (_at(0.9950, 0.9927, 0.99, 0.99, [[-0.0001, 0.0047], [0.0001, 0.01], [-0.02, 0.0]]),
     ["shows no difference from a confidence exit", "is 0.0050 above a fixed depth",
      "sampling the halt instead shows no difference from Q-exit"]),
    # mnist-default's: a difference that rounds to 0 reads "no difference", never "0.0000 below" with its interval
    (_at(0.99410, 0.99408, 0.99410, 0.99406, [[0.00001, 0.0003], [0.0, 0.0], [-0.0001, -0.00001]]),
     ["shows no difference from a confidence exit (0.9941 and 0.9941)", "no difference from a fixed depth",
      "sampling the halt instead shows no difference from Q-exit"]),
    (_at(0.9950, 0.9928, 1.0, 0.99, [[0.0001, 0.0043], [-0.01, -0.0001], [-0.02, 0.0]]),
     ["is 0.0022 above a confidence exit", "is 0.0050 below a fixed depth"]),
])
def test_the_sentence_says_what_the_numbers_say(at, says):
    s = worth_sentence(at)
    for part in says:
        assert part in s
    assert "0.0000 below" not in s and "0.0000 above" not in s and "-0.0000 to" not in s


def test_one_rule_for_every_verdict():
    assert verdict(0.0023, [-0.0001, 0.0047]) == "no difference" and verdict(-0.5, [-1.0, 0.0]) == "no difference"
    assert verdict(-0.00003, [-0.00005, -0.00001]) == "no difference"          # rounds to 0 at 4 decimals
    assert verdict(0.0022, [0.0001, 0.0043]) == "is 0.0022 above" and verdict(-0.0018, [-0.0025, -0.0011]) == \
        "is 0.0018 below"


def test_the_differences_table_of_several_models():
    # mnist-adaptive's table of the issue: Q-exit 0.9924, confidence 0.9923, fixed 0.9698, sampled 0.9905
    at = _at(0.9924, 0.9923, 0.9698, 0.9905, [[-0.0008, 0.0010], [0.0199, 0.0254], [-0.0025, -0.0013]])
    old = {"mean_steps": 3.5, "learned": 0.9, "confidence_exit": 0.9, "fixed_depth": 0.8}     # no intervals measured
    rows = differences_table({"a": TestMetrics(n=10000, baselines={"at_equal_steps": at}),
                              "b": TestMetrics(n=500, baselines={"at_equal_steps": old})})
    assert rows[0] == {"model": "a", "test items": 10000, "tuned on": "validation (5,000)", "mean steps": 9.6,
                       "Q-exit − confidence": "+0.0001 [-0.0008, +0.0010]: no difference",
                       "Q-exit − fixed depth": "+0.0226 [+0.0199, +0.0254]: 0.0226 above",
                       "sampled − Q-exit": "-0.0019 [-0.0025, -0.0013]: 0.0019 below"}
    assert rows[1] == {"model": "b", "test items": 500, "tuned on": "-", "mean steps": 3.5, "Q-exit − confidence": "-",
                       "Q-exit − fixed depth": "-", "sampled − Q-exit": "-"}
