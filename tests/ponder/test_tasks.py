"""ponder/tasks/: the registry, the MNIST and parity tasks, and a third task, defined here, that trains,
evaluates, saves and lists through the lifecycle, the CLI and the explorer's loaders with no change elsewhere."""
import json
from dataclasses import dataclass

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, strategies as st

from helpers import run_cli, tiny_model
from ponder.training import lifecycle
from ponder.analysis.studies import parity_sets
from ponder.analysis.unroll import measure_test
from ponder.config import ConfigError, TrainConfig
from ponder.store.record import RunRecord
from ponder.tasks import init_lambda_head
from ponder.analysis.unroll import near_chance
from ponder.tasks import (TASKS, Batches, EvalSet, Task, build_model, get_task, model_config, register, train_config,
                          validate)
from ponder.tasks.mnist.task import mnist_split
from ponder.tasks.parity.task import PARITY_PRESETS, easy_hard, fitted_preset, halves


# ----------------------------------------------------------------------------- a toy third task

@dataclass
class ToyConfig:
    dim: int = 6             # input vector length
    hidden: int = 16         # GRU hidden size


class ToyStep(nn.Module):
    """A GRU cell fed a vector at every step; two classes: is the vector's first element positive?"""

    def __init__(self, cfg: ToyConfig, lambda_p: float):
        super().__init__()
        self.cfg = cfg
        self.cell = nn.GRUCell(cfg.dim, cfg.hidden)
        self.out_head = nn.Linear(cfg.hidden, 2)
        self.lambda_head = nn.Linear(cfg.hidden, 1)
        init_lambda_head(self.lambda_head, lambda_p)

    def encode(self, x):
        return x

    def init_hidden(self, ctx):
        return ctx.new_zeros(ctx.shape[0], self.cfg.hidden)

    def step(self, ctx, h, n=0):
        h = self.cell(ctx, h)
        return self.out_head(h), h, self.lambda_head(h).squeeze(-1)

    def loss(self, y, target):
        return F.cross_entropy(y.float(), target.long(), reduction="none")

    def probs(self, y):
        return y.float().softmax(-1)


def toy_items(n: int, dim: int, seed: int):
    x = torch.randn(n, dim, generator=torch.Generator().manual_seed(seed))
    return x, (x[:, 0] > 0).long()


class ToyBatches(Batches):
    def __init__(self, cfg: TrainConfig, dim: int):
        self.cfg, self.dim, self.seed = cfg, dim, cfg.seed
        self.per_epoch = cfg.steps_per_epoch

    def __iter__(self):
        while True:
            self.seed += 1
            yield toy_items(self.cfg.batch_size, self.dim, 1000 + self.seed)

    def validation(self):
        return toy_items(200, self.dim, 7)


class ToyTask(Task):
    name, label = "toy", "toy"
    model_config_cls = ToyConfig
    defaults = dict(hidden=16, lr=1e-2, epochs=1.0, steps_per_epoch=40, batch_size=64, max_steps=4)
    chance = 0.5

    def build_step(self, model_cfg, lambda_p):
        return ToyStep(model_cfg, lambda_p)

    def batches(self, cfg, device, data):
        return ToyBatches(cfg, ToyConfig().dim)

    def test_set(self, model, cfg, data, limit=None):
        x, y = toy_items(limit or 500, model.step_fn.cfg.dim, 3)
        return EvalSet(x, y, info={"split": "toy test"}, rows=("by_class", "label", y))


@pytest.fixture
def toy(monkeypatch, tmp_path):
    """The toy task registered for this test only, and an empty runs folder."""
    monkeypatch.setenv("PONDER_RUNS", str(tmp_path / "runs"))
    register(ToyTask())
    yield tmp_path / "runs"
    TASKS.pop("toy")


@pytest.mark.long
def test_a_third_task_through_the_lifecycle_the_cli_and_the_loaders(toy, capsys):
    # the lifecycle: train, save, measure, card
    done = lifecycle.run(train_config("toy", device="cpu"), toy / "lc")
    assert done.record.status == "completed" and done.problems == [] and done.run_dir == toy / "lc"
    assert done.metrics.accuracy > 0.8 and done.metrics.n == 500 and done.metrics.split == "toy test"
    assert [r["label"] for r in done.metrics.by_class] == [0, 1]
    card = json.loads((toy / "lc" / "run.json").read_text())
    assert card["train"]["task"] == "toy" and card["model"] == {"dim": 6, "hidden": 16}
    assert card["metrics"]["test"]["accuracy"] == done.metrics.accuracy
    # the CLI: train (no evaluation) and evaluate
    rc, out, err = run_cli(["train", "--task", "toy", "--out", str(toy / "cli"), "--device", "cpu", "--quiet",
                            "--no-eval", "--steps-per-epoch", "40"], capsys)       # the toy task's 40 steps
    assert rc == 0, err
    rc, out, err = run_cli(["evaluate", str(toy / "cli"), "--json", "--limit", "300"], capsys)
    assert rc == 0, err
    res = json.loads(out)
    assert res["n"] == 300 and res["accuracy"] > 0.8 and res["rotations"] == [] and res["split"] == "toy test"
    # the explorer's loaders: both runs listed as toy models, loaded, and the one without metrics measured
    from explorer.app import loaders
    entries = {e.name: e for e in loaders.models("toy")}
    assert set(entries) == {"runs/lc", "runs/cli"}
    assert loaders.checkpoint(entries["runs/cli"]).task == "toy"
    assert loaders.test_metrics(entries["runs/lc"]).accuracy == done.metrics.accuracy
    measured = loaders.test_metrics(entries["runs/cli"])
    assert measured.accuracy > 0.8 and measured.n == lifecycle.QUICK_TEST_ITEMS == 2000
    assert measured.by_class is None                      # the breakdowns stay out of card-shaped metrics
    assert near_chance("toy", 0.55) and not near_chance("toy", measured.accuracy)     # its chance level: 0.5


def test_the_registry_names_the_tasks_it_knows():
    assert list(TASKS)[:2] == ["mnist", "parity"] and get_task("parity").chance == 0.5
    with pytest.raises(ConfigError, match="^task must be one of mnist, parity"):
        get_task("toy")
    with pytest.raises(ConfigError, match="^task must be one of"):
        validate(TrainConfig(task="toy"))
    # each task's defaults over TrainConfig's; the model config follows the run's config
    assert train_config("parity").regulariser == "kl-reverse" and train_config("mnist").hidden == 64
    assert model_config(TrainConfig(task="parity", parity_preset="medium")).n_elems == 16


def test_each_task_checks_the_fields_it_reads_whatever_the_runs_task():
    with pytest.raises(ConfigError, match="^reader must be one of cnn, rows, coarse"):
        validate(TrainConfig(task="parity", reader="lines"))
    with pytest.raises(ConfigError, match="^parity_preset must be one of small"):
        validate(TrainConfig(task="mnist", parity_preset="giant"))
    # ponder.config knows no task: TrainConfig.validate checks the fields every run has, the registry the rest
    assert TrainConfig(task="toy", reader="lines", parity_preset="giant").validate().task == "toy"
    assert get_task("mnist").describe(RunRecord(train={}, model={"reader": "rows", "rows_per_step": 4})) == \
        "reader rows (4 a step)"
    assert get_task("parity").describe(RunRecord(train={"parity_preset": "video-15"})) == "parity preset video-15"


@pytest.mark.parametrize("rows_per_step", [2, 4, 14, 28])
def test_step_meaning_is_read_from_the_readers_definition(rows_per_step):
    # what a step is, in words, for every page: the row reader's step reveals rows_per_step more rows, and the
    # view of the model built from that card agrees (the first step n whose view shows every row)
    from ponder.tasks import step_meaning
    card = {"train": {"task": "mnist"}, "model": {"reader": "rows", "rows_per_step": rows_per_step}}
    meaning, caveat = step_meaning(RunRecord.from_card(card))
    model = tiny_model("mnist", max_steps=20, reader="rows", rows_per_step=rows_per_step)
    ink = torch.zeros(1, 1, 28, 28)
    ink[..., 27, :] = 1.0                                                    # ink on the bottom row only
    full = next(n + 1 for n in range(20) if model.step_fn.view(ink, n)[..., 27, :].min() == 1)
    assert meaning == f"each step reveals {rows_per_step} more rows of the image, top to bottom (all 28 by step {full})"
    assert "ink" in caveat and "rotating" in caveat                          # the rows confound, named
    R = RunRecord.from_card
    assert step_meaning(R({"train": {"task": "mnist"}, "model": {}}))[0].startswith("every step sees the whole image")
    assert "2×2, 3×3, … 28×28 from step 8" in step_meaning(R({"train": {"task": "mnist"}, "model": {"reader": "coarse"}}))[0]
    # the recall step: one 3×3 conv at stride 2 a step over a 5×5 stem, 9 px at step 1, +4 a step: 29 ≥ 28 at step 6
    assert "from 9×9 pixels at step 1 to the whole digit at step 6" in step_meaning(
        R({"train": {"task": "mnist"}, "model": {"reader": "recall"}}))[0]
    assert step_meaning(R({"train": {"task": "parity"}, "model": {"n_elems": 8}})) == (
        "every step reads the whole vector again and updates the cell's state: more steps, more thought", "")


def test_build_model_from_a_card_mapping():
    model = build_model("parity", {"n_elems": 8, "hidden": 12}, 5, 0.3)
    assert model.max_steps == 5 and model.step_fn.cfg.hidden == 12
    with pytest.raises(ConfigError, match="^unknown parity model field"):
        build_model("parity", {"n_elems": 8, "hidden": 12, "reader": "rows"}, 5, 0.3)


# ----------------------------------------------------------------------------- MNIST

def test_mnist_split_takes_the_first_images(mnist):
    x, y = mnist_split(mnist, "val", 7)
    assert torch.equal(x, mnist.val_x[:7]) and torch.equal(y, mnist.val_y[:7])
    assert mnist_split(mnist)[0] is mnist.test_x


def test_mnist_groups_by_digit_and_rotates_its_test_images(mnist):
    model = tiny_model("mnist", max_steps=3)
    res = measure_test(model, TrainConfig(), mnist, 50)
    assert res.n == 50 and res.split == "test" and res.mode == "sample"
    assert sum(r["count"] for r in res.by_class) == 50 and [r["label"] for r in res.by_class] == \
        sorted(set(mnist.test_y[:50].tolist()))
    x, y = get_task("mnist").rotation_inputs(mnist, 20)
    assert x.dtype == torch.uint8 and x.shape == (20, 28, 28) and torch.equal(y, mnist.test_y[:20])
    assert get_task("parity").rotation_inputs(None, 20) is None             # not an image task


# ----------------------------------------------------------------------------- parity: one easy / hard

def test_halves_of_a_range_of_k():
    # by hand: 1..16 -> 1..8 and 9..16; 1..8 -> 1..4 and 5..8; 9..16 -> 9..12 and 13..16; 3..3 -> 3..3, empty
    assert halves(1, 16) == ((1, 8), (9, 16))
    assert halves(1, 8) == ((1, 4), (5, 8)) and halves(9, 16) == ((9, 12), (13, 16))
    assert halves(3, 3) == ((3, 3), (4, 3))


@given(st.integers(1, 200), st.integers(0, 200))
def test_halves_cover_the_range_once(lo, width):
    (a, b), (c, d) = halves(lo, lo + width)
    assert a == lo and d == lo + width and c == b + 1 and (b - a) - (d - c) in (0, 1)


def test_easy_hard_is_the_presets_own_ranges_else_the_halves_of_its_test_range():
    assert easy_hard(PARITY_PRESETS["video-15"]) == ((1, 4), (11, 15))
    assert easy_hard(PARITY_PRESETS["medium-extrapolation"]) == ((9, 12), (13, 16))       # test k 9..16
    # a card whose preset does not fit its model: every k of the model's own n
    assert fitted_preset("small", 12) == dict(n_elems=12, train_k=(1, 12), test_k=(1, 12))
    assert fitted_preset("nope", 8) == dict(n_elems=8, train_k=(1, 8), test_k=(1, 8))
    assert fitted_preset("small", 8) is PARITY_PRESETS["small"]


@pytest.mark.parametrize("preset", list(PARITY_PRESETS))
def test_the_parity_card_line_and_charts_name_the_same_ranges(preset):
    """What the Parity page shows: the card line (tables.parity_card_line, from the test metrics the run was
    saved with) and the charts' test sets (loaders.parity_results: parity_sets of the fitted preset)."""
    from explorer.tables import parity_card_line
    from ponder.training.lifecycle import card_metrics
    n = PARITY_PRESETS[preset]["n_elems"]
    model = tiny_model("parity", max_steps=3, n_elems=n)
    cfg = TrainConfig(task="parity", parity_preset=preset)
    card = {"task": "parity", "train": cfg.to_dict(), "metrics": card_metrics(measure_test(model, cfg, None, 200))}
    line, sets = parity_card_line(RunRecord.from_card(card)), parity_sets(fitted_preset(preset, n))
    for name, (lo, hi) in zip(("easy", "hard"), easy_hard(PARITY_PRESETS[preset])):
        assert card["metrics"]["test"][name]["k_range"] == [lo, hi]
        assert f"{name} k {lo}–{hi}" in line
        assert sets[f"{name} (k {lo}–{hi})"] == (lo, hi)


def test_parity_validation_is_held_out_vectors_of_the_trained_k_and_the_unseen_k_are_the_shift():
    from ponder.tasks.parity import data as PD
    model = tiny_model("parity", max_steps=4, n_elems=30)
    cfg = TrainConfig(task="parity", parity_preset="video-30-extrapolation")
    task = get_task("parity")
    vs = task.validation_set(model, cfg, None, 300)
    k = (vs.x != 0).sum(1)
    assert len(vs.y) == 300 and k.min() >= 1 and k.max() <= 25
    assert (PD.parity_class(vs.x) == PD.VAL_CLASS).all()
    ts = task.test_set(model, cfg, None, 300)
    assert (PD.parity_class(ts.x) == PD.TEST_CLASS).all()
    shift = task.shifted(model, cfg, torch.tensor([3, 25, 26, 30]))
    assert list(shift) == ["unseen k (outside 1–25)"] and shift["unseen k (outside 1–25)"].tolist() == [0, 0, 1, 1]
    assert task.shifted(model, TrainConfig(task="parity", parity_preset="large"), torch.tensor([1, 30])) == {}
    res = measure_test(model, cfg, limit=300)
    assert [r["name"] for r in res.baselines["shift"]] == ["unseen k (outside 1–25)"]
    assert res.baselines["shift"][0]["n"] == int((ts.rows[2] > 25).sum())


def test_a_parity_cards_cell_and_flag_are_checked_and_the_flag_marks_only_the_first_step():
    from ponder.config import ConfigError
    from ponder.tasks import model_config_from_dict
    assert model_config_from_dict("parity", {"n_elems": 8, "hidden": 4, "cell": "tanh", "first_flag": True}).cell == "tanh"
    with pytest.raises(ConfigError, match="cell must be one of gru, tanh, got 'lstm'"):
        model_config_from_dict("parity", {"n_elems": 8, "hidden": 4, "cell": "lstm"})
    with pytest.raises(ConfigError, match="first_flag must be true or false, got 'yes'"):
        model_config_from_dict("parity", {"n_elems": 8, "hidden": 4, "first_flag": "yes"})
    fn = tiny_model("parity", cell="tanh", first_flag=True).step_fn
    x = torch.ones(2, 8)
    assert fn.cell_input(x, 0)[:, 0].tolist() == [1.0, 1.0] and fn.cell_input(x, 3)[:, 0].tolist() == [0.0, 0.0]
    assert torch.equal(fn.cell_input(x, 1)[:, 1:], x) and isinstance(fn.cell, torch.nn.RNNCell)


def test_glorot_starting_weights_are_tensorflows_and_the_card_keeps_them():
    from ponder.tasks import model_config_from_dict
    # tanh cell, 8 inputs + flag, H = 16: [W_ih | W_hh] ~ U(±sqrt(6 / (9 + 16 + 16))) = ±0.3825, zero biases
    fn = tiny_model("parity", cell="tanh", first_flag=True, init="glorot", lambda_std=0).step_fn
    limit = (6 / (9 + 16 + 16)) ** 0.5
    assert fn.cell.weight_ih.abs().max() <= limit and fn.cell.weight_hh.abs().max() <= limit
    assert fn.cell.weight_hh.abs().max() > 0.8 * limit                        # drawn over the whole range
    assert not fn.cell.bias_ih.any() and not fn.cell.bias_hh.any() and not fn.out_head.bias.any()
    assert model_config_from_dict("parity", {"n_elems": 8, "hidden": 4, "init": "glorot"}).init == "glorot"
    with pytest.raises(ConfigError, match="init must be one of torch, glorot"):
        model_config_from_dict("parity", {"n_elems": 8, "hidden": 4, "init": "he"})
