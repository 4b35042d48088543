"""ponder/training/resume.py: a run stopped and resumed from its saved state ends with the weights of the run that
never stopped; the state file round-trips, refuses another config and a file that is not a state."""
import pickle

import pytest
import torch

from ponder.cli.main import main
from ponder.config import ConfigError
from ponder.files import CheckpointError
from ponder.tasks import train_config
from ponder.training.loop import train
from ponder.training.resume import STATE_FILE, load_state, save_state


def _cfg(**kw):
    return train_config("parity", **{**dict(hidden=16, max_steps=4, epochs=4, steps_per_epoch=10, log_every=5,
                                            check_every=5, lr_schedule="constant", device="cpu"), **kw})


@pytest.mark.parametrize("kw", [dict(), dict(method="act"), dict(cell="tanh", first_flag=True, layout="prefix")])
def test_a_resumed_run_ends_with_the_weights_of_the_run_that_never_stopped(tmp_path, kw):
    cfg = _cfg(**kw)
    whole = train(cfg)
    states = []
    train(cfg, on_checkpoint=states.append, checkpoint_seconds=0.0)        # a state at every healthy check
    at = next(s for s in states if s.step == 15)                              # mid-epoch: the stream must go on too
    save_state(tmp_path, at)
    back = load_state(tmp_path)
    assert back.step == 15 and back.config == cfg.to_dict() and len(back.history) == len(at.history)
    resumed = train(cfg, resume=back)
    assert resumed.record.steps == whole.record.steps == 40
    for (k, a), b in zip(whole.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), k
    assert [h["step"] for h in resumed.history] == [h["step"] for h in whole.history]


def test_a_state_of_another_config_is_refused_but_more_updates_are_allowed(tmp_path):
    states = []
    train(_cfg(), on_checkpoint=states.append, checkpoint_seconds=0.0)
    with pytest.raises(ConfigError, match="another config .differs in lr"):
        train(_cfg(lr=0.5), resume=states[0])
    longer = train(_cfg(epochs=6), resume=states[-1])                        # 40 updates done, 60 asked for
    assert longer.record.steps == 60


def test_a_state_saved_before_a_field_or_option_existed_resumes_with_its_defaults():
    cfg = _cfg(cell="tanh")
    states = []
    train(cfg, on_checkpoint=states.append, checkpoint_seconds=0.0)
    old = states[1]
    old.config = {k: v for k, v in old.config.items() if k not in ("method", "act_epsilon")}   # an older ponder's
    old.config["options"] = {k: v for k, v in old.config["options"].items() if k != "init"}
    assert train(cfg, resume=old).record.steps == 40
    old.config["options"]["cell"] = "gru"                                      # a real difference is still refused
    with pytest.raises(ConfigError, match="differs in options"):
        train(cfg, resume=old)


def test_a_file_that_is_not_a_training_state_is_refused_in_one_line(tmp_path):
    (tmp_path / STATE_FILE).write_bytes(pickle.dumps({"step": 1}))
    with pytest.raises(CheckpointError, match="not a ponder training state"):
        load_state(tmp_path)
    assert load_state(tmp_path / "nothing") is None


def test_the_same_train_command_continues_from_the_state_and_removes_it_once_saved(tmp_path, capsys):
    out = tmp_path / "run"
    flags = ["train", "--task", "parity", "--hidden", "16", "--max-steps", "3", "--epochs", "3", "--steps-per-epoch",
             "10", "--lr-schedule", "constant", "--device", "cpu", "--out", str(out), "--resume", "--no-eval",
             "--quiet", "--threads", "1"]
    states = []
    cfg = train_config("parity", hidden=16, max_steps=3, epochs=3, steps_per_epoch=10, lr_schedule="constant",
                       device="cpu")
    train(cfg, on_checkpoint=states.append, checkpoint_seconds=0.0)
    out.mkdir()
    save_state(out, states[0])
    assert main(flags) == 0
    err = capsys.readouterr().err
    assert f"resuming at update {states[0].step}" in err and not (out / STATE_FILE).exists()
    assert main(flags) == 0 and "nothing to resume" in capsys.readouterr().out
