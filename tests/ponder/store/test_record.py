"""ponder/store/record.py: the RunRecord is the card's schema: every shipped card reads as a record and writes
back the same mapping; save_run writes a record as the card read_record returns; the task, N and lambda_p
are those of the training config."""
import pytest

from helpers import tiny_model
from paths import ROOT
from ponder.config import TrainConfig
from ponder.store.card import read_card, read_record, update_card
from ponder.store.checkpoint import load_checkpoint, save_run
from ponder.store.record import RunRecord, new_record

SHIPPED = sorted(p.parent for p in (ROOT / "assets").glob("*/run.json"))


@pytest.mark.parametrize("run_dir", SHIPPED, ids=lambda p: p.name)
def test_a_shipped_card_is_a_record_and_back(run_dir):
    card = read_card(run_dir)
    record = RunRecord.from_card(card)
    assert record.to_card() == card
    assert (record.task, record.max_steps, record.lambda_p) == (card["task"], card["max_steps"], card["lambda_p"])


def test_save_run_writes_the_record_read_record_reads(tmp_path):
    cfg = TrainConfig(task="parity", max_steps=5, lambda_p=0.3, hidden=16)
    rec = new_record(cfg, {}, name="r1", status="cancelled", reason="cancelled at step 7", device="cpu",
                     train_seconds=1.234, steps=7, metrics={"test": {"accuracy": 0.5}})
    d = save_run(tmp_path / "x", tiny_model("parity", max_steps=5, lambda_p=0.3), rec)
    back = read_record(d)
    assert (back.name, back.status, back.reason, back.steps, back.train_seconds) == \
           ("r1", "cancelled", "cancelled at step 7", 7, 1.23)        # seconds kept to two decimals
    assert back.train == cfg.to_dict() and back.config == cfg and back.partial
    assert back.test == {"accuracy": 0.5} and back.model == {"n_elems": 8, "hidden": 16}
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
