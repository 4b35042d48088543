"""ponder/files.py: a write is all or nothing (killed writers, full disks, refused files), errors are
one line naming the file with a hint, and JSON never holds NaN/inf."""
import errno
import os
import random
import resource
import signal
import time

import pytest

from helpers import BIG_CFG, assert_one_line, big_model, no_tmp_files, save_tiny_run, tiny_model, version_of
from ponder import files as A
from ponder.files import SaveError
from ponder.journal import atomic_write_bytes
from ponder.store.card import CARD, WEIGHTS, read_card, read_history, update_card
from ponder.store.checkpoint import load_checkpoint, save_run
from ponder.config import TrainConfig


@pytest.mark.long
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_sigkill_during_atomic_write_bytes(tmp_path):
    f = tmp_path / "blob.bin"
    a, b = b"A" * (4 << 20), b"B" * (4 << 20)
    atomic_write_bytes(f, a)
    rng = random.Random(1)
    for _ in range(12):
        pid = os.fork()
        if pid == 0:
            try:
                while True:
                    atomic_write_bytes(f, b)
                    atomic_write_bytes(f, a)
            finally:
                os._exit(0)
        time.sleep(rng.uniform(0, 0.03))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        data = f.read_bytes()
        assert data in (a, b)


@pytest.mark.parametrize("err", [errno.EACCES, errno.EROFS, errno.EPERM, errno.ENOSPC, errno.EDQUOT])
def test_permission_and_readonly_errors_when_creating_files(tmp_path, monkeypatch, err):
    """As root chmod does not block writes, so the OS error is injected where the temp file is made."""
    d = save_run(tmp_path / "run", tiny_model("parity", max_steps=4), TrainConfig(task="parity", max_steps=4, hidden=16))
    before = (d / WEIGHTS).read_bytes()

    def refuse(*a, **k):
        raise OSError(err, os.strerror(err))
    monkeypatch.setattr(A.tempfile, "mkstemp", refuse)
    with pytest.raises(SaveError) as e:
        save_run(d, tiny_model("parity", max_steps=4, seed=1), TrainConfig(task="parity", max_steps=4, hidden=16))
    assert_one_line(e, str(d / WEIGHTS))
    assert os.strerror(err) in str(e.value) and e.value.errno == err
    monkeypatch.undo()
    assert (d / WEIGHTS).read_bytes() == before and no_tmp_files(d)
    load_checkpoint(d)


def _enospc(*a, **k):
    raise OSError(errno.ENOSPC, "No space left on device")


def _fail_on_call(n, fn):
    calls = {"n": 0}
    real = fn

    def wrapped(*a, **k):
        calls["n"] += 1
        if calls["n"] == n:
            _enospc()
        return real(*a, **k)
    return wrapped


FULL = {
    "fsync-weights": lambda mp: mp.setattr(A.os, "fsync", _fail_on_call(1, os.fsync)),
    "fsync-history": lambda mp: mp.setattr(A.os, "fsync", _fail_on_call(2, os.fsync)),
    "fsync-card": lambda mp: mp.setattr(A.os, "fsync", _fail_on_call(3, os.fsync)),
    "chmod": lambda mp: mp.setattr(A.os, "chmod", _enospc),
    "rename": lambda mp: mp.setattr(A.os, "replace", _fail_on_call(1, os.replace)),
    "rename-card": lambda mp: mp.setattr(A.os, "replace", _fail_on_call(3, os.replace)),
}


@pytest.mark.parametrize("where", sorted(FULL))
def test_full_disk_keeps_old_run_and_model(tmp_path, monkeypatch, where):
    d = save_run(tmp_path / "run", big_model(0.0), BIG_CFG, steps=0, history=[{"step": 0}])
    model = big_model(1.0)
    FULL[where](monkeypatch)
    if where == "rename-card":          # the weights were replaced already: the journal finishes the save
        save_run(d, model, BIG_CFG, steps=1, history=[{"step": 0}, {"step": 1}])
        monkeypatch.undo()
        assert no_tmp_files(d) and version_of(d) == 1.0 and read_card(d)["steps"] == 1 and len(read_history(d)) == 2
        return
    with pytest.raises(SaveError) as e:
        save_run(d, model, BIG_CFG, steps=1, history=[{"step": 0}, {"step": 1}])
    assert_one_line(e, str(d))
    assert "No space left on device" in str(e.value) and "disk is full" in str(e.value)
    monkeypatch.undo()
    assert no_tmp_files(d), "a failed save left temporary files"
    v = version_of(d)                                # nothing renamed: the old run, untouched
    assert v == 0.0 and read_card(d)["steps"] == 0 and len(read_history(d)) == 1
    # the model in memory is intact and saves elsewhere
    other = save_run(tmp_path / "other", model, BIG_CFG, steps=1)
    assert version_of(other) == 1.0


def test_real_write_failure_file_size_limit(tmp_path):
    """A real kernel write error (EFBIG from RLIMIT_FSIZE), not a mock: same clean outcome."""
    d = save_run(tmp_path / "run", big_model(0.0), BIG_CFG, steps=0)
    model = big_model(2.0)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, hard))
    try:
        with pytest.raises(SaveError) as e:
            save_run(d, model, BIG_CFG, steps=1)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)
    assert_one_line(e, str(d / WEIGHTS))
    assert no_tmp_files(d) and version_of(d) == 0.0
    assert version_of(save_run(tmp_path / "again", model, BIG_CFG)) == 2.0


def test_update_card_on_full_disk_keeps_card(tmp_path, monkeypatch):
    d = save_run(tmp_path / "run", tiny_model("parity", max_steps=4), TrainConfig(task="parity", max_steps=4, hidden=16))
    before = (d / CARD).read_bytes()
    monkeypatch.setattr(A.os, "fsync", _enospc)
    with pytest.raises(SaveError):
        update_card(d, metrics={"test": {"accuracy": 0.9}})
    monkeypatch.undo()
    assert (d / CARD).read_bytes() == before and no_tmp_files(d)


def test_float_infinity_card_values_never_written(tmp_path):
    """save_run writes NaN/inf as null (strict JSON) so the card always reads back."""
    d, model = save_tiny_run(tmp_path / "r")
    save_run(d, model, TrainConfig(task="parity", max_steps=5, lambda_p=0.3, hidden=16),
             train_seconds=float("inf"), metrics={"test": {"accuracy": float("nan")}},
             history=[{"loss": float("inf")}])
    assert "NaN" not in (d / CARD).read_text() and "Infinity" not in (d / CARD).read_text()
    load_checkpoint(d)


@pytest.mark.skipif(A.fcntl is None or not hasattr(os, "fork"), reason="needs flock and fork")
def test_folder_lock_holds_across_processes_and_goes_with_a_killed_holder(tmp_path):
    """What two trainings into one folder meet (cli/test_main.py checks, in one process, that `train --out`
    refuses a held folder): a lock another process holds refuses this one at once; kill -9 of the holder
    frees the folder."""
    folder = tmp_path / "run"
    folder.mkdir()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:                                         # the first training: lock, say so, wait to be killed
        try:
            with A.folder_lock(folder):
                os.write(ready_w, b"1")
                time.sleep(60)
        finally:
            os._exit(0)
    try:
        assert os.read(ready_r, 1) == b"1"
        t0 = time.monotonic()
        with pytest.raises(SaveError) as e:
            with A.folder_lock(folder):
                pass
        assert time.monotonic() - t0 < 1.0               # refused at once, not after waiting
        assert_one_line(e, "another training")
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    with A.folder_lock(folder):                          # the lock went with the killed process
        pass
