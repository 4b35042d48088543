"""The MNIST step function's model config: what a card's `model` holds for an MNIST run."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class MnistConfig:
    """A CNN embedding + GRU cell over steps. `reader` says what the cell sees at step n."""
    channels1: int = 16      # first conv layer's channels (5x5, then 2x2 max-pool)
    channels2: int = 32      # second conv layer's channels (5x5, then a max-pool)
    embed: int = 128         # size of the image embedding fed to the cell
    hidden: int = 64         # GRU hidden size
    dropout: float = 0.0     # dropout on the embedding during training
    reader: str = "cnn"      # (a card without a reader is the article's design; new runs default to "rows",
                             # MnistTask.defaults) "cnn": the whole image at every step (step 1 is a full classifier);
                             # "rows": the first rows_per_step * n rows at step n (evidence grows);
                             # "coarse": the image at a growing resolution, 2x2 ... 28x28;
                             # "recall": the whole image every step, a weight-tied conv block over a
                             # channels1 x 14 x 14 state (ponder.tasks.mnist.recall; embed, hidden unused)
    rows_per_step: int = 2   # "rows" reader: image rows revealed per step (2 -> all 28 rows by step 14)
