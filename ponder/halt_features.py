"""What the lambda head may read besides the step's state h (PonderNet.lambda_input): features of the answers so
far and of how the state moves, the signals an exit rule has that a linear head on h cannot form.

    confidence  f_n = [max_c P_n(c),  TV(P_n, P_{n-1})]                                                  2 features
                the answer's probability and how far the class probabilities moved since the step before
                (total variation 1/2 sum_c |P_n(c) - P_{n-1}(c)|, P_0 uniform)
    stability   those two and
                logit(max_c P_n) / 10      the confidence on a scale that keeps separating 0.99 from 0.9999
                1 - 1/r_n                  r_n: for how many steps the answer's class has stayed the same (PABEE's
                                           patience): 0 where it just changed, 1/2 after two equal steps, 3/4 after four
                ||h_{n+1} - h_n|| / ||h_{n+1}||   how far the state still moves, relative (1 at step 1: h_1 = 0)
                                                                                                          5 features
The features are read detached (the halting may read the answer, not bend it). The head adds its share to
lambda_n's logit: "linear" w . f + b, or "mlp" a layer of MLP_HIDDEN tanh units then a linear read-out (it can
form "confident AND unchanged", which no sum of the features can). The last layer starts at 0, so a fresh head
halts like the plain one. "mlp-only": the mlp's logit is lambda_n's whole logit, the step's own head on h unread
(its bias starts at logit(lambda_p): a fresh one halts like the prior).
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn as nn

FEATURES = {"confidence": 2, "stability": 5}      # lambda_input -> number of features
LAMBDA_HEADS = ("linear", "mlp", "mlp-only")      # the feature head's form ("-only": the step's own head unread)
MLP_HIDDEN = 16                                   # tanh units of the "mlp" head
LOGIT_SCALE = 10.0                                # logit(confidence) / this: about [-1, 1.4] for float32 probabilities


def confidence_features(probs: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
    """[max_c P_n(c), 1/2 sum_c |P_n(c) - P_{n-1}(c)|] from P_n, P_{n-1} [..., C]. [..., 2]"""
    return torch.stack([probs.amax(-1), 0.5 * (probs - prev).abs().sum(-1)], -1)


def next_run(cls: torch.Tensor, prev_cls: Optional[torch.Tensor], run: Optional[torch.Tensor]) -> torch.Tensor:
    """r_n: r_{n-1} + 1 where the answer's class is the step before's, else 1 (1 at step 1). [...] float32"""
    if prev_cls is None:
        return torch.ones_like(cls, dtype=torch.float32)
    return torch.where(cls == prev_cls, run + 1, torch.ones_like(run))


def runs(probs: torch.Tensor) -> torch.Tensor:
    """r_n of every step of a full unroll: probs [N, B, C] -> [N, B] float32."""
    cls, out, run = probs.argmax(-1), [], None                  # [N, B]
    for n in range(probs.shape[0]):
        run = next_run(cls[n], cls[n - 1] if n else None, run)
        out.append(run)
    return torch.stack(out)


def state_change(h_new: torch.Tensor, h_old: torch.Tensor) -> torch.Tensor:
    """||h_{n+1} - h_n|| / ||h_{n+1}|| per input: h [B, ...] -> [B] float32 (0 where the state is 0 and stays)."""
    d = (h_new.float() - h_old.float()).flatten(1).norm(dim=1)
    return d / h_new.float().flatten(1).norm(dim=1).clamp_min(1e-6)


def features(kind: str, probs: torch.Tensor, prev: torch.Tensor, run: Optional[torch.Tensor] = None,
             change: Optional[torch.Tensor] = None) -> torch.Tensor:
    """f_n of lambda_input `kind` from P_n, P_{n-1} [..., C] (and r_n, the state's change [...] for "stability").
    [..., FEATURES[kind]] float32, detached."""
    probs, prev = probs.detach().float(), prev.detach().float()
    base = confidence_features(probs, prev)
    if kind == "confidence":
        return base
    top = probs.amax(-1).clamp(1e-7, 1 - 1e-7)
    logit = (top.log() - torch.log1p(-top)) / LOGIT_SCALE
    return torch.cat([base, torch.stack([logit, 1 - 1 / run.float(), change.detach().float()], -1)], -1)


def make_head(kind: str, head: str = "linear") -> nn.Module:
    """The feature head [..., FEATURES[kind]] -> [..., 1], its last layer zero."""
    if head not in LAMBDA_HEADS:
        raise ValueError(f"lambda_head must be one of {LAMBDA_HEADS}, got {head!r}")
    k = FEATURES[kind]
    out = nn.Linear(k if head == "linear" else MLP_HIDDEN, 1)
    nn.init.zeros_(out.weight)
    nn.init.zeros_(out.bias)
    return out if head == "linear" else nn.Sequential(nn.Linear(k, MLP_HIDDEN), nn.Tanh(), out)


def combine(head: str, step_logit: torch.Tensor, feature_logit: torch.Tensor) -> torch.Tensor:
    """lambda_n's logit from the step's own head and the feature head's share."""
    return feature_logit if head.endswith("-only") else step_logit + feature_logit


class Tracker:
    """The features step by step (early exit, the paper's N): P_{n-1}, its class and r_{n-1} of the inputs still
    running. feats(probs, h_new, h_old) gives f_n [b, k] and moves on; keep(idx) keeps the inputs at idx."""

    def __init__(self, kind: str):
        self.kind, self.prev, self.cls, self.run = kind, None, None, None

    def feats(self, probs: torch.Tensor, h_new: torch.Tensor, h_old: torch.Tensor) -> torch.Tensor:
        probs = probs.detach().float()                                          # [b, C]
        prev = torch.full_like(probs, 1.0 / probs.shape[-1]) if self.prev is None else self.prev
        cls = probs.argmax(-1)
        self.run = next_run(cls, self.cls, self.run)
        change = state_change(h_new, h_old) if self.kind == "stability" else None
        f = features(self.kind, probs, prev, self.run, change)
        self.prev, self.cls = probs, cls
        return f

    def keep(self, idx: torch.Tensor) -> None:
        if self.prev is not None:
            self.prev, self.cls, self.run = self.prev[idx], self.cls[idx], self.run[idx]
