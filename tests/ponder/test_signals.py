"""ponder/analysis/signals.py: PABEE's patience counter and exit, the halts N forced, and the per-step AUROC of each
signal, on toys worked by hand and against brute force."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from ponder.analysis.policies import Operating, q_exit_steps
from ponder.analysis.signals import (auroc, exit_forced, forced_stops, patience_steps, q_exit_forced, run_lengths,
                                     step_aurocs)

# The toy of tests/ponder/test_policies.py: inputs a, b, c (columns), N = 3 steps (rows).
CORRECT = torch.tensor([[0, 1, 0], [1, 0, 0], [1, 1, 0]]).bool()
CONF = torch.tensor([[0.5, 0.6, 0.6], [0.8, 0.8, 0.95], [0.99, 0.7, 0.7]], dtype=torch.float64)
P = torch.tensor([[0.2, 0.5, 0.1], [0.5, 0.25, 0.4], [0.3, 0.25, 0.5]], dtype=torch.float64)

# Answers of three inputs over N = 4 steps (columns a, b, c), worked by hand:
#   a 1, 1, 1, 2 -> counter 0, 1, 2, 0;  b 1, 2, 2, 2 -> 0, 0, 1, 2;  c 3, 3, 1, 1 -> 0, 1, 0, 1
ANSWERS = torch.tensor([[1, 1, 3], [1, 2, 3], [1, 2, 1], [2, 2, 1]])


def test_the_patience_counter_and_exit_worked_by_hand():
    assert run_lengths(ANSWERS).T.tolist() == [[0, 1, 2, 0], [0, 0, 1, 2], [0, 1, 0, 1]]
    runs = run_lengths(ANSWERS)
    assert patience_steps(runs, 0).tolist() == [1, 1, 1]
    assert patience_steps(runs, 1).tolist() == [2, 3, 2]
    assert patience_steps(runs, 2).tolist() == [3, 4, 4]       # c never reaches 2: step N
    assert patience_steps(runs, 3).tolist() == [4, 4, 4]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2), min_size=5, max_size=5), min_size=1, max_size=6), st.integers(0, 5))
def test_the_patience_exit_is_the_first_step_whose_answer_held_t_steps(cols, t):
    answers = torch.tensor(cols).T                               # [N = 5, B]
    got = patience_steps(run_lengths(answers), t).tolist()
    for b, col in enumerate(cols):                               # brute force: the answers at n - t .. n all equal
        want = next((n + 1 for n in range(5) if n >= t and len(set(col[n - t:n + 1])) == 1), 5)
        assert got[b] == want


def test_forced_stops_worked_by_hand():
    # mass on step N: (0.3 + 0.25 + 0.5) / 3 = 0.35; every sampled halt there is forced
    f = forced_stops(P, CONF, None, {"learned_q": Operating(0.5, 0.7, 0.625), "confidence_exit": Operating(0.9, 0.9, 0)})
    assert f["mass_on_last_step"] == pytest.approx(0.35) and f["sampled"] == f["mass_on_last_step"] and f["steps"] == 3
    # Σ_{j<N} p_j: a 0.7, b 0.75, c 0.5. Below q = 0.5: none; below 0.6: c; below 0.72: a and c
    assert f["q_exit"] == {"q": 0.5, "share": 0.0}
    assert q_exit_forced(P, 0.6) == pytest.approx(1 / 3) and q_exit_forced(P, 0.72) == pytest.approx(2 / 3)
    # the mixed operating point: 0.375 x (q 0.5: none) + 0.625 x (q 0.7: c alone) = 0.625 / 3
    assert f["at_equal_steps"]["learned_q"] == pytest.approx(0.625 / 3)
    # the confidence exit at 0.9: the best probability before N is a 0.8, b 0.8, c 0.95 -> a and b forced
    assert f["at_equal_steps"]["confidence_exit"] == pytest.approx(2 / 3) == exit_forced(CONF, 0.9)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 6), st.integers(1, 8), st.floats(0.0, 1.0), st.integers(0, 10 ** 6))
def test_the_q_exit_is_forced_exactly_where_it_halts_at_n(N, B, q, seed):
    p = torch.rand(N, B, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    p = p / p.sum(0)
    assert q_exit_forced(p, q) == pytest.approx((q_exit_steps(p, q) == N).double().mean().item())


def test_auroc_worked_by_hand():
    # right items score 0.35 and 0.8, wrong ones 0.1 and 0.4: of the 4 pairs, 3 rank right above wrong -> 0.75
    assert auroc(torch.tensor([0.1, 0.4, 0.35, 0.8]), torch.tensor([0, 0, 1, 1]).bool()) == pytest.approx(0.75)
    assert auroc(torch.tensor([1.0, 1.0]), torch.tensor([True, False])) == pytest.approx(0.5)      # a tie: half
    assert auroc(torch.tensor([0.3, 0.9]), torch.tensor([True, True])) is None                   # nothing to rank


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.booleans()), min_size=2, max_size=30))
def test_auroc_is_the_share_of_right_wrong_pairs_ranked_right_ties_half(items):
    s = torch.tensor([float(v) for v, _ in items])
    y = torch.tensor([lab for _, lab in items])
    pos, neg = [v for v, lab in items if lab], [v for v, lab in items if not lab]
    if not pos or not neg:
        assert auroc(s, y) is None
        return
    want = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg) / (len(pos) * len(neg))
    assert auroc(s, y) == pytest.approx(want)


def test_step_aurocs_name_the_best_signal_at_each_step():
    out = step_aurocs(CORRECT, CONF, P, ANSWERS[:3])
    # step 1: right only b; the learned Σ p (a 0.2, b 0.5, c 0.1) and the confidence (0.5, 0.6, 0.6: b ties c) rank it
    assert out["halted_by_n"][0] == pytest.approx(1.0) and out["confidence"][0] == pytest.approx(0.75)
    assert out["patience"][0] == pytest.approx(0.5)              # every counter is 0 at step 1
    assert out["best"][0] == "halted_by_n"
    assert out["confidence"][2] == pytest.approx(0.75)           # step 3: a 0.99 and b 0.7 right, c 0.7 wrong
    assert set(out["mean"]) == {"halted_by_n", "confidence", "patience"}
    only = step_aurocs(torch.ones(2, 3, dtype=torch.bool), CONF[:2])
    assert only["confidence"] == [None, None] and only["best"] == [None, None] and only["mean"]["confidence"] is None
