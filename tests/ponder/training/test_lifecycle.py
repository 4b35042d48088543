"""ponder/training/lifecycle.py: one run, start to end (train -> save -> measure -> record), the one path of
`python -m ponder train`, `reproduce` and the explorer's background jobs."""
import json
import threading

import pytest
import torch

from helpers import needs_mnist, run_cli
from ponder.training import lifecycle
from ponder.files import SaveError
from ponder.store.card import read_card, read_history, read_record
from ponder.store.checkpoint import load_checkpoint
from ponder.config import TrainConfig
from ponder.analysis.pays import pays
from ponder.store.runs import list_models

TINY = dict(task="parity", epochs=1, steps_per_epoch=20, batch_size=32, hidden=16, max_steps=6, device="cpu",
            log_every=5)


def test_a_run_is_trained_saved_measured_and_recorded(tmp_path):
    phases, reports = [], []
    done = lifecycle.run(TrainConfig(**TINY), tmp_path / "r", on_phase=phases.append, callback=reports.append,
                         eval_limit=500)
    assert phases == ["training", "validating", "saving", "evaluating"]          # parity: no data to load
    assert done.record.status == "completed" and done.reason == "" and not done.problems and not done.saved_elsewhere
    assert done.run_dir == tmp_path / "r" and [p.step for p in reports] == [5, 10, 15, 20]
    card = read_card(done.run_dir)
    assert card["status"] == "completed" and card["steps"] == 20 and len(read_history(done.run_dir)) == 4
    # one metrics shape: {'test': the full metrics less the per-class / per-k breakdowns and the baselines,
    # plus the baselines' few numbers (pays)}
    assert set(card["metrics"]) == {"test"}
    assert card["metrics"]["test"] == {**{k: v for k, v in done.metrics.to_dict().items() if k not in (
        "by_class", "by_k", "baselines", "settle", "per_step_accuracy_by_group", "learned_by_group", "validation")},
        "pays": pays(done.metrics)}
    assert card["metrics"]["test"]["pays"]["learned"] == done.metrics.baselines["at_equal_steps"]["learned"]
    assert done.metrics.baselines and "baselines" not in card["metrics"]["test"]
    assert done.metrics.by_k and card["metrics"]["test"]["n"] == 500
    assert card["metrics"] == lifecycle.card_metrics(done.metrics) == done.record.metrics
    # the record training returned, named and measured by the lifecycle, is the one the card holds
    saved = read_record(done.run_dir)
    assert saved.completed(created="", train_seconds=done.record.train_seconds) == done.record
    assert saved.name == "r" and saved.device == "cpu" and saved.train_seconds == round(done.record.train_seconds, 2)


@pytest.mark.long
def test_mnist_data_is_loaded_once_by_the_given_loader(tmp_path, mnist):
    loads, phases = [], []

    def load():
        loads.append(1)
        return mnist
    cfg = TrainConfig(epochs=0.002, batch_size=64, max_steps=4, hidden=16, device="cpu")     # 2 steps
    done = lifecycle.run(cfg, tmp_path / "m", load_data=load, on_phase=phases.append, eval_limit=200)
    assert loads == [1] and phases == ["loading data", "training", "validating", "saving", "evaluating"]
    assert done.record.status == "completed" and read_card(done.run_dir)["metrics"]["test"]["n"] == 200


def test_cancelled_before_the_first_step_saves_nothing(tmp_path):
    cancel = threading.Event()
    cancel.set()
    made = []
    done = lifecycle.run(TrainConfig(**TINY), lambda: made.append(1) or tmp_path / "never", cancel=cancel)
    assert done.record.status == "cancelled" and done.run_dir is None and done.metrics is None
    assert "nothing to save" in done.reason and not made and not (tmp_path / "never").exists()


def test_the_folder_is_made_only_when_the_run_is_saved(tmp_path):
    made = []

    def folder():
        made.append(len(list(tmp_path.iterdir())))
        return tmp_path / "late"
    done = lifecycle.run(TrainConfig(**TINY), folder, evaluate=False)
    assert made == [0] and done.run_dir == tmp_path / "late" and done.metrics is None
    assert read_card(done.run_dir)["metrics"] == {}                 # not evaluated: no metrics



def test_a_folder_made_for_the_run_is_locked_until_its_card_has_the_metrics(tmp_path):
    """While the explorer's job measures its saved run, another thread (a rename or delete on the Runs page)
    cannot take the folder's lock; once the card holds the metrics it can."""
    from ponder.files import folder_lock
    from ponder.store.runs import new_run_dir
    tries = []

    def measure(model, mnist):
        def other():
            try:
                with folder_lock(tmp_path / "job"):
                    tries.append("got it")
            except SaveError as e:
                tries.append(str(e))
        t = threading.Thread(target=other)
        t.start()
        t.join()
        return lifecycle.measure(model, TrainConfig(**TINY), None, limit=100)
    done = lifecycle.run(TrainConfig(**TINY), lambda: new_run_dir(tmp_path, "job"), measure_fn=measure)
    assert len(tries) == 1 and "in use" in tries[0], tries
    assert read_card(done.run_dir)["metrics"]["test"]["n"] == 100
    with folder_lock(done.run_dir):                  # free again
        pass

def test_a_failed_evaluation_is_a_problem_not_a_crash(tmp_path):
    def broken(model, mnist):
        raise RuntimeError("out of memory\nwhile measuring")
    done = lifecycle.run(TrainConfig(**TINY), tmp_path / "r", measure_fn=broken)
    assert done.record.status == "completed" and done.metrics is None
    assert done.problems == ["evaluation failed: out of memory while measuring"]
    assert done.reason == "evaluation failed: out of memory while measuring"
    assert read_card(done.run_dir)["status"] == "completed"           # saved before it was measured
    load_checkpoint(done.run_dir)


def test_a_save_that_fails_is_rescued_to_a_temporary_folder_or_raises(tmp_path, monkeypatch):
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    blocker = tmp_path / "a-file"
    blocker.write_text("in the way")
    with pytest.raises(SaveError, match="a-file"):
        lifecycle.run(TrainConfig(**TINY), blocker / "r", evaluate=False)
    done = lifecycle.run(TrainConfig(**TINY), blocker / "r", evaluate=False, rescue=True)
    assert done.run_dir.parent == tmp_path and done.run_dir.name.startswith("ponder-unsaved-")
    assert "could not save the run to" in done.saved_elsewhere and str(done.run_dir) in done.saved_elsewhere
    assert read_card(done.run_dir)["name"] == "r"


@pytest.mark.long
def test_a_diverging_run_is_saved_as_failed_and_loads(tmp_path):
    bad = TrainConfig(**{**TINY, "lambda_p": 0.9, "lr": 1.0, "beta": 1e20, "lr_schedule": "constant",
                         "steps_per_epoch": 30, "log_every": 1})
    root = tmp_path / "runs"
    done = lifecycle.run(bad, root / "diverged")
    res = done.result
    assert res.record.status == "failed" and "at step" in res.record.reason
    card = read_card(done.run_dir)
    assert card["status"] == "failed" and card["reason"] == res.record.reason and card["steps"] == res.record.steps
    ck = load_checkpoint(done.run_dir)
    x = torch.randint(0, 2, (5, 8)).float()
    with torch.no_grad():
        assert torch.equal(ck.model(x).y, res.model.eval()(x).y)         # the last good weights
    assert all(r["step"] <= res.record.steps for r in read_history(done.run_dir))
    [entry] = list_models(root, assets=tmp_path / "none")
    assert entry.record.status == "failed" and "at step" in entry.record.reason


@pytest.mark.long
@needs_mnist            # reproduce.run loads MNIST, even for a parity-only spec
def test_the_cli_the_jobs_and_reproduce_all_go_through_run_once_per_run(tmp_path, capsys, monkeypatch):
    from explorer.jobs.registry import JobRegistry
    from ponder.cli import reproduce
    calls, real = [], lifecycle.run

    def spy(cfg, out, **kw):
        calls.append(cfg.task)
        return real(cfg, out, **kw)
    monkeypatch.setattr(lifecycle, "run", spy)
    rc, out, err = run_cli(["train", "--task", "parity", "--out", str(tmp_path / "cli"), "--epochs", "1",
                            "--steps-per-epoch", "5", "--hidden", "16", "--max-steps", "4", "--device", "cpu",
                            "--quiet"], capsys)
    assert rc == 0 and calls == ["parity"], err
    reg = JobRegistry(max_jobs=1, eval_limit=100)
    job = reg.submit("s", [("a", TrainConfig(**{**TINY, "steps_per_epoch": 5})),
                           ("b", TrainConfig(**{**TINY, "steps_per_epoch": 5}))], root=tmp_path / "runs")
    assert job.join(60) and [r.status for r in job.snapshot().runs] == ["completed", "completed"]
    assert calls == ["parity"] * 3                                     # one call per run of the job
    monkeypatch.setattr(reproduce, "specs", lambda gpu: [reproduce.Spec(
        "parity-tiny", dict(task="parity", epochs=1, steps_per_epoch=5, hidden=16, max_steps=4, batch_size=16),
        {}, "parity")])
    assert reproduce.run(out=str(tmp_path / "results"), device="cpu", log=lambda *a: None) == 0
    assert calls == ["parity"] * 4
    assert read_card(tmp_path / "results" / "models" / "parity-tiny")["metrics"]["test"]["n"] == 10000
    assert "## Parity `parity-tiny`" in (tmp_path / "results" / "results.md").read_text()
    # reproduce's row is the run's record: what its card holds
    row = json.loads((tmp_path / "results" / "results.json").read_text())["models"]["parity-tiny"]
    rec = read_record(tmp_path / "results" / "models" / "parity-tiny")
    assert (row["status"], row["train"], row["device"], row["max_steps"], row["lambda_p"]) == \
           (rec.status, rec.train, rec.device, rec.max_steps, rec.lambda_p)
    assert round(row["train_seconds"], 2) == rec.train_seconds
