"""bench/parity_ladder.py: every rung is a valid training config, and the report reads finished and running rungs."""
import json

import pytest

from helpers import tiny_model
from bench.parity_ladder import QUEUES, RUNGS, first_reaching, report
from ponder.cli.args import build_parser, config_from_args
from ponder.config import TrainConfig
from ponder.store.checkpoint import save_run
from ponder.tasks import train_config
from ponder.training.loop import train
from ponder.training.resume import save_state


def test_every_rung_is_a_valid_config_of_the_papers_vectors_and_every_queued_rung_exists():
    for name, flags in RUNGS.items():
        cfg = config_from_args(build_parser().parse_args(["train", *flags, "--out", "x"]))
        assert cfg.parity_preset in ("paper", "extrapolation") and cfg.batch_size == 128, name
        assert cfg.epochs * cfg.steps_per_epoch == 60_000 and cfg.lr_schedule == "constant"
    assert {n for q in QUEUES.values() for n in q} <= set(RUNGS)


def test_the_first_update_reaching_the_mark():
    assert first_reaching([(1000, 0.5), (2000, 0.979), (3000, 0.98), (4000, 0.99)]) == 3000
    assert first_reaching([(1000, 0.5)]) is None


@pytest.mark.long
def test_the_report_measures_a_finished_rung_and_shows_a_running_one_from_its_state(tmp_path):
    cfg = TrainConfig(task="parity", max_steps=4, lambda_p=0.3, hidden=16, parity_preset="paper", method="act")
    hist = [dict(step=s, val_accuracy=a) for s, a in ((1000, 0.6), (2000, 0.985))]
    save_run(tmp_path / "done", tiny_model("parity", max_steps=4, n_elems=64, method="act"), cfg, steps=2000,
             history=hist)
    running = train_config("parity", hidden=16, max_steps=3, epochs=1, steps_per_epoch=20, log_every=10,
                           check_every=10, device="cpu")
    states = []
    train(running, on_checkpoint=states.append, checkpoint_seconds=0.0)
    (tmp_path / "going").mkdir()
    save_state(tmp_path / "going", states[0])
    rows = report(tmp_path, size=100)
    done, going = rows["done"], rows["going"]
    assert (done["status"], done["updates"], done["to_098"], done["best"]) == ("completed", 2000, 2000, 0.985)
    assert done["experiment"]["method"] == "act" and done["experiment"]["seen"]["n"] == 100
    assert going["status"] == "running" and going["experiment"] is None and going["config"]["hidden"] == 16
    json.dumps(rows)                                                   # what --to writes
