"""ponder.tasks.mnist.levels: the readers' encodings built one level a step for early exit, against the one-pass
encode() and the full unroll (PonderNet.forward), on tiny models and on the shipped ones."""

import pytest
import torch

from helpers import ASSETS, tiny_model
from ponder.halting import first_true, halt_mask
from ponder.inference import draw_uniforms, ponder
from ponder.store.checkpoint import load_checkpoint
from ponder.tasks import get_task
from ponder.tasks.mnist import levels

READERS = [("rows", 2), ("rows", 4), ("rows", 14), ("rows", 28), ("coarse", 2)]


@pytest.fixture
def always_lazy(monkeypatch):
    monkeypatch.setattr(levels, "LAZY_MIN_BATCH", 1)


@pytest.fixture
def never_lazy(monkeypatch):
    monkeypatch.setattr(levels, "LAZY_MIN_BATCH", 10 ** 9)


@pytest.mark.parametrize("reader,rows", READERS)
def test_each_level_equals_the_one_pass_encoding_for_the_inputs_kept(reader, rows, always_lazy):
    """at(n, idx) is encode(x)[idx, min(n, L - 1)] while inputs leave the batch through keep()."""
    model = tiny_model("mnist", max_steps=18, reader=reader, rows_per_step=rows).eval()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(12, 1, 28, 28, generator=g)
    fn = model.step_fn
    with torch.no_grad():
        whole = fn.encode(x)                                              # [B, L, 3H]
        lv, idx = fn.lazy_encode(x), torch.arange(12)
        for n in range(18):
            got = lv.at(n, idx if len(idx) < 12 else None)               # [b, 1, 3H]
            want = whole[idx, min(n, whole.shape[1] - 1)].unsqueeze(1)
            assert got.shape == want.shape
            assert torch.allclose(got, want, atol=1e-5, rtol=1e-5), (n, (got - want).abs().max())
            if n % 3 == 1 and len(idx) > 2:                               # two inputs halt here
                pos = torch.randperm(len(idx), generator=g)[2:].sort().values
                idx = idx[pos]
                lv.keep(pos)


@pytest.mark.parametrize("reader,rows", READERS)
def test_no_level_is_encoded_for_inputs_that_halted(reader, rows, always_lazy):
    """The first convolution sees, at each level, exactly the inputs still running: none that halted, and no
    level past the last step anyone ran (the one-pass encoding ran it on every input at every level)."""
    model = tiny_model("mnist", max_steps=16, lambda_p=0.2, reader=reader, rows_per_step=rows, lambda_std=3.0).eval()
    torch.nn.init.zeros_(model.step_fn.lambda_head.bias)                 # lambda ~ 0.5: halting varies by input
    x = torch.randn(64, 1, 28, 28, generator=torch.Generator().manual_seed(3))
    u = draw_uniforms(16, 64, torch.Generator().manual_seed(4))
    seen = []
    hook = model.step_fn.conv1.register_forward_hook(lambda mod, inp, out: seen.append(inp[0].shape[0]))
    res = ponder(model, x, "sample", uniforms=u)
    hook.remove()
    L = 14 // (rows // 2) if reader == "rows" else len(model.step_fn.RESOLUTIONS)
    running = [int((res.halt_step > n).sum()) for n in range(L)]          # inputs that run step n + 1
    assert seen == [b for b in running if b]                             # the inputs running each level, no other
    assert L == 1 or sum(seen) < 64 * L                                  # halted inputs really were skipped
    assert len(set(res.halt_step.tolist())) > 2


def test_small_batches_encode_once(monkeypatch):
    """Below LAZY_MIN_BATCH inputs a step function's lazy_encode declines and ponder() encodes once."""
    model = tiny_model("mnist", max_steps=4, reader="rows").eval()
    calls = []
    encode = model.step_fn.encode
    monkeypatch.setattr(model.step_fn, "encode", lambda x: calls.append(len(x)) or encode(x))
    monkeypatch.setattr(levels, "LAZY_MIN_BATCH", 8)
    ponder(model, torch.randn(7, 1, 28, 28), "deterministic")
    assert calls == [7]
    ponder(model, torch.randn(8, 1, 28, 28), "deterministic")
    assert calls == [7]                                                  # 8 inputs: built one level a step


def _shipped_inputs(name, mnist, n):
    ck = load_checkpoint(ASSETS / name)
    data = mnist if ck.task == "mnist" else None
    return ck.model.eval(), get_task(ck.task).test_set(ck.model, ck.record.config, data, n).x[:n]


def _run(model, x, mode, u):
    return ponder(model, x, mode, uniforms=u if mode == "sample" else None, trace=True)


@pytest.mark.parametrize("name", ["mnist-adaptive", "parity-15", "mnist-default"])
@pytest.mark.parametrize("mode", ["sample", "deterministic"])
def test_shipped_models_answer_as_the_one_pass_encoding_and_the_full_unroll(name, mode, mnist, monkeypatch):
    """On real test inputs of the shipped rows-reader, parity and cnn-reader models, early exit built one level a
    step gives the halting steps, answers and traces of the one-pass encoding and of the full unroll, with the same
    uniforms (answers and traces to float rounding: the level-by-level convolutions round differently)."""
    model, x = _shipped_inputs(name, mnist, 400)
    N, B = model.max_steps, len(x)
    u = draw_uniforms(N, B, torch.Generator().manual_seed(0))
    monkeypatch.setattr(levels, "LAZY_MIN_BATCH", 1)
    lazy = _run(model, x, mode, u)
    monkeypatch.setattr(levels, "LAZY_MIN_BATCH", 10 ** 9)
    once = _run(model, x, mode, u)
    with torch.no_grad():
        out = model(x)
    steps = first_true(halt_mask(out.lambda_logits, mode, u if mode == "sample" else None))   # [B]
    probs = model.step_fn.probs(out.y.flatten(0, 1)).view(N, B, -1)                          # [N, B, C]
    ran = torch.arange(1, N + 1).unsqueeze(1) <= steps                                       # [N, B]
    nan = torch.tensor(float("nan"))
    assert len(set(steps.tolist())) > 1                                  # halting varies on these inputs
    for res in (lazy, once):
        assert torch.equal(res.halt_step, steps) and torch.equal(res.steps_run, steps)
        assert torch.equal(res.pred, probs[steps - 1, torch.arange(B)].argmax(1))
        assert torch.allclose(res.probs, probs[steps - 1, torch.arange(B)], atol=1e-5)
        assert torch.allclose(res.trace_p, torch.where(ran, out.log_p.exp(), nan), atol=1e-5, equal_nan=True)
        assert torch.allclose(res.trace_lambda, torch.where(ran, out.lambdas, nan), atol=1e-5, equal_nan=True)
        assert torch.allclose(res.trace_probs, torch.where(ran.unsqueeze(-1), probs, nan), atol=1e-5,
                              equal_nan=True)
    assert torch.equal(lazy.pred, once.pred)
    assert torch.allclose(lazy.trace_probs, once.trace_probs, atol=1e-5, equal_nan=True)
