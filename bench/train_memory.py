"""Peak memory of ponder.training.loop.train for a few configs, against ponder.training.memory.estimate.

    python -m bench.train_memory            # the calibration configs, one fresh process each (about a minute)
    python -m bench.train_memory --one '{"task": "parity", "hidden": 64}'   # one config, JSON printed

Each config runs in a fresh Python process with one torch thread: imports and the optimiser's first use
(which imports torch._dynamo) come first, then the process's resident set size (RSS, VmRSS in /proc/self/status) is
read, then train() runs 3 steps and its final validation pass on stand-in data (random MNIST-shaped
images: 2,048 training and 1,000 validation images, so one validation chunk of 1,000 as with the real
5,000), and the peak RSS (resource.getrusage ru_maxrss) is read. "measured" is peak minus the RSS before
train(): what a training job adds to a process that already holds the data. The data itself is what
ponder.tasks.mnist.task.MnistTask.data_bytes counts (MemoryEstimate.data). Prints a table of measured against estimated bytes.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys

CONFIGS = [    # sizes around the defaults, each changing one of batch / N / hidden / reader from the first
    dict(task="mnist", hidden=64, max_steps=20, batch_size=128),
    dict(task="mnist", hidden=64, max_steps=20, batch_size=512),
    dict(task="mnist", hidden=256, max_steps=50, batch_size=128),
    dict(task="mnist", hidden=64, max_steps=20, batch_size=2048),
    dict(task="mnist", hidden=512, max_steps=100, batch_size=256),
    dict(task="mnist", hidden=64, max_steps=20, batch_size=128, reader="coarse"),
    dict(task="parity", hidden=512, max_steps=100, batch_size=64),
    dict(task="parity", hidden=256, max_steps=100, batch_size=1024),
    dict(task="parity", hidden=256, max_steps=50, batch_size=256),      # tests/ponder/training/test_memory.py's
    dict(task="parity", hidden=16, max_steps=5, batch_size=8),          # what does not grow: OVERHEAD
]


def status_bytes(field: str) -> int:
    """VmRSS / VmHWM (peak RSS) of this process, from /proc/self/status."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise OSError(f"no {field} in /proc/self/status")


def measure_one(over: dict, reset_peak: bool = False) -> dict:
    """The extra peak RSS of train() for TrainConfig(**over), in a fresh process (the calibration). reset_peak:
    in a process that has run other things (the tests): freed heap memory is handed back to the system first
    (glibc's malloc_trim), so memory train() reuses counts again, and the peak RSS is reset (Linux's
    /proc/self/clear_refs) so that it is train()'s own."""
    import torch
    torch.set_num_threads(1)
    from ponder import data as D
    from ponder.tasks import train_config
    from ponder.training.memory import estimate
    from ponder.training.loop import train
    cfg = train_config(over["task"], device="cpu", log_every=10_000, **{k: v for k, v in over.items() if k != "task"})
    g = torch.Generator().manual_seed(0)
    mnist = None
    if cfg.task == "mnist":
        def imgs(n):
            return torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8, generator=g)
        mnist = D.Mnist(imgs(2048), torch.randint(0, 10, (2048,), generator=g), imgs(1000),
                        torch.randint(0, 10, (1000,), generator=g), imgs(0), torch.zeros(0, dtype=torch.int64))
        cfg.epochs = 3 / -(-2048 // cfg.batch_size)                 # 3 steps
    else:
        cfg.steps_per_epoch, cfg.epochs = 3, 1.0
    torch.optim.Adam([torch.zeros(1, requires_grad=True)], fused=True)   # its first use imports torch._dynamo
    if reset_peak:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")                                            # VmHWM := VmRSS
    before = status_bytes("VmRSS")
    res = train(cfg, data=mnist)
    peak = status_bytes("VmHWM") if reset_peak else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    est = estimate(cfg)
    return dict(config=over, steps=res.record.steps, before=before, peak=peak, measured=peak - before,
                estimated=est.total - est.data, parts=est.parts())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--one", help="a JSON dict of TrainConfig fields: measure it here and print JSON")
    args = ap.parse_args(argv)
    if args.one:
        print(json.dumps(measure_one(json.loads(args.one))))
        return
    print(f"{'config':<90} {'measured MB':>11} {'estimated MB':>12} {'est/meas':>8}")
    for over in CONFIGS:
        out = subprocess.run([sys.executable, "-m", "bench.train_memory", "--one", json.dumps(over)],
                             capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        if out.returncode != 0:
            print(f"{json.dumps(over):<90} failed: {out.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{json.dumps(over):<90} {r['measured'] / 2**20:>11.1f} {r['estimated'] / 2**20:>12.1f} "
              f"{r['estimated'] / max(r['measured'], 1):>8.2f}")


if __name__ == "__main__":
    main()
