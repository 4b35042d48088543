"""One run's record: the schema of a run card (run.json) as a dataclass.

Training fills in how the run ended (ponder.training.loop.train: status, reason, steps, seconds, device), the
lifecycle adds the name and the test metrics (ponder.training.lifecycle.run), save_run writes it as the card
(to_card) and read_record reads it back (from_card of the checked card: ponder.store.card.read_card).
Sweeps, the explorer's jobs and reproduce show the same record.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, fields, replace
from typing import Optional

from ..version import __version__
from ..analysis.metrics import TestMetrics
from ..config import TrainConfig
from .card_checks import MAX_CARD_TEXT
from ..text import clean_text

FORMAT = "ponder-run"
FORMAT_VERSION = 2                    # 2: the task, N and lambda_p only under train


def card_text(v, limit: int = MAX_CARD_TEXT) -> str:
    """A card string: text, at most `limit` characters (a long traceback as a reason stays loadable), any character
    the card's reader refuses (ponder.text: a lone surrogate, a control character) replaced by U+FFFD."""
    v = "" if v is None else clean_text(v)
    return v if len(v) <= limit else v[: limit - 3] + "..."


@dataclass
class RunRecord:
    """What a run card holds. The task, N and lambda_p are those of `train` (its properties)."""
    train: dict                            # the training config, TrainConfig.to_dict()
    model: dict = field(default_factory=dict)   # the task's model config (ponder.tasks.model_config_dict)
    name: str = ""                         # the run's name (its folder's, unless given)
    status: str = "completed"              # completed / cancelled / failed (a used-up time budget: completed)
    reason: str = ""                       # why it ended that way; "" for a run that ran its steps
    device: str = "cpu"                    # where it trained: 'cpu', 'cuda (NVIDIA H100 80GB HBM3)'
    train_seconds: Optional[float] = None  # the training loop's seconds (the time budget's clock); None: not recorded
    steps: Optional[int] = None            # optimiser steps done (after a failure: those of the weights kept)
    metrics: dict = field(default_factory=dict)   # {'test': test metrics, ...} (ponder.training.lifecycle.card_metrics)
    created: str = ""                      # when it was saved, ISO 8601 local time
    ponder_version: str = __version__      # the library that wrote it
    extra: dict = field(default_factory=dict)     # card fields this schema does not name, kept as they are

    @property
    def task(self) -> str:
        return self.train["task"]

    @property
    def max_steps(self) -> int:
        return self.train["max_steps"]

    @property
    def lambda_p(self) -> float:
        return self.train["lambda_p"]

    @property
    def config(self) -> TrainConfig:
        return TrainConfig.from_dict(self.train)

    @property
    def partial(self) -> bool:
        return self.status in ("cancelled", "failed")

    @property
    def test(self) -> TestMetrics:
        """The test metrics (of a card read_card has checked); empty (false) when not measured."""
        t = self.metrics.get("test") if isinstance(self.metrics, dict) else None
        return TestMetrics.from_dict(t if isinstance(t, dict) else {})

    def completed(self, **changes) -> "RunRecord":
        """A copy with `changes` (the name, the metrics) filled in."""
        return replace(self, **changes)

    def to_card(self) -> dict:
        """The run.json mapping."""
        return {
            "format": FORMAT, "format_version": FORMAT_VERSION, "ponder_version": self.ponder_version,
            "name": card_text(self.name), "model": self.model, "train": self.train, "status": card_text(self.status),
            "reason": card_text(self.reason), "device": card_text(self.device),
            "train_seconds": None if self.train_seconds is None else round(float(self.train_seconds), 2),
            "steps": None if self.steps is None else int(self.steps),
            "created": self.created or time.strftime("%Y-%m-%dT%H:%M:%S"), "metrics": self.metrics or {},
            **self.extra,
        }

    @classmethod
    def from_card(cls, card: dict) -> "RunRecord":
        """The record of a card read_card has checked."""
        named = {f.name for f in fields(cls)} - {"extra"}
        top = ("format", "format_version")
        kw = {k: card[k] for k in named if card.get(k) is not None}
        kw["train"] = dict(card["train"])
        kw.setdefault("metrics", {})
        return cls(**kw, extra={k: v for k, v in card.items() if k not in named and k not in top})


def new_record(config: TrainConfig, model: dict, *, name: str = "", status: str = "completed", reason: str = "",
               device: str = "cpu", train_seconds: float = 0.0, steps: int = 0,
               metrics: Optional[dict] = None) -> RunRecord:
    """A record for a run of `config` (its model config `model`)."""
    return RunRecord(train=config.to_dict(), model=model, name=name, status=status, reason=reason, device=device,
                     train_seconds=train_seconds, steps=steps, metrics=metrics or {})
