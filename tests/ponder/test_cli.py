"""ponder/cli.py: python -m ponder {train, evaluate, reproduce} as a user runs it: results, the JSON
output, one-line errors for bad values and bad files, Ctrl-C, a save that fails, a diverging run."""
import errno
import json
import os
import signal
import subprocess
import sys
import tempfile

import pytest
import torch

from helpers import DATA_DIR, ROOT, assert_one_line_error, needs_mnist, run_cli, save_tiny_run
from ponder.store import atomic as A
from ponder.store.atomic import SaveError
from ponder.store.checkpoint import load_checkpoint
from ponder.cli import main


def test_python_m_ponder_help_as_a_process():
    r = subprocess.run([sys.executable, "-m", "ponder", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "usage" in r.stdout and "train" in r.stdout


@pytest.mark.parametrize("cmd", [["train"], ["evaluate"], ["reproduce"], ["sweep"]])
def test_help(cmd, capsys):
    rc, out, _ = run_cli([*cmd, "--help"], capsys)
    assert rc == 0 and out.startswith("usage: python -m ponder " + cmd[0])


PARITY = ["--task", "parity", "--epochs", "1", "--steps-per-epoch", "30", "--hidden", "16", "--max-steps", "6",
          "--device", "cpu", "--quiet"]


def test_train_then_evaluate_json_and_text(tmp_path, capsys):
    run = tmp_path / "par"
    rc, out, err = run_cli(["train", "--out", str(run), *PARITY], capsys)
    assert rc == 0, err
    assert out.startswith("completed: 30 steps in ") and "test accuracy" in out and (run / "model.safetensors").exists()
    assert out.strip().endswith(f"saved {run}")
    rc, out, err = run_cli(["evaluate", str(run), "--json", "--limit", "500"], capsys)
    assert rc == 0, err
    res = json.loads(out)
    for key in ("accuracy", "mean_steps", "per_step_accuracy", "halting_distribution", "rotations", "easy", "hard"):
        assert key in res
    assert len(res["per_step_accuracy"]) == 6 and res["n"] == 500 and res["run"] == str(run)
    b = res["baselines"]                     # the three halting policies, with the names the docs use
    assert [r["steps"] for r in b["fixed_depth"]] == list(range(1, 7))
    assert [r["accuracy"] for r in b["fixed_depth"]] == pytest.approx(res["per_step_accuracy"])
    assert len(b["confidence_exit"]) >= 5 and {"threshold", "mean_steps", "accuracy"} == set(b["confidence_exit"][0])
    assert {"mean_steps", "learned", "fixed_depth", "confidence_exit"} <= set(b["at_equal_steps"])
    assert b["at_equal_steps"]["mean_steps"] == pytest.approx(res["expected_steps"]["mean"])
    assert {"mean_settle_step", "mean_expected_minus_settle", "never_settled"} <= set(res["settle"])
    groups = res["per_step_accuracy_by_group"]
    assert {"easy", "hard", "k=1"} <= set(groups) and all(len(v) == 6 for v in groups.values())
    rc, out, _ = run_cli(["evaluate", str(run), "--limit", "500"], capsys)
    assert rc == 0 and "halting step mean" in out and "easy (k in [1, 4])" in out
    at = b["at_equal_steps"]                 # one line per policy
    assert f"learned halting:  accuracy {at['learned']:.4f}" in out
    assert f"fixed depth:      accuracy {at['fixed_depth']:.4f}" in out
    assert f"confidence exit:  accuracy {at['confidence_exit']:.4f}" in out


def test_expected_mode_says_all_steps_run_and_labels_e_n(tmp_path, capsys):
    run, _ = save_tiny_run(tmp_path / "r", max_steps=5)
    rc, out, _ = run_cli(["evaluate", str(run), "--limit", "300", "--mode", "expected"], capsys)
    res = json.loads(run_cli(["evaluate", str(run), "--limit", "300", "--mode", "expected", "--json"], capsys)[1])
    assert rc == 0 and "steps run: 5 (all)" in out and "expected steps E[n]" in out and "halting step" not in out
    # E[n] is a real number: its median keeps two decimals
    assert f"median {res['median_steps']:.2f}" in out and f"mean {res['mean_steps']:.2f}" in out
    assert "easy (k in [1, 4]): accuracy" in out and "E[n]" in out.split("easy")[1]


@needs_mnist
def test_mnist_evaluate_rotations_json(tmp_path, capsys):
    run = tmp_path / "mn"
    rc, out, err = run_cli(["train", "--out", str(run), "--data-dir", DATA_DIR, "--max-seconds", "1", "--max-steps", "5",
                            "--device", "cpu", "--no-eval", "--quiet"], capsys)
    assert rc == 0, err
    assert "time budget" in out and "test accuracy" not in out
    rc, out, err = run_cli(["evaluate", str(run), "--data-dir", DATA_DIR, "--json", "--limit", "300",
                            "--rotations", "0,45", "--uniform", "22.5", "--mode", "deterministic"], capsys)
    assert rc == 0, err
    res = json.loads(out)
    assert [row["angle"] for row in res["rotations"]] == [0.0, 45.0]
    assert all({"angle", "accuracy", "mean_steps"} <= set(row) for row in res["rotations"])
    assert res["rotations"][0]["accuracy"] == res["accuracy"]            # 0 deg is the unrotated test set
    assert res["uniform_rotations"][0]["angle"] == 22.5 and res["uniform_rotations"][0]["kind"] == "uniform"
    groups = res["per_step_accuracy_by_group"]           # by E[n] quartile, digit and the rotations asked for
    assert {"E[n] Q1", "E[n] Q4", "rotation 0°", "rotation 45°", "rotation ±22.5°"} <= set(groups)
    assert groups["rotation 0°"] == pytest.approx(res["per_step_accuracy"])
    rc, out, _ = run_cli(["evaluate", str(run), "--data-dir", DATA_DIR, "--limit", "300", "--rotations", "90"], capsys)
    assert rc == 0 and "accuracy" in out and "rotation         90 deg: accuracy" in out


# ----------------------------------------------------------------------------- bad values: one line


# one bad value per flag (the validator's ranges are tested in test_config.py), and values argparse refuses
TRAIN_BAD = [
    (["--lambda-p", "1.5"], "lambda_p"), (["--lambda-p", "nan"], "lambda_p"), (["--lambda-p", "x"], "lambda-p"),
    (["--beta", "-1"], "beta"), (["--max-steps", "201"], "max_steps"), (["--max-steps", "1.5"], "max-steps"),
    (["--hidden", "0"], "hidden"), (["--batch-size", "0"], "batch_size"), (["--lr", "2"], "lr"),
    (["--rotate-train", "181"], "rotate_train"), (["--epochs", "inf"], "epochs"), (["--max-seconds", "0"], "max_seconds"),
    (["--task", "cifar"], "task"), (["--device", "tpu"], "device"), (["--parity-preset", "giant"], "parity_preset"),
    (["--lr-schedule", "cosine"], "lr_schedule"), (["--steps-per-epoch", "0"], "steps_per_epoch"),
    (["--seed", str(2 ** 70)], "seed"), (["--seed", "abc"], "seed"),
]


@pytest.mark.parametrize("args,needle", TRAIN_BAD, ids=[" ".join(a) for a, _ in TRAIN_BAD])
def test_cli_train_bad_values_one_line(tmp_path, capsys, args, needle):
    out = tmp_path / "out"
    rc, _, err = run_cli(["train", "--task", "parity", "--out", str(out), "--quiet", *args], capsys)
    assert_one_line_error(rc, err, needle)
    assert not out.exists(), "a refused config still created the run folder"


EVAL_BAD = [
    (["--limit", "0"], "limit"), (["--limit", "abc"], "limit"), (["--rotations", "nan"], "rotations"),
    (["--rotations", "a,b"], "rotations"), (["--rotations", "1e9"], "rotations"), (["--uniform", "200"], "uniform"),
    (["--device", "tpu"], "device"), (["--seed", str(2 ** 70)], "seed"), (["--mode", "bogus"], "mode"),
    # parity draws --limit problems: 10**13 asked for an 80 TB tensor, 3 * 10**8 held 20 GB for a minute
    (["--limit", "10000000000000"], "at most 1,000,000 test items"), (["--limit", "300000000"], "limit"),
]


@pytest.mark.parametrize("args,needle", EVAL_BAD, ids=[" ".join(a) for a, _ in EVAL_BAD])
def test_cli_evaluate_bad_values_one_line(tmp_path, capsys, args, needle):
    run, _ = save_tiny_run(tmp_path / "run")
    rc, _, err = run_cli(["evaluate", str(run), *args], capsys)
    assert_one_line_error(rc, err, needle)


@pytest.mark.parametrize("damage", ["pickle", "missing", "card-garbage", "not-a-folder", "nul", "no-such-folder"])
def test_cli_evaluate_bad_checkpoint_one_line(tmp_path, capsys, damage):
    import pickle
    run, _ = save_tiny_run(tmp_path / "run")
    target = str(run)
    if damage == "pickle":
        (run / "model.safetensors").write_bytes(pickle.dumps({"a": 1}))
    elif damage == "missing":
        (run / "model.safetensors").unlink()
    elif damage == "card-garbage":
        (run / "run.json").write_text('{"format": "ponder-run", "task": [1]}')
    elif damage == "not-a-folder":
        target = str(run / "metrics.jsonl")
    elif damage == "nul":
        target = str(run) + "\x00x"
    elif damage == "no-such-folder":
        target = str(tmp_path / "does" / "not" / "exist")
    rc, _, err = run_cli(["evaluate", target, "--limit", "10"], capsys)
    needle = {"pickle": "pickle", "missing": "model.safetensors: missing", "card-garbage": "run.json: bad config",
              "not-a-folder": "not a run folder", "nul": "no such run folder", "no-such-folder": "no such run folder"}
    assert_one_line_error(rc, err, needle[damage])


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cli_cuda_without_gpu_one_line(tmp_path, capsys):
    rc, _, err = run_cli(["train", "--task", "parity", "--out", str(tmp_path / "o"), "--device", "cuda", "--quiet"], capsys)
    assert_one_line_error(rc, err, "cuda")


def test_cli_multiline_errors_are_joined(capsys, monkeypatch):
    """An error whose text spans lines (e.g. a DataError listing mirrors) is printed on one line."""
    from ponder import cli
    from ponder.data import DataError

    def boom(args):
        raise DataError("could not get MNIST:\nTried a, got:\n  <error>\nTried b")
    monkeypatch.setattr(cli, "cmd_evaluate", boom)
    rc, _, err = run_cli(["evaluate", "x"], capsys)
    assert_one_line_error(rc, err, "Tried b")


# ----------------------------------------------------------------------------- the CLI keeps the model


TRAIN = ["train", "--task", "parity", "--epochs", "1", "--steps-per-epoch", "8", "--hidden", "16", "--max-steps", "4",
         "--batch-size", "16", "--device", "cpu", "--quiet", "--no-eval"]


def _under_a_file(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a regular file")
    return blocker / "runs"


def test_cli_unwritable_out_fails_before_training(tmp_path, capsys, monkeypatch):
    from ponder import lifecycle
    called = []
    monkeypatch.setattr(lifecycle, "train", lambda *a, **k: called.append(1))
    rc = main([*TRAIN, "--out", str(_under_a_file(tmp_path) / "r")])
    _, err = capsys.readouterr()
    assert rc == 1 and not called
    assert err.startswith("ponder: error:") and len(err.strip().splitlines()) == 1 and "not-a-folder" in err


def test_cli_save_fails_after_training_rescues_the_model(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    real = A.write_tmp

    def full_under_out(path, data):
        if str(out) in str(path):
            raise SaveError(path, OSError(errno.ENOSPC, "No space left on device"))
        return real(path, data)
    monkeypatch.setattr(A, "write_tmp", full_under_out)
    rc = main([*TRAIN, "--out", str(out)])
    stdout, err = capsys.readouterr()
    assert rc == 4, (stdout, err)
    assert len(err.strip().splitlines()) == 1 and "No space left on device" in err and "instead" in err
    rescue = [p for p in tmp_path.iterdir() if p.name.startswith("ponder-unsaved-")]
    assert len(rescue) == 1 and str(rescue[0]) in err
    ck = load_checkpoint(rescue[0])
    assert ck.card["status"] == "completed" and ck.card["steps"] == 8
    assert not out.exists()                               # no empty run folder left where the save failed


def test_cli_both_saves_fail_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(A, "write_tmp", lambda path, data: (_ for _ in ()).throw(
        SaveError(path, OSError(errno.ENOSPC, "No space left on device"))))
    rc = main([*TRAIN, "--out", str(tmp_path / "out")])
    _, err = capsys.readouterr()
    assert rc == 4 and len(err.strip().splitlines()) == 1 and "failed too" in err


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_cli_ctrl_c_cancels_and_saves(tmp_path, capsys, monkeypatch):
    """First Ctrl-C: stop after the step and save as cancelled (the model is not lost)."""
    before = signal.getsignal(signal.SIGINT)
    from ponder import lifecycle
    real = lifecycle.train

    def train_with_ctrl_c(cfg, mnist=None, callback=None, cancel=None, **kw):
        def cb(p):
            if p.step == 10:                       # progress is reported every 10 steps
                os.kill(os.getpid(), signal.SIGINT)
        return real(cfg, mnist=mnist, callback=cb, cancel=cancel, **kw)
    monkeypatch.setattr(lifecycle, "train", train_with_ctrl_c)
    out = tmp_path / "out"
    rc = main([*TRAIN, "--out", str(out), "--steps-per-epoch", "1000"])
    stdout, err = capsys.readouterr()
    assert rc == 0 and stdout.startswith("cancelled"), (stdout, err)
    ck = load_checkpoint(out)
    assert ck.card["status"] == "cancelled" and 10 <= ck.card["steps"] <= 11
    assert signal.getsignal(signal.SIGINT) is before                  # the handler is put back


def test_cli_second_ctrl_c_aborts_without_leaving_an_empty_folder(tmp_path, capsys, monkeypatch):
    from ponder import lifecycle
    real = lifecycle.train

    def train_ctrl_c_twice(cfg, mnist=None, callback=None, cancel=None, **kw):
        def cb(p):
            if p.step in (10, 20):
                os.kill(os.getpid(), signal.SIGINT)
        return real(cfg, mnist=mnist, callback=cb, cancel=None, **kw)     # ignores the cancel flag
    monkeypatch.setattr(lifecycle, "train", train_ctrl_c_twice)
    out = tmp_path / "out"
    rc = main([*TRAIN, "--out", str(out), "--steps-per-epoch", "1000"])
    capsys.readouterr()
    assert rc == 130 and not out.exists()


def test_cli_diverging_run_exits_3_and_keeps_the_failed_run(tmp_path, capsys):
    out = tmp_path / "div"
    rc = main(["train", "--task", "parity", "--out", str(out), "--epochs", "1", "--steps-per-epoch", "30",
               "--hidden", "16", "--max-steps", "6", "--batch-size", "32", "--lambda-p", "0.9", "--lr", "1.0",
               "--beta", "1e20", "--lr-schedule", "constant", "--device", "cpu", "--quiet", "--no-eval"])
    stdout, err = capsys.readouterr()
    assert rc == 3, (stdout, err)
    assert stdout.startswith("failed:") and "at step" in stdout and "Traceback" not in err
    ck = load_checkpoint(out)
    assert ck.card["status"] == "failed" and "at step" in ck.card["reason"]
    assert all(torch.isfinite(p).all() for p in ck.model.parameters())


SWEEP = ["sweep", "--task", "parity", "--grid", "lambda_p=0.2,0.5", "--seeds", "0", "--hidden", "16", "--batch-size",
         "32", "--max-steps", "5", "--epochs", "1", "--steps-per-epoch", "10", "--device", "cpu"]


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
    assert load_checkpoint(out / "lambda_p0.2-seed0").card["metrics"]["test"]["n"] == 10000   # as train measures
    rc, stdout, err = run_cli([*SWEEP, "--out", str(out)], capsys)
    assert rc == 0 and "[1/2]" not in stdout and "2 completed (2 in an earlier run, skipped)" in stdout, err


def test_cli_sweep_with_a_diverging_trial_exits_3_and_records_it(tmp_path, capsys):
    out = tmp_path / "sw"
    rc, stdout, err = run_cli([*SWEEP, "--grid", "beta=0.01,1e38", "--lr", "1.0", "--out", str(out)], capsys)
    assert rc == 3, err
    info = json.loads((out / "sweep.json").read_text())
    assert [t["status"] for t in info["trials"]] == ["completed", "failed", "completed", "failed"]
    assert "2 completed (0 in an earlier run, skipped), 2 failed" in stdout
    assert load_checkpoint(out / "lambda_p0.5-beta1e38-seed0").card["status"] == "failed"


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


def _run_with_metrics(folder):
    run, _ = save_tiny_run(folder, max_steps=4, metrics={"test": {"accuracy": 0.9941, "n": 10000}})
    return run


def test_cli_train_refuses_a_folder_that_holds_a_run(tmp_path, capsys, monkeypatch):
    from ponder import lifecycle
    called = []
    monkeypatch.setattr(lifecycle, "train", lambda *a, **k: called.append(1))
    run = _run_with_metrics(tmp_path / "existing")
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    rc, _, err = run_cli([*TRAIN, "--out", str(run)], capsys)
    assert_one_line_error(rc, err, "--overwrite")
    assert not called and {p.name: p.read_bytes() for p in run.iterdir()} == before


def test_cli_overwrite_replaces_the_run_and_drops_the_old_metrics(tmp_path, capsys):
    run = _run_with_metrics(tmp_path / "existing")
    rc, out, err = run_cli([*TRAIN, "--out", str(run), "--overwrite"], capsys)     # --no-eval: no new metrics
    assert rc == 0, err
    ck = load_checkpoint(run)
    assert ck.card["steps"] == 8 and ck.card["metrics"] == {}, ck.card["metrics"]


def test_cli_train_refuses_an_empty_out(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, _, err = run_cli([*TRAIN, "--out", ""], capsys)
    assert_one_line_error(rc, err, "--out")
    assert list(tmp_path.iterdir()) == []


def test_cli_train_into_a_folder_another_training_holds_is_refused(tmp_path, capsys, monkeypatch):
    from ponder import lifecycle
    called = []
    monkeypatch.setattr(lifecycle, "train", lambda *a, **k: called.append(1))
    out = tmp_path / "busy"
    out.mkdir()
    with A.folder_lock(out):                          # what a first training holds from its start to its card
        rc, _, err = run_cli([*TRAIN, "--out", str(out)], capsys)
    assert_one_line_error(rc, err, "another training")
    assert not called and list(out.iterdir()) == []


def test_cli_evaluate_json_is_strict_json(tmp_path, capsys, monkeypatch):
    """NaN / inf in a result are written as null: strict parsers (and json.loads without extensions) read it."""
    from ponder.analysis import unroll as E
    run, _ = save_tiny_run(tmp_path / "r", max_steps=5)
    real = E.measure_test

    def with_nan(*a, **kw):
        res = real(*a, **kw)
        res["accuracy"], res["expected_steps"]["std"] = float("nan"), float("inf")
        return res
    monkeypatch.setattr(E, "measure_test", with_nan)
    rc, out, err = run_cli(["evaluate", str(run), "--json", "--limit", "200"], capsys)
    assert rc == 0, err

    def refuse(token):
        raise ValueError(f"not JSON: {token}")
    res = json.loads(out, parse_constant=refuse)
    assert res["accuracy"] is None and res["expected_steps"]["std"] is None


def _edit_card(run, edit):
    card = json.loads((run / "run.json").read_text())
    edit(card)
    (run / "run.json").write_text(json.dumps(card))


@pytest.mark.parametrize("edit", [lambda c: c.pop("train"), lambda c: c.update(train=[1]),
                                  lambda c: c["train"].update(task="mnist")],
                         ids=["no-train", "train-list", "train-task-differs"])
def test_cli_evaluate_a_card_without_a_usable_train_block_fails_in_one_line(tmp_path, capsys, edit):
    run, _ = save_tiny_run(tmp_path / "r", max_steps=5)
    _edit_card(run, edit)
    rc, _, err = run_cli(["evaluate", str(run), "--limit", "100"], capsys)
    assert_one_line_error(rc, err, "run.json")


def test_cli_evaluate_a_parity_card_whose_preset_does_not_fit_the_model(tmp_path, capsys):
    run, _ = save_tiny_run(tmp_path / "r", max_steps=5)                 # n_elems 8
    _edit_card(run, lambda c: c["train"].update(parity_preset="medium"))  # n = 16
    rc, out, err = run_cli(["evaluate", str(run), "--json", "--limit", "200"], capsys)
    assert rc == 0, err
    res = json.loads(out)
    assert res["n"] == 200 and res["easy"]["k_range"][0] == 1 and res["hard"]["k_range"][1] == 8


@pytest.mark.parametrize("only", ["nope", ",", "../../etc", "mnist-default,nope"])
def test_cli_reproduce_only_names_the_unknown_models_and_fails(tmp_path, capsys, only):
    # it exited 0 with an empty results file; now one line naming what is unknown, before any work
    rc, _, err = run_cli(["reproduce", "--from-assets", "--only", only, "--out", str(tmp_path / "res")], capsys)
    assert_one_line_error(rc, err, "--only")
    assert ("no name given" if only == "," else "nope" if "nope" in only else "etc") in err
    assert not (tmp_path / "res" / "results.json").exists()
