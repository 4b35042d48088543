"""ponder/tasks/mnist/recall.py: the recall step function sees the whole image every step, each position's
receptive field grows by one cell of the 14 x 14 grid (4 image pixels) a step, unroll() equals step() calls,
and early exit equals a full unroll."""
import pytest
import torch

from helpers import tiny_model
from ponder.config import TrainConfig
from ponder.halting import first_true, halt_mask
from ponder.inference import ponder
from ponder.tasks import build_model, model_config, model_config_dict, validate
from ponder.tasks.mnist.recall import RecallStep, receptive_field


def recall(max_steps=6, **kw):
    return tiny_model("mnist", max_steps=max_steps, reader="recall", **kw)


def test_shapes_and_unroll_equals_steps():
    model = recall()
    fn = model.step_fn
    x = torch.randn(5, 1, 28, 28)
    ctx = fn.encode(x)
    assert ctx.shape == (5, 4, 14, 14)                           # channels1 = 4 on the stride-2 grid
    h, ys, ls = fn.init_hidden(ctx), [], []
    for n in range(6):
        y, h, l = fn.step(ctx, h, n)
        ys.append(y)
        ls.append(l)
    y_all, l_all = fn.unroll(ctx, fn.init_hidden(ctx), 6)
    assert y_all.shape == (6, 5, 10) and l_all.shape == (6, 5)
    assert torch.allclose(y_all, torch.stack(ys), atol=1e-6) and torch.allclose(l_all, torch.stack(ls), atol=1e-6)
    out = model(x)
    assert torch.allclose(out.log_p.exp().sum(0), torch.ones(5), atol=1e-5)


@pytest.mark.parametrize("steps", [1, 2, 4])
def test_the_state_sees_one_more_cell_each_step(steps):
    # A change at image pixel (0, 0) reaches the stem's cells 0 and 1 (5x5 kernel, stride 2, padding 2: cell i
    # covers image rows 2i - 2 .. 2i + 2), the input's 3x3 conv cells 0..2, and each step's 3x3 conv one cell
    # further: after step n (1-based) the state has changed at cells 0..n + 1 and nowhere past them.
    torch.manual_seed(0)
    fn = RecallStep(model_config(TrainConfig(reader="recall")), 0.2)
    with torch.no_grad():
        fn.block.weight.abs_()                               # positive weights: a change does not die in a relu
        fn.inject.weight.abs_()
        fn.stem.weight.abs_()
        x = torch.zeros(1, 1, 28, 28)
        bumped = x.clone()
        bumped[..., 0, 0] = 1.0
        states = []
        for img in (x, bumped):
            ctx = fn.encode(img)
            h = fn.init_hidden(ctx)
            for n in range(steps):
                h = fn.update(ctx, h)
            states.append(h)
    changed = (states[0] - states[1]).abs().amax(1)[0] > 0      # [14, 14]
    reach = steps + 1
    assert changed[: reach + 1, : reach + 1].all()
    assert not changed[reach + 1:].any() and not changed[:, reach + 1:].any()
    # in image pixels: cell reach spans rows 2 reach - 2 .. 2 reach + 2, so the field is 2 reach + 3 = 5 + 4n / 2
    # wide on one side of the pixel; the field a position has seen is 5 + 4 n square
    assert receptive_field(steps - 1) == min(5 + 4 * steps, 28)


def test_receptive_field_and_labels():
    assert [receptive_field(n) for n in (0, 1, 4, 5, 30)] == [9, 13, 25, 28, 28]
    fn = recall().step_fn
    assert fn.view_label(0) == "each position has seen 9×9 px"
    assert fn.view_label(5) == "each position has seen the whole image"
    assert not hasattr(fn, "view")                               # every step sees the whole image


@pytest.mark.parametrize("mode", ["sample", "deterministic"])
def test_early_exit_equals_full_unroll(mode):
    model = recall(max_steps=8, lambda_std=3.0)
    x = torch.randn(40, 1, 28, 28)
    with torch.no_grad():                                        # the pooled relu states are >= 0: centre the
        model.step_fn.lambda_head.bias -= model(x).lambda_logits.median() + 1.0   # logits so halting varies
    u = torch.rand(8, 40, generator=torch.Generator().manual_seed(1))
    res = ponder(model, x, mode, uniforms=u if mode == "sample" else None)
    with torch.no_grad():
        out = model(x)
    steps = first_true(halt_mask(out.lambda_logits, mode, u if mode == "sample" else None))
    assert torch.equal(res.halt_step, steps)
    assert len(set(steps.tolist())) > 1
    ref = torch.softmax(out.y, -1)[steps - 1, torch.arange(40)]
    assert torch.allclose(res.probs, ref, atol=1e-5)


def test_config_round_trip():
    cfg = validate(TrainConfig(reader="recall"))
    model = build_model("mnist", model_config(cfg), 10, 0.2)
    assert isinstance(model.step_fn, RecallStep)
    again = build_model("mnist", model_config_dict(model), 10, 0.2)
    again.load_state_dict(model.state_dict())
    x = torch.randn(3, 1, 28, 28)
    with torch.no_grad():
        assert torch.equal(model(x).y, again(x).y)
