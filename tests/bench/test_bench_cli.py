"""bench/__main__.py: the command line's options reach the benchmarks' configs; bench/report.py's early-exit prose (fast:
these run in the default tier, unlike the measured runs of test_bench.py)."""
from argparse import Namespace

from bench.__main__ import make_config


def _args(**kw):
    return Namespace(**{**dict(quick=False, threads=None, cpu_time=False, repeats=None, models=None, batch_sizes=None,
                               single_images=None), **kw})


def test_early_exit_takes_batch_sizes_and_single_images_from_the_command_line():
    cfg = make_config("early-exit", _args(batch_sizes="1,1000", single_images=300, models="parity-15", cpu_time=True))
    assert cfg.batch_sizes == (1, 1000) and cfg.single_images == 300
    assert cfg.models == ("parity-15",) and cfg.clock == "cpu" and cfg.synthetic_steps is None
    default = make_config("early-exit", _args())
    assert default.batch_sizes == (10000, 1000, 1) and default.single_images == 100


def _early_exit_doc(whole_at_one: float) -> dict:
    """bench/early_exit.py's JSON for one model at 10,000 and 1 image per call (made-up figures)."""
    def model(whole):
        mode = dict(mean_steps=5.0, accuracy=0.99, early_images_per_s=500.0, whole_speedup=whole, rec_speedup=1.5,
                    ideal_speedup=4.0, target_speedup=2.8, met=False)
        return dict(design="cnn reader", full_images_per_s=400.0, full_seconds=1.0, rec_full_seconds=0.1,
                    modes={"sample": mode})
    by_batch = [dict(batch_size=10000, images=10000, models={"m": model(1.1)}),
                dict(batch_size=1, images=100, models={"m": model(whole_at_one)})]
    return dict(config=dict(repeats=2, clock="cpu"),
                results=dict(by_batch=by_batch, primary_batch_size=10000, target_fraction=0.7))


def test_the_early_exit_section_names_what_is_still_slower_than_the_full_unroll():
    from bench.report import early_exit_section
    slow = early_exit_section(_early_exit_doc(0.93))
    assert "Slower than the full unroll at these sizes (whole speed-up below 1×): `m` (sample) at 1 per call, 0.93×" in slow
    fast = early_exit_section(_early_exit_doc(1.25))
    assert "Slower than" not in fast
    assert "early exit is at least as fast as the full unroll for every model and mode (the lowest whole speed-up: " \
           "1.25×, `m` (sample) at 1 per call)" in fast
    assert "12 calls a step in sample mode and 16 in deterministic mode" in fast
