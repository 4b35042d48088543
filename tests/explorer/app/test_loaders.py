"""explorer/app/loaders.py: a page's measurement of a run runs on the items that fit in the compute budget (the kept
measurement on disk: tests/explorer/test_disk_cache.py)."""
import pytest

from helpers import assert_one_line, save_tiny_run
from ponder.analysis.compute import MeasureComputeError, item_flops


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("PONDER_RUNS", str(tmp_path / "runs"))
    return tmp_path / "runs"


def test_a_measurement_runs_on_the_items_its_compute_budget_pays_for(runs, monkeypatch):
    """Compare measured every unmeasured run on 2,000 items whatever it cost (a 1,024-wide conv: 40 s a run)."""
    from explorer.app import loaders
    run, model = save_tiny_run(runs / "r")
    monkeypatch.setenv("PONDER_MAX_MEASURE_GFLOP", str(20.5 * item_flops(model) / 1e9))   # 20 items' worth:
    got = loaders.measured_metrics(str(run), loaders.stamp(run), 64, 5)       # 10 validation and 10 test items
    assert got.n == 10 and 0 <= got.accuracy <= 1


def test_a_run_of_which_one_item_is_over_budget_is_one_line_where_it_is_loaded(runs, monkeypatch):
    from explorer.app import loaders
    run, model = save_tiny_run(runs / "r")
    monkeypatch.setenv("PONDER_MAX_MEASURE_GFLOP", str(item_flops(model) / 2 / 1e9))
    with pytest.raises(MeasureComputeError) as e:
        loaders.checkpoint(run)
    assert_one_line(e, "(PONDER_MAX_MEASURE_GFLOP)")
