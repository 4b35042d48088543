"""ponder/models.py: MnistStep's speed-ups (precomputed GRU input projection, fused gates, one unroll)
give the values and gradients of nn.GRUCell run step by step on the same parameters."""
import torch


def test_mnist_step_equals_grucell_and_unroll_equals_steps():
    """encode() precomputes the GRU input projection, step() fuses the gates, unroll() applies the
    heads once: the same values as nn.GRUCell run step by step on the same parameters."""
    from ponder.config import MnistConfig
    from ponder.models import build_model
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
    from ponder.config import MnistConfig
    from ponder.models import build_model
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
