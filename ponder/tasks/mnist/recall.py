"""The MNIST step function that computes rather than reads: a weight-tied convolutional block run again
and again over the whole image, the input re-injected at every step ("recall", Bansal et al. 2022,
"End-to-end algorithm synthesis with recurrent networks").

    encode(x):  u = U * relu(stem(x)) + b                  5x5 conv, stride 2, then the input's 3x3 conv, once:
                                                           [B, 1, 28, 28] -> [B, C, 14, 14]
    step n:     h_{n+1} = relu(W * h_n + u)                one 3x3 conv of the state, C -> C, the input re-injected
                y_n, lambda_n = heads(mean and max of h_{n+1} over the 14 x 14 positions)

Every step sees the whole image; what grows is how far each position's state has looked: one 3x3 conv on
the stride-2 grid widens the receptive field by 4 image pixels, so a position of h_{n+1} has seen
5 + 4n pixels square of the image at step n (9 at step 1, all 28 by step 6), and what steps past that add is more
computation on the same evidence. Little capacity per step (C channels, one conv) is what makes steps needed.
"""
from __future__ import annotations


import torch
import torch.nn as nn
import torch.nn.functional as F

from ..base import init_lambda_head
from .config import MnistConfig


STEM_PIXELS, PIXELS_PER_STEP = 5, 4      # receptive field of the stem (5x5 conv), and its growth per 3x3 conv at stride 2


def receptive_field(n: int) -> int:
    """Side in image pixels that one position of the state has seen after step n (0-based): 5 + 4(n + 1), at most 28."""
    return min(STEM_PIXELS + PIXELS_PER_STEP * (n + 1), 28)


class RecallStep(nn.Module):
    """x [B, 1, 28, 28] -> ctx u [B, C, 14, 14];  h [B, C, 14, 14];  y_n [B, 10] logits;  lambda_logit_n [B].
    C = cfg.channels1. The two heads read the pooled state [B, 2C] (mean and max over positions)."""

    def __init__(self, cfg: MnistConfig, lambda_p: float):
        super().__init__()
        C = cfg.channels1
        self.cfg = cfg
        self.stem = nn.Conv2d(1, C, 5, stride=2, padding=2)
        self.inject = nn.Conv2d(C, C, 3, padding=1)              # U, b: the input's share of every step
        self.block = nn.Conv2d(C, C, 3, padding=1, bias=False)   # W, weight-tied: the same block at every step
        self.out_head = nn.Linear(2 * C, 10)
        self.lambda_head = nn.Linear(2 * C, 1)
        init_lambda_head(self.lambda_head, lambda_p)

    def encode(self, x):
        if x.device.type == "cpu" and x.dim() == 4:
            x = x.to(memory_format=torch.channels_last)         # oneDNN's convolutions are faster on it; same values
        return self.inject(F.relu(self.stem(x)))                 # u [B, C, 14, 14], once per image

    def init_hidden(self, ctx):
        return torch.zeros_like(ctx)                             # h_1 = 0 [B, C, 14, 14]

    def update(self, ctx, h):
        return F.relu(self.block(h) + ctx)                       # h_{n+1} = relu(W * h_n + u) [B, C, 14, 14]

    @staticmethod
    def pooled(h):
        return torch.cat([h.mean((-2, -1)), h.amax((-2, -1))], -1)   # [..., 2C]

    def step(self, ctx, h, n=0):
        h = self.update(ctx, h)
        s = self.pooled(h)
        return self.out_head(s), h, self.lambda_head(s).squeeze(-1)

    def unroll(self, ctx, h, n_steps: int):
        """All steps: y [N, B, 10], lambda logits [N, B]; the same values as N step() calls."""
        states = []
        for _ in range(n_steps):
            h = self.update(ctx, h)
            states.append(self.pooled(h))
        s = torch.stack(states)                                  # [N, B, 2C]
        return self.out_head(s), self.lambda_head(s).squeeze(-1)

    def view_label(self, n: int) -> str:
        r = receptive_field(n)
        return f"each position has seen {r}×{r} px" if r < 28 else "each position has seen the whole image"

    def loss(self, y, target):
        return F.cross_entropy(y.float(), target, reduction="none")      # [B]

    def probs(self, y):
        return torch.softmax(y.float(), -1)                              # [B, 10]
