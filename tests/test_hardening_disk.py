"""Issue 6, crashes and disk: checkpoint and metrics writes are atomic (temporary file + rename), so
killing the writer at any moment leaves the old or the new run, never a broken one; a full disk or an
unwritable runs folder gives a clear one-line message and the model in memory is not lost.

Each kill and each simulated failure is one bad event; all must be handled cleanly.
"""
import errno
import os
import random
import resource
import signal
import sys
import tempfile
import time

import pytest
import torch

from conftest import tiny_model
from ponder import atomic as A, card as K, checkpoint as C
from ponder.atomic import SaveError, atomic_write_bytes
from ponder.card import CARD, HISTORY, WEIGHTS, read_card, read_history, update_card
from ponder.checkpoint import load_checkpoint, save_run
from ponder.cli import main
from ponder.config import ParityConfig, TrainConfig
from ponder.models import build_model
from ponder.runs import import_checkpoint, list_models, new_run_dir

CFG = TrainConfig(task="parity", max_steps=4, lambda_p=0.3, hidden=384)


def big_model(value):
    """A ~1.8M-parameter model (7 MB file) whose weights all equal `value`, so a version is easy to tell."""
    model = build_model("parity", ParityConfig(n_elems=8, hidden=384), 4, 0.3)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)
    return model


def version_of(run_dir):
    ck = load_checkpoint(run_dir)
    vals = {float(v.flatten()[0]) for v in ck.model.state_dict().values()}
    assert len(vals) == 1, "weights mix two versions"
    [v] = vals
    assert all(torch.all(t == v) for t in ck.model.state_dict().values()), "a torn weights file"
    return v


def assert_one_line(e, needle=""):
    msg = str(e.value)
    assert "\n" not in msg and needle in msg, msg


def no_tmp_files(folder):
    return [p.name for p in folder.rglob("*.tmp")] == []


# ----------------------------------------------------------------------------- killed writers

def _writer_child(run_dir, models):
    """Runs in a forked child: saves versions 1, 2, 1, 2, ... forever (until killed)."""
    try:
        torch.set_num_threads(1)
        i = 0
        while True:
            v = 1 + i % 2
            save_run(run_dir, models[v], CFG, steps=v, history=[{"step": s, "loss": 0.1} for s in range(v)])
            i += 1
    finally:
        os._exit(0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_sigkill_at_random_moments_leaves_old_or_new_run(tmp_path):
    run_dir = tmp_path / "run"
    models = {0: big_model(0.0), 1: big_model(1.0), 2: big_model(2.0)}
    save_run(run_dir, models[0], CFG, steps=0, history=[])
    rng = random.Random(6)
    seen, kills = set(), 24
    for _ in range(kills):
        pid = os.fork()
        if pid == 0:
            _writer_child(run_dir, models)
        time.sleep(rng.uniform(0.0, 0.06))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        v = version_of(run_dir)                       # loads, and is one whole version
        assert v in (0.0, 1.0, 2.0)
        seen.add(v)
        card = read_card(run_dir)
        assert card["steps"] in (0, 1, 2)
        raw = (run_dir / HISTORY).read_text()
        assert raw == "" or raw.endswith("\n"), "a torn metrics.jsonl"
        assert len(read_history(run_dir)) in (0, 1, 2)
        assert [e.path for e in list_models(tmp_path, assets=tmp_path / "none")] == [run_dir]
    assert seen & {1.0, 2.0}, "the writer never finished a save: the test did not exercise anything"
    # leftovers of killed writers are hidden files; the next save removes the old ones
    leftovers = list(run_dir.glob(".*.tmp"))
    for p in leftovers:
        os.utime(p, (time.time() - 2 * A.STALE_SECONDS,) * 2)
    save_run(run_dir, models[1], CFG, steps=1)
    assert no_tmp_files(run_dir)


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


# ----------------------------------------------------------------------------- unwritable runs folder

def _under_a_file(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a regular file")
    return blocker / "runs"


def _dangling(tmp_path):
    link = tmp_path / "runs-link"
    link.symlink_to(tmp_path / "gone")
    return link


def _a_file(p):
    p.write_text("x")
    return p


ROOTS = {"under-a-file": _under_a_file, "dangling-symlink": _dangling,
         "is-a-file": lambda tmp_path: _a_file(tmp_path / "runs"),
         "in-proc": lambda tmp_path: __import__("pathlib").Path("/proc/version/runs")}


@pytest.mark.parametrize("kind", sorted(ROOTS))
def test_unwritable_runs_folder_clear_error(tmp_path, kind):
    root = ROOTS[kind](tmp_path)
    model = tiny_model("parity", max_steps=4)
    cfg = TrainConfig(task="parity", max_steps=4, hidden=16)
    with pytest.raises(SaveError) as e:
        new_run_dir(root, "my-run")
    assert_one_line(e, str(root))
    assert isinstance(e.value, OSError)
    with pytest.raises(SaveError) as e:
        save_run(root / "my-run", model, cfg)
    assert_one_line(e, "my-run")
    src = save_run(tmp_path / "src", model, cfg)
    with pytest.raises(SaveError) as e:
        import_checkpoint((src / WEIGHTS).read_bytes(), (src / CARD).read_bytes(), "up", root=root)
    assert_one_line(e, str(root))
    assert list_models(root, assets=tmp_path / "none") == []
    # the model is not lost: it saves fine elsewhere
    load_checkpoint(save_run(tmp_path / "elsewhere", model, cfg))


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


# ----------------------------------------------------------------------------- full disk

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
    d = save_run(tmp_path / "run", big_model(0.0), CFG, steps=0, history=[{"step": 0}])
    model = big_model(1.0)
    FULL[where](monkeypatch)
    with pytest.raises(SaveError) as e:
        save_run(d, model, CFG, steps=1, history=[{"step": 0}, {"step": 1}])
    assert_one_line(e, str(d))
    assert "No space left on device" in str(e.value) and "disk is full" in str(e.value)
    monkeypatch.undo()
    assert no_tmp_files(d), "a failed save left temporary files"
    v = version_of(d)
    if where != "rename-card":                       # nothing renamed: the old run, untouched
        assert v == 0.0 and read_card(d)["steps"] == 0 and len(read_history(d)) == 1
    # the model in memory is intact and saves elsewhere
    other = save_run(tmp_path / "other", model, CFG, steps=1)
    assert version_of(other) == 1.0


def test_real_write_failure_file_size_limit(tmp_path):
    """A real kernel write error (EFBIG from RLIMIT_FSIZE), not a mock: same clean outcome."""
    d = save_run(tmp_path / "run", big_model(0.0), CFG, steps=0)
    model = big_model(2.0)
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, hard))
    try:
        with pytest.raises(SaveError) as e:
            save_run(d, model, CFG, steps=1)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, old_handler)
    assert_one_line(e, str(d / WEIGHTS))
    assert no_tmp_files(d) and version_of(d) == 0.0
    assert version_of(save_run(tmp_path / "again", model, CFG)) == 2.0


def test_update_card_on_full_disk_keeps_card(tmp_path, monkeypatch):
    d = save_run(tmp_path / "run", tiny_model("parity", max_steps=4), TrainConfig(task="parity", max_steps=4, hidden=16))
    before = (d / CARD).read_bytes()
    monkeypatch.setattr(A.os, "fsync", _enospc)
    with pytest.raises(SaveError):
        update_card(d, metrics={"test": {"accuracy": 0.9}})
    monkeypatch.undo()
    assert (d / CARD).read_bytes() == before and no_tmp_files(d)


def test_stale_import_folders_are_removed(tmp_path):
    root = tmp_path / "runs"
    src = save_run(tmp_path / "src", tiny_model("parity", max_steps=4), TrainConfig(task="parity", max_steps=4, hidden=16))
    stale = root / ".import-killed"
    stale.mkdir(parents=True)
    (stale / CARD).write_bytes((src / CARD).read_bytes())
    assert list_models(root, assets=tmp_path / "none") == []          # hidden folders are never listed
    os.utime(stale, (time.time() - 7200,) * 2)
    import_checkpoint((src / WEIGHTS).read_bytes(), (src / CARD).read_bytes(), "fresh", root=root)
    assert sorted(p.name for p in root.iterdir()) == ["fresh"]


# ----------------------------------------------------------------------------- the CLI keeps the model

TRAIN = ["train", "--task", "parity", "--epochs", "1", "--steps-per-epoch", "8", "--hidden", "16", "--max-steps", "4",
         "--batch-size", "16", "--device", "cpu", "--quiet", "--no-eval"]


def test_cli_unwritable_out_fails_before_training(tmp_path, capsys, monkeypatch):
    from ponder import train as T
    called = []
    monkeypatch.setattr(T, "train", lambda *a, **k: called.append(1))
    rc = main([*TRAIN, "--out", str(_under_a_file(tmp_path) / "r")])
    _, err = capsys.readouterr()
    assert rc == 1 and not called
    assert err.startswith("ponder: error:") and len(err.strip().splitlines()) == 1 and "not-a-folder" in err


def test_cli_save_fails_after_training_rescues_the_model(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    real = A.write_tmp

    def full_under_out(path, data):
        if str(out) in str(path):
            raise SaveError(path, OSError(errno.ENOSPC, "No space left on device"))
        return real(path, data)
    monkeypatch.setattr(A, "write_tmp", full_under_out)
    rc = main([*TRAIN, "--out", str(out)])
    stdout, err = capsys.readouterr()
    assert rc == 4, (stdout, err)
    assert len(err.strip().splitlines()) == 1 and "No space left on device" in err and "instead" in err
    rescue = [p for p in tmp_path.iterdir() if p.name.startswith("ponder-unsaved-")]
    assert len(rescue) == 1 and str(rescue[0]) in err
    ck = load_checkpoint(rescue[0])
    assert ck.card["status"] == "completed" and ck.card["steps"] == 8


def test_cli_both_saves_fail_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(A, "write_tmp", lambda path, data: (_ for _ in ()).throw(
        SaveError(path, OSError(errno.ENOSPC, "No space left on device"))))
    rc = main([*TRAIN, "--out", str(tmp_path / "out")])
    _, err = capsys.readouterr()
    assert rc == 4 and len(err.strip().splitlines()) == 1 and "failed too" in err


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_cli_ctrl_c_cancels_and_saves(tmp_path, capsys, monkeypatch):
    """First Ctrl-C: stop after the step and save as cancelled (the model is not lost)."""
    from ponder import train as T
    real = T.train

    def train_with_ctrl_c(cfg, mnist=None, callback=None, cancel=None, **kw):
        def cb(p):
            if p.step == 10:                       # progress is reported every 10 steps
                os.kill(os.getpid(), signal.SIGINT)
        return real(cfg, mnist=mnist, callback=cb, cancel=cancel, **kw)
    monkeypatch.setattr(T, "train", train_with_ctrl_c)
    out = tmp_path / "out"
    rc = main([*TRAIN, "--out", str(out), "--steps-per-epoch", "1000"])
    stdout, err = capsys.readouterr()
    assert rc == 0 and stdout.startswith("cancelled"), (stdout, err)
    ck = load_checkpoint(out)
    assert ck.card["status"] == "cancelled" and 10 <= ck.card["steps"] <= 11
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_cli_second_ctrl_c_aborts_without_leaving_an_empty_folder(tmp_path, capsys, monkeypatch):
    from ponder import train as T
    real = T.train

    def train_ctrl_c_twice(cfg, mnist=None, callback=None, cancel=None, **kw):
        def cb(p):
            if p.step in (10, 20):
                os.kill(os.getpid(), signal.SIGINT)
        return real(cfg, mnist=mnist, callback=cb, cancel=None, **kw)     # ignores the cancel flag
    monkeypatch.setattr(T, "train", train_ctrl_c_twice)
    out = tmp_path / "out"
    rc = main([*TRAIN, "--out", str(out), "--steps-per-epoch", "1000"])
    capsys.readouterr()
    assert rc == 130 and not out.exists()
