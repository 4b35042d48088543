"""ponder/store/manage.py: rename, delete and export runs, import an exported zip; names that are paths, links,
shipped runs, sweeps and runs being written are refused in one line and left as they were."""
import io
import os
import threading
import zipfile

import pytest
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from helpers import ASSETS, ShellPayload, assert_one_line, lock_held_elsewhere, save_tiny_run
from ponder.training import lifecycle
from ponder.files import SaveError, folder_lock
from ponder.store.card import CARD, HISTORY, WEIGHTS, CheckpointError, read_card, read_history
from ponder.store.checkpoint import load_checkpoint
from ponder.config import TrainConfig
from ponder.store.manage import delete_run, delete_sweep, export_run, import_zip, own_run, rename_run
from ponder.store.runs import run_identity
from ponder.store.runs import RunNameError, list_models, new_run_dir, safe_name
from ponder.store.uploads import import_checkpoint


def runs_folder(tmp_path, *names):
    root = tmp_path / "runs"
    for i, n in enumerate(names):
        save_tiny_run(root / n, seed=i, metrics={"test": {"accuracy": 0.75, "n": 10}})
    return root


def listed(root):
    return sorted(e.path.name for e in list_models(root, assets=root / "no-assets"))


def weights(run_dir):
    return load_checkpoint(run_dir).model.state_dict()


def same_weights(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# ----------------------------------------------------------------------------- rename

def test_rename_moves_the_run_says_its_new_name_and_keeps_its_place(tmp_path):
    root = runs_folder(tmp_path, "a", "b")
    before, stamp = weights(root / "a"), (root / "a" / CARD).stat().st_mtime_ns
    dest = rename_run("a", "my run: λ=0.3!", root)
    assert dest == root / "my-run-0.3" == root / safe_name("my run: λ=0.3!")   # what the page reports
    assert not (root / "a").exists() and listed(root) == ["b", "my-run-0.3"]
    assert read_card(dest)["name"] == "my-run-0.3" and same_weights(weights(dest), before)
    assert read_history(dest) == [{"step": 1, "loss": 0.5}] and read_card(dest)["metrics"]["test"]["accuracy"] == 0.75
    assert (dest / CARD).stat().st_mtime_ns == stamp                 # newest-first order unchanged


@pytest.mark.parametrize("taken", ["run", "file", "link", "empty folder", "hidden"])
def test_rename_refuses_a_name_that_is_taken(tmp_path, taken):
    root = runs_folder(tmp_path, "a", "b")
    target = {"run": "b", "file": "notes.txt", "link": "ln", "empty folder": "empty", "hidden": "b"}[taken]
    if taken == "file":
        (root / target).write_text("mine")
    elif taken == "link":
        (root / target).symlink_to(tmp_path)
    elif taken == "empty folder":
        (root / target).mkdir()
    with pytest.raises(RunNameError) as e:
        rename_run("a", target if taken != "hidden" else ".b", root)   # '.b' becomes 'b': taken too
    assert_one_line(e, "already in the runs folder")
    assert (root / "a" / CARD).is_file() and read_card(root / "a")["name"] == "a"
    assert (root / target).exists() or (root / target).is_symlink()


def test_two_renames_to_one_name_at_once_one_wins(tmp_path):
    root = runs_folder(tmp_path, "a", "b")
    barrier, out = threading.Barrier(2), {}

    def rename(n):
        barrier.wait(10)
        try:
            out[n] = rename_run(n, "same", root)
        except RunNameError as e:
            out[n] = str(e)
    threads = [threading.Thread(target=rename, args=(n,)) for n in "ab"]
    [t.start() for t in threads]
    [t.join(30) for t in threads]
    assert sorted(map(str, out.values())) == sorted([str(root / "same"), "a run (or file) named 'same' is already in "
                                                     "the runs folder; pick another name"]), out
    assert len(listed(root)) == 2 and "same" in listed(root)


@pytest.mark.parametrize("name", ["../runs/a", "/etc", "a/../b", ".hidden", "", ".", "..", "a/", "missing", None,
                                  "sub/a", "a\x00b"])                   # a NUL: ValueError from the OS calls, before
def test_rename_and_delete_refuse_names_that_are_no_run_here(tmp_path, name):
    root = runs_folder(tmp_path, "a", ".hidden")
    save_tiny_run(root / "sub" / "a")
    for op in (lambda: rename_run(name, "x", root), lambda: delete_run(name, root)):
        with pytest.raises(RunNameError) as e:
            op()
        assert_one_line(e)
    assert listed(root) == ["a"] and (root / ".hidden" / CARD).is_file() and (root / "sub" / "a" / CARD).is_file()
    assert not (root / "x").exists()


@pytest.mark.parametrize("kind", ["run folder is a link", "card is a link", "weights are a link to outside",
                                  "sweep folder", "no card", "file"])
def test_links_sweeps_and_non_runs_are_left_alone(tmp_path, kind):
    root = runs_folder(tmp_path, "a")
    outside = tmp_path / "outside"
    save_tiny_run(outside)
    victim = root / "v"
    if kind == "run folder is a link":
        victim.symlink_to(outside)
    elif kind == "file":
        victim.write_text("x")
    else:
        victim.mkdir()
        if kind == "card is a link":
            (victim / CARD).symlink_to(outside / CARD)
        elif kind == "weights are a link to outside":          # a run's own files may be renamed and deleted...
            (victim / CARD).write_bytes((outside / CARD).read_bytes())
            (victim / WEIGHTS).symlink_to(outside / WEIGHTS)
        elif kind == "sweep folder":
            (victim / "sweep.json").write_text("{}")
            (victim / CARD).write_bytes((outside / CARD).read_bytes())
            save_tiny_run(victim / "trial")
    if kind == "weights are a link to outside":                 # ...and a link inside is removed, never followed
        delete_run("v", root)
        assert not victim.exists() and (outside / WEIGHTS).is_file() and load_checkpoint(outside)
        return
    for op in (lambda: rename_run("v", "w", root), lambda: delete_run("v", root)):
        with pytest.raises(RunNameError) as e:
            op()
        assert_one_line(e, "runs/v")
    assert (victim.is_symlink() or victim.exists()) and not (root / "w").exists()
    assert load_checkpoint(outside) and listed(root) == ["a"] + (["trial", "v"] if kind == "sweep folder" else [])


@pytest.mark.long
@given(st.text(max_size=80))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_new_name_is_refused_or_becomes_a_folder_in_the_runs_folder(tmp_path, text):
    root = tmp_path / "runs"
    if not (root / "a").exists():
        save_tiny_run(root / "a")
    try:
        dest = rename_run("a", text, root)
    except RunNameError:
        assert listed(root) == ["a"]
        return
    assert dest.parent == root and dest.name == safe_name(text) and listed(root) == [dest.name]
    rename_run(dest.name, "a", root) if dest.name != "a" else None


# ----------------------------------------------------------------------------- delete

def test_delete_removes_the_run_and_nothing_else(tmp_path):
    root = runs_folder(tmp_path, "a", "b")
    (root / "a" / f".{WEIGHTS}.killed.tmp").write_bytes(b"half")
    delete_run("a", root)
    assert listed(root) == ["b"] and sorted(p.name for p in root.iterdir()) == ["b"]    # no trash left
    left = root / ".deleted-c-0000"                     # what a delete killed mid-way leaves: removed next time
    save_tiny_run(left)
    delete_run("b", root)
    assert list(root.iterdir()) == []


@pytest.mark.parametrize("op", ["rename", "delete"])
def test_delete_and_rename_change_the_run_that_was_shown_not_its_name(tmp_path, op):
    # session A shows runs/x; session B deletes x and renames y to x; A confirms: the former y is kept
    root = runs_folder(tmp_path, "x", "y")
    shown = run_identity(root / "x")
    y = weights(root / "y")
    delete_run("x", root)
    rename_run("y", "x", root)
    with pytest.raises(RunNameError) as e:
        rename_run("x", "z", root, identity=shown) if op == "rename" else delete_run("x", root, identity=shown)
    assert_one_line(e, "is no longer the run you opened")
    assert listed(root) == ["x"] and same_weights(weights(root / "x"), y)
    # the run itself, renamed meanwhile, is still the one shown under its new name
    now = run_identity(root / "x")
    rename_run("x", "w", root, identity=now)
    delete_run("w", root, identity=now) if op == "delete" else None
    assert listed(root) == ([] if op == "delete" else ["w"])


@pytest.mark.parametrize("op", ["rename", "delete"])
def test_a_run_being_written_is_not_renamed_or_deleted(tmp_path, op):
    root = runs_folder(tmp_path, "a")
    with lock_held_elsewhere(root / "a"), pytest.raises(SaveError) as e:   # what a CLI training into runs/a holds
        rename_run("a", "b", root) if op == "rename" else delete_run("a", root)
    assert_one_line(e, "a training is writing it")
    assert listed(root) == ["a"] and not (root / "b").exists()


def test_a_jobs_run_cannot_be_deleted_until_its_card_has_its_metrics(tmp_path):
    """The explorer's job (lifecycle.run into a fresh folder) holds the run while it measures it."""
    root = tmp_path / "runs"
    tries = []

    def measure(model, mnist):
        name = next(p.name for p in root.iterdir())
        t = threading.Thread(target=lambda: tries.append(_refused(lambda: delete_run(name, root))))
        t.start()
        t.join()
        return lifecycle.measure(model, cfg, None, limit=50)
    cfg = TrainConfig(task="parity", epochs=1, steps_per_epoch=3, batch_size=16, hidden=16, max_steps=4, device="cpu")
    done = lifecycle.run(cfg, lambda: new_run_dir(root, "job"), measure_fn=measure)
    assert tries == ["in use"] and read_card(done.run_dir)["metrics"]["test"]["n"] == 50
    delete_run("job", root)                              # once measured and recorded, it can go
    assert list(root.iterdir()) == []


def _refused(op):
    try:
        op()
    except SaveError as e:
        return "in use" if "in use" in str(e) else str(e)
    return "done"



def a_sweep(root, trials=("lambda_p0.1-seed0", "lambda_p0.5-seed0")):
    sw = root / "sw"
    sw.mkdir(parents=True)
    (sw / "sweep.json").write_text('{"trials": []}')
    (sw / "sweep.md").write_text("| trial |")
    for i, t in enumerate(trials):
        save_tiny_run(sw / t, seed=i)
    return sw


def test_delete_sweep_removes_the_sweep_and_its_trials_only(tmp_path):
    root = runs_folder(tmp_path, "a")
    a_sweep(root)
    (root / "sw" / "lambda_p0.9-seed0").mkdir()                  # a failed trial's emptied folder is a trial too
    assert listed(root) == ["a", "lambda_p0.1-seed0", "lambda_p0.5-seed0"]
    assert delete_sweep("sw", root) == 3
    assert listed(root) == ["a"] and sorted(p.name for p in root.iterdir()) == ["a"]


@pytest.mark.parametrize("extra", ["a stray file", "a folder of files", "a trial holding a folder", "a link"])
def test_delete_sweep_takes_stray_files_and_folders_with_it(tmp_path, extra):
    """A sweep holding a stray file (or an .ipynb_checkpoints/ folder) could not be deleted, and was not offered as
    unreadable either: nothing could remove it. A link inside is removed, never followed."""
    root = tmp_path / "runs"
    sw = a_sweep(root)
    (tmp_path / "keep.txt").write_text("mine")
    if extra == "a stray file":
        (sw / "notes.txt").write_text("x")
    elif extra == "a folder of files":
        (sw / ".ipynb_checkpoints").mkdir()
        (sw / ".ipynb_checkpoints" / "x.csv").write_text("1")
    elif extra == "a trial holding a folder":
        (sw / "lambda_p0.1-seed0" / "__pycache__").mkdir()
    else:
        (sw / "home").symlink_to(tmp_path)
    assert delete_sweep("sw", root) == 2
    assert not sw.exists() and (tmp_path / "keep.txt").read_text() == "mine" and listed(root) == []


@pytest.mark.parametrize("extra", ["a sweep inside", "runs two levels down"])
def test_delete_sweep_leaves_a_folder_holding_another_sweep_alone(tmp_path, extra):
    root = tmp_path / "runs"
    sw = a_sweep(root)
    if extra == "a sweep inside":
        (sw / "inner").mkdir()
        (sw / "inner" / "sweep.json").write_text("{}")
    else:
        save_tiny_run(sw / "group" / "deeper" / "run")
    with pytest.raises(RunNameError) as e:
        delete_sweep("sw", root)
    assert_one_line(e, "left alone")
    assert len(listed(root)) == 2 and (sw / "sweep.json").is_file()


@pytest.mark.parametrize("extra", [".ipynb_checkpoints", "__pycache__", "plots"])
@pytest.mark.parametrize("op", ["rename", "delete"])
def test_a_run_folder_holding_a_folder_of_its_own_is_renamed_and_deleted(tmp_path, extra, op):
    """A run folder holding any sub-folder could not be renamed or deleted, and was not offered as unreadable."""
    root = runs_folder(tmp_path, "a")
    (root / "a" / extra).mkdir()
    (root / "a" / extra / "x.py").write_text("1")
    if op == "rename":
        rename_run("a", "b", root)
        assert listed(root) == ["b"] and (root / "b" / extra / "x.py").is_file() and read_card(root / "b")["name"] == "b"
    else:
        delete_run("a", root)
        assert listed(root) == [] and not (root / "a").exists()


def test_a_run_folder_holding_another_run_is_left_alone(tmp_path):
    root = runs_folder(tmp_path, "a")
    save_tiny_run(root / "a" / "inner")
    for op in (lambda: rename_run("a", "w", root), lambda: delete_run("a", root)):
        with pytest.raises(RunNameError) as e:
            op()
        assert_one_line(e, "holds other runs")
    assert (root / "a" / "inner" / CARD).is_file()


def test_a_rename_whose_journal_took_the_card_away_is_one_line(tmp_path):
    """A journal a killed save left, listing run.json's removal: settle() removed the card and the rename raised
    a raw FileNotFoundError on the Runs page."""
    from ponder.journal import JOURNAL
    root = runs_folder(tmp_path, "a")
    (root / "a" / JOURNAL).write_text('{"renames": [[null, "run.json"]], "folder": null}')
    with pytest.raises(CheckpointError) as e:
        rename_run("a", "b", root)
    assert_one_line(e, "run.json: missing")
    assert (root / "a").is_dir() and not (root / "b").exists()


@pytest.mark.parametrize("held", ["sw", "sw/lambda_p0.5-seed0"])
def test_a_sweep_being_written_is_not_deleted(tmp_path, held):
    root = tmp_path / "runs"
    a_sweep(root)
    with folder_lock(root / held):              # a running sweep holds its folder; a trial's save its trial
        assert _refused(lambda: delete_sweep("sw", root)) == "in use"
    assert len(listed(root)) == 2


def test_a_running_sweep_holds_its_folder(tmp_path):
    """ponder.sweeps.run.run_sweep holds the sweep folder's lock while it trains: the Runs page cannot delete it."""
    from ponder.sweeps.run import run_sweep
    from ponder.sweeps.plan import Plan
    root = tmp_path / "runs"
    tries = []

    def on_trial(t):
        if t.status == "running":
            th = threading.Thread(target=lambda: tries.append(_refused(lambda: delete_sweep("sw", root))))
            th.start()
            th.join()
    plan = Plan("parity", dict(epochs=1, steps_per_epoch=2, batch_size=16, hidden=16, max_steps=4, device="cpu"),
                {"lambda_p": [0.5]}, [0])
    run_sweep(plan, root / "sw", on_trial=on_trial, eval_limit=50)
    assert tries == ["in use"]
    assert delete_sweep("sw", root) == 1 and list(root.iterdir()) == []

# ----------------------------------------------------------------------------- export and import

def test_export_then_import_gives_back_the_same_run(tmp_path):
    root = runs_folder(tmp_path, "a")
    data = export_run(root / "a")
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        assert zf.namelist() == [WEIGHTS, CARD, HISTORY] and zf.testzip() is None
    assert export_run(root / "a") == data                               # the same run, the same bytes
    dest = import_zip(data, "a again", root)
    assert dest == root / "a-again" and listed(root) == ["a", "a-again"]
    assert same_weights(weights(dest), weights(root / "a"))
    a, b = read_card(root / "a"), read_card(dest)
    assert {k: b[k] for k in ("model", "train", "status", "steps")} == {k: a[k] for k in ("model", "train", "status", "steps")}
    assert b["name"] == "a-again" and b["metrics"] == {}      # an import's test metrics are re-measured, not trusted
    assert read_history(dest) == read_history(root / "a")
    # the unzipped files go through the file import too (what a user who unzips it uploads)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    other = import_checkpoint(files[WEIGHTS], files[CARD], "unzipped", root, history=files[HISTORY])
    assert same_weights(weights(other), weights(root / "a"))


def test_a_shipped_model_exports_and_imports(tmp_path):
    data = export_run(ASSETS / "parity-15")
    dest = import_zip(data, "parity-15", tmp_path / "runs")
    assert same_weights(weights(dest), weights(ASSETS / "parity-15"))
    assert len(read_history(dest)) == len(read_history(ASSETS / "parity-15")) > 0


def test_export_refuses_links_and_a_run_being_written(tmp_path):
    root = runs_folder(tmp_path, "a")
    (tmp_path / "link").symlink_to(root / "a")
    with pytest.raises(CheckpointError):
        export_run(tmp_path / "link")
    os.replace(root / "a" / HISTORY, tmp_path / "h")
    (root / "a" / HISTORY).symlink_to(tmp_path / "h")
    with pytest.raises(CheckpointError) as e:
        export_run(root / "a")
    assert_one_line(e, HISTORY)
    (root / "a" / HISTORY).unlink()
    with folder_lock(root / "a"):
        with pytest.raises(SaveError) as e:
            export_run(root / "a")
    assert_one_line(e, "in use")
    assert zipfile.ZipFile(io.BytesIO(export_run(root / "a"))).namelist() == [WEIGHTS, CARD]    # no history: fine


def _zip(entries, method=zipfile.ZIP_DEFLATED):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return buf.getvalue()


def test_import_zip_refuses_bad_zips_in_one_line(tmp_path):
    root = runs_folder(tmp_path, "a")
    w, c = (root / "a" / WEIGHTS).read_bytes(), (root / "a" / CARD).read_bytes()
    import pickle
    cases = {
        "not a zip": (b"PK\x03\x04 not really", "not a readable zip"),
        "no card": (_zip([(WEIGHTS, w)]), f"no {CARD}"),
        "two cards": (_zip([(WEIGHTS, w), (CARD, c), ("x/" + CARD, c)]), "more than one"),
        "too many files": (_zip([(f"f{i}", b"") for i in range(20)]), "files in the zip"),
        "a pickle as weights": (_zip([(WEIGHTS, pickle.dumps(ShellPayload(tmp_path / "pwned"))), (CARD, c)]), "pickle"),
        "zip bomb": (_zip([(WEIGHTS, b"\0" * (3 * 1024 * 1024)), (CARD, c)]), "more than"),
    }
    for case, (data, needle) in cases.items():
        with pytest.raises(CheckpointError) as e:
            import_zip(data, "x", root, max_bytes=2 * 1024 * 1024)
        assert_one_line(e, needle), case
    assert listed(root) == ["a"] and not (tmp_path / "pwned").exists()
    # names with folders (a zipped run folder, even '../..') are read for their file name, never extracted
    dest = import_zip(_zip([("../../evil/" + WEIGHTS, w), ("../../evil/" + CARD, c)]), "zipped folder", root)
    assert dest == root / "zipped-folder" and not (tmp_path / "evil").exists() and not (root.parent / "evil").exists()


def test_own_run_is_the_folder_in_the_runs_folder(tmp_path):
    root = runs_folder(tmp_path, "a")
    assert own_run("a", root) == root / "a"
