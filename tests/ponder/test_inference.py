"""ponder/inference.py's early-exit loop with a split step (a step function's stepper(): the state and lambda_n a
step, the answer once on the halting states): the halting steps and answers of the step-by-step reference loop and
of a full unroll, on every batch size from 1; what a step costs (no answer head, no gather at one input)."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from helpers import tiny_model
from ponder.halting import first_true, halt_mask
from ponder.inference import PlainStep, draw_uniforms, ponder

DESIGNS = [("mnist", {"reader": "cnn"}), ("mnist", {"reader": "rows"}), ("mnist", {"reader": "rows", "rows_per_step": 4}),
           ("mnist", {"reader": "coarse"}), ("parity", {}), ("parity", {"cell": "tanh", "first_flag": True})]


def _inputs(task, b, seed=0):
    g = torch.Generator().manual_seed(seed)
    if task == "mnist":
        return torch.randn(b, 1, 28, 28, generator=g)
    return torch.randint(-1, 2, (b, 8), generator=g).float()


@pytest.mark.parametrize("task,kw", DESIGNS)
def test_a_stepper_gives_the_state_lambda_and_answer_of_step(task, kw):
    """s(c, h, n) -> (h_{n+1}, lambda_logit_n, h_{n+1}) and s.answer(h_{n+1}) = y_n: the values of step(c, h, n),
    bit for bit (the same operators on the same rows), at every step including past the last level."""
    model = tiny_model(task, max_steps=20, **kw)
    fn = model.step_fn
    with torch.no_grad():
        ctx = fn.encode(_inputs(task, 5))
        h = h_ref = fn.init_hidden(ctx)
        s = fn.stepper(ctx)
        for n in range(20):
            y_ref, h_ref, l_ref = fn.step(ctx, h_ref, n)
            h, l, kept = s(ctx, h, n)
            assert torch.equal(h, h_ref) and torch.equal(l, l_ref) and kept is h
            assert torch.equal(s.answer(h), y_ref)


@pytest.mark.parametrize("reader", ["cnn", "rows", "coarse"])
def test_a_stepper_gives_steps_values_on_the_fused_gru_path_too(reader, monkeypatch):
    """On CUDA GruUpdate runs the fused kernel on its own gate layout (here its equations stand in for it on CPU):
    the stepper splits the gates for it as step() does."""
    from ponder.tasks.mnist import readers

    def kernel(ig, hg, hx):                                   # aten._thnn_fused_gru_cell's equations, no biases
        (i_r, i_z, i_n), (h_r, h_z, h_n) = ig.chunk(3, 1), hg.chunk(3, 1)
        r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        return n + z * (hx - n), None

    monkeypatch.setattr(readers, "fused_gru", lambda t: True)
    monkeypatch.setattr(readers, "fused_gru_cell", kernel)
    model = tiny_model("mnist", max_steps=16, reader=reader)
    fn = model.step_fn
    with torch.no_grad():
        ctx = fn.encode(_inputs("mnist", 3))
        h = h_ref = fn.init_hidden(ctx)
        s = fn.stepper(ctx)
        assert s.upd.fused
        for n in range(16):
            y_ref, h_ref, l_ref = fn.step(ctx, h_ref, n)
            h, l, _ = s(ctx, h, n)
            assert torch.equal(h, h_ref) and torch.equal(l, l_ref) and torch.equal(s.answer(h), y_ref)


def _reference(model, x, mode, u):
    """The loop with the step function's own step() every step (PlainStep), the answer kept at each halt."""
    fn = model.step_fn
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(type(fn), "stepper", lambda self, ctx: PlainStep(self))
        return ponder(model, x, mode, uniforms=u)


@settings(max_examples=30, deadline=None)
@given(design=st.sampled_from(DESIGNS), mode=st.sampled_from(["sample", "deterministic"]),
       seed=st.integers(0, 2**16), n_steps=st.integers(1, 9), batch=st.one_of(st.just(1), st.integers(1, 40)))
def test_the_split_step_halts_and_answers_as_the_reference_loop_and_the_full_unroll(design, mode, seed, n_steps,
                                                                                      batch):
    task, kw = design
    model = tiny_model(task, max_steps=n_steps, lambda_p=0.3, seed=seed % 50, **kw)
    x = _inputs(task, batch, seed)
    u = draw_uniforms(n_steps, batch, torch.Generator().manual_seed(seed + 1))
    res = ponder(model, x, mode, uniforms=u)
    ref = _reference(model, x, mode, u)
    with torch.no_grad():
        out = model(x)
    steps = first_true(halt_mask(out.lambda_logits, mode, u))                     # [B]
    probs = model.step_fn.probs(out.y.flatten(0, 1)).view(n_steps, batch, -1)     # [N, B, C]
    gathered = probs[steps - 1, torch.arange(batch)]                              # [B, C]
    for r in (res, ref):
        assert torch.equal(r.halt_step, steps) and torch.equal(r.steps_run, steps)
        assert torch.equal(r.pred, gathered.argmax(1))
        assert torch.allclose(r.probs, gathered, atol=1e-5)
    assert torch.allclose(res.probs, ref.probs, atol=1e-6)


@pytest.mark.parametrize("task,kw", DESIGNS)
def test_a_seed_replays_the_reference_loops_draws(task, kw):
    """sample mode's seeded draws (draw_uniforms, all N x B up front) give the split step the reference loop's halts."""
    model = tiny_model(task, max_steps=8, lambda_p=0.3, **kw)
    x = _inputs(task, 33)
    res = ponder(model, x, "sample", generator=torch.Generator().manual_seed(5))
    ref = _reference(model, x, "sample", draw_uniforms(8, 33, torch.Generator().manual_seed(5)))
    assert len(res.halt_step.unique()) > 1                                       # halting varies
    assert torch.equal(res.halt_step, ref.halt_step) and torch.equal(res.pred, ref.pred)


def ops_run(fn):
    """The ATen operators fn() runs, by name, outermost and nested (the profiler's events, which start in well under
    a second where a Python dispatch mode's first use took seconds). Returns (fn(), names)."""
    with torch.autograd.profiler.profile() as prof:
        out = fn()
    return out, [e.name.removeprefix("aten::") for e in prof.function_events]


@pytest.mark.parametrize("task,kw", DESIGNS)
def test_the_answer_head_runs_once_on_the_halting_states(task, kw):
    model = tiny_model(task, max_steps=9, lambda_p=0.1, **kw)
    calls = []
    model.step_fn.out_head.register_forward_hook(lambda m, i, o: calls.append(i[0].shape[0]))
    res = ponder(model, _inputs(task, 16), "sample", generator=torch.Generator().manual_seed(0))
    assert res.halt_step.float().mean() > 2                                      # the loop ran several steps
    assert calls == [16]                                                         # once, for every input


@pytest.mark.parametrize("task,kw", DESIGNS)
@pytest.mark.parametrize("mode", ["sample", "deterministic"])
def test_one_input_runs_no_gather_or_scatter(task, kw, mode):
    """At one input per call nothing is compacted: no index, nonzero or scatter operator runs, whatever the step
    it halts at, and at most one host read a step (the halt test's)."""
    model = tiny_model(task, max_steps=9, lambda_p=0.1, **kw)
    x = _inputs(task, 1)
    res, names = ops_run(lambda: ponder(model, x, mode, generator=torch.Generator().manual_seed(1)))
    assert res.halt_step.item() > 1
    gathers = [n for n in names if n.startswith(("index", "nonzero", "masked", "scatter", "gather"))]
    assert gathers == []
    assert names.count("_local_scalar_dense") <= 1 + res.halt_step.item()       # the input check, then one a step
