"""Shared fixtures. MNIST comes from $PONDER_DATA (CI: ../shared/data)."""
import os
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = os.environ.get("PONDER_DATA") or str(ROOT.parent / "shared" / "data")

torch.set_num_threads(min(2, os.cpu_count() or 1))


def tiny_model(task="mnist", max_steps=5, lambda_p=0.3, seed=0, lambda_std=1.0, **model_kw):
    """A small untrained model whose lambda head is randomised so halting varies by sample."""
    from ponder.config import MnistConfig, ParityConfig
    from ponder.models import build_model
    torch.manual_seed(seed)
    cfg = (MnistConfig(channels1=4, channels2=8, embed=16, hidden=16, **model_kw) if task == "mnist"
           else ParityConfig(n_elems=model_kw.get("n_elems", 8), hidden=16))
    model = build_model(task, cfg, max_steps, lambda_p)
    if lambda_std:
        torch.nn.init.normal_(model.step_fn.lambda_head.weight, std=lambda_std)
    return model.eval()


@pytest.fixture(scope="session")
def mnist():
    from ponder.data import load_mnist
    return load_mnist(DATA_DIR, download=False)
