"""MNIST: classify a digit; its step functions (readers) are in ponder.tasks.mnist.readers.

Its difficulty groups: the digit class (by_class rows) and the rotation (ponder.analysis.studies.rotation_study
on rotation_inputs()).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from ... import data as D
from ...config import TrainConfig, _check, _choice, finite, is_int
from ..base import Batches, EvalSet, Task, register
from .config import MnistConfig
from .options import MNIST_READERS, ROWS_PER_STEP, MnistOptions

# Per-reader model sizes over MnistConfig's: the row reader's fc sees a 14 x 7 map per channel, so
# 16 second-layer channels keep it at 1568 x 128 weights (~1 MB a model, like the "cnn" reader's).
READER_DEFAULTS = {"rows": dict(channels2=16)}


class MnistBatches(Batches):
    """Shuffled MNIST training batches from a uint8 tensor on the device, rotated on the fly."""

    def __init__(self, mnist: D.Mnist, cfg: TrainConfig, device):
        self.x, self.y = mnist.train_x.to(device), mnist.train_y.to(device)
        self.val_x, self.val_y = mnist.val_x.to(device), mnist.val_y.to(device)
        self.cfg, self.device = cfg, device
        self.g = torch.Generator().manual_seed(cfg.seed)
        self.per_epoch = math.ceil(len(self.y) / cfg.batch_size)
        self.epoch_start, self.drawn, self.skip = self.g.get_state(), 0, 0   # state(): where the stream stands

    def _to_device(self, t: torch.Tensor) -> torch.Tensor:
        """A host tensor (drawn by the seeded CPU generator) to the device; to a GPU from pinned memory,
        so the copy does not make the host wait for the GPU's queue."""
        if torch.device(self.device).type == "cuda":
            return t.pin_memory().to(self.device, non_blocking=True)
        return t.to(self.device)

    def __iter__(self):
        bs = self.cfg.batch_size
        skip, self.skip = self.skip, 0                 # batches of this epoch a resumed run already trained on
        while True:
            self.epoch_start, self.drawn = self.g.get_state(), 0
            perm = self._to_device(torch.randperm(len(self.y), generator=self.g))
            for i in range(0, len(perm), bs):
                idx = perm[i:i + bs]
                angles = D.uniform_angles(len(idx), self.cfg.rotate_train, self.g) if self.cfg.rotate_train else None
                angles = self._to_device(angles) if angles is not None else None
                self.drawn += 1
                if skip:
                    skip -= 1
                    continue
                yield D.mnist_inputs(self.x[idx], angles=angles), self.y[idx]

    def state(self) -> dict:
        """The generator at the start of the epoch being drawn and how many of its batches were drawn."""
        return {"generator": self.epoch_start, "drawn": torch.tensor([self.drawn])}

    def load_state(self, state: dict) -> None:
        if "generator" in state:
            self.g.set_state(state["generator"].to(torch.uint8).cpu())
            self.skip = int(state["drawn"][0])

    def validation(self):
        return D.mnist_inputs(self.val_x), self.val_y


def mnist_split(mnist: D.Mnist, split: str = "test", limit: Optional[int] = None):
    """(uint8 images [M, 28, 28], labels [M]) of a split, the first `limit` of them."""
    xs = {"test": mnist.test_x, "val": mnist.val_x, "train": mnist.train_x}[split]
    ys = {"test": mnist.test_y, "val": mnist.val_y, "train": mnist.train_y}[split]
    return (xs[:limit], ys[:limit]) if limit else (xs, ys)


class MnistTask(Task):
    name, label = "mnist", "MNIST"
    model_config_cls = MnistConfig
    options_cls = MnistOptions
    # The default design ponders: the row reader (MnistOptions: evidence grows with the steps, so E[n] varies by
    # digit) and lambda_p 0.5 (prior mean 2 steps), which pulls halting to the earliest step a digit allows; at 0.2 most
    # digits wait for all 28 rows. 60 s on one CPU core: 0.990 test accuracy, E[n] std 1.56-1.77 over 3 seeds
    # (docs/results.md, "The default MNIST design"). The article's design is reader "cnn".
    defaults = {"lambda_p": 0.5}
    chance = 0.1                    # 10 classes
    uses_data = True
    pages = ("digit", "rotation")
    default_model = "mnist-adaptive"
    shown_groups = ("E[n] Q", "by quartile of E[n] (Q1: the quarter of digits it ponders least)")
    budget_seconds = 60
    data_bytes = 60_000 * (28 * 28 + 8)      # training + validation images (uint8) and labels (int64)
    infer_states = 2                         # the readers keep all N hidden states (one stacked [N, B, H] tensor)

    def load_data(self, data_dir: Optional[str] = None) -> D.Mnist:
        return D.load_mnist(data_dir)

    def model_config(self, cfg: TrainConfig) -> MnistConfig:
        return MnistConfig(hidden=cfg.hidden, reader=cfg.reader, rows_per_step=cfg.rows_per_step,
                           **READER_DEFAULTS.get(cfg.reader, {}))

    def check_model_field(self, name: str, v) -> bool:
        if name == "dropout":
            _check(finite(v) and 0.0 <= v < 1.0, name, "[0, 1)", v)
        elif name == "reader":
            _check(_choice(v, MNIST_READERS), name, f"one of {', '.join(MNIST_READERS)}", v)
        elif name == "rows_per_step":
            _check(is_int(v) and v in ROWS_PER_STEP, name, f"one of {', '.join(map(str, ROWS_PER_STEP))}", v)
        else:
            return False
        return True

    def build_step(self, model_cfg: MnistConfig, lambda_p: float):
        from .readers import MNIST_STEPS
        return MNIST_STEPS[model_cfg.reader](model_cfg, lambda_p)

    def batches(self, cfg: TrainConfig, device, data: D.Mnist) -> MnistBatches:
        return MnistBatches(data, cfg, device)

    def test_set(self, model, cfg: TrainConfig, data: D.Mnist, limit: Optional[int] = None) -> EvalSet:
        xs, ys = mnist_split(data, "test", limit)
        return EvalSet(D.mnist_inputs(xs), ys, info={"split": "test"}, rows=("by_class", "label", ys),
                       row_group="digit {value}")

    def validation_set(self, model, cfg: TrainConfig, data: D.Mnist, limit: Optional[int] = None) -> EvalSet:
        """The 5,000 held-out training images (never trained on; the first `limit`)."""
        xs, ys = mnist_split(data, "val", limit)
        return EvalSet(D.mnist_inputs(xs), ys, info={"split": "val"})

    def rotation_inputs(self, data: D.Mnist, limit: Optional[int] = None):
        return mnist_split(data, "test", limit)

    def probe_inputs(self, model_cfg: MnistConfig, n: int = 4) -> torch.Tensor:
        x = torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
        x[0], x[1] = 0, 255                   # a blank picture and an all-white one
        return D.mnist_inputs(x)              # [n, 1, 28, 28]

    def feature_floats(self, m: MnistConfig, n_steps: int = 1) -> int:
        """The CNN's input and conv outputs per image; 8 times that for the coarse reader (8 resolutions); the
        recall step's input, its stem's output and per step its block's input, output and new state (5C x 14 x 14)."""
        if m.reader == "recall":
            return 28 * 28 + m.channels1 * 14 * 14 * (1 + 5 * n_steps)
        one = 28 * 28 + m.channels1 * 28 * 28 + m.channels2 * 14 * 14
        return one * (8 if m.reader == "coarse" else 1)

    def describe(self, record) -> str:
        m = record.model or {}
        r = m.get("reader") if isinstance(m, dict) else None
        if not r:                                   # a card that does not say is not given the default
            return ""
        return "reader " + (f"rows ({m.get('rows_per_step', '?')} a step)" if r == "rows" else str(r))

    def step_meaning(self, model: dict) -> tuple[str, str]:
        reader = model.get("reader") or "cnn"           # a card without a reader is the article's design
        if reader == "rows":
            k = model.get("rows_per_step", 2)
            return (f"each step reveals {k} more rows of the image, top to bottom (all 28 by step {math.ceil(28 / k)})",
                    "so the steps a digit needs depend on how far down its ink goes, not only on how hard it is "
                    "(rotating a digit also moves its ink to other rows)")
        if reader == "coarse":
            from .readers import CoarseReader
            r = CoarseReader.RESOLUTIONS
            return (f"each step sees the image at a finer resolution ({r[0]}×{r[0]}, {r[1]}×{r[1]}, … "
                    f"{r[-1]}×{r[-1]} from step {len(r)})", "")
        if reader == "recall":
            from .recall import receptive_field
            whole = next(n + 1 for n in range(28) if receptive_field(n) >= 28)
            return (f"each step applies the same small convolution once more to a state that sees the whole image, "
                    f"so what a position has taken in grows from {receptive_field(0)}×{receptive_field(0)} pixels "
                    f"at step 1 to the whole digit at step {whole}", "")
        return ("every step sees the whole image: step 1 is already a full classifier and later steps only refine "
                "its state", "so extra steps bring no new evidence and halting mostly follows the prior")


register(MnistTask())
