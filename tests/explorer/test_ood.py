"""explorer/ood.py: ink statistics of a 28x28 digit and the "does not look like a training digit" reasons."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from helpers import ASSETS
from explorer import ood


def test_ink_statistics_of_a_small_rectangle_worked_by_hand():
    img = np.zeros((28, 28), np.uint8)
    img[10:15, 8:13] = 255                        # a 5x5 solid square
    s = {k: float(v[0]) for k, v in ood.ink_stats(img).items()}
    # ink 25 pixels; box 5x5, so fill 25/25 = 1; solid: the inner 3x3 = 9 of 25 pixels have 8 ink neighbours
    assert s == pytest.approx(dict(ink=25.0, height=5.0, width=5.0, fill=1.0, solid=9 / 25, strokes=1.0, holes=0.0))


def test_real_test_digits_pass():
    with np.load(ASSETS / "examples" / "mnist-test-digits.npz") as f:
        x = f["x"]
    assert len(x) == 20 and all(ood.unlike_digits(d) == [] for d in x)
    assert ood.unlike_digits(x[0], confidence=0.999) == []


def test_a_dot_a_blank_image_and_a_straight_line_are_flagged():
    from explorer.canvas import preprocess_canvas
    dot = np.zeros((280, 280), np.uint8)
    dot[138:142, 138:142] = 255                   # a 4x4 tap, blown up to a 20x20 block by the preprocessing
    why = ood.unlike_digits(preprocess_canvas(dot))
    assert "far more ink than any training digit (a filled blob?)" in why and len(why) >= 2
    assert ood.unlike_digits(np.zeros((28, 28), np.uint8)) == ["very little ink for a digit"]
    line = np.zeros((280, 280), np.uint8)
    line[130:148, 20:260] = 255                   # a horizontal pen stroke: 20 columns by 1-2 rows
    assert any(w.startswith("flat") for w in ood.unlike_digits(preprocess_canvas(line)))


def test_an_unsure_answer_is_a_reason_of_its_own():
    with np.load(ASSETS / "examples" / "mnist-test-digits.npz") as f:
        digit = f["x"][0]
    (why,) = ood.unlike_digits(digit, confidence=0.668)
    assert why.startswith("the model is unsure: 66.8% for its answer")
    assert ood.unlike_digits(digit, confidence=ood.UNSURE) == []


@settings(max_examples=30, deadline=None)
@given(st.sets(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=8))
def test_separate_blocks_are_counted_as_strokes(cells):
    img = np.zeros((28, 28), np.uint8)
    for r, c in cells:                            # 3x3 blocks on a 4-pixel grid: a blank pixel between any two
        img[4 * r:4 * r + 3, 4 * c:4 * c + 3] = 200
    s = ood.ink_stats(img)
    assert s["strokes"][0] == len(cells) and s["ink"][0] == pytest.approx(len(cells) * 9 * 200 / 255)


@settings(max_examples=30, deadline=None)
@given(st.integers(-4, 4), st.integers(-4, 4))
def test_statistics_do_not_depend_on_where_the_ink_is(dy, dx):
    with np.load(ASSETS / "examples" / "mnist-test-digits.npz") as f:
        digit = f["x"][3]
    moved = np.roll(digit, (dy, dx), axis=(0, 1))       # this digit has 4 blank rows and 5 columns each side
    a, b = ood.ink_stats(digit), ood.ink_stats(moved)
    assert all(np.allclose(a[k], b[k]) for k in a)


def test_closed_loops_are_counted_as_holes():
    img = np.zeros((28, 28), np.uint8)
    for r, c in ((4, 4), (4, 14), (14, 4)):       # three 7x7 rings, each around a 3x3 gap
        img[r:r + 7, c:c + 7] = 255
        img[r + 2:r + 5, c + 2:c + 5] = 0
    img[11:14, 6:8] = img[6:8, 11:14] = 255       # joined into one stroke
    s = ood.ink_stats(img)
    assert (s["holes"][0], s["strokes"][0]) == (3, 1)
    assert "more closed loops than a digit has (an 8 has two; a scribble?)" in ood.unlike_digits(img)
    img[20:23, 20:23] = 255
    img[21, 21] = 0                               # a one-pixel gap (where strokes meet) is no loop
    assert ood.ink_stats(img)["holes"][0] == 3
    img[6:9, 6:9] = 255                           # the first ring filled in: two loops left
    assert ood.ink_stats(img)["holes"][0] == 2


def test_a_batch_in_chunks_equals_one_at_a_time():
    with np.load(ASSETS / "examples" / "mnist-test-digits.npz") as f:
        x = f["x"]
    whole, chunked = ood.ink_stats(x), ood.ink_stats(x, chunk=3)
    assert all(np.array_equal(whole[k], chunked[k]) for k in whole)
