"""Parity's options: the data preset (vector length, the k trained and tested on) and the batches an epoch."""
from __future__ import annotations

from dataclasses import dataclass

from ..options import option

PARITY_PRESETS = {
    # name: n_elems, the k (number of non-zeros) trained on and tested on, and the test's easy and
    # hard ranges of k (what every measurement reports as `easy` / `hard`; without them: the two halves
    # of the test range, see easy_hard)
    "small": dict(n_elems=8, train_k=(1, 8), test_k=(1, 8)),          # ~1 minute on 2 CPU cores
    "medium": dict(n_elems=16, train_k=(1, 16), test_k=(1, 16)),
    "medium-extrapolation": dict(n_elems=16, train_k=(1, 8), test_k=(9, 16)),   # the paper's split, scaled to 16
    "large": dict(n_elems=32, train_k=(1, 32), test_k=(1, 32)),
    "video-15": dict(n_elems=15, train_k=(1, 15), test_k=(1, 15), easy=(1, 4), hard=(11, 15)),   # the video seed's
    # the video seed's extrapolation: trained on k <= 25, tested on all k; easy = seen k, hard = unseen 26..30
    "video-30-extrapolation": dict(n_elems=30, train_k=(1, 25), test_k=(1, 30), easy=(1, 25), hard=(26, 30)),
    "paper": dict(n_elems=64, train_k=(1, 64), test_k=(1, 64)),       # the paper's interpolation
    "extrapolation": dict(n_elems=96, train_k=(1, 48), test_k=(49, 96)),  # the paper's extrapolation
}


def preset_label(name: str) -> str:
    """'small (n=8)'; 'video-30 extrap. (n=30)' for a preset with "-extrapolation" (its whole name is cut in the
    sidebar's box)."""
    return f"{name.replace('-extrapolation', ' extrap.')} (n={PARITY_PRESETS[name]['n_elems']})"


@dataclass
class ParityOptions:
    parity_preset: str = option("small", "the parity data preset: vector length n and the numbers of non-zeros k "
                                "trained and tested on", label="Parity preset", choices=tuple(PARITY_PRESETS),
                                labels={name: preset_label(name) for name in PARITY_PRESETS})
    cell: str = option("gru", "the recurrent cell: gru, or tanh (the paper's App. B.1 and Fojo et al.'s: one "
                       "hidden layer of tanh units)", label="Cell", choices=("gru", "tanh"))
    first_flag: bool = option(False, "feed a flag that is 1 at the first step and 0 after beside the vector "
                              "(Graves' and Fojo et al.'s input for a task whose input does not change)",
                              label="First-step flag")
    init: str = option("torch", "the cell's and heads' starting weights: torch (PyTorch's uniform(±1/√H) for every "
                       "weight and bias) or glorot (TensorFlow's: Glorot-uniform weights over the stacked [input, "
                       "state] matrix, zero biases, as Fojo et al.'s BasicRNNCell)", label="Initial weights",
                       choices=("torch", "glorot"))
    layout: str = option("random", "where a vector's k non-zeros sit: random positions (the paper's), or the first "
                         "k entries (prefix: Fojo et al.'s)", label="Non-zeros at", choices=("random", "prefix"))
    steps_per_epoch: int = option(500, "batches per epoch (parity generates its data)", label="Batches per epoch",
                                  lo=1, step=100)
