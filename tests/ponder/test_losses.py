"""ponder/losses.py and the halting distribution, checked against values worked out by hand;
both regularisers: KL(p || p_G) ("kl", the paper's) and KL(p_G || p) ("kl-reverse")."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

from ponder.halting import halting_lambdas, halting_log_probs
from ponder.losses import (accuracy_minus_compute, exit_loss, kl_to_prior, settled, kl_to_prior_per_sample, log_geometric_prior, ponder_loss,
                           reconstruction_loss, train_loss)


def logit(p):
    return math.log(p / (1 - p))


def test_halting_n2_by_hand():
    # lambda_1 = 0.5 (logit 0); lambda_2 is forced to 1 whatever its logit (7.0 here).
    # p_1 = 0.5, p_2 = (1 - 0.5) * 1 = 0.5
    log_p = halting_log_probs(torch.tensor([[0.0], [7.0]]))
    assert torch.allclose(log_p.exp().squeeze(1), torch.tensor([0.5, 0.5]))
    assert torch.allclose(halting_lambdas(torch.tensor([[0.0], [7.0]])).squeeze(1), torch.tensor([0.5, 1.0]))


def test_halting_n3_by_hand():
    # lambda = (0.25, 0.5, forced 1):
    # p_1 = 0.25, p_2 = 0.75 * 0.5 = 0.375, p_3 = 0.75 * 0.5 * 1 = 0.375
    l = torch.tensor([[logit(0.25)], [0.0], [-3.0]])
    assert torch.allclose(halting_log_probs(l).exp().squeeze(1), torch.tensor([0.25, 0.375, 0.375]))


def test_prior_by_hand():
    # lambda_p = 0.5, N = 3: unnormalised 0.5, 0.25, 0.125; Z = 0.875 -> 4/7, 2/7, 1/7
    assert torch.allclose(log_geometric_prior(0.5, 3).exp(), torch.tensor([4 / 7, 2 / 7, 1 / 7]))
    # lambda_p = 0.2, N = 3: 0.2, 0.16, 0.128; Z = 1 - 0.8^3 = 0.488 -> 0.409836, 0.327869, 0.262295
    assert torch.allclose(log_geometric_prior(0.2, 3).exp(), torch.tensor([0.409836, 0.327869, 0.262295]), atol=1e-6)


def test_kl_n2_by_hand():
    # p = (0.5, 0.5); prior lambda_p = 0.5, N = 2: (0.5, 0.25) / 0.75 = (2/3, 1/3)
    # KL(p || p_G) = 0.5 ln(0.5 / (2/3)) + 0.5 ln(0.5 / (1/3)) = 0.5 ln(0.75 * 1.5) = 0.5 ln 1.125 = 0.0588915
    log_p = halting_log_probs(torch.tensor([[0.0], [0.0]]))
    assert kl_to_prior(log_p, 0.5).item() == pytest.approx(0.0588915, abs=1e-6)


def test_kl_n3_by_hand():
    # p = (0.25, 0.375, 0.375); p_G = (4/7, 2/7, 1/7)
    # KL = 0.25 ln(0.25*7/4) + 0.375 ln(0.375*7/2) + 0.375 ln(0.375*7)
    #    = 0.25 ln 0.4375 + 0.375 ln 1.3125 + 0.375 ln 2.625
    #    = 0.25 (-0.826679) + 0.375 (0.271934) + 0.375 (0.965081) = -0.206670 + 0.101975 + 0.361906 = 0.257211
    log_p = halting_log_probs(torch.tensor([[logit(0.25)], [0.0], [0.0]]))
    assert kl_to_prior(log_p, 0.5).item() == pytest.approx(0.257211, abs=1e-5)
    # the reverse direction KL(p_G || p) = 4/7 ln(16/7) + 2/7 ln(16/21) + 1/7 ln(8/21)
    #    = 4/7 (0.826679) + 2/7 (-0.271934) + 1/7 (-0.965081) = 0.472388 - 0.077695 - 0.137869 = 0.256824:
    # kl_to_prior must not be that one (3.9e-4 apart, 39x the tolerance above)
    assert kl_to_prior(log_p, 0.5).item() != pytest.approx(0.256824, abs=1e-5)


def test_reconstruction_n3_by_hand():
    # p = (0.25, 0.375, 0.375), L_n = (1, 2, 4): 0.25*1 + 0.375*2 + 0.375*4 = 2.5
    log_p = halting_log_probs(torch.tensor([[logit(0.25)], [0.0], [0.0]]))
    assert reconstruction_loss(torch.tensor([[1.0], [2.0], [4.0]]), log_p).item() == pytest.approx(2.5, abs=1e-6)
    # two samples: the batch mean. Sample 2 has lambda = (0.5, 0.5, 1) -> p = (0.5, 0.25, 0.25),
    # L = (2, 2, 0) -> 0.5*2 + 0.25*2 + 0.25*0 = 1.5; mean (2.5 + 1.5) / 2 = 2.0
    log_p2 = halting_log_probs(torch.tensor([[logit(0.25), 0.0], [0.0, 0.0], [0.0, 0.0]]))
    assert reconstruction_loss(torch.tensor([[1.0, 2.0], [2.0, 2.0], [4.0, 0.0]]), log_p2).item() == pytest.approx(2.0)


def test_total_is_rec_plus_beta_reg():
    log_p = halting_log_probs(torch.randn(6, 4))
    losses = torch.rand(6, 4)
    total, rec, reg = ponder_loss(losses, log_p, 0.3, beta=0.1)
    assert total.item() == pytest.approx(rec.item() + 0.1 * reg.item(), rel=1e-6)


def test_kl_matches_torch_kl_div_oracle():
    torch.manual_seed(0)
    for n in (2, 5, 20, 100):
        log_p = halting_log_probs(torch.randn(n, 8) * 3)
        for lp in (0.05, 0.2, 0.9):
            log_q = log_geometric_prior(lp, n)
            # F.kl_div(input, target, log_target=True) = sum target.exp() * (target - input) = KL(target || input.exp())
            oracle = F.kl_div(log_q.unsqueeze(1).expand(n, 8), log_p, log_target=True, reduction="none").sum(0)
            assert torch.allclose(kl_to_prior_per_sample(log_p, log_q), oracle, atol=1e-5)


def test_invariants_and_kl_zero_at_prior():
    torch.manual_seed(1)
    log_p = halting_log_probs(torch.randn(20, 64) * 5)
    p = log_p.exp()
    assert (p >= 0).all()
    assert torch.allclose(p.sum(0), torch.ones(64), atol=1e-5)
    assert (kl_to_prior_per_sample(log_p, log_geometric_prior(0.2, 20)) >= -1e-6).all()
    # logits giving exactly the renormalised prior: lambda_n = q_n / (1 - sum_{j<n} q_j)
    q = log_geometric_prior(0.2, 20).double().exp()
    tail = 1 - torch.cat([torch.zeros(1, dtype=torch.float64), q.cumsum(0)[:-1]])
    lam = (q / tail).clamp(1e-9, 1 - 1e-9)
    log_p_prior = halting_log_probs(torch.logit(lam).float().unsqueeze(1))
    assert kl_to_prior(log_p_prior, 0.2).item() == pytest.approx(0.0, abs=1e-5)


@pytest.mark.parametrize("lambda_p", [1e-4, 0.2, 0.999, 1.0])
@pytest.mark.parametrize("n", [1, 2, 100])
def test_no_nan_extremes(lambda_p, n):
    # logits at +-50 (p underflows to 0 for most steps), N up to 100, lambda_p in (0, 1]
    for l in (torch.full((n, 3), 50.0), torch.full((n, 3), -50.0), (torch.rand(n, 3) - 0.5) * 100):
        l.requires_grad_(True)
        log_p = halting_log_probs(l)
        assert torch.isfinite(log_p).all()
        assert torch.allclose(log_p.exp().sum(0), torch.ones(3), atol=1e-5)
        total, rec, reg = ponder_loss(torch.rand(n, 3), log_p, lambda_p, 0.01)
        assert torch.isfinite(total) and reg.item() >= -1e-5
        total.backward()
        assert torch.isfinite(l.grad).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_logits_computed_in_fp32(dtype):
    l = ((torch.rand(100, 16) - 0.5) * 100).to(dtype)
    log_p = halting_log_probs(l)
    assert log_p.dtype == torch.float32
    assert torch.isfinite(log_p).all()
    assert torch.allclose(log_p.exp().sum(0), torch.ones(16), atol=1e-5)


def test_bad_lambda_p_rejected():
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="lambda_p"):
            log_geometric_prior(bad, 5)


# ----------------------------------------------------------------------------- KL(p_G || p), the reverse direction

def test_reverse_kl_n3_by_hand():
    # lambda = (0.25, 0.5, forced 1) -> p = (0.25, 0.375, 0.375); prior lambda_p = 0.5, N = 3 -> (4/7, 2/7, 1/7)
    # KL(p_G || p) = 4/7 ln((4/7)/0.25) + 2/7 ln((2/7)/0.375) + 1/7 ln((1/7)/0.375)
    #             = 4/7 ln(16/7) + 2/7 ln(16/21) + 1/7 ln(8/21)
    #             = 0.571429 (0.826679) + 0.285714 (-0.271934) + 0.142857 (-0.965081)
    #             = 0.472388 - 0.077695 - 0.137869 = 0.256824
    log_p = halting_log_probs(torch.tensor([[logit(0.25)], [0.0], [0.0]]))
    assert kl_to_prior(log_p, 0.5, "kl-reverse").item() == pytest.approx(0.256824, abs=1e-5)
    # and the paper's direction on the same p is 0.257211 (tests/test_losses.py): close here, not equal
    assert kl_to_prior(log_p, 0.5, "kl").item() == pytest.approx(0.257211, abs=1e-5)


def test_reverse_kl_n2_by_hand():
    # p = (0.25, 0.75); prior lambda_p = 0.5, N = 2 -> (2/3, 1/3)
    # KL(p_G || p) = 2/3 ln((2/3)/0.25) + 1/3 ln((1/3)/0.75) = 2/3 ln(8/3) + 1/3 ln(4/9)
    #             = 0.666667 (0.980829) + 0.333333 (-0.810930) = 0.653886 - 0.270310 = 0.383576
    # KL(p || p_G) = 0.25 ln(0.25/(2/3)) + 0.75 ln(0.75/(1/3)) = 0.25 ln(0.375) + 0.75 ln(2.25)
    #             = 0.25 (-0.980829) + 0.75 (0.810930) = -0.245207 + 0.608198 = 0.362990
    log_p = halting_log_probs(torch.tensor([[logit(0.25)], [0.0]]))
    assert kl_to_prior(log_p, 0.5, "kl-reverse").item() == pytest.approx(0.383576, abs=1e-5)
    assert kl_to_prior(log_p, 0.5, "kl").item() == pytest.approx(0.362990, abs=1e-5)
    # kl-both, the sum: 0.383576 + 0.362990 = 0.746566
    assert kl_to_prior(log_p, 0.5, "kl-both").item() == pytest.approx(0.746566, abs=1e-5)


def test_both_prices_late_steps_and_reverse_hardly_does():
    # p all on step N = 20 against the prior lambda_p = 0.5: the reverse direction charges
    # sum_n p_G(n) log(p_G(n) / p_n), finite because p_n > 0 from the sigmoids, while the forward one charges
    # log(1 / p_G(20)) ~ 19 ln 2 = 13.2 more than the same p on step 1 would; kl-both keeps that price
    late = halting_log_probs(torch.full((20, 1), -30.0))               # p ~ point mass on step 20
    early = halting_log_probs(torch.full((20, 1), 30.0))               # p ~ point mass on step 1
    fwd = kl_to_prior(late, 0.5, "kl").item() - kl_to_prior(early, 0.5, "kl").item()
    assert fwd == pytest.approx(19 * math.log(2), abs=1e-2)
    both = kl_to_prior(late, 0.5, "kl-both").item() - kl_to_prior(early, 0.5, "kl-both").item()
    rev = kl_to_prior(late, 0.5, "kl-reverse").item() - kl_to_prior(early, 0.5, "kl-reverse").item()
    assert both == pytest.approx(fwd + rev, abs=1e-3)


def test_against_torch_kl_div_with_arguments_in_order():
    torch.manual_seed(0)
    log_p = halting_log_probs(torch.randn(12, 7) * 2)                   # [N, B]
    log_prior = log_geometric_prior(0.3, 12)                            # [N]
    prior = log_prior.exp().unsqueeze(1).expand_as(log_p)
    # F.kl_div(input, target) = sum target (log target - input) = KL(target || exp(input))
    reverse = F.kl_div(log_p.T, prior.T, reduction="batchmean")          # KL(p_G || p)
    forward = F.kl_div(prior.log().T, log_p.T, reduction="batchmean", log_target=True)   # KL(p || p_G)
    assert kl_to_prior(log_p, 0.3, "kl-reverse").item() == pytest.approx(reverse.item(), rel=1e-5)
    assert kl_to_prior(log_p, 0.3, "kl").item() == pytest.approx(forward.item(), rel=1e-5)
    assert abs(reverse.item() - forward.item()) > 1e-3                 # they are different numbers here


def test_reverse_is_finite_where_p_underflows():
    # lambda logits +50 at step 1: p_1 ~ 1, p_n>1 ~ e^-50 .. underflow to 0 in float32 after a few steps
    logits = torch.full((100, 4), 50.0, requires_grad=True)
    log_p = halting_log_probs(logits)
    assert (log_p.exp()[5:] == 0).all()                                 # really underflowed
    for reg in ("kl", "kl-reverse", "kl-both"):
        loss, rec, kl = ponder_loss(torch.ones(100, 4), log_p, 0.2, 0.01, reg)
        assert torch.isfinite(loss) and torch.isfinite(kl)
        (g,) = torch.autograd.grad(loss, logits, retain_graph=True)
        assert torch.isfinite(g).all()
    # the reverse direction charges a large, finite price for putting ~0 where the prior has mass
    assert kl_to_prior(log_p, 0.2, "kl-reverse").item() > 100 > kl_to_prior(log_p, 0.2, "kl").item()


def _hazards_of(log_prior):
    """lambda logits whose halting distribution is exactly the given one: lambda_n = p_n / P(n <= halt)."""
    p = log_prior.double().exp()
    tail = p.flip(0).cumsum(0).flip(0)                                  # P(halt >= n)
    lam = (p / tail).clamp(1e-12, 1 - 1e-12)
    return torch.log(lam / (1 - lam)).float().unsqueeze(1)             # [N, 1]


@settings(max_examples=30, deadline=None)
@given(lp=st.floats(0.02, 0.95), n=st.integers(2, 40), noise=st.floats(0.0, 3.0), seed=st.integers(0, 1000))
def test_both_are_divergences(lp, n, noise, seed):
    """>= 0 for any p, 0 exactly at the prior, in both directions and their sum."""
    log_prior = log_geometric_prior(lp, n)
    at_prior = halting_log_probs(_hazards_of(log_prior))
    torch.manual_seed(seed)
    other = halting_log_probs(_hazards_of(log_prior) + noise * torch.randn(n, 1))
    for reg in ("kl", "kl-reverse", "kl-both"):
        assert kl_to_prior(at_prior, lp, reg).item() == pytest.approx(0.0, abs=1e-4)
        assert kl_to_prior(other, lp, reg).item() >= -1e-5


def test_unknown_regulariser_is_refused():
    with pytest.raises(ValueError, match="regulariser"):
        kl_to_prior(torch.zeros(3, 2), 0.5, "kl-backwards")


# ----------------------------------------------------------------------------- train_loss: answers and halting apart

def test_accuracy_minus_compute_by_hand():
    # N = 2, lambda_1 = 0.5 -> p = (0.5, 0.5); step 1 wrong, step 2 right; c = 0.1
    # gain = (0 - 0.1 * 1, 1 - 0.1 * 2) = (-0.1, 0.8); loss = -(0.5 * -0.1 + 0.5 * 0.8) = -0.35
    # loss(l) = -(sigma(l) (-0.1) + (1 - sigma(l)) 0.8), d/dl = -sigma'(l) (-0.1 - 0.8) = 0.25 * 0.9 = 0.225 at l = 0:
    # a positive gradient, so descent lowers lambda_1 and moves mass to the right step
    l = torch.zeros(2, 1, requires_grad=True)
    loss = accuracy_minus_compute(torch.tensor([[False], [True]]), halting_log_probs(l), 0.1)
    loss.backward()
    assert loss.item() == pytest.approx(-0.35)
    assert l.grad[0, 0].item() == pytest.approx(0.225) and l.grad[1, 0].item() == 0.0   # lambda_N = 1 whatever l_N


def test_accuracy_minus_compute_prices_steps_when_both_are_right():
    # right at both steps, c = 0.1: gain (0.9, 0.8), loss -(0.5 * 0.9 + 0.5 * 0.8) = -0.85; d/dl = -0.25 * 0.1 < 0,
    # so descent raises lambda_1: halting early is worth c
    l = torch.zeros(2, 1, requires_grad=True)
    loss = accuracy_minus_compute(torch.ones(2, 1, dtype=torch.bool), halting_log_probs(l), 0.1)
    loss.backward()
    assert loss.item() == pytest.approx(-0.85) and l.grad[0, 0].item() == pytest.approx(-0.025)


@pytest.mark.parametrize("halting_loss", ["ce", "accuracy", "exit"])
def test_deep_supervision_weighs_every_answer_1_over_n_and_the_halting_shapes_none(halting_loss):
    # N = 3, B = 2: d total / d L_n,b = 1 / (N B) = 1/6 for every step, whatever p is
    torch.manual_seed(0)
    step_losses = torch.rand(3, 2, requires_grad=True)
    logits = torch.randn(3, 2, requires_grad=True)
    correct = torch.tensor([[False, True], [True, True], [True, False]])
    total, rec, reg = train_loss(step_losses, correct, halting_log_probs(logits), 0.3, 0.01, "kl", "mean",
                                 halting_loss, 0.05, logits)
    total.backward()
    assert torch.allclose(step_losses.grad, torch.full((3, 2), 1 / 6))
    assert rec.item() == pytest.approx(step_losses.mean().item())
    assert logits.grad[:2].abs().sum() > 0                       # the halting still learns


def test_deep_supervised_ce_halting_is_the_papers_on_the_lambdas():
    # answer_loss "mean", halting_loss "ce": the lambdas get the gradient of sum_n p_n L_n + beta KL, as in the paper
    torch.manual_seed(1)
    step_losses, logits = torch.rand(4, 3), torch.randn(4, 3, requires_grad=True)
    train_loss(step_losses, None, halting_log_probs(logits), 0.3, 0.01, "kl", "mean", "ce")[0].backward()
    ours = logits.grad.clone()
    logits.grad = None
    ponder_loss(step_losses, halting_log_probs(logits), 0.3, 0.01, "kl")[0].backward()
    assert torch.allclose(ours, logits.grad, atol=1e-6)


def test_the_papers_answer_loss_is_ponder_loss():
    torch.manual_seed(2)
    step_losses, log_p = torch.rand(4, 3), halting_log_probs(torch.randn(4, 3))
    ours = train_loss(step_losses, None, log_p, 0.3, 0.05, "kl-both")
    theirs = ponder_loss(step_losses, log_p, 0.3, 0.05, "kl-both")
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))


def test_train_loss_refuses_what_trains_no_answer():
    z = torch.zeros(3, 2)
    with pytest.raises(ValueError, match="halting_loss must be 'ce'"):
        train_loss(z, z.bool(), z, 0.5, 0.0, "kl", "halting", "accuracy")
    with pytest.raises(ValueError, match="answer_loss"):
        train_loss(z, z.bool(), z, 0.5, 0.0, "kl", "sum", "ce")
    with pytest.raises(ValueError, match="halting_loss"):
        train_loss(z, z.bool(), z, 0.5, 0.0, "kl", "mean", "stop")


def test_settled_is_right_from_step_n_to_the_end():
    correct = torch.tensor([[1, 0, 1], [0, 1, 1], [1, 1, 1]]).bool()       # [N = 3, B = 3]
    # input 0: right, wrong, right -> settled only at step 3; input 1: from step 2; input 2: from step 1
    assert settled(correct).tolist() == [[False, False, True], [False, True, True], [True, True, True]]


def test_exit_loss_by_hand():
    # N = 3, B = 1, right at steps 2 and 3: targets for lambda_1, lambda_2 are (0, 1); step 3's lambda is 1 anyway.
    # logits (0, 0): BCE = log 2 each, mean log 2; logits (-2, 2): BCE = log(1 + e^-2) each = 0.126928
    correct = torch.tensor([[False], [True], [True]])
    assert exit_loss(correct, torch.zeros(3, 1)).item() == pytest.approx(math.log(2))
    assert exit_loss(correct, torch.tensor([[-2.0], [2.0], [-9.0]])).item() == pytest.approx(math.log(1 + math.exp(-2)))
    # its gradient does not vanish where p_n is ~0: lambda_1 ~ 1 (p_2 ~ 0) still moves lambda_2 towards 1
    l = torch.tensor([[20.0], [-3.0], [0.0]], requires_grad=True)
    exit_loss(correct, l).backward()
    assert halting_log_probs(l.detach()).exp()[1, 0] < 1e-8 and l.grad[1, 0].item() < -0.4
