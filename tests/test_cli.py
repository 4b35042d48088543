"""The command line, run as a user would: python -m ponder ..."""
import json
import subprocess
import sys

import pytest

from conftest import DATA_DIR, ROOT


def ponder(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "ponder", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.parametrize("cmd", [[], ["train"], ["evaluate"], ["reproduce"]])
def test_help(cmd):
    r = ponder(*cmd, "--help")
    assert r.returncode == 0 and "usage" in r.stdout


@pytest.mark.parametrize("args,needle", [
    (["train", "--out", "x", "--lambda-p", "1.5"], "lambda_p"),
    (["train", "--out", "x", "--lambda-p", "0"], "lambda_p"),
    (["train", "--out", "x", "--max-steps", "0"], "max_steps"),
    (["train", "--out", "x", "--task", "cifar"], "task"),
    (["train", "--out", "x", "--beta", "-1"], "beta"),
    (["train", "--out", "x", "--max-steps", "abc"], "max-steps"),
    (["evaluate", "does/not/exist"], "does/not/exist"),
    (["evaluate", "x", "--rotations", "a,b"], "rotations"),
])
def test_bad_arguments_one_line(args, needle):
    r = ponder(*args)
    assert r.returncode != 0
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_train_then_evaluate_json(tmp_path):
    run = tmp_path / "par"
    r = ponder("train", "--task", "parity", "--out", str(run), "--epochs", "1", "--steps-per-epoch", "30",
               "--hidden", "16", "--max-steps", "6", "--device", "cpu", "--quiet")
    assert r.returncode == 0, r.stderr
    assert "completed" in r.stdout and (run / "model.safetensors").exists()
    r = ponder("evaluate", str(run), "--json", "--limit", "500")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    for key in ("accuracy", "mean_steps", "per_step_accuracy", "halting_distribution", "rotations"):
        assert key in res
    assert len(res["per_step_accuracy"]) == 6 and res["n"] == 500


def test_mnist_evaluate_rotations_json(tmp_path):
    run = tmp_path / "mn"
    r = ponder("train", "--out", str(run), "--data-dir", DATA_DIR, "--max-seconds", "3", "--max-steps", "5",
               "--device", "cpu", "--no-eval", "--quiet")
    assert r.returncode == 0, r.stderr
    assert "time budget" in r.stdout
    r = ponder("evaluate", str(run), "--data-dir", DATA_DIR, "--json", "--limit", "300",
               "--rotations", "0,45", "--uniform", "22.5", "--mode", "deterministic")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert [row["angle"] for row in res["rotations"]] == [0.0, 45.0]
    assert all({"angle", "accuracy", "mean_steps"} <= set(row) for row in res["rotations"])
    assert res["uniform_rotations"][0]["angle"] == 22.5
    r = ponder("evaluate", str(run), "--data-dir", DATA_DIR, "--limit", "300")
    assert r.returncode == 0 and "accuracy" in r.stdout
