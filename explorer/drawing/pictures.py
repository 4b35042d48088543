"""Pictures a visitor sends, read one way: an uploaded file and the drawing canvas's picture both go through
read_picture(), which decodes only the formats it is given (recognised from the bytes, never a name), refuses a
picture with more pixels than its cap from the header alone (before a pixel is decoded), turns Pillow's
decompression-bomb check into an error, and turns every decoder failure into a one-line hint. Any PIL mode
(1, L, LA, P, RGB, RGBA, I, I;16, F, CMYK, ...) becomes a plain array for explorer.drawing.canvas.to_grey.

The canvas sends its picture as a data URL (a PNG of the canvas, 280 x 280) in the component's state, which a
visitor's browser can set to anything: read_drawing() bounds its length before decoding the base64, and reads
it as a PNG no larger than the canvas allows.
"""
from __future__ import annotations

import base64
import binascii
import io
import warnings
from typing import Optional

import numpy as np
from PIL import Image, ImageOps

MAX_SIDE = 2048          # larger pictures are shrunk first (keeps uploads cheap)
MAX_UPLOAD_MB = 10       # the upload widget's size limit
MAX_PIXELS = 40_000_000  # refuse bigger uploads before decoding them (decompression bombs)
# and uploads whose decoded pixels would take more bytes than this (1 a pixel for grey, 4 for colour, 16-bit and
# float pictures): reading a picture peaks at about 2.5 times its decoded size (a 5 kB 40-megapixel PNG with a
# transparent palette took 406 MB, a 300 kB 16-bit RGBA one 369 MB and 11 s). A JPEG is decoded at a reduced
# scale first (Pillow's draft: 1/2, 1/4 or 1/8, keeping at least MAX_SIDE a side), so a phone photo stays readable.
MAX_DECODED_BYTES = 64 * 2**20
# The only decoders an upload reaches, picked by Pillow from the bytes (never the file name): the
# upload widget's types. JPEG opens the MPO files of many phone cameras too; PPM reads .pgm and .pbm.
UPLOAD_FORMATS = ("PNG", "JPEG", "GIF", "BMP", "TIFF", "WEBP", "PPM")
UPLOAD_TYPES = ("png", "jpg", "jpeg", "gif", "bmp", "tif", "tiff", "webp", "pgm", "ppm", "pbm")   # file names
CANVAS_SIDE = 280        # the drawing canvas's width and height in pixels (explorer.app.pickers.drawing_ui)
# The canvas exports a CANVAS_SIDE x CANVAS_SIDE PNG (fabric's toDataURL, multiplier 1); twice that a side
# leaves room for a high-DPI export. An RGBA PNG of that size stored uncompressed is 1.26 MB.
DRAWING_MAX_PIXELS = (2 * CANVAS_SIDE) ** 2
DRAWING_MAX_BYTES = 2 * 1024 * 1024
DRAWING_MAX_URL = DRAWING_MAX_BYTES * 4 // 3 + 64      # its data URL: base64 of those bytes and the prefix
BAD_DRAWING = "The drawing could not be read; clear the canvas (hover it) and draw the digit again."


def read_picture(data: bytes, formats: tuple, max_pixels: int, what: str = "picture",
                 retry: str = "try a PNG or JPEG") -> tuple[Optional[np.ndarray], str]:
    """Bytes of a picture -> (array for explorer.drawing.canvas.preprocess_canvas, "") or (None, why not, one line).
    Only `formats` are decoded; a picture over `max_pixels`, or whose pixels would take over MAX_DECODED_BYTES
    decoded, is refused from its header, before decoding."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data), formats=formats)
            w, h = img.size
            if w < 1 or h < 1:
                return None, f"The {what} has no pixels."
            if w * h > max_pixels:
                return None, (f"The {what} is {w}×{h} pixels, too large to read; at most "
                              f"{_megapixels(max_pixels)} are read.")
            if img.format == "JPEG" and max(w, h) > 2 * MAX_SIDE:
                s = MAX_SIDE / max(w, h)                        # decoded at 1/2, 1/4 or 1/8 of its size,
                img.draft(img.mode, (round(w * s), round(h * s)))   # its longer side at least MAX_SIDE
                w, h = img.size
            per = 1 if img.mode in ("1", "L") else 4
            if w * h * per > MAX_DECODED_BYTES:
                return None, (f"The {what} is {w}×{h} pixels ({img.mode} mode), too large to read; shrink it "
                              f"below {_megapixels(MAX_DECODED_BYTES // per)}.")
            img.load()
            try:
                img = ImageOps.exif_transpose(img) or img       # phone photos: upright as they were taken
            except Exception:                                    # noqa: BLE001 - a bad EXIF block is no reason to fail
                pass
            return image_to_array(img), ""
    except (Image.DecompressionBombError, Image.DecompressionBombWarning):
        return None, f"The {what} is too large to read; shrink it first."
    except Image.UnidentifiedImageError:
        return None, f"Not a {what} this app reads: {retry}."
    except Exception as e:                    # noqa: BLE001 - any decoder failure is a bad picture, never a traceback
        return None, f"Not a {what} this app can read ({e.__class__.__name__}); {retry}."


def _megapixels(n: int) -> str:
    return f"{n / 10**6:.3g} megapixels" if n >= 10**6 else f"{n:,} pixels"


def read_upload(data) -> tuple[Optional[np.ndarray], str]:
    """Bytes of an uploaded picture (or a file object) -> (array for preprocess_canvas, "") or (None, why not)."""
    if data is None:
        return None, "No file."
    if hasattr(data, "getvalue"):
        data = data.getvalue()
    data = bytes(data)
    if not data:
        return None, "The file is empty."
    if len(data) > MAX_UPLOAD_MB * 1024 * 1024:
        return None, f"The file is over {MAX_UPLOAD_MB} MB; upload a smaller picture."
    return read_picture(data, UPLOAD_FORMATS, MAX_PIXELS,
                        retry="upload a PNG, JPEG, GIF, BMP, TIFF, WebP or PGM/PPM/PBM file")


def read_drawing(url) -> tuple[Optional[np.ndarray], str]:
    """The canvas's picture, a data URL 'data:image/png;base64,...' -> (array, "") or (None, why not, one line).
    (None, "") when there is no picture (a canvas that has sent nothing yet)."""
    if url is None:
        return None, ""
    if not isinstance(url, str):
        return None, BAD_DRAWING
    if len(url) > DRAWING_MAX_URL:                    # the length first: nothing is decoded
        return None, f"The drawing sent is larger than the {CANVAS_SIDE}×{CANVAS_SIDE} canvas; clear it and draw again."
    head, sep, body = url.partition(";base64,")
    if not sep or head.strip().lower() != "data:image/png":
        return None, BAD_DRAWING
    try:
        data = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return None, BAD_DRAWING
    if not data:
        return None, BAD_DRAWING
    return read_picture(data, ("PNG",), DRAWING_MAX_PIXELS, "drawing",
                        retry="clear the canvas (hover it) and draw the digit again")


def image_to_array(img: Image.Image) -> np.ndarray:
    """A PIL image of any mode -> an array to_grey() reads: [H, W] grey, [H, W, 2] grey + alpha,
    [H, W, 3] RGB or [H, W, 4] RGBA. Shrinks it to MAX_SIDE first. 16-bit, 32-bit and float
    pictures are stretched to 0..255 (their own min..max; NaN counts as 0)."""
    try:
        img.seek(0)                                  # the first frame of an animation
    except (AttributeError, EOFError, ValueError):
        pass
    mode = img.mode
    if mode in ("I", "F") or mode.startswith("I;"):
        img = img.convert("I") if mode.startswith("I;") else img
        img = img.convert("F")
        if max(img.size) > MAX_SIDE:
            img.thumbnail((MAX_SIDE, MAX_SIDE), Image.BILINEAR)
        a = np.nan_to_num(np.asarray(img, np.float64), nan=0.0, posinf=0.0, neginf=0.0)
        lo, hi = float(a.min()), float(a.max())
        return ((a - lo) * (255.0 / (hi - lo)) if hi > lo else np.zeros_like(a)).astype(np.float32)
    if mode not in ("L", "LA", "RGB", "RGBA"):
        transparent = "transparency" in img.info or mode in ("PA", "La", "RGBa")
        target = {"1": "L", "La": "LA"}.get(mode, "RGBA" if transparent else "RGB")
        img = img.convert(target)                     # P, PA, CMYK, YCbCr, LAB, HSV, RGBX, ...
    if max(img.size) > MAX_SIDE:
        img.thumbnail((MAX_SIDE, MAX_SIDE), Image.BILINEAR)
    return np.asarray(img)
