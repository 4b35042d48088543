"""Issue 6, hyperparameters: every config is validated in the core with a message naming the field
and the allowed range; the CLI prints that message on one line instead of a traceback.

Every parametrized bad value below is one bad input; all must be handled cleanly.
"""

import pytest
import torch

from ponder.cli import main
from ponder.config import ConfigError, TrainConfig, model_config_from_dict
from ponder.train import train

NAN, INF = float("nan"), float("inf")
JUNK = [None, "x", "", [], {}, (1,), object(), b"1"]          # wrong types for any numeric field

# field -> (bad values, the allowed range the message must show)
BAD = {
    "task": (["cifar", "", "MNIST", None, 1, ["mnist"], {"mnist": 1}], "one of mnist, parity"),
    "lambda_p": ([0, 0.0, -0.1, 1.0000001, 2, NAN, INF, -INF, True, "0.2", 10 ** 400, -10 ** 400] + JUNK, "(0, 1]"),
    "beta": ([-1e-9, -1, NAN, INF, -INF, True, "0.01", 10 ** 400] + JUNK, ">= 0"),
    "max_steps": ([0, -1, 201, 10 ** 6, 5.0, 5.5, NAN, INF, True, False, "20", 10 ** 400] + JUNK, "an integer in [1, 200]"),
    "hidden": ([0, -16, 4097, 64.0, True, "64", 10 ** 400] + JUNK, "an integer in [1, 4096]"),
    "batch_size": ([0, -1, 65537, 128.0, True, "128"] + JUNK, "an integer in [1, 65536]"),
    "lr": ([0, 0.0, -1e-3, 1.5, 10.0, NAN, INF, True, "1e-3", 10 ** 400] + JUNK, "(0, 1]"),
    "epochs": ([0, -1, NAN, INF, True, "3"] + JUNK, "> 0"),
    "max_seconds": ([0, -5, NAN, INF, True, "60", [], {}], "> 0 (or unset)"),
    "rotate_train": ([-0.001, -90, 180.001, 360, NAN, INF, True, "45"] + JUNK, "[0, 180] degrees"),
    "seed": ([-1, 2 ** 63, 2 ** 70, 1.0, True, "0", NAN] + JUNK, "an integer in [0, 2**63 - 1]"),
    "device": (["tpu", "CUDA", "", "cuda:0;rm -rf /", None, 0, ["cpu"], {}], "one of auto, cpu, cuda, mps"),
    "grad_clip": ([0, -1, NAN, INF, True, "1"] + JUNK, "> 0"),
    "weight_decay": ([-1e-9, 1.01, 3e38, NAN, INF, True, "0"] + JUNK, "in [0, 1]"),
    "parity_preset": (["giant", "", None, 1, ["small"], {"small": 1}, ("small",)], "one of small, medium"),
    "steps_per_epoch": ([0, -1, 1.5, True, "500"] + JUNK, "an integer >= 1"),
    "log_every": ([0, -10, 2.0, True, "10"] + JUNK, "an integer >= 1"),
    "compile": (["yes", "false", 1, 0, None, [], {}], "true or false"),
    "lr_schedule": (["cosine", "", None, 1, ["constant"], {}], "onecycle or constant"),
}
CASES = [(f, i) for f, (vals, _) in BAD.items() for i in range(len(vals))]


@pytest.mark.parametrize("field,i", CASES, ids=[f"{f}-{i}" for f, i in CASES])
def test_bad_value_names_field_and_range(field, i):
    value = BAD[field][0][i]
    cfg = TrainConfig(**{field: value})
    with pytest.raises(ConfigError) as e:
        cfg.validate()
    msg = str(e.value)
    assert msg.startswith(f"{field} must be "), msg
    assert BAD[field][1] in msg, msg
    assert "\n" not in msg and len(msg) < 300, msg


def test_huge_values_do_not_blow_up_the_message():
    with pytest.raises(ConfigError) as e:
        TrainConfig(lr=10 ** 5000).validate()           # over Python's 4300-digit int->str limit
    assert len(str(e.value)) < 200
    with pytest.raises(ConfigError) as e:
        TrainConfig(task="x" * 100000).validate()
    assert len(str(e.value)) < 300


GOOD = [dict(lambda_p=1.0), dict(lambda_p=1e-9), dict(lambda_p=5e-324), dict(beta=0.0), dict(beta=1e6),
        dict(max_steps=1), dict(max_steps=200, hidden=4, batch_size=4), dict(batch_size=1), dict(hidden=1),
        dict(lr=1.0), dict(rotate_train=180.0), dict(grad_clip=1e-9), dict(weight_decay=1.0),
        dict(epochs=1e-9), dict(max_seconds=1e-9), dict(seed=2 ** 63 - 1), dict(lr_schedule="constant")]


@pytest.mark.parametrize("kw", GOOD, ids=[",".join(f"{k}={v}" for k, v in kw.items()) for kw in GOOD])
def test_edge_values_allowed_by_validation_train_cleanly(kw):
    """The validator's boundaries are real: each trains a few steps with finite weights."""
    base = dict(task="parity", epochs=1, steps_per_epoch=3, batch_size=16, hidden=8, max_steps=5, device="cpu")
    base.update(kw)
    res = train(TrainConfig(**base))
    assert res.status == "completed", res.reason
    assert all(torch.isfinite(p).all() for p in res.model.parameters())


@pytest.mark.parametrize("d", [None, [], "lr=1", 5, ["lr", 1], {"momentum": 0.9}, {"lr": 0.1, "layers": 2}])
def test_from_dict_garbage(d):
    with pytest.raises(ConfigError) as e:
        TrainConfig.from_dict(d)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("task,d", [("mnist", None), ("mnist", []), ("parity", "hidden=3"), ("parity", {"layers": 2}),
                                    ("mnist", {"hidden": 0}), ("mnist", {"dropout": 1.0}), ("mnist", {"dropout": NAN}),
                                    ("mnist", {"embed": "128"}), ("parity", {"n_elems": True}),
                                    ("parity", {"hidden": 10 ** 400}), ("cifar", {}), (None, {}), (["mnist"], {})])
def test_model_config_garbage(task, d):
    with pytest.raises(ConfigError) as e:
        model_config_from_dict(task, d)
    assert "\n" not in str(e.value)


# ----------------------------------------------------------------------------- the CLI

TRAIN_BAD = [
    (["--lambda-p", "0"], "lambda_p"), (["--lambda-p", "1.5"], "lambda_p"), (["--lambda-p", "-0.1"], "lambda_p"),
    (["--lambda-p", "nan"], "lambda_p"), (["--lambda-p", "inf"], "lambda_p"), (["--lambda-p", "x"], "lambda-p"),
    (["--beta", "-1"], "beta"), (["--beta", "nan"], "beta"), (["--beta", "inf"], "beta"),
    (["--max-steps", "0"], "max_steps"), (["--max-steps", "201"], "max_steps"), (["--max-steps", "-3"], "max_steps"),
    (["--max-steps", "1.5"], "max-steps"), (["--max-steps", "abc"], "max-steps"),
    (["--hidden", "0"], "hidden"), (["--hidden", "-8"], "hidden"), (["--hidden", "5000"], "hidden"),
    (["--batch-size", "0"], "batch_size"), (["--batch-size", "-4"], "batch_size"),
    (["--lr", "0"], "lr"), (["--lr", "-1"], "lr"), (["--lr", "2"], "lr"), (["--lr", "nan"], "lr"),
    (["--rotate-train", "-1"], "rotate_train"), (["--rotate-train", "181"], "rotate_train"),
    (["--rotate-train", "nan"], "rotate_train"),
    (["--epochs", "0"], "epochs"), (["--epochs", "-1"], "epochs"), (["--epochs", "nan"], "epochs"),
    (["--epochs", "inf"], "epochs"), (["--max-seconds", "0"], "max_seconds"), (["--max-seconds", "-5"], "max_seconds"),
    (["--max-seconds", "nan"], "max_seconds"),
    (["--task", "cifar"], "task"), (["--task", ""], "task"), (["--device", "tpu"], "device"),
    (["--parity-preset", "giant"], "parity_preset"), (["--lr-schedule", "cosine"], "lr_schedule"),
    (["--steps-per-epoch", "0"], "steps_per_epoch"), (["--seed", "-1"], "seed"), (["--seed", str(2 ** 70)], "seed"),
    (["--seed", "abc"], "seed"),
]


def run_cli(argv, capsys):
    try:
        rc = main(argv)
    except SystemExit as e:           # argparse errors
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(rc, err, needle):
    assert rc not in (0, None), err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(("ponder: error:", "python -m ponder")) and needle in lines[0], err


@pytest.mark.parametrize("args,needle", TRAIN_BAD, ids=[" ".join(a) for a, _ in TRAIN_BAD])
def test_cli_train_bad_values_one_line(tmp_path, capsys, args, needle):
    out = tmp_path / "out"
    rc, _, err = run_cli(["train", "--task", "parity", "--out", str(out), "--quiet", *args], capsys)
    assert_one_line_error(rc, err, needle)
    assert not out.exists(), "a refused config still created the run folder"


def _run_folder(tmp_path):
    from conftest import tiny_model
    from ponder.checkpoint import save_run
    return save_run(tmp_path / "run", tiny_model("parity", max_steps=5),
                    TrainConfig(task="parity", max_steps=5, hidden=16))


EVAL_BAD = [
    (["--limit", "0"], "limit"), (["--limit", "-5"], "limit"), (["--limit", "abc"], "limit"),
    (["--rotations", "nan"], "rotations"), (["--rotations", "inf"], "rotations"), (["--rotations", "a,b"], "rotations"),
    (["--rotations", "1e9"], "rotations"), (["--uniform", "-5"], "uniform"), (["--uniform", "200"], "uniform"),
    (["--uniform", "nan"], "uniform"), (["--device", "tpu"], "device"), (["--seed", "-1"], "seed"),
    (["--seed", str(2 ** 70)], "seed"), (["--mode", "bogus"], "mode"),
]


@pytest.mark.parametrize("args,needle", EVAL_BAD, ids=[" ".join(a) for a, _ in EVAL_BAD])
def test_cli_evaluate_bad_values_one_line(tmp_path, capsys, args, needle):
    run = _run_folder(tmp_path)
    rc, _, err = run_cli(["evaluate", str(run), *args], capsys)
    assert_one_line_error(rc, err, needle)


@pytest.mark.parametrize("damage", ["pickle", "missing", "card-garbage", "not-a-folder", "nul"])
def test_cli_evaluate_bad_checkpoint_one_line(tmp_path, capsys, damage):
    import pickle
    run = _run_folder(tmp_path)
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
    rc, _, err = run_cli(["evaluate", target, "--limit", "10"], capsys)
    assert_one_line_error(rc, err, "")


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
