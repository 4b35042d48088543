"""ponder/cli/args.py: every command's --help, and each bad flag value refused in one line before anything runs."""
import pytest

from helpers import assert_one_line_error, run_cli, save_tiny_run


@pytest.mark.parametrize("cmd", [["train"], ["evaluate"], ["reproduce"], ["sweep"]])
def test_help(cmd, capsys):
    rc, out, _ = run_cli([*cmd, "--help"], capsys)
    assert rc == 0 and out.startswith("usage: python -m ponder " + cmd[0])


# one bad value per flag (the validator's ranges are tested in test_config.py), and values argparse refuses
TRAIN_BAD = [
    (["--lambda-p", "1.5"], "lambda_p"), (["--lambda-p", "nan"], "lambda_p"), (["--lambda-p", "x"], "lambda-p"),
    (["--beta", "-1"], "beta"), (["--max-steps", "201"], "max_steps"), (["--max-steps", "1.5"], "max-steps"),
    (["--hidden", "0"], "hidden"), (["--batch-size", "0"], "batch_size"), (["--lr", "2"], "lr"),
    (["--rotate-train", "181"], "rotate_train"), (["--epochs", "inf"], "epochs"), (["--max-seconds", "0"], "max_seconds"),
    (["--task", "cifar"], "task"), (["--device", "tpu"], "device"), (["--parity-preset", "giant"], "parity_preset"),
    (["--lr-schedule", "cosine"], "lr_schedule"), (["--steps-per-epoch", "0"], "steps_per_epoch"),
    (["--seed", str(2 ** 70)], "seed"), (["--seed", "abc"], "seed"), (["--halt-epsilon", "1"], "halt_epsilon"),
    (["--halt-epsilon", "0"], "halt_epsilon"), (["--halt-epsilon", "x"], "halt-epsilon"),
    (["--halting-loss", "accuracy"], "halting_loss"), (["--step-cost", "2"], "step_cost"),
    (["--answer-loss", "sum"], "answer-loss"), (["--reader", "glimpse"], "reader"),
    (["--lambda-head", "deep"], "lambda-head"), (["--halting-warmup", "1"], "halting_warmup"), (["--lambda-input", "patience"], "lambda-input"),
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
    (["--max-steps", "0"], "max-steps"), (["--max-steps", "1001"], "at most 1000 steps"),
    (["--q", "1.5"], "a number in [0, 1]"), (["--q", "nan"], "q"), (["--budget", "0.5"], "mean number of steps >= 1"),
    (["--budget", "inf"], "budget"),
]


@pytest.mark.parametrize("args,needle", EVAL_BAD, ids=[" ".join(a) for a, _ in EVAL_BAD])
def test_cli_evaluate_bad_values_one_line(tmp_path, capsys, args, needle):
    run, _ = save_tiny_run(tmp_path / "run")
    rc, _, err = run_cli(["evaluate", str(run), *args], capsys)
    assert_one_line_error(rc, err, needle)


def test_the_halting_and_answer_flags_reach_the_config():
    from ponder.cli.args import build_parser, config_from_args
    cfg = config_from_args(build_parser().parse_args(
        ["train", "--out", "x", "--reader", "recall", "--answer-loss", "mean", "--halting-loss", "accuracy",
         "--step-cost", "0.004", "--halting-warmup", "0.3"]))
    assert (cfg.reader, cfg.answer_loss, cfg.halting_loss, cfg.step_cost) == ("recall", "mean", "accuracy", 0.004)
    assert cfg.halting_warmup == 0.3
    plain = config_from_args(build_parser().parse_args(["train", "--out", "x"]))
    assert (plain.answer_loss, plain.halting_loss, plain.step_cost) == ("halting", "ce", 0.0)
    assert (plain.lambda_input, plain.lambda_head) == ("hidden", "linear")
    feats = config_from_args(build_parser().parse_args(
        ["train", "--out", "x", "--lambda-input", "stability", "--lambda-head", "mlp"]))
    assert (feats.lambda_input, feats.lambda_head) == ("stability", "mlp")
