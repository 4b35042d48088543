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

    x [B, 1, 28, 28] -> ctx [B, E];  h [B, H];  y_n [B, 10] class logits;  lambda_logit_n [B]
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

    def encode(self, x):
        z = F.max_pool2d(F.relu(self.conv1(x)), 2)              # [B, C1, 14, 14]
        z = F.max_pool2d(F.relu(self.conv2(z)), 2)              # [B, C2, 7, 7]
        return self.drop(F.relu(self.fc(z.flatten(1))))         # [B, E]

    def init_hidden(self, ctx):
        return ctx.new_zeros(ctx.shape[0], self.cfg.hidden)     # [B, H]

    def step(self, ctx, h):
        h = self.cell(ctx, h)                                   # h_{n+1} [B, H]
        return self.out_head(h), h, self.lambda_head(h).squeeze(-1)

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
