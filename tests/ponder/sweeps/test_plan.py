"""ponder/sweeps/plan.py: a plan's trials are the grid times the seeds with typed values and distinct names, bad
grids and oversized ones are refused in one line before anything is built, and the Markdown table's row."""
import pytest

from helpers import assert_one_line
from ponder.sweeps import plan as P
from ponder.config import ConfigError
from ponder.store.record import new_record

TINY = dict(hidden=16, batch_size=32, max_steps=5, epochs=1.0, steps_per_epoch=10, log_every=5, device="cpu")


def plan(grid="lambda_p=0.2,0.5", seeds=(0,), **base):
    return P.Plan("parity", {**TINY, **base}, P.parse_grid(grid.split() if isinstance(grid, str) else grid), list(seeds))


def test_the_trials_are_the_grid_times_the_seeds_with_typed_values():
    p = plan(["lambda_p=0.2,0.5", "regulariser=kl,kl-reverse", "max_seconds=none,30"], seeds=(0, 7))
    trials = p.trials()
    assert len(trials) == 2 * 2 * 2 * 2
    assert trials[0].name == "lambda_p0.2-regulariserkl-max_secondsNone-seed0"
    assert trials[1].values == {"lambda_p": 0.2, "regulariser": "kl", "max_seconds": None, "seed": 7}
    last = trials[-1].config
    assert (last.lambda_p, last.regulariser, last.max_seconds, last.seed, last.hidden) == (0.5, "kl-reverse", 30.0, 7, 16)
    assert P.parse_grid(["hidden=8,16", "compile=false", "parity-preset=video-15"]) == \
        {"hidden": [8, 16], "compile": [False], "parity_preset": ["video-15"]}
    assert len({t.name for t in trials}) == len(trials)


@pytest.mark.parametrize("grid, needle", [
    (["foo=1"], "not a training config field"), (["seed=1,2"], "--seeds"), (["task=mnist"], "one task"),
    (["lambda_p=abc"], "expected a number"), (["hidden=0.5"], "whole number"), (["lambda_p"], "FIELD=V1,V2"),
    (["lambda_p=0.2,0.2"], "listed twice"), (["beta=1", "beta=2"], "given twice"), (["compile=maybe"], "true or false"),
])
def test_bad_grids_are_one_line_errors(grid, needle):
    with pytest.raises(ConfigError) as e:
        P.parse_grid(grid)
    assert_one_line(e, needle)


def test_a_grid_over_the_cap_is_refused_before_anything_is_built():
    # 1,000 x 1,000 values took 9.4 GB and 150 s without starting a trial
    big = P.Plan("parity", dict(TINY), {"lambda_p": [i / 1001 for i in range(1, 1001)],
                                        "beta": [i / 1000 for i in range(1, 1001)]}, [0])
    with pytest.raises(ConfigError) as e:
        big.trials()
    assert_one_line(e, f"the grid makes 1,000,000 trials (values x seeds); a sweep trains at most {P.MAX_TRIALS:,}")


def test_the_table_has_a_row_per_trial_with_its_values_and_metrics():
    t0, t1 = plan("lambda_p=0.2,0.5").trials()
    t0.end(new_record(t0.config, {}, status="completed", steps=10, train_seconds=1.25,
                      metrics={"test": {"accuracy": 0.75, "mean_steps": 2.5, "expected_steps": {"mean": 2.625},
                                        "pays": {"learned_minus_confidence": -0.0025, "expected_minus_settle": 1.5}}}))
    t1.end(new_record(t1.config, {}, status="failed", reason="loss became inf | at step 1"))
    t1.resumed = False
    lines = P.markdown_table(plan("lambda_p=0.2,0.5"), [t0, t1]).splitlines()
    assert lines[0] == ("| trial | lambda_p | seed | status | test accuracy | mean steps | E[n] | learned − confidence | "
                        "E[n] − settle | steps | train s | reason |")
    # 0.75 -> 0.7500, 2.5 -> 2.50, 2.625 -> "2.62" (Python rounds the float 2.625 half to even), 1.25 s -> 1.2,
    # -0.0025 -> -0.0025 with its sign, 1.5 -> 1.50
    assert lines[2] == "| lambda_p0.2-seed0 | 0.2 | 0 | completed | 0.7500 | 2.50 | 2.62 | -0.0025 | 1.50 | 10 | 1.2 |  |"
    # no metrics: "-"; a "|" in the reason would end the cell, so it is written "/"
    assert lines[3] == "| lambda_p0.5-seed0 | 0.5 | 0 | failed | - | - | - | - | - | 0 | 0.0 | loss became inf / at step 1 |"
