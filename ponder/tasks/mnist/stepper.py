"""A GRU reader's step() split for early exit (ponder.inference.ponder): each step runs the state update and the
lambda head only, the GRU's weights split once per call, not once a step; the output head runs once at the end, on
the states the inputs halted at. The same values as step() (tests/ponder/test_mnist_readers.py), in ~10 operator
calls a step instead of ~20: on one image per call those calls are nearly all the time there is.
"""
from __future__ import annotations

import torch.nn.functional as F


class GruStepper:
    """s(c, h, n) -> (h_{n+1}, lambda_logit_n [b], h_{n+1} kept at a halt);  s.answer(h) -> y [b, 10].
    c: what step n reads of the inputs still running; level(c, n) picks its [b, 3H] (GruUpdate's gi)."""

    def __init__(self, m, upd, level):
        self.upd, self.level = upd, level                       # upd: a GruUpdate, its W_hh split once
        self.lam = (m.lambda_head.weight, m.lambda_head.bias)   # F.linear on these is m.lambda_head's own op
        self.out = m.out_head

    def __call__(self, c, h, n: int):
        upd = self.upd
        h = upd(h, upd.split(self.level(c, n)))                 # h_{n+1} [b, H]
        return h, F.linear(h, *self.lam).squeeze(-1), h

    def answer(self, h):
        return self.out(h)                                      # y [b, 10] of the halting states
