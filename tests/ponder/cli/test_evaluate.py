"""ponder/cli/evaluate.py: python -m ponder evaluate as a user runs it: the text and strict JSON results, rotations,
the three halting policies, and bad run folders or cards refused in one line."""
import json

import pytest

from helpers import DATA_DIR, assert_one_line_error, needs_mnist, run_cli, save_tiny_run


PARITY = ["--task", "parity", "--epochs", "1", "--steps-per-epoch", "30", "--hidden", "16", "--max-steps", "6",
          "--device", "cpu", "--quiet"]


@pytest.mark.long
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
    # the policies tuned on the held-out validation vectors, scored on the test set, with paired intervals
    assert b["tuned_on"] == {"set": "validation", "n": 500}
    at = b["at_equal_steps"]
    assert 0 <= at["learned_q"] <= 1 and at["tuned_on"] == b["tuned_on"]
    assert set(at["ci95"]) >= {"learned_q-confidence_exit", "learned_q-fixed_depth", "sampled-learned_q"}
    assert all(lo <= hi for lo, hi in at["ci95"].values())
    assert len(b["frontier"]["learned_q"]) >= 10 and {"q", "mean_steps", "accuracy"} == set(b["frontier"]["learned_q"][0])
    assert {"confidence_exit", "fixed_depth"} <= set(b["frontier"])
    assert b["shift"] == []                  # the small preset tests the k it trained on
    v = res["validation"]                    # the same numbers on the validation vectors: what a setting is chosen by
    assert v["n"] == 500 and v["baselines"]["tuned_on"] == {"set": "validation", "n": 500}
    assert {"easy", "hard", "settle", "expected_steps"} <= set(v) and "ci95" not in v["baselines"]["at_equal_steps"]
    groups = res["per_step_accuracy_by_group"]
    assert {"easy", "hard", "k=1"} <= set(groups) and all(len(v) == 6 for v in groups.values())
    rc, out, _ = run_cli(["evaluate", str(run), "--limit", "500"], capsys)
    assert rc == 0 and "halting step mean" in out and "easy (k in [1, 4])" in out
    at = b["at_equal_steps"]                 # one line per policy
    assert f"learned halting:  accuracy {at['learned']:.4f}" in out and f"Q-exit:           accuracy {at['learned_q']:.4f}" in out
    lo, hi = at["ci95"]["learned_q-confidence_exit"]
    assert f"learned_q - confidence_exit: " in out and f"(95% interval {lo:+.4f} to {hi:+.4f})" in out
    assert f"fixed depth:      accuracy {at['fixed_depth']:.4f}" in out
    assert f"confidence exit:  accuracy {at['confidence_exit']:.4f}" in out
    assert "at equal steps: test items 500; tuned on validation (500); mean steps " in out and "; sampled − Q-exit " in out


def test_expected_mode_says_all_steps_run_and_labels_e_n(tmp_path, capsys):
    run, _ = save_tiny_run(tmp_path / "r", max_steps=5)
    rc, out, _ = run_cli(["evaluate", str(run), "--limit", "300", "--mode", "expected"], capsys)
    res = json.loads(run_cli(["evaluate", str(run), "--limit", "300", "--mode", "expected", "--json"], capsys)[1])
    assert rc == 0 and "steps run: 5 (all)" in out and "expected steps E[n]" in out and "halting step" not in out
    # E[n] is a real number: its median keeps two decimals
    assert f"median {res['median_steps']:.2f}" in out and f"mean {res['mean_steps']:.2f}" in out
    assert "easy (k in [1, 4]): accuracy" in out and "E[n]" in out.split("easy")[1]


def test_halt_epsilon_goes_into_the_card_and_evaluate_runs_past_the_trained_n(tmp_path, capsys):
    run = tmp_path / "eps"
    rc, _, err = run_cli(["train", "--out", str(run), *PARITY, "--halt-epsilon", "0.05", "--no-eval"], capsys)
    assert rc == 0, err
    assert json.loads((run / "run.json").read_text())["train"]["halt_epsilon"] == 0.05
    res = json.loads(run_cli(["evaluate", str(run), "--json", "--limit", "300", "--max-steps", "15"], capsys)[1])
    assert res["max_steps"] == 15 and res["trained_max_steps"] == 6
    assert len(res["per_step_accuracy"]) == 15 and len(res["halting_distribution"]) == 15
    assert sum(res["halting_distribution"]) == pytest.approx(1, abs=1e-4)
    rc, out, _ = run_cli(["evaluate", str(run), "--limit", "300", "--max-steps", "15"], capsys)
    assert rc == 0 and "N=15 (trained with N=6)" in out
    res6 = json.loads(run_cli(["evaluate", str(run), "--json", "--limit", "300"], capsys)[1])
    assert res6["max_steps"] == res6["trained_max_steps"] == 6 and len(res6["per_step_accuracy"]) == 6


@pytest.mark.long
def test_deterministic_mode_at_q_and_at_a_compute_budget(tmp_path, capsys):
    run, _ = save_tiny_run(tmp_path / "r", max_steps=5)
    at = lambda *flags: json.loads(run_cli(["evaluate", str(run), "--limit", "300", "--json", "--mode",  # noqa: E731
                                            "deterministic", *flags], capsys)[1])
    assert at("--q", "0")["mean_steps"] == 1 and at("--q", "1")["mean_steps"] == 5
    assert at()["q"] == 0.5 and at("--q", "0.7")["q"] == 0.7
    res = at("--budget", "3")                # q chosen on the 300 validation vectors to spend 3 steps there
    b = res["budget"]
    assert b["tuned_on"] == {"set": "validation", "n": 300} and res["q"] == b["q"] and 0 < b["q"] < 1
    assert abs(b["validation_mean_steps"] - 3) <= 1 / 300 + 1e-9
    assert abs(res["mean_steps"] - 3) < 0.5  # the test vectors are drawn like the validation ones
    rc, out, _ = run_cli(["evaluate", str(run), "--limit", "300", "--mode", "deterministic", "--budget", "3"], capsys)
    assert rc == 0 and f"Q-exit at q = {b['q']:.4g}, chosen on 300 validation items to spend 3 steps" in out
    for flags, words in ((["--q", "0.3"], "--q sets the Q-exit of --mode deterministic"),
                         (["--mode", "deterministic", "--q", "0.3", "--budget", "2"], "not both"),
                         (["--mode", "deterministic", "--budget", "9"], "budget")):
        rc, _, err = run_cli(["evaluate", str(run), "--limit", "100", *flags], capsys)
        assert_one_line_error(rc, err, words)


@pytest.mark.long
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
    # the policies on the rotated digits at the operating points of the clean validation images
    assert res["baselines"]["tuned_on"] == {"set": "validation", "n": 300}
    shift = {r["name"]: r for r in res["baselines"]["shift"]}
    assert list(shift) == ["rotation 0°", "rotation 45°", "rotation ±22.5°"]
    clean = res["baselines"]["at_equal_steps"]["policies"]
    for name, row in shift["rotation 0°"]["policies"].items():
        assert row == pytest.approx(clean[name], abs=1e-6), name
    assert all(set(r["ci95"]) >= {"learned_q-confidence_exit", "sampled-learned_q"} for r in shift.values())
    assert res["rotations"][0]["accuracy"] == res["accuracy"]            # 0 deg is the unrotated test set
    assert res["uniform_rotations"][0]["angle"] == 22.5 and res["uniform_rotations"][0]["kind"] == "uniform"
    groups = res["per_step_accuracy_by_group"]           # by E[n] quartile, digit and the rotations asked for
    assert {"E[n] Q1", "E[n] Q4", "rotation 0°", "rotation 45°", "rotation ±22.5°"} <= set(groups)
    assert groups["rotation 0°"] == pytest.approx(res["per_step_accuracy"])
    rc, out, _ = run_cli(["evaluate", str(run), "--data-dir", DATA_DIR, "--limit", "300", "--rotations", "90"], capsys)
    assert rc == 0 and "accuracy" in out and "rotation         90 deg: accuracy" in out


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


def test_cli_evaluate_json_is_strict_json(tmp_path, capsys, monkeypatch):
    """NaN / inf in a result are written as null: strict parsers (and json.loads without extensions) read it."""
    from ponder.analysis import unroll as E
    run, _ = save_tiny_run(tmp_path / "r", max_steps=5)
    real = E.measure_test

    def with_nan(*a, **kw):
        res = real(*a, **kw)
        res.accuracy, res.expected_steps["std"] = float("nan"), float("inf")
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


def test_a_run_no_measurement_fits_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    """The measurement budget holds for commands too (every measurement goes through unroll_stats)."""
    run, _ = save_tiny_run(tmp_path / "par")
    monkeypatch.setenv("PONDER_MAX_MEASURE_MEMORY_MB", "10")        # under OVERHEAD alone
    rc, out, err = run_cli(["evaluate", str(run), "--limit", "100"], capsys)
    assert_one_line_error(rc, err, "PONDER_MAX_MEASURE_MEMORY_MB")
    monkeypatch.setenv("PONDER_MAX_MEASURE_MEMORY_MB", "nan")
    rc, out, err = run_cli(["evaluate", str(run), "--limit", "100"], capsys)
    assert_one_line_error(rc, err, "PONDER_MAX_MEASURE_MEMORY_MB='nan' is not a finite number")


def test_evaluate_against_a_competitor_json_and_text(tmp_path, capsys):
    run, _ = save_tiny_run(tmp_path / "r", max_steps=5, seed=0)
    rival, _ = save_tiny_run(tmp_path / "r-deep", max_steps=5, seed=1)
    rc, out, err = run_cli(["evaluate", str(run), "--limit", "200", "--json", "--against", str(rival)], capsys)
    assert rc == 0, err
    res = json.loads(out)
    a, b = res["against"], res["baselines"]
    assert a["name"] == "r-deep" and a["budgets"]["tuned_on"] == {"set": "validation", "n": 200}
    assert "competitor.patience" in a["budgets"]["contenders"] and "patience" in b["at_equal_steps"]["policies"]
    assert a["verdict"]["answer"] in ("yes", "no", "no difference", "mixed") and "r-deep" in a["verdict"]["sentence"]
    assert {"halted_by_n", "confidence", "patience"} <= set(b["auroc"]) and {"confidence", "patience"} <= set(a["auroc"])
    assert set(b["forced"]) == {"test", "validation"} and 0 <= b["forced"]["test"]["mass_on_last_step"] <= 1
    assert b["verdict"]["sentence"] and len(b["budgets"]["rows"]) == 6        # budgets 1..5 and the sampled E[n]
    rc, out, _ = run_cli(["evaluate", str(run), "--limit", "200", "--against", str(rival)], capsys)
    assert rc == 0 and f"is the extra thought worth it, against r-deep? {a['verdict']['sentence']}" in out
    assert "forced by N (test): " in out and "this network: the signal that best tells" in out


def test_evaluate_against_refuses_another_task_or_other_items_in_one_line(tmp_path, capsys):
    from ponder.store.checkpoint import save_run
    from helpers import tiny_config, tiny_model
    run, _ = save_tiny_run(tmp_path / "r", max_steps=5)
    digits, _ = save_tiny_run(tmp_path / "m", task="mnist", max_steps=5)
    longer = save_run(tmp_path / "n10", tiny_model("parity", n_elems=10), tiny_config("parity", 5), steps=1,
                      history=[{"step": 1, "loss": 0.5}])
    rc, _, err = run_cli(["evaluate", str(run), "--limit", "50", "--against", str(digits)], capsys)
    assert_one_line_error(rc, err, "--against needs a run of the same task (parity), got a mnist run")
    rc, _, err = run_cli(["evaluate", str(run), "--limit", "50", "--against", str(longer)], capsys)
    assert_one_line_error(rc, err, "same test and validation items")
