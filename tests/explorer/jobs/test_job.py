"""explorer/jobs/job.py: background training jobs (each run through ponder.training.lifecycle.run), cancel within a
second, the time cap, queued sweeps, failures kept, no threads left behind. The registry's limits and
lookups: test_registry.py."""
import threading
import time

import pytest

from explorer.jobs.registry import JobRegistry
from explorer.jobs.limits import JobLimitError
from ponder.store.card import read_card, read_history
from ponder.store.checkpoint import load_checkpoint
from ponder.config import TrainConfig
from ponder.data import DataError
from ponder.store.runs import list_models
from job_helpers import TINY, registry, tiny, wait_done  # noqa: F401 (registry: a fixture)


def test_a_job_trains_saves_and_is_listed(registry, tmp_path):
    job = registry.submit("s1", [("my run", tiny())], root=tmp_path)
    view = wait_done(job)
    [run] = view.runs
    assert view.status == "done" and run.status == "completed" and run.steps == 20
    assert run.progress and run.progress[-1]["step"] == 20 and run.progress[-1]["fraction"] == 1.0
    assert run.record.test.n == 200
    card = read_card(run.run_dir)
    assert card["status"] == "completed" and card["name"] == "my-run" and card["metrics"]["test"]["accuracy"] >= 0
    assert read_history(run.run_dir)[-1]["step"] == 20
    assert [e.name for e in list_models(tmp_path, assets=tmp_path / "none")] == ["runs/my-run"]
    load_checkpoint(run.run_dir)


def test_a_finished_job_hands_its_freed_memory_back(registry, tmp_path, monkeypatch):
    """glibc keeps the pages a job's training freed: they go back to the system once the job ends."""
    from explorer.jobs import job as job_module
    real, calls = job_module.release_freed_memory, []
    monkeypatch.setattr(job_module, "release_freed_memory", lambda: (calls.append(time.time()), real()))
    job = registry.submit("s1", [("trimmed", tiny())], root=tmp_path)
    view = wait_done(job)
    assert view.runs[0].status == "completed" and len(calls) == 1 and calls[0] <= view.finished


@pytest.mark.long
def test_progress_is_reported_while_running_and_threads_never_touch_streamlit(registry, tmp_path):
    job = registry.submit("s1", [("live", tiny(epochs=4))], root=tmp_path)
    seen = set()
    while not job.join(0.05):
        v = job.snapshot()
        seen.add((v.status, v.runs[0].status))
    assert ("running", "running") in seen
    assert job.thread.daemon and job.thread.name.startswith("ponder-job-")


@pytest.mark.long
def test_a_sweep_runs_queued_one_after_the_other_and_keeps_failures(registry, tmp_path):
    def no_mnist():
        raise DataError("MNIST not found in /nowhere")

    reg = JobRegistry(max_jobs=1, mnist_loader=no_mnist, eval_limit=100)
    specs = [("sweep-lp0.3", tiny(lambda_p=0.3)), ("sweep-mnist", TrainConfig(task="mnist", epochs=0.01)),
             ("sweep-lp0.6", tiny(lambda_p=0.6))]
    job = reg.submit("s1", specs, kind="sweep", root=tmp_path)
    assert job.snapshot().runs[2].status == "queued"                     # waits its turn
    view = wait_done(job)
    assert [r.status for r in view.runs] == ["completed", "failed", "completed"]
    assert "MNIST not found" in view.runs[1].record.reason and view.runs[1].run_dir is None
    a, c = view.runs[0], view.runs[2]
    assert a.started + a.record.train_seconds <= c.started + 0.5                      # one after the other
    assert read_card(c.run_dir)["train"]["lambda_p"] == 0.6
    assert reg.session_job("s1", "sweep") is job and reg.session_job("s1", "train") is None


@pytest.mark.long
def test_a_sweep_plan_trains_through_ponder_sweep_into_its_folder_and_resumes(registry, tmp_path):
    from ponder.sweeps.plan import Plan, parse_grid
    base = {k: v for k, v in TINY.items() if k != "task"}
    plan = Plan("parity", base, parse_grid(["lambda_p=0.3,0.6", "beta=0.01,1e38"]), [0])
    job = registry.submit("s1", [], kind="sweep", root=tmp_path / "sw", plan=plan)
    assert [r.name for r in job.snapshot().runs] == [t.name for t in plan.trials()]
    view = wait_done(job)
    assert [r.status for r in view.runs] == ["completed", "failed", "completed", "failed"]
    assert view.runs[0].progress[-1]["step"] == 20 and view.runs[0].record.test.n == 200
    assert "became inf" in view.runs[1].record.reason
    assert [r.run_dir for r in view.runs] == [str(tmp_path / "sw" / t.name) for t in plan.trials()]
    assert [e.sweep for e in list_models(tmp_path, assets=tmp_path / "none")] == ["sw"] * 4
    view = wait_done(registry.submit("s1", [], kind="sweep", root=tmp_path / "sw", plan=plan))
    assert [r.status for r in view.runs] == ["completed", "failed", "completed", "failed"]
    assert view.runs[0].record.reason.startswith("completed in an earlier run") and view.runs[0].steps == 20
    assert view.runs[0].started is None and view.runs[0].run_dir.endswith("lambda_p0.3-beta0.01-seed0")
    assert view.runs[1].started is not None and "became inf" in view.runs[1].record.reason       # failed: trained again


def test_a_diverging_run_is_saved_as_failed_with_its_reason(registry, tmp_path, monkeypatch):
    from ponder.training import lifecycle
    from ponder.training.loop import TrainResult, train as real_train

    def diverging(cfg, **kw):                 # train a little, then report the non-finite loss train() reports
        res = real_train(cfg, **kw)
        return TrainResult(model=res.model, record=res.record.completed(status="failed",
                                                                      reason="loss became nan at step 21"),
                           device=res.device, history=res.history)

    monkeypatch.setattr(lifecycle, "train", diverging)
    run = wait_done(registry.submit("s1", [("nan", tiny())], root=tmp_path)).runs[0]
    assert run.status == "failed" and run.record.reason == "loss became nan at step 21"
    card = read_card(run.run_dir)
    assert card["status"] == "failed" and card["reason"] == "loss became nan at step 21"


def _ponder_threads():
    return [t for t in threading.enumerate() if t.name.startswith("ponder-job-") and t.is_alive()]


@pytest.mark.long
def test_cancel_within_a_second_keeps_a_partial_run_and_no_threads_are_left(tmp_path):
    reg = JobRegistry(max_jobs=2, eval_limit=100)
    jobs = [reg.submit(f"s{i}", [(f"long-{i}", tiny(epochs=1000))], root=tmp_path)
            for i in range(2)]
    with pytest.raises(JobLimitError):
        reg.submit("s2", [("third", tiny())], root=tmp_path)
    for job in jobs:
        deadline = time.time() + 60
        while not job.snapshot().runs[0].progress and time.time() < deadline:
            time.sleep(0.02)
    stops = []
    for i, job in enumerate(jobs):
        t0 = time.perf_counter()
        reg.session_job(f"s{i}").cancel()                  # what the page's Cancel button does
        while job.snapshot().runs[0].phase == "training":
            time.sleep(0.005)
        stops.append(time.perf_counter() - t0)
    assert max(stops) < 1.0, stops
    for job in jobs:
        assert job.join(60)
        run = job.snapshot().runs[0]
        card = read_card(run.run_dir)
        assert run.status == card["status"] == "cancelled" and 0 < card["steps"] == run.steps < 1000 * 20
        assert run.partial and "cancelled at step" in run.record.reason and job.snapshot().cancel_requested
        load_checkpoint(run.run_dir)
    assert len({job.snapshot().runs[0].run_dir for job in jobs}) == 2
    reg.shutdown()
    for _ in range(3):                                       # start / finish again: threads do not pile up
        reg.submit("again", [("again", tiny(epochs=0.25))], root=tmp_path).join(60)
    assert not [t for t in _ponder_threads() if t.name[11:] in {j.id for j in reg._jobs.values()}]


def test_a_save_that_fails_after_training_keeps_the_model_elsewhere(registry, tmp_path, monkeypatch):
    import errno
    import tempfile
    from ponder import files as A, journal as J
    root, spare = tmp_path / "runs", tmp_path / "spare"
    spare.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spare))
    real = A.write_tmp

    def full_disk(path, data):                       # the runs folder fills up while the job trains
        if str(root) in str(path):
            raise A.SaveError(path, OSError(errno.ENOSPC, "No space left on device"))
        return real(path, data)
    monkeypatch.setattr(J, "write_tmp", full_disk)              # the run's files are written by the journal
    view = wait_done(registry.submit("s1", [("full", tiny())], root=root))
    [run] = view.runs
    assert run.status == "completed" and run.saved_elsewhere, (run.status, run.record.reason)
    assert "No space left on device" in run.record.reason and run.run_dir in run.record.reason and "\n" not in run.record.reason
    assert load_checkpoint(run.run_dir).record.steps == 20 and str(spare) in run.run_dir
    assert list(root.iterdir()) == []                # no empty run folder left in the runs folder


def test_the_time_cap_stops_a_job_and_saves_it_as_partial_with_its_reason(tmp_path):
    # cap 1 s: the first run (20,000 tiny steps, ~10 s) is stopped at the cap; the second never starts. The cap's
    # clock counts the job's set-up too, and a process's first optimizer imports torch._dynamo (1.5-3.6 s, loaded
    # machine): imported here first, so that the cap falls after a first step
    import torch._dynamo  # noqa: F401
    reg = JobRegistry(max_jobs=1, eval_limit=100, max_seconds=1.0)
    try:
        t0 = time.monotonic()
        job = reg.submit("s1", [("capped", tiny(epochs=1000)), ("next", tiny())], kind="sweep", root=tmp_path)
        view = wait_done(job, timeout=30)
        took = time.monotonic() - t0
    finally:
        reg.shutdown()
    cap = "stopped by the server's time cap on web jobs (1 s, PONDER_MAX_JOB_SECONDS)"
    first, second = view.runs
    assert first.status == "cancelled" and first.partial and first.record.reason.startswith(cap + " at step ")
    assert 0 < first.steps < 20000 and first.record.train_seconds < 3.0 and took < 15.0, (first.steps, first.record.train_seconds, took)
    card = read_card(first.run_dir)
    assert card["status"] == "cancelled" and card["reason"] == first.record.reason and card["steps"] == first.steps
    assert second.status == "cancelled" and second.record.reason == cap + " before it started" and second.run_dir is None
    assert view.stop_reason == cap and view.cap == 1.0


@pytest.mark.parametrize("env, want", [(None, 1), ("2", 2), ("junk", 1)])
def test_a_job_trains_with_one_torch_thread_unless_told(tmp_path, monkeypatch, env, want):
    """Two intra-op threads on the loaded 2-core machine: 4 steps in 8 s against 69 with one (bench/job_timing.py)."""
    import torch
    from explorer.jobs import job as jobs
    if env is None:
        monkeypatch.delenv("PONDER_JOB_THREADS", raising=False)
    else:
        monkeypatch.setenv("PONDER_JOB_THREADS", env)
    seen, before = [], torch.get_num_threads()

    def run(*a, **kw):
        seen.append(torch.get_num_threads())
        raise RuntimeError("stop here")
    monkeypatch.setattr(jobs.lifecycle, "run", run)
    reg = JobRegistry(max_jobs=1, eval_limit=200)
    view = wait_done(reg.submit("s", [("t", tiny())], root=tmp_path))
    assert seen == [want] and view.runs[0].status == "failed" and torch.get_num_threads() == before


def test_a_finished_jobs_run_is_found_by_the_run_not_by_its_old_name(tmp_path):
    """Another session renames, deletes or replaces the job's run: where_now says which, never naming whatever
    holds the old name now."""
    from helpers import save_tiny_run
    from explorer.jobs.job import RunState, saved_key, where_now
    from ponder.store.manage import delete_run, export_run, import_zip, rename_run

    root = tmp_path / "runs"
    d, _ = save_tiny_run(root / "x", seed=0)
    run = RunState(name="x", config=tiny(), status="completed", run_dir=str(d), run_key=saved_key(d))
    assert where_now(run) == (d, "there")
    rename_run("x", "y", root)
    assert where_now(run) == (root / "y", "renamed")
    save_tiny_run(root / "x", seed=1)                 # another run under the old name
    assert where_now(run) == (root / "y", "renamed")
    delete_run("x", root)
    rename_run("y", "x", root)                        # back under its name: there again
    assert where_now(run) == (d, "there")
    other = export_run(d)
    delete_run("x", root)
    assert where_now(run) == (None, "deleted")
    assert import_zip(other, "x", root).name == "x"   # the same files imported again: a copy, not the job's run
    assert where_now(run) == (None, "replaced")
    # saved in place over by another save (`ponder train --overwrite`): another run
    d2, _ = save_tiny_run(root / "z", seed=2)
    run2 = RunState(name="z", config=tiny(), status="completed", run_dir=str(d2), run_key=saved_key(d2))
    save_tiny_run(root / "z", seed=3)
    assert where_now(run2) == (None, "replaced")
    # a run saved outside the runs folder, or without a key: where it was saved
    assert where_now(RunState(name="q", config=tiny(), run_dir=str(tmp_path / "elsewhere"), saved_elsewhere=True,
                              run_key=(1, 2, 3, 4, 5)))[1] == "there"


def test_a_jobs_saved_run_has_its_key(registry, tmp_path):
    from explorer.jobs.job import saved_key
    job = registry.submit("s1", [("keyed", tiny())], root=tmp_path)
    [run] = wait_done(job).runs
    assert run.run_key == saved_key(run.run_dir) is not None
