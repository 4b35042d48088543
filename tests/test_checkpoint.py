"""One checkpoint format: round trip, atomic writes, and files that must be refused."""
import json
import pickle

import pytest
import torch

from conftest import tiny_model
from ponder.card import CARD, HISTORY, WEIGHTS, CheckpointError, read_card, read_history
from ponder.checkpoint import load_checkpoint, save_run
from ponder.config import TrainConfig


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
    assert ck.card["task"] == "mnist" and ck.card["max_steps"] == 5 and ck.model.lambda_p == 0.3
    assert ck.card["metrics"]["test"]["accuracy"] == 0.5 and ck.card["train_seconds"] == 1.5
    assert "ponder_version" in ck.card
    # the card is plain JSON (NaN written as null)
    assert read_history(d)[1]["loss"] is None
    # loading through the file paths works too
    assert load_checkpoint(d / CARD).name == "run" and load_checkpoint(d / WEIGHTS).name == "run"


def test_no_temporary_files_left(tmp_path):
    d, _ = make_run(tmp_path)
    save_run(d, tiny_model("mnist", max_steps=5), TrainConfig(max_steps=5, hidden=16))
    assert not [p for p in d.iterdir() if p.name.endswith(".tmp")]
    # metrics kept from the earlier card when none are given
    assert read_card(d)["metrics"]["test"]["accuracy"] == 0.5


class _Boom:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        import os
        return (os.system, (f"touch {self.path}",))


def test_pickle_payload_refused_and_not_run(tmp_path):
    d, _ = make_run(tmp_path)
    marker = tmp_path / "PWNED"
    (d / WEIGHTS).write_bytes(pickle.dumps(_Boom(marker)))
    with pytest.raises(CheckpointError, match="pickle"):
        load_checkpoint(d)
    assert not marker.exists()
    # a torch.save zip file holding the payload too
    torch.save({"w": _Boom(marker)}, d / WEIGHTS)
    with pytest.raises(CheckpointError, match=str(d / WEIGHTS)):
        load_checkpoint(d)
    assert not marker.exists()


@pytest.mark.parametrize("damage", ["empty", "truncated", "garbage"])
def test_corrupt_weights_one_line_error_naming_file(tmp_path, damage):
    d, _ = make_run(tmp_path)
    f = d / WEIGHTS
    raw = f.read_bytes()
    f.write_bytes({"empty": b"", "truncated": raw[: len(raw) // 2], "garbage": b"\x00" * 64 + raw[64:]}[damage])
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(d)
    assert str(f) in str(e.value) and "\n" not in str(e.value)


def test_weights_that_do_not_fit_config(tmp_path):
    d, _ = make_run(tmp_path)
    card = json.loads((d / CARD).read_text())
    card["model"]["hidden"] = 32
    (d / CARD).write_text(json.dumps(card))
    with pytest.raises(CheckpointError, match="do not fit"):
        load_checkpoint(d)


@pytest.mark.parametrize("edit", [lambda c: c.update(lambda_p=2.0), lambda c: c.update(task="cifar"),
                                  lambda c: c.pop("format"), lambda c: c["train"].update(beta=-1)])
def test_bad_card(tmp_path, edit):
    d, _ = make_run(tmp_path)
    card = json.loads((d / CARD).read_text())
    edit(card)
    (d / CARD).write_text(json.dumps(card))
    with pytest.raises(CheckpointError, match=str(d / CARD)):
        load_checkpoint(d)


def test_missing_and_not_json(tmp_path):
    with pytest.raises(CheckpointError, match="no such run folder"):
        load_checkpoint(tmp_path / "nope")
    d, _ = make_run(tmp_path)
    (d / CARD).write_text("{not json")
    with pytest.raises(CheckpointError, match="not valid JSON"):
        load_checkpoint(d)
