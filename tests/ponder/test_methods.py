"""ponder/methods.py: the halting-method table. ACT's halting and ponder cost worked by hand, its lambda logits
giving exactly its p, each method's loss, and each method's answer at inference (ponder.inference.ponder)."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

from helpers import tiny_model
from ponder.config import ConfigError
from ponder.halting import halting_log_probs
from ponder.inference import ponder
from ponder.methods import (HALT_LOGIT, METHODS, act_halting, act_logits, act_loss_of, deep_loss_of, get_method,
                            mean_field, repeat_loss_of)
from ponder.tasks import train_config, validate


def logit(p):
    return math.log(p / (1 - p))


# halting units h = 0.5, 0.3, 0.4, 0.9 for one input: with eps = 0.01 the sums are 0.5, 0.8, 1.2 -> N(t) = 3 (the
# first sum >= 0.99); R = 1 - (0.5 + 0.3) = 0.2; p = (0.5, 0.3, 0.2, 0)
H = [0.5, 0.3, 0.4, 0.9]
U = torch.tensor([[logit(h)] for h in H])                                    # [N = 4, B = 1]


def test_act_halts_where_its_units_sum_to_one_minus_eps_and_gives_the_remainder_there():
    n_t, p = act_halting(U, 0.01)
    assert n_t.tolist() == [3]
    assert torch.allclose(p[:, 0], torch.tensor([0.5, 0.3, 0.2, 0.0]), atol=1e-6)


def test_acts_lambda_logits_give_its_p_through_the_one_halting_formula():
    # lambda_1 = 0.5, lambda_2 = 0.3 / (1 - 0.5) = 0.6, lambda_3 = 1 (+HALT_LOGIT), and +HALT_LOGIT after
    lam = act_logits(U, 0.01)
    assert torch.allclose(torch.sigmoid(lam[:2, 0]), torch.tensor([0.5, 0.6]), atol=1e-6)
    assert (lam[2:, 0] == HALT_LOGIT).all()
    assert torch.allclose(halting_log_probs(lam).exp()[:, 0], torch.tensor([0.5, 0.3, 0.2, 0.0]), atol=1e-6)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 12), b=st.integers(1, 6), eps=st.floats(1e-4, 0.5), seed=st.integers(0, 2**16),
       scale=st.floats(0.1, 6.0))
def test_acts_lambda_logits_reproduce_its_halting_distribution_for_any_units(n, b, eps, seed, scale):
    u = torch.randn(n, b, generator=torch.Generator().manual_seed(seed)) * scale
    n_t, p = act_halting(u, eps)
    assert torch.allclose(p.sum(0), torch.ones(b), atol=1e-5) and (p >= 0).all()
    assert ((torch.arange(1, n + 1).unsqueeze(1) > n_t) <= (p == 0)).all()       # nothing after N(t)
    assert torch.allclose(halting_log_probs(act_logits(u, eps)).exp(), p, atol=1e-5)


class _Fn:
    """The step function's per-sample loss and nothing else (ACT's loss reads only step_fn.loss)."""

    @staticmethod
    def loss(y, target):
        return F.binary_cross_entropy_with_logits(y, target, reduction="none")


def _cfg(**kw):
    return validate(train_config("parity", **kw))


def test_acts_loss_is_the_mean_fields_loss_plus_tau_times_its_ponder_cost():
    y = torch.tensor([[2.0], [-1.0], [4.0], [9.0]])                           # [N, B] output logits
    lam = act_logits(U, 0.01)
    log_p = halting_log_probs(lam)
    cfg = _cfg(method="act", beta=0.1)
    parts = act_loss_of(None, y, torch.tensor([1.0]), log_p, lam, None, cfg, 1.0, _Fn)
    mixed = 0.5 * 2.0 + 0.3 * -1.0 + 0.2 * 4.0                                  # sum_n p_n y_n = 1.5
    assert parts.rec.item() == pytest.approx(math.log1p(math.exp(-mixed)), abs=1e-5)    # BCE(1.5, 1)
    assert parts.reg.item() == pytest.approx(3 + 0.2, abs=1e-5)                 # N(t) + R
    assert parts.total.item() == pytest.approx(parts.rec.item() + 0.1 * 3.2, abs=1e-5)


def test_acts_ponder_cost_trains_the_halting_units_through_the_remainder_only():
    # R = 1 - h_1 - h_2: dR/du_1 = -h_1 (1 - h_1) = -0.25, dR/du_2 = -0.21, and nothing for u_3, u_4
    u = U.clone().requires_grad_(True)
    lam = act_logits(u, 0.01)
    parts = act_loss_of(None, torch.zeros(4, 1), torch.tensor([1.0]), halting_log_probs(lam), lam, None,
                        _cfg(method="act"), 1.0, _Fn)
    (g,) = torch.autograd.grad(parts.reg, u)
    assert torch.allclose(g[:, 0], torch.tensor([-0.25, -0.21, 0.0, 0.0]), atol=1e-5)


def test_repeat_trains_the_last_step_and_deep_supervision_every_step_alike():
    losses = torch.tensor([[1.0, 3.0], [0.5, 0.5], [0.2, 0.0]])               # [N = 3, B = 2]
    cfg = _cfg(method="repeat")
    assert repeat_loss_of(losses, None, None, None, None, None, cfg, 1.0, None).total.item() == pytest.approx(0.1)
    assert deep_loss_of(losses, None, None, None, None, None, cfg, 1.0, None).total.item() == pytest.approx(5.2 / 6)


@pytest.mark.parametrize("name", ["repeat", "deep"])
def test_a_method_without_learned_halting_puts_all_mass_on_step_n(name):
    model = tiny_model("parity", max_steps=5, method=name)
    with torch.no_grad():
        out = model(torch.randint(-1, 2, (7, 8)).float())
    assert torch.allclose(out.log_p.exp()[-1], torch.ones(7), atol=1e-6)


def test_every_method_has_its_words_and_the_config_checks_the_name():
    for name, m in METHODS.items():
        assert m.label and m.choice and m.help and get_method(name) is m
    with pytest.raises(ConfigError, match="method must be one of ponder, act, repeat, deep, got 'pondr'"):
        _cfg(method="pondr")
    with pytest.raises(ConfigError, match="answer_loss must be 'halting' with method 'act'"):
        _cfg(method="act", answer_loss="mean")
    with pytest.raises(ConfigError, match="act_epsilon must be in"):
        _cfg(method="act", act_epsilon=0.0)


def test_act_answers_its_mean_field_where_its_p_ends():
    model = tiny_model("parity", max_steps=6, method="act", act_epsilon=0.05, lambda_std=3.0)
    x = torch.randint(-1, 2, (9, 8), generator=torch.Generator().manual_seed(3)).float()
    res = ponder(model, x, "sample", trace=True)
    with torch.no_grad():
        out = model(x)
    p = out.log_p.exp()
    mixed = torch.sigmoid(mean_field(out.y, p))                                 # [B] P(odd)
    assert torch.allclose(res.probs[:, 1], mixed, atol=1e-5)
    steps_with_mass = (p > 1e-9).float().cumsum(0).argmax(0) + 1               # the last step holding mass
    assert torch.equal(res.halt_step, steps_with_mass)
    assert res.trace_p.isnan().sum().item() == sum(6 - int(s) for s in res.halt_step)


def test_repeat_answers_the_last_step_in_every_mode():
    model = tiny_model("parity", max_steps=4, method="repeat")
    x = torch.randint(-1, 2, (5, 8)).float()
    with torch.no_grad():
        last = torch.sigmoid(model(x).y[-1])
    for mode in ("sample", "deterministic"):
        res = ponder(model, x, mode)
        assert (res.halt_step == 4).all() and torch.allclose(res.probs[:, 1], last, atol=1e-6)
