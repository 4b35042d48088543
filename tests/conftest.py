"""Fixtures. Helpers shared by the test modules are in helpers.py. MNIST comes from $PONDER_DATA, else ./data, as
for the explorer (CI sets ../shared/data)."""

import functools
import gc
import os

import pytest
from hypothesis import settings

from paths import DATA_DIR

# No per-example deadline: the first example of a property test pays for imports and warm-up, and on a busy
# 2-core machine a 50 ms example took 750 ms, which hypothesis then reports as a flaky failure.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

# The explorer and the CLI under test read $PONDER_DATA: point them at the MNIST the tests use (the
# default ./data of the repository when it is unset), so `python -m pytest` needs no variable set.
os.environ.setdefault("PONDER_DATA", DATA_DIR)


def pytest_configure(config):
    """Set up a process that runs tests: not the pytest-xdist controller, which only hands tests to its workers
    (importing torch and Streamlit there cost the whole run ~3 s before the workers started)."""
    if getattr(config, "workerinput", None) is None and config.getoption("numprocesses", None):
        return
    import torch
    # One thread: the suite runs many tiny ops, where a second OpenMP thread only adds barrier waits (and,
    # next to any other load on a 2-core machine, spins: a 3-step parity training took 1.42 s with 2 threads
    # and 0.018 s with 1 while another process used the cores).
    torch.set_num_threads(1)
    # ponder.training.progress.free_threads, which the pages, `bench` and the CLI's training choose their threads with,
    # keeps the process's one where $OMP_NUM_THREADS is set (and the CLIs the tests start run with one)
    os.environ["OMP_NUM_THREADS"] = "1"
    # Every AppTest scans the metadata of every installed distribution for Streamlit components when it is
    # created (456 distributions here: 0.4-0.7 s, most of a page test's time); the installed packages do not
    # change during a test run, so the scan runs once.
    from streamlit.components.v2 import manifest_scanner
    manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)
    # AppTest waits for a script run by polling every 1 ms (local_script_runner.require_widgets_deltas): ~1,000
    # wake-ups a second that take the GIL from the script thread (3.6 s of CPU over the page tests, tests/app/test_*_page.py).
    # Waiting on the script thread ends at the same moment; a run past its timeout fails as before.
    from streamlit.testing.v1 import local_script_runner
    local_script_runner.require_widgets_deltas = functools.partial(_wait_for_script,
                                                                   local_script_runner.require_widgets_deltas)
    # The objects of the imports above (torch, Streamlit: ~385k) live as long as the process: out of the
    # collector's sight, each full collection (about 20 a worker, and 5 more when pytest ends) took ~160 ms.
    gc.freeze()


def _wait_for_script(polling_wait, runner, timeout: float = 3) -> None:
    """local_script_runner.require_widgets_deltas (polling_wait) without its 1 ms polling, and with at least 20 s
    before a script run counts as hung: at load 17 on the 2 cores a 0.3 s script ran past AppTest's default 3 s."""
    timeout = max(timeout, 20)
    thread = getattr(runner, "_script_thread", None)
    if thread is None:                           # not the runner this was written for: its own wait
        return polling_wait(runner, timeout)
    thread.join(timeout)
    if thread.is_alive():                        # what polling_wait does at its timeout
        runner.request_stop()
        runner.join()
        raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")


def pytest_collection_modifyitems(items):
    """Longest first. Under pytest-xdist a worker takes the next test (or xdist_group) when it is free, so the
    run ends when its last long test does: the browser group (~45 s), the page tests' and the benchmarks' groups
    (~35 s and ~10 s) and the tests marked slow start first and the short ones fill in around them (the Ray
    sweep, collected last, ran alone for the run's final 10 s). The order within each rank is the collection
    order."""
    first = {"browser": 0, "pages": 1, "bench": 1}

    def rank(item):
        group = item.get_closest_marker("xdist_group")
        if group is not None:
            return first.get(group.args[0], 3)
        return 2 if item.get_closest_marker("slow") is not None else 3
    items.sort(key=rank)


@pytest.fixture(scope="session")
def mnist():
    """MNIST from $PONDER_DATA (default ./data); tests that need it skip, with the reason, when
    it is not there (never downloaded)."""
    from helpers import NO_MNIST, have_mnist
    from ponder.data import load_mnist
    if not have_mnist():
        pytest.skip(NO_MNIST)
    return load_mnist(DATA_DIR, download=False)


@pytest.fixture(scope="session")
def default_model():
    """The shipped MNIST model (assets/mnist-default)."""
    from helpers import ASSETS
    from ponder.store.checkpoint import load_checkpoint
    return load_checkpoint(ASSETS / "mnist-default").model


@pytest.fixture
def tiny_run(tmp_path):
    """(folder, model): a tiny parity run saved in tmp_path/run."""
    from helpers import save_tiny_run
    return save_tiny_run(tmp_path / "run")
