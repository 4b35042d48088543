"""A GRU reader's step() split for early exit (ponder.inference.ponder): each step runs the state update and the
lambda head only, the GRU's weights split once per call, not once a step; the output head runs once at the end, on
the states the inputs halted at. The same values as step() (tests/ponder/test_mnist_readers.py), in ~10 operator
calls a step instead of ~20: on one image per call those calls are nearly all the time there is.
"""
from __future__ import annotations

import torch


class GruStepper:
    """s(c, h, n) -> (h_{n+1}, lambda_logit_n [b], h_{n+1} kept at a halt);  s.answer(h) -> y [b, 10].
    c: what step n reads of the inputs still running, [b, 3H] (by_level False: MnistStep) or [b, L, 3H] levels, of
    which step n reads min(n, L - 1) (GrowingEvidence). Its gates are split once for each new c: while every input
    runs, c is the same tensor at every step, split once a call."""

    def __init__(self, m, upd, by_level: bool):
        self.upd = upd                                          # a GruUpdate, its W_hh split once
        self.levels = upd.levels if by_level else lambda c: [upd.split(c)]
        self.lam_b, self.lam_wt = m.lambda_head.bias, m.lambda_head.weight.t()   # addmm(b, h, W^T): F.linear's op
        self.out = m.out_head
        self.c = self.gi = None

    def __call__(self, c, h, n: int):
        if c is not self.c:
            self.c, self.gi = c, self.levels(c)                 # [level][r and z, n] input gates
        h = self.upd(h, self.gi[min(n, len(self.gi) - 1)])      # h_{n+1} [b, H]
        return h, torch.addmm(self.lam_b, h, self.lam_wt).squeeze(-1), h

    def answer(self, h):
        return self.out(h)                                      # y [b, 10] of the halting states
