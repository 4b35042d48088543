"""ponder/analysis/metrics.py: the test measurement as one record. Every shipped card's metrics.test reads into it
and writes back unchanged; keys it does not name are kept; its checks refuse a number out of range in one line;
its schema hash follows its fields."""
import json
from dataclasses import fields, make_dataclass

import pytest

from helpers import ROOT
from ponder.analysis.metrics import TestMetrics, check_test_metrics, schema
from ponder.config import ConfigError

CARDS = sorted((ROOT / "assets").glob("*/run.json"))


@pytest.mark.parametrize("card", CARDS, ids=lambda p: p.parent.name)
def test_every_shipped_cards_test_metrics_read_and_write_back_unchanged(card):
    c = json.loads(card.read_text())
    test = c["metrics"]["test"]
    t = TestMetrics.from_card(test, c["train"]["max_steps"])
    assert t.to_dict() == test and t.extra == {}              # every key a shipped card holds is a field
    assert t.accuracy == test["accuracy"] and t.mean_steps == test["mean_steps"]
    assert t.mean_expected_steps == test["expected_steps"]["mean"]
    for name in ("easy", "hard"):                             # parity's groups are records too
        if name in test:
            g = getattr(t, name)
            assert isinstance(g, TestMetrics) and g.k_range == test[name]["k_range"] and g.count == test[name]["count"]
            assert g.mean_expected_steps == test[name]["expected_steps"]     # a group's E[n] is its mean
    assert all(isinstance(m, TestMetrics) for m in (t.modes or {}).values())


def test_keys_the_schema_does_not_name_are_kept_and_nothing_measured_is_false():
    t = TestMetrics.from_dict({"accuracy": 0.5, "split": "test", "a_task_of_its_own": [1, 2]})
    assert t.extra == {"a_task_of_its_own": [1, 2]} and t.split == "test"
    assert t.to_dict() == {"accuracy": 0.5, "split": "test", "a_task_of_its_own": [1, 2]}
    assert t and not TestMetrics() and not TestMetrics.from_dict({})
    assert TestMetrics(accuracy=0.9, mean_steps=3.0).without("mean_steps").to_dict() == {"accuracy": 0.9}
    assert not TestMetrics(accuracy=0.9).charted and TestMetrics(halting_distribution=[1.0]).charted


@pytest.mark.parametrize("test, where", [({"accuracy": 1.5}, "metrics.test.accuracy"),
                                         ({"mean_steps": 21}, "metrics.test.mean_steps"),
                                         ({"easy": {"k_range": [4, 1], "count": 1}}, "metrics.test.easy.k_range"),
                                         ({"modes": {"expected": {"std_steps": -1}}}, "metrics.test.modes.expected.std_steps")])
def test_a_number_out_of_range_is_refused_in_one_line_naming_it(test, where):
    with pytest.raises(ConfigError, match=f"^{where} must be") as e:
        TestMetrics.from_card(test, 20)
    assert "\n" not in str(e.value)
    check_test_metrics({"accuracy": 1.0, "mean_steps": 20}, 20)                  # the bounds themselves pass


def test_the_schema_hash_follows_the_fields():
    assert schema() == schema(TestMetrics) and len(schema()) == 16
    grown = make_dataclass("Grown", [("new_measure", float, None)], bases=(TestMetrics,))
    assert schema(grown) != schema()
    assert [f.name for f in fields(grown)][-1] == "new_measure"


def test_a_computed_mean_rounded_just_past_n_still_reads_but_a_real_excess_does_not():
    # a run of N = 2 whose matched operating point mixed two depths: (1 - w) 2 + w 2 came out 2.000000000000093
    from ponder.analysis.metrics import check_number
    check_number("m", 2.000000000000093, 1, 2)
    with pytest.raises(ConfigError, match="m must be a number in"):
        check_number("m", 2.001, 1, 2)
    with pytest.raises(ConfigError, match="m must be an integer"):
        check_number("m", 3, 1, 2, integer=True)
