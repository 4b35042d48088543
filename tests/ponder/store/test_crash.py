"""kill -9 at every step of a save, a rename, an import and a delete (ponder/store: atomic, checkpoint, manage,
uploads): the runs folder holds the old run or the new one, whole and loadable, and once remove_leftovers has
run nothing invisible is left, no name is blocked and the import quota counts only the runs listed.

A kill is simulated by counting the file system changes an operation makes (renames, mkdir, rmdir, unlink,
file creation, fsync, ...): the (k+1)-th raises Killed, a BaseException, and so does every change after it,
so no cleanup handler can run either (as after kill -9). Every k from 0 to the operation's whole count is tried.
"""
import io
import os
import random
import signal
import stat
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from helpers import save_tiny_run, tiny_config, tiny_model
from ponder.journal import JOURNAL
from ponder.store.card import CARD, HISTORY, CheckpointError, read_card, read_history
from ponder.store.checkpoint import load_checkpoint
from ponder.store.manage import delete_run, delete_sweep, export_run, import_zip, own_sweep, rename_run
from ponder.files import folder_lock
from ponder.store.checkpoint import save_run
from ponder.store.runs import PATH_MAX, RunNameError, list_models, new_run_dir
from ponder.store.uploads import CLAIM_SECONDS, folder_bytes, remove_leftovers


class Killed(BaseException):
    """The process was killed here: nothing after it runs."""


CHANGES = ("rename", "replace", "mkdir", "rmdir", "unlink", "remove", "fsync", "utime", "chmod", "write")   # and opens to write
WRITING = os.O_WRONLY | os.O_RDWR | os.O_CREAT


@contextmanager
def killed_after(k):
    """Count the file system changes made inside; with k given, the (k+1)-th and all later ones raise Killed.
    Yields the count so far (a dict)."""
    count, real = {"n": 0, "dead": False}, {f: getattr(os, f) for f in CHANGES + ("open",)}

    def change():
        if count["dead"] or (k is not None and count["n"] >= k):
            count["dead"] = True
            raise Killed()
        count["n"] += 1

    def wrap(f):
        def changed(*a, **kw):
            change()
            return real[f](*a, **kw)
        return changed

    def open_(path, flags, *a, **kw):
        if flags & WRITING:
            change()
        return real["open"](path, flags, *a, **kw)

    real_io_open = io.open

    def io_open(file, mode="r", *a, **kw):     # Path.write_bytes and open(): a file created or written
        if any(c in mode for c in "wax+"):
            change()
        return real_io_open(file, mode, *a, **kw)

    mp = pytest.MonkeyPatch()
    try:
        for f in CHANGES:
            mp.setattr(os, f, wrap(f))
        mp.setattr(os, "open", open_)
        mp.setattr(io, "open", io_open)
        yield count
    finally:
        mp.undo()


def sweep(setup, op, check):
    """check(root, state, killed) after op killed at every step k, in a fresh folder made by setup each time."""
    steps = None
    k = 0
    while steps is None or k <= steps:
        root, state = setup(Path(sweep.base) / (f"k{k}" if steps is not None else "count"))
        killed = False
        with killed_after(k if steps is not None else None) as count:
            try:
                op(root, state)
            except Killed:
                killed = True
        if steps is None:                              # the first pass counts the steps, killed nowhere
            steps, k = count["n"], 0
            assert steps > 2
            check(root, state, False)
            continue
        assert killed or k == steps
        check(root, state, killed)
        k += 1
    return steps


@pytest.fixture(autouse=True)
def _base(tmp_path):
    sweep.base = tmp_path


def fingerprint(run_dir):
    """(weights, card steps, history length) of a loadable run: load_checkpoint finishes a save cut short."""
    ck = load_checkpoint(run_dir)
    return (ck.model.state_dict()["step_fn.lambda_head.weight"].sum().item(), ck.record.steps,
            len(read_history(run_dir)), ck.record.name)


def clean(root):
    """remove_leftovers with no waiting; then the folder holds only listed runs (and their files)."""
    remove_leftovers(root, older_than=0, claim_age=0, tmp_age=0)
    listed = {e.path.name for e in list_models(root, assets=root / "none")}
    names = set(os.listdir(root))
    assert names == listed, f"left behind: {[(n, os.listdir(root / n) if (root / n).is_dir() else '') for n in sorted(names - listed)]}"
    for n in listed:
        assert sorted(os.listdir(root / n)) == sorted(f for f in ("model.safetensors", CARD, HISTORY)
                                                      if (root / n / f).exists())
    assert folder_bytes(root) == sum(folder_bytes(root / n) for n in listed)
    return listed


# ----------------------------------------------------------------------------- save over a run

@pytest.mark.slow
def test_save_over_a_run_killed_anywhere_leaves_the_old_run_or_the_new(tmp_path):
    def setup(base):
        d, old = save_tiny_run(base / "runs" / "x", seed=0, steps=1, history=[{"step": 1}])
        return base / "runs", tiny_model("parity", seed=1)

    def op(root, model):                   # `ponder train --overwrite`: the same folder, new weights and card
        save_run(root / "x", model, tiny_config(), steps=2, history=[{"step": 1}, {"step": 2}])

    seen = set()
    old_w = tiny_model("parity", seed=0).state_dict()["step_fn.lambda_head.weight"].sum().item()
    new_w = tiny_model("parity", seed=1).state_dict()["step_fn.lambda_head.weight"].sum().item()

    def check(root, model, killed):
        got = fingerprint(root / "x")
        assert got in ((old_w, 1, 1, "x"), (new_w, 2, 2, "x")), "weights, card and history of different saves"
        seen.add(got[1])
        assert not (root / "x" / JOURNAL).exists()
        assert clean(root) == {"x"}

    sweep(setup, op, check)
    assert seen == {1, 2}


@pytest.mark.slow
def test_a_first_save_killed_anywhere_leaves_no_run_or_the_whole_run(tmp_path):
    def setup(base):
        (base / "runs").mkdir(parents=True)
        return base / "runs", tiny_model("parity", seed=1)

    def op(root, model):                   # an explorer job's save: a fresh folder, then the run in it
        save_run(new_run_dir(root, "x"), model, tiny_config(), steps=2, history=[{"step": 1}])

    def check(root, model, killed):
        try:
            assert fingerprint(root / "x")[1] == 2
        except CheckpointError:              # not saved yet: clean() then finds no file of it
            pass
        listed = clean(root)
        assert listed in (set(), {"x"})
        if not listed:                     # the name is free: the next run gets it
            assert new_run_dir(root, "x").name == "x"

    sweep(setup, op, check)


# ----------------------------------------------------------------------------- rename

@pytest.mark.slow
def test_rename_killed_anywhere_leaves_the_run_under_one_name_and_blocks_none(tmp_path):
    def setup(base):
        save_tiny_run(base / "runs" / "a", seed=0)
        save_tiny_run(base / "runs" / "other", seed=2)
        return base / "runs", fingerprint(base / "runs" / "a")[0]

    def op(root, weights):
        rename_run("a", "b", root)

    def check(root, weights, killed):
        found = {}
        for n in ("a", "b"):
            try:
                found[n] = fingerprint(root / n)
            except CheckpointError:
                pass
        assert len(found) == 1, f"the run is under {sorted(found)}"
        (name, got), = found.items()
        assert got[0] == weights and got[3] == name, "the card names another folder"
        assert clean(root) == {name, "other"}
        other = "b" if name == "a" else "a"
        assert rename_run(name, other, root).name == other       # the other name is not blocked
        assert rename_run("other", name, root).name == name

    sweep(setup, op, check)


# ----------------------------------------------------------------------------- import and delete

@pytest.mark.slow
def test_import_killed_anywhere_leaves_no_invisible_folder_and_blocks_no_name(tmp_path):
    src, _ = save_tiny_run(tmp_path / "src" / "x", seed=3)
    data = export_run(src)

    def setup(base):
        save_tiny_run(base / "runs" / "keep", seed=0)
        return base / "runs", None

    def op(root, _):
        import_zip(data, "x", root, quota=10 * 2**20)

    def check(root, _, killed):
        for e in list_models(root, assets=root / "none"):
            load_checkpoint(e.path)
        listed = clean(root)
        assert listed in ({"keep"}, {"keep", "x"})
        if listed == {"keep"}:
            assert import_zip(data, "x", root, quota=10 * 2**20).name == "x"
        assert read_card(root / "x")["name"] == "x"

    sweep(setup, op, check)


@pytest.mark.slow
def test_delete_killed_anywhere_leaves_the_run_or_nothing(tmp_path):
    def setup(base):
        save_tiny_run(base / "runs" / "x", seed=0)
        save_tiny_run(base / "runs" / "keep", seed=1)
        return base / "runs", None

    def op(root, _):
        delete_run("x", root)

    def check(root, _, killed):
        listed = clean(root)
        assert listed in ({"keep"}, {"keep", "x"})
        if "x" in listed:
            load_checkpoint(root / "x")
        else:
            save_tiny_run(root / "x", seed=1)

    sweep(setup, op, check)


@pytest.mark.slow
def test_a_sweep_delete_killed_anywhere_leaves_the_whole_sweep_or_nothing(tmp_path):
    def setup(base):
        root = base / "runs"
        for t in ("lambda_p0.1-seed0", "lambda_p0.5-seed0"):
            save_tiny_run(root / "sw" / t)
        (root / "sw" / "sweep.json").write_text('{"trials": []}')
        save_tiny_run(root / "keep")
        return root, None

    def check(root, _, killed):
        remove_leftovers(root, older_than=0, claim_age=0, tmp_age=0)
        assert sorted(os.listdir(root)) in (["keep"], ["keep", "sw"])
        if (root / "sw").exists():
            assert own_sweep("sw", root) and len(list_models(root, assets=root / "none")) == 3
        for e in list_models(root, assets=root / "none"):
            load_checkpoint(e.path)

    sweep(setup, lambda root, _: delete_sweep("sw", root), check)

def test_an_empty_folder_a_killed_rename_left_is_taken_over_once_it_is_a_minute_old(tmp_path):
    root = tmp_path / "runs"
    save_tiny_run(root / "a")
    (root / "b").mkdir()                   # fresh: maybe a training's folder, about to be locked
    with pytest.raises(RunNameError, match="already in the runs folder"):
        rename_run("a", "b", root)
    old = time.time() - CLAIM_SECONDS - 1
    (root / "c").mkdir()
    for n in ("b", "c"):
        os.utime(root / n, (old, old))
    with folder_lock(root / "c"):         # held by a training: never taken
        with pytest.raises(RunNameError, match="already in the runs folder"):
            rename_run("a", "c", root)
    assert rename_run("a", "b", root).name == "b" and fingerprint(root / "b")[3] == "b"
    remove_leftovers(root)                 # c is a minute old and no one holds it now
    assert sorted(os.listdir(root)) == ["b"]


def test_an_imported_run_folder_has_the_usual_mode(tmp_path):
    src, _ = save_tiny_run(tmp_path / "src" / "x")
    dest = import_zip(export_run(src), "x", tmp_path / "runs")
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(os.stat(dest).st_mode) == 0o777 & ~mask


def test_remove_leftovers_never_locks_a_fresh_folder_a_writer_is_about_to_lock(tmp_path, monkeypatch):
    """An import in one session cleans the runs folder while a training in another makes its run folder and
    locks it: a fresh empty folder, a fresh temporary file or journal is never locked (the training's save would
    be refused 'in use'); old ones are cleaned."""
    import ponder.store.uploads as U
    root = tmp_path / "runs"
    (root / "claim").mkdir(parents=True)
    d, _ = save_tiny_run(root / "run")
    (d / ".model.safetensors.x.tmp").write_bytes(b"half")
    (d / JOURNAL).write_text('{"renames": [')
    locked, real = [], U.folder_lock
    monkeypatch.setattr(U, "folder_lock", lambda f, **kw: locked.append(Path(f).name) or real(f, **kw))
    remove_leftovers(root)
    assert locked == [] and sorted(os.listdir(root)) == ["claim", "run"] and len(os.listdir(d)) == 5
    old = time.time() - 7200
    for p in (root / "claim", d / ".model.safetensors.x.tmp", d / JOURNAL):
        os.utime(p, (old, old))
    remove_leftovers(root)
    assert sorted(locked) == ["claim", "run"] and os.listdir(root) == ["run"]
    assert sorted(os.listdir(d)) == ["metrics.jsonl", "model.safetensors", "run.json"]


def test_a_weights_only_folder_an_earlier_killed_import_left_is_removed_once_it_is_an_hour_old(tmp_path):
    """Invisible (no card), undeletable from the Runs page and counted in the quota: removed by the next import."""
    root = tmp_path / "runs"
    d, _ = save_tiny_run(root / "x")
    os.unlink(d / CARD)
    keep, _ = save_tiny_run(root / "keep")
    src, _ = save_tiny_run(tmp_path / "src" / "x", seed=3)
    assert import_zip(export_run(src), "x", root).name == "x-2"      # an hour has not passed: left alone
    old = time.time() - 7200
    for f in os.listdir(d):
        os.utime(d / f, (old, old))
    (root / "sub").mkdir()
    (root / "sub" / "model.safetensors").mkdir()                       # not files: not a leftover
    os.utime(root / "sub" / "model.safetensors", (old, old))
    delete_run("x-2", root)
    assert import_zip(export_run(src), "x", root).name == "x"
    assert sorted(os.listdir(root)) == ["keep", "sub", "x"] and fingerprint(root / "x")[3] == "x"


def _renamer_child(root, data):
    """Runs in a forked child: renames a -> b -> a, imports x and deletes it again, forever (until killed)."""
    try:
        torch.set_num_threads(1)
        while True:
            for old, new in (("a", "b"), ("b", "a")):
                try:
                    rename_run(old, new, root)
                except RunNameError:                # the run is under the other name (where a kill left it)
                    pass
            delete_run(import_zip(data, "x", root, quota=2**30).name, root)
    finally:
        os._exit(0)


@pytest.mark.long
@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_sigkill_at_random_moments_of_renames_and_imports_leaves_every_run_whole(tmp_path):
    """A real kill -9 (not a simulated one) at random moments: the run is under one name, whole, its card naming
    its folder; after remove_leftovers only listed runs are left, and each of them loads."""
    root = tmp_path / "runs"
    save_tiny_run(root / "a", seed=0)
    weights = fingerprint(root / "a")[0]
    src, _ = save_tiny_run(tmp_path / "src" / "x", seed=3)
    data = export_run(src)
    rng, moved = random.Random(11), set()
    for _ in range(16):
        pid = os.fork()
        if pid == 0:
            _renamer_child(root, data)
        time.sleep(rng.uniform(0.0, 0.3))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        found = {}
        for n in ("a", "b"):
            try:
                found[n] = fingerprint(root / n)
            except CheckpointError:
                pass
        assert len(found) == 1, sorted(found)
        (name, got), = found.items()
        assert got[0] == weights and got[3] == name
        moved.add(name)
        for n in clean(root):
            load_checkpoint(root / n)
    assert moved == {"a", "b"}, "the child never finished a rename: the test did not exercise anything"


def test_a_name_whose_files_would_not_fit_the_path_limit_is_refused_before_anything_moves(tmp_path):
    """A runs folder ~4,000 bytes deep: a run renamed or imported to a long name used to land where its card's path
    is too long to read, vanishing from every list (and undeletable); now the name is refused in one line."""
    root = tmp_path
    while len(os.fsencode(str(root))) < PATH_MAX - 66:
        root = root / ("d" * min(200, PATH_MAX - 67 - len(os.fsencode(str(root)))))
    root.mkdir(parents=True)
    save_tiny_run(root / "a")
    src, _ = save_tiny_run(tmp_path / "src", seed=3)
    for op in (lambda: rename_run("a", "b" * 64, root), lambda: import_zip(export_run(src), "c" * 64, root)):
        with pytest.raises(RunNameError, match="too long for a run named") as e:
            op()
        assert "\n" not in str(e.value)
    assert sorted(os.listdir(root)) == ["a"] and [e.path.name for e in list_models(root, assets=root / "x")] == ["a"]
    assert rename_run("a", "short", root).name == "short"
