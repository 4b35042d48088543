"""Arithmetic per training step and what the cores reach on a large matmul: how close a step runs to the limit.

step_flops     the FLOPs of one optimiser step (forward, loss, backward; Adam's few per weight are not counted),
               counted by torch.utils.flop_counter on a copy of the model: every matmul and convolution, the
               ones inside a hand-written backward included. Element-wise work is not counted (as in every FLOP
               count of a network).
matmul_gflops  GFLOP/s of a large square float32 matmul (2 n^3 FLOPs), best of `repeats`: the rate the same cores
               and threads reach when arithmetic, not dispatch or memory, limits them.
"""
from __future__ import annotations

import copy
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from ponder.config import TrainConfig
from ponder.training.step import Update


def step_flops(model, cfg: TrainConfig, x: torch.Tensor, y: torch.Tensor) -> int:
    """FLOPs of one training update of `model` (not changed: a copy takes the step) on the batch (x, y)."""
    m = copy.deepcopy(model).train()
    update = Update(cfg, m, torch.device("cpu"), "eager", "")
    with FlopCounterMode(display=False) as counter:
        update(x, y)
    return int(counter.get_total_flops())


def reference_flops(model, opt, x, y, rcfg, step) -> int:
    """FLOPs of one step of the article-style loop (bench/reference.py's step on copies of its model and optimiser)."""
    m = copy.deepcopy(model)
    o = type(opt)(m.parameters(), **opt.defaults)
    with FlopCounterMode(display=False) as counter:
        step(m, o, x, y, rcfg)
    return int(counter.get_total_flops())


def matmul_gflops(n: int = 2048, repeats: int = 5) -> float:
    """GFLOP/s of an [n, n] @ [n, n] float32 matmul on this process's torch threads, best of `repeats`."""
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
    out = torch.empty(n, n)
    torch.mm(a, b, out=out)                                  # warm: MKL's set-up, the pages touched
    best = float("inf")
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        torch.mm(a, b, out=out)
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best / 1e9
