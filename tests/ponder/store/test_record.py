"""ponder/store/record.py: the RunRecord is the card's schema: every shipped card reads as a record and writes
back the same mapping; save_run writes a record as the card read_record returns; the task, N and lambda_p
are those of the training config."""
import json

import pytest

from helpers import assert_one_line, tiny_model
from paths import ROOT
from ponder.config import TrainConfig
from ponder.store.card import CARD, CheckpointError, read_card, read_record, update_card
from ponder.store.checkpoint import load_checkpoint, save_run
from ponder.store.record import RunRecord, new_record

SHIPPED = sorted(p.parent for p in (ROOT / "assets").glob("*/run.json"))


@pytest.mark.parametrize("run_dir", SHIPPED, ids=lambda p: p.name)
def test_a_shipped_card_is_a_record_and_back(run_dir):
    card = read_card(run_dir)
    record = RunRecord.from_card(card)
    assert record.to_card() == card
    assert (record.task, record.max_steps, record.lambda_p) == tuple(card["train"][k] for k in ("task", "max_steps", "lambda_p"))
    assert card["format_version"] == 2 and not {"task", "max_steps", "lambda_p"} & set(card)      # stored once: in train


def test_save_run_writes_the_record_read_record_reads(tmp_path):
    cfg = TrainConfig(task="parity", max_steps=5, lambda_p=0.3, hidden=16)
    rec = new_record(cfg, {}, name="r1", status="cancelled", reason="cancelled at step 7", device="cpu",
                     train_seconds=1.234, steps=7, metrics={"test": {"accuracy": 0.5}})
    d = save_run(tmp_path / "x", tiny_model("parity", max_steps=5, lambda_p=0.3), rec)
    back = read_record(d)
    assert (back.name, back.status, back.reason, back.steps, back.train_seconds) == \
           ("r1", "cancelled", "cancelled at step 7", 7, 1.23)        # seconds kept to two decimals
    assert back.train == cfg.to_dict() and back.config == cfg and back.partial
    assert back.test.to_dict() == {"accuracy": 0.5}
    assert back.model == {"n_elems": 8, "hidden": 16, "cell": "gru", "first_flag": False, "init": "torch"}
    assert load_checkpoint(d).model.max_steps == 5


def test_the_cards_n_and_lambda_p_are_the_saved_models(tmp_path):
    # the weights decide: a model of N 4, lambda_p 0.3 saved with a config saying N 5, lambda_p 0.2
    d = save_run(tmp_path / "r", tiny_model("parity", max_steps=4, lambda_p=0.3),
                 TrainConfig(task="parity", max_steps=5, lambda_p=0.2, hidden=16))
    rec = read_record(d)
    assert (rec.max_steps, rec.lambda_p, rec.train["max_steps"], rec.train["lambda_p"]) == (4, 0.3, 4, 0.3)


def test_fields_the_schema_does_not_name_are_kept(tmp_path):
    d = save_run(tmp_path / "r", tiny_model("parity", max_steps=4), TrainConfig(task="parity", max_steps=4, hidden=16))
    update_card(d, note="kept")
    rec = read_record(d)
    assert rec.extra == {"note": "kept"} and rec.to_card()["note"] == "kept"


def _as_format_1(d):
    """Rewrite a run's card as format 1 wrote it: the task, N and lambda_p also at the top."""
    card = json.loads((d / CARD).read_text())
    card.update(format_version=1, **{k: card["train"][k] for k in ("task", "max_steps", "lambda_p")})
    (d / CARD).write_text(json.dumps(card))
    return card


def test_a_format_1_card_is_read_as_format_2(tmp_path):
    # runs saved and exported before format 2 stay listed and importable: the copies agree with train, so
    # dropping them loses nothing; the next card update writes format 2
    d = save_run(tmp_path / "r", tiny_model("parity", max_steps=4, lambda_p=0.3),
                 TrainConfig(task="parity", max_steps=4, lambda_p=0.3, hidden=16))
    old = _as_format_1(d)
    card = read_card(d)
    assert card["format_version"] == 2 and not {"task", "max_steps", "lambda_p"} & set(card)
    assert card["train"] == old["train"] and load_checkpoint(d).model.max_steps == 4
    update_card(d, name="again")
    assert json.loads((d / CARD).read_text())["format_version"] == 2


@pytest.mark.parametrize("field, value", [("max_steps", 5), ("lambda_p", 0.5), ("task", "mnist")])
def test_a_format_1_card_whose_copies_disagree_is_refused_in_one_line(tmp_path, field, value):
    d = save_run(tmp_path / "r", tiny_model("parity", max_steps=4, lambda_p=0.3),
                 TrainConfig(task="parity", max_steps=4, lambda_p=0.3, hidden=16))
    card = _as_format_1(d)
    card[field] = value                       # which one do the weights follow? unknown: refused
    (d / CARD).write_text(json.dumps(card))
    with pytest.raises(CheckpointError) as e:
        read_card(d)
    assert_one_line(e, d / CARD)
    assert f"disagrees with train.{field}" in str(e.value)


def test_a_card_of_a_newer_format_is_refused_in_one_line(tmp_path):
    d = save_run(tmp_path / "r", tiny_model("parity", max_steps=4), TrainConfig(task="parity", max_steps=4, hidden=16))
    card = json.loads((d / CARD).read_text())
    (d / CARD).write_text(json.dumps({**card, "format_version": 3}))
    with pytest.raises(CheckpointError) as e:
        read_card(d)
    assert_one_line(e, "card format 3")
