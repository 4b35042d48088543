"""assets/: the shipped models load, are small, and measure what their cards say."""
import pytest
import torch

from helpers import ASSETS
from ponder.store.card import read_card
from ponder.store.checkpoint import load_checkpoint
from ponder.analysis.unroll import measure_test
from ponder.config import TrainConfig


MODELS = sorted(p.name for p in ASSETS.iterdir() if (p / "run.json").exists())


def test_assets_present_and_small():
    assert "mnist-default" in MODELS and "mnist-rot22" in MODELS
    assert {f"sweep-lp{lp:g}" for lp in (0.1, 0.2, 0.3, 0.5, 0.7, 0.9)} <= set(MODELS)
    assert any(m.startswith("parity-") for m in MODELS)
    size = sum(f.stat().st_size for f in ASSETS.rglob("*") if f.is_file())
    assert size <= 20_000_000                                           # "20 MB in all", decimal


@pytest.mark.parametrize("name", MODELS)
def test_every_shipped_model_loads_with_a_card(name):
    ck = load_checkpoint(ASSETS / name)
    card = read_card(ASSETS / name)
    for key in ("train", "device", "train_seconds", "metrics", "status"):
        assert key in card
    assert card["train"]["seed"] is not None
    assert "accuracy" in card["metrics"]["test"]
    x = torch.zeros(2, 1, 28, 28) if ck.task == "mnist" else torch.zeros(2, card["model"]["n_elems"])
    with torch.no_grad():
        assert torch.isfinite(ck.model(x).log_p).all()


@pytest.mark.long
def test_default_model_first_1000_test_images(mnist):
    ck = load_checkpoint(ASSETS / "mnist-default")
    assert ck.record.train["lambda_p"] == 0.2 and ck.record.train["max_steps"] == 20 and ck.record.train["beta"] == 0.01
    res = measure_test(ck.model, TrainConfig.from_dict(ck.record.train), mnist, 1000)
    assert res.accuracy >= 0.985
    assert ck.record.metrics["test"]["accuracy"] >= 0.99       # the full 10k test set, in the card
    assert ck.record.metrics["test"]["n"] == 10000


@pytest.mark.long
@pytest.mark.parametrize("name", [m for m in MODELS if m.startswith("parity-")])
def test_shipped_parity_models_measure_what_their_cards_say(name):
    """The card's test metrics came from the test measurement in 'sample' mode, seed 0, on the preset's fixed
    test set of n problems (reproduce --from-assets, on CPU): the same call gives the same numbers."""
    ck = load_checkpoint(ASSETS / name)
    card = ck.record.metrics["test"]
    res = measure_test(ck.model, TrainConfig.from_dict(ck.record.train), None, card["n"])
    for key in ("accuracy", "mean_steps", "median_steps", "std_steps"):
        assert getattr(res, key) == pytest.approx(card[key], abs=1e-4), key
    for half in ("easy", "hard"):
        assert getattr(res, half).accuracy == pytest.approx(card[half]["accuracy"], abs=1e-4)
        assert getattr(res, half).expected_steps == pytest.approx(card[half]["expected_steps"], abs=1e-4)
        assert getattr(res, half).k_range == card[half]["k_range"]


def test_parity_15_ponders_longer_on_hard_vectors():
    """The shipped n = 15 model (docs/findings.md §8): at >= 99% accuracy, vectors with 11-15 non-zeros take at
    least one expected step E[n] more than vectors with 1-4 (+12.36 in its card), and they need those steps: at a
    fixed depth of the easy vectors' E[n] they are >= 0.02 less accurate than under the learned halting (0.18)."""
    test = load_checkpoint(ASSETS / "parity-15").record.metrics["test"]
    assert test["n"] == 10000 and test["accuracy"] >= 0.99
    assert (test["easy"]["k_range"], test["hard"]["k_range"]) == ([1, 4], [11, 15])
    assert test["hard"]["expected_steps"] - test["easy"]["expected_steps"] >= 1.0
    assert test["pays"]["needed"] >= 0.02
