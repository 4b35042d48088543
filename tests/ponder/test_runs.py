"""ponder/runs.py: safe names that never leave the runs folder, symlinks refused, uploads validated before
they land, unwritable runs folders as one line, and sessions racing on the folder."""
import json
import pickle
import re
import os
import threading
import time

import pytest
import torch

from helpers import (OpenPayload, ShellPayload, assert_one_line, run_threads, save_tiny_run, tiny_model,
                    torch_save_bytes)
from ponder.atomic import SaveError
from ponder.card import CARD, HISTORY, WEIGHTS, CheckpointError, read_card, read_history
from ponder.checkpoint import load_checkpoint, save_run
from ponder.config import TrainConfig
from ponder.runs import MAX_NAME, RunNameError, import_checkpoint, list_models, new_run_dir, run_path, safe_name
from ponder.train import train


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
        assert ck.path == d and ck.card["name"] == d.name and ck.task == "parity"
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


PAYLOADS = {"pickle-protocol-2-shell": lambda m: pickle.dumps(ShellPayload(m), protocol=2),
            "pickle-protocol-0-open": lambda m: pickle.dumps(OpenPayload(m), protocol=0),
            "torch-save-zip": lambda m: torch_save_bytes({"w": ShellPayload(m)})}


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
def test_pickle_upload_refused_and_never_run(tiny_run, tmp_path, kind):
    d, _ = tiny_run
    marker, root = tmp_path / "PWNED", tmp_path / "runs"
    with pytest.raises(CheckpointError) as e:
        import_checkpoint(PAYLOADS[kind](marker), (d / CARD).read_bytes(), "evil", root=root)
    assert_one_line(e, "upload 'evil'")
    assert "pickle" in str(e.value) and not marker.exists()
    assert not root.exists() or not list(root.iterdir()), "a refused upload left files behind"


def _upload(tmp_path):
    d, model = save_tiny_run(tmp_path / "src")
    return (d / WEIGHTS).read_bytes(), (d / CARD).read_bytes(), (d / HISTORY).read_bytes(), model


class FakeUpload:
    """Like Streamlit's UploadedFile: .size, .getvalue(), .read()."""

    def __init__(self, data):
        self.data, self.size, self.reads = data, len(data), 0

    def getvalue(self):
        self.reads += 1
        return self.data

    read = getvalue


def test_upload_imported_into_runs_folder(tmp_path):
    w, c, h, model = _upload(tmp_path)
    root = tmp_path / "runs"
    dest = import_checkpoint(w, c, "My run: λ=0.3 / ../x", root=root, history=h)
    assert dest.parent == root and dest.name.isascii() and "/" not in dest.name and not dest.name.startswith(".")
    ck = load_checkpoint(dest)
    assert ck.card["name"] == dest.name            # the uploaded name is not kept verbatim
    x = torch.randint(0, 2, (4, 8)).float()
    with torch.no_grad():
        assert torch.equal(ck.model(x).y, model.eval()(x).y)
    assert read_history(dest) == [{"step": 1, "loss": 0.5}]
    # same name again: a second, distinct folder; file-like uploads work too
    dest2 = import_checkpoint(FakeUpload(w), FakeUpload(c), "My run: λ=0.3 / ../x", root=root)
    assert dest2 != dest and load_checkpoint(dest2)
    assert sorted(p.name for p in root.iterdir()) == sorted([dest.name, dest2.name])
    assert {e.path for e in list_models(root, assets=tmp_path / "none")} == {dest, dest2}


@pytest.mark.parametrize("n, hidden", [(101, 16), (5, 513), (200, 2048)])
def test_an_import_larger_than_the_train_form_trains_is_refused(tmp_path, n, hidden):
    # an imported MNIST run of hidden 2048 and N 200 (27 MB, under the upload limit) took 72.8 s a Compare view
    from ponder.tasks import build_model
    from ponder.tasks.parity import ParityConfig
    src = save_run(tmp_path / "src", build_model("parity", ParityConfig(n_elems=8, hidden=hidden), n, 0.3),
                   TrainConfig(task="parity", max_steps=n, hidden=hidden))
    with pytest.raises(CheckpointError) as e:
        import_checkpoint((src / WEIGHTS).read_bytes(), (src / CARD).read_bytes(), "big", root=tmp_path / "runs")
    assert_one_line(e, f"N {n}, hidden size {hidden}")
    assert "at most N 100, hidden 512" in str(e.value) and not any((tmp_path / "runs").iterdir())


def test_imports_stop_at_the_runs_folder_quota(tmp_path, monkeypatch):
    w, c, h, _ = _upload(tmp_path)
    root = tmp_path / "runs"
    one = len(w) + len(c) + len(h)
    quota = 2 * one + one // 2                                   # room for two imports, not three
    a = import_checkpoint(w, c, "a", root=root, history=h, quota=quota)
    b = import_checkpoint(w, c, "b", root=root, history=h, quota=quota)
    with pytest.raises(CheckpointError, match="delete runs first"):
        import_checkpoint(w, c, "c", root=root, history=h, quota=quota)
    assert sorted(p.name for p in root.iterdir()) == sorted([a.name, b.name])   # nothing half-written
    monkeypatch.setenv("PONDER_RUNS_QUOTA_MB", "0")              # the environment sets the default quota
    with pytest.raises(CheckpointError, match="0 MB"):
        import_checkpoint(w, c, "d", root=root, history=h)


BAD_UPLOADS = {
    "over-limit-bytes": lambda w, c, h: dict(weights=w, card=c, max_bytes=len(w) + len(c) - 1),
    "over-limit-history": lambda w, c, h: dict(weights=w, card=c, history=b"x" * 1000, max_bytes=len(w) + len(c) + 10),
    "over-limit-file-like": lambda w, c, h: dict(weights=FakeUpload(w), card=FakeUpload(c), max_bytes=100),
    "empty-weights": lambda w, c, h: dict(weights=b"", card=c),
    "empty-card": lambda w, c, h: dict(weights=w, card=b""),
    "swapped": lambda w, c, h: dict(weights=c, card=w),
    "truncated-weights": lambda w, c, h: dict(weights=w[:100], card=c),
    "weights-none": lambda w, c, h: dict(weights=None, card=c),
    "weights-str": lambda w, c, h: dict(weights="model.safetensors", card=c),
    "weights-int": lambda w, c, h: dict(weights=12345, card=c),
    "card-dict": lambda w, c, h: dict(weights=w, card={"format": "ponder-run"}),
    "card-bad-json": lambda w, c, h: dict(weights=w, card=b"{"),
    "card-not-fitting": lambda w, c, h: dict(weights=w, card=c.replace(b'"hidden": 16', b'"hidden": 17')),
}


@pytest.mark.parametrize("kind", sorted(BAD_UPLOADS))
def test_bad_uploads_refused_cleanly(tmp_path, kind):
    w, c, h, _ = _upload(tmp_path)
    root = tmp_path / "runs"
    kw = BAD_UPLOADS[kind](w, c, h)
    with pytest.raises(CheckpointError) as e:
        import_checkpoint(name="upload", root=root, **kw)
    assert_one_line(e, "upload")
    assert not root.exists() or list(root.iterdir()) == [], "a refused upload left files behind"
    if kind == "over-limit-file-like":
        assert kw["weights"].reads == 0, "an upload over the limit was read"


@pytest.mark.parametrize("name", ["", "..", ".", "/", "../..", "\x00", "///", "💥", "   ", None])
def test_upload_with_unusable_name_refused(tmp_path, name):
    w, c, h, _ = _upload(tmp_path)
    root = tmp_path / "runs"
    with pytest.raises(RunNameError) as e:
        import_checkpoint(w, c, name, root=root)
    assert "\n" not in str(e.value)
    assert not root.exists() or list(root.iterdir()) == []


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


def test_what_a_killed_delete_left_does_not_count_toward_the_import_quota(tmp_path):
    root = tmp_path / "runs"
    src = save_run(tmp_path / "src", tiny_model("parity", max_steps=4), TrainConfig(task="parity", max_steps=4, hidden=16))
    size = sum(f.stat().st_size for f in src.iterdir())
    left = root / ".deleted-old-0123abcd"                          # a delete killed between its rename and rmtree
    left.mkdir(parents=True)
    (left / WEIGHTS).write_bytes(b"x" * 10 * size)
    import_checkpoint((src / WEIGHTS).read_bytes(), (src / CARD).read_bytes(), "fits", root=root, quota=3 * size)
    assert sorted(p.name for p in root.iterdir()) == ["fits"]


PARITY = dict(task="parity", epochs=1, steps_per_epoch=20, batch_size=32, hidden=16, max_steps=6, device="cpu")


@pytest.mark.parametrize("name", ["run", "my run", "../x"])
def test_same_name_at_the_same_moment_gives_distinct_folders(tmp_path, name):
    root = tmp_path / "runs"
    dirs = run_threads(8, lambda i: new_run_dir(root, name))
    assert len(set(dirs)) == 8 and all(d.parent == root and d.is_dir() for d in dirs)


def test_two_sessions_train_and_save_at_once(tmp_path):
    root = tmp_path / "runs"
    before = set(threading.enumerate())

    def session(i):
        cfg = TrainConfig(**PARITY, seed=i)
        d = new_run_dir(root, "parity")
        res = train(cfg)
        save_run(d, res.model, cfg, status=res.status, reason=res.reason, steps=res.steps, history=res.history)
        return d, res

    out = run_threads(2, session)
    (d0, r0), (d1, r1) = out
    assert d0 != d1 and r0.status == r1.status == "completed" and r0.steps == r1.steps == 20
    c0, c1 = load_checkpoint(d0), load_checkpoint(d1)
    assert c0.card["train"]["seed"] != c1.card["train"]["seed"]
    assert not all(torch.equal(a, b) for a, b in zip(c0.model.state_dict().values(), c1.model.state_dict().values()))
    assert {m.path for m in list_models(root, assets=tmp_path / "none")} == {d0, d1}
    assert set(threading.enumerate()) <= before | {threading.current_thread()}, "training left threads behind"


def test_imports_with_the_same_name_at_once(tmp_path):
    root = tmp_path / "runs"
    src = save_run(tmp_path / "src", tiny_model("parity", max_steps=4), TrainConfig(task="parity", max_steps=4, hidden=16))
    w, c = (src / WEIGHTS).read_bytes(), (src / CARD).read_bytes()
    dests = run_threads(6, lambda i: import_checkpoint(w, c, "upload", root=root))
    assert len(set(dests)) == 6
    for d in dests:
        assert load_checkpoint(d).card["name"] == d.name
    assert sorted(p.name for p in root.iterdir()) == sorted(d.name for d in dests)      # no .import-* left


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
                assert (m.path / WEIGHTS).exists() and m.card["task"] == "parity"
            n += 1
        return n

    results = {}
    t = threading.Thread(target=lambda: results.setdefault("l", run_threads(2, lister)))
    t.start()
    run_threads(2, writer)
    stop.set()
    t.join(30)
    assert len(list_models(root, assets=tmp_path / "none")) == 30


def test_an_imported_run_keeps_no_unverified_test_metrics(tmp_path):
    w, c, h, _ = _upload(tmp_path)
    card = json.loads(c)
    card["metrics"] = {"test": {"accuracy": 0.9999, "n": 10000, "halting_distribution": [1.0]}}
    dest = import_checkpoint(w, json.dumps(card).encode(), "claims", root=tmp_path / "runs", history=h)
    assert read_card(dest)["metrics"] == {}


def test_the_models_stamp_changes_with_every_card_and_folder_list_models_reads(tmp_path):
    from helpers import save_tiny_run
    from ponder.card import update_card
    from ponder.runs import models_stamp
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
