"""explorer/inputs.py: typed angle lists and parity vectors, as properties over any text and by example."""
import math
import time

import pytest
import torch
from hypothesis import given, strategies as st

from explorer import inputs


def test_parse_numbers_by_example():
    assert inputs.parse_numbers("0, 15 30;45", 0, 180, "angles") == [0, 15, 30, 45]
    assert inputs.parse_numbers("45, 45, 0", 0, 180, "angles") == [45, 0]          # duplicates dropped, order kept
    with pytest.raises(ValueError, match="angles: 'x'"):
        inputs.parse_numbers("0, x", 0, 180, "angles")
    with pytest.raises(ValueError, match="outside"):
        inputs.parse_numbers("200", 0, 180, "angles")
    with pytest.raises(ValueError, match="at least one"):
        inputs.parse_numbers(" , ", 0, 180, "angles")


@given(st.lists(st.floats(-360, 360, allow_nan=False), min_size=1, max_size=8), st.sampled_from([", ", " ", ";"]))
def test_parse_numbers_reads_back_what_was_written(values, sep):
    got = inputs.parse_numbers(sep.join(repr(v) for v in values), -360, 360, "angles")
    assert got == list(dict.fromkeys(values))


@given(st.text(max_size=20))
def test_parse_numbers_gives_numbers_in_range_or_one_plain_error(text):
    try:
        got = inputs.parse_numbers(text, 0, 180, "ranges")
    except ValueError as e:
        assert str(e).startswith("ranges: ") and "\n" not in str(e)
    else:
        assert got and all(math.isfinite(v) and 0 <= v <= 180 for v in got)


def test_parse_vector_by_example():
    assert inputs.parse_vector("1 -1 0 +1", 4).tolist() == [[1, -1, 0, 1]]
    assert inputs.parse_vector("+-0+", 4).tolist() == [[1, -1, 0, 1]]
    with pytest.raises(ValueError, match="takes 4 values, got 3"):
        inputs.parse_vector("1 0 1", 4)
    with pytest.raises(ValueError, match="not one of"):
        inputs.parse_vector("1 2 0 0", 4)


@given(st.lists(st.sampled_from([-1, 0, 1]), min_size=1, max_size=16), st.booleans())
def test_parse_vector_reads_back_what_was_written(vals, compact):
    text = "".join("+-0"[[1, -1, 0].index(v)] for v in vals) if compact else " ".join(str(v) for v in vals)
    assert inputs.parse_vector(text, len(vals)).tolist() == [[float(v) for v in vals]]


@given(st.integers(1, 64), st.integers(-5, 70), st.integers(0, 10 ** 9))
def test_parity_vector_has_k_nonzeros_and_replays(n, k, seed):
    x = inputs.parity_vector(n, k, seed)
    assert x.shape == (1, n) and int((x != 0).sum()) == min(max(k, 0), n)
    assert set(x.unique().tolist()) <= {-1.0, 0.0, 1.0} and torch.equal(x, inputs.parity_vector(n, k, seed))


def test_rotation_sets_are_capped():
    # the defaults (13 angles, 3 ranges) pass; 5,000 angles do not, nor 20 + 10
    angles, ranges = inputs.rotation_sets(", ".join(str(a) for a in inputs.DEFAULT_ANGLES), "22.5, 45, 90")
    assert len(angles) == 13 and ranges == [22.5, 45.0, 90.0]
    with pytest.raises(ValueError, match="at most 400 characters, got 33,498"):
        inputs.rotation_sets(", ".join(str(a / 100) for a in range(5000)), "")
    with pytest.raises(ValueError, match="at most 24 values"):
        inputs.rotation_sets(" ".join(str(a) for a in range(30)), "")
    with pytest.raises(ValueError, match="at most 24 test sets in all"):
        inputs.rotation_sets(", ".join(str(a) for a in range(20)), ", ".join(str(d) for d in range(1, 11)))


def test_a_huge_pasted_list_is_refused_at_once():
    """80,000 angles took 25 s to refuse (a list searched for each one, the count checked after the loop) and a
    10 MB paste about two hours; both, and a list over the count, are refused in a few milliseconds."""
    for text in ("1 " * 5_000_000, ", ".join(str(a % 720 - 360) for a in range(80_000)), "0 " * 399):
        t = time.perf_counter()
        with pytest.raises(ValueError, match="at most"):
            inputs.rotation_sets(text, "")
        assert time.perf_counter() - t < 0.5
    huge = "x" * 300
    with pytest.raises(ValueError) as e:
        inputs.parse_numbers(huge, 0, 1, "angles")
    assert len(str(e.value)) < 80                                       # a bad token is quoted short
    for text in ("1 " * 5_000_000, "+" * 10_000_000, "1 " * 64 + "x" * 300):
        t = time.perf_counter()
        with pytest.raises(ValueError) as e:
            inputs.parse_vector(text, 64)
        assert time.perf_counter() - t < 0.5 and len(str(e.value)) < 80


def test_the_rotation_settles_when_it_stays_put_for_a_tick():
    # arrow keys 180° -> 170°: the slider ticks see 175 (was 180), then 170 (was 175), then 170 (was 170): rerun
    assert [inputs.settled(180, 180, 175), inputs.settled(180, 175, 170), inputs.settled(180, 170, 170)] == \
        [False, False, True]
    assert not inputs.settled(170, 170, 170)          # the page already shows it: no rerun
    assert not inputs.settled(None, None, 0)          # the first run of the page


def test_a_parity_cell_cycles_minus_one_zero_plus_one_and_the_text_reads_back():
    from explorer.inputs import flip_cell, parse_vector, vector_text
    assert flip_cell([-1, 0, 1], 0) == [0, 0, 1] and flip_cell([-1, 0, 1], 1) == [-1, 1, 1]
    assert flip_cell([-1, 0, 1], 2) == [-1, 0, -1]
    assert vector_text([1, -1, 0]) == "+-0" and parse_vector(vector_text([1, -1, 0, 1]), 4).tolist() == [[1, -1, 0, 1]]


def test_a_generated_parity_vector_follows_the_models_layout():
    x = inputs.parity_vector(64, 5, 3, layout="prefix")
    assert (x[0, :5] != 0).all() and (x[0, 5:] == 0).all()
    assert int((inputs.parity_vector(64, 5, 3) != 0).sum()) == 5
