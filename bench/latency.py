"""Benchmark 4: explorer latency, from a 280x280 canvas image to the finished per-step figures.

What the "Ponder a digit" page (pages/digit.py) does after each stroke, with the explorer's own
functions and no Streamlit:
    preprocess   explorer.drawing.canvas.preprocess_canvas(rgba)              -> uint8 [28, 28]
    input        explorer.drawing.canvas.model_input(digit, angle), seen_image(x)
    ponder       ponder.analysis.studies.trace_input(model, x, mode, seed)   (full unroll + early-exit ponder())
    figures      explorer.figures.halting.trace_figures: the four charts of explorer.app.views.trace_charts_ui
    total        the four above; p50 / p95 over `n_inputs` inputs
Separately, `to_json`: serialising the four figures (what st.plotly_chart sends to the browser).

Inputs: MNIST test digits (or the 20 bundled example digits when MNIST is absent), each scaled
by a random factor, moved by a random offset and upscaled to a 280x280 RGBA canvas (white ink on
black, as the canvas draws), half of them rotated by a random angle (the page's rotation slider),
each with its own seed. The model is the explorer's default, mnist-default. The first call of a
process (plotly's lazy imports and templates) is reported apart as `cold_ms`; `warmup` more inputs
are run untimed. Target: p95 <= 150 ms on CPU.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
from PIL import Image

from ponder.store.checkpoint import load_checkpoint

from . import common

TARGET_P95_MS = 150.0
CANVAS = 280
CLASSES = [str(c) for c in range(10)]


@dataclass
class LatencyConfig:
    model: str = "mnist-default"   # the explorer's default model (assets/)
    n_inputs: int = 100            # timed inputs
    warmup: int = 3                # untimed inputs after the cold first call
    mode: str = "sample"           # the page's default halting mode
    max_angle: float = 45.0        # odd-numbered inputs are rotated by U(-d, d) degrees (5-degree steps)
    threads: Optional[int] = None
    seed: int = 0

    @classmethod
    def quick(cls, **kw) -> "LatencyConfig":
        return cls(**{**dict(n_inputs=5, warmup=1), **kw})


def canvas_images(digits: np.ndarray, n: int, seed: int = 0) -> list:
    """n RGBA uint8 [280, 280, 4] canvases from 28x28 digits: random size (55-95% of the canvas),
    random position, bilinear upscaling (soft stroke edges, like a brush), white ink on black."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        d = digits[i % len(digits)]
        side = int(rng.uniform(0.55, 0.95) * CANVAS)
        big = np.asarray(Image.fromarray(d).resize((side, side), Image.BILINEAR))       # [side, side]
        top, left = (int(v) for v in rng.integers(0, CANVAS - side + 1, size=2))
        grey = np.zeros((CANVAS, CANVAS), np.uint8)
        grey[top:top + side, left:left + side] = big
        rgba = np.empty((CANVAS, CANVAS, 4), np.uint8)                                  # [280, 280, 4]
        rgba[..., :3] = grey[..., None]
        rgba[..., 3] = 255
        out.append(rgba)
    return out


def load_digits(mnist=None, data_dir: Optional[str] = None) -> tuple[np.ndarray, str]:
    if mnist is None:
        try:
            mnist = common.load_mnist(data_dir)
        except Exception:            # no MNIST here: the bundled examples still make varied inputs
            mnist = None
    from explorer.drawing.digits import digit_pool
    pool = digit_pool(mnist)                     # the MNIST test set, or the digits in assets/examples
    return pool.x, pool.source


def one_input(model, rgba, angle: float, mode: str, seed: int) -> tuple[dict, list]:
    """Stage timings (seconds) for one canvas image, and the figures."""
    from explorer.drawing import canvas
    from explorer.figures import halting as figures
    from ponder.analysis.studies import trace_input

    t = {}
    t0 = time.perf_counter()
    digit = canvas.preprocess_canvas(rgba)
    t1 = time.perf_counter()
    x = canvas.model_input(digit, angle)
    canvas.seen_image(x)
    t2 = time.perf_counter()
    tr = trace_input(model, x, mode, seed)
    t3 = time.perf_counter()
    figs = list(figures.trace_figures(tr, CLASSES).values())              # what views.trace_charts_ui draws
    t4 = time.perf_counter()
    for f in figs:
        f.to_json()
    t5 = time.perf_counter()
    t.update(preprocess=t1 - t0, input=t2 - t1, ponder=t3 - t2, figures=t4 - t3, to_json=t5 - t4)
    t["total"] = t4 - t0
    t["total_with_json"] = t5 - t0
    return t, figs


def run(cfg: LatencyConfig, mnist=None, data_dir: Optional[str] = None, out=None, quick: bool = False) -> dict:
    threads = common.set_threads(cfg.threads)
    machine = common.machine_info("cpu")
    model = load_checkpoint(common.ASSETS / cfg.model).model
    digits, source = load_digits(mnist, data_dir)
    rng = np.random.default_rng(cfg.seed)
    total = 1 + cfg.warmup + cfg.n_inputs
    images = canvas_images(digits, total, cfg.seed)
    angles = [0.0 if i % 2 == 0 else float(5 * round(rng.uniform(-cfg.max_angle, cfg.max_angle) / 5))
              for i in range(total)]
    stages = {k: [] for k in ("preprocess", "input", "ponder", "figures", "to_json", "total", "total_with_json")}
    cold = None
    for i in range(total):
        t, figs = one_input(model, images[i], angles[i], cfg.mode, cfg.seed + i)
        if i == 0:
            cold = t
        elif i > cfg.warmup:
            for k, v in t.items():
                stages[k].append(v)
    summary = {k: common.summary_ms(v) for k, v in stages.items()}
    results = {
        "stages": summary, "cold_ms": {k: 1000 * v for k, v in cold.items()}, "inputs": cfg.n_inputs,
        "input_source": source, "figures": len(figs),
        "p50_ms": summary["total"]["p50_ms"], "p95_ms": summary["total"]["p95_ms"],
        "target_p95_ms": TARGET_P95_MS, "met": summary["total"]["p95_ms"] <= TARGET_P95_MS,
    }
    common.print_table(["stage", "p50 ms", "p95 ms", "mean ms", "max ms"],
                       [[k, s["p50_ms"], s["p95_ms"], s["mean_ms"], s["max_ms"]] for k, s in summary.items()],
                       title=f"Explorer latency, canvas -> per-step figures ({cfg.n_inputs} inputs, {threads} threads)")
    print(f"total p95 {summary['total']['p95_ms']:.1f} ms (target <= {TARGET_P95_MS:g} ms); "
          f"first call of the process {cold['total'] * 1000:.0f} ms")
    return common.write_result("latency", out, quick, machine, cfg, results)
