"""MNIST for the explorer, and the example digits shipped in assets/examples (no Streamlit here).

MNIST is read from $PONDER_DATA (or ./data); it is downloaded (torchvision) only when the user
presses the download button, so every page works offline without it. The load is memoised per
process so training threads and pages share one copy (~50 MB).
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from ponder.data import DataError, Mnist, default_data_dir, load_mnist

EXAMPLES = Path(__file__).resolve().parents[2] / "assets" / "examples" / "mnist-test-digits.npz"

_lock = threading.Lock()
_cache: dict = {}


def data_dir() -> Path:
    return Path(os.environ.get("PONDER_DATA") or default_data_dir()).expanduser()


def missing_data_message() -> str:
    """Where to put MNIST, in one sentence."""
    return (f"MNIST was not found in {data_dir().resolve()}/MNIST/raw/. Put the four MNIST .gz files "
            f"there (train-images-idx3-ubyte.gz, ...) or point PONDER_DATA at a folder that holds "
            f"MNIST/raw/, then reload; or download it here (needs internet).")


def mnist_dataset(download: bool = False) -> Mnist:
    """MNIST from the local folder, loaded once per process and folder. Raises DataError.

    download=True fetches it there with torchvision first when it is missing (needs internet). The error
    says what to do in the explorer's words (a training job or sweep trial shows it as its reason)."""
    key = str(data_dir())
    with _lock:
        if key not in _cache:
            try:
                _cache[key] = load_mnist(key, download=download)
            except DataError as e:        # the command line's words (--data-dir) -> the explorer's
                raise DataError(missing_data_message(), download_failed=e.download_failed) from None
        return _cache[key]


@dataclass
class DigitPool:
    """Test digits to pick from: the MNIST test set, or the bundled examples without it."""
    x: np.ndarray          # uint8 [M, 28, 28]
    y: np.ndarray          # int64 [M]
    index: np.ndarray      # position in the MNIST test set [M]
    source: str            # "MNIST test set" or "bundled examples"

    def __len__(self) -> int:
        return len(self.y)


def example_digits() -> DigitPool:
    with np.load(EXAMPLES) as f:
        return DigitPool(f["x"].astype(np.uint8), f["y"].astype(np.int64), f["index"].astype(np.int64),
                         "bundled examples")


def digit_pool(mnist: Optional[Mnist]) -> DigitPool:
    if mnist is None:
        return example_digits()
    return DigitPool(mnist.test_x.numpy(), mnist.test_y.numpy(), np.arange(len(mnist.test_y)), "MNIST test set")
