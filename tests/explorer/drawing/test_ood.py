"""explorer/drawing/ood.py: ink statistics of a 28x28 digit and the "does not look like a training digit" reasons."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from helpers import ASSETS
from explorer.drawing import ood


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
    from explorer.drawing.canvas import preprocess_canvas
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


@pytest.mark.long
@settings(max_examples=30, deadline=None)
@given(st.sets(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=8))
def test_separate_blocks_are_counted_as_strokes(cells):
    img = np.zeros((28, 28), np.uint8)
    for r, c in cells:                            # 3x3 blocks on a 4-pixel grid: a blank pixel between any two
        img[4 * r:4 * r + 3, 4 * c:4 * c + 3] = 200
    s = ood.ink_stats(img)
    assert s["strokes"][0] == len(cells) and s["ink"][0] == pytest.approx(len(cells) * 9 * 200 / 255)


@pytest.mark.long
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


# ----------------------------------------------------------------------------- upside down

@pytest.mark.parametrize("pred, conf, turned_pred, turned_conf, flagged", [
    (6, 0.996, 7, 0.99998, True),     # 1 - p 4e-3 against 2e-5, 200 times smaller
    (6, 0.996, 7, 0.9998, False),     # a drawn 7 upside down (mnist-adaptive): 20 times smaller (its loop tells)
    (7, 0.99998, 6, 0.996, False),    # the turned answer is the less sure one
    (6, 0.99, 9, 0.99999, False),     # a 6 turned is a 9: no sign of being upside down
    (9, 0.99, 6, 0.99999, False),
    (2, 0.99, 2, 0.99999, False),     # the same answer either way
    (7, 0.5, 4, 0.89, False),         # the turned answer is unsure itself
    (3, 0.99, 5, 0.99991, True),      # 1 - p 0.01 against 0.00009: 111 times smaller, TURNED_SURER is 100
    (3, 0.99, 5, 0.9998, False),      # 50 times smaller
])
def test_an_answer_far_surer_turned_180_degrees_says_upside_down(pred, conf, turned_pred, turned_conf, flagged):
    assert ood.TURNED_SURER == 100
    reason = ood.turned_reason(pred, conf, turned_pred, turned_conf, holes=1)     # loops say nothing here
    assert (reason is not None) == flagged
    if flagged:
        assert f"reads as {turned_pred} at {turned_conf:.1%}" in reason and "upside down" in reason


@pytest.mark.parametrize("pred, holes, flagged", [
    (6, 0, True),         # a straight 7 drawn upside down (mnist-adaptive): "6" at 99.96%, turned "7" at 99.98%
    (6, 1, False),        # a 6 with its loop
    (6, None, False),     # holes not known
    (7, 0, False),        # 7s have no loop
    (0, 0, True), (8, 0, True), (9, 0, False),    # a loopless 9 turned is read as a 6: what a 9 turns into
])
def test_a_looped_answer_without_a_loop_and_a_sure_other_digit_turned_says_upside_down(pred, holes, flagged):
    turned = 6 if pred == 9 else 7
    reason = ood.turned_reason(pred, 0.9996, turned, 0.9998, holes=holes)
    assert (reason is not None) == flagged
    if flagged:
        assert "no closed loop" in reason and f"reads as {turned} at 100.0%" in reason


@pytest.mark.long
@given(pred=st.integers(0, 9), conf=st.floats(0, 1), turned=st.integers(0, 9), tconf=st.floats(0, 1))
def test_only_a_surer_other_digit_turned_flags_and_the_reason_joins_the_list(pred, conf, turned, tconf):
    reason = ood.turned_reason(pred, conf, turned, tconf, holes=0)          # the 1 below has no loop
    if reason is not None:
        assert turned != pred and {pred, turned} != {6, 9} and tconf >= ood.UNSURE
        assert tconf > conf or pred in ood.LOOPED
    digit = np.zeros((28, 28), np.uint8)
    digit[4:24, 13:15] = 255                                   # a 1: nothing unlike a digit in its ink
    why = ood.unlike_digits(digit, None, (pred, conf, turned, tconf))
    assert (reason in why) if reason else not any("turned 180°" in w for w in why)


def test_a_rotation_beyond_training_is_named_with_the_measured_accuracy_nearest_it():
    measured = [{"angle": 0.0, "accuracy": 0.99}, {"angle": 45.0, "accuracy": 0.57}, {"angle": 67.5, "accuracy": 0.21}]
    # trained upright: 20° beyond is still within the margin, 25° is not (the slider's next step)
    assert ood.rotation_reason(20, 0.0, measured) is None and ood.rotation_reason(-20, 0.0) is None
    assert ood.rotation_reason(60, 0.0, measured) == (
        "it is rotated 60° and the model saw only digits upright in training; on test digits rotated 67.5° it is "
        "right 21% of the time, however sure it sounds")                # 67.5 is 7.5 from 60, 45 is 15
    assert ood.rotation_reason(-25, 0.0) == "it is rotated 25° and the model saw only digits upright in training"
    # trained on U(±22.5°): 40° is 17.5 beyond, 45° is 22.5 beyond
    assert ood.rotation_reason(40, 22.5) is None
    assert ood.rotation_reason(45, 22.5).startswith("it is rotated 45° and the model saw only digits turned by up to ±22.5°")
    assert "rotated 180°" in ood.rotation_reason(-180, 0.0)


@given(st.floats(-720, 720), st.floats(0, 180))
def test_a_rotation_is_named_exactly_when_its_turn_is_beyond_the_margin(angle, trained):
    turn = min(abs(angle) % 360, 360 - abs(angle) % 360)
    assert (ood.rotation_reason(angle, trained) is None) == (turn <= trained + ood.ROTATION_MARGIN + 1e-9) or \
        abs(turn - trained - ood.ROTATION_MARGIN) < 1e-6
