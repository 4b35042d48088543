"""What the explorer's job tests share: a tiny parity config, a one-job registry (a fixture), waiting for a job."""
import pytest

from explorer.jobs.registry import JobRegistry
from ponder.config import TrainConfig

TINY = dict(task="parity", epochs=1, steps_per_epoch=20, batch_size=32, hidden=16, max_steps=6, device="cpu",
            log_every=5)


def tiny(**kw):
    return TrainConfig(**{**TINY, **kw})


@pytest.fixture
def registry():
    reg = JobRegistry(max_jobs=1, eval_limit=200)
    yield reg
    reg.shutdown()


def wait_done(job, timeout=120):
    assert job.join(timeout), "job did not finish"
    return job.snapshot()
