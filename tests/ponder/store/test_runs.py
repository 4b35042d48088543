"""ponder/store/runs.py: safe names that never leave the runs folder, symlinks refused (an import's too),
unwritable runs folders as one line, and sessions racing on the folder. Uploads: test_uploads.py."""
import re
import os
import threading

import pytest
import torch

from helpers import assert_one_line, run_threads, save_tiny_run, tiny_model
from ponder.files import SaveError
from ponder.store.card import CARD, HISTORY, WEIGHTS
from ponder.store.checkpoint import load_checkpoint, save_run
from ponder.config import TrainConfig
from ponder.store.runs import MAX_NAME, RunNameError, list_models, new_run_dir, run_path, safe_name, unreadable_runs
from ponder.store.uploads import import_checkpoint
from ponder.training.loop import train


SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


NAMES = [
    "..", ".", "", " ", "/", "//", "/etc/passwd", "/etc", "/root/.ssh/id_rsa", "../etc/passwd", "../../../../etc/passwd",
    "a/../../b", "a/./b", "./a", "~", "~root", "~/x", "$HOME", "${HOME}", "`id`", "$(id)", "a;rm -rf /", "a|b", "a&b",
    "C:\\Windows\\System32", "\\\\server\\share", "..\\..\\x", "a\x00b", "\x00", "x\x00/../../etc", "a\nb", "\t",
    "\r\n", "a" * 1000, "." * 300, "-" * 10, "_", "-rf", "--help", ".hidden", "...", "..a", "a..", "runs", "CON",
    "nul", "aux.txt", "💥", "λ=0.3", "ｆｕｌｌｗｉｄｔｈ", "名前", "e\u0301", "\u202eexe.txt", "a\u200bb", "%2e%2e%2f",
    "..%2f..%2f", "file:///etc/passwd", "http://x/y", "*", "?", "[a]", "{a,b}", "a b c", "  padded  ", "\udcff",
    "model.safetensors", "run.json", ".import-x",
]


NOT_TEXT = [None, 0, 123, 1.5, b"bytes", b"../x", ["a"], {"a": 1}, object()]


@pytest.mark.parametrize("name", NAMES + NOT_TEXT,            # ids stable across processes (no object addresses)
                         ids=[repr(n)[:40] if type(n) is not object else "object()" for n in NAMES + NOT_TEXT])
def test_safe_name_is_safe_or_refused(name):
    try:
        s = safe_name(name)
    except RunNameError as e:
        assert "\n" not in str(e) and len(str(e)) < 300
        return
    assert SAFE.match(s) and len(s) <= MAX_NAME and s not in (".", "..") and "/" not in s and "\x00" not in s, s


@pytest.mark.parametrize("name", NAMES, ids=[repr(n)[:40] for n in NAMES])
def test_names_stay_inside_the_runs_folder(tmp_path, name):
    root = tmp_path / "runs"
    root.mkdir()
    outside_before = sorted(p.name for p in tmp_path.iterdir())
    try:
        p = run_path(root, name)
    except RunNameError:
        p = None
    if p is not None:
        assert p.parent == root and p.resolve().parent == root.resolve()
    try:
        d = new_run_dir(root, name)
    except RunNameError:
        d = None
    if d is not None:
        assert d.parent == root and d.is_dir() and d.resolve().parent == root.resolve()
        save_run(d, tiny_model("parity", max_steps=3), TrainConfig(task="parity", max_steps=3, hidden=16))
        ck = load_checkpoint(run_path(root, d.name))
        assert ck.path == d and ck.record.name == d.name and ck.task == "parity"
    assert sorted(p.name for p in tmp_path.iterdir()) == outside_before, "something was created outside the runs folder"
    assert (p is None) == (d is None)


def test_names_that_sanitise_alike_get_distinct_folders(tmp_path):
    root = tmp_path / "runs"
    names = ["a b", "a-b", "a/b", "a\x00b", "a b ", "a" + "x" * 200, "a" + "x" * 200, "a" + "x" * 300]
    dirs = [new_run_dir(root, n) for n in names]
    assert len({d.name for d in dirs}) == len(dirs)
    assert all(len(d.name) <= MAX_NAME and d.parent == root for d in dirs)


@pytest.fixture
def world(tmp_path):
    """A runs folder with one good run, and a good-looking run outside it (the secret)."""
    root = tmp_path / "runs"
    cfg = TrainConfig(task="parity", max_steps=3, hidden=16)
    good = save_run(root / "good", tiny_model("parity", max_steps=3), cfg, history=[{"step": 1}])
    secret = save_run(tmp_path / "outside" / "secret", tiny_model("parity", max_steps=3, seed=5), cfg,
                      history=[{"step": 1, "secret": True}])
    return root, good, secret


def _link_folder(root, secret):
    (root / "evil").symlink_to(secret, target_is_directory=True)


def _link_file(fname):
    def make(root, secret):
        d = root / "evil"
        d.mkdir()
        for f in (WEIGHTS, CARD, HISTORY):
            if f == fname:
                (d / f).symlink_to(secret / f)
            else:
                (d / f).write_bytes((secret / f).read_bytes())
    return make


def _link_relative(root, secret):
    os.symlink(os.path.relpath(secret, root), root / "evil")


def _link_chain(root, secret):
    (root / "hop").symlink_to(secret)
    (root / "evil").symlink_to(root / "hop")


def _link_to_etc(root, secret):
    (root / "evil").symlink_to("/etc")


SYMLINKS = {"folder": _link_folder, "relative-folder": _link_relative, "chain": _link_chain, "etc": _link_to_etc,
            "card-file": _link_file(CARD), "weights-file": _link_file(WEIGHTS), "history-file": _link_file(HISTORY)}


@pytest.mark.parametrize("kind", sorted(SYMLINKS))
def test_symlinks_out_of_the_runs_folder_are_refused(world, tmp_path, kind):
    root, good, secret = world
    SYMLINKS[kind](root, secret)
    with pytest.raises(RunNameError) as e:
        run_path(root, "evil")
    assert "outside" in str(e.value) and "\n" not in str(e.value)
    listed = [m.path for m in list_models(root, assets=tmp_path / "none")]
    assert listed == [good]
    # a new run with that name never writes through the link
    d = new_run_dir(root, "evil")
    assert d.name == "evil-2" and not d.is_symlink()
    before = {f: (secret / f).read_bytes() for f in (WEIGHTS, CARD, HISTORY)}
    save_run(d, tiny_model("parity", max_steps=3), TrainConfig(task="parity", max_steps=3, hidden=16))
    assert {f: (secret / f).read_bytes() for f in (WEIGHTS, CARD, HISTORY)} == before


def test_symlinked_runs_root_itself_is_fine(tmp_path):
    """A runs folder that is itself a symlink (e.g. to a bigger disk) keeps working."""
    real = tmp_path / "disk" / "runs"
    real.mkdir(parents=True)
    root = tmp_path / "runs"
    root.symlink_to(real, target_is_directory=True)
    d = new_run_dir(root, "r")
    save_run(d, tiny_model("parity", max_steps=3), TrainConfig(task="parity", max_steps=3, hidden=16))
    assert run_path(root, "r") == d and [m.path for m in list_models(root, assets=tmp_path / "none")] == [d]


def test_symlink_in_the_way_of_an_import(world):
    root, good, secret = world
    _link_folder(root, secret)
    dest = import_checkpoint((good / WEIGHTS).read_bytes(), (good / CARD).read_bytes(), "evil", root=root)
    assert dest.name == "evil-2" and dest.parent == root and not dest.is_symlink()
    assert sorted(p.name for p in secret.iterdir()) == sorted([WEIGHTS, CARD, HISTORY])


@pytest.mark.parametrize("fname", [WEIGHTS, CARD, HISTORY])
def test_saving_over_a_symlinked_file_replaces_the_link_not_the_target(world, fname):
    root, good, secret = world
    before = (secret / fname).read_bytes()
    (good / fname).unlink()
    (good / fname).symlink_to(secret / fname)
    save_run(good, tiny_model("parity", max_steps=3, seed=9), TrainConfig(task="parity", max_steps=3, hidden=16),
             history=[{"step": 2}])
    assert not (good / fname).is_symlink() and (secret / fname).read_bytes() == before


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


PARITY = dict(task="parity", epochs=1, steps_per_epoch=20, batch_size=32, hidden=16, max_steps=6, device="cpu")


@pytest.mark.parametrize("name", ["run", "my run", "../x"])
def test_same_name_at_the_same_moment_gives_distinct_folders(tmp_path, name):
    root = tmp_path / "runs"
    dirs = run_threads(8, lambda i: new_run_dir(root, name))
    assert len(set(dirs)) == 8 and all(d.parent == root and d.is_dir() for d in dirs)


@pytest.mark.long
def test_two_sessions_train_and_save_at_once(tmp_path):
    root = tmp_path / "runs"
    before = set(threading.enumerate())

    def session(i):
        cfg = TrainConfig(**PARITY, seed=i)
        d = new_run_dir(root, "parity")
        res = train(cfg)
        save_run(d, res.model, cfg, status=res.record.status, reason=res.record.reason, steps=res.record.steps, history=res.history)
        return d, res

    out = run_threads(2, session)
    (d0, r0), (d1, r1) = out
    assert d0 != d1 and r0.record.status == r1.record.status == "completed" and r0.record.steps == r1.record.steps == 20
    c0, c1 = load_checkpoint(d0), load_checkpoint(d1)
    assert c0.record.train["seed"] != c1.record.train["seed"]
    assert not all(torch.equal(a, b) for a, b in zip(c0.model.state_dict().values(), c1.model.state_dict().values()))
    assert {m.path for m in list_models(root, assets=tmp_path / "none")} == {d0, d1}
    assert set(threading.enumerate()) <= before | {threading.current_thread()}, "training left threads behind"


def test_listing_while_runs_are_written_never_crashes_or_shows_half_runs(tmp_path):
    root = tmp_path / "runs"
    cfg = TrainConfig(task="parity", max_steps=4, hidden=16)
    model = tiny_model("parity", max_steps=4)
    stop = threading.Event()

    def writer(i):
        for k in range(15):
            save_run(new_run_dir(root, f"w{i}"), model, cfg, steps=k)
        return True

    def lister(i):
        n = 0
        while not stop.is_set() or n == 0:
            for m in list_models(root, assets=tmp_path / "none"):
                assert (m.path / WEIGHTS).exists() and m.record.train["task"] == "parity"
            n += 1
        return n

    results = {}
    t = threading.Thread(target=lambda: results.setdefault("l", run_threads(2, lister)))
    t.start()
    run_threads(2, writer)
    stop.set()
    t.join(30)
    assert len(list_models(root, assets=tmp_path / "none")) == 30


def test_the_models_stamp_changes_with_every_card_and_folder_list_models_reads(tmp_path):
    from helpers import save_tiny_run
    from ponder.store.card import update_card
    from ponder.store.runs import models_stamp
    assets = tmp_path / "assets"
    assets.mkdir()
    first = models_stamp(tmp_path / "runs", assets)
    save_tiny_run(tmp_path / "runs" / "a")
    second = models_stamp(tmp_path / "runs", assets)
    assert second != first and models_stamp(tmp_path / "runs", assets) == second       # unchanged: equal
    update_card(tmp_path / "runs" / "a", name="a", status="failed")                       # a card rewritten
    third = models_stamp(tmp_path / "runs", assets)
    assert third != second
    (tmp_path / "runs" / "sw").mkdir()
    (tmp_path / "runs" / "sw" / "sweep.json").write_text("{}")
    save_tiny_run(tmp_path / "runs" / "sw" / "t0")                                         # a sweep's trial
    assert models_stamp(tmp_path / "runs", assets) != third


def test_the_runs_folder_expands_the_home_folder(tmp_path, monkeypatch):
    """PONDER_RUNS=~ made a folder named '~' in the working folder."""
    from ponder.store.runs import runs_root
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("PONDER_RUNS", "~/my-runs")
    assert runs_root() == tmp_path / "my-runs"
    monkeypatch.delenv("PONDER_RUNS")
    assert str(runs_root()) == "runs"


@pytest.mark.parametrize("fname", [HISTORY, WEIGHTS])
def test_a_run_whose_history_or_weights_is_a_link_is_listed_unreadable_and_can_be_deleted(world, tmp_path, fname):
    """It vanished from every list (so nothing could remove it); its link is never followed, never read."""
    from ponder.store.manage import delete_run
    root, good, secret = world
    SYMLINKS[f"{'history' if fname == HISTORY else 'weights'}-file"](root, secret)
    assert [m.path for m in list_models(root, assets=tmp_path / "none")] == [good]
    [(name, why)] = unreadable_runs(root)
    assert name == "runs/evil" and f"{fname} of the run is a symbolic link" in why and "\n" not in why
    before = (secret / fname).read_bytes()
    delete_run("evil", root)
    assert not (root / "evil").exists() and (secret / fname).read_bytes() == before and unreadable_runs(root) == []


def test_a_run_folder_named_with_a_backslash_is_listed_renamed_and_deleted(world, tmp_path):
    """'a\\b' is one folder name on POSIX: it was listed, but rename and delete refused it as a path."""
    from ponder.store.manage import delete_run, rename_run
    root, good, _ = world
    (root / "good").rename(root / "a\\b")
    assert [m.name for m in list_models(root, assets=tmp_path / "none")] == ["runs/a\\b"]
    assert rename_run("a\\b", "c\\d", root).name == "c-d"         # a new name is a safe one
    (root / "c-d").rename(root / "x\\y")                           # another copied in by hand
    delete_run("x\\y", root)
    assert list(root.iterdir()) == []


def test_a_run_renamed_or_deleted_while_the_list_is_read_is_not_called_unreadable(tmp_path, monkeypatch):
    """Another session renames a run between the listing and the reading of its card: it is not listed as an
    unreadable run (which the Runs page offers to delete) but left out; a card that is really bad still is."""
    import ponder.store.runs as R
    from ponder.store.manage import rename_run
    from ponder.store.runs import unreadable_runs
    root = tmp_path / "runs"
    save_tiny_run(root / "a")
    bad, _ = save_tiny_run(root / "bad")
    (bad / CARD).write_text("{not json")
    real = R.read_card

    def renamed_meanwhile(d):
        if d.name == "a":
            rename_run("a", "b", root)
        return real(d)
    monkeypatch.setattr(R, "read_card", renamed_meanwhile)
    assert [n for n, _ in unreadable_runs(root)] == ["runs/bad"]
