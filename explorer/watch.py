"""Watch it learn to halt: one input looked at while a run trains. A Watcher runs in the job's training thread,
between two steps (the progress callback), and records what the model does on the input at that moment: its
halting distribution p_n, λ_n, E[n] and answer (no Streamlit; the job keeps the snapshots, the page draws them)."""
from __future__ import annotations

import time
from typing import Optional

import torch

from ponder.analysis.studies import trace_input

EVERY_S = 1.0          # seconds between two looks: a look is one forward pass of one input (milliseconds)
MAX_SNAPSHOTS = 600    # the newest are kept (a 30 min job at one a second would keep 1,800)


class Watcher:
    def __init__(self, x: torch.Tensor, task: str):
        self.x, self.task = x, task          # x: one input with its batch dimension, as trace_input takes it
        self.model = None
        self.last = -float("inf")

    def attach(self, model) -> None:
        self.model = model

    def look(self, step: int) -> Optional[dict]:
        """A snapshot at training step `step`, at most one every EVERY_S seconds; None between them."""
        if self.model is None or time.monotonic() - self.last < EVERY_S:
            return None
        self.last = time.monotonic()
        was_training = self.model.training
        try:
            with torch.no_grad():
                device = next(self.model.parameters()).device
                tr = trace_input(self.model, self.x.to(device), "deterministic")
        except Exception:                  # noqa: BLE001 - a look that fails (a GPU tensor, ...) never fails the run
            return None
        finally:
            self.model.train(was_training)
        return dict(step=int(step), p=tr.p.tolist(), lambdas=tr.lambdas.tolist(), expected_steps=tr.expected_steps,
                    pred=tr.pred, confidence=float(tr.confidence), halt_step=tr.halt_step)
