"""bench/: every CPU benchmark in --quick mode (a few seconds each), the report, the gpu command's
message without CUDA, and the inputs bench/ood.py measures on."""
import json

import numpy as np
import pytest
import torch

from bench import common, early_exit, gpu, latency, profiling, report, throughput, time_to_accuracy
from bench import ood as bench_ood
from bench.__main__ import main
from explorer.drawing import ood
from ponder.tasks.parity.task import PARITY_PRESETS
from ponder.config import TrainConfig
from ponder.training.loop import train

pytestmark = [pytest.mark.long,                    # benchmarks: the long checks
              pytest.mark.xdist_group("bench")]  # under pytest-xdist: one worker runs the module's fixtures once


def _doc(path, name):
    d = json.loads(path.read_text())
    assert d["name"] == name and d["quick"] is True
    m = d["machine"]
    assert m["cpu_count"] >= 1 and m["torch_threads"] >= 1 and m["torch"] and m["date"]
    assert "loadavg_start" in m and "loadavg_end" in m and "other_work_cpu_share" in m
    return d["results"]


def _pos(*values):
    for v in values:
        assert isinstance(v, (int, float)) and v > 0 and v == v and v != float("inf"), v


@pytest.fixture(scope="module")
def docs(tmp_path_factory, mnist):
    """Every CPU benchmark in --quick mode, run once for this module, its JSON in one folder. One thread,
    as the rest of the suite (the benchmarks' default, one per core, is for measuring)."""
    out = tmp_path_factory.mktemp("bench")
    throughput.run(throughput.ThroughputConfig.quick(threads=1), mnist=mnist, out=out / "throughput.json", quick=True)
    time_to_accuracy.run(time_to_accuracy.TimeToAccuracyConfig.quick(max_seconds=0.6, snapshot_every=0.2, eval_limit=300, threads=1),
                         mnist=mnist, out=out / "time_to_accuracy.json", quick=True)
    early_exit.run(early_exit.EarlyExitConfig.quick(n_images=128, batch_sizes=(128, 1), single_images=3, threads=1),
                   mnist=mnist, out=out / "early_exit.json", quick=True)
    latency.run(latency.LatencyConfig.quick(n_inputs=3, threads=1), mnist=mnist, out=out / "latency.json", quick=True)
    profiling.run(profiling.ProfileConfig.quick(threads=1), mnist=mnist, out=out / "profile.json", quick=True)
    # no GPU here: the gpu benchmark's code on the CPU (its own smoke mode)
    gpu.run(gpu.GpuConfig.quick(device="cpu", epochs=0.01, eval_limit=200), mnist=mnist, out=out / "gpu.json", quick=True)
    yield out
    PARITY_PRESETS.pop("bench-n15", None)          # registered by the gpu run, for this process only


def test_throughput_quick(docs):
    r = _doc(docs / "throughput.json", "throughput")
    assert set(r["variants"]) == {"a0_before", "a_default", "r_rows", "b_reference", "c_same_size", "d_classifier"}
    # each row names its design: TrainConfig()'s cnn reader and the explorer default's row reader both
    assert (r["variants"]["a_default"]["design"], r["variants"]["r_rows"]["design"]) == ("cnn reader", "rows reader")
    for v in r["variants"].values():
        _pos(v["images_per_s"], v["ms_per_step"], v["us_per_image"], v["params"], v["seconds"], v["gflop_per_step"])
        # achieved GFLOP/s = FLOPs per step / seconds per step, and its share of the same run's matmul rate
        assert v["gflops"] == pytest.approx(v["gflop_per_step"] * 1000 / v["ms_per_step"], rel=1e-6)
        assert v["matmul_share"] == pytest.approx(v["gflops"] / r["ratios"]["matmul_gflops"], rel=1e-6)
    # the FLOPs grow with the arithmetic: the row reader's second conv has half the cnn reader's channels, and
    # the article's design re-runs its CNN at every step
    v = r["variants"]
    assert v["r_rows"]["gflop_per_step"] < v["a_default"]["gflop_per_step"] < v["b_reference"]["gflop_per_step"]
    _pos(r["ratios"]["c_over_b"], r["ratios"]["a_time_over_d"], r["ratios"]["a_over_a0"], r["ratios"]["r_over_b"],
         r["ratios"]["matmul_gflops"])
    for met in ("met_c_over_b", "met_a_time_over_d", "met_r_matmul_share", "met_r_over_b"):
        assert isinstance(r["ratios"][met], bool)


def test_time_to_accuracy_quick(docs):
    r = _doc(docs / "time_to_accuracy.json", "time_to_accuracy")
    _pos(r["train_seconds"], r["steps"], r["images_per_second"], r["final_accuracy"], r["target_seconds"])
    assert r["curve"] and all(0 <= p["test_accuracy"] <= 1 and p["train_seconds"] >= 0 for p in r["curve"])
    assert [p["train_seconds"] for p in r["curve"]] == sorted(p["train_seconds"] for p in r["curve"])
    assert r["reached"] == (r["seconds_to_target"] is not None)
    assert r["train_config"]["max_seconds"] == 0.6 and r["train_config"]["batch_size"] == 128


def test_early_exit_quick(docs):
    r = _doc(docs / "early_exit.json", "early_exit")
    assert [b["batch_size"] for b in r["by_batch"]] == [128, 1] and r["primary_batch_size"] == 128
    for b in r["by_batch"]:
        # the row reader users get, parity, and the ~10-step stand-in (mnist-default), each labelled by its design
        assert {n: m["design"] for n, m in b["models"].items() if not m.get("synthetic")} == {
            "mnist-adaptive": "rows reader", "parity-15": "parity"}
        assert len(b["models"]) == 3
        for m in b["models"].values():
            _pos(m["full_seconds"], m["rec_full_seconds"], m["encode_seconds"], m["full_images_per_s"])
            for s in m["modes"].values():
                _pos(s["mean_steps"], s["rec_speedup"], s["whole_speedup"], s["ideal_speedup"], s["target_speedup"])
                assert 1 <= s["mean_steps"] <= m["max_steps"] and 0 <= s["accuracy"] <= 1


def test_latency_quick(docs):
    r = _doc(docs / "latency.json", "latency")
    assert r["inputs"] == 3 and r["figures"] == 4
    for stage in ("preprocess", "input", "ponder", "figures", "total", "total_with_json"):
        _pos(r["stages"][stage]["p50_ms"], r["stages"][stage]["p95_ms"])
    assert r["stages"]["total"]["p95_ms"] >= r["stages"]["figures"]["p95_ms"] * 0.5
    _pos(r["p95_ms"], r["cold_ms"]["total"])


def test_canvas_images_are_280_rgba():
    imgs = latency.canvas_images(torch.randint(0, 255, (2, 28, 28), dtype=torch.uint8).numpy(), 3)
    assert len(imgs) == 3 and all(i.shape == (280, 280, 4) and i.dtype.name == "uint8" for i in imgs)
    assert all((i[..., 3] == 255).all() and i[..., 0].max() > 0 for i in imgs)


def test_profile_quick(docs):
    r = _doc(docs / "profile.json", "profile")
    for key in ("a_default", "d_classifier"):
        assert set(profiling.PHASES) <= set(r["phases"][key])
        _pos(r["phases"][key]["total"], r["phases"][key]["backward"])
    assert r["ops"] and all(o["self_ms_per_step"] >= 0 and o["op"] for o in r["ops"])
    _pos(r["layout"]["nchw_ms"], r["layout"]["channels_last_ms"])
    u = r["unroll"]
    for key in ("updates", "cnn_step", "rows_step"):
        _pos(u[f"{key}_autograd_ms"], u[f"{key}_by_hand_ms"])
        assert u[f"{key}_speedup"] == pytest.approx(u[f"{key}_autograd_ms"] / u[f"{key}_by_hand_ms"])


def test_the_cpu_clock_leaves_out_time_spent_waiting():
    """best_of's "cpu" clock counts the process's CPU time: a sleep (a wait for a core, to it) is not counted;
    the wall clock counts it. The early-exit benchmark refuses a clock it does not know."""
    import time
    assert common.best_of(lambda: time.sleep(0.05), 1) >= 0.05
    assert common.best_of(lambda: time.sleep(0.05), 1, clock="cpu") < 0.02
    with pytest.raises(ValueError, match="clock"):
        early_exit.run(early_exit.EarlyExitConfig.quick(clock="sundial"), mnist=object())


def test_gpu_code_path_on_cpu(docs):
    """No GPU here: the gpu benchmark's code ran on the CPU (its own smoke mode)."""
    r = _doc(docs / "gpu.json", "gpu")
    _pos(r["throughput"]["32"]["images_per_s"])
    assert r["time_to_accuracy"]["curve"] and r["time_to_accuracy"]["target_accuracy"] == 0.99


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA present: the gpu command would run")
def test_gpu_command_without_cuda_exits_with_message(capsys):
    assert main(["gpu"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


def test_report_renders_every_section(docs, tmp_path):
    out = tmp_path / "results"
    out.mkdir()
    for p in docs.glob("*.json"):
        if p.name != "gpu.json":                            # a CPU smoke run is not a GPU figure
            (out / p.name).write_bytes(p.read_bytes())
    doc = report.write_report(out, tmp_path / "benchmarks.md")
    text = doc.read_text()
    heads = {"throughput": "## 1. Training throughput", "time_to_accuracy": "## 2. Time to accuracy",
             "early_exit": "## 3. Early exit", "latency": "## 4. Explorer latency", "profile": "## Profile"}
    for head in ["## Summary", "## 5. GPU", *heads.values()]:
        assert head in text
    assert "Not measured in this session" in text
    assert "--quick smoke runs" in text and "## Machine" in text
    assert "validation" in text                             # the GPU history is labelled as validation


def test_report_renders_the_pages_timings_from_their_json(tmp_path):
    """bench/pages_timing.py's JSON (a list of runs) as section 4b: medians of the visits, the memory lines."""
    def visits(first, complete, charts):
        return [{"first": f, "complete": c, "charts": charts} for f, c in zip(first, complete)]
    run = {"started": "2026-11-26 02:00 UTC", "load_before": [1.0, 1.5, 2.0], "load_after": [2.0, 2.0, 2.0],
           "repos": {"before": "/a", "after": "/b"}, "repeats": 3, "cpu": "AMD EPYC", "command": "python -m bench.pages_timing",
           "pages": {"before": {"sweep": {"warm": visits([1, 3, 2], [4, 6, 5], 4), "fresh": visits([7, 9, 8], [9, 9, 9], 4)}},
                     "after": {"sweep": {"warm": visits([1, 1, 1], [2, 2, 3], 3), "fresh": []}}},
           "memory": {"after": {"sessions": {"rss_mib": [900.0] * 51, "per_session_mib": 0.0},
                                "jobs": [{"budget_s": 20, "before_mib": 900, "peak_mib": 1100, "after_mib": 950, "left_mib": 50}]}}}
    (tmp_path / report.PAGES_FILE).write_text(json.dumps([run]))
    text = report.write_report(tmp_path, tmp_path / "benchmarks.md").read_text()
    assert "## 4b. Pages in a browser" in text and "on AMD EPYC" in text and "1.0 1.5 2.0 before" in text
    assert "| sweep | before | 4 | 2 | 5 | 8 | 9 |  |" in text and "| sweep | after | 3 | 1 | 2 | – | – |  |" in text
    assert "- after: server RSS over 50 drawing sessions: 900 MiB at the start" in text and "(+50 MiB left behind)" in text


def test_quick_results_default_outside_docs():
    assert common.default_out("latency", quick=True).parent == common.QUICK_DIR
    assert common.default_out("latency").parent == common.RESULTS_DIR


# ----------------------------------------------------------------------------- bench gpu (the parts that run without CUDA)

@pytest.fixture(scope="module")
def smoke(docs):
    """The gpu benchmark's JSON from its CPU smoke run (in `docs`)."""
    return json.loads((docs / "gpu.json").read_text())


def test_side_by_side_json_has_both_steps_fields(smoke):
    assert smoke["machine"]["device_name"] == "cpu" and smoke["quick"] is True
    r = smoke["results"]
    sbs = r["side_by_side"]
    for loop in ("eager", "graph"):
        assert set(sbs[loop]["images_per_s"]) == {"32"}
        assert all(v > 0 for v in sbs[loop]["images_per_s"].values())
        assert sbs[loop]["step_mode"]["32"] == "eager"                       # no CUDA: both sides step eagerly
    assert sbs["speedup"]["32"] == pytest.approx(sbs["graph"]["images_per_s"]["32"] / sbs["eager"]["images_per_s"]["32"])
    assert sbs["speedup_128"] is None                                        # batch 128 was not run here
    assert "CUDA" in sbs["graph"]["step_mode_reason"]["32"]                  # why the graph side did not capture
    assert set(r["parity"]["eager_ms_per_step"]) == set(r["parity"]["graph_ms_per_step"]) == {"15"}
    assert r["parity"]["graph_ms_per_step"]["15"] > 0
    t = r["time_to_accuracy"]
    assert "seconds_to_target" in t and t["target_seconds"] == gpu.TARGET_SECONDS and t["step_mode"] == "eager"


def test_report_renders_a_cuda_side_by_side(smoke, tmp_path):
    """The GPU section's code path, fed the smoke run's structure relabelled as CUDA in memory only."""
    doc = json.loads(json.dumps(smoke))
    doc["machine"]["device"], doc["quick"] = "cuda", False
    text = report.gpu_section({"gpu": doc}, None)
    assert "side by side" in text and "graph / eager" in text and "Parity, hidden 16, batch 32" in text
    assert "Not measured" not in text
    summary = report.summary_section({"gpu": doc}, None)
    assert "GPU: parity n = 15, batch 32" in summary and "graph / eager step" not in summary   # no batch 128 in the smoke


def test_report_without_a_gpu_file_says_to_be_measured():
    text = report.gpu_section({}, None)
    assert "Not measured in this session" in text and "still to be measured" in text


def test_parity_preset_lookup(monkeypatch):
    monkeypatch.setattr(gpu, "PARITY_PRESETS", dict(PARITY_PRESETS))
    assert gpu.parity_preset(64) == "paper" and gpu.parity_preset(8) == "small"
    assert gpu.parity_preset(15) == "video-15"                     # the project's own n = 15 preset
    name = gpu.parity_preset(24)                                   # none: a bench-only one, this process only
    assert name == "bench-n24" and gpu.PARITY_PRESETS[name] == dict(n_elems=24, train_k=(1, 24), test_k=(1, 24))


def test_side_by_side_times_the_eager_and_the_graph_step(monkeypatch):
    """The two sides are one config apart (cuda_graph False / True), alternate every round and keep their
    fastest round. Timings faked: eager 2.0 then 1.5 s, graph 1.0 then 1.2 s for 10 steps of batch 8."""
    fake = {(False, 0): 2.0, (True, 0): 1.0, (False, 1): 1.5, (True, 1): 1.2}
    seen = []

    def time_train(cfg, mnist, model, warm, steps):
        seen.append(cfg.cuda_graph)
        return fake[(cfg.cuda_graph, len(seen) > 2)], None

    monkeypatch.setattr(gpu, "time_train", time_train)
    rows = gpu.side_by_side(lambda b: TrainConfig(task="parity", batch_size=b, hidden=16, max_steps=4, device="cpu"),
                            [8], warm=1, steps=10, rounds=2)
    assert seen == [False, True, False, True]
    assert (rows["eager"]["8"]["seconds"], rows["eager"]["8"]["round"]) == (1.5, 1)
    assert (rows["graph"]["8"]["seconds"], rows["graph"]["8"]["round"]) == (1.0, 0)
    assert rows["graph"]["8"]["images_per_s"] == 10 * 8 / 1.0 and rows["eager"]["8"]["ms_per_step"] == 150.0


def test_ood_generated_non_digits_and_drawn_digits():
    """bench/ood.py's inputs (its full run needs MNIST and minutes: `python -m bench.ood`)."""
    rng = np.random.default_rng(0)
    x, y = bench_ood.drawn_digits(rng, per_digit=2)
    assert y == [d for d in range(10) for _ in range(2)]
    assert all(d.shape == (28, 28) and d.dtype == np.uint8 for d in x)
    assert ood.outside(ood.ink_stats(np.stack(x))).sum() <= 1            # drawn digits look like digits
    fams = bench_ood.non_digits(rng)
    assert set(fams) == {"dot", "specks", "flat line", "scribble", "tangle", "noise", "filled shape", "letter"}
    assert all(len(v) >= 32 for v in fams.values())
    assert ood.outside(ood.ink_stats(np.stack(fams["dot"]))).all()       # every dot is flagged


# ----------------------------------------------------------------------------- bench/ship_run.py

def test_ship_run_keeps_weights_and_card_and_thins_the_history(tmp_path):
    from bench import ship_run
    from helpers import fake_history, save_tiny_run
    from ponder.store.card import WEIGHTS, read_card, read_history
    history = fake_history(12)                                         # steps 10..120, validation at 120 only
    history[4]["val_accuracy"] = 0.7                                   # and at step 50
    run, _ = save_tiny_run(tmp_path / "trained-s0", history=history, steps=120)
    r = ship_run.ship(run, tmp_path / "assets" / "shipped", every=40)
    dest = tmp_path / "assets" / "shipped"
    assert [h["step"] for h in read_history(dest)] == [40, 50, 80, 120]    # multiples of 40, validations, the last
    assert r == dict(rows=12, kept=4, bytes=sum(f.stat().st_size for f in dest.iterdir()))
    assert (dest / WEIGHTS).read_bytes() == (run / WEIGHTS).read_bytes()
    card, before = read_card(dest), read_card(run)
    assert card["name"] == "shipped" and {**card, "name": before["name"]} == before
    with pytest.raises(SystemExit, match="exists"):
        ship_run.ship(run, dest)
