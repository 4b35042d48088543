"""ponder/store/checkpoint.py: save_run / load_checkpoint round trip; killed writers leave the old run or the
new one; weights that are pickles (never unpickled), corrupt, not files, or do not fit are refused in
one line naming the file."""
import io
import json
import os
import pickle
import random
import resource
import signal
import struct
import time

import pytest
import torch
from safetensors.torch import save

from helpers import (BIG_CFG, edit_card, OpenPayload, ShellPayload, assert_one_line, big_model, lock_held_elsewhere, no_tmp_files, save_tiny_run,
                    tiny_model, torch_save_bytes, version_of)
from ponder import files as A
from ponder.store import checkpoint as C
from ponder.store.card import CARD, HISTORY, WEIGHTS, CheckpointError, read_card, read_history
from ponder.store.checkpoint import load_checkpoint, save_run
from ponder.config import TrainConfig
from ponder.store.runs import list_models


def make_run(tmp_path, name="run"):
    model = tiny_model("mnist", max_steps=5, lambda_p=0.3)
    cfg = TrainConfig(max_steps=5, lambda_p=0.3, hidden=16)
    d = save_run(tmp_path / name, model, cfg, history=[{"step": 1, "loss": 1.0}, {"step": 2, "loss": float("nan")}],
                 metrics={"test": {"accuracy": 0.5}}, train_seconds=1.5, steps=2)
    return d, model


def test_round_trip_same_outputs(tmp_path):
    d, model = make_run(tmp_path)
    assert sorted(p.name for p in d.iterdir()) == sorted([WEIGHTS, CARD, HISTORY])
    ck = load_checkpoint(d)
    x = torch.randn(4, 1, 28, 28)
    with torch.no_grad():
        assert torch.equal(ck.model(x).y, model(x).y)
    assert ck.record.train["task"] == "mnist" and ck.record.train["max_steps"] == 5 and ck.model.lambda_p == 0.3
    assert ck.record.metrics["test"]["accuracy"] == 0.5 and ck.record.train_seconds == 1.5
    assert ck.record.ponder_version
    # the card is plain JSON (NaN written as null)
    assert read_history(d)[1]["loss"] is None
    # loading through the file paths works too
    assert load_checkpoint(d / CARD).name == "run" and load_checkpoint(d / WEIGHTS).name == "run"


def test_no_temporary_files_left(tmp_path):
    d, _ = make_run(tmp_path)
    save_run(d, tiny_model("mnist", max_steps=5), TrainConfig(max_steps=5, hidden=16))
    assert not [p for p in d.iterdir() if p.name.endswith(".tmp")]
    # new weights, no metrics given: the earlier card's metrics are not theirs and are not kept
    assert read_card(d)["metrics"] == {}



def test_a_killed_saves_temporary_files_go_at_the_next_save(tmp_path):
    """A save holds the folder's lock, so fresh .tmp files of the run files are a killed writer's and go at
    once (not only once they are an hour old); other files stay."""
    d, model = make_run(tmp_path)
    left = [d / f".{f}.killed.tmp" for f in (WEIGHTS, CARD, HISTORY)]
    for p in left:
        p.write_bytes(b"half a file")                       # fresh: what kill -9 left a second ago
    (d / "notes.tmp").write_text("not ours")
    save_run(d, model, TrainConfig(max_steps=5, lambda_p=0.3, hidden=16))
    assert not any(p.exists() for p in left) and (d / "notes.tmp").exists()
    load_checkpoint(d)


def test_a_save_into_a_folder_another_writer_holds_is_refused(tmp_path):
    """A live writer's temporary file is never removed: the save waits for no one and is refused in one line."""
    d, model = make_run(tmp_path)
    live = d / f".{WEIGHTS}.live.tmp"
    live.write_bytes(b"being written")
    with lock_held_elsewhere(d), pytest.raises(A.SaveError) as e:
        save_run(d, tiny_model("mnist", max_steps=5, seed=1), TrainConfig(max_steps=5, lambda_p=0.3, hidden=16))
    assert_one_line(e, "in use")
    assert live.exists() and read_card(d)["metrics"] == {"test": {"accuracy": 0.5}}     # the first run, untouched
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in load_checkpoint(d).model.state_dict().items())


@pytest.mark.parametrize("exists", [False, True])
def test_a_failed_save_leaves_no_empty_run_folder(tmp_path, monkeypatch, exists):
    """A save that fails (here a full disk) removes the folder it created, not one it found."""
    def full(files):
        raise A.SaveError(next(iter(files)), OSError(28, "No space left on device"))
    monkeypatch.setattr(C, "write_files", full)
    d = tmp_path / "runs" / "new"
    if exists:
        d.mkdir(parents=True)
    with pytest.raises(A.SaveError):
        save_run(d, tiny_model("mnist", max_steps=5), TrainConfig(max_steps=5, hidden=16))
    assert d.exists() == exists and (tmp_path / "runs").is_dir()

def test_missing_and_not_json(tmp_path):
    with pytest.raises(CheckpointError, match="no such run folder"):
        load_checkpoint(tmp_path / "nope")
    d, _ = make_run(tmp_path)
    (d / CARD).write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(d)


def _writer_child(run_dir, models):
    """Runs in a forked child: saves versions 1, 2, 1, 2, ... forever (until killed)."""
    try:
        torch.set_num_threads(1)
        i = 0
        while True:
            v = 1 + i % 2
            save_run(run_dir, models[v], BIG_CFG, steps=v, history=[{"step": s, "loss": 0.1} for s in range(v)])
            i += 1
    finally:
        os._exit(0)


@pytest.mark.long
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_sigkill_at_random_moments_leaves_old_or_new_run(tmp_path):
    run_dir = tmp_path / "run"
    models = {0: big_model(0.0), 1: big_model(1.0), 2: big_model(2.0)}
    t0 = time.perf_counter()
    save_run(run_dir, models[0], BIG_CFG, steps=0, history=[])
    one_save = time.perf_counter() - t0               # kill moments span a few saves however loaded the machine is
    rng = random.Random(6)
    seen, kills = set(), 24
    for _ in range(kills):
        pid = os.fork()
        if pid == 0:
            _writer_child(run_dir, models)
        time.sleep(rng.uniform(0.0, max(0.06, 3 * one_save)))
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
    save_run(run_dir, models[1], BIG_CFG, steps=1)
    assert no_tmp_files(run_dir)


def _npy_object(obj):
    np = pytest.importorskip("numpy")
    buf = io.BytesIO()
    np.save(buf, np.array([obj], dtype=object), allow_pickle=True)
    return buf.getvalue()


PAYLOADS = {
    # representative protocols: 0 (text opcodes), 1 (binary, no PROTO header), 2 and 5 (PROTO header)
    **{f"pickle-protocol-{p}-shell": (lambda m, p=p: pickle.dumps(ShellPayload(m), protocol=p)) for p in (0, 1, 2, 5)},
    **{f"pickle-protocol-{p}-open": (lambda m, p=p: pickle.dumps(OpenPayload(m), protocol=p)) for p in (0, 4)},
    "torch-save-zip": lambda m: torch_save_bytes({"w": ShellPayload(m)}),
    "torch-save-legacy": lambda m: torch_save_bytes({"w": ShellPayload(m)}, _use_new_zipfile_serialization=False),
    "torch-save-state-dict-plus-payload": lambda m: torch_save_bytes({"step_fn.cell.weight_ih": torch.zeros(3), "x": OpenPayload(m)}),
    "numpy-object-array": lambda m: _npy_object(ShellPayload(m)),
    "pickle-after-8-byte-length": lambda m: struct.pack("<Q", 40) + pickle.dumps(ShellPayload(m), protocol=2),
}


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
def test_pickle_weights_refused_and_never_run(tiny_run, tmp_path, kind):
    d, _ = tiny_run
    marker = tmp_path / "PWNED"
    (d / WEIGHTS).write_bytes(PAYLOADS[kind](marker))
    for target in (d, d / WEIGHTS, d / CARD):
        with pytest.raises(CheckpointError) as e:
            load_checkpoint(target)
        assert_one_line(e, d / WEIGHTS)
        if kind.startswith(("pickle-protocol", "torch-save")):
            assert "pickle" in str(e.value)
    list_models(tmp_path, assets=tmp_path / "none")        # listing reads cards only
    assert not marker.exists(), "unpickling ran the payload"


def test_pickle_in_history_and_metadata_never_run(tiny_run, tmp_path):
    d, model = tiny_run
    marker = tmp_path / "PWNED"
    (d / HISTORY).write_bytes(pickle.dumps(ShellPayload(marker), protocol=0) + b"\n" +
                              pickle.dumps(OpenPayload(marker), protocol=4))
    assert read_history(d) == []
    # a pickle hidden in the safetensors metadata is a plain string: it loads and is never unpickled
    tensors = {k: v.contiguous() for k, v in model.state_dict().items()}
    blob = pickle.dumps(ShellPayload(marker), protocol=0).decode("latin-1")
    (d / WEIGHTS).write_bytes(save(tensors, metadata={"format": "ponder-run", "evil": blob}))
    load_checkpoint(d)
    assert not marker.exists()


def _header(raw):
    n = struct.unpack("<Q", raw[:8])[0]
    return n, json.loads(raw[8:8 + n])


def _with_header(raw, edit):
    n, hdr = _header(raw)
    edit(hdr)
    h = json.dumps(hdr).encode()
    return struct.pack("<Q", len(h)) + h + raw[8 + n:]


def _first_tensor(hdr):
    return next(k for k in hdr if k != "__metadata__")


CORRUPT = {
    "empty": lambda raw: b"",
    "one-byte": lambda raw: raw[:1],
    "seven-bytes": lambda raw: raw[:7],
    "length-only": lambda raw: raw[:8],
    "nine-bytes": lambda raw: raw[:9],
    "truncated-half": lambda raw: raw[: len(raw) // 2],
    "truncated-last-byte": lambda raw: raw[:-1],
    "zeros": lambda raw: b"\x00" * len(raw),
    "random": lambda raw: bytes(torch.randint(0, 256, (len(raw),), generator=torch.Generator().manual_seed(1),
                                              dtype=torch.uint8).tolist()),
    "garbage-start": lambda raw: b"\x00" * 64 + raw[64:],
    "header-length-2**63": lambda raw: struct.pack("<Q", 2 ** 63) + raw[8:],
    "header-length-2**64-1": lambda raw: b"\xff" * 8 + raw[8:],
    "header-length-past-end": lambda raw: struct.pack("<Q", len(raw)) + raw[8:],
    "header-length-zero": lambda raw: struct.pack("<Q", 0) + raw[8:],
    "header-not-json": lambda raw: struct.pack("<Q", 6) + b"{{{{{{" + raw[14:],
    "header-json-array": lambda raw: struct.pack("<Q", 2) + b"[]",
    "header-json-deep": lambda raw: struct.pack("<Q", 20000) + b"[" * 10000 + b"]" * 10000,
    "offsets-past-end": lambda raw: _with_header(raw, lambda h: h[_first_tensor(h)].update(data_offsets=[0, 10 ** 12])),
    "offsets-reversed": lambda raw: _with_header(raw, lambda h: h[_first_tensor(h)].update(
        data_offsets=h[_first_tensor(h)]["data_offsets"][::-1])),
    "shape-overflow": lambda raw: _with_header(raw, lambda h: h[_first_tensor(h)].update(shape=[2 ** 62, 2 ** 62])),
    "shape-negative": lambda raw: _with_header(raw, lambda h: h[_first_tensor(h)].update(shape=[-1])),
    "dtype-unknown": lambda raw: _with_header(raw, lambda h: h[_first_tensor(h)].update(dtype="Q99")),
    "json-instead": lambda raw: b'{"step_fn.cell.weight_ih": [[1, 2]]}',
    "text": lambda raw: b"this is not a checkpoint\n" * 10,
    "zip-not-torch": lambda raw: b"PK\x03\x04" + b"\x00" * 100,
    "gzip": lambda raw: b"\x1f\x8b\x08" + b"\x00" * 100,
}


@pytest.mark.parametrize("damage", sorted(CORRUPT))
def test_corrupt_weights_one_line_error(tiny_run, damage):
    d, _ = tiny_run
    f = d / WEIGHTS
    f.write_bytes(CORRUPT[damage](f.read_bytes()))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert_one_line(e, f)


@pytest.mark.parametrize("kind", ["missing", "directory", "fifo", "dev-zero-symlink", "dangling-symlink", "over-limit"])
def test_weights_file_that_is_not_a_file(tiny_run, tmp_path, monkeypatch, kind):
    d, _ = tiny_run
    f = d / WEIGHTS
    f.unlink()
    if kind == "directory":
        f.mkdir()
    elif kind == "fifo":
        os.mkfifo(f)                       # reading it would block forever: must not be opened
    elif kind == "dev-zero-symlink":
        f.symlink_to("/dev/zero")
    elif kind == "dangling-symlink":
        f.symlink_to(tmp_path / "nowhere")
    elif kind == "over-limit":
        save_tiny_run(tmp_path / "other")
        os.replace(tmp_path / "other" / WEIGHTS, f)
        monkeypatch.setattr(C, "MAX_CHECKPOINT_BYTES", 100)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert_one_line(e, f)


def _state(model):
    return {k: v.clone().contiguous() for k, v in model.state_dict().items()}


def _edit_state(fn):
    def make(model):
        s = _state(model)
        fn(s)
        return save(s)
    return make


MISMATCH = {
    "missing-key": _edit_state(lambda s: s.pop("step_fn.out_head.bias")),
    "extra-key": _edit_state(lambda s: s.update(extra=torch.zeros(3))),
    "renamed-keys": _edit_state(lambda s: [s.update({"model." + k: s.pop(k)}) for k in list(s)]),
    "wrong-shape": _edit_state(lambda s: s.update({"step_fn.out_head.weight": torch.zeros(1, 17)})),
    "transposed": _edit_state(lambda s: s.update({"step_fn.out_head.weight": s["step_fn.out_head.weight"].t().contiguous()})),
    "scalar": _edit_state(lambda s: s.update({"step_fn.out_head.bias": torch.tensor(0.0)})),
    "int32": _edit_state(lambda s: s.update({k: v.to(torch.int32) for k, v in s.items()})),
    "int64-one": _edit_state(lambda s: s.update({"step_fn.out_head.bias": torch.zeros(1, dtype=torch.int64)})),
    "uint8": _edit_state(lambda s: s.update({k: v.to(torch.uint8) for k, v in s.items()})),
    "bool": _edit_state(lambda s: s.update({k: v.bool() for k, v in s.items()})),
    "nan": _edit_state(lambda s: s["step_fn.cell.weight_hh"].view(-1).__setitem__(3, float("nan"))),
    "inf": _edit_state(lambda s: s["step_fn.out_head.weight"].view(-1).__setitem__(0, float("inf"))),
    "-inf-half": _edit_state(lambda s: s.update({"step_fn.out_head.bias": torch.tensor([float("-inf")]).half()})),
    "no-tensors": lambda model: save({}),
    "mnist-weights": lambda model: save(_state(tiny_model("mnist", max_steps=5))),
}


@pytest.mark.parametrize("kind", sorted(MISMATCH))
def test_weights_that_do_not_fit(tiny_run, kind):
    d, model = tiny_run
    (d / WEIGHTS).write_bytes(MISMATCH[kind](model))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert_one_line(e, d / WEIGHTS)


@pytest.mark.parametrize("edit", ["hidden", "n_elems", "task-mnist"])
def test_card_that_does_not_fit_weights(tiny_run, edit):
    d, _ = tiny_run

    def change(card):
        if edit == "task-mnist":
            card["train"]["task"] = "mnist"
            card["model"] = {"channels1": 4, "channels2": 8, "embed": 16, "hidden": 16, "dropout": 0.0}
        else:
            card["model"][edit] += 1
    edit_card(d, change)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert_one_line(e, d)
    assert "do not fit" in str(e.value)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_float_dtypes_load_as_float32(tiny_run, dtype):
    """Not a bad input: half or double weights are cast (a control for the dtype check)."""
    d, model = tiny_run
    (d / WEIGHTS).write_bytes(save({k: v.to(dtype) for k, v in _state(model).items()}))
    ck = load_checkpoint(d)
    assert all(p.dtype == torch.float32 for p in ck.model.parameters())


@pytest.mark.parametrize("value", [1e300, -1e39, 3.5e38])
def test_float64_weights_that_overflow_float32_are_refused(tiny_run, value):
    """Finite as stored, inf once cast to the float32 the model runs in: refused in one line."""
    d, model = tiny_run
    state = {k: v.to(torch.float64) for k, v in _state(model).items()}
    name = sorted(state)[0]
    state[name].view(-1)[0] = value
    (d / WEIGHTS).write_bytes(save(state))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert_one_line(e, f"weight {name} holds NaN or inf as float32")


def test_subnormal_weights_load_as_zero(tiny_run):
    """1e-40 is a float32 subnormal: such weights change no answer and made every unroll ~5x slower."""
    d, model = tiny_run
    state = _state(model)
    state["step_fn.cell.weight_hh"] = torch.full_like(state["step_fn.cell.weight_hh"], 1e-40)
    state["step_fn.out_head.weight"].view(-1)[0] = -1e-39
    (d / WEIGHTS).write_bytes(save(state))
    loaded = load_checkpoint(d).model.state_dict()
    assert not loaded["step_fn.cell.weight_hh"].any() and loaded["step_fn.out_head.weight"][0, 0] == 0
    small = torch.finfo(torch.float32).tiny                     # the smallest normal float32 is kept as it is
    assert all(((v == 0) | (v.abs() >= small)).all() for v in loaded.values())


@pytest.mark.parametrize("weight", ["step_fn.conv1.weight", "step_fn.conv2.weight", "step_fn.fc.weight"])
def test_finite_weights_that_overflow_inside_the_network_are_refused(tmp_path, weight):
    """Each weight finite (1e38), the image's embedding inf and the answers NaN on every input: pages showed E[n]
    nan. (A saturated GRU gate or halting head with such weights stays finite, and loads.)"""
    d, model = save_tiny_run(tmp_path / "m", "mnist")
    state = _state(model)
    state[weight] = torch.full_like(state[weight], 1e38)
    (d / WEIGHTS).write_bytes(save(state))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert_one_line(e, f"{d / WEIGHTS}: the weights overflow inside the network")


def test_huge_model_card_is_refused_without_allocating(tiny_run):
    """A card asking for the largest allowed model with tiny weights: refused on shapes alone."""
    d, _ = tiny_run

    def huge(card):
        card.update(model=dict(channels1=4096, channels2=4096, embed=4096, hidden=4096, dropout=0.0))
        card["train"].update(task="mnist", hidden=4096, max_steps=200)
    edit_card(d, huge)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss        # KiB on Linux
    with pytest.raises(CheckpointError, match="do not fit"):
        load_checkpoint(d)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 500, f"peak memory grew by {grown_mib:.0f} MiB (the model was built for real)"


@pytest.mark.parametrize("kind", ["missing", "directory", "fifo", "not-a-folder", "nul-in-path", "no-such-folder",
                                  "name-too-long", "path-is-none"])
def test_bad_run_paths(tiny_run, tmp_path, kind):
    d, _ = tiny_run
    target = d
    if kind == "missing":
        (d / CARD).unlink()
    elif kind == "directory":
        (d / CARD).unlink()
        (d / CARD).mkdir()
    elif kind == "fifo":
        (d / CARD).unlink()
        os.mkfifo(d / CARD)
    elif kind == "not-a-folder":
        target = tmp_path / "file.txt"
        target.write_text("hi")
    elif kind == "nul-in-path":
        target = str(d) + "\x00/etc"
    elif kind == "no-such-folder":
        target = tmp_path / "nope"
    elif kind == "name-too-long":
        target = tmp_path / ("x" * 5000)
    elif kind == "path-is-none":
        target = None
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(target)
    assert "\n" not in str(e.value)


def test_history_is_saved_at_chart_precision(tmp_path):
    model = tiny_model("mnist", max_steps=5, lambda_p=0.3)
    hist = [{"step": 10, "loss": 0.694688618183136, "halting": [0.20498496294021606, 1e-7 / 3], "lr": 0.001}]
    d = save_run(tmp_path / "r", model, TrainConfig(max_steps=5, lambda_p=0.3, hidden=16), history=hist)
    (row,) = read_history(d)
    # 5 significant digits: 0.694688618... -> 0.69469, 0.204984962... -> 0.20498, 3.333e-08 stays 3.3333e-08
    assert row == {"step": 10, "loss": 0.69469, "halting": [0.20498, 3.3333e-08], "lr": 0.001}


def test_saving_over_a_run_never_keeps_its_metrics(tmp_path):
    """A card's metrics belong to the weights saved with it, not to the weights it replaces."""
    d, _ = save_tiny_run(tmp_path / "r", metrics={"test": {"accuracy": 0.9941}})
    save_run(d, tiny_model("parity", max_steps=5, seed=1), TrainConfig(task="parity", max_steps=5, hidden=16))
    assert read_card(d)["metrics"] == {}
