"""The N GRU updates of a training unroll as one autograd node, its backward written by hand (CPU).

gru_unroll(gi, w_hh, b_hn, h0, n_steps) -> hs [N, B, H]: step n reads the input projection gi[:, min(n, L - 1)]
(gi [B, L, 3H], the r and z gates' hidden biases folded in, as ponder.tasks.mnist.readers builds it) and runs
nn.GRUCell's equations,
    r = sigma(gi_r + gh_r),  z = sigma(gi_z + gh_z),  n = tanh(gi_n + r * gh_n),  h' = lerp(n, h, z),
    gh = W_hh h + [0, 0, b_hn].
Why by hand: autograd records about 7 nodes a step, and its backward pass runs about 25 small operators a step
(each split, product and gradient sum of [B, H] tensors its own call, with zero-filled buffers for the splits).
Here the forward pass is 6 operators a step writing into preallocated [N, B, .] buffers, the backward pass 9
(addcmul / tanh_backward / sigmoid_backward written into one [B, 3H] gate gradient, and one GEMM), and the weight
gradient is one GEMM over all N steps after the loop. Every per-step view is made before the loops (one unbind
per buffer): a slice costs about as much as a small kernel.

Backward, with dh the gradient at h_{n+1} (its own from the heads plus the one from step n + 1):
    d gh_r = dh (1 - z)(1 - n^2) gh_n r (1 - r),   d gh_z = dh (h - n) z (1 - z),   d gh_n = dh (1 - z)(1 - n^2) r
    d gi_r, d gi_z = d gh_r, d gh_z;               d gi_n = dh (1 - z)(1 - n^2)
    dh_n = dh z + (d gh) W_hh;   dW_hh = sum_n (d gh_n)^T h_n;   db_hn = sum_n d gh_n
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def steps(t: torch.Tensor, *cols: slice):
    """t [N, ...] as N views per column range of its last dim (one unbind each: no view op inside a step loop)."""
    return [t[..., c].unbind(0) for c in cols] if cols else t.unbind(0)


class GruUnroll(torch.autograd.Function):

    @staticmethod
    def forward(ctx, gi, w_hh, b_hn, h0, n_steps: int):
        B, L, G = gi.shape
        H, N = G // 3, n_steps
        RZ, R, Z, NC = slice(0, 2 * H), slice(0, H), slice(H, 2 * H), slice(2 * H, 3 * H)
        w_t, bias = w_hh.t(), F.pad(b_hn, (2 * H, 0))           # W_hh^T [H, 3H], [0, 0, b_hn] [3H]
        gh = gi.new_empty(N, B, G)                               # W_hh h_n + [0, 0, b_hn]
        rz = gi.new_empty(N, B, 2 * H)                           # sigma(.) of the r and z gates
        nn_ = gi.new_empty(N, B, H)                              # the candidate n
        hs = gi.new_empty(N, B, H)                               # h_{n+1}
        gi_rz, gi_n = steps(gi.transpose(0, 1), RZ, NC)         # L x [B, 2H], L x [B, H]
        gh_all, (gh_rz, gh_n), (r, z) = steps(gh), steps(gh, RZ, NC), steps(rz, R, Z)
        rz_, n_, h_ = steps(rz), steps(nn_), steps(hs)
        h = h0
        for n in range(N):
            lvl = min(n, L - 1)
            torch.addmm(bias, h, w_t, out=gh_all[n])
            torch.add(gh_rz[n], gi_rz[lvl], out=rz_[n]).sigmoid_()
            torch.addcmul(gi_n[lvl], r[n], gh_n[n], out=n_[n]).tanh_()
            h = torch.lerp(n_[n], h, z[n], out=h_[n])           # h_{n+1} = (1 - z) n + z h
        ctx.save_for_backward(w_hh, h0, gh, rz, nn_, hs)
        ctx.levels = L
        return hs

    @staticmethod
    def backward(ctx, d_hs):
        w_hh, h0, gh, rz, nn_, hs = ctx.saved_tensors
        N, B, H = hs.shape
        L = ctx.levels
        RZ, R, Z, NC = slice(0, 2 * H), slice(0, H), slice(H, 2 * H), slice(2 * H, 3 * H)
        d_hs = steps(d_hs)
        d_gh = torch.empty_like(gh)                              # [N, B, 3H] d gh_r, d gh_z, d gh_n
        d_pre_n = torch.empty_like(hs)                           # [N, B, H] d gi_n
        t = hs.new_empty(B, H)                                   # dh (1 - z), one step's
        (r, z), rz_, gh_n, n_, h_ = steps(rz, R, Z), steps(rz), steps(gh, NC)[0], steps(nn_), steps(hs)
        dg_all, (dg_r, dg_z, dg_rz, dg_n), dpn = steps(d_gh), steps(d_gh, R, Z, RZ, NC), steps(d_pre_n)
        dh = d_hs[N - 1]                                         # the gradient at h_{n+1}, all of it
        for n in range(N - 1, -1, -1):
            torch.addcmul(dh, dh, z[n], value=-1, out=t)         # dh (1 - z)
            tanh_bwd(t, n_[n], grad_input=dpn[n])                # d gi_n = dh (1 - z)(1 - n^2)
            torch.mul(dpn[n], r[n], out=dg_n[n])                 # d gh_n
            torch.mul(dpn[n], gh_n[n], out=dg_r[n])              # dr
            torch.mul(dh, torch.sub(h_[n - 1] if n else h0, n_[n]), out=dg_z[n])   # dz = dh (h - n)
            sigmoid_bwd(dg_rz[n], rz_[n], grad_input=dg_rz[n])   # through the sigmoids
            nxt = torch.addcmul(d_hs[n - 1], dh, z[n]) if n else dh * z[n]      # dh z (+ step n-1's own)
            dh = torch.addmm(nxt, dg_all[n], w_hh)                               # + d gh W_hh
        d_w = d_gh.view(N * B, 3 * H).t().mm(torch.cat([h0.unsqueeze(0), hs[:-1]]).view(N * B, H))   # [3H, H]
        d_b = d_gh[..., 2 * H:].sum((0, 1))                                                        # [H]
        d_gi_steps = torch.cat([d_gh[..., :2 * H], d_pre_n], -1)                                  # [N, B, 3H]
        if L == 1:
            d_gi = d_gi_steps.sum(0).unsqueeze(1)                                                  # [B, 1, 3H]
        else:
            idx = torch.arange(N, device=hs.device).clamp_(max=L - 1)
            d_gi = d_gi_steps.new_zeros(B, L, 3 * H).index_add_(1, idx, d_gi_steps.transpose(0, 1))
        return d_gi, d_w, d_b, (dh if ctx.needs_input_grad[3] else None), None


sigmoid_bwd = torch.ops.aten.sigmoid_backward.grad_input   # (grad, sigma(x), grad_input=out): grad sigma (1 - sigma)
tanh_bwd = torch.ops.aten.tanh_backward.grad_input         # (grad, tanh(x), grad_input=out): grad (1 - tanh^2)


def gru_unroll(gi: torch.Tensor, w_hh: torch.Tensor, b_hn: torch.Tensor, h0: torch.Tensor, n_steps: int) -> torch.Tensor:
    """All N states h_1 .. h_N [N, B, H] of nn.GRUCell's update from h0 [B, H], step n fed gi[:, min(n, L - 1)]
    (gi [B, L, 3H] or [B, 3H], the r/z hidden biases folded in); w_hh [3H, H], b_hn [H]."""
    if gi.dim() == 2:
        gi = gi.unsqueeze(1)
    return GruUnroll.apply(gi, w_hh, b_hn, h0, n_steps)
