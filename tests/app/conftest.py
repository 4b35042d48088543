"""Fixtures of the page tests (tests/app/test_*_page.py): the runs folder with tiny models made here, and slow
training steps. Runs go to a temporary PONDER_RUNS folder, never into the repository."""
import time

import pytest

from helpers import fake_history, save_tiny_run, tiny_config, tiny_model
from ponder.store.card import WEIGHTS
from ponder.store.checkpoint import save_run
from ponder.analysis.unroll import measure_test
from ponder.training.lifecycle import card_metrics


@pytest.fixture(scope="module")
def runs(tmp_path_factory, mnist):
    """A runs folder: two tiny MNIST runs and a tiny parity run (cards with metrics, and histories), and
    runs whose weights are broken after they were saved (their cards still list them)."""
    root = tmp_path_factory.mktemp("runs")
    mp = pytest.MonkeyPatch()
    mp.setenv("PONDER_RUNS", str(root))
    for name, seed in (("tiny-mnist", 0), ("tiny-mnist-b", 1)):
        m = tiny_model("mnist", max_steps=5, seed=seed)
        save_run(root / name, m, tiny_config("mnist"), steps=60, history=fake_history(),
                 metrics=card_metrics(measure_test(m, tiny_config("mnist"), mnist, 200)))
    p = tiny_model("parity", max_steps=5, n_elems=8)
    save_run(root / "tiny-parity", p, tiny_config("parity"), steps=60, history=fake_history(),
             metrics=card_metrics(measure_test(p, tiny_config("parity"), None, 200)))
    save_tiny_run(root / "plain-mnist", "mnist", steps=10)              # a card without test metrics
    for name, task in (("broken-mnist", "mnist"), ("broken-parity", "parity"), ("sweep-lp0.45", "mnist")):
        save_tiny_run(root / name, task, steps=10)
        (root / name / WEIGHTS).write_bytes(b"\x00" * 64)          # the card still lists it; loading fails
    yield root
    from explorer.app.loaders import job_registry
    job_registry().shutdown()
    mp.undo()


@pytest.fixture
def slow_steps(monkeypatch):
    """Training steps that wait 20 ms each (at each progress report): a long job that leaves the CPU (and
    the GIL) to the pages under test, as a job on a bigger model would."""
    from ponder.training import lifecycle
    real = lifecycle.train

    def slow(cfg, callback=None, **kw):
        return real(cfg, callback=lambda p: (callback(p), time.sleep(0.02)), **kw)
    monkeypatch.setattr(lifecycle, "train", slow)
