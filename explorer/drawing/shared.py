"""A digit and how it is looked at, written into a shared link: the 28×28 digit in a few hundred characters, the
rotation, the seed and the Q-exit's q, each read back with a one-line reason when a link's value cannot be used.
Pure (numpy, zlib, base64): no Streamlit, no torch.

The digit's 784 grey levels, exactly (a link shows the very answer and halting its sender saw), are deflated (zlib:
MNIST-like digits are mostly black; the first 2,000 test digits take 72 to 390 characters, median 255) and written
in URL-safe base64 without padding. Reading it back inflates at most 784 bytes: a link cannot make the server
inflate more. The picture of a digit as the drawing canvas's initial drawing (one image object with hard pixel edges) is
drawing_json.
"""
from __future__ import annotations

import base64
import binascii
import io
import math
import re
import zlib
from typing import Optional

import numpy as np
from PIL import Image

SIDE = 28
PIXELS = SIDE * SIDE                # bytes of a digit
MAX_CHARS = 1100                    # longer than any digit's text (784 random bytes deflate to 795: 1,060 characters)
TEXT = re.compile(r"[A-Za-z0-9_-]+")
ANGLE_STEP, ANGLE_MAX = 5, 180      # the rotation slider's step and range
SEED_MAX = 10**9                    # the seed box's range
TEST_DIGITS = 10_000                # MNIST's test set
Q_STEP = 0.05                       # the Q-exit slider's step (0 to 1)


def encode_digit(digit) -> str:
    """uint8 [28, 28] -> its link text (URL-safe base64 of the deflated pixels)."""
    a = np.asarray(digit)
    if a.shape != (SIDE, SIDE) or a.dtype != np.uint8:
        raise ValueError(f"a digit is {SIDE}×{SIDE} uint8 pixels, not {'×'.join(map(str, a.shape))} {a.dtype}")
    return base64.urlsafe_b64encode(zlib.compress(a.tobytes(), 9)).rstrip(b"=").decode("ascii")


def decode_digit(text) -> tuple[Optional[np.ndarray], str]:
    """A link's digit text -> (uint8 [28, 28], "") or (None, why it is not a digit, a few words)."""
    text = str(text)
    if len(text) > MAX_CHARS:
        return None, f"too long for a digit: {len(text):,} characters, at most {MAX_CHARS:,}"
    if not TEXT.fullmatch(text):
        return None, "not a digit's text (letters, digits, - and _ only)"
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        inflate = zlib.decompressobj()
        pixels = inflate.decompress(data, PIXELS + 1)
    except (binascii.Error, ValueError, zlib.error):
        return None, "not a digit's text (it does not decode)"
    if len(pixels) != PIXELS or not inflate.eof or inflate.unused_data:
        return None, "not a digit's text (the wrong number of pixels)"
    return np.frombuffer(pixels, np.uint8).reshape(SIDE, SIDE).copy(), ""


def parse_angle(text) -> tuple[Optional[float], str]:
    """?angle=45 -> (45.0, "") or (None, why): a multiple of ANGLE_STEP from -ANGLE_MAX to ANGLE_MAX, the slider's."""
    why = f"not a multiple of {ANGLE_STEP} from -{ANGLE_MAX} to {ANGLE_MAX}"
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None, why
    ok = math.isfinite(v) and -ANGLE_MAX <= v <= ANGLE_MAX and v % ANGLE_STEP == 0
    return (v + 0.0, "") if ok else (None, why)          # + 0.0: -0 reads as 0


def parse_seed(text) -> tuple[Optional[int], str]:
    """?seed=7 -> (7, "") or (None, why): a whole number from 0 to SEED_MAX, the seed box's."""
    t = str(text)
    if t.isdigit() and t.isascii() and len(t) <= 10 and int(t) <= SEED_MAX:
        return int(t), ""
    return None, f"not a whole number from 0 to {SEED_MAX:,}"


def parse_test(text) -> tuple[Optional[int], str]:
    """?test=1034 -> (1034, "") or (None, why): the index of an MNIST test digit (0 to TEST_DIGITS - 1)."""
    t = str(text)
    if t.isdigit() and t.isascii() and len(t) <= 5 and int(t) < TEST_DIGITS:
        return int(t), ""
    return None, f"not a test digit's index (0 to {TEST_DIGITS - 1:,})"


def parse_q(text) -> tuple[Optional[float], str]:
    """?q=0.65 -> (0.65, "") or (None, why): a multiple of Q_STEP from 0 to 1, the Q-exit slider's."""
    why = f"not a multiple of {Q_STEP:g} from 0 to 1"
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None, why
    steps = v / Q_STEP if math.isfinite(v) else -1.0
    ok = 0.0 <= v <= 1.0 and abs(steps - round(steps)) < 1e-6
    return (round(round(steps) * Q_STEP, 2), "") if ok else (None, why)


def link_text(value: float) -> str:
    """A number as a link writes it: 45 for 45.0, 0.65 for 0.65."""
    return f"{value:g}"


def drawing_json(digit, side: int) -> dict:
    """The drawing canvas's initial drawing showing a digit (uint8 [28, 28]) on a canvas `side` pixels wide: one
    image object filling it with hard pixel edges, on the canvas's black background (what the canvas saves for a
    drawing is fabric JSON)."""
    buf = io.BytesIO()
    Image.fromarray(np.asarray(digit, np.uint8)).save(buf, format="PNG")
    src = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")
    return {"version": "6.0.0", "background": "#000000",
            "objects": [{"type": "Image", "originX": "left", "originY": "top", "left": 0, "top": 0, "width": SIDE,
                         "height": SIDE, "scaleX": side / SIDE, "scaleY": side / SIDE,
                         "imageSmoothing": False, "selectable": False, "src": src}]}
