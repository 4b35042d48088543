"""Measure the "does not look like a training digit" hint (explorer/drawing/ood.py): `python -m bench.ood`.

1. The percentiles of each ink statistic over MNIST's training digits (the ranges in explorer/drawing/ood.RANGES).
2. With explorer.drawing.ood.RANGES: the false-alarm rate on the 10,000 test digits and on drawn digits (polylines
   drawn like the canvas draws them), and the hit rate on generated non-digits, per family.
3. What the shipped models' own confidence and E[n] say on the same inputs (sample mode, seed 0, the page's
   default), the rates of an answer below explorer.drawing.ood.UNSURE, and of the hint (ink or unsure) as a whole.

Everything is drawn on a 280x280 black canvas with an 18 px white pen (as on the page) and goes through
explorer.drawing.canvas.preprocess_canvas, like a drawing. Seeded: the same numbers every run. PONDER_DATA names
the MNIST folder. --json PATH also writes the numbers.
"""
from __future__ import annotations

import argparse
import json
import math

import numpy as np
import torch
from PIL import Image, ImageDraw, ImageFont

from explorer.drawing.canvas import model_input, preprocess_canvas
from explorer.drawing import ood
from ponder.store.checkpoint import load_checkpoint
from ponder.data import load_mnist
from ponder.analysis.unroll import expected_steps_per_input, unroll_stats

CANVAS, PEN = 280, 18
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
PERCENTILES = (0.05, 99.95)


def canvas() -> tuple[Image.Image, ImageDraw.ImageDraw]:
    img = Image.new("L", (CANVAS, CANVAS), 0)
    return img, ImageDraw.Draw(img)


def done(img) -> np.ndarray | None:
    return preprocess_canvas(np.asarray(img))


def line_at(rng, angle_lo, angle_hi):
    img, d = canvas()
    a = math.radians(rng.uniform(angle_lo, angle_hi))
    length, cx, cy = rng.uniform(80, 260), rng.uniform(110, 170), rng.uniform(110, 170)
    dx, dy = math.cos(a) * length / 2, math.sin(a) * length / 2
    d.line([(cx - dx, cy - dy), (cx + dx, cy + dy)], fill=255, width=PEN)
    return done(img)


def non_digits(rng) -> dict:
    """{family: [uint8 [28, 28]]}: inputs that are no digit, 32-64 of each family."""
    fam = {k: [] for k in ("dot", "specks", "flat line", "scribble", "tangle", "noise", "filled shape", "letter")}
    for _ in range(48):
        img, d = canvas()                                    # a dot or a tap, anywhere
        r, x, y = rng.uniform(3, 40), rng.uniform(40, 240), rng.uniform(40, 240)
        d.ellipse([x - r, y - r, x + r, y + r], fill=255)
        fam["dot"].append(done(img))
        img, d = canvas()                                    # two to five small specks
        for _ in range(rng.integers(2, 6)):
            r, x, y = rng.uniform(3, 9), rng.uniform(20, 260), rng.uniform(20, 260)
            d.ellipse([x - r, y - r, x + r, y + r], fill=255)
        fam["specks"].append(done(img))
        fam["flat line"].append(line_at(rng, -25, 25))      # a stroke across (lines near vertical are a 1)
        img, d = canvas()                                    # a random scribble over the box
        pts = [tuple(rng.uniform(30, 250, 2)) for _ in range(rng.integers(6, 14))]
        d.line(pts, fill=255, width=PEN, joint="curve")
        fam["scribble"].append(done(img))
        img, d = canvas()                                    # a dense back-and-forth tangle
        pts = [tuple(rng.uniform(30, 250, 2)) for _ in range(rng.integers(25, 50))]
        d.line(pts, fill=255, width=PEN, joint="curve")
        fam["tangle"].append(done(img))
        a = (rng.random((CANVAS, CANVAS)) < rng.uniform(0.02, 0.5)) * 255      # salt noise, any density
        fam["noise"].append(preprocess_canvas(a.astype(np.uint8)))
        img, d = canvas()                                    # a filled rectangle, ellipse or triangle
        x0, y0 = rng.uniform(20, 120, 2)
        x1, y1 = x0 + rng.uniform(40, 150), y0 + rng.uniform(40, 150)
        [d.rectangle, d.ellipse, lambda b, fill: d.polygon([(b[0], b[3]), (b[2], b[3]), ((b[0] + b[2]) / 2, b[1])],
                                                           fill=fill)][int(rng.integers(3))]([x0, y0, x1, y1], fill=255)
        fam["filled shape"].append(done(img))
    font = ImageFont.truetype(FONT, 220)
    # letters and signs that look like no digit (O, S, I, Z, B, G, q, ... would be fair digits)
    for ch in "AEFHKMNRWXYaekmnwx#@%&*+?":
        for stroke_w in (0, 6):
            img, d = canvas()
            d.text((CANVAS / 2, CANVAS / 2), ch, fill=255, font=font, anchor="mm", stroke_width=stroke_w, stroke_fill=255)
            fam["letter"].append(done(img))
    return {k: [v for v in vs if v is not None] for k, vs in fam.items()}


# digits as a person draws them: polylines on a unit square, (x, y) with y down
_ARC = lambda cx, cy, rx, ry, a0, a1, n=12: [(cx + rx * math.cos(math.radians(a)), cy + ry * math.sin(math.radians(a)))  # noqa: E731
                                             for a in np.linspace(a0, a1, n)]
DRAWN = {
    0: [_ARC(0.5, 0.5, 0.28, 0.4, 0, 360, 24)],
    1: [[(0.45, 0.12), (0.52, 0.9)]],
    2: [_ARC(0.5, 0.32, 0.25, 0.2, 200, 380) + [(0.25, 0.88), (0.78, 0.88)]],
    3: [_ARC(0.48, 0.3, 0.24, 0.18, 200, 450) + _ARC(0.48, 0.68, 0.27, 0.2, 270, 520)],
    4: [[(0.62, 0.1), (0.2, 0.62), (0.8, 0.62)], [(0.62, 0.1), (0.62, 0.92)]],
    5: [[(0.72, 0.12), (0.32, 0.12), (0.28, 0.45)] + _ARC(0.48, 0.64, 0.26, 0.24, 220, 500)],
    6: [[(0.62, 0.1), (0.3, 0.55)] + _ARC(0.5, 0.68, 0.22, 0.2, 180, 540, 24)],
    7: [[(0.22, 0.14), (0.78, 0.14), (0.42, 0.9)]],
    8: [_ARC(0.5, 0.3, 0.2, 0.18, 90, 450, 20) + _ARC(0.5, 0.68, 0.24, 0.21, 270, 630, 20)],
    9: [_ARC(0.5, 0.32, 0.22, 0.2, 0, 360, 20) + [(0.72, 0.32), (0.66, 0.9)]],
}


def drawn_digits(rng, per_digit: int = 12) -> tuple[list, list]:
    """Each digit's polylines at random sizes (35-95% of the canvas), positions, slants and jitter."""
    xs, ys = [], []
    for label, strokes in DRAWN.items():
        for _ in range(per_digit):
            img, d = canvas()
            size, slant = rng.uniform(0.35, 0.95) * CANVAS, rng.uniform(-0.2, 0.2)
            ox, oy = rng.uniform(0, CANVAS - size * 0.8), rng.uniform(0, CANVAS - size)
            for s in strokes:
                pts = [(ox + size * (x + slant * (0.5 - y)) + rng.normal(0, 2), oy + size * y + rng.normal(0, 2))
                       for x, y in s]
                d.line(pts, fill=255, width=PEN, joint="curve")
            xs.append(done(img))
            ys.append(label)
    return xs, ys


def rate(flags) -> str:
    flags = np.asarray(flags, bool)
    return f"{flags.mean():7.2%} ({int(flags.sum())}/{len(flags)})"


def model_view(model, imgs: list, labels=None) -> dict:
    """Each input's answer confidence (sample mode, seed 0: as the page answers by default) and E[n]."""
    x = torch.cat([model_input(i) for i in imgs])
    y = torch.as_tensor(labels if labels is not None else [0] * len(imgs))
    st = unroll_stats(model, x, y, "sample", 1000, 0)
    return dict(confidence=st["confidence"].double().numpy(), expected_steps=expected_steps_per_input(st).double().numpy(),
                correct=st["correct"].numpy().astype(bool) if labels is not None else None)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="", help="also write the numbers to this file")
    ap.add_argument("--models", default="assets/mnist-adaptive,assets/mnist-default,assets/mnist-rot22")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    mnist = load_mnist(download=False)
    out = {}
    train = ood.ink_stats(mnist.train_x.numpy())
    print(f"1. ink statistics over the {len(mnist.train_y):,} MNIST training digits (percentiles)")
    print(f"   {'statistic':10s} {'min':>8s} {'p0.05':>8s} {'p1':>8s} {'median':>8s} {'p99':>8s} {'p99.95':>8s} {'max':>8s}   RANGES")
    out["train_percentiles"] = {}
    for k in ("ink", "height", "width", "fill", "solid", "strokes", "holes"):
        v = train[k]
        q = np.percentile(v, [0, PERCENTILES[0], 1, 50, 99, PERCENTILES[1], 100])
        out["train_percentiles"][k] = dict(zip(("min", "p0.05", "p1", "median", "p99", "p99.95", "max"), q.tolist()))
        print(f"   {k:10s} " + " ".join(f"{x:8.3f}" for x in q) + f"   {ood.RANGES.get(k, '')}")
    print(f"   training digits flagged: {rate(ood.outside(train))}")

    test = ood.ink_stats(mnist.test_x.numpy())
    test_bad = ood.outside(test)
    rng = np.random.default_rng(0)
    drawn, drawn_y = drawn_digits(rng)
    drawn_bad = ood.outside(ood.ink_stats(np.stack(drawn)))
    fams = non_digits(rng)
    print("\n2. with explorer.drawing.ood.RANGES")
    print(f"   false alarms, MNIST test digits: {rate(test_bad)}")
    for k in ood.RANGES:
        lo, hi = ood.RANGES[k]
        print(f"      of which {k:8s} outside [{lo:g}, {hi:g}]: {rate((test[k] < lo) | (test[k] > hi))}")
    print(f"   false alarms, drawn digits:      {rate(drawn_bad)}")
    out.update(test_false_alarms=float(test_bad.mean()), drawn_false_alarms=float(drawn_bad.mean()), families={})
    fam_bad = {}
    for name, imgs in fams.items():
        bad = fam_bad[name] = ood.outside(ood.ink_stats(np.stack(imgs)))
        out["families"][name] = dict(n=len(imgs), hit_rate=float(bad.mean()))
        print(f"   hits, {name:13s}: {rate(bad)}")
    allhits = np.concatenate(list(fam_bad.values()))
    out["non_digit_hit_rate"] = float(allhits.mean())
    print(f"   hits, all non-digits: {rate(allhits)}")

    print("\n3. the models' view (sample mode, seed 0): answer confidence and E[n], median [p5, p95]")
    p5 = lambda a: f"{np.median(a):.3f} [{np.percentile(a, 5):.3f}, {np.percentile(a, 95):.3f}]"    # noqa: E731
    test_imgs, test_labels = list(mnist.test_x.numpy()), mnist.test_y.tolist()      # once for every model
    for path in [p for p in args.models.split(",") if p]:
        model = load_checkpoint(path, device="cpu").model.eval()
        t = model_view(model, test_imgs, test_labels)
        dr = model_view(model, drawn, drawn_y)
        nd = {k: model_view(model, v) for k, v in fams.items()}
        print(f"   {path}: test accuracy {t['correct'].mean():.4f}, drawn-digit accuracy {dr['correct'].mean():.3f}")
        allc = np.concatenate([v["confidence"] for v in nd.values()])
        for name, c, e in (("test digits", t["confidence"], t["expected_steps"]),
                           ("drawn digits", dr["confidence"], dr["expected_steps"]),
                           ("non-digits", allc, np.concatenate([v["expected_steps"] for v in nd.values()]))):
            print(f"      {name:12s} confidence {p5(c)}  E[n] {p5(e)}")
        u = ood.UNSURE
        print(f"      answer below UNSURE = {u:g}: test digits {rate(t['confidence'] < u)}, drawn digits "
              f"{rate(dr['confidence'] < u)}, non-digits {rate(allc < u)}")
        print(f"      the whole hint (ink or unsure): test digits {rate(test_bad | (t['confidence'] < u))}, drawn digits "
              f"{rate(drawn_bad | (dr['confidence'] < u))}")
        both = {k: fam_bad[k] | (nd[k]["confidence"] < u) for k in fams}
        for k, b in both.items():
            print(f"         {k:13s} unsure {rate(nd[k]['confidence'] < u)}   hint {rate(b)}")
        allb = np.concatenate(list(both.values()))
        print(f"         {'all non-digits':13s} unsure {rate(allc < u)}   hint {rate(allb)}")
        out[path] = dict(test_accuracy=float(t["correct"].mean()), drawn_accuracy=float(dr["correct"].mean()),
                         test_unsure=float((t["confidence"] < u).mean()),
                         test_hint=float((test_bad | (t["confidence"] < u)).mean()),
                         drawn_hint=float((drawn_bad | (dr["confidence"] < u)).mean()),
                         non_digit_hint=float(allb.mean()),
                         families_hint={k: float(b.mean()) for k, b in both.items()})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
