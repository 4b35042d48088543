"""ponder/tasks/mnist/readers.py: MnistStep's speed-ups (precomputed GRU input projection, fused gates, one unroll)
give the values and gradients of nn.GRUCell run step by step on the same parameters; the readers whose
evidence grows with the steps ("rows", "coarse"): shapes, causality, early exit equal to a full
unroll, and a short training after which E[n] depends on the input."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from helpers import tiny_model
from ponder import data as D
from ponder.tasks.mnist.task import MnistConfig
from ponder.config import TrainConfig
from ponder.halting import expected_steps, first_true, halt_mask
from ponder.inference import ponder
from ponder.tasks.mnist import readers as mnist_readers
from ponder.tasks.mnist.readers import GruUpdate, RowReader
from ponder.tasks import build_model, model_config, validate
from ponder.training.loop import train


def test_mnist_step_equals_grucell_and_unroll_equals_steps():
    """encode() precomputes the GRU input projection, step() fuses the gates, unroll() applies the
    heads once: the same values as nn.GRUCell run step by step on the same parameters."""
    from ponder.tasks.mnist.task import MnistConfig
    from ponder.tasks import build_model
    torch.manual_seed(0)
    model = build_model("mnist", MnistConfig(channels1=4, channels2=8, embed=16, hidden=12), 6, 0.3).eval()
    torch.nn.init.normal_(model.step_fn.lambda_head.weight, std=1.0)
    fn, x = model.step_fn, torch.randn(9, 1, 28, 28)
    with torch.no_grad():
        e = fn.embed(x)
        h_ref = torch.zeros(9, 12)
        ctx, h = fn.encode(x), fn.init_hidden(fn.encode(x))
        ys, ls = [], []
        for n in range(6):
            h_ref = fn.cell(e, h_ref)
            y, h, l = fn.step(ctx, h, n)
            assert torch.allclose(h, h_ref, atol=1e-6)
            assert torch.allclose(y, fn.out_head(h_ref), atol=1e-6)
            ys.append(y)
            ls.append(l)
        out = model(x)                                      # PonderNet.forward -> MnistStep.unroll
    assert torch.allclose(out.y, torch.stack(ys), atol=1e-6)
    assert torch.allclose(out.lambda_logits, torch.stack(ls), atol=1e-6)


def test_mnist_gradients_match_grucell():
    from ponder.tasks.mnist.task import MnistConfig
    from ponder.tasks import build_model
    torch.manual_seed(1)
    model = build_model("mnist", MnistConfig(channels1=4, channels2=8, embed=16, hidden=12), 5, 0.3).train()
    x, fn = torch.randn(7, 1, 28, 28), model.step_fn
    out = model(x)
    (out.y.square().sum() + out.lambda_logits.sin().sum()).backward()
    new = {k: p.grad.clone() for k, p in model.named_parameters()}
    model.zero_grad()
    h, ys, ls = torch.zeros(7, 12), [], []
    e = fn.embed(x)
    for _ in range(5):
        h = fn.cell(e, h)
        ys.append(fn.out_head(h))
        ls.append(fn.lambda_head(h).squeeze(-1))
    (torch.stack(ys).square().sum() + torch.stack(ls).sin().sum()).backward()
    for k, p in model.named_parameters():
        assert torch.allclose(new[k], p.grad, atol=1e-5, rtol=1e-4), k


# ----------------------------------------------------------------------------- the fused GRU kernel (CUDA) and the hand update

def gru_kernel_equations(input_gates, hidden_gates, hx):
    """aten._thnn_fused_gru_cell without biases, as aten/src/ATen/native/cuda/RNN.cu's gru_cell_forward
    computes it: r = sigma(i_r + h_r), z = sigma(i_z + h_z), n = tanh(i_n + r h_n), h' = n + z (hx - n).
    The kernel exists on CUDA only; this stands in for it on CPU so the inputs GruUpdate builds for it
    (one W_hh GEMM with [0, 0, b_hn] as its bias, the level splits) are checked here."""
    i_r, i_z, i_n = input_gates.chunk(3, 1)
    h_r, h_z, h_n = hidden_gates.chunk(3, 1)
    r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
    n = torch.tanh(i_n + r * h_n)
    return n + z * (hx - n), None


def run_model(model, x):
    """Full unroll's outputs and gradients (a loss that uses every output), and step()'s outputs."""
    model.zero_grad()
    out = model(x)
    (out.y.square().sum() + out.lambda_logits.sin().sum()).backward()
    grads = {k: p.grad.clone() for k, p in model.named_parameters()}
    with torch.no_grad():
        fn = model.step_fn
        ctx = fn.encode(x)
        h, steps = fn.init_hidden(ctx), []
        for n in range(model.max_steps):
            y, h, l = fn.step(ctx, h, n)
            steps.append((y, l))
    return out.y.detach(), out.lambda_logits.detach(), grads, steps


def assert_same_run(a, b, atol=1e-5):
    assert torch.allclose(a[0], b[0], atol=atol) and torch.allclose(a[1], b[1], atol=atol)
    for k in a[2]:
        assert torch.allclose(a[2][k], b[2][k], atol=atol, rtol=1e-4), k
    for (ya, la), (yb, lb) in zip(a[3], b[3]):
        assert torch.allclose(ya, yb, atol=atol) and torch.allclose(la, lb, atol=atol)


def test_the_fused_kernel_runs_on_cuda_only():
    assert not GruUpdate(torch.nn.GRUCell(4, 3), torch.zeros(2, 9)).fused           # CPU: the hand update
    assert mnist_readers.fused_gru(torch.zeros(1, device="meta")) is False


@settings(max_examples=6, deadline=None)
@given(reader=st.sampled_from(["cnn", "rows", "coarse"]), seed=st.integers(0, 2**16))
def test_fused_gru_inputs_give_the_hand_updates_values_and_gradients(reader, seed):
    """GruUpdate's CUDA path (one GEMM, then the fused kernel, here its equations on CPU) and its CPU path:
    the same outputs, gradients and step() outputs within 1e-5, on the same weights and images."""
    model = tiny_model("mnist", max_steps=7, reader=reader, rows_per_step=4, seed=seed % 100).train()
    x = torch.randn(6, 1, 28, 28, generator=torch.Generator().manual_seed(seed))
    torch.manual_seed(seed)
    hand = run_model(model, x)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mnist_readers, "fused_gru", lambda t: True)
        mp.setattr(mnist_readers, "fused_gru_cell", gru_kernel_equations)
        torch.manual_seed(seed)                                      # the same dropout masks
        fused = run_model(model, x)
    assert_same_run(fused, hand)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the fused GRU kernel runs on CUDA only")
@pytest.mark.parametrize("reader", ["cnn", "rows", "coarse"])
def test_on_cuda_the_fused_kernel_equals_the_hand_update(reader, monkeypatch):
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)        # float32 GEMMs on both sides
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", False)
    model = tiny_model("mnist", max_steps=7, reader=reader, rows_per_step=4).train().cuda()
    x = torch.randn(6, 1, 28, 28, device="cuda")
    assert GruUpdate(model.step_fn.cell, x).fused
    torch.manual_seed(0)
    fused = run_model(model, x)
    monkeypatch.setattr(mnist_readers, "fused_gru", lambda t: False)
    torch.manual_seed(0)
    assert_same_run(fused, run_model(model, x))
    monkeypatch.undo()
    with torch.autocast("cuda", dtype=torch.bfloat16):              # the training step's autocast: it runs
        assert torch.isfinite(model(x).y).all()


# ----------------------------------------------------------------------------- readers whose evidence grows

@pytest.mark.parametrize("reader,rows,levels", [("rows", 2, 14), ("rows", 4, 7), ("rows", 28, 1), ("coarse", 2, 8)])
def test_shapes(reader, rows, levels):
    model = tiny_model("mnist", max_steps=6, reader=reader, rows_per_step=rows)
    x = torch.randn(5, 1, 28, 28)
    ctx = model.step_fn.encode(x)
    assert ctx.shape == (5, levels, 3 * 16)                     # one GRU input projection per level
    out = model(x)
    assert out.y.shape == (6, 5, 10) and out.log_p.shape == (6, 5)
    assert torch.allclose(out.log_p.exp().sum(0), torch.ones(5), atol=1e-5)


@pytest.mark.parametrize("reader", ["rows", "coarse"])
@pytest.mark.parametrize("mode", ["sample", "deterministic"])
def test_early_exit_equals_full_unroll(reader, mode):
    model = tiny_model("mnist", max_steps=16, lambda_p=0.2, reader=reader, lambda_std=3.0)
    torch.nn.init.zeros_(model.step_fn.lambda_head.bias)               # lambda ~ 0.5: halting varies by sample
    x = torch.randn(40, 1, 28, 28) + 2 * torch.randn(40, 1, 1, 1)      # per-image brightness: seen at 2 x 2 too
    u = torch.rand(16, 40, generator=torch.Generator().manual_seed(1))
    res = ponder(model, x, mode, uniforms=u if mode == "sample" else None)
    with torch.no_grad():
        out = model(x)
    steps = first_true(halt_mask(out.lambda_logits, mode, u if mode == "sample" else None))
    assert torch.equal(res.halt_step, steps)
    assert len(set(steps.tolist())) > 1                         # halting really varies here
    ref = torch.softmax(out.y, -1)[steps - 1, torch.arange(40)]
    assert torch.allclose(res.probs, ref, atol=1e-5)


@settings(max_examples=15, deadline=None)
@given(rows_read=st.integers(1, 27))
def test_row_reader_never_sees_unread_rows(rows_read):
    """Changing the image below row r changes no level that has read only rows < r."""
    model = tiny_model("mnist", reader="rows", rows_per_step=2)
    x = torch.randn(3, 1, 28, 28)
    x2 = x.clone()
    x2[..., rows_read:, :] = torch.randn(3, 1, 28 - rows_read, 28)
    with torch.no_grad():
        c1, c2 = model.step_fn.encode(x), model.step_fn.encode(x2)
    for level in range(rows_read // 2):                         # level l has read rows 0 .. 2l+1
        assert torch.allclose(c1[:, level], c2[:, level])


@settings(max_examples=20, deadline=None)
@given(rows_per_step=st.sampled_from([2, 4, 14]), step=st.integers(0, 7), seed=st.integers(0, 2**16))
def test_row_reader_step_outputs_depend_only_on_the_rows_read(rows_per_step, step, seed):
    """Step n (0-based) of the whole model, its answer y_n and its lambda_n, has read the first
    rows_per_step * (n + 1) rows: new values in every row below leave steps 0..n unchanged."""
    model = tiny_model("mnist", max_steps=8, reader="rows", rows_per_step=rows_per_step)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4, 1, 28, 28, generator=g)
    read = min((step + 1) * rows_per_step, 28)
    x2 = x.clone()
    x2[..., read:, :] = torch.randn(4, 1, 28 - read, 28, generator=g) * 3
    with torch.no_grad():
        a, b = model(x), model(x2)
    assert a.y.shape == (8, 4, 10) and a.lambda_logits.shape == (8, 4)
    assert torch.allclose(a.y[:step + 1], b.y[:step + 1], atol=1e-5)
    assert torch.allclose(a.lambda_logits[:step + 1], b.lambda_logits[:step + 1], atol=1e-5)
    if read < 28 and step + 1 < 8:                  # and the next step, which reads new rows, does see them
        assert not torch.allclose(a.y[step + 1], b.y[step + 1], atol=1e-5)


@pytest.mark.parametrize("reader", ["rows", "coarse"])
def test_growing_readers_equal_grucell_on_each_level(reader, monkeypatch):
    """encode() folds the r/z hidden biases into the input projection, unroll() splits the levels once and
    runs MnistStep's fused update: the values and gradients of nn.GRUCell fed level min(n, L - 1)'s
    embedding at step n, on the same parameters."""
    model = tiny_model("mnist", max_steps=9, reader=reader, rows_per_step=4).train()
    fn, x = model.step_fn, torch.randn(5, 1, 28, 28)
    seen = []
    project = fn.project
    monkeypatch.setattr(fn, "project", lambda e: seen.append(e) or project(e))
    out = model(x)                                                  # PonderNet.forward -> unroll
    (out.y.square().sum() + out.lambda_logits.sin().sum()).backward()
    fast = {k: p.grad.clone() for k, p in model.named_parameters()}
    model.zero_grad()
    seen.clear()
    fn.encode(x)                                                    # a fresh graph for the reference
    e = seen[0]                                                     # [B, L, E] the embedding of each level
    h, ys, ls = torch.zeros(5, 16), [], []
    for n in range(9):
        h = fn.cell(e[:, min(n, e.shape[1] - 1)], h)
        ys.append(fn.out_head(h))
        ls.append(fn.lambda_head(h).squeeze(-1))
    ys, ls = torch.stack(ys), torch.stack(ls)
    assert torch.allclose(out.y, ys, atol=1e-5) and torch.allclose(out.lambda_logits, ls, atol=1e-5)
    (ys.square().sum() + ls.sin().sum()).backward()
    for k, p in model.named_parameters():
        assert torch.allclose(fast[k], p.grad, atol=1e-5, rtol=1e-4), k
    with torch.no_grad():                                           # step() one at a time: the same states
        ctx = fn.encode(x)
        h = fn.init_hidden(ctx)
        for n in range(9):
            y, h, l = fn.step(ctx, h, n)
            assert torch.allclose(y, ys[n], atol=1e-5) and torch.allclose(l, ls[n], atol=1e-5)


def test_row_reader_levels_change_once_new_rows_differ():
    model = tiny_model("mnist", reader="rows", rows_per_step=2)
    x = torch.randn(3, 1, 28, 28)
    x2 = x.clone()
    x2[..., 10:, :] += 1.0
    with torch.no_grad():
        c1, c2 = model.step_fn.encode(x), model.step_fn.encode(x2)
    same = [torch.allclose(c1[:, l], c2[:, l]) for l in range(14)]
    assert same == [True] * 5 + [False] * 9                     # levels 0..4 read rows 0..9 only


def test_views():
    x = torch.randn(2, 1, 28, 28)
    rows = tiny_model("mnist", reader="rows", rows_per_step=4).step_fn
    v = rows.view(x, 1)                                          # step 2 has read 8 rows
    assert torch.equal(v[..., :8, :], x[..., :8, :]) and (v[..., 8:, :] == x.min()).all()
    assert torch.equal(rows.view(x, 50), x)
    coarse = tiny_model("mnist", reader="coarse").step_fn
    # step 1 sees only the means of the four 14 x 14 quadrants: a change that keeps them is invisible
    bump = torch.zeros(2, 1, 28, 28)
    bump[..., 0, 0], bump[..., 13, 13] = 1.0, -1.0               # both in the top-left quadrant
    assert torch.allclose(coarse.view(x, 0), coarse.view(x + bump, 0), atol=1e-6)
    assert not torch.allclose(coarse.view(x, 6), coarse.view(x + bump, 6))    # 14 x 14 sees it
    assert torch.equal(coarse.view(x, 7), x) and torch.equal(coarse.view(x, 30), x)


def test_view_labels_say_what_each_step_has_seen():
    rows = tiny_model("mnist", reader="rows", rows_per_step=2).step_fn
    assert [rows.view_label(n) for n in (0, 5, 13, 19)] == ["rows 1–2 of 28 read", "rows 1–12 of 28 read",
                                                            "all 28 rows read", "all 28 rows read"]
    coarse = tiny_model("mnist", reader="coarse").step_fn
    assert [coarse.view_label(n) for n in (0, 4, 7, 12)] == ["at 2×2", "at 7×7", "at full 28×28", "at full 28×28"]


def test_config_round_trip_and_validation():
    cfg = validate(TrainConfig(reader="rows", rows_per_step=4))
    model = build_model("mnist", model_config(cfg), 20, 0.2)
    assert isinstance(model.step_fn, RowReader)
    assert model.step_fn.encode(torch.zeros(2, 1, 28, 28)).shape == (2, 7, 3 * cfg.hidden)   # 28 rows / 4 = 7 levels
    from ponder.tasks import model_config_dict
    again = build_model("mnist", model_config_dict(model), 20, 0.2)
    assert again.load_state_dict(model.state_dict()) is not None
    from ponder.config import ConfigError
    from ponder.tasks import model_config_from_dict
    with pytest.raises(ConfigError, match="reader"):
        validate(TrainConfig(reader="glimpse"))
    with pytest.raises(ConfigError, match="rows_per_step"):
        model_config_from_dict("mnist", {"reader": "rows", "rows_per_step": 3})
    # a model config that leaves a field out gets its default: the whole-image reader
    assert model_config_from_dict("mnist", {"hidden": 64}).reader == "cnn"


def _bar_images(n, seed):
    """28 x 28 images with one bright bar at a random row; label 1 if the bar is in the top 8 rows.

    Reading 4 rows a step, a bar in rows 0..3 is seen at step 1; for a bar in rows 8..27 the
    reader must read 8 rows to know there is none on top: the first inputs are known a step earlier.
    """
    g = torch.Generator().manual_seed(seed)
    rows = torch.randint(0, 28, (n,), generator=g)
    x = torch.zeros(n, 28, 28, dtype=torch.uint8)
    x[torch.arange(n), rows, 4:24] = 255
    return x, (rows < 8).long(), rows


def _expected_steps_after_training(freeze_lambda: bool):
    """Mean E[n] for bars in rows 0..3 and in rows 8..27 after ~190 steps (~3 s on 2 cores)."""
    torch.manual_seed(0)
    tx, ty, _ = _bar_images(1000, 0)
    vx, vy, _ = _bar_images(200, 100)
    cfg = TrainConfig(task="mnist", reader="rows", rows_per_step=4, lambda_p=0.5, beta=0.1, max_steps=8,
                      batch_size=32, epochs=6.0, lr=1e-2, device="cpu", seed=0)
    model = build_model("mnist", MnistConfig(channels1=4, channels2=8, embed=16, hidden=16, reader="rows",
                                             rows_per_step=4), cfg.max_steps, cfg.lambda_p)
    if freeze_lambda:
        model.step_fn.lambda_head.requires_grad_(False)
    model = train(cfg, data=D.Mnist(tx, ty, vx, vy, vx, vy), model=model).model
    x, _, rows = _bar_images(600, 2)
    with torch.no_grad():
        en = expected_steps(model(D.mnist_inputs(x)).log_p)      # [B]
    return en[rows < 4].mean().item(), en[rows >= 8].mean().item()


@pytest.mark.long
@pytest.mark.slow
def test_short_training_makes_halting_depend_on_the_input():
    early, late = _expected_steps_after_training(freeze_lambda=False)
    # measured 2.16 vs 3.37 (seed 0); over data seeds 0..3 the gap was 0.57 .. 1.23
    assert late - early > 0.4
    frozen_early, frozen_late = _expected_steps_after_training(freeze_lambda=True)
    assert abs(frozen_late - frozen_early) < 0.1                # the gap comes from the learned lambda head
