"""MNIST's options: which step function reads the digit (the reader), how many rows a step, the training rotation."""
from __future__ import annotations

from dataclasses import dataclass

from ..options import option

MNIST_READERS = ("cnn", "rows", "coarse", "recall")
ROWS_PER_STEP = (2, 4, 14, 28)   # the row reader's feature map has 14 rows, each 2 image rows high
READER_LABELS = {"rows": "rows: 2 more each step", "coarse": "coarse to fine",      # fit the sidebar's box
                 "cnn": "cnn: whole image", "recall": "recall: whole image, more"}
# E[n] std over the test digits, 3-epoch runs (README's reader table; docs/results.md, "The default MNIST design")
READER_NOTE = ("Which ponder: rows most (E[n] std ~1.6 steps over digits), coarse less (~1.0); cnn, the article's, "
               "sees the whole digit at step 1 and halts by the prior.")


@dataclass
class MnistOptions:
    # The default design ponders: the row reader (evidence grows with the steps, so E[n] varies by digit); the
    # article's design is "cnn" (docs/results.md, "The default MNIST design").
    reader: str = option("rows", "the MNIST step function: rows (2 more image rows each step: evidence grows, so "
                         "halting varies by digit), cnn (the article's: the whole image every step, step 1 is already "
                         "a classifier and halting follows the prior), coarse (a growing resolution), recall (the "
                         "whole image every step, a weight-tied conv block computing further on it each step)",
                         label="What each step sees (MNIST)", choices=MNIST_READERS, labels=READER_LABELS,
                         note=READER_NOTE)
    rows_per_step: int = option(2, "rows reader: image rows revealed per step", label="Rows per step (rows reader)",
                                choices=ROWS_PER_STEP)
    rotate_train: float = option(0.0, "rotate each training image by its own angle drawn uniformly in ±d degrees",
                                 label="Training rotation ±d (degrees)", lo=0.0, hi=180.0, step=5.0, slider=True)
