"""ponder/cli/sweep.py: python -m ponder sweep trains each trial, resumes, records a diverging trial, and refuses
bad grids and seeds in one line."""
import json

import pytest

from helpers import assert_one_line_error, run_cli
from ponder.store.checkpoint import load_checkpoint


SWEEP = ["sweep", "--task", "parity", "--grid", "lambda_p=0.2,0.5", "--seeds", "0", "--hidden", "16", "--batch-size",
         "32", "--max-steps", "5", "--epochs", "1", "--steps-per-epoch", "10", "--device", "cpu"]


@pytest.mark.long
def test_cli_sweep_trains_each_trial_then_resumes(tmp_path, capsys):
    out = tmp_path / "sw"
    rc, stdout, err = run_cli([*SWEEP, "--out", str(out)], capsys)
    assert rc == 0, err
    lines = stdout.splitlines()
    assert lines[0] == f"sweep: 2 trials (2 lambda_p x 1 seed(s)) on local, into {out}"
    assert lines[1].startswith("[1/2] lambda_p0.2-seed0: completed, 10 steps in ") and "test accuracy" in lines[1]
    assert "| lambda_p0.5-seed0 | 0.5 | 0 | completed |" in stdout
    assert lines[-1].startswith("2 completed (0 in an earlier run, skipped), 0 failed, 0 not finished")
    info = json.loads((out / "sweep.json").read_text())
    assert [t["status"] for t in info["trials"]] == ["completed", "completed"]
    assert info["trials"][1]["config"]["lambda_p"] == 0.5 and info["trials"][1]["config"]["hidden"] == 16
    assert load_checkpoint(out / "lambda_p0.2-seed0").record.metrics["test"]["n"] == 10000   # as train measures
    rc, stdout, err = run_cli([*SWEEP, "--out", str(out)], capsys)
    assert rc == 0 and "[1/2]" not in stdout and "2 completed (2 in an earlier run, skipped)" in stdout, err


@pytest.mark.long
def test_cli_sweep_with_a_diverging_trial_exits_3_and_records_it(tmp_path, capsys):
    out = tmp_path / "sw"
    rc, stdout, err = run_cli([*SWEEP, "--grid", "beta=0.01,1e38", "--lr", "1.0", "--out", str(out)], capsys)
    assert rc == 3, err
    info = json.loads((out / "sweep.json").read_text())
    assert [t["status"] for t in info["trials"]] == ["completed", "failed", "completed", "failed"]
    assert "2 completed (0 in an earlier run, skipped), 2 failed" in stdout
    assert load_checkpoint(out / "lambda_p0.5-beta1e38-seed0").record.status == "failed"


@pytest.mark.parametrize("args, needle", [
    (["--grid", "lambda_p=0.2,x"], "--grid lambda_p: expected a number, got 'x'"),
    (["--grid", "lamda_p=0.2"], "--grid lamda_p: not a training config field"),
    (["--grid", "lambda_p=0.5,2"], "trial lambda_p2-seed0: lambda_p must be (0, 1], got 2.0"),
    (["--seeds", "0,a"], "--seeds expects comma-separated whole numbers"),
    (["--seed", "3"], "sweep takes its seeds from --seeds"),
    (["--backend", "slurm"], "invalid choice: 'slurm'"),
    (["--cpus-per-trial", "0"], "cpus per trial must be > 0"),
])
def test_cli_sweep_bad_values_one_line(tmp_path, capsys, args, needle):
    rc, _, err = run_cli(["sweep", "--task", "parity", "--out", str(tmp_path / "sw"), *args], capsys)
    assert_one_line_error(rc, err, needle)
    assert not (tmp_path / "sw" / "sweep.json").exists()
