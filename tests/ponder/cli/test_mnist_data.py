"""ponder/cli/mnist_data.py: python -m ponder data [--download] says where MNIST is, and fetches it with torchvision's
downloader (mocked here: there is no internet in the tests)."""
import gzip
import sys
import types

import numpy as np

from helpers import assert_one_line_error, run_cli
from ponder.data import MNIST_FILES


def _idx(data: np.ndarray) -> bytes:
    """An IDX file of unsigned bytes: magic 0x0800 + ndim, the sizes big-endian, the bytes."""
    head = (0x0800 + data.ndim).to_bytes(4, "big") + b"".join(int(n).to_bytes(4, "big") for n in data.shape)
    return head + data.astype(np.uint8).tobytes()


class FakeMNIST:
    """torchvision.datasets.MNIST's download: the split's two files into root/MNIST/raw (3 training and 2 test
    images here), as torchvision leaves them: each .gz and its decompressed file."""
    calls = []

    def __init__(self, root, train, download):
        FakeMNIST.calls.append((root, train, download))
        raw = __import__("pathlib").Path(root) / "MNIST" / "raw"
        raw.mkdir(parents=True, exist_ok=True)
        n, (images, labels) = (3, MNIST_FILES[:2]) if train else (2, MNIST_FILES[2:])
        for name, data in ((images, np.full((n, 28, 28), 7)), (labels, np.arange(n))):
            (raw / f"{name}.gz").write_bytes(gzip.compress(_idx(data)))
            (raw / name).write_bytes(_idx(data))


def _fake_torchvision(monkeypatch, cls):
    datasets = types.ModuleType("torchvision.datasets")
    datasets.MNIST = cls
    monkeypatch.setitem(sys.modules, "torchvision.datasets", datasets)


def test_data_says_where_mnist_is_missing_and_the_command_that_fetches_it(tmp_path, capsys, monkeypatch):
    _fake_torchvision(monkeypatch, FakeMNIST)
    FakeMNIST.calls = []
    rc, out, _ = run_cli(["data", "--data-dir", str(tmp_path)], capsys)
    assert rc == 1 and f"MNIST is not in {tmp_path}/MNIST/raw/" in out
    assert f"`python -m ponder data --download --data-dir {tmp_path}`" in out and not FakeMNIST.calls  # asked only


def test_data_download_fetches_both_splits_then_finds_them(tmp_path, capsys, monkeypatch):
    _fake_torchvision(monkeypatch, FakeMNIST)
    FakeMNIST.calls = []
    rc, out, _ = run_cli(["data", "--download", "--data-dir", str(tmp_path)], capsys)
    assert rc == 0 and FakeMNIST.calls == [(str(tmp_path), True, True), (str(tmp_path), False, True)]
    # 3 training images: the seeded validation split takes up to 5,000, so all 3 here
    assert f"MNIST downloaded in {tmp_path}/MNIST/raw/: 0 training, 3 validation and 2 test images" in out
    rc, out, _ = run_cli(["data", "--data-dir", str(tmp_path)], capsys)      # there now: nothing fetched
    assert rc == 0 and out.startswith(f"MNIST is in {tmp_path}/MNIST/raw/") and len(FakeMNIST.calls) == 2


def test_a_failed_download_is_one_line_saying_why(tmp_path, capsys, monkeypatch):
    class Offline:
        def __init__(self, root, train, download):
            raise RuntimeError("Error downloading train-images-idx3-ubyte.gz:\nTried https://..., got: no network")
    _fake_torchvision(monkeypatch, Offline)
    rc, _, err = run_cli(["data", "--download", "--data-dir", str(tmp_path / "d")], capsys)
    assert_one_line_error(rc, err, "download failed: RuntimeError: Error downloading train-images-idx3-ubyte.gz")
