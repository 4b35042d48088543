"""ponder/halt_features.py: the features the lambda head may read (worked by hand), the feature heads, the same
lambdas from a full unroll, the paper's N and early exit, and the options through the CLI."""
import json

import pytest
import torch

from helpers import run_cli, tiny_model
from ponder.halt_features import (LAMBDA_HEADS, LOGIT_SCALE, Tracker, features, make_head, next_run, runs,
                                  state_change)
from ponder.halting import PonderNet, first_true, halt_mask
from ponder.inference import draw_uniforms, ponder


def test_runs_count_the_steps_the_answer_has_held():
    # classes over 5 steps: 2, 2, 0, 0, 0 -> r = 1, 2, 1, 2, 3
    cls = torch.tensor([2, 2, 0, 0, 0])
    probs = torch.nn.functional.one_hot(cls, 3).float().unsqueeze(1)            # [5, 1, 3]
    assert runs(probs)[:, 0].tolist() == [1, 2, 1, 2, 3]
    assert next_run(torch.tensor([1, 4]), torch.tensor([1, 3]), torch.tensor([5.0, 5.0])).tolist() == [6.0, 1.0]


def test_state_change_by_hand():
    # h_n = (3, 0), h_{n+1} = (3, 4): ||(0, 4)|| / ||(3, 4)|| = 4/5; from h_1 = 0 the change is 1
    h_old, h_new = torch.tensor([[3.0, 0.0]]), torch.tensor([[3.0, 4.0]])
    assert state_change(h_new, h_old).tolist() == pytest.approx([0.8])
    assert state_change(h_new, torch.zeros_like(h_new)).tolist() == pytest.approx([1.0])


def test_stability_features_by_hand():
    # P_n = (0.8, 0.1, 0.1) after P_{n-1} = (0.5, 0.3, 0.2): confidence 0.8, TV 1/2 (0.3 + 0.2 + 0.1) = 0.3,
    # logit(0.8) / 10 = ln 4 / 10 = 0.138629, r = 4 -> 1 - 1/4 = 0.75, change 0.2
    f = features("stability", torch.tensor([[0.8, 0.1, 0.1]]), torch.tensor([[0.5, 0.3, 0.2]]),
                 torch.tensor([4.0]), torch.tensor([0.2]))
    assert f[0].tolist() == pytest.approx([0.8, 0.3, 0.138629, 0.75, 0.2], abs=1e-5)
    assert LOGIT_SCALE == 10.0
    conf = features("confidence", torch.tensor([[0.8, 0.1, 0.1]]), torch.tensor([[0.5, 0.3, 0.2]]))
    assert conf[0].tolist() == pytest.approx([0.8, 0.3])


@pytest.mark.parametrize("head", LAMBDA_HEADS)
def test_a_fresh_head_adds_nothing_and_a_bad_head_is_refused(head):
    h = make_head("stability", head)
    assert h(torch.rand(7, 5)).abs().max() == 0
    with pytest.raises(ValueError, match="lambda_head"):
        make_head("stability", "deep")


def test_a_fresh_stability_head_halts_like_the_hidden_one():
    plain = tiny_model("mnist", max_steps=6, reader="recall")
    for head in ("linear", "mlp"):
        m = PonderNet(plain.step_fn, 6, plain.lambda_p, lambda_input="stability", lambda_head=head).eval()
        x = torch.rand(8, 1, 28, 28)
        with torch.no_grad():
            assert torch.allclose(plain(x).lambda_logits, m(x).lambda_logits, atol=1e-6)


def test_a_features_only_head_starts_at_the_prior_and_never_reads_the_steps_head():
    # mlp-only: lambda_n = sigma(g(f_n)), g's bias logit(lambda_p) and its last weights 0: every lambda_n is 0.3
    m = tiny_model("mnist", max_steps=6, lambda_p=0.3, reader="recall", lambda_input="stability",
                   lambda_head="mlp-only", lambda_std=0)
    x = torch.rand(8, 1, 28, 28)
    with torch.no_grad():
        before = m(x).lambdas
        assert torch.allclose(before[:-1], torch.full((5, 8), 0.3), atol=1e-6)
        m.step_fn.lambda_head.weight.add_(1.0)
        assert torch.equal(m(x).lambdas, before)


@pytest.mark.parametrize("task,kw", [("mnist", {"reader": "recall"}), ("parity", {})])
@pytest.mark.parametrize("mode", ["sample", "deterministic"])
@pytest.mark.parametrize("head", ["mlp", "mlp-only"])
def test_early_exit_and_the_papers_n_read_the_features_as_the_full_unroll(task, kw, mode, head):
    model = tiny_model(task, max_steps=8, lambda_p=0.3, lambda_input="stability", lambda_head=head, seed=1, **kw)
    x = torch.rand(64, 1, 28, 28) if task == "mnist" else torch.randint(-1, 2, (64, 8)).float()
    with torch.no_grad():
        out = model(x)
        eps = model(x, halt_epsilon=1e-6)
    # the paper's N: the steps it ran are a prefix of the full unroll with the same lambdas before the last
    n = eps.lambda_logits.shape[0]
    assert torch.allclose(eps.lambda_logits[:-1], out.lambda_logits[:n - 1], atol=1e-5)
    u = draw_uniforms(8, 64, torch.Generator().manual_seed(3))
    res = ponder(model, x, mode, uniforms=u, trace=True)
    steps = first_true(halt_mask(out.lambda_logits, mode, u))                     # [B]
    # halting varies (features-only on untrained answers, near-equal for every input: only the drawn halts vary)
    assert len(steps.unique()) >= 2 or (head, mode) == ("mlp-only", "deterministic")
    assert torch.equal(res.halt_step, steps)
    for b in range(64):
        assert torch.allclose(res.trace_lambda[:steps[b], b], out.lambdas[:steps[b], b], atol=1e-5)


def test_the_tracker_keeps_the_inputs_still_running():
    t = Tracker("stability")
    p = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]])
    h0, h1 = torch.zeros(3, 2), torch.ones(3, 2)
    t.feats(p, h1, h0)
    t.keep(torch.tensor([0, 2]))
    f = t.feats(torch.tensor([[0.9, 0.1], [0.3, 0.7]]), 2 * torch.ones(2, 2), torch.ones(2, 2))
    # input 0 held its class (r = 2: 0.5), input 2 changed it (r = 1: 0); both states moved ||1|| / ||2|| = 0.5
    assert f[:, 3].tolist() == [0.5, 0.0] and f[:, 4].tolist() == pytest.approx([0.5, 0.5])
    assert f[:, 1].tolist() == pytest.approx([0.0, 0.3])                          # TV from each one's own P_{n-1}


def test_the_features_are_detached_and_the_head_learns():
    model = tiny_model("mnist", max_steps=5, reader="recall", lambda_input="stability", lambda_head="mlp").train()
    model(torch.rand(8, 1, 28, 28)).lambda_logits.sum().backward()
    assert model.step_fn.out_head.weight.grad is None or not model.step_fn.out_head.weight.grad.any()
    assert model.confidence_head[-1].weight.grad.abs().sum() > 0


@pytest.mark.long
def test_cli_trains_and_reloads_a_stability_mlp_head(tmp_path, capsys, mnist):
    from ponder.store.checkpoint import load_checkpoint
    out = tmp_path / "run"
    rc, _, err = run_cli(["train", "--task", "mnist", "--reader", "recall", "--max-steps", "4", "--epochs", "0.004",
                          "--answer-loss", "mean", "--halting-loss", "exit", "--beta", "0", "--lambda-input",
                          "stability", "--lambda-head", "mlp", "--out", str(out), "--quiet", "--no-eval",
                          "--threads", "1"], capsys)
    assert rc == 0, err
    train = json.loads((out / "run.json").read_text())["train"]
    assert (train["lambda_input"], train["lambda_head"]) == ("stability", "mlp")
    model = load_checkpoint(out).model
    assert isinstance(model.confidence_head, torch.nn.Sequential) and model.needs_change
