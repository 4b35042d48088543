"""explorer/drawing/digits.py: the digit pools (MNIST test set, or the bundled examples without it)."""
import numpy as np
import torch

from explorer.drawing.digits import digit_pool, example_digits


def test_digit_pools():
    ex = example_digits()
    assert len(ex) == 20 and ex.x.shape == (20, 28, 28) and ex.x.dtype == np.uint8
    assert sorted(set(ex.y.tolist())) == list(range(10))
    assert digit_pool(None).source == "bundled examples"


def test_example_digits_are_the_mnist_test_images(mnist):
    ex = example_digits()
    assert torch.equal(mnist.test_x[torch.as_tensor(ex.index)], torch.as_tensor(ex.x))
    assert torch.equal(mnist.test_y[torch.as_tensor(ex.index)], torch.as_tensor(ex.y))


def test_the_mnist_pool_is_the_test_set_in_order(mnist):
    pool = digit_pool(mnist)
    assert pool.source == "MNIST test set" and len(pool) == 10000
    assert np.array_equal(pool.index, np.arange(10000)) and np.array_equal(pool.y, mnist.test_y.numpy())


def test_missing_mnist_is_said_in_the_explorers_words(tmp_path, monkeypatch):
    # a job or sweep trial that loads MNIST shows this error as its reason: no command-line flag in it
    import pytest
    from explorer.drawing.digits import mnist_dataset
    from ponder.data import DataError
    monkeypatch.setenv("PONDER_DATA", str(tmp_path / "none"))
    with pytest.raises(DataError) as e:
        mnist_dataset()
    msg = str(e.value)
    assert "--data-dir" not in msg and "PONDER_DATA" in msg and str((tmp_path / "none").resolve()) in msg
    assert e.value.download_failed == ""


def test_the_tests_look_for_mnist_where_the_explorer_does(monkeypatch):
    # a fresh clone set up from the README keeps MNIST in ./data: without PONDER_DATA the tests must look there too
    import importlib

    import paths
    from explorer.drawing.digits import data_dir
    from paths import ROOT
    monkeypatch.delenv("PONDER_DATA")
    monkeypatch.chdir(ROOT)
    try:
        assert importlib.reload(paths).DATA_DIR == str(data_dir().resolve())
    finally:
        monkeypatch.undo()
        importlib.reload(paths)
