"""ponder/sweeps/record.py: the one reader of sweep.json / sweep.log refuses, in one line naming the file, every
record its writer would not write (read bounded: no FIFO waited on, no device read); trial names stay run folders
directly in the sweep folder. A study validates every trial before it writes anything."""
import json
import os
import threading

import pytest

from helpers import assert_one_line, edit_card, lock_held_elsewhere, save_tiny_run, tiny_config
from ponder.analysis.studies import prior_mean
from ponder.cli.main import main
from ponder.config import ConfigError
from ponder.store.card import CARD, WEIGHTS
from ponder.store.runs import LOG, SWEEP
from ponder.sweeps.study import STUDY, study
from ponder.sweeps.record import STOPPED, SweepError, read_sweep

PLAN = {"task": "parity", "base": {"hidden": 16, "max_steps": 5}, "grid": {"lambda_p": [0.3]}, "seeds": [0, 1]}


def entry(name="t0", **kw):
    """A trial's record as ponder.sweeps.run writes it, for the tiny run helpers.save_tiny_run saves."""
    return {"name": name, "values": {"lambda_p": 0.3, "seed": 0}, "status": "completed", "reason": "", "steps": 1,
            "seconds": 0.5, "device": "cpu", "resumed": False, "metrics": None,
            "config": tiny_config("parity").to_dict(), **kw}


def sweep_folder(path, trials=None, **top):
    path.mkdir(parents=True, exist_ok=True)
    (path / SWEEP).write_text(json.dumps({"plan": PLAN, "backend": "local", "trials": trials or [entry()], **top}))
    return path


def _with(**kw):
    return lambda d: d["trials"][0].update(kw)


def _config(**kw):
    return lambda d: d["trials"][0]["config"].update(kw)


def _nested(depth):
    return "[" * depth + "]" * depth


BAD = {   # what a person with write access to the runs folder put there (the λp sweep page crashed on each)
    "trials-not-records": lambda d: d.update(trials=[1, "x"]),
    "trials-mapping": lambda d: d.update(trials={"a": 1}),
    "config-list": _with(config=[1, 2]),
    "max_steps-text": _config(max_steps="abc"),
    "max_steps-1e400": lambda d: json.dumps(d).replace('"max_steps": 5', '"max_steps": 1e400'),   # read as inf
    "max_steps-10**9": _config(max_steps=10 ** 9),    # prior_mean allocated 8 GB per grid point
    "lambda_p-0": _config(lambda_p=0),
    "lambda_p-text": _config(lambda_p="x"),
    "name-mapping": _with(name={"a": 1}),
    "name-parent": _with(name="../victim"),
    "name-absolute": _with(name="/tmp/victim"),
    "name-hidden": _with(name=".import-x"),
    "name-twice": lambda d: d.update(trials=[entry(), entry()]),
    "reason-list": _with(reason=["a"]),
    "status-unknown": _with(status="done"),
    "status-number": _with(status=3),
    "steps-text": _with(steps="many"),
    "seconds-nan": _with(seconds=float("nan")),
    "metrics-text": _with(metrics="good"),
    "metrics-accuracy-2": _with(metrics={"accuracy": 2.0}),
    "values-list": _with(values=[1]),
    "values-nested": _with(values={"lambda_p": {"x": 1}}),
    "task-other": _config(task="mnist"),
    "missing-plan": lambda d: d.pop("plan"),
    "missing-trials": lambda d: d.pop("trials"),
    "missing-values": lambda d: d["trials"][0].pop("values"),
    "missing-config": lambda d: d["trials"][0].pop("config"),
    "missing-name": lambda d: d["trials"][0].pop("name"),
    "missing-status": lambda d: d["trials"][0].pop("status"),
    "plan-list": lambda d: d.update(plan=[1]),
    "plan-task-unknown": lambda d: d["plan"].update(task="cifar"),
    "plan-grid-text": lambda d: d["plan"].update(grid="lambda_p=0.3"),
    "plan-grid-unknown-field": lambda d: d["plan"].update(grid={"momentum": [0.9]}),
    "plan-grid-bad-value": lambda d: d["plan"].update(grid={"lambda_p": [5]}),
    "plan-grid-huge-int": lambda d: json.dumps(d).replace('"lambda_p": [0.3]', '"hidden": [1' + "0" * 5000 + "]"),
    "plan-seeds-text": lambda d: d["plan"].update(seeds="0,1"),
    "plan-base-unknown": lambda d: d["plan"].update(base={"momentum": 1}),
    "record-list": lambda d: "[1, 2]",
    "not-json": lambda d: "{plan",
    "deep-nesting": lambda d: _nested(100000),
    "deep-nesting-in-a-field": lambda d: json.dumps(d)[:-1] + ', "x": ' + _nested(900) + "}",
    "binary": lambda d: b"\xff\xfe\x00",
    # valid JSON whose text is no text (ponder.text): a lone surrogate in a reason crashed the λp sweep page
    "reason-surrogate": _with(reason="\ud800"),
    "device-nul": _with(device="cpu\x00"),
    "values-surrogate": _with(values={"lambda_p": 0.3, "seed": 0, "reader": "\udfff"}),
    "backend-escape": lambda d: d.update(backend="\x1b[31m"),
}


def write_bad(folder, kind):
    d = json.loads((folder / SWEEP).read_text())
    out = BAD[kind](d)
    text = out if isinstance(out, (str, bytes)) else json.dumps(d)
    (folder / SWEEP).write_bytes(text if isinstance(text, bytes) else text.encode())


@pytest.mark.parametrize("kind", sorted(BAD))
def test_a_malformed_sweep_json_is_one_line_naming_it(tmp_path, kind):
    folder = sweep_folder(tmp_path / "sw")
    write_bad(folder, kind)
    with pytest.raises(SweepError) as e:
        read_sweep(folder)
    assert_one_line(e, folder / SWEEP)


def test_a_sweep_log_line_whose_text_is_no_text_is_one_line_naming_it(tmp_path):
    folder = sweep_folder(tmp_path / "sw")
    (folder / LOG).write_text(json.dumps(entry(reason="cut \udc00 short")) + "\n")
    with pytest.raises(SweepError) as e:
        read_sweep(folder)
    assert_one_line(e, f"{folder / LOG}, line 1: reason: holds U+DC00")


def test_a_sweep_record_reads_as_typed_values_with_the_logs_newer_records(tmp_path):
    folder = sweep_folder(tmp_path / "sw", [entry("t0", status="running"), entry("t1", status="pending")])
    (folder / LOG).write_text(json.dumps(entry("t0", metrics={"accuracy": 0.75, "n": 8})) + "\n"
                              + json.dumps(entry("t1", status="running"))[:40])     # cut by a kill: skipped
    with lock_held_elsewhere(folder):                                        # a sweep runs there now
        assert [(t.name, t.status) for t in read_sweep(folder).trials] == [("t0", "completed"), ("t1", "pending")]
    r = read_sweep(folder)               # none does: killed or stopped by a full disk, t1 will never be trained
    assert [(t.name, t.status, t.reason) for t in r.trials] == [("t0", "completed", ""), ("t1", "cancelled", STOPPED)]
    assert r.trials[0].metrics == {"accuracy": 0.75, "n": 8} and r.trials[0].config == tiny_config("parity")
    assert r.plan.task == "parity" and r.max_steps == 5 and read_sweep(tmp_path) is None
    (folder / LOG).write_text(json.dumps(entry("t0", config=[1])) + "\n")   # parses, but no sweep writes it
    with pytest.raises(SweepError) as e:
        read_sweep(folder)
    assert_one_line(e, f"{folder / LOG}, line 1: trial t0: config")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder", "link-to-a-sweep-elsewhere"])
def test_a_sweep_json_that_is_no_regular_file_is_never_waited_on_or_read_whole(tmp_path, kind):
    folder = tmp_path / "sw"
    folder.mkdir()
    elsewhere = sweep_folder(tmp_path / "elsewhere") / SWEEP
    {"fifo": lambda f: os.mkfifo(f), "dev-zero": lambda f: f.symlink_to("/dev/zero"), "folder": lambda f: f.mkdir(),
     "link-to-a-sweep-elsewhere": lambda f: f.symlink_to(elsewhere)}[kind](folder / SWEEP)
    got = []
    reader = threading.Thread(target=lambda: got.append(_error(lambda: read_sweep(folder))), daemon=True)
    reader.start()
    reader.join(10)
    assert got and isinstance(got[0], SweepError) and str(folder / SWEEP) in str(got[0]), got


def _error(fn):
    try:
        fn()
    except Exception as e:
        return e


def test_prior_mean_refuses_an_n_it_would_allocate_gigabytes_for():
    assert prior_mean(0.5, 1) == 1.0
    with pytest.raises(ValueError):
        prior_mean(0.5, 10 ** 9)


# ----------------------------------------------------------------------------- python -m ponder study


@pytest.fixture
def two_trials(tmp_path):
    """A sweep folder of two completed tiny parity trials (t0, t1) and a run beside it (the victim)."""
    folder = tmp_path / "runs" / "sw"
    for name in ("t0", "t1"):
        save_tiny_run(folder / name)
    victim, _ = save_tiny_run(tmp_path / "runs" / "victim",
                              metrics={"test": {"accuracy": 0.42, "n": 10, "mean_steps": 2.0}})
    edit_card(folder / "t1", lambda card: card["train"].update(seed=1))
    sweep_folder(folder, [entry("t0"), entry("t1", values={"lambda_p": 0.3, "seed": 1},
                                               config=tiny_config("parity", seed=1).to_dict())])
    return folder, victim


def _cards(*dirs):
    return {d: (d / CARD).read_bytes() for d in dirs}


@pytest.mark.parametrize("bad", ["../victim", "ABSOLUTE", "config-list", "missing-values", "weights-corrupt",
                                 "card-other-config", "trial-folder-link", "seed-text", "values-not-config",
                                 "ship-other-task"])
def test_study_checks_every_trial_before_it_writes_anything(two_trials, bad, capsys):
    folder, victim = two_trials
    d = json.loads((folder / SWEEP).read_text())
    t1 = d["trials"][1]
    if bad in ("../victim", "ABSOLUTE"):
        t1["name"] = "../victim" if bad == "../victim" else str(victim)
    elif bad == "config-list":
        t1["config"] = [1]
    elif bad == "missing-values":
        t1.pop("values")
    elif bad == "weights-corrupt":
        (folder / "t1" / WEIGHTS).write_bytes(b"\x00" * 64)
    elif bad == "card-other-config":
        t1["config"]["lr"] = 0.5
    elif bad == "trial-folder-link":
        (folder / "t1").rename(folder / "t1-real")
        (folder / "t1").symlink_to(victim)
    elif bad == "seed-text":              # a TypeError once every trial was measured (choosing the seed to ship)
        t1["values"]["seed"] = "one"
    elif bad == "values-not-config":      # pooled with the settings of another λp
        t1["values"]["lambda_p"] = 0.9
    (folder / SWEEP).write_text(json.dumps(d))
    before = _cards(folder / "t0", victim)
    rc = main(["study", str(folder)] + (["--ship", "mnist-adaptive"] if bad == "ship-other-task" else []))
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1 and err[0].startswith("ponder: error:"), err
    assert _cards(folder / "t0", victim) == before and not (folder / STUDY).exists()


@pytest.mark.long
def test_study_of_good_trials_measures_them(two_trials):
    folder, victim = two_trials
    before = _cards(victim)
    s = study(folder, log=lambda _: None)
    assert [t["name"] for t in s["settings"][0]["trials"]] == ["sw/t0", "sw/t1"] and _cards(victim) == before


def test_study_refuses_a_folder_holding_no_sweep_or_one_given_twice(two_trials, tmp_path):
    with pytest.raises(ConfigError, match="holds no sweep"):
        study(tmp_path)
    folder, _ = two_trials
    before = _cards(folder / "t0")
    with pytest.raises(ConfigError, match="given twice"):
        study([folder, folder.parent / "sw" / ".." / "sw"])
    assert _cards(folder / "t0") == before
