"""explorer/canvas.py: drawings become MNIST-style 28x28 digits (crop, fit 20x20, centre of mass)."""
import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from conftest import ROOT
from explorer import canvas
from explorer.data import example_digits
from ponder import data as D
from ponder.checkpoint import load_checkpoint
from ponder.halting import ponder


def rgba_canvas(draw_fn, size=280, bg=(0, 0, 0, 255), ink=(255, 255, 255, 255), width=18):
    img = Image.new("RGBA", (size, size), bg)
    draw_fn(ImageDraw.Draw(img), ink, width)
    return np.asarray(img)


def seven(d, ink, w):
    d.line([(80, 60), (200, 60), (150, 230)], fill=ink, width=w)


def test_blank_and_faint_canvases_give_none():
    assert canvas.preprocess_canvas(None) is None
    assert canvas.preprocess_canvas(rgba_canvas(lambda d, i, w: None)) is None                   # blank black
    assert canvas.preprocess_canvas(np.zeros((280, 280, 4), np.uint8)) is None                   # transparent
    faint = rgba_canvas(seven, ink=(10, 10, 10, 255))
    assert canvas.preprocess_canvas(faint) is None                                               # too faint
    assert canvas.preprocess_canvas(np.zeros((0, 5, 4), np.uint8)) is None
    assert canvas.preprocess_canvas(np.full((5, 5, 7), 255, np.uint8)) is None                   # not an image


def test_a_stroke_is_cropped_scaled_to_20_and_centred_by_mass():
    out = canvas.preprocess_canvas(rgba_canvas(seven))
    assert out.shape == (28, 28) and out.dtype == np.uint8 and out.max() == 255
    rows, cols = np.nonzero(out > 0)
    h, w = rows.max() - rows.min() + 1, cols.max() - cols.min() + 1
    assert max(h, w) <= 21 and max(h, w) >= 19                      # fits the 20x20 box (antialiasing: ±1)
    cy, cx = canvas.centre_of_mass(out)
    assert abs(cy - 14) <= 1.0 and abs(cx - 14) <= 1.0


def test_aspect_ratio_is_kept():
    tall = rgba_canvas(lambda d, i, w: d.line([(140, 20), (140, 260)], fill=i, width=w))
    out = canvas.preprocess_canvas(tall)
    rows, cols = np.nonzero(out > 40)
    h, w = rows.max() - rows.min() + 1, cols.max() - cols.min() + 1
    assert h >= 19 and w <= 4                                          # a thin upright stroke stays thin


def test_dark_ink_on_white_and_transparent_backgrounds_match_white_on_black():
    ref = canvas.preprocess_canvas(rgba_canvas(seven)).astype(int)
    paper = canvas.preprocess_canvas(rgba_canvas(seven, bg=(255, 255, 255, 255), ink=(0, 0, 0, 255))).astype(int)
    clear = canvas.preprocess_canvas(rgba_canvas(seven, bg=(0, 0, 0, 0), ink=(20, 20, 20, 255))).astype(int)
    assert np.abs(paper - ref).max() <= 2
    assert np.abs(clear - ref).max() <= 2
    grey = canvas.preprocess_canvas(rgba_canvas(seven)[..., 0])                 # a plain grey array
    assert np.abs(grey.astype(int) - ref).max() <= 2
    floats = canvas.preprocess_canvas(rgba_canvas(seven)[..., 0] / 255.0)     # floats in 0..1
    assert np.abs(floats.astype(int) - ref).max() <= 2


def test_model_input_is_normalised_as_in_training_and_seen_image_round_trips():
    digit = example_digits().x[0]
    x = canvas.model_input(digit)
    assert x.shape == (1, 1, 28, 28)
    assert torch.allclose(x, D.mnist_inputs(torch.as_tensor(digit).unsqueeze(0)))
    assert np.abs(canvas.seen_image(x).astype(int) - digit.astype(int)).max() <= 1
    blank = canvas.model_input(np.zeros((28, 28), np.uint8))
    assert torch.allclose(blank, torch.full_like(blank, -D.MNIST_MEAN / D.MNIST_STD))
    rotated = canvas.model_input(digit, 90)
    assert torch.allclose(rotated, D.mnist_inputs(torch.as_tensor(digit).unsqueeze(0), angle=90))


@pytest.fixture(scope="module")
def default_model():
    return load_checkpoint(ROOT / "assets" / "mnist-default").model


def test_enlarged_test_digits_survive_the_round_trip(default_model):
    """A test digit drawn 10x larger on the canvas comes back as a digit the shipped model reads right."""
    pool = example_digits()
    right = 0
    for img, label in zip(pool.x, pool.y):
        big = np.asarray(Image.fromarray(img).resize((280, 280), Image.BILINEAR))
        rgba = np.dstack([big, big, big, np.full_like(big, 255)])
        x = canvas.model_input(canvas.preprocess_canvas(rgba))
        right += int(ponder(default_model, x, "deterministic").pred) == int(label)
    assert right >= 19, f"{right}/20 right"


def test_odd_pictures_never_crash():
    rng = np.random.default_rng(0)
    for img in (np.full((280, 280, 4), 255, np.uint8), rng.integers(0, 256, (50, 70, 3), dtype=np.uint8),
                np.eye(3, dtype=bool), np.array([[np.nan, 1.0], [np.inf, -np.inf]]), np.zeros((1, 1)),
                np.full((3000, 10), 200, np.uint8)):
        out = canvas.preprocess_canvas(img)
        assert out is None or (out.shape == (28, 28) and out.dtype == np.uint8)
