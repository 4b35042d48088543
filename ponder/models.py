"""Step functions for the two tasks, and build_model() from a config.

Both follow the StepFunction protocol of ponder.halting:
    encode(x) -> ctx, init_hidden(ctx) -> h_1, step(ctx, h_n) -> (y_n, h_{n+1}, lambda_logit_n)
"""
from __future__ import annotations

import math
from dataclasses import asdict

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import MnistConfig, ParityConfig, model_config_from_dict
from .halting import PonderNet


def init_lambda_head(head: nn.Linear, lambda_p: float) -> None:
    """Start near the prior: lambda_n ~= lambda_p at every step, so p starts ~geometric.

    Small weights and bias = logit(lambda_p); an untrained net does not halt at step 1.
    """
    lp = min(max(lambda_p, 1e-4), 1 - 1e-4)
    nn.init.normal_(head.weight, std=1e-3)
    nn.init.constant_(head.bias, math.log(lp / (1 - lp)))


class MnistStep(nn.Module):
    """CNN embedding computed once per image, then a GRU cell run over the steps.

    x [B, 1, 28, 28] -> ctx [B, 3H];  h [B, H];  y_n [B, 10] class logits;  lambda_logit_n [B]

    The cell sees the same embedding e at every step, so its input projection is computed once,
    in encode(): ctx = W_ih e + b_ih, with the r and z gates' hidden biases folded in. A step then
    only multiplies the hidden state. The parameters are nn.GRUCell's (checkpoints load as before)
    and so are the gate equations:
        r = sigma(gi_r + gh_r),  z = sigma(gi_z + gh_z),  n = tanh(gi_n + r * gh_n),
        h' = (1 - z) * n + z * h = lerp(n, h, z),        gi = W_ih e + b_ih,  gh = W_hh h + b_hh.
    unroll() runs all N steps for PonderNet.forward and applies the two heads once to the stacked
    states; step() is the same update one step at a time, for early-exit inference.
    """

    def __init__(self, cfg: MnistConfig, lambda_p: float):
        super().__init__()
        self.cfg = cfg
        self.conv1 = nn.Conv2d(1, cfg.channels1, 5, padding=2)
        self.conv2 = nn.Conv2d(cfg.channels1, cfg.channels2, 5, padding=2)
        self.fc = nn.Linear(cfg.channels2 * 7 * 7, cfg.embed)
        self.drop = nn.Dropout(cfg.dropout)
        self.cell = nn.GRUCell(cfg.embed, cfg.hidden)
        self.out_head = nn.Linear(cfg.hidden, 10)
        self.lambda_head = nn.Linear(cfg.hidden, 1)
        init_lambda_head(self.lambda_head, lambda_p)

    def embed(self, x):
        if x.device.type == "cpu" and x.dim() == 4:
            # channels-last activations on CPU: oneDNN's max-pool and convolutions run faster on
            # them than on NCHW (docs/benchmarks.md, Profile); the same values
            x = x.to(memory_format=torch.channels_last)
        # relu after the max-pool: the same values as before it (relu is monotone), on 4x fewer elements
        z = F.relu(F.max_pool2d(self.conv1(x), 2))              # [B, C1, 14, 14]
        z = F.relu(F.max_pool2d(self.conv2(z), 2))              # [B, C2, 7, 7]
        return self.drop(F.relu(self.fc(z.flatten(1))))         # [B, E]

    def encode(self, x):
        H = self.cfg.hidden
        bias = self.cell.bias_ih + F.pad(self.cell.bias_hh[:2 * H], (0, H))     # b_ih + [b_hr, b_hz, 0]
        return F.linear(self.embed(x), self.cell.weight_ih, bias)               # [B, 3H], once per image

    def init_hidden(self, ctx):
        return ctx.new_zeros(ctx.shape[0], self.cfg.hidden)     # [B, H]

    def _parts(self, ctx):
        """ctx split into the r,z and n columns, W_hh into the same rows (transposed for addmm), b_hn.

        Split once per unroll, not once per step: each split of a tensor that needs a gradient costs
        a zero-filled gradient buffer in the backward pass.
        """
        H, w = self.cfg.hidden, self.cell.weight_hh             # w [3H, H]
        return ctx[:, :2 * H], ctx[:, 2 * H:], w[:2 * H].t(), w[2 * H:].t(), self.cell.bias_hh[2 * H:]

    @staticmethod
    def _update(h, ctx_rz, ctx_n, w_rz, w_n, b_n):
        r, z = torch.sigmoid(torch.addmm(ctx_rz, h, w_rz)).chunk(2, 1)          # [B, H] each
        n = torch.tanh(torch.addcmul(ctx_n, r, torch.addmm(b_n, h, w_n)))       # [B, H]
        return torch.lerp(n, h, z)                              # h_{n+1} = (1 - z) n + z h   [B, H]

    def step(self, ctx, h):
        h = self._update(h, *self._parts(ctx))
        return self.out_head(h), h, self.lambda_head(h).squeeze(-1)

    def unroll(self, ctx, h, n_steps: int):
        """All steps at once: y [N, B, 10], lambda logits [N, B]; the same values as N step() calls."""
        parts = self._parts(ctx)
        hs = []
        for _ in range(n_steps):
            h = self._update(h, *parts)
            hs.append(h)
        hs = torch.stack(hs)                                    # [N, B, H]
        return self.out_head(hs), self.lambda_head(hs).squeeze(-1)

    def loss(self, y, target):
        return F.cross_entropy(y.float(), target, reduction="none")      # [B]

    def probs(self, y):
        return torch.softmax(y.float(), -1)                              # [B, 10]


class ParityStep(nn.Module):
    """GRU cell fed the input vector x at every step; 1 output logit and a lambda head.

    x [B, n_elems] -> ctx = x;  h [B, H];  y_n [B] logit of "odd number of +1s";  lambda_logit_n [B]
    """

    def __init__(self, cfg: ParityConfig, lambda_p: float):
        super().__init__()
        self.cfg = cfg
        self.cell = nn.GRUCell(cfg.n_elems, cfg.hidden)
        self.out_head = nn.Linear(cfg.hidden, 1)
        self.lambda_head = nn.Linear(cfg.hidden, 1)
        init_lambda_head(self.lambda_head, lambda_p)

    def encode(self, x):
        return x

    def init_hidden(self, ctx):
        return ctx.new_zeros(ctx.shape[0], self.cfg.hidden)

    def step(self, ctx, h):
        h = self.cell(ctx, h)
        return self.out_head(h).squeeze(-1), h, self.lambda_head(h).squeeze(-1)

    def loss(self, y, target):
        return F.binary_cross_entropy_with_logits(y.float(), target.float(), reduction="none")

    def probs(self, y):
        p1 = torch.sigmoid(y.float())
        return torch.stack([1 - p1, p1], -1)                             # [B, 2]: even, odd


def build_model(task: str, model_cfg, max_steps: int, lambda_p: float) -> PonderNet:
    if isinstance(model_cfg, dict):
        model_cfg = model_config_from_dict(task, model_cfg)
    step = MnistStep(model_cfg, lambda_p) if task == "mnist" else ParityStep(model_cfg, lambda_p)
    return PonderNet(step, max_steps=max_steps, lambda_p=lambda_p)


def model_config_dict(model: PonderNet) -> dict:
    return asdict(model.step_fn.cfg)


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
