"""Issue 6, checkpoints: loading never runs code from the file, and every bad checkpoint (pickle,
corrupt, truncated, empty, mismatched, bad card) gives a one-line CheckpointError naming the file.
Uploads are imported with a size limit and the same validation.

Every parametrized case below is one bad input; all of them must be handled cleanly.
"""
import builtins
import io
import json
import os
import pickle
import resource
import struct

import pytest
import torch
from safetensors.torch import save

from conftest import tiny_model
from ponder import atomic as A, card as K, checkpoint as C
from ponder.card import CARD, HISTORY, WEIGHTS, CheckpointError, read_card, read_history
from ponder.checkpoint import load_checkpoint, save_run
from ponder.config import TrainConfig
from ponder.runs import RunNameError, import_checkpoint, list_models


def make_run(folder, task="parity"):
    model = tiny_model(task, max_steps=5, lambda_p=0.3)
    cfg = TrainConfig(task=task, max_steps=5, lambda_p=0.3, hidden=16)
    save_run(folder, model, cfg, history=[{"step": 1, "loss": 0.5}], steps=1)
    return folder, model


@pytest.fixture
def run(tmp_path):
    return make_run(tmp_path / "run")


def assert_clean(err, needle):
    msg = str(err.value)
    assert "\n" not in msg and len(msg) < 600, msg
    assert str(needle) in msg, msg


# ----------------------------------------------------------------------------- pickle payloads

class ShellPayload:
    """Unpickling this runs `touch marker` through a shell."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class OpenPayload:
    """Unpickling this creates the marker with builtins.open (no shell needed)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (builtins.open, (self.marker, "w"))


def _torch_save(obj, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf, **kw)
    return buf.getvalue()


def _npy_object(obj):
    np = pytest.importorskip("numpy")
    buf = io.BytesIO()
    np.save(buf, np.array([obj], dtype=object), allow_pickle=True)
    return buf.getvalue()


PAYLOADS = {
    **{f"pickle-protocol-{p}-shell": (lambda m, p=p: pickle.dumps(ShellPayload(m), protocol=p)) for p in range(6)},
    **{f"pickle-protocol-{p}-open": (lambda m, p=p: pickle.dumps(OpenPayload(m), protocol=p)) for p in range(6)},
    "torch-save-zip": lambda m: _torch_save({"w": ShellPayload(m)}),
    "torch-save-legacy": lambda m: _torch_save({"w": ShellPayload(m)}, _use_new_zipfile_serialization=False),
    "torch-save-state-dict-plus-payload": lambda m: _torch_save({"step_fn.cell.weight_ih": torch.zeros(3), "x": OpenPayload(m)}),
    "numpy-object-array": lambda m: _npy_object(ShellPayload(m)),
    "pickle-after-8-byte-length": lambda m: struct.pack("<Q", 40) + pickle.dumps(ShellPayload(m), protocol=2),
}


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
def test_pickle_weights_refused_and_never_run(run, tmp_path, kind):
    d, _ = run
    marker = tmp_path / "PWNED"
    (d / WEIGHTS).write_bytes(PAYLOADS[kind](marker))
    for target in (d, d / WEIGHTS, d / CARD):
        with pytest.raises(CheckpointError) as e:
            load_checkpoint(target)
        assert_clean(e, d / WEIGHTS)
        if kind.startswith(("pickle-protocol", "torch-save")):
            assert "pickle" in str(e.value)
    list_models(tmp_path, assets=tmp_path / "none")        # listing reads cards only
    assert not marker.exists(), "unpickling ran the payload"


@pytest.mark.parametrize("protocol", [0, 2, 5])
def test_pickle_as_card_refused_and_never_run(run, tmp_path, protocol):
    d, _ = run
    marker = tmp_path / "PWNED"
    (d / CARD).write_bytes(pickle.dumps(ShellPayload(marker), protocol=protocol))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert_clean(e, d / CARD)
    assert not marker.exists()


def test_pickle_in_history_and_metadata_never_run(run, tmp_path):
    d, model = run
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


@pytest.mark.parametrize("kind", ["pickle-protocol-2-shell", "pickle-protocol-0-open", "torch-save-zip"])
def test_pickle_upload_refused_and_never_run(run, tmp_path, kind):
    d, _ = run
    marker, root = tmp_path / "PWNED", tmp_path / "runs"
    with pytest.raises(CheckpointError) as e:
        import_checkpoint(PAYLOADS[kind](marker), (d / CARD).read_bytes(), "evil", root=root)
    assert_clean(e, "upload 'evil'")
    assert "pickle" in str(e.value) and not marker.exists()
    assert not root.exists() or not list(root.iterdir()), "a refused upload left files behind"


# ----------------------------------------------------------------------------- corrupt weights

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
def test_corrupt_weights_one_line_error(run, damage):
    d, _ = run
    f = d / WEIGHTS
    f.write_bytes(CORRUPT[damage](f.read_bytes()))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert_clean(e, f)


@pytest.mark.parametrize("kind", ["missing", "directory", "fifo", "dev-zero-symlink", "dangling-symlink", "over-limit"])
def test_weights_file_that_is_not_a_file(run, tmp_path, monkeypatch, kind):
    d, _ = run
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
        make_run(tmp_path / "other")
        os.replace(tmp_path / "other" / WEIGHTS, f)
        monkeypatch.setattr(C, "MAX_CHECKPOINT_BYTES", 100)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert_clean(e, f)


# ----------------------------------------------------------------------------- weights that do not fit

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
def test_weights_that_do_not_fit(run, kind):
    d, model = run
    (d / WEIGHTS).write_bytes(MISMATCH[kind](model))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert_clean(e, d / WEIGHTS)


@pytest.mark.parametrize("edit", ["hidden", "n_elems", "task-mnist"])
def test_card_that_does_not_fit_weights(run, edit):
    d, _ = run
    card = json.loads((d / CARD).read_text())
    if edit == "task-mnist":
        card["task"] = card["train"]["task"] = "mnist"
        card["model"] = {"channels1": 4, "channels2": 8, "embed": 16, "hidden": 16, "dropout": 0.0}
    else:
        card["model"][edit] += 1
    (d / CARD).write_text(json.dumps(card))
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert_clean(e, d)
    assert "do not fit" in str(e.value)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64])
def test_other_float_dtypes_load_as_float32(run, dtype):
    """Not a bad input: half or double weights are cast (a control for the dtype check)."""
    d, model = run
    (d / WEIGHTS).write_bytes(save({k: v.to(dtype) for k, v in _state(model).items()}))
    ck = load_checkpoint(d)
    assert all(p.dtype == torch.float32 for p in ck.model.parameters())


def test_huge_model_card_is_refused_without_allocating(run):
    """A card asking for the largest allowed model with tiny weights: refused on shapes alone."""
    d, _ = run
    card = json.loads((d / CARD).read_text())
    card.update(task="mnist", model=dict(channels1=4096, channels2=4096, embed=4096, hidden=4096, dropout=0.0),
                max_steps=200)
    card["train"].update(task="mnist", hidden=4096, max_steps=200)
    (d / CARD).write_text(json.dumps(card))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss        # KiB on Linux
    with pytest.raises(CheckpointError, match="do not fit"):
        load_checkpoint(d)
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 500, f"peak memory grew by {grown_mib:.0f} MiB (the model was built for real)"


# ----------------------------------------------------------------------------- bad cards

def _edit(fn):
    def apply(card):
        fn(card)
        return json.dumps(card)
    return apply


BAD_CARDS = {
    "empty-file": lambda c: "",
    "whitespace": lambda c: "   \n",
    "null": lambda c: "null",
    "list": lambda c: "[1, 2, 3]",
    "string": lambda c: '"ponder-run"',
    "number": lambda c: "42",
    "truncated": lambda c: json.dumps(c)[:50],
    "binary": lambda c: b"\xff\xfe\x00\x01garbage",
    "utf8-bom": lambda c: "\ufeff" + json.dumps(c),
    "deep-nesting": lambda c: "[" * 100000 + "]" * 100000,
    "deep-nesting-in-field": lambda c: json.dumps(c)[:-1] + ', "x": ' + "[" * 50000 + "]" * 50000 + "}",
    "over-1MiB": lambda c: json.dumps({**c, "pad": "x" * (2 * 1024 * 1024)}),
    "format-missing": _edit(lambda c: c.pop("format")),
    "format-wrong": _edit(lambda c: c.update(format="pytorch")),
    "task-missing": _edit(lambda c: c.pop("task")),
    "task-unknown": _edit(lambda c: c.update(task="cifar")),
    "task-list": _edit(lambda c: c.update(task=["parity"])),
    "task-null": _edit(lambda c: c.update(task=None)),
    "model-missing": _edit(lambda c: c.pop("model")),
    "model-null": _edit(lambda c: c.update(model=None)),
    "model-list": _edit(lambda c: c.update(model=[16, 8])),
    "model-string": _edit(lambda c: c.update(model="hidden=16")),
    "model-unknown-field": _edit(lambda c: c["model"].update(layers=3)),
    "model-hidden-0": _edit(lambda c: c["model"].update(hidden=0)),
    "model-hidden-negative": _edit(lambda c: c["model"].update(hidden=-16)),
    "model-hidden-string": _edit(lambda c: c["model"].update(hidden="16")),
    "model-hidden-float": _edit(lambda c: c["model"].update(hidden=16.0)),
    "model-hidden-bool": _edit(lambda c: c["model"].update(hidden=True)),
    "model-hidden-1e9": _edit(lambda c: c["model"].update(hidden=10 ** 9)),
    "model-hidden-10**400": _edit(lambda c: c["model"].update(hidden=10 ** 400)),
    "max_steps-missing": _edit(lambda c: c.pop("max_steps")),
    "max_steps-0": _edit(lambda c: c.update(max_steps=0)),
    "max_steps-negative": _edit(lambda c: c.update(max_steps=-5)),
    "max_steps-201": _edit(lambda c: c.update(max_steps=201)),
    "max_steps-float": _edit(lambda c: c.update(max_steps=5.5)),
    "max_steps-string": _edit(lambda c: c.update(max_steps="5")),
    "max_steps-bool": _edit(lambda c: c.update(max_steps=True)),
    "max_steps-huge": _edit(lambda c: c.update(max_steps=10 ** 400)),
    "lambda_p-missing": _edit(lambda c: c.pop("lambda_p")),
    "lambda_p-0": _edit(lambda c: c.update(lambda_p=0)),
    "lambda_p-negative": _edit(lambda c: c.update(lambda_p=-0.5)),
    "lambda_p-over-1": _edit(lambda c: c.update(lambda_p=1.5)),
    "lambda_p-nan": _edit(lambda c: c.update(lambda_p=float("nan"))),
    "lambda_p-inf": _edit(lambda c: c.update(lambda_p=float("inf"))),
    "lambda_p-string": _edit(lambda c: c.update(lambda_p="0.3")),
    "lambda_p-bool": _edit(lambda c: c.update(lambda_p=True)),
    "lambda_p-list": _edit(lambda c: c.update(lambda_p=[0.3])),
    "train-null": _edit(lambda c: c.update(train=None)),
    "train-list": _edit(lambda c: c.update(train=["lr", 0.1])),
    "train-string": _edit(lambda c: c.update(train="lr=0.1")),
    "train-unknown-field": _edit(lambda c: c["train"].update(momentum=0.9)),
    "train-beta-negative": _edit(lambda c: c["train"].update(beta=-1)),
    "train-lr-string": _edit(lambda c: c["train"].update(lr="0.001")),
    "train-lr-zero": _edit(lambda c: c["train"].update(lr=0)),
    "train-batch-bool": _edit(lambda c: c["train"].update(batch_size=False)),
    "train-seed-negative": _edit(lambda c: c["train"].update(seed=-1)),
    "train-seed-2**70": _edit(lambda c: c["train"].update(seed=2 ** 70)),
    "train-preset-list": _edit(lambda c: c["train"].update(parity_preset=["small"])),
    "train-preset-unknown": _edit(lambda c: c["train"].update(parity_preset="giant")),
    "train-device-dict": _edit(lambda c: c["train"].update(device={"cuda": 1})),
    "train-compile-string": _edit(lambda c: c["train"].update(compile="yes")),
    "train-rotate-181": _edit(lambda c: c["train"].update(rotate_train=181)),
    "train-epochs-nan": _edit(lambda c: c["train"].update(epochs=float("nan"))),
    "name-dict": _edit(lambda c: c.update(name={"$gt": ""})),
    "name-number": _edit(lambda c: c.update(name=42)),
    "status-list": _edit(lambda c: c.update(status=["failed"])),
    "reason-huge": _edit(lambda c: c.update(reason="x" * 20000)),
    "steps-negative": _edit(lambda c: c.update(steps=-1)),
    "steps-string": _edit(lambda c: c.update(steps="many")),
    "train_seconds-string": _edit(lambda c: c.update(train_seconds="fast")),
    "metrics-string": _edit(lambda c: c.update(metrics="good")),
    "metrics-test-list": _edit(lambda c: c.update(metrics={"test": [1, 2]})),
    "metrics-accuracy-string": _edit(lambda c: c.update(metrics={"test": {"accuracy": "99%"}})),
}


@pytest.mark.parametrize("kind", sorted(BAD_CARDS))
def test_bad_card_one_line_error_naming_file(run, kind):
    d, _ = run
    card = json.loads((d / CARD).read_text())
    text = BAD_CARDS[kind](card)
    (d / CARD).write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(CheckpointError) as e:
        read_card(d)
    assert_clean(e, d / CARD)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert_clean(e, d / CARD)


@pytest.mark.parametrize("kind", ["missing", "directory", "fifo", "not-a-folder", "nul-in-path", "no-such-folder",
                                  "name-too-long", "path-is-none"])
def test_bad_run_paths(run, tmp_path, kind):
    d, _ = run
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


def test_float_infinity_card_values_never_written(tmp_path):
    """save_run writes NaN/inf as null (strict JSON) so the card always reads back."""
    d, model = make_run(tmp_path / "r")
    save_run(d, model, TrainConfig(task="parity", max_steps=5, lambda_p=0.3, hidden=16),
             train_seconds=float("inf"), metrics={"test": {"accuracy": float("nan")}},
             history=[{"loss": float("inf")}])
    assert "NaN" not in (d / CARD).read_text() and "Infinity" not in (d / CARD).read_text()
    load_checkpoint(d)


# ----------------------------------------------------------------------------- history

@pytest.mark.parametrize("content", [b"\xff\xfe\x00garbage\n", b"[" * 50000 + b"\n", b"1\n2\n\"x\"\nnull\n[]\n",
                                     b'{"step": 1}\n{not json\n{"step": 2}\n', b"\x00" * 1000],
                         ids=["binary", "deep-nesting", "not-dicts", "bad-line", "nul-bytes"])
def test_history_garbage_is_skipped(run, content):
    d, _ = run
    (d / HISTORY).write_bytes(content)
    rows = read_history(d)
    assert all(isinstance(r, dict) for r in rows)


def test_history_that_is_a_folder(run):
    d, _ = run
    (d / HISTORY).unlink()
    (d / HISTORY).mkdir()
    assert read_history(d) == []


# ----------------------------------------------------------------------------- uploads

def _upload(tmp_path):
    d, model = make_run(tmp_path / "src")
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
    assert_clean(e, "upload")
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


@pytest.mark.parametrize("field", ["name", "reason", "status", "device"])
@pytest.mark.parametrize("value", ["x" * 50000, "line1\nline2\x00\u202e", 12345, None])
def test_save_run_with_odd_text_fields_stays_loadable(tmp_path, field, value):
    """What a UI may pass to save_run (a traceback as the reason, a user's name) never makes an unloadable run."""
    model = tiny_model("parity", max_steps=5)
    d = save_run(tmp_path / "r", model, TrainConfig(task="parity", max_steps=5, hidden=16), **{field: value})
    ck = load_checkpoint(d)
    assert isinstance(ck.card[field], str) and len(ck.card[field]) <= K.MAX_CARD_TEXT
