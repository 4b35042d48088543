"""Peak memory of a test unroll (ponder.analysis.unroll.unroll_stats) for wide MNIST models, against
ponder.training.memory.input_bytes: the table beside ponder.training.memory.MEASURE_MARGIN.

    python -m bench.infer_memory            # each config in a fresh process, one torch thread (about a minute)

Each process warms up on two inputs, hands freed memory back (malloc_trim), resets the peak RSS (Linux's
/proc/self/clear_refs), runs one unroll of `batch` random images and prints the peak RSS added against the estimate.
"""
from __future__ import annotations

import json
import subprocess
import sys

CONFIGS = [   # (MnistConfig fields, batch)
    (dict(channels1=16, channels2=32), 1000),
    (dict(channels1=1024, channels2=16), 300),
    (dict(channels1=4096, channels2=8), 20),
    (dict(channels1=16, channels2=512), 500),
    (dict(channels1=16, channels2=32, reader="coarse"), 1000),
    (dict(channels1=1024, channels2=16, reader="coarse"), 20),
    (dict(channels1=4096, channels2=8, reader="coarse"), 5),
]


def measure_one(over: dict, batch: int) -> dict:
    import ctypes
    import os
    os.environ["PONDER_MAX_MEASURE_MEMORY_MB"] = "65536"             # the whole batch in one forward
    import torch
    torch.set_num_threads(1)
    from bench.train_memory import status_bytes
    from ponder.training import memory
    from ponder.analysis.unroll import unroll_stats
    from ponder.tasks import build_model, get_task
    model = build_model("mnist", get_task("mnist").model_config_cls(**over), 20, 0.2)
    x, y = torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,))
    unroll_stats(model, x[:2], y[:2], "sample", 2)                  # first-use costs outside the measurement
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")                                                # VmHWM := VmRSS
    before = status_bytes("VmRSS")
    unroll_stats(model, x, y, "sample", batch)
    measured = status_bytes("VmHWM") - before
    est = memory.input_bytes(model) * batch
    return dict(model=over, batch=batch, measured_mb=measured / 2**20, estimated_mb=est / 2**20, ratio=est / measured)


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--one":
        over, batch = json.loads(sys.argv[2])
        print(json.dumps(measure_one(over, batch)))
        return
    print(f"{'model (MNIST, hidden 64, N 20)':<42}{'batch':>6}{'measured MB':>13}{'estimated MB':>14}{'est/meas':>10}")
    for over, batch in CONFIGS:
        out = subprocess.run([sys.executable, "-m", "bench.infer_memory", "--one", json.dumps([over, batch])],
                             capture_output=True, text=True, check=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        name = f"{over.get('reader', 'cnn')} reader, channels {over['channels1']} / {over['channels2']}"
        print(f"{name:<42}{batch:>6}{r['measured_mb']:>13.1f}{r['estimated_mb']:>14.1f}{r['ratio']:>10.2f}")


if __name__ == "__main__":
    main()
