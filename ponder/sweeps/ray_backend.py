"""The Ray backend of ponder.sweeps.run: each trial a Ray task with its own CPU / GPU share.

A task trains its trial into a temporary folder on its node (ray_trial) and sends the run's files back;
the driver writes them under the sweep folder as each task ends (run_on_ray), so the sweep folder looks
the same as a local sweep's, with or without a shared file system. `ponder/` is shipped to the workers
(Ray's runtime_env py_modules); each node needs the requirements installed, and MNIST at the driver's
data folder path.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Optional

from ..files import folder_lock
from ..journal import write_files
from ..store.card import CARD, HISTORY, WEIGHTS, one_line
from ..store.record import new_record
from ..config import ConfigError, TrainConfig
from .journal import SweepJournal
from .trial import clear_run, run_trial
from ..tasks import get_task, validate

PACKAGE_DIR = Path(__file__).resolve().parents[1]      # ponder/, shipped to Ray workers (runtime_env py_modules)
CONNECT_SECONDS = 10.0                                 # --address: how long to try to reach the cluster


def ray_trial(config: dict, name: str, data_dir: Optional[str], eval_limit: Optional[int]) -> tuple:
    """A Ray task: one trial in a temporary folder on its node; returns (its RunRecord, {file name: bytes})."""
    cfg = validate(TrainConfig.from_dict(config))
    with tempfile.TemporaryDirectory(prefix="ponder-trial-") as tmp:
        out = Path(tmp) / name
        outcome = run_trial(cfg, out, load_data=lambda: get_task(cfg.task).load_data(data_dir),
                            eval_limit=eval_limit)
        files = {f: (out / f).read_bytes() for f in (WEIGHTS, HISTORY, CARD) if (out / f).is_file()}
    return outcome, files                       # the card last: written last, as save_run does


def run_on_ray(todo, folder: Path, journal: SweepJournal, address, cpus, gpus, data_dir, eval_limit, cancel) -> None:
    """Each trial a Ray task; the run files each one sends back are written under `folder` as it ends, and the
    journal told as each trial starts and ends."""
    try:
        import ray                               # only this backend needs Ray
    except ImportError:
        raise ConfigError("--backend ray needs Ray: pip install -r requirements-ray.txt (ray==2.60.0)") from None

    own = not ray.is_initialized()
    if own and address and address != "auto":
        reachable(address)
    if own:
        try:
            # A Ray we start runs its workers at nice 0, as the trials are this machine's work: Ray's default (15)
            # starves them behind any other busy process (a trial's `import torch` took 60 s instead of 3 next to
            # two trainings on 2 cores). A cluster joined at an address keeps its own setting.
            own_start = {} if address else dict(_system_config={"worker_niceness": 0})
            ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="warning",
                     runtime_env={"py_modules": [str(PACKAGE_DIR)]}, **own_start)
        except Exception as e:                 # no cluster at that address, a version mismatch, ...
            raise ConfigError(f"could not {'join Ray at ' + address if address else 'start a local Ray'}: "
                              f"{one_line(e)}") from None
    try:
        task = ray.remote(ray_trial).options(num_cpus=cpus, num_gpus=gpus, max_retries=0)
        from ..data import default_data_dir
        data_dir = str(Path(data_dir or default_data_dir()).resolve())     # the driver's, for every node
        pending = {}
        for t in todo:
            clear_run(folder / t.name)
            pending[task.remote(t.config.to_dict(), t.name, data_dir, eval_limit)] = t
            journal.started(t)
        while pending:
            if cancel is not None and cancel.is_set():
                for ref, t in pending.items():
                    ray.cancel(ref, force=True)
                    journal.finished(t, new_record(t.config, {}, status="cancelled", reason="cancelled: the sweep was stopped",
                                           device=""))
                return
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in ready:
                t = pending.pop(ref)
                try:
                    outcome, files = ray.get(ref)
                except Exception as e:           # the task died: out of memory, a lost node, ...
                    outcome, files = new_record(t.config, {}, status="failed", reason=one_line(e), device=""), {}
                if files:
                    (folder / t.name).mkdir(parents=True, exist_ok=True)
                    with folder_lock(folder / t.name):     # a journal in an unlocked folder is a killed writer's
                        write_files({folder / t.name / f: b for f, b in files.items()})
                journal.finished(t, outcome)
    except KeyboardInterrupt:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    finally:
        if own:
            ray.shutdown()


def reachable(address: str) -> None:
    """ConfigError in at most CONNECT_SECONDS when nothing answers at a Ray address ('host:port' or
    'ray://host:port'): ray.init waits for an unreachable cluster for many minutes."""
    import socket
    host, _, port = address.split("://")[-1].rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_SECONDS).close()
    except (OSError, ValueError) as e:
        raise ConfigError(f"could not join Ray at {address}: nothing answers there ({one_line(e)}); start the "
                          f"cluster first, or leave out --address to start a local Ray") from None
