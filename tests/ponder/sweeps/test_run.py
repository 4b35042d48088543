"""ponder.sweeps.run: the grid x seeds, trials through lifecycle.run, sweep.json / sweep.md, resume, failed trials,
(tiny parity runs: hidden 16, batch 32, N 5, 10 steps). The Ray backend: test_ray_backend.py."""
import json

import pytest

from helpers import assert_one_line
from ponder.training import lifecycle
from ponder.sweeps import journal as J, run as S, plan as P
from ponder.store.card import WEIGHTS, read_card, read_record
from ponder.store.checkpoint import load_checkpoint
from ponder.config import ConfigError
from ponder.sweeps.record import STOPPED
from ponder.store.runs import list_models, list_sweeps

TINY = dict(hidden=16, batch_size=32, max_steps=5, epochs=1.0, steps_per_epoch=10, log_every=5, device="cpu")


def plan(grid="lambda_p=0.2,0.5", seeds=(0,), **base):
    return P.Plan("parity", {**TINY, **base}, P.parse_grid(grid.split() if isinstance(grid, str) else grid), list(seeds))


def test_a_bad_value_fails_before_anything_trains(tmp_path):
    with pytest.raises(ConfigError) as e:
        S.run_sweep(plan("lambda_p=0.5,1.5"), tmp_path / "sw")
    assert_one_line(e, "trial lambda_p1.5-seed0: lambda_p must be (0, 1]")
    assert not (tmp_path / "sw").exists()
    for bad in ("", "1,x", "1,1"):
        with pytest.raises(ConfigError):
            P.parse_seeds(bad)


@pytest.mark.long
def test_a_local_sweep_leaves_a_run_folder_per_trial_and_sweep_json(tmp_path):
    seen = []
    trials = S.run_sweep(plan(), tmp_path / "sw", eval_limit=200, on_trial=lambda t: seen.append((t.name, t.status)))
    assert [t.status for t in trials] == ["completed", "completed"]
    assert seen == [("lambda_p0.2-seed0", "running"), ("lambda_p0.2-seed0", "completed"),
                    ("lambda_p0.5-seed0", "running"), ("lambda_p0.5-seed0", "completed")]
    info = json.loads((tmp_path / "sw" / J.SWEEP).read_text())
    assert info["plan"]["grid"] == {"lambda_p": [0.2, 0.5]} and info["backend"] == "local"
    for t, rec in zip(trials, info["trials"]):
        ck = load_checkpoint(tmp_path / "sw" / t.name)              # a normal run folder, the same card as train's
        assert ck.record.status == "completed" and ck.record.name == t.name and ck.model.lambda_p == t.values["lambda_p"]
        assert rec["config"] == ck.record.train and rec["status"] == "completed" and rec["steps"] == 10
        assert rec["metrics"] == ck.record.metrics["test"] and rec["metrics"]["n"] == 200
        assert t.record.train == ck.record.train and t.record.metrics == ck.record.metrics   # the trial's record
    table = (tmp_path / "sw" / J.TABLE).read_text().splitlines()
    assert table[0].startswith("| trial | lambda_p | seed | status | test accuracy") and len(table) == 4
    assert table[2].startswith("| lambda_p0.2-seed0 | 0.2 | 0 | completed | 0.")
    assert list_sweeps(tmp_path) == [tmp_path / "sw"]
    listed = {e.name: e.sweep for e in list_models(tmp_path, assets=tmp_path / "none")}
    assert listed == {"runs/sw/lambda_p0.2-seed0": "sw", "runs/sw/lambda_p0.5-seed0": "sw"}


@pytest.mark.long
def test_resume_skips_the_completed_trials_and_trains_the_rest(tmp_path, monkeypatch):
    S.run_sweep(plan("lambda_p=0.2"), tmp_path / "sw", eval_limit=100)
    weights = (tmp_path / "sw" / "lambda_p0.2-seed0" / WEIGHTS).read_bytes()
    trained, real = [], lifecycle.run
    monkeypatch.setattr(lifecycle, "run", lambda cfg, out, **kw: trained.append(out.name) or real(cfg, out, **kw))
    trials = S.run_sweep(plan("lambda_p=0.2,0.5"), tmp_path / "sw", eval_limit=100)
    assert trained == ["lambda_p0.5-seed0"]
    assert [(t.status, t.resumed) for t in trials] == [("completed", True), ("completed", False)]
    assert (tmp_path / "sw" / "lambda_p0.2-seed0" / WEIGHTS).read_bytes() == weights
    assert trials[0].metrics.n == 100                          # its record is kept from the first run
    assert trials[0].record == read_record(tmp_path / "sw" / "lambda_p0.2-seed0")   # read from its card
    assert "completed (resumed)" in (tmp_path / "sw" / J.TABLE).read_text()
    trained.clear()                     # another config with the same trial names: refused, nothing replaced
    with pytest.raises(ConfigError) as e:
        S.run_sweep(plan("lambda_p=0.2,0.5", steps_per_epoch=5), tmp_path / "sw", eval_limit=100)
    assert_one_line(e, "holds a run trained with another config (steps_per_epoch 10 -> 5)")
    assert trained == [] and (tmp_path / "sw" / "lambda_p0.2-seed0" / WEIGHTS).read_bytes() == weights
    S.run_sweep(plan("lambda_p=0.2,0.5", steps_per_epoch=5), tmp_path / "sw2", eval_limit=100)   # a new folder
    assert trained == ["lambda_p0.2-seed0", "lambda_p0.5-seed0"]


@pytest.mark.parametrize("holds", ["run", "file"])
def test_a_sweep_never_writes_into_a_folder_that_is_not_a_sweep(tmp_path, holds):
    # a sweep named like a run wrote its trials inside that run, which neither delete nor delete-sweep removed
    lifecycle.run(lifecycle.TrainConfig(task="parity", **TINY), tmp_path / "x", eval_limit=50)
    if holds == "file":
        (tmp_path / "x").mkdir(exist_ok=True)
        for f in (tmp_path / "x").iterdir():
            f.unlink()
        (tmp_path / "x" / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError) as e:
        S.run_sweep(plan(), tmp_path / "x", eval_limit=50)
    assert_one_line(e, "a run, not a sweep" if holds == "run" else "other files, not a sweep")
    assert sorted(p.name for p in (tmp_path / "x").iterdir() if p.is_dir()) == []


@pytest.mark.long
def test_failed_trials_are_recorded_and_the_sweep_goes_on_then_rerun(tmp_path):
    p = plan(["beta=1e38,0.01", "lambda_p=0.9"])                  # beta 1e38: the loss is inf at the first step
    (tmp_path / "sw").mkdir()                                     # a sweep folder, with a file where a run goes
    (tmp_path / "sw" / J.SWEEP).write_text(json.dumps({"plan": p.to_dict(), "trials": []}))
    (tmp_path / "sw" / "beta0.01-lambda_p0.9-seed0").write_text("a file where the run folder goes")
    trials = S.run_sweep(p, tmp_path / "sw", eval_limit=100)
    assert [t.status for t in trials] == ["failed", "failed"]
    assert "became inf" in trials[0].reason and read_card(tmp_path / "sw" / trials[0].name)["status"] == "failed"
    assert "cannot create the run folder" in trials[1].reason and "\n" not in trials[1].reason
    (tmp_path / "sw" / "beta0.01-lambda_p0.9-seed0").unlink()
    trials = S.run_sweep(p, tmp_path / "sw", eval_limit=100)       # failed trials run again
    assert [t.status for t in trials] == ["failed", "completed"] and not any(t.resumed for t in trials)
    info = json.loads((tmp_path / "sw" / J.SWEEP).read_text())
    assert [r["status"] for r in info["trials"]] == ["failed", "completed"] and "became inf" in info["trials"][0]["reason"]


def test_an_unknown_backend_is_one_line(tmp_path):
    with pytest.raises(ConfigError) as e:
        S.run_sweep(plan(), tmp_path / "sw", "slurm")
    assert_one_line(e, "backend must be one of local, ray")
@pytest.mark.long
def test_sweep_json_is_written_at_the_start_and_end_and_trials_are_appended_between(tmp_path, monkeypatch):
    # sweep.json was rewritten whole after every trial (a large grid rewrote megabytes per trial)
    writes, real = [], J.atomic_write_json
    monkeypatch.setattr(J, "atomic_write_json", lambda path, obj: writes.append(path.name) or real(path, obj))
    seen = []

    def on_trial(t):                           # what a reader (the Sweep page) sees while the sweep runs
        seen.append([(r.name, r.status) for r in S.read_sweep(tmp_path / "sw").trials])
        if t.name == "lambda_p0.5-seed0" and t.status == "completed":
            raise KeyboardInterrupt           # killed after its second trial
    with pytest.raises(KeyboardInterrupt):
        S.run_sweep(plan("lambda_p=0.2,0.5,0.9"), tmp_path / "sw", eval_limit=50, on_trial=on_trial)
    assert writes == [J.SWEEP]                 # the start; the kill came before the end
    assert seen[1] == [("lambda_p0.2-seed0", "completed"), ("lambda_p0.5-seed0", "pending"),
                       ("lambda_p0.9-seed0", "pending")]
    after = [(r.name, r.status) for r in S.read_sweep(tmp_path / "sw").trials]
    assert after == [("lambda_p0.2-seed0", "completed"), ("lambda_p0.5-seed0", "completed"),
                     ("lambda_p0.9-seed0", "cancelled")]         # no sweep runs there now: it never will be trained
    writes.clear()                             # resumed: the two completed trials are kept, the third trains
    trials = S.run_sweep(plan("lambda_p=0.2,0.5,0.9"), tmp_path / "sw", eval_limit=50)
    assert [(t.status, t.resumed) for t in trials] == [("completed", True)] * 2 + [("completed", False)]
    assert writes == [J.SWEEP, J.SWEEP] and (tmp_path / "sw" / J.LOG).read_text() == ""


@pytest.mark.long
@pytest.mark.parametrize("full", ["sweep.log", "every file"])
def test_a_full_disk_names_the_file_and_a_saved_trial_is_not_trained_again(tmp_path, monkeypatch, full):
    """The disk fills after the first trial is saved and measured, as the sweep records its end: the error names
    the file, and a resume keeps that trial (sweep.json says it completed where it could still be written; else its
    card, with its test metrics, says so)."""
    import builtins
    import errno
    appends, real_open, real_write = [], builtins.open, J.atomic_write_json

    def full_open(path, mode="r", *a, **kw):
        if str(path).endswith(J.LOG) and "a" in mode:
            appends.append(path)
            if len(appends) >= 2:                       # the first trial's end record
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(path, mode, *a, **kw)

    def full_write(path, obj):
        if appends[1:] and full == "every file":
            raise J.SaveError(path, OSError(errno.ENOSPC, "No space left on device"))
        return real_write(path, obj)
    monkeypatch.setattr(J, "open", full_open, raising=False)
    monkeypatch.setattr(J, "atomic_write_json", full_write)
    with pytest.raises(OSError) as e:
        S.run_sweep(plan(), tmp_path / "sw", eval_limit=50)
    assert_one_line(e, f"{tmp_path / 'sw' / J.LOG}: cannot write (No space left on device: the disk is full)")
    recorded = {r.name: (r.status, r.reason) for r in S.read_sweep(tmp_path / "sw").trials}
    # no trial left "running" or "pending" (the sweep said so when it could write sweep.json, else its reader does,
    # as no sweep holds the folder): a stopped sweep's record is true
    stopped = ("cancelled", "the sweep stopped: " + str(e.value) if full == "sweep.log" else STOPPED)
    assert recorded == {"lambda_p0.2-seed0": ("completed", "") if full == "sweep.log" else stopped,
                        "lambda_p0.5-seed0": stopped}, recorded
    monkeypatch.undo()
    trained, real = [], lifecycle.run
    monkeypatch.setattr(lifecycle, "run", lambda cfg, out, **kw: trained.append(out.name) or real(cfg, out, **kw))
    trials = S.run_sweep(plan(), tmp_path / "sw", eval_limit=50)
    assert trained == ["lambda_p0.5-seed0"] and [t.resumed for t in trials] == [True, False]


def test_a_trial_folder_that_is_a_link_to_another_run_is_never_written_through(tmp_path):
    """A sweep folder (resumable from the λp sweep page by its name) whose trial folder links to another run:
    the rerun cleared that run's files and trained into it."""
    from helpers import edit_card, save_tiny_run
    victim, _ = save_tiny_run(tmp_path / "victim")
    edit_card(victim, lambda c: c.update(format_version=7))      # unreadable: a rerun of the trial clears it
    before = {f.name: f.read_bytes() for f in victim.iterdir()}
    p = plan("lambda_p=0.2")
    (tmp_path / "sw").mkdir()
    (tmp_path / "sw" / J.SWEEP).write_text(json.dumps({"plan": p.to_dict(), "trials": []}))
    (tmp_path / "sw" / "lambda_p0.2-seed0").symlink_to(victim)
    with pytest.raises(ConfigError) as e:
        S.run_sweep(p, tmp_path / "sw", eval_limit=50)
    assert_one_line(e, "is a symbolic link, not the run folder of trial lambda_p0.2-seed0")
    assert {f.name: f.read_bytes() for f in victim.iterdir()} == before
