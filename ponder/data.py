"""Data: MNIST as uint8 tensors on the training device and batched rotations (parity's: ponder.tasks.parity.data).

MNIST is read from a local folder (--data-dir or $PONDER_DATA): the four .gz files in
<root>/MNIST/raw/ are decompressed there on first use and read as IDX files here (numpy,
no torchvision import: that took ~2 s of CPU in every process that loads MNIST). With no
local copy it falls back to torchvision's download. Images stay uint8 [N, 28, 28] on the
device; normalisation and rotation happen per batch on that device (no DataLoader, no
per-image PIL).
"""
from __future__ import annotations

import gzip
import os
import shutil
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from .files import CheckpointError, read_regular

MNIST_MEAN, MNIST_STD = 0.1307, 0.3081
MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
               "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
SPLIT_SEED = 0            # the 55k/5k train/validation split is the same for every run
N_VAL = 5000


class DataError(RuntimeError):
    """MNIST could not be found or fetched. The message names the folder and the remedies (in the
    command line's words); `download_failed` says why a download did not work ("" if none was tried)."""

    def __init__(self, message: str, download_failed: str = ""):
        super().__init__(message)
        self.download_failed = download_failed


FIX = "delete it (a decompressed file is made again from its .gz) or put a good MNIST file there"
MAX_IDX_BYTES = 64 * 1024 * 1024      # an IDX file read whole (the training images: 47 MB)


def default_data_dir() -> str:
    return os.environ.get("PONDER_DATA") or "data"


def _prepare_raw(root: Path) -> Path:
    """Make <root>/MNIST/raw hold the decompressed files; return the root that holds them.

    If the folder is read-only, the files are decompressed into a user cache folder instead.
    """
    raw = root / "MNIST" / "raw"
    missing = [f for f in MNIST_FILES if not (raw / f).exists()]
    if not missing:
        return root
    if not all((raw / (f + ".gz")).exists() for f in missing):
        return root
    try:
        _decompress(raw, raw, missing)
        return root
    except OSError:
        cache_root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ponder"
        cache_raw = cache_root / "MNIST" / "raw"
        cache_raw.mkdir(parents=True, exist_ok=True)
        _decompress(raw, cache_raw, [f for f in MNIST_FILES if not (cache_raw / f).exists()])
        return cache_root


def _decompress(src: Path, dst: Path, names: Sequence[str]) -> None:
    for name in names:
        src_file = src / (name + ".gz")
        if src_file.exists() and not src_file.is_file():
            raise ValueError(f"{src_file} is not a regular file (a FIFO or a device?): {FIX}")
        if not src_file.exists():         # already decompressed at the source
            shutil.copyfile(src / name, dst / name)
            continue
        fd, tmp = tempfile.mkstemp(dir=dst, suffix=".tmp")
        try:
            with gzip.open(src_file, "rb") as fin, os.fdopen(fd, "wb") as fout:
                left = MAX_IDX_BYTES + 1      # no more than read_idx reads: a gzip bomb stops at its first 64 MB
                while left > 0 and (block := fin.read(min(left, 2**20))):
                    fout.write(block)
                    left -= len(block)
            if left <= 0:
                raise ValueError(f"{src_file} decompresses to over {MAX_IDX_BYTES // 2**20} MB, more than any MNIST "
                                 f"file: replace it with the file as downloaded")
            os.replace(tmp, dst / name)   # atomic: never a half-written file
        except (EOFError, zlib.error, gzip.BadGzipFile) as e:
            raise ValueError(f"{src_file} is not a complete gzip file ({type(e).__name__}: truncated or "
                             f"corrupt?): replace it with the file as downloaded") from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


@dataclass
class Mnist:
    """uint8 images [N, 28, 28] and int64 labels [N], for the three splits."""
    train_x: torch.Tensor
    train_y: torch.Tensor
    val_x: torch.Tensor
    val_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor

    def to(self, device) -> "Mnist":
        return Mnist(*(t.to(device, non_blocking=True) for t in
                       (self.train_x, self.train_y, self.val_x, self.val_y, self.test_x, self.test_y)))


def load_mnist(data_dir: Optional[str] = None, download: bool = True) -> Mnist:
    """MNIST with a seeded 55k/5k train/validation split and the 10k test set."""
    root = Path(data_dir or default_data_dir()).expanduser()
    try:
        train_x, train_y, test_x, test_y = _read_raw(_prepare_raw(root) / "MNIST" / "raw")
    except ValueError as bad:              # there but unreadable: a download would keep the same files
        raise DataError(f"{bad}; or pass --data-dir with another folder (or set PONDER_DATA)") from None
    except OSError:
        if not download:
            raise DataError(_missing_message(root)) from None
        try:
            from torchvision.datasets import MNIST
            root.mkdir(parents=True, exist_ok=True)
            MNIST(str(root), train=True, download=True)      # fetches the four files into <root>/MNIST/raw
            MNIST(str(root), train=False, download=True)
            train_x, train_y, test_x, test_y = _read_raw(root / "MNIST" / "raw")
        except Exception as e:  # no internet, unwritable folder, ...
            why = " ".join(f"{type(e).__name__}: {e}".split())
            raise DataError(_missing_message(root) + f" (download failed: {why})", download_failed=why) from None
    g = torch.Generator().manual_seed(SPLIT_SEED)
    perm = torch.randperm(len(train_y), generator=g)
    val_idx, train_idx = perm[:N_VAL], perm[N_VAL:]
    return Mnist(train_x[train_idx], train_y[train_idx], train_x[val_idx], train_y[val_idx], test_x, test_y)


def read_idx(path: Path, ndim: int) -> torch.Tensor:
    """One IDX file of unsigned bytes (MNIST's format: magic 0x0800 + ndim, ndim big-endian sizes, the
    bytes) as a uint8 tensor of those sizes. ValueError, naming the file, if it is not one."""
    try:
        raw = read_regular(Path(path), MAX_IDX_BYTES)   # never waits on a FIFO; MNIST's largest file is 47 MB
    except CheckpointError as e:
        raise ValueError(f"{e}: {FIX}") from None
    head = 4 + 4 * ndim
    sizes = [int.from_bytes(raw[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    if len(raw) < head or int.from_bytes(raw[:4], "big") != 0x0800 + ndim or \
            len(raw) - head != int(np.prod(sizes)):
        raise ValueError(f"{path} is not an IDX file of {ndim}-d unsigned bytes (truncated or corrupt?): "
                         f"{FIX}")
    return torch.from_numpy(np.frombuffer(raw, np.uint8, offset=head).copy()).view(*sizes)


def _read_raw(raw: Path):
    """train images [60000, 28, 28] uint8, labels [60000] int64, test images and labels, from <raw>.
    ValueError naming the file unless each split holds >= 1 image of 28 x 28 and as many labels, all 0-9."""
    files = [raw / name for name in MNIST_FILES]
    out = []
    for images, labels in ((files[0], files[1]), (files[2], files[3])):
        x, y = read_idx(images, 3), read_idx(labels, 1).long()
        if x.shape[0] < 1 or tuple(x.shape[1:]) != (28, 28):
            raise ValueError(f"{images} holds images of {list(x.shape)}, not N >= 1 images of 28 x 28: {FIX}")
        if len(y) != len(x):
            raise ValueError(f"{labels} holds {len(y):,} labels for the {len(x):,} images of {images.name}: {FIX}")
        if int(y.max()) > 9:
            raise ValueError(f"{labels} holds a label of {int(y.max())} (MNIST's are 0-9): {FIX}")
        out += [x, y]
    return tuple(out)


def _missing_message(root: Path) -> str:
    return (f"MNIST not found in {root.resolve()}/MNIST/raw/. Either put the four MNIST .gz files "
            f"there (train-images-idx3-ubyte.gz, ...) and pass --data-dir {root} (or set PONDER_DATA), "
            f"or run once with internet access so torchvision can download it.")


# ----------------------------------------------------------------------------- images

def normalize(x_uint8: torch.Tensor) -> torch.Tensor:
    """uint8 [B, 28, 28] -> float [B, 1, 28, 28] in [0, 1] (not yet mean/std-normalised)."""
    return x_uint8.unsqueeze(1).float().div_(255.0)


def standardize(x01: torch.Tensor) -> torch.Tensor:
    """[0, 1] images -> the network's input scale (MNIST mean/std)."""
    return (x01 - MNIST_MEAN) / MNIST_STD


def rotate_fixed(x01: torch.Tensor, angle: float) -> torch.Tensor:
    """Rotate every image by exactly `angle` degrees (counter-clockwise), torchvision v2. [B, 1, H, W]."""
    if angle == 0:
        return x01
    from torchvision.transforms.v2 import InterpolationMode
    from torchvision.transforms.v2 import functional as TF
    return TF.rotate(x01, float(angle), interpolation=InterpolationMode.BILINEAR)


def rotate_each(x01: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate image b by angles[b] degrees (counter-clockwise, about the centre). [B, 1, H, W].

    One batched affine_grid + grid_sample, matching torchvision's rotate (bilinear, zero fill)
    for equal angles (tests/test_data.py checks this).
    """
    rad = torch.deg2rad(angles.to(x01.device, torch.float32))             # [B]
    cos, sin = torch.cos(rad), torch.sin(rad)
    # affine_grid maps output coords to input coords in normalised (x right, y down) space:
    # a counter-clockwise rotation of the picture samples the input at R(+angle) of the output.
    theta = torch.stack([torch.stack([cos, -sin, torch.zeros_like(cos)], -1),
                         torch.stack([sin, cos, torch.zeros_like(cos)], -1)], 1)   # [B, 2, 3]
    grid = F.affine_grid(theta, list(x01.shape), align_corners=False)
    return F.grid_sample(x01, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def uniform_angles(n: int, max_deg: float, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """n angles drawn uniformly from [-max_deg, max_deg] (CPU)."""
    return (torch.rand(n, generator=generator) * 2 - 1) * max_deg


def mnist_inputs(x_uint8: torch.Tensor, angle: float = 0.0, angles: Optional[torch.Tensor] = None) -> torch.Tensor:
    """uint8 images -> network inputs, rotated by a fixed angle or per-sample angles."""
    x = normalize(x_uint8)
    if angles is not None:
        x = rotate_each(x, angles)
    elif angle:
        x = rotate_fixed(x, angle)
    return standardize(x)
