"""ponder/data.py: MNIST loading (local folder, decompression, split), rotations, parity data."""
import gzip
import shutil

import numpy as np
import pytest
import torch

from helpers import DATA_DIR, needs_mnist
from ponder import data as D
from ponder.tasks.parity import data as PD
from ponder.tasks.parity.task import PARITY_PRESETS


def test_split_sizes_and_disjoint(mnist):
    assert mnist.train_x.shape == (55000, 28, 28) and mnist.train_x.dtype == torch.uint8
    assert mnist.val_x.shape == (5000, 28, 28) and mnist.test_x.shape == (10000, 28, 28)
    assert mnist.train_y.shape == (55000,) and mnist.test_y.max() == 9
    # no validation image is also a training image (compare raw bytes of a sample)
    train_rows = {bytes(r) for r in mnist.train_x[:5000].flatten(1).numpy()}
    assert not any(bytes(r) in train_rows for r in mnist.val_x[:500].flatten(1).numpy())
    # the split is seeded: the same every load
    again = D.load_mnist(DATA_DIR, download=False)
    assert torch.equal(again.val_y, mnist.val_y)


@needs_mnist
def test_decompresses_gz_into_raw(tmp_path):
    src = f"{DATA_DIR}/MNIST/raw"
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in D.MNIST_FILES:
        shutil.copy(f"{src}/{name}.gz", raw / f"{name}.gz")
    m = D.load_mnist(str(tmp_path), download=False)
    assert all((raw / name).exists() for name in D.MNIST_FILES)
    assert not list(raw.glob("*.tmp"))
    assert m.test_x.shape == (10000, 28, 28)


@needs_mnist
def test_the_idx_reader_gives_torchvisions_mnist(mnist):
    from torchvision.datasets import MNIST
    train, test = MNIST(DATA_DIR, train=True), MNIST(DATA_DIR, train=False)
    assert torch.equal(mnist.test_x, test.data) and torch.equal(mnist.test_y, test.targets)
    perm = torch.randperm(60000, generator=torch.Generator().manual_seed(D.SPLIT_SEED))     # the seeded split
    assert torch.equal(mnist.val_x, train.data[perm[:D.N_VAL]]) and torch.equal(mnist.train_y, train.targets[perm[D.N_VAL:]])
    assert mnist.train_y.dtype == train.targets.dtype == torch.int64


def test_idx_files_are_read_by_their_header(tmp_path):
    # magic 0x00000803 (unsigned bytes, 3 dims), sizes 2 × 1 × 3, then the 6 bytes
    good = tmp_path / "good"
    good.write_bytes(bytes([0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 3, 1, 2, 3, 4, 5, 255]))
    assert D.read_idx(good, 3).tolist() == [[[1, 2, 3]], [[4, 5, 255]]]
    for bad in (good.read_bytes()[:-1], good.read_bytes()[:10], bytes([0, 0, 8, 1]) + good.read_bytes()[4:]):
        good.write_bytes(bad)                                     # truncated body, truncated header, labels' magic
        with pytest.raises(ValueError, match="good is not an IDX file"):
            D.read_idx(good, 3)


def test_a_corrupt_file_is_named_in_the_error(tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for name in D.MNIST_FILES:
        (raw / name).write_bytes(b"not mnist")
    for download in (False, True):             # present but unreadable: no download is tried, the file is named
        with pytest.raises(D.DataError, match="train-images-idx3-ubyte is not an IDX file") as e:
            D.load_mnist(str(tmp_path), download=download)
        assert "--data-dir" in str(e.value) and e.value.download_failed == ""


def test_missing_folder_names_folder_and_remedies(tmp_path):
    with pytest.raises(D.DataError) as e:
        D.load_mnist(str(tmp_path / "nothing"), download=False)
    msg = str(e.value)
    assert "nothing" in msg and "--data-dir" in msg and "download" in msg


def test_mnist_inputs_normalised(mnist):
    x = D.mnist_inputs(mnist.test_x[:1000])
    assert x.shape == (1000, 1, 28, 28)
    assert abs(x.mean().item()) < 0.1 and abs(x.std().item() - 1) < 0.1


def test_rotate_each_matches_torchvision_fixed():
    torch.manual_seed(0)
    x = torch.rand(8, 1, 28, 28)
    for a in (22.5, -45.0, 90.0, 180.0):
        assert torch.allclose(D.rotate_fixed(x, a), D.rotate_each(x, torch.full((8,), a)), atol=1e-4)
    # 90 degrees counter-clockwise moves the top row to the left column
    img = torch.zeros(1, 1, 28, 28)
    img[0, 0, 2, 10:18] = 1.0                       # a horizontal bar near the top
    r = D.rotate_fixed(img, 90.0)[0, 0]
    assert r[:, :14].sum() > 5 * r[:, 14:].sum()    # it lands on the left
    assert torch.equal(D.rotate_fixed(img, 0.0), img)


def test_uniform_angles_range_and_seed():
    a = D.uniform_angles(10000, 22.5, torch.Generator().manual_seed(0))
    assert a.abs().max() <= 22.5 and a.min() < -20 and a.max() > 20
    assert torch.equal(a, D.uniform_angles(10000, 22.5, torch.Generator().manual_seed(0)))


def test_parity_target_counts_plus_ones_not_nonzeros():
    x, y, k = PD.parity_batch(2000, 16, 1, 16, torch.Generator().manual_seed(0))
    assert ((x != 0).sum(1) == k).all()
    assert set(x.unique().tolist()) <= {-1.0, 0.0, 1.0}
    assert torch.equal(y, ((x == 1).sum(1) % 2).float())
    # the two definitions differ on many samples (so the test above would catch the wrong one)
    assert (y != ((x != 0).sum(1) % 2).float()).float().mean() > 0.3
    # hand example: (+1, -1, 0, +1) has two +1s -> even -> 0; (+1, -1, -1) one +1 -> odd -> 1
    assert ((torch.tensor([[1., -1, 0, 1], [1, -1, -1, 0]]) == 1).sum(1) % 2).tolist() == [0, 1]


def test_parity_k_range_and_fixed_eval_set():
    x, y, k = PD.parity_batch(5000, 96, 49, 96, torch.Generator().manual_seed(1))
    assert k.min() >= 49 and k.max() <= 96
    a = PD.parity_eval_set(8, 1, 8, size=100)
    b = PD.parity_eval_set(8, 1, 8, size=100)
    assert all(torch.equal(u, v) for u, v in zip(a, b))


def test_the_held_out_class_by_hand():
    # (+1, 0, -1): digits x + 1 = (2, 1, 0), h = 2 + 1·62 + 0·62² = 64 -> 64 mod 13 = 12;
    # (0, 0, 0): 1 + 62 + 3844 = 3907 = 13·300 + 7 -> 7; (-1, +1): 0 + 2·62 = 124 = 13·9 + 7 -> 7
    x = torch.tensor([[1., 0, -1], [0, 0, 0]])
    assert PD.parity_class(x).tolist() == [12, 7] and PD.parity_class(torch.tensor([[-1., 1]])).tolist() == [7]


@pytest.mark.parametrize("n", sorted({p["n_elems"] for p in PARITY_PRESETS.values()}))
def test_every_presets_single_non_zeros_include_held_out_vectors_of_both_kinds(n):
    x = torch.cat([torch.eye(n), -torch.eye(n)])                 # every k = 1 vector
    c = PD.parity_class(x)
    assert (c == PD.TEST_CLASS).sum() >= 2 and (c == PD.VAL_CLASS).sum() >= 2


def test_all_non_zero_held_out_vectors_have_both_labels():
    # k = n: a rule that fixed the count of -1s in a class would give one label only
    x, y, k = PD.parity_eval_set(30, 30, 30, size=400)
    assert (k == 30).all() and 0.3 < y.mean() < 0.7


def test_test_and_validation_vectors_never_meet_the_training_stream():
    test = PD.parity_eval_set(8, 1, 8, size=3000)
    val = PD.parity_eval_set(8, 1, 8, size=3000, held_out=PD.VAL_CLASS)
    train = PD.parity_train_batch(4000, 8, 1, 8, torch.Generator().manual_seed(0))
    assert (PD.parity_class(test[0]) == PD.TEST_CLASS).all() and (PD.parity_class(val[0]) == PD.VAL_CLASS).all()
    assert not torch.isin(PD.parity_class(train[0]), torch.tensor([PD.TEST_CLASS, PD.VAL_CLASS])).any()
    assert len(train[0]) == 4000 and torch.equal(train[1], PD.parity_target(train[0]))
    rows = lambda t: {tuple(r) for r in t.tolist()}                # noqa: E731
    assert not rows(train[0]) & (rows(test[0]) | rows(val[0])) and not rows(test[0]) & rows(val[0])
    # every k has held-out vectors even at n = 8 (k = 1: the numbers 1..16 hold 13 and 14), with both labels
    for x, y, k in (test, val):
        assert set(k.tolist()) == set(range(1, 9)) and set(y[k >= 2].tolist()) == {0.0, 1.0}


def test_a_failed_download_names_its_reason(tmp_path, monkeypatch):
    import torchvision.datasets

    from ponder.data import DataError, load_mnist

    class Offline:
        def __init__(self, root, train=True, download=False):
            if download:
                raise OSError("no network")
            raise RuntimeError("Dataset not found")

    monkeypatch.setattr(torchvision.datasets, "MNIST", Offline)
    with pytest.raises(DataError) as e:
        load_mnist(str(tmp_path / "empty"), download=True)
    assert e.value.download_failed == "OSError: no network" and "--data-dir" in str(e.value)
    with pytest.raises(DataError) as e:
        load_mnist(str(tmp_path / "empty"), download=False)
    assert e.value.download_failed == ""                          # nothing was tried


def _idx(array: np.ndarray) -> bytes:
    """An IDX file of unsigned bytes: magic 0x0800 + ndim, the sizes big-endian, the bytes."""
    head = (0x0800 + array.ndim).to_bytes(4, "big") + b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    return head + array.astype(np.uint8).tobytes()


FAULTY_MNIST = {   # file -> (its content, what the one-line error says); the other three files are good
    "t10k-labels-idx1-ubyte": (_idx(np.zeros(3)), "holds 3 labels for the 4 images"),
    "train-labels-idx1-ubyte": (_idx(np.full(4, 200)), "a label of 200"),
    "t10k-images-idx3-ubyte": (_idx(np.zeros((4, 784, 1))), "holds images of [4, 784, 1]"),
    "train-images-idx3-ubyte": (_idx(np.zeros((0, 28, 28))), "not N >= 1 images of 28 x 28"),
    "train-images-idx3-ubyte.gz": (gzip.compress(_idx(np.zeros((4, 28, 28))))[:-20], "not a complete gzip file"),
}


@pytest.mark.parametrize("name", sorted(FAULTY_MNIST))
def test_faulty_mnist_files_are_named_with_the_fix_in_one_line(tmp_path, name):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for f in D.MNIST_FILES:
        (raw / f).write_bytes(_idx(np.zeros((4, 28, 28)) if "images" in f else np.arange(4)))
    content, says = FAULTY_MNIST[name]
    if name.endswith(".gz"):
        (raw / name[:-3]).unlink()                          # only the .gz there: it is decompressed first
    (raw / name).write_bytes(content)
    with pytest.raises(D.DataError) as e:
        D.load_mnist(str(tmp_path), download=False)
    msg = str(e.value)
    assert "\n" not in msg and says in msg and name in msg and "--data-dir" in msg, msg


def test_a_gzip_bomb_is_decompressed_no_further_than_the_idx_limit(tmp_path):
    """A .gz that inflates to 200 MB (200 gzip members of 1 MB of zeros, 200 kB on disk) was written out whole
    before read_idx's 64 MB check; now the decompression stops past 64 MB and nothing is left behind."""
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for f in D.MNIST_FILES:
        (raw / f).write_bytes(_idx(np.zeros((4, 28, 28)) if "images" in f else np.arange(4)))
    name = "train-images-idx3-ubyte"
    (raw / name).unlink()
    (raw / (name + ".gz")).write_bytes(gzip.compress(b"\0" * 2**20, 1) * 200)
    with pytest.raises(D.DataError) as e:
        D.load_mnist(str(tmp_path), download=False)
    msg = str(e.value)
    assert "\n" not in msg and "decompresses to over 64 MB" in msg and name in msg, msg
    assert sorted(p.name for p in raw.iterdir()) == sorted([*(f for f in D.MNIST_FILES if f != name), name + ".gz"])


@pytest.mark.parametrize("fifo", ["t10k-labels-idx1-ubyte", "train-images-idx3-ubyte.gz"])
def test_an_mnist_file_that_is_a_fifo_is_refused_not_waited_on(tmp_path, fifo):
    # a FIFO in place of an MNIST file made `evaluate` wait forever for a writer
    import os
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    for f in D.MNIST_FILES:
        (raw / f).write_bytes(_idx(np.zeros((4, 28, 28)) if "images" in f else np.arange(4)))
    if fifo.endswith(".gz"):
        (raw / fifo[:-3]).unlink()
    else:
        (raw / fifo).unlink()
    os.mkfifo(raw / fifo)
    with pytest.raises(D.DataError) as e:
        D.load_mnist(str(tmp_path), download=False)
    assert fifo in str(e.value) and "regular file" in str(e.value) and "\n" not in str(e.value)


def test_the_prefix_layout_puts_the_k_non_zeros_in_the_first_k_entries_and_keeps_the_held_out_classes_out():
    x, y, k = PD.parity_batch(500, 64, 1, 64, torch.Generator().manual_seed(2), layout="prefix")
    first_k = torch.arange(64).unsqueeze(0) < k.unsqueeze(1)                         # [B, 64]
    assert torch.equal(x != 0, first_k) and torch.equal(y, PD.parity_target(x))
    train = PD.parity_train_batch(800, 64, 1, 64, torch.Generator().manual_seed(0), layout="prefix")
    assert not torch.isin(PD.parity_class(train[0]), torch.tensor([PD.TEST_CLASS, PD.VAL_CLASS])).any()
    test = PD.parity_eval_set(64, 1, 64, size=300, layout="prefix")
    assert (PD.parity_class(test[0]) == PD.TEST_CLASS).all()
    with pytest.raises(ValueError, match="layout must be 'random' or 'prefix'"):
        PD.parity_batch(2, 8, 1, 8, layout="sorted")
