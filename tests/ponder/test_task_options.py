"""ponder/tasks/options.py: a task's options dataclass, where each value lives in a TrainConfig (its own field, or
TrainConfig.options), and each option checked from its field (choices, range, type)."""
from dataclasses import dataclass

import pytest

from ponder.config import ConfigError, TrainConfig
from ponder.tasks import TASKS, register, train_config, validate
from ponder.tasks.options import check_option, option, option_fields, options_of, split_options
from ponder.tasks.parity.task import ParityTask


@dataclass
class ToyOptions:
    depth: int = option(3, "how deep the toy goes", lo=1, hi=9)
    mode: str = option("a", "which way", choices=("a", "b"))
    scale: float = option(0.5, "how big", lo=0.0)
    loud: bool = option(False, "whether it shouts")


class ToyTask(ParityTask):
    name, label, options_cls = "toy", "toy", ToyOptions


@pytest.fixture
def toy():
    yield register(ToyTask())
    TASKS.pop("toy")


def test_an_option_needs_a_help_text():
    with pytest.raises(ValueError, match="help"):
        option(1, "")


def test_a_new_tasks_options_live_in_train_config_options_with_their_defaults(toy):
    cfg = train_config("toy", depth=5, hidden=16)
    assert cfg.options == {"depth": 5, "mode": "a", "scale": 0.5, "loud": False} and cfg.hidden == 16
    assert options_of(toy, cfg) == ToyOptions(depth=5) and validate(cfg) is cfg
    assert options_of(toy, TrainConfig(task="toy")) == ToyOptions()     # a card without them: the defaults
    assert toy.reads == ("depth", "mode", "scale", "loud")


def test_mnist_and_parity_options_stay_train_config_fields():
    # their cards predate TrainConfig.options: every run's card stores them flat
    assert split_options(TASKS["mnist"], {"reader": "cnn", "lr": 0.1}) == {"reader": "cnn", "lr": 0.1}
    cfg = train_config("mnist")
    assert cfg.options == {} and (cfg.reader, cfg.rows_per_step, cfg.rotate_train) == ("rows", 2, 0.0)
    assert options_of(TASKS["parity"], train_config("parity", parity_preset="video-15")).parity_preset == "video-15"
    assert [f.name for f in option_fields(TASKS["parity"])] == ["parity_preset", "cell", "first_flag", "init",
                                                                 "layout", "steps_per_epoch"]
    # parity's later options (the cell, the first-step flag, the layout) live in options, as a new task's do
    cfg = train_config("parity", cell="tanh", layout="prefix")
    assert cfg.options == {"cell": "tanh", "first_flag": False, "init": "torch", "layout": "prefix"}
    assert validate(cfg) is cfg


@pytest.mark.parametrize("values, needle", [
    (dict(depth=0), "depth must be an integer in [1, 9], got 0"), (dict(depth=2.0), "depth must be an integer"),
    (dict(mode="c"), "mode must be one of a, b, got 'c'"), (dict(scale=-1.0), "scale must be a number >= 0"),
    (dict(scale="big"), "scale must be a number"), (dict(loud=1), "loud must be true or false, got 1")])
def test_each_option_is_checked_from_its_field(toy, values, needle):
    with pytest.raises(ConfigError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        validate(train_config("toy", **values))


def test_an_option_the_runs_task_lacks_is_refused(toy):
    with pytest.raises(ConfigError, match="unknown config field.*for task mnist: depth"):
        train_config("mnist", depth=4)
    with pytest.raises(ConfigError, match="unknown option.*of task parity: 'depth'"):
        validate(TrainConfig(task="parity", options={"depth": 4}))
    with pytest.raises(ConfigError, match="options must be a mapping"):
        validate(TrainConfig(task="toy", options={"depth": [4]}))


def test_check_option_on_a_bare_field():
    @dataclass
    class O:
        n: int = option(2, "n", choices=(2, 4))
    [f] = option_fields(type("T", (), {"options_cls": O}))
    check_option(f, 4)
    with pytest.raises(ConfigError, match="n must be one of 2, 4, got True"):
        check_option(f, True)
