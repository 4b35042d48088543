"""Does an input look like the MNIST digits a model was trained on? (ink statistics; numpy / torch only)

A network answers every input with some class, often confidently: one dot is "0" at 99.9%. The model's
own confidence does not tell a dot from a digit (measured: bench/ood.py), but the ink does. Every MNIST
digit was scaled to fit a 20x20 box and centred by mass in 28x28, and so is every drawing or upload here
(explorer/drawing/canvas.py), so a few numbers of the 28x28 image compare directly with the training set:

ink       total ink in pixels (Σ grey / 255): a dot or a filled blob blown up to 20x20 has far more
height    rows of the ink's bounding box: a horizontal line is one or two rows high, a digit ~20
fill      ink / bounding-box area: strokes leave most of their box dark, a blob or noise fills it
solid     share of ink pixels (grey > 127) whose 8 neighbours are all ink: thick blobs, not pen strokes
strokes   pieces of ink (8-connected groups of pixels > 127 with at least MIN_PIECE pixels)
holes     closed loops: pieces of background (pixels <= 127) that the ink encloses, of MIN_HOLE pixels or more

ink_stats computes them for a batch; unlike_digits says, in words, which ones fall outside the range of
MNIST's training digits, and whether the model's answer is unsure (below UNSURE, which catches the
scribbles and letters the ink misses); an empty list: it looks like a digit. Both come from bench/ood.py.
turned_reason adds a digit that reads far more surely turned 180°: an upside-down 7 is "6" at 99.6%, but
turned it is "7" at 100%. rotation_reason adds an input rotated well beyond what the model saw in training, however
sure its answer: ink statistics do not change with a rotation, and a 4 rotated 60° reads "2" at 98%.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

INK = 0.2          # pixels brighter than this fraction of the brightest make the bounding box (explorer/drawing/canvas.py's too)
SOLID = 127        # grey level of a "solid" ink pixel (for strokes and solid)
MIN_PIECE = 3      # a piece of ink smaller than this many solid pixels is a speck, not a stroke
MIN_HOLE = 2       # an enclosed gap smaller than this many pixels is where strokes meet, not a loop

# Typical ranges: the 0.05th and 99.95th percentiles of each statistic over MNIST's 55,000 training
# digits (seeded split), rounded outward; height: 10 for p0.05 = 11 rows; holes: 2, as in an 8, below
# p99.95 = 3 (a third small loop: 0.2% of training digits, 40 of the 43 in the first 20,000 being 8s).
# `python -m bench.ood`, 2026-11-24, drawings thinned to MNIST's pen (explorer/drawing/canvas.py): these ranges flag
# 0.41% of the 10,000 test digits and 1 of 120 drawn digits, and 68% of 386 generated non-digits: dots 100%,
# specks 98%, flat lines 85%, tangles 54%, noise 100%, filled shapes 75%, but scribbles only 31% and letters
# 2% (unthinned: 70%; tangles 75%, filled shapes 77%); UNSURE catches more of those.
RANGES = {                # statistic: (lowest typical, highest typical)
    "ink": (25.0, 240.0),
    "height": (10, 28),
    "fill": (0.0, 0.85),
    "solid": (0.0, 0.62),
    "strokes": (1, 3),
    "holes": (0, 2),
}
# An answer below this probability is "unsure". Measured by `python -m bench.ood` (sample mode, seed 0): the
# shipped mnist-adaptive / mnist-default / mnist-rot22 answer 1.3% / 0.9% / 1.3% of the test digits below
# it, and 35-48% of scribbles, 28-46% of letters, 0-2% of dots (a dot is "0" with confidence, hence RANGES).
# Both together (the page's hint) flag 1.7% / 1.2% / 1.7% of the test digits and 83% of the non-digits
# (measured on unthinned drawings; thinned, mnist-adaptive: 1.7% of the test digits, 82% of the non-digits).
UNSURE = 0.9

# The answer for the input turned 180° (the page measures it with the same model, mode and seed) says the
# input is upside down when it is another digit than the answer (not 6 for 9 or 9 for 6, the digits that turn
# into each other), at least UNSURE, and either its chance of being wrong (1 - p) is TURNED_SURER times
# smaller, or the answer is a digit with a closed loop (LOOPED: all but 19% / 22% / 4% / 20% of the first
# 2,000 test 0s / 6s / 8s / 9s have one) while the input has none. The loop catches the upside-down 7 that
# reads "6" at 99.96% and turned "7" at 99.98%, not far surer. `python -m bench.upside_down` (the first 2,000
# test digits, sample mode, seed 0), upright / upside down, mnist-adaptive, -default, -rot22: TURNED_SURER 100
# flags 2.05% / 36%, 1.3% / 36%, 0.95% / 36%; 10 flags 3.1% / 41%, 1.95% / 39%, 1.6% / 39%.
TURNED_SURER = 100
TURNS_INTO = {6: 9, 9: 6}
LOOPED = (0, 6, 8, 9)

# A rotation more than this beyond the model's training rotations (U(±rotate_train)) is named, sure answer or not:
# the shipped models trained upright answer 99.1-99.4% of the test digits rightly, 92-95% turned 22.5° and 57-61%
# turned 45° (docs/results.md, the rotation rows of the shifted-inputs table), so by 20° beyond their training
# angles they err several times as often.
ROTATION_MARGIN = 20.0

WHY = {                   # (too low, too high): what it means, in words for the page
    "ink": ("very little ink for a digit", "far more ink than any training digit (a filled blob?)"),
    "height": ("flat: much wider than tall, unlike handwritten digits (a line?)", ""),
    "fill": ("the ink is scattered thinly over its box", "the ink fills its box like a blob, not a pen stroke"),
    "solid": ("", "thick solid areas, not pen strokes"),
    "strokes": ("", "many separate pieces of ink (training digits have one to three)"),
    "holes": ("", "more closed loops than a digit has (an 8 has two; a scribble?)"),
}


def _label(mask: torch.Tensor, eight: bool = True) -> torch.Tensor:
    """Connected pieces of a bool mask [M, H, W]: each pixel gets the largest pixel id (1..H·W) of its piece,
    0 off the mask; 8-connected (diagonals touch) or 4-connected."""
    m, h, w = mask.shape
    ids = torch.arange(1, h * w + 1, dtype=torch.float32).view(1, h, w).expand(m, h, w)
    lab = torch.where(mask, ids, torch.zeros(()))                                       # [M, H, W]
    while True:                                  # spread the largest id through each piece
        if eight:
            grown = F.max_pool2d(lab[:, None], 3, stride=1, padding=1)[:, 0]
        else:
            p = F.pad(lab, (1, 1, 1, 1))                                                 # [M, H+2, W+2]
            grown = torch.stack([lab, p[:, :-2, 1:-1], p[:, 2:, 1:-1], p[:, 1:-1, :-2], p[:, 1:-1, 2:]]).amax(0)
        grown = grown * mask
        if torch.equal(grown, lab):
            return lab
        lab = grown


def _count(lab: torch.Tensor, min_size: int, skip_border: bool = False) -> torch.Tensor:
    """Pieces of at least min_size pixels per image (without the piece touching the border) -> [M]."""
    counts = []
    for img in lab.long():
        ids, sizes = torch.unique(img[img > 0], return_counts=True)
        keep = sizes >= min_size
        if skip_border:
            edge = torch.cat([img[0], img[-1], img[:, 0], img[:, -1]])
            keep &= ~torch.isin(ids, edge)
        counts.append(int(keep.sum()))
    return torch.tensor(counts)


@torch.no_grad()
def ink_stats(images, chunk: int = 1024) -> dict:
    """uint8 digits [M, 28, 28] (or one [28, 28]) -> {statistic: float64 array [M]}, as the module says."""
    x = torch.as_tensor(np.asarray(images), dtype=torch.float32)
    if x.ndim == 2:
        x = x[None]
    if len(x) > chunk:                           # the labelling loop stops at each chunk's own slowest image
        parts = [ink_stats(x[i:i + chunk].numpy(), chunk) for i in range(0, len(x), chunk)]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    x = x / 255.0                                                                        # [M, 28, 28]
    ink = x.sum((1, 2))                                                                  # [M]
    top = x.amax((1, 2), keepdim=True).clamp_min(1e-6)
    lit = x > INK * top                                                                  # [M, 28, 28]
    rows, cols = lit.any(2), lit.any(1)                                                  # [M, 28]

    def extent(a):
        first = a.float().argmax(1)
        last = a.shape[1] - 1 - a.flip(1).float().argmax(1)
        return torch.where(a.any(1), last - first + 1, torch.zeros_like(first))
    height, width = extent(rows), extent(cols)
    fill = ink / (height * width).clamp_min(1)
    solid = x > SOLID / 255.0                                                            # [M, 28, 28]
    padded = F.pad(solid[:, None].float(), (1, 1, 1, 1))                                 # off the image: no ink
    inner = -F.max_pool2d(-padded, 3, stride=1)[:, 0] > 0.5                              # all 8 neighbours ink
    solid_share = (inner & solid).sum((1, 2)) / solid.sum((1, 2)).clamp_min(1)
    f64 = lambda t: t.double().numpy()          # noqa: E731
    # holes: pieces of background (4-connected, the pair of 8-connected ink) that do not reach the border
    holes = _count(_label(F.pad(~solid, (1, 1, 1, 1), value=True), eight=False), MIN_HOLE, skip_border=True)
    return dict(ink=f64(ink), height=f64(height), width=f64(width), fill=f64(fill), solid=f64(solid_share),
                strokes=f64(_count(_label(solid), MIN_PIECE)), holes=f64(holes))


def outside(stats: dict, ranges: dict = RANGES) -> np.ndarray:
    """bool [M]: some statistic falls outside its typical range."""
    bad = None
    for k, (lo, hi) in ranges.items():
        v = np.asarray(stats[k])
        b = (v < lo) | (v > hi)
        bad = b if bad is None else bad | b
    return bad


def turned_reason(pred: int, confidence: float, turned_pred: int, turned_confidence: float, holes=None):
    """A reason (words) when the answer for the input turned 180° says it is upside down, else None: the
    turned answer is another digit (not 6 for 9 or 9 for 6), at least UNSURE, and either far surer
    (TURNED_SURER) or the answer is a digit with a loop (LOOPED) while the input has none (holes = 0)."""
    if turned_pred == pred or TURNS_INTO.get(pred) == turned_pred or turned_confidence < UNSURE:
        return None
    turned = f"turned 180° it reads as {turned_pred} at {turned_confidence:.1%}"
    if (1.0 - turned_confidence) * TURNED_SURER < 1.0 - confidence:
        return f"{turned}, far surer than its answer {pred} at {confidence:.1%}: is it upside down?"
    if pred in LOOPED and holes == 0:
        return f"{turned}, and as it is it has no closed loop, which most {pred}s have: is it upside down?"
    return None


def unlike_digits(digit, confidence=None, turned=None) -> list:
    """One uint8 [28, 28] digit (and the model's probability for its answer, if known) -> the reasons it
    does not look like a training digit, in words (empty: it does). turned: (pred, confidence, turned_pred,
    turned_confidence), the answers for the input as it is and turned 180° (turned_reason, with its holes)."""
    s = {k: float(v[0]) for k, v in ink_stats(digit).items()}
    why = []
    if s["ink"] < RANGES["ink"][0]:          # (nearly) blank: its shape says nothing
        return [WHY["ink"][0]]
    for k, (lo, hi) in RANGES.items():
        if s[k] < lo and WHY[k][0]:
            why.append(WHY[k][0])
        elif s[k] > hi and WHY[k][1]:
            why.append(WHY[k][1])
    if confidence is not None and confidence < UNSURE:
        why.append(f"the model is unsure: {confidence:.1%} for its answer (the shipped models give {UNSURE:.0%} "
                   f"or more to about 99% of MNIST test digits)")
    if turned is not None and (reason := turned_reason(*turned, holes=s["holes"])):
        why.append(reason)
    return why


def rotation_reason(angle: float, trained_up_to: float, measured=()) -> "str | None":
    """A reason (words) when the input is rotated more than ROTATION_MARGIN beyond the model's training rotations
    (it saw digits turned uniformly by up to ±trained_up_to degrees), else None. measured: the model's test
    accuracy by rotation, [{"angle", "accuracy"}, ...] (its card's rotation study): the one nearest the angle is
    quoted."""
    turn = abs((float(angle) + 180.0) % 360.0 - 180.0)         # 0..180, either way round
    if turn <= trained_up_to + ROTATION_MARGIN:
        return None
    seen = f"turned by up to ±{trained_up_to:g}°" if trained_up_to else "upright"
    why = f"it is rotated {turn:g}° and the model saw only digits {seen} in training"
    near = min(measured, key=lambda r: abs(abs(float(r["angle"])) - turn), default=None)
    if near is not None:
        why += (f"; on test digits rotated {abs(float(near['angle'])):g}° it is right {float(near['accuracy']):.0%} "
                "of the time, however sure it sounds")
    return why
