"""explorer/jobs/limits.py: the job limits read from the environment (a bad value gives the default), the time
cap's StopFlag and the duration wording."""
import time

import pytest

from explorer.jobs.limits import (MAX_JOB_SECONDS, StopFlag, fmt_duration, job_threads_from_env, max_jobs_from_env,
                             max_seconds_from_env)


@pytest.mark.parametrize("value, want", [(None, 1), ("2", 2), ("0", 1), ("many", 1)])
def test_max_jobs_and_job_threads_are_at_least_one(monkeypatch, value, want):
    for name, read in (("PONDER_MAX_JOBS", max_jobs_from_env), ("PONDER_JOB_THREADS", job_threads_from_env)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
        assert read() == want, (name, value)


def test_time_cap_from_env(monkeypatch):
    for value, want in (("2.5", 2.5), ("3600", 3600.0), ("abc", MAX_JOB_SECONDS), ("0", MAX_JOB_SECONDS),
                        ("-5", MAX_JOB_SECONDS), ("inf", MAX_JOB_SECONDS), ("nan", MAX_JOB_SECONDS)):
        monkeypatch.setenv("PONDER_MAX_JOB_SECONDS", value)
        assert max_seconds_from_env() == want, value
    monkeypatch.delenv("PONDER_MAX_JOB_SECONDS")
    assert max_seconds_from_env() == MAX_JOB_SECONDS == 1800.0


def test_durations_in_words():
    assert [fmt_duration(s) for s in (1800, 90, 0.25, 7200)] == ["30 min", "1 min 30 s", "0.25 s", "120 min"]


def test_the_stop_flag_keeps_its_first_reason_and_sets_itself_at_the_cap():
    flag = StopFlag()
    assert not flag.is_set() and flag.deadline is None
    flag.stop("cancelled from another session")
    flag.stop("cancelled")
    assert flag.is_set() and flag.why == "cancelled from another session"
    capped = StopFlag(cap=0.05)
    capped.start()
    assert not capped.is_set()
    time.sleep(0.06)
    assert capped.is_set() and capped.why.startswith("stopped by the server's time cap on web jobs (0.05 s,")
    plain = StopFlag()
    plain.set()                                        # what train()'s callers may call: a plain cancel
    assert plain.why == "cancelled"
