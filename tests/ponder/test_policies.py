"""ponder/analysis/policies.py: the halting policies (sampled, Q-exit, confidence exit, fixed depth, the oracle),
operating points matched to a mean number of steps, and the paired bootstrap."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from ponder.analysis.policies import (Operating, frontier, hazards, lambda_exit, match, oracle, paired_bootstrap,
                                      policies, q_exit_steps, sampled, score)

# The toy of tests/ponder/test_baselines.py: inputs a, b, c (columns), N = 3 steps (rows).
CORRECT = torch.tensor([[0, 1, 0], [1, 0, 0], [1, 1, 0]]).bool()
CONF = torch.tensor([[0.5, 0.6, 0.6], [0.8, 0.8, 0.95], [0.99, 0.7, 0.7]], dtype=torch.float64)
P = torch.tensor([[0.2, 0.5, 0.1], [0.5, 0.25, 0.4], [0.3, 0.25, 0.5]], dtype=torch.float64)
# Worked by hand:
# Σ_{j≤n} p_j: a 0.2, 0.7, 1.0; b 0.5, 0.75, 1.0; c 0.1, 0.5, 1.0.
# Q-exit q = 0.3: a 2, b 1, c 2 -> right a (step 2), b (step 1), not c: mean steps 5/3, accuracy 2/3.
# q = 0.6: a 2, b 2, c 3 -> only a right: mean steps 7/3, accuracy 1/3. q = 0.5 makes the same steps as 0.3
#   (b's and c's sums reach 0.5 exactly), q = 0.7 the same as 0.6.
# Matching the sampled E[n] 2.083333: between q = 0.5 (5/3) and q = 0.7 (7/3), w = 0.416667/0.666667 = 0.625:
#   per input a 1, b 1 − 0.625 = 0.375, c 0; accuracy 1.375/3 = 0.458333.
# Sampled: Σ p_n·correct_n a 0.8, b 0.75, c 0 (accuracy 0.516667) at E[n] 2.083333.
# Oracle: settle steps a 2, b 3, c never (step 3): mean 8/3, right a and b: 2/3.


def test_the_toy_worked_by_hand():
    assert q_exit_steps(P, 0.3).tolist() == [2, 1, 2]
    assert q_exit_steps(P, 0.6).tolist() == [2, 2, 3]
    assert q_exit_steps(P, 0.0).tolist() == [1, 1, 1]
    s = sampled(CORRECT, P)
    assert (s.mean_steps, s.accuracy) == pytest.approx((2.083333, 0.516667), abs=1e-6)
    assert s.per_item.tolist() == pytest.approx([0.8, 0.75, 0.0])
    o = oracle(CORRECT)
    assert (o.mean_steps, o.accuracy) == pytest.approx((8 / 3, 2 / 3))
    pol = policies(CORRECT, CONF, P)["learned_q"]
    op = match(pol, CORRECT, s.mean_steps)
    assert (op.lo, op.hi, op.w) == pytest.approx((0.5, 0.7, 0.625))
    pt = score(pol, CORRECT, op)
    assert pt.per_item.tolist() == pytest.approx([1.0, 0.375, 0.0])
    assert (pt.mean_steps, pt.accuracy) == pytest.approx((2.083333, 0.458333), abs=1e-6)


def test_the_lambda_exit_reads_the_hazards_back_from_p():
    # λ_n = p_n / (1 − Σ_{j<n} p_j): a 0.2, 0.5/0.8 = 0.625, 1; b 0.5, 0.25/0.5 = 0.5, 1; c 0.1, 0.4/0.9 = 0.444, 1
    assert hazards(P).flatten().tolist() == pytest.approx([0.2, 0.5, 0.1, 0.625, 0.5, 0.4 / 0.9, 1.0, 1.0, 1.0])
    pol = lambda_exit(P)
    assert pol.steps(0.5).tolist() == [2, 1, 3]          # first λ_n ≥ 0.5: a at 0.625, b at 0.5, c only at λ_N = 1
    assert pol.steps(0.3).tolist() == [2, 1, 2]
    assert pol.steps(0.7).tolist() == [3, 3, 3]
    assert pol.steps(pol.knobs()[0]).tolist() == [1, 1, 1] and pol.steps(pol.knobs()[-1]).tolist() == [3, 3, 3]


def test_matching_outside_the_range_takes_the_end():
    fd = policies(CORRECT, CONF, P)["fixed_depth"]
    assert match(fd, CORRECT, 0.5) == Operating(1, 1, 0.0)
    assert match(fd, CORRECT, 7.0) == Operating(3, 3, 0.0)
    assert match(fd, CORRECT, 2.25) == Operating(2, 3, 0.25)


def test_frontiers_have_at_least_ten_points_for_q_and_run_from_step_one():
    pols = policies(CORRECT, CONF, P)
    rows = frontier(pols["learned_q"], CORRECT)
    assert len(rows) >= 10 and rows[0] == {"q": 0.0, "mean_steps": 1.0, "accuracy": pytest.approx(1 / 3)}
    assert [r["steps"] for r in frontier(pols["fixed_depth"], CORRECT)] == [1, 2, 3]


def test_bootstrap_of_constant_differences_and_of_a_policy_against_itself():
    a = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.5])
    ci = paired_bootstrap({"a": a, "b": a - 0.25, "c": a.clone()}, [("a", "b"), ("a", "c")], resamples=50)
    assert ci["a-b"] == pytest.approx([0.25, 0.25]) and ci["a-c"] == [0.0, 0.0]


def test_bootstrap_means_are_those_of_the_resampled_items():
    # the definition: resample r draws the items idx[r] (the generator's randint, chunk by chunk), its mean is
    # theirs; the 2.5 % and 97.5 % quantiles of the differences over the resamples
    g = torch.Generator().manual_seed(1)
    per = {"a": (torch.rand(300, generator=g) < 0.7).double(), "b": torch.rand(300, generator=g).double()}
    got = paired_bootstrap(per, [("b", "a")], resamples=70, seed=5, chunk=30)
    g = torch.Generator().manual_seed(5)
    idx = torch.cat([torch.randint(0, 300, (n, 300), generator=g) for n in (30, 30, 10)])       # [70, 300]
    d = per["b"][idx].mean(1) - per["a"][idx].mean(1)
    want = torch.quantile(d, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    assert got["b-a"] == pytest.approx(want, abs=1e-12)


def test_bootstrap_is_seeded_and_brackets_the_difference_of_a_large_sample():
    g = torch.Generator().manual_seed(0)
    a, b = (torch.rand(4000, generator=g) < 0.9).double(), (torch.rand(4000, generator=g) < 0.8).double()
    one = paired_bootstrap({"a": a, "b": b}, [("a", "b")], resamples=300, seed=3)
    assert one == paired_bootstrap({"a": a, "b": b}, [("a", "b")], resamples=300, seed=3)
    lo, hi = one["a-b"]
    d = (a - b).mean().item()
    # the half width is about 1.96·sd(a − b)/sqrt(B) = 1.96·0.5/63 ≈ 0.016
    assert lo < d < hi and 0.01 < (hi - lo) / 2 < 0.022


@st.composite
def unrolls(draw):
    """(correct [N, B], conf [N, B], p [N, B]) with p a distribution over the N steps of each input."""
    N, B = draw(st.integers(1, 6)), draw(st.integers(1, 8))
    g = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    correct = torch.rand(N, B, generator=g) < draw(st.floats(0, 1))
    conf = torch.rand(N, B, generator=g, dtype=torch.float64).round(decimals=1)
    p = torch.rand(N, B, generator=g, dtype=torch.float64) ** 3
    return correct, conf, p / p.sum(0)


@settings(max_examples=100, deadline=None)
@given(unrolls(), st.floats(0, 1), st.floats(0, 1))
def test_q_exit_steps_never_fall_as_q_rises_and_span_one_to_n(u, q1, q2):
    _, _, p = u
    lo, hi = sorted((q1, q2))
    assert (q_exit_steps(p, lo) <= q_exit_steps(p, hi)).all()
    assert (q_exit_steps(p, 0.0) == 1).all() and (q_exit_steps(p, 1e-300) == 1).all()
    assert (q_exit_steps(p, 1.0) <= p.shape[0]).all() and (q_exit_steps(p, 1.0) >= 1).all()


@pytest.mark.long
@settings(max_examples=100, deadline=None)
@given(unrolls(), st.floats(0, 1))
def test_a_matched_operating_point_spends_the_target_steps_on_its_own_set(u, frac):
    correct, conf, p = u
    N = p.shape[0]
    target = 1 + frac * (N - 1)
    for name, pol in policies(correct, conf, p).items():
        op = match(pol, correct, target)
        pt = score(pol, correct, op)
        lo, hi = (pol.steps(k).double().mean().item() for k in (pol.knobs()[0], pol.knobs()[-1]))
        assert pt.mean_steps == pytest.approx(min(max(target, lo), hi), abs=1e-9), name
        assert 0.0 <= pt.accuracy <= 1.0 and 0 <= op.w <= 1


@settings(max_examples=60, deadline=None)
@given(unrolls())
def test_a_policy_against_itself_has_the_interval_zero(u):
    correct, _, p = u
    s = sampled(correct, p)
    assert paired_bootstrap({"s": s.per_item, "t": s.per_item.clone()}, [("s", "t")], resamples=20)["s-t"] == [0, 0]


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 6), st.integers(1, 12), st.integers(0, 10 ** 6), st.floats(-0.1, 1.2), st.integers(0, 7))
def test_the_counted_mean_steps_are_the_mean_of_the_steps(N, B, seed, knob, t):
    # each policy's mean steps from one sort (policies.counted) equal the mean of its per-item steps, knob by knob
    from ponder.analysis.policies import op_steps, patience
    g = torch.Generator().manual_seed(seed)
    p = torch.rand(N, B, generator=g, dtype=torch.float64)
    p = p / p.sum(0)
    conf = torch.rand(N, B, generator=g).round(decimals=1)          # float32 and ties, as unroll_stats gives them
    answers = torch.randint(0, 3, (N, B), generator=g)
    correct = torch.ones(N, B, dtype=torch.bool)
    pols = {**policies(correct, conf, p), "patience": patience(answers)}
    for name, pol in pols.items():
        if pol.mean_steps is None:
            continue
        for k in (knob, float(t), *pol.knobs()[:5]):
            assert pol.mean_steps(k) == pol.steps(k).double().mean().item(), (name, k)
        op = match(pol, correct, 1 + (N - 1) * knob if 0 <= knob <= 1 else 1.5)
        assert op_steps(pol, op) == pytest.approx(score(pol, correct, op).mean_steps)
