"""How often explorer.drawing.ood.turned_reason (with the input's holes) flags MNIST test digits as upside down: as they are (false alarms) and
turned 180° (hits), per model, at the page's rule and at other TURNED_SURER ratios.

    PONDER_DATA=... python -m bench.upside_down [--models assets/mnist-adaptive,...] [--items 2000]

Sample mode, seed 0, the first --items test digits: the numbers behind explorer/drawing/ood.py's TURNED_SURER.
"""
from __future__ import annotations

import argparse

import numpy as np

from explorer.drawing import ood
from explorer.drawing.digits import mnist_dataset
from ponder import data as D
from ponder.analysis.unroll import unroll_stats
from ponder.store.checkpoint import load_checkpoint


def rates(model, x, y, ratio: float) -> tuple[float, float]:
    """(share of upright digits flagged, share of upside-down digits flagged) at this TURNED_SURER."""
    read = {a: unroll_stats(model, D.mnist_inputs(x, angle=a), y, "sample", 1000, 0) for a in (0.0, 180.0)}
    p = {a: (s["pred"].numpy(), s["confidence"].numpy().astype(np.float64)) for a, s in read.items()}
    holes = {0.0: ood.ink_stats(x.numpy())["holes"],
             180.0: ood.ink_stats(np.rot90(x.numpy(), 2, axes=(1, 2)).copy())["holes"]}
    keep, ood.TURNED_SURER = ood.TURNED_SURER, ratio
    try:
        def flagged(a, b):
            return np.mean([ood.turned_reason(int(p[a][0][i]), p[a][1][i], int(p[b][0][i]), p[b][1][i],
                                              holes=float(holes[a][i])) is not None for i in range(len(y))])
        return float(flagged(0.0, 180.0)), float(flagged(180.0, 0.0))
    finally:
        ood.TURNED_SURER = keep


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="assets/mnist-adaptive,assets/mnist-default,assets/mnist-rot22")
    ap.add_argument("--items", type=int, default=2000)
    args = ap.parse_args(argv)
    data = mnist_dataset()
    x, y = data.test_x[:args.items], data.test_y[:args.items]
    for path in args.models.split(","):
        model = load_checkpoint(path).model
        for ratio in sorted({10, 100, 1000, ood.TURNED_SURER}):
            up, down = rates(model, x, y, ratio)
            print(f"{path} ratio {ratio:g}{' (the page)' if ratio == ood.TURNED_SURER else ''}: flags {up:.2%} of "
                  f"upright and {down:.2%} of upside-down test digits ({len(y):,} each)")


if __name__ == "__main__":
    main()
