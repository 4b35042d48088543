"""explorer/drawing/shared.py: a digit and its view in a link's text, and the link's values read back with a reason."""
import base64
import zlib

import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra.numpy import arrays

from helpers import ASSETS
from explorer.drawing import shared

DIGITS = arrays(np.uint8, (28, 28))


@given(DIGITS)
def test_any_digit_comes_back_exactly_and_fits_the_limit(digit):
    text = shared.encode_digit(digit)
    back, why = shared.decode_digit(text)
    assert why == "" and back.dtype == np.uint8 and np.array_equal(back, digit)
    assert len(text) <= shared.MAX_CHARS and shared.TEXT.fullmatch(text)


def test_the_bundled_test_digits_make_short_links():
    with np.load(ASSETS / "examples" / "mnist-test-digits.npz") as f:
        x = f["x"]
    lengths = [len(shared.encode_digit(d)) for d in x]
    # mostly black: deflate takes the 784 bytes to about a third (the first 2,000 MNIST test digits: 72 to 390
    # characters, median 255)
    assert max(lengths) < 400, lengths


def test_the_limit_holds_the_least_compressible_digit():
    noise = np.random.default_rng(0).integers(0, 256, (28, 28), dtype=np.uint8)
    assert 1000 < len(shared.encode_digit(noise)) <= shared.MAX_CHARS     # 784 bytes deflate to 795: 1,060 characters


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@pytest.mark.parametrize("text, why", [
    ("A" * 1101, "too long for a digit: 1,101 characters, at most 1,100"),
    ("abc def", "not a digit's text (letters, digits, - and _ only)"),
    ("A", "not a digit's text (it does not decode)"),                  # one base64 character is no byte
    (_b64(b"not zlib"), "not a digit's text (it does not decode)"),
    (_b64(zlib.compress(bytes(783))), "not a digit's text (the wrong number of pixels)"),
    (_b64(zlib.compress(bytes(100_000))), "not a digit's text (the wrong number of pixels)"),   # 100 kB in 140 chars
    (_b64(zlib.compress(bytes(784)) + b"x"), "not a digit's text (the wrong number of pixels)"),  # bytes after it
])
def test_malformed_digit_texts_say_why(text, why):
    assert shared.decode_digit(text) == (None, why)


@given(st.text(max_size=1200))
def test_any_text_is_a_digit_or_a_reason(text):
    digit, why = shared.decode_digit(text)
    assert (digit is None) != (why == "")


def test_view_values_by_hand():
    assert [shared.parse_angle(t)[0] for t in ("45", "-180", "180", "0", "-0", "5.0")] == [45, -180, 180, 0, 0, 5]
    assert str(shared.parse_angle("-0")[0]) == "0.0"
    assert [shared.parse_angle(t)[0] for t in ("7", "185", "nan", "inf", "", "x")] == [None] * 6
    assert shared.parse_angle("7")[1] == "not a multiple of 5 from -180 to 180"
    assert [shared.parse_seed(t)[0] for t in ("0", "7", "1000000000")] == [0, 7, 10**9]
    assert [shared.parse_seed(t)[0] for t in ("-1", "1000000001", "1.5", "٣", "", "99999999999")] == [None] * 6
    assert [shared.parse_q(t)[0] for t in ("0", "0.65", "1", "0.3")] == [0, 0.65, 1, 0.3]
    assert [shared.parse_q(t)[0] for t in ("0.66", "1.05", "-0.05", "nan", "q")] == [None] * 5
    assert [shared.parse_test(t)[0] for t in ("0", "9999")] == [0, 9999]
    assert [shared.parse_test(t)[0] for t in ("10000", "-1", "3.0", "")] == [None] * 4
    assert [shared.link_text(v) for v in (45.0, -5.0, 0.65)] == ["45", "-5", "0.65"]


def test_the_canvas_drawing_is_one_picture_of_the_digit_filling_the_canvas():
    import io
    from PIL import Image
    digit = np.arange(784, dtype=np.uint32).reshape(28, 28).astype(np.uint8)
    obj, = shared.drawing_json(digit, 280)["objects"]
    assert obj["scaleX"] * obj["width"] == 280 == obj["scaleY"] * obj["height"] and not obj["imageSmoothing"]
    png = base64.b64decode(obj["src"].split(",", 1)[1])
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(png))), digit)
