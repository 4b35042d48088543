"""Issue 14's `python -m bench gpu`, as far as it runs without CUDA: its side-by-side JSON (from its own
--device cpu smoke mode; never a GPU figure), the report's rendering of that structure, the parity
preset lookup, and the legacy loop it compares against."""
import json

import pytest
import torch

from bench import gpu, report
from bench.legacy_train import legacy_train
from ponder.config import PARITY_PRESETS, TrainConfig
from ponder.train import train


@pytest.fixture(scope="module")
def smoke(mnist, tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu") / "gpu.json"
    gpu.run(gpu.GpuConfig.quick(device="cpu", epochs=0.01, eval_limit=200), mnist=mnist, out=path, quick=True)
    yield json.loads(path.read_text())
    PARITY_PRESETS.pop("bench-n15", None)          # registered by the run, for this process only


def test_side_by_side_json_has_the_issue_fields(smoke):
    assert smoke["machine"]["device_name"] == "cpu" and smoke["quick"] is True
    r = smoke["results"]
    sbs = r["side_by_side"]
    for loop in ("old", "new"):
        assert set(sbs[loop]["images_per_s"]) == {"32"}
        assert all(v > 0 for v in sbs[loop]["images_per_s"].values())
    assert sbs["speedup"]["32"] == pytest.approx(sbs["new"]["images_per_s"]["32"] / sbs["old"]["images_per_s"]["32"])
    assert sbs["speedup_128"] is None and sbs["met_speedup_128"] is None        # batch 128 was not run here
    assert sbs["new"]["step_mode"]["32"] == "eager" and "CUDA" in sbs["new"]["step_mode_reason"]["32"]
    assert set(r["parity"]["old_ms_per_step"]) == set(r["parity"]["new_ms_per_step"]) == {"15"}
    assert r["parity"]["new_ms_per_step"]["15"] > 0
    t = r["time_to_accuracy"]
    assert "seconds_to_target" in t and t["target_seconds"] == gpu.TARGET_SECONDS and t["step_mode"] == "eager"


def test_report_renders_a_cuda_side_by_side(smoke, tmp_path):
    """The GPU section's code path, fed the smoke run's structure relabelled as CUDA in memory only."""
    doc = json.loads(json.dumps(smoke))
    doc["machine"]["device"], doc["quick"] = "cuda", False
    text = report.gpu_section({"gpu": doc}, None)
    assert "side by side" in text and "new / old" in text and "Parity, hidden 16, batch 32" in text
    assert "Not measured" not in text
    summary = report.summary_section({"gpu": doc}, None)
    assert "GPU: parity n = 15, batch 32" in summary and "new / old loop" not in summary   # no batch 128 in the smoke


def test_report_without_a_gpu_file_says_to_be_measured():
    text = report.gpu_section({}, None)
    assert "Not measured in this session" in text and "still to be measured" in text


def test_parity_preset_lookup(monkeypatch):
    monkeypatch.setattr(gpu, "PARITY_PRESETS", dict(PARITY_PRESETS))
    assert gpu.parity_preset(64) == "paper" and gpu.parity_preset(8) == "small"
    name = gpu.parity_preset(15)
    assert name == "bench-n15" and gpu.PARITY_PRESETS[name] == dict(n_elems=15, train_k=(1, 15), test_k=(1, 15))


def test_legacy_loop_trains_like_the_new_one_on_cpu():
    """The old side of the comparison is a working loop: on CPU, where nothing diverges, it trains the
    same weights as the current loop (which differs only in when it reads the device)."""
    from conftest import tiny_model
    cfg = TrainConfig(task="parity", epochs=1, steps_per_epoch=12, batch_size=32, hidden=16, max_steps=6,
                      device="cpu", log_every=4)
    model = tiny_model("parity", max_steps=6)
    old = legacy_train(cfg, model=tiny_model("parity", max_steps=6))
    new = train(cfg, model=model)
    assert old.status == new.status == "completed" and old.steps == new.steps == 12
    assert all(torch.equal(v, new.model.state_dict()[k]) for k, v in old.model.state_dict().items())
    assert [r["loss"] for r in old.history] == [r["loss"] for r in new.history]
