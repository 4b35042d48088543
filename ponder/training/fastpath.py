"""The parts of a training step that never wait on the GPU: non-finite losses, gradients
and weights detected on the device (DivergenceGuard), and the whole step replayed from CUDA graphs
(GraphedStep) where the device allows it. ponder.training.loop's loop uses both; neither knows the loop.
"""
from __future__ import annotations

from typing import Callable

import torch

from ..config import TrainConfig


# ----------------------------------------------------------------------------- divergence on the device

LOSS, GRADIENT, WEIGHTS = 1, 2, 3        # what became non-finite first (DivergenceGuard.kind)


class DivergenceGuard:
    """Non-finite losses, gradients and weights, detected on the device without a host sync.

    A training step calls before_update(loss, gnorm) before the optimiser and after_update(params)
    after it. The first bad step's number, kind and value stay on the device (later ones do not
    overwrite them); the host reads them with first_failure() only at checks. `skip` is 1.0 from the
    first non-finite loss or gradient on: given to a fused Adam as its found_inf (the hook
    torch.amp.GradScaler uses), the optimiser skips that update and every later one on the device,
    so the weights stay those of the last good step until the host notices.
    """

    def __init__(self, device):
        def zero(dtype):
            return torch.zeros((), dtype=dtype, device=device)
        self.count = zero(torch.int64)     # updates attempted: the step number of the current one
        self.step = zero(torch.int64)      # step number of the first non-finite update (0: none yet)
        self.kind = zero(torch.int64)      # LOSS / GRADIENT / WEIGHTS
        self.value = zero(torch.float32)   # the non-finite loss or gradient norm
        self.skip = zero(torch.float32)    # 1.0: the optimiser must not update (fused Adam's found_inf)

    @torch.no_grad()
    def before_update(self, loss: torch.Tensor, gnorm: torch.Tensor) -> None:
        self.count.add_(1)
        loss_bad, grad_bad = ~torch.isfinite(loss), ~torch.isfinite(gnorm)          # 0-d bool
        self._record(loss_bad | grad_bad, torch.where(loss_bad, LOSS, GRADIENT),
                     torch.where(loss_bad, loss.float(), gnorm.float()))
        self.skip.copy_(self.step != 0)

    @torch.no_grad()
    def after_update(self, params) -> None:
        # each parameter's 2-norm, all in one multi-tensor kernel on CUDA, summed in float64: no square of a
        # float32 (or narrower) weight overflows there, so a norm is finite exactly when every weight is (NaN
        # and inf carry through the sum). On CPU it is also ~3x faster than isfinite + all per parameter.
        norms = torch.stack(torch._foreach_norm(list(params), 2, dtype=torch.float64))      # [P]
        self._record(~torch.isfinite(norms).all(), WEIGHTS, float("nan"))

    def _record(self, bad, kind, value) -> None:
        new = bad & (self.step == 0)                                                 # the first bad step only
        self.step.copy_(torch.where(new, self.count, self.step))
        self.kind.copy_(torch.where(new, kind, self.kind))
        self.value.copy_(torch.where(new, value, self.value))

    def first_failure(self):
        """(step, kind, value) of the first non-finite update, or None. Reads the device (a host sync)."""
        step = int(self.step)
        return None if step == 0 else (step, int(self.kind), float(self.value))


# ----------------------------------------------------------------------------- the step in a CUDA graph

GRAPH_WARMUP = 3          # eager steps per batch shape before its capture (cuBLAS/cuDNN set-up, Adam's state)


def choose_step_mode(cfg: TrainConfig, device) -> tuple:
    """("cuda_graph", "") where the whole step can be captured, else ("eager", why not)."""
    if torch.device(device).type != "cuda":
        return "eager", f"CUDA graphs need a CUDA device (training on {torch.device(device).type})"
    if not cfg.cuda_graph:
        return "eager", "cuda_graph is off"
    if cfg.compile:
        return "eager", "compile is on (torch.compile and a captured step are not combined)"
    if cfg.halt_epsilon is not None:
        return "eager", (f"halt_epsilon = {cfg.halt_epsilon:g}: the steps unrolled vary from batch to batch, and a "
                         f"CUDA graph replays a fixed N")
    return "cuda_graph", ""


class GraphedStep:
    """A training step replayed from CUDA graphs: one graph per batch shape (a short last batch gets its own).

    The first GRAPH_WARMUP steps of a shape run eagerly on a side stream (they are real training
    steps; they also create cuBLAS/cuDNN handles and the optimiser's state outside the graph), the
    next one is captured on that stream, and from then on each batch is copied into the graph's
    static input buffers and the graph replayed. If a capture fails, `fallback` says why and every
    later step runs eagerly (the same function, so training goes on unchanged).
    """

    def __init__(self, step: Callable, device, warmup: int = GRAPH_WARMUP):
        self.step, self.device, self.warmup = step, torch.device(device), warmup
        self.graphs = {}          # batch signature -> (graph, static x, static y, static outputs)
        self.warmed = {}          # batch signature -> eager steps run so far
        self.fallback = ""        # why the graphs were given up ("" while they are in use)
        self.stream = None        # side stream for warm-up and capture

    def __call__(self, x: torch.Tensor, y: torch.Tensor):
        if self.fallback:
            return self.step(x, y)
        key = (tuple(x.shape), x.dtype, tuple(y.shape), y.dtype)
        entry = self.graphs.get(key)
        if entry is None:
            if self.warmed.get(key, 0) < self.warmup:
                self.warmed[key] = self.warmed.get(key, 0) + 1
                return self._warm(x, y)
            try:
                entry = self.graphs[key] = self._capture(x, y)
            except Exception as e:               # capture impossible here: keep training eagerly
                self.fallback = f"CUDA graph capture failed ({type(e).__name__}: {' '.join(str(e).split())[:300]})"
                self.graphs.clear()
                return self.step(x, y)
        graph, static_x, static_y, outputs = entry
        static_x.copy_(x)                                       # [B, ...] this step's batch into the graph's inputs
        static_y.copy_(y)                                       # [B]
        graph.replay()
        return outputs

    def _side_stream(self):
        if self.stream is None:
            self.stream = torch.cuda.Stream(self.device)
        return self.stream

    def _warm(self, x, y):
        side, main = self._side_stream(), torch.cuda.current_stream(self.device)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            out = self.step(x, y)
        main.wait_stream(side)
        return out

    def _capture(self, x, y):
        side = self._side_stream()
        static_x, static_y = x.clone(), y.clone()
        side.wait_stream(torch.cuda.current_stream(self.device))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=side):
            outputs = self.step(static_x, static_y)             # recorded, not run: replay() runs it
        return graph, static_x, static_y, outputs
