"""explorer/drawing/pictures.py: uploads and the canvas's drawing are read one way, and whatever a visitor's browser
sends as a drawing (any data URL, any picture, any size) ends in an array or a one-line hint, with nothing
larger than the canvas decoded."""
import base64
import struct
import time
import zlib

import numpy as np
import pytest
from PIL import Image, ImageFile

from explorer.drawing import canvas
from explorer.drawing import pictures
from helpers import encode_image, stroke


def png(w: int, h: int, colour_type: int, bit_depth: int, idat: bytes) -> bytes:
    """A PNG written chunk by chunk (so a huge one costs nothing to make): IHDR, one IDAT, IEND."""
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    ihdr = struct.pack(">IIBBBBB", w, h, bit_depth, colour_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode()


def big_png() -> bytes:
    """A complete, valid 9000 x 9000 one-bit PNG (81 M pixels; 10 MB of rows, deflated to ~10 kB)."""
    rows = (b"\x00" + b"\x00" * (9000 // 8)) * 9000                # filter byte + 1,125 bytes of bits per row
    return png(9000, 9000, 0, 1, zlib.compress(rows, 9))


def seven_url() -> str:
    return url(encode_image(Image.fromarray(stroke()).convert("RGBA"), "PNG"))


@pytest.fixture
def no_decoding(monkeypatch):
    """Any pixel decoded fails the test: a refusal must come from the header alone."""
    def load(self):
        raise AssertionError(f"decoded a {self.size} picture")
    monkeypatch.setattr(ImageFile.ImageFile, "load", load)


def test_a_canvas_drawing_is_read_like_an_upload():
    arr, why = pictures.read_drawing(seven_url())
    assert why == "" and arr.shape == (280, 280, 4)
    assert canvas.preprocess_canvas(arr) is not None
    assert pictures.read_drawing(None) == (None, "")                  # nothing sent yet: no hint of its own


@pytest.mark.parametrize("make", [big_png, lambda: png(9000, 9000, 6, 8, zlib.compress(b"\x00" * 36001))],
                         ids=["valid-1-bit", "rgba-header"])
def test_a_9000_pixel_drawing_is_refused_from_its_header(make, no_decoding):
    """The issue's 9000 x 9000 picture (410 kB sent, 4.45 GB of server memory): refused before a pixel is decoded
    (the fixture fails any decode), in one line that gives its size."""
    data = make()
    assert len(data) < 64 * 1024                                       # a small message carries it
    t = time.perf_counter()
    arr, why = pictures.read_drawing(url(data))
    assert arr is None and "9000×9000" in why and "\n" not in why
    assert time.perf_counter() - t < 0.5


def test_the_canvas_cap_is_the_canvas_and_uploads_keep_theirs(no_decoding):
    """A drawing larger than twice the canvas a side is refused; the same picture uploaded is within the upload
    cap (so the upload path decodes it: the fixture's AssertionError, caught as a bad picture)."""
    side = 2 * pictures.CANVAS_SIDE + 1
    data = png(side, side, 0, 1, zlib.compress(b"\x00" * ((side + 7) // 8 + 1) * side))
    arr, why = pictures.read_drawing(url(data))
    assert arr is None and f"{side}×{side}" in why
    arr, why = pictures.read_upload(data)
    assert arr is None and "AssertionError" in why                     # decoding was tried


@pytest.mark.parametrize("sent", [
    "garbage", "data:image/png,iVBORw0KGgo=",                           # no ";base64,"
    "data:image/png;base64,@@@not base64@@@", "data:image/png;base64,", "data:image/png;base64,AAAA",
    "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40).decode(),  # a broken PNG
    url(encode_image(Image.new("RGB", (28, 28)), "JPEG"), "image/png"),   # a JPEG: not what the canvas sends
    url(encode_image(Image.new("RGB", (28, 28)), "GIF"), "image/gif"),
    "data:text/html;base64," + base64.b64encode(b"<script>").decode(),
    5, 1.5, ["data:image/png;base64,"], {"data": 1}, b"\x89PNG",
])
def test_whatever_a_browser_sends_as_a_drawing_is_one_line(sent):
    arr, why = pictures.read_drawing(sent)
    assert arr is None and why and "\n" not in why, why


def test_a_data_url_over_the_canvas_size_is_refused_before_it_is_decoded(monkeypatch):
    def b64decode(*a, **k):
        raise AssertionError("decoded")
    monkeypatch.setattr(pictures.base64, "b64decode", b64decode)
    arr, why = pictures.read_drawing("data:image/png;base64," + "A" * pictures.DRAWING_MAX_URL)
    assert arr is None and "larger than the 280×280 canvas" in why


def test_keep_drawing_reads_the_picture_the_canvas_sent_and_says_why_not():
    drawn = {"objects": [{"type": "path"}], "background": "#000000"}
    digit, kept, why = canvas.keep_drawing(None, drawn, seven_url())
    assert digit is not None and why == "" and kept == {"json": drawn, "digit": digit}
    digit, kept2, why = canvas.keep_drawing(kept, drawn, url(big_png()))
    assert digit is None and "9000×9000" in why and kept2["digit"] is None
    for raw in ("a string", [1, 2], 7):                                # strokes that are not fabric JSON
        digit, kept3, why = canvas.keep_drawing(kept, raw, "garbage")
        assert digit is None and kept3["json"] is None and why == pictures.BAD_DRAWING
    assert np.array_equal(canvas.keep_drawing(kept, {"objects": 5}, seven_url())[0], kept["digit"])


@pytest.mark.parametrize("make, mode", [
    (lambda: png(6300, 6300, 3, 8, zlib.compress(b"\x00" * 6301 * 6300)), "P"),      # a palette: read as RGBA
    (lambda: png(6300, 6300, 6, 16, zlib.compress(b"\x00" * (6300 * 8 + 1) * 100)), "RGBA"),
    (lambda: png(6300, 6300, 0, 16, zlib.compress(b"\x00" * (6300 * 2 + 1) * 100)), "I;16"),
])
def test_an_upload_whose_decoded_pixels_are_too_large_is_refused_from_its_header(make, mode, no_decoding):
    """40 megapixels in colour or 16 bits: a 5 kB palette PNG took 406 MB to read, a 16-bit RGBA one 369 MB and
    11 s; each is under the pixel cap and refused by its decoded size, before a pixel is decoded."""
    data = make()
    assert len(data) < 200 * 1024
    arr, why = pictures.read_upload(data)
    assert arr is None and f"6300×6300 pixels ({mode} mode)" in why and "\n" not in why, why


def test_a_large_photo_is_decoded_at_a_reduced_scale():
    """A 20-megapixel JPEG (80 MB decoded) is read at half its size (20 MB), so phone photos stay readable."""
    img = Image.new("RGB", (5000, 4000), (255, 255, 255))
    img.paste((0, 0, 0), (2000, 1000, 2600, 3000))                       # a dark bar: a "1"
    arr, why = pictures.read_upload(encode_image(img, "JPEG", quality=50))
    assert why == "" and arr.shape[:2] == (1638, 2048)                  # 2500 x 2000 decoded, shrunk to MAX_SIDE
    assert canvas.preprocess_canvas(arr) is not None
