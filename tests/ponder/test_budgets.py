"""ponder/analysis/budgets.py: every policy of one or two networks at budgets 1..N (chosen on validation, scored and
matched on the test set), paired intervals at every budget, the leaders, the reference point."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from ponder.analysis.budgets import budget_frontier, contenders, no_difference, residual_gap
from ponder.analysis.policies import sampled

from helpers import fake_unroll as unroll


def test_no_difference_holds_zero_or_rounds_to_zero():
    assert no_difference(0.01, [-0.001, 0.02]) and not no_difference(0.01, [0.002, 0.02])
    assert no_difference(-0.00004, [-0.00006, -0.00002])        # −0.0000 at 4 decimals: no difference
    assert not no_difference(-0.0001, [-0.0002, -0.00005])


def test_one_network_has_every_budget_and_its_e_n_row():
    val, test = unroll(300, 5, 0), unroll(300, 5, 1)
    f = budget_frontier(contenders(val, test), val, test, resamples=200)
    target = sampled(val["per_step_correct"], val["p"]).mean_steps
    assert [r["budget"] for r in f["rows"]] == sorted([1.0, 2.0, 3.0, 4.0, 5.0, target])
    assert f["contenders"] == ["learned_q", "confidence_exit", "fixed_depth", "patience"]
    ref = next(r for r in f["rows"] if r["reference"])
    assert set(ref["chosen"]["policies"]) == {"sampled", *f["contenders"]}
    assert f["reference"]["name"] in ("sampled", "learned_q") and f["reference"]["budget"] == target
    best = max(ref["chosen"]["policies"][k]["accuracy"] for k in ("sampled", "learned_q"))
    assert f["reference"]["accuracy"] == best
    one = f["rows"][0]["chosen"]["policies"]                 # budget 1: every policy answers at step 1
    assert {v["accuracy"] for v in one.values()} == {test["per_step_correct"][0].double().mean().item()}
    for r in f["rows"]:                                       # the test steps are reported beside every accuracy
        for k, v in r["matched"]["policies"].items():
            assert v["mean_steps"] == pytest.approx(r["budget"]), k     # matched on the test set: equal steps there
        for k, v in r["chosen"]["policies"].items():
            assert 1 <= v["mean_steps"] <= 5 and (k == "sampled" or v["validation_steps"] == pytest.approx(r["budget"]))
        ci = r["chosen"]["ci95"]
        assert all(f"learned_q-{k}" in ci for k in r["chosen"]["policies"] if k != "learned_q")
        assert all(lo <= hi for lo, hi in ci.values())


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 10 ** 6), st.integers(3, 6))
def test_on_one_set_the_chosen_points_are_the_matched_points(seed, N):
    s = unroll(120, N, seed)
    f = budget_frontier(contenders(s, s), s, s, resamples=50)
    for r in f["rows"]:
        for k, v in r["matched"]["policies"].items():
            assert r["chosen"]["policies"][k]["accuracy"] == pytest.approx(v["accuracy"])
    assert all(g["chosen"] == pytest.approx(g["matched"]) for g in residual_gap(f, "learned_q", "confidence_exit"))


def test_a_competitor_right_everywhere_leads_at_every_budget():
    val, test = unroll(400, 4, 2), unroll(400, 4, 3)
    good = {k: v.clone() for k, v in unroll(400, 4, 4).items()}
    good["per_step_correct"][:] = True
    conts = contenders(val, test) + contenders(good, good, "competitor", only=("confidence_exit", "fixed_depth"))
    f = budget_frontier(conts, val, test, resamples=300)
    assert f["contenders"][-2:] == ["competitor.confidence_exit", "competitor.fixed_depth"]
    for r in f["rows"]:
        assert r["chosen"]["leader"].startswith("competitor.")
        assert r["chosen"]["tied"] in ([], ["competitor.fixed_depth"], ["competitor.confidence_exit"])
        hi = r["chosen"]["versus_reference"]["competitor.fixed_depth"][1]
        assert hi < 0                                        # the reference is below it at every budget
    assert sum(len(v) for v in f["leads"].values()) == 0     # its two rules tie each other: nobody leads alone
