"""ponder/cli/main.py: python -m ponder train as a user runs it: one-line errors, Ctrl-C, a save that fails, a diverging
run, a folder that holds a run or another training; and reproduce's --only. (evaluate, sweep and the flags:
test_evaluate.py, test_sweep.py, test_args.py)"""
import errno
import os
import signal
import subprocess
import sys
import tempfile

import pytest
import torch

from helpers import ROOT, assert_one_line_error, run_cli, save_tiny_run
from ponder import files as A, journal as J
from ponder.files import SaveError
from ponder.store.checkpoint import load_checkpoint
from ponder.cli.main import main


@pytest.mark.long
def test_python_m_ponder_help_as_a_process():
    r = subprocess.run([sys.executable, "-m", "ponder", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "usage" in r.stdout and "train" in r.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cli_cuda_without_gpu_one_line(tmp_path, capsys):
    rc, _, err = run_cli(["train", "--task", "parity", "--out", str(tmp_path / "o"), "--device", "cuda", "--quiet"], capsys)
    assert_one_line_error(rc, err, "cuda")


def test_cli_multiline_errors_are_joined(capsys, monkeypatch):
    """An error whose text spans lines (e.g. a DataError listing mirrors) is printed on one line."""
    import ponder.cli.main as cli
    from ponder.data import DataError

    def boom(args):
        raise DataError("could not get MNIST:\nTried a, got:\n  <error>\nTried b")
    monkeypatch.setattr(cli, "cmd_evaluate", boom)
    rc, _, err = run_cli(["evaluate", "x"], capsys)
    assert_one_line_error(rc, err, "Tried b")


TRAIN = ["train", "--task", "parity", "--epochs", "1", "--steps-per-epoch", "8", "--hidden", "16", "--max-steps", "4",
         "--batch-size", "16", "--device", "cpu", "--quiet", "--no-eval"]


def _under_a_file(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a regular file")
    return blocker / "runs"


def test_cli_unwritable_out_fails_before_training(tmp_path, capsys, monkeypatch):
    from ponder.training import lifecycle
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
    monkeypatch.setattr(J, "write_tmp", full_under_out)     # the run's files are written by the journal
    rc = main([*TRAIN, "--out", str(out)])
    stdout, err = capsys.readouterr()
    assert rc == 4, (stdout, err)
    assert len(err.strip().splitlines()) == 1 and "No space left on device" in err and "instead" in err
    rescue = [p for p in tmp_path.iterdir() if p.name.startswith("ponder-unsaved-")]
    assert len(rescue) == 1 and str(rescue[0]) in err
    ck = load_checkpoint(rescue[0])
    assert ck.record.status == "completed" and ck.record.steps == 8
    assert not out.exists()                               # no empty run folder left where the save failed


def test_cli_both_saves_fail_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(J, "write_tmp", lambda path, data: (_ for _ in ()).throw(
        SaveError(path, OSError(errno.ENOSPC, "No space left on device"))))
    rc = main([*TRAIN, "--out", str(tmp_path / "out")])
    _, err = capsys.readouterr()
    assert rc == 4 and len(err.strip().splitlines()) == 1 and "failed too" in err


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_cli_ctrl_c_cancels_and_saves(tmp_path, capsys, monkeypatch):
    """First Ctrl-C: stop after the step and save as cancelled (the model is not lost)."""
    before = signal.getsignal(signal.SIGINT)
    from ponder.training import lifecycle
    real = lifecycle.train

    def train_with_ctrl_c(cfg, data=None, callback=None, cancel=None, **kw):
        def cb(p):
            if p.step == 10:                       # progress is reported every 10 steps
                os.kill(os.getpid(), signal.SIGINT)
        return real(cfg, data=data, callback=cb, cancel=cancel, **kw)
    monkeypatch.setattr(lifecycle, "train", train_with_ctrl_c)
    out = tmp_path / "out"
    rc = main([*TRAIN, "--out", str(out), "--steps-per-epoch", "1000"])
    stdout, err = capsys.readouterr()
    assert rc == 0 and stdout.startswith("cancelled"), (stdout, err)
    ck = load_checkpoint(out)
    assert ck.record.status == "cancelled" and 10 <= ck.record.steps <= 11
    assert signal.getsignal(signal.SIGINT) is before                  # the handler is put back


def test_cli_second_ctrl_c_aborts_without_leaving_an_empty_folder(tmp_path, capsys, monkeypatch):
    from ponder.training import lifecycle
    real = lifecycle.train

    def train_ctrl_c_twice(cfg, data=None, callback=None, cancel=None, **kw):
        def cb(p):
            if p.step in (10, 20):
                os.kill(os.getpid(), signal.SIGINT)
        return real(cfg, data=data, callback=cb, cancel=None, **kw)     # ignores the cancel flag
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
    assert ck.record.status == "failed" and "at step" in ck.record.reason
    assert all(torch.isfinite(p).all() for p in ck.model.parameters())


def _run_with_metrics(folder):
    run, _ = save_tiny_run(folder, max_steps=4, metrics={"test": {"accuracy": 0.9941, "n": 10000}})
    return run


def test_cli_train_refuses_a_folder_that_holds_a_run(tmp_path, capsys, monkeypatch):
    from ponder.training import lifecycle
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
    assert ck.record.steps == 8 and ck.record.metrics == {}, ck.record.metrics


def test_cli_train_refuses_an_empty_out(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, _, err = run_cli([*TRAIN, "--out", ""], capsys)
    assert_one_line_error(rc, err, "--out")
    assert list(tmp_path.iterdir()) == []


def test_cli_train_into_a_folder_another_training_holds_is_refused(tmp_path, capsys, monkeypatch):
    from ponder.training import lifecycle
    called = []
    monkeypatch.setattr(lifecycle, "train", lambda *a, **k: called.append(1))
    out = tmp_path / "busy"
    out.mkdir()
    with A.folder_lock(out):                          # what a first training holds from its start to its card
        rc, _, err = run_cli([*TRAIN, "--out", str(out)], capsys)
    assert_one_line_error(rc, err, "another training")
    assert not called and list(out.iterdir()) == []


@pytest.mark.parametrize("only", ["nope", ",", "../../etc", "mnist-default,nope"])
def test_cli_reproduce_only_names_the_unknown_models_and_fails(tmp_path, capsys, only):
    # it exited 0 with an empty results file; now one line naming what is unknown, before any work
    rc, _, err = run_cli(["reproduce", "--from-assets", "--only", only, "--out", str(tmp_path / "res")], capsys)
    assert_one_line_error(rc, err, "--only")
    assert ("no name given" if only == "," else "nope" if "nope" in only else "etc") in err
    assert not (tmp_path / "res" / "results.json").exists()


def test_train_threads_follow_the_flag_then_omp_num_threads_then_the_free_cores(monkeypatch, capsys):
    import ponder.cli.main as cli
    from ponder.training import progress
    assert cli.train_threads(3, environ={}) == (3, "--threads")
    assert cli.train_threads(None, environ={"OMP_NUM_THREADS": "1"}) == (progress.PROCESS_THREADS, "$OMP_NUM_THREADS")
    monkeypatch.setattr(progress, "machine_cores_and_load", lambda: (2, 1.3))      # one core busy elsewhere
    assert cli.train_threads(None, environ={}) == (1, "2 cores, load average 1.3")
    monkeypatch.setattr(progress, "machine_cores_and_load", lambda: (2, 0.2))
    assert cli.train_threads(None, environ={"OMP_NUM_THREADS": " "})[0] == 2
    assert cli.build_parser().parse_args(["train", "--out", "x"]).threads is None
    rc, _, err = run_cli(["train", "--out", "x", "--threads", "0"], capsys)
    assert rc == 2 and "--threads" in err


def test_train_without_choices_trains_the_pondering_mnist_design():
    from ponder.cli.main import build_parser, config_from_args
    from ponder.tasks import build_model, model_config
    from ponder.tasks.mnist.readers import MnistStep, RowReader
    cfg = config_from_args(build_parser().parse_args(["train", "--out", "x"]))
    assert cfg.task == "mnist" and cfg.reader == "rows" and cfg.lambda_p == 0.5
    assert isinstance(build_model("mnist", model_config(cfg), 20, cfg.lambda_p).step_fn, RowReader)
    cnn = config_from_args(build_parser().parse_args(["train", "--out", "x", "--reader", "cnn", "--lambda-p", "0.2"]))
    assert isinstance(build_model("mnist", model_config(cnn), 20, cnn.lambda_p).step_fn, MnistStep)
    parity = config_from_args(build_parser().parse_args(["train", "--out", "x", "--task", "parity"]))
    assert parity.lambda_p == 0.2                                # the other tasks keep TrainConfig's prior


@pytest.mark.parametrize("encoding", ["ascii", "latin-1", "cp437"])
def test_evaluate_prints_on_a_terminal_of_any_encoding(tmp_path, monkeypatch, encoding):
    """evaluate's last line holds '−' (and study's tables '±'): a UnicodeEncodeError traceback on a non-UTF-8
    terminal, once the measurement was done. Such characters are written in words, anything else escaped."""
    import io
    run, _ = save_tiny_run(tmp_path / "run")
    out, err = (io.TextIOWrapper(io.BytesIO(), encoding=encoding) for _ in range(2))
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    assert main(["evaluate", str(run), "--limit", "64"]) == 0
    out.flush()
    text = out.buffer.getvalue().decode(encoding)
    assert "at equal steps: " in text and "\u2212" not in text and "Traceback" not in text
    print("λp ± 0.1 − 日本", file=out)          # what is not in words is escaped, never an error
    out.flush()
    plus = "\u00b1" if "\u00b1".encode(encoding, "ignore") else "+/-"      # latin-1 and cp437 have it
    assert out.buffer.getvalue().decode(encoding).endswith(f"lambdap {plus} 0.1 - \\u65e5\\u672c\n")


def test_a_utf8_terminal_is_left_as_it_is():
    import io
    from ponder.cli.main import any_terminal
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    any_terminal([out])
    assert out.errors == "strict"
