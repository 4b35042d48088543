"""ponder/store/card_checks.py: the fields tables and pages read are checked when a card is read: per-step
lists, E[n]'s spread, the easy / hard and by_correctness blocks; bad ones refused in one line naming the
field, the bounds themselves kept. (Cards that are no JSON, or not a card: test_card.py.)"""
import pytest

from helpers import assert_one_line, edit_card
from ponder.store import card as K
from ponder.store.card import CheckpointError, read_card


BAD_METRIC_LISTS = {
    "halting-strings": ["a", "b"],
    "halting-nan": [0.5, float("nan")],
    "halting-string": "0.5,0.5",
    "halting-dict": {"1": 0.5},
    "halting-nested": [[0.5], [0.5]],
    "halting-empty": [],
    "halting-too-long": [0.1] * 6,                # the run has max_steps 5
    "halting-bools": [True, False],
}


@pytest.mark.parametrize("key", ["halting_distribution", "per_step_accuracy", "prior"])
@pytest.mark.parametrize("kind", sorted(BAD_METRIC_LISTS))
def test_metric_lists_pages_chart_are_checked(tiny_run, key, kind):
    d, _ = tiny_run
    edit_card(d, lambda card: card.update(metrics={"test": {"accuracy": 0.9, key: BAD_METRIC_LISTS[kind]}}))
    with pytest.raises(CheckpointError) as e:
        read_card(d)
    assert_one_line(e, f"metrics.test.{key}")


@pytest.mark.parametrize("en", [4.65, {"mean": 4.65}, {"mean": 4.65, "std": "wide", "min": 1.0, "max": 9.0}])
def test_expected_steps_must_be_its_spread(tiny_run, en):
    """metrics.test.expected_steps is E[n] over the test inputs as {mean, std, min, max}: a plain mean or a
    partial spread is refused in one line."""
    d, _ = tiny_run
    edit_card(d, lambda card: card.update(metrics={"test": {"accuracy": 0.9, "expected_steps": en}}))
    with pytest.raises(CheckpointError) as e:
        read_card(d)
    assert_one_line(e, "metrics.test.expected_steps must be {mean, std, min, max}")
    spread = {"mean": 4.65, "std": 0.06, "min": 4.41, "max": 4.91}                  # within N = 5
    edit_card(d, lambda card: card.update(metrics={"test": {"accuracy": 0.9, "expected_steps": spread}}))
    assert K.read_record(d).test.mean_expected_steps == 4.65


def test_good_metric_lists_are_kept(tiny_run):
    d, _ = tiny_run
    edit_card(d, lambda card: card.update(
        metrics={"test": {"halting_distribution": [0.5, 0.25, 0.25], "per_step_accuracy": [0.5] * 5}}))
    assert read_card(d)["metrics"]["test"]["halting_distribution"] == [0.5, 0.25, 0.25]


def test_card_numbers_in_range_are_kept(tiny_run):
    # the bounds themselves are allowed: 0 steps (a run cancelled at once), an empty easy group (NaN as saved)
    d, _ = tiny_run
    edit_card(d, lambda card: card.update(steps=0, train_seconds=0.0, metrics={"test": {
        "n": 1, "accuracy": 1.0, "mean_steps": 1.0, "expected_steps": {"mean": 5.0, "std": 0.0, "min": 1, "max": 5},
        "easy": {"k_range": [1, 4], "count": 0, "accuracy": float("nan")},
        "hard": {"k_range": [5, 8], "count": 3, "accuracy": 0.5, "expected_steps": 2.5},
        "by_correctness": {"correct": {"count": 1, "expected_steps": 2.0}, "wrong": {"count": 0, "expected_steps": None}}}}))
    test = read_card(d)["metrics"]["test"]
    assert test["hard"]["expected_steps"] == 2.5 and test["easy"]["count"] == 0


@pytest.mark.parametrize("key, bad", [("learned_q", 1.5), ("learned_q_minus_confidence", -2.0),
                                      ("sampled_minus_learned_q", 3.0)])
def test_q_exit_pays_numbers_are_accuracies_and_differences(key, bad):
    from ponder.config import ConfigError
    from ponder.store.card_checks import check_test_metrics
    check_test_metrics({"pays": {key: 0.5}}, 20)                 # in range: kept
    with pytest.raises(ConfigError, match=key):
        check_test_metrics({"pays": {key: bad}}, 20)             # an accuracy above 1, a difference beyond ±1
