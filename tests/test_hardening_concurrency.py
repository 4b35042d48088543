"""Issue 6, concurrency: sessions that start runs, import uploads, list and update cards at the same
moment never crash, never clash on disk, and leave no threads behind.

Core part (ponder/): threads racing on the runs folder. Explorer part (explorer/jobs.py): the global
job limit, cancel, and orphan threads; skipped while the explorer is not there.
"""
import threading

import pytest
import torch

from conftest import tiny_model
from ponder.card import CARD, WEIGHTS, read_card, update_card
from ponder.checkpoint import load_checkpoint, save_run
from ponder.config import TrainConfig
from ponder.runs import import_checkpoint, list_models, new_run_dir
from ponder.train import train

PARITY = dict(task="parity", epochs=1, steps_per_epoch=20, batch_size=32, hidden=16, max_steps=6, device="cpu")


def run_threads(n, fn):
    """Start n threads on fn(i) behind a barrier (so they really start together); return results/errors."""
    barrier = threading.Barrier(n)
    results, errors = [None] * n, []

    def body(i):
        try:
            barrier.wait(timeout=10)
            results[i] = fn(i)
        except BaseException as e:                       # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=body, args=(i,), name=f"hardening-{i}") for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not errors, errors
    return results


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


def test_cancel_from_another_thread_stops_within_a_step(tmp_path):
    cancel = threading.Event()
    seen = []

    def cb(p):
        seen.append(p.step)
        if p.step >= 10:
            cancel.set()
    res = train(TrainConfig(**{**PARITY, "steps_per_epoch": 10000, "log_every": 1}), callback=cb, cancel=cancel)
    assert res.status == "cancelled" and res.steps == 10 and "step 10" in res.reason


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


def test_concurrent_card_updates_are_not_lost(tmp_path):
    d = save_run(tmp_path / "r", tiny_model("parity", max_steps=4), TrainConfig(task="parity", max_steps=4, hidden=16))
    run_threads(8, lambda i: update_card(d, **{f"note{i}": i}))
    card = read_card(d)
    assert all(card.get(f"note{i}") == i for i in range(8))
