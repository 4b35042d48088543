"""Turn a drawing (or an uploaded picture) into a 28x28 digit the way MNIST was made.

MNIST: grey levels, white ink on black, the digit cropped to its bounding box, scaled to fit a
20x20 box keeping its aspect ratio (anti-aliased), then placed in a 28x28 image so that its
centre of mass is at the centre. A drawing's pen does not shrink with the digit: a small digit
drawn with the canvas's 18 px pen would come out with strokes 5-8 px wide, so a pen wider than
MNIST's after scaling is thinned first (pen_width, thin_to_pen). The network's normalisation (mean/std) is applied by
ponder.data.mnist_inputs, exactly as in training.

Pure numpy / PIL / torch; no Streamlit. Returns None for a blank or too faint image, so a page
can show a hint instead of an error. Uploaded files (read_upload) and the canvas's picture
(read_drawing) are read by explorer.drawing.pictures, one path with the formats, pixel caps and bomb check
of each: a plain array, or a one-line hint.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch
from PIL import Image, ImageFilter

from ponder import data as D
from .ood import INK
from .pictures import (BAD_DRAWING, CANVAS_SIDE, MAX_PIXELS, MAX_SIDE, MAX_UPLOAD_MB, UPLOAD_FORMATS, UPLOAD_TYPES,  # noqa: F401
                       image_to_array, read_drawing, read_upload)

BOX = 20                 # the digit is scaled to fit a BOX x BOX square
SIZE = 28                # inside a SIZE x SIZE image
MIN_INK = 32.0           # the brightest ink must reach this grey level (of 255), else "blank"
INK_FRACTION = INK       # pixels brighter than this fraction of the brightest one make the bounding box
                         # (explorer.drawing.ood measures the ink statistics with the same box)
PEN = 2.7                # MNIST's median pen width at 28x28, in pixels; its quartiles 2.3 and 3.2 (digit_pen of the
PEN_MAX = 3.2            # first 2,000 training digits): a drawing whose pen comes out wider is thinned to PEN
BLOB = 2.5               # a drawing whose pen width is over 1/BLOB of its longer side is a blob (a dot: 1/2), not strokes
THIN_SIDE = 200          # a drawing is thinned at most this many pixels on its longer side


def to_grey(img) -> Optional[np.ndarray]:
    """Any image array -> float32 [H, W] in 0..255, ink bright on a dark background. None if unusable.

    Accepts [H, W], [H, W, 1], [H, W, 2] (grey + alpha), [H, W, 3] RGB or [H, W, 4] RGBA, of uint8,
    bool, ints or floats (floats up to 1.0 are read as 0..1). A transparent background (the canvas
    without a background colour) counts as black and the alpha channel as ink; an opaque picture
    with a light background (dark ink on paper) is inverted.
    """
    if img is None:
        return None
    a = np.asarray(img)
    if a.dtype.kind not in "biuf" or a.size == 0 or a.ndim not in (2, 3) or min(a.shape[:2]) < 1:
        return None                                # objects, strings, complex numbers, wrong shapes
    if a.ndim == 3 and a.shape[2] not in (1, 2, 3, 4):
        return None
    kind = a.dtype.kind
    a = np.nan_to_num(a.astype(np.float32), nan=0.0, posinf=255.0, neginf=0.0)
    if kind in "fb" and a.max() <= 1.0:          # floats in 0..1 (and booleans) -> 0..255
        a = a * 255.0
    a = np.clip(a, 0.0, 255.0)
    if a.ndim == 2:
        lum, alpha = a, None
    else:
        c = a.shape[2]
        lum = a[..., :3] @ np.array([0.299, 0.587, 0.114], np.float32) if c >= 3 else a[..., 0]
        alpha = a[..., 3] / 255.0 if c == 4 else (a[..., 1] / 255.0 if c == 2 else None)
    if alpha is not None and (alpha < 0.5).mean() > 0.01:
        # a transparent background: the ink is wherever something was painted
        return (alpha * 255.0).astype(np.float32)
    if alpha is not None:
        lum = lum * alpha
    border = np.concatenate([lum[0], lum[-1], lum[:, 0], lum[:, -1]])
    if np.median(border) > 127.0:              # dark ink on a light background
        lum = 255.0 - lum
    return lum.astype(np.float32)


def preprocess_canvas(img) -> Optional[np.ndarray]:
    """A drawing -> uint8 [28, 28] MNIST-style digit, or None for a blank / too faint picture."""
    grey = to_grey(img)
    if grey is None:
        return None
    if max(grey.shape) > MAX_SIDE:             # shrink huge uploads first (keeps the aspect ratio)
        s = MAX_SIDE / max(grey.shape)
        size = (max(1, round(grey.shape[1] * s)), max(1, round(grey.shape[0] * s)))
        grey = np.asarray(Image.fromarray(np.ascontiguousarray(grey, np.float32)).resize(size, Image.BILINEAR), np.float32)
    grey = grey - float(grey.min())            # a grey background is no ink; a flat picture is blank
    top = float(grey.max())
    if not np.isfinite(top) or top < MIN_INK:
        return None
    rows, cols = np.nonzero(grey > INK_FRACTION * top)
    crop = grey[rows.min():rows.max() + 1, cols.min():cols.max() + 1] * (255.0 / top)   # full contrast
    return _centre_by_mass(_scaled(thin_to_pen(crop)))


preprocess = preprocess_canvas     # short alias


def pen_width(grey: np.ndarray) -> float:
    """The width of the strokes in pixels: 2 × area / edge of the ink above half the brightest (a stroke
    w wide and L long has area w·L and about 2·L edge pixels); 0 for no ink."""
    m = grey > 0.5 * float(grey.max()) if grey.size else np.zeros((0, 0), bool)
    p = np.pad(m, 1)
    inner = p[1:-1, 1:-1] & p[:-2, 1:-1] & p[2:, 1:-1] & p[1:-1, :-2] & p[1:-1, 2:]
    edge = int((m & ~inner).sum())
    return 2.0 * float(m.sum()) / edge if edge else 0.0


def _scaled(crop: np.ndarray) -> np.ndarray:
    """A crop scaled to fit BOX x BOX (aspect kept, anti-aliased), 0..255."""
    h, w = crop.shape
    s = BOX / max(h, w)
    size = (max(1, min(BOX, round(w * s))), max(1, min(BOX, round(h * s))))
    small = np.asarray(Image.fromarray(np.ascontiguousarray(crop, np.float32)).resize(size, Image.LANCZOS), np.float32)
    return np.clip(small, 0.0, 255.0)


def digit_pen(small: np.ndarray) -> float:
    """The pen width of a scaled digit in its own pixels, measured as PEN was on MNIST: at 10x, bilinear."""
    h, w = small.shape
    big = Image.fromarray(np.ascontiguousarray(small, np.float32)).resize((10 * w, 10 * h), Image.BILINEAR)
    return pen_width(np.asarray(big, np.float32)) / 10.0


def thin_to_pen(crop: np.ndarray) -> np.ndarray:
    """A cropped drawing whose pen, once scaled to BOX, is wider than PEN_MAX: eroded (a grey 3x3 minimum
    filter, pass after pass, 1 px off each side of a stroke per pass) until it comes out no wider than PEN,
    and cropped to its ink again. Unchanged when its pen is MNIST-like already, or when it is a blob (its
    "pen" over 1/BLOB of its longer side: a dot, a filled shape) rather than strokes; the last pass that
    leaves ink when none comes out that thin."""
    if digit_pen(_scaled(crop)) <= PEN_MAX or BLOB * pen_width(crop) > max(crop.shape):
        return crop
    if max(crop.shape) > THIN_SIDE:            # a big picture is thinned at THIN_SIDE (each pass filters every pixel)
        s = THIN_SIDE / max(crop.shape)
        size = (max(1, round(crop.shape[1] * s)), max(1, round(crop.shape[0] * s)))
        crop = np.clip(np.asarray(Image.fromarray(np.ascontiguousarray(crop, np.float32)).resize(size, Image.LANCZOS),
                                  np.float32), 0.0, 255.0)
    out, thin = crop, np.pad(crop, 1, mode="constant")
    for _ in range(int(pen_width(crop) / 2) + 1):      # each pass thins the pen by 2 px; no stroke is wider than this
        thin = np.asarray(Image.fromarray(np.ascontiguousarray(thin, np.float32)).filter(ImageFilter.MinFilter(3)),
                          np.float32)
        rows, cols = np.nonzero(thin > INK_FRACTION * 255.0)
        if not len(rows):
            break
        out = thin[rows.min():rows.max() + 1, cols.min():cols.max() + 1]
        if digit_pen(_scaled(out)) <= PEN:
            break
    return out


def _centre_by_mass(small: np.ndarray) -> Optional[np.ndarray]:
    """Place [h, w] (h, w <= 20) in a 28x28 image with its centre of mass at the centre."""
    h, w = small.shape
    mass = float(small.sum())
    if not mass > 0:
        return None
    ys, xs = np.arange(h) + 0.5, np.arange(w) + 0.5
    cy = float((small.sum(1) * ys).sum() / mass)
    cx = float((small.sum(0) * xs).sum() / mass)
    top = int(np.clip(round(SIZE / 2 - cy), 0, SIZE - h))
    left = int(np.clip(round(SIZE / 2 - cx), 0, SIZE - w))
    out = np.zeros((SIZE, SIZE), np.float32)
    out[top:top + h, left:left + w] = small
    out = np.round(out).astype(np.uint8)
    return out if out.max() > 0 else None


def keep_drawing(kept: Optional[dict], json_data: Optional[dict], url) -> tuple:
    """(digit, what to keep, why not) for a drawing canvas. kept: {"json", "digit"} from an earlier run, or None;
    json_data, url: the strokes (fabric JSON) and the picture (a data URL, read by read_drawing) the canvas
    returned now, as the browser sent them: anything at all. A canvas given a kept drawing as its initial drawing
    returns that JSON and no picture: the kept digit stands for it. Anything else is a new drawing. why: a
    one-line hint when the picture cannot be read, else ""."""
    json_data = json_data if isinstance(json_data, dict) else None
    objects = lambda j: (j or {}).get("objects") or []                  # noqa: E731 - the strokes
    if url is None and kept and objects(json_data) and objects(json_data) == objects(kept.get("json")):
        return kept.get("digit"), kept, ""
    arr, why = read_drawing(url)
    digit = preprocess_canvas(arr)
    return digit, {"json": json_data, "digit": digit}, why


def preprocess_upload(data) -> tuple[Optional[np.ndarray], str]:
    """An uploaded file -> (uint8 [28, 28] digit, "") or (None, a hint for the page)."""
    arr, why = read_upload(data)
    if arr is None:
        return None, why
    digit = preprocess_canvas(arr)
    if digit is None:
        return None, ("No digit found in the picture: it looks blank (one flat colour or too faint). Upload a "
                      "single digit, dark on light or light on dark.")
    return digit, ""


def model_input(digit_uint8: np.ndarray, angle: float = 0.0) -> torch.Tensor:
    """uint8 [28, 28] -> the network input [1, 1, 28, 28], rotated counter-clockwise by `angle` degrees.

    A quarter turn (90°, 180°, ...) moves every pixel onto another exactly, as torchvision's bilinear rotation
    does (the same numbers): it is done as such, without loading torchvision's transforms (3-7 s on the first
    use, during which the page's first drawing, which is also read turned 180°, would not answer a click)."""
    if float(angle) % 90 == 0:
        digit_uint8, angle = np.rot90(digit_uint8, int(float(angle) // 90) % 4), 0.0
    x = torch.as_tensor(np.ascontiguousarray(digit_uint8), dtype=torch.uint8).unsqueeze(0)
    return D.mnist_inputs(x, angle=float(angle))


def seen_image(x: torch.Tensor) -> np.ndarray:
    """The network input [1, 1, 28, 28] back to a displayable uint8 [28, 28] (what the model sees)."""
    img = (x[0, 0] * D.MNIST_STD + D.MNIST_MEAN).clamp(0, 1) * 255.0
    return img.round().to(torch.uint8).numpy()
