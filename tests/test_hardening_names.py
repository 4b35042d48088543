"""Issue 6, names and paths: run names from users are sanitised, and nothing outside the runs folder
can be read or written through a name ('../', absolute paths, symlinks).

Each parametrized name or symlink is one bad input; all must be handled cleanly.
"""
import os
import re

import pytest

from conftest import tiny_model
from ponder.card import CARD, HISTORY, WEIGHTS
from ponder.checkpoint import load_checkpoint, save_run
from ponder.config import TrainConfig
from ponder.runs import MAX_NAME, RunNameError, import_checkpoint, list_models, new_run_dir, run_path, safe_name

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


@pytest.mark.parametrize("name", NAMES + NOT_TEXT, ids=[repr(n)[:40] for n in NAMES + NOT_TEXT])
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
        assert load_checkpoint(run_path(root, d.name))
    assert sorted(p.name for p in tmp_path.iterdir()) == outside_before, "something was created outside the runs folder"
    assert (p is None) == (d is None)


def test_names_that_sanitise_alike_get_distinct_folders(tmp_path):
    root = tmp_path / "runs"
    names = ["a b", "a-b", "a/b", "a\x00b", "a b ", "a" + "x" * 200, "a" + "x" * 200, "a" + "x" * 300]
    dirs = [new_run_dir(root, n) for n in names]
    assert len({d.name for d in dirs}) == len(dirs)
    assert all(len(d.name) <= MAX_NAME and d.parent == root for d in dirs)


# ----------------------------------------------------------------------------- symlinks

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
