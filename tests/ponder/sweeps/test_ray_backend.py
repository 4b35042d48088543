"""ponder.sweeps.ray_backend: a sweep's trials as Ray tasks on a local Ray, their run files sent back to the sweep
folder (tiny parity runs: hidden 16, batch 32, N 5, 10 steps, as in test_run.py)."""
import json
import sys
from pathlib import Path

import pytest

from helpers import assert_one_line
from ponder.sweeps import journal as J, run as S, plan as P, ray_backend as sweep_ray
from ponder.store.checkpoint import load_checkpoint
from ponder.config import ConfigError

TINY = dict(hidden=16, batch_size=32, max_steps=5, epochs=1.0, steps_per_epoch=10, log_every=5, device="cpu")


def plan(grid="lambda_p=0.2,0.5", seeds=(0,), **base):
    return P.Plan("parity", {**TINY, **base}, P.parse_grid(grid.split() if isinstance(grid, str) else grid), list(seeds))


def test_the_package_shipped_to_ray_workers_is_the_whole_ponder_package():
    import ponder
    assert sweep_ray.PACKAGE_DIR == Path(ponder.__file__).resolve().parent


def test_ray_backend_without_ray_installed_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)                  # import ray -> ImportError
    with pytest.raises(ConfigError) as e:
        S.run_sweep(plan(), tmp_path / "sw", "ray")
    assert_one_line(e, "pip install -r requirements-ray.txt")


@pytest.mark.long
@pytest.mark.slow
def test_a_ray_sweep_on_a_local_ray(tmp_path, monkeypatch):
    """Ray started by run_sweep (a local Ray: this machine's CPUs, 2 here), its workers at nice 0 (Ray's default
    15 starved them behind any busy process), and shut down. Two CPUs a trial: on 2 cores the trials run one
    after the other in one Ray worker, which imports torch once (each worker's start cost ~4.7 s of CPU)."""
    ray = pytest.importorskip("ray", reason="Ray is an optional extra: pip install -r requirements-ray.txt")
    inits = []
    real_init = ray.init
    monkeypatch.setattr(ray, "init", lambda *a, **kw: inits.append(kw) or real_init(*a, **kw))
    trials = S.run_sweep(plan(["lambda_p=0.2", "beta=0.01,1e38"]), tmp_path / "sw", "ray", eval_limit=100,
                         cpus_per_trial=2)
    assert not ray.is_initialized()
    assert [kw["_system_config"]["worker_niceness"] for kw in inits] == [0]
    assert [t.status for t in trials] == ["completed", "failed"]
    for t in trials:                                             # the run files came back from the Ray workers
        ck = load_checkpoint(tmp_path / "sw" / t.name)
        assert ck.record.status == t.status and ck.record.train == t.config.to_dict()
    info = json.loads((tmp_path / "sw" / J.SWEEP).read_text())
    assert info["backend"] == "ray" and [r["status"] for r in info["trials"]] == ["completed", "failed"]
    assert info["trials"][0]["metrics"]["n"] == 100 and "became inf" in info["trials"][1]["reason"]
    assert (tmp_path / "sw" / J.TABLE).read_text().count("| lambda_p0.2-beta") == 2


@pytest.mark.long
def test_a_ray_address_where_nothing_answers_fails_in_seconds_and_the_file_says_so(tmp_path):
    pytest.importorskip("ray", reason="Ray is an optional extra: pip install -r requirements-ray.txt")
    import socket
    import time
    with socket.socket() as s:                                   # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.time()
    with pytest.raises(ConfigError) as e:
        S.run_sweep(plan(), tmp_path / "sw", "ray", address=f"127.0.0.1:{port}", eval_limit=50)
    assert_one_line(e, f"could not join Ray at 127.0.0.1:{port}: nothing answers there")
    assert time.time() - t0 < sweep_ray.CONNECT_SECONDS + 30
    info = json.loads((tmp_path / "sw" / J.SWEEP).read_text())
    assert [r["status"] for r in info["trials"]] == ["failed", "failed"]
    assert all("nothing answers" in r["reason"] for r in info["trials"])
