"""bench/__main__.py: the command line's options reach the benchmarks' configs."""
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
