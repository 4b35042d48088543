"""explorer/jobs/registry.py: one job per session and at most max_jobs in the process (also under concurrent
submits), limits from the environment, bad configs and unwritable runs folders refused before anything
starts, and a job found again by its id (tiny parity runs, as in test_job.py)."""
import threading
import time

import pytest

from explorer.jobs.registry import JobRegistry
from explorer.jobs.limits import MAX_JOB_SECONDS, JobLimitError
from ponder.store.card import read_card
from ponder.config import ConfigError, TrainConfig
from job_helpers import TINY, registry, tiny, wait_done  # noqa: F401 (registry: a fixture)


def test_one_job_per_session_and_a_global_limit(registry, tmp_path):
    job = registry.submit("s1", [("a", tiny(epochs=200))], root=tmp_path)
    with pytest.raises(JobLimitError, match="already have a training job"):
        registry.submit("s1", [("b", tiny())], root=tmp_path)
    with pytest.raises(JobLimitError, match="machine is busy.*limit 1"):
        registry.submit("s2", [("b", tiny())], root=tmp_path)
    assert registry.busy_message("s2").startswith("The machine is busy")
    assert registry.busy_message("s1").startswith("Your training job is running, shown on the Train page")
    job.cancel()
    wait_done(job)
    assert registry.busy_message("s2") == ""
    wait_done(registry.submit("s2", [("b", tiny())], root=tmp_path))


def test_the_registry_takes_its_limit_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv("PONDER_MAX_JOBS", "2")
    reg = JobRegistry(eval_limit=100)
    try:
        a = reg.submit("s1", [("a", tiny(epochs=200))], root=tmp_path)
        b = reg.submit("s2", [("b", tiny(epochs=200))], root=tmp_path)     # two may run at once
        with pytest.raises(JobLimitError):
            reg.submit("s3", [("c", tiny())], root=tmp_path)
    finally:
        reg.shutdown()
    assert not a.active and not b.active


def test_bad_configs_are_refused_before_anything_starts(registry, tmp_path):
    with pytest.raises(ConfigError, match="lambda_p"):
        registry.submit("s1", [("x", tiny(lambda_p=0.0))], root=tmp_path)
    with pytest.raises(ValueError):
        registry.submit("s1", [], root=tmp_path)
    assert registry.busy_message("anyone") == ""                # nothing started


def test_concurrent_submits_respect_the_limit(registry, tmp_path):
    barrier, started, refused = threading.Barrier(4), [], []

    def go(i):
        barrier.wait()
        try:
            started.append(registry.submit(f"s{i}", [(f"r{i}", tiny(epochs=100))], root=tmp_path))
        except JobLimitError:
            refused.append(i)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(started) == 1 and len(refused) == 3
    registry.shutdown()


def test_an_unwritable_runs_folder_is_refused_before_training(registry, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the runs folder should be")
    with pytest.raises(JobLimitError) as e:
        registry.submit("s1", [("r", tiny())], root=blocker / "runs")
    assert "not-a-folder" in str(e.value) and "nothing was started" in str(e.value) and "\n" not in str(e.value)
    assert registry.session_job("s1") is None and registry.busy_message("s1") == ""


def test_a_job_is_found_by_id_and_any_session_can_cancel_it(registry, tmp_path):
    job = registry.submit("s1", [("long", tiny(epochs=1000))], root=tmp_path)
    assert registry.get(job.id) is job and registry.get(job.id, "train") is job
    assert registry.get(job.id, "sweep") is None and registry.get("nope") is None and registry.get(None) is None
    assert registry.active() == [job] and registry.active("sweep") == [] and registry.recent("train") == [job]
    assert "shown on the Train page" in registry.busy_message("s2")
    while not job.snapshot().runs[0].progress:
        time.sleep(0.02)
    registry.get(job.id).cancel(session="s2")              # another tab's Cancel: a new session, the job's id
    view = wait_done(job)
    run = view.runs[0]
    assert run.status == "cancelled" and run.record.reason.startswith("cancelled from another session at step ")
    assert read_card(run.run_dir)["reason"] == run.record.reason and view.stop_reason == "cancelled from another session"
    assert registry.active() == [] and registry.recent() == [job]
    later = wait_done(registry.submit("s2", [("later", tiny())], root=tmp_path))
    assert [j.id for j in registry.recent()] == [later.id, job.id]          # newest first


def test_the_registry_takes_its_time_cap_from_env(monkeypatch):
    for value, want in (("2.5", 2.5), ("abc", MAX_JOB_SECONDS)):
        monkeypatch.setenv("PONDER_MAX_JOB_SECONDS", value)
        assert JobRegistry(max_jobs=1).max_seconds == want
