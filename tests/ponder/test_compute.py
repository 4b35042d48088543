"""ponder/analysis/compute.py: a measurement's compute budget: one item's cost counted on the model, the items that
fit, and a model of which not even one fits refused in one line."""
import pytest

from helpers import assert_one_line, tiny_model
from ponder.analysis.compute import MeasureComputeError, affordable_items, compute_budget, item_flops
from ponder.env import EnvError
from ponder.store.card import read_card
from ponder.tasks import build_model, model_config_from_dict


def test_the_items_that_fit_by_hand():
    model = tiny_model("parity", max_steps=5)
    per = item_flops(model)
    assert per > 0 and item_flops(model) == per                              # counted once per model
    assert affordable_items(model, 100, budget=10 * per) == 10               # 10 items' cost: 10 of the 100
    assert affordable_items(model, 100, times=2, budget=10 * per + 1) == 5   # each measured twice: 5
    assert affordable_items(model, 3, budget=10 * per) == 3                  # fewer wanted than fit: all
    with pytest.raises(MeasureComputeError) as e:
        affordable_items(model, 100, budget=per - 1)
    assert_one_line(e, "more than the 0 GFLOP a measurement may cost (PONDER_MAX_MEASURE_GFLOP)")


def test_the_budget_comes_from_the_environment(monkeypatch):
    monkeypatch.delenv("PONDER_MAX_MEASURE_GFLOP", raising=False)
    assert compute_budget() == 60e9
    monkeypatch.setenv("PONDER_MAX_MEASURE_GFLOP", "2.5")
    assert compute_budget() == 2.5e9
    monkeypatch.setenv("PONDER_MAX_MEASURE_GFLOP", "lots")
    with pytest.raises(EnvError) as e:
        compute_budget()
    assert_one_line(e, "PONDER_MAX_MEASURE_GFLOP")


def test_a_wide_first_conv_is_counted_at_every_position_not_by_its_parameters():
    """An MNIST import with a 1,024-wide first conv: 1.1 M parameters (2 x parameters x N = 43 MFLOP an item) but
    362 MFLOP an item (each conv weight is used at each of the 28 x 28 positions); 52 s on Compare."""
    card = read_card("assets/mnist-default")
    narrow = build_model("mnist", model_config_from_dict("mnist", card["model"]), 20, 0.3)
    wide = build_model("mnist", model_config_from_dict("mnist", dict(card["model"], channels1=1024)), 20, 0.3)
    guess = 2 * sum(p.numel() for p in wide.parameters()) * 20
    assert item_flops(wide) > 5 * guess and item_flops(wide) > 40 * item_flops(narrow)
    assert affordable_items(wide, 2000) < 2000 <= affordable_items(narrow, 2000)    # at the default 60 GFLOP


@pytest.mark.long
@pytest.mark.parametrize("task", ["mnist", "parity"])
def test_the_count_is_torchs_flop_counters(task):
    """The count is the one torch.utils.flop_counter.FlopCounterMode gives (which imports torch._dynamo: seconds
    at a page's first measurement, and a cache folder written in /tmp in the middle of an import)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from ponder.tasks import get_task
    model = tiny_model(task, max_steps=5)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(get_task(task).probe_inputs(model.step_fn.cfg)[-1:])
    assert item_flops(model) == counter.get_total_flops() > 0
