"""Helpers shared by the test modules (fixtures live in conftest.py). Import: `from helpers import ...`."""
import base64
import builtins
import io
import json
import os
import re
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from ponder.store.checkpoint import load_checkpoint
from ponder.tasks.parity.task import ParityConfig
from ponder.config import TrainConfig
from ponder.tasks import build_model

from paths import DATA_DIR, ROOT  # noqa: E402,F401  (re-exported: tests import them from helpers)

ASSETS = ROOT / "assets"
APP = str(ROOT / "streamlit_app.py")
APP_TIMEOUT = 60                      # seconds an AppTest script run may take


def have_mnist(folder=DATA_DIR) -> bool:
    """The four MNIST files are in folder/MNIST/raw (.gz or decompressed): the tests never download them."""
    from ponder.data import MNIST_FILES
    raw = Path(folder) / "MNIST" / "raw"
    return all((raw / f).is_file() or (raw / f"{f}.gz").is_file() for f in MNIST_FILES)


NO_MNIST = f"needs MNIST, not found in {DATA_DIR}/MNIST/raw (set PONDER_DATA to a folder holding it)"
needs_mnist = pytest.mark.skipif(not have_mnist(), reason=NO_MNIST)


# ----------------------------------------------------------------------------- models and runs

def tiny_model(task="mnist", max_steps=5, lambda_p=0.3, seed=0, lambda_std=1.0, lambda_input="hidden", lambda_head="linear",
               method="ponder", act_epsilon=0.01, **model_kw):
    """A small untrained model whose lambda head is randomised so halting varies by sample (with
    lambda_input="confidence", the confidence head too)."""
    from ponder.tasks.mnist.task import MnistConfig
    torch.manual_seed(seed)
    cfg = (MnistConfig(channels1=4, channels2=8, embed=16, hidden=16, **model_kw) if task == "mnist"
           else ParityConfig(**{"n_elems": 8, "hidden": 16, **model_kw}))
    model = build_model(task, cfg, max_steps, lambda_p, lambda_input, lambda_head, method, act_epsilon)
    if lambda_std:
        torch.nn.init.normal_(model.step_fn.lambda_head.weight, std=lambda_std)
        for m in model.confidence_head.modules() if model.confidence_head is not None else ():
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.normal_(m.weight, std=lambda_std)
    return model.eval()


def tiny_config(task="parity", max_steps=5, lambda_p=0.3, **kw):
    """The TrainConfig a tiny_model of that task fits (hidden 16)."""
    return TrainConfig(task=task, max_steps=max_steps, lambda_p=lambda_p, hidden=16, **kw)


def save_tiny_run(folder, task="parity", max_steps=5, lambda_p=0.3, seed=0, **save_kw):
    """A run folder holding a tiny model (weights, card, history). Returns (folder, model)."""
    from ponder.store.checkpoint import save_run
    model = tiny_model(task, max_steps=max_steps, lambda_p=lambda_p, seed=seed)
    save_kw.setdefault("history", [{"step": 1, "loss": 0.5}])
    save_kw.setdefault("steps", 1)
    return save_run(folder, model, tiny_config(task, max_steps, lambda_p), **save_kw), model


def edit_card(run_dir, edit) -> dict:
    """Rewrite a run's run.json after edit(card) changed the parsed card in place; returns the card."""
    from ponder.store.card import CARD
    path = Path(run_dir) / CARD
    card = json.loads(path.read_text())
    edit(card)
    path.write_text(json.dumps(card))
    return card


def fake_history(n=6):
    """n progress rows as ponder.training.loop reports them (for charts of a saved run)."""
    return [dict(step=10 * i, total_steps=10 * n, epoch=i / n, loss=1.0 / i, rec=0.9 / i, reg=0.05, accuracy=0.5 + i / 20,
                 mean_steps=3.0, elapsed=float(i), lr=1e-3, halting=[0.4, 0.3, 0.2, 0.05, 0.05],
                 val_accuracy=0.8 if i == n else None) for i in range(1, n + 1)]


# ----------------------------------------------------------------------------- one-line errors

def assert_one_line(e, needle=""):
    """A raised error (pytest's ExceptionInfo) whose message is one line holding needle."""
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 600 and str(needle) in msg, msg


def run_cli(argv, capsys):
    """python -m ponder, in process: (exit code, stdout, stderr)."""
    from ponder.cli.main import main
    try:
        rc = main(argv)
    except SystemExit as e:           # argparse errors
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(rc, err, needle):
    assert rc not in (0, None), err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(("ponder: error:", "python -m ponder")) and needle in lines[0], err


# ----------------------------------------------------------------------------- AppTest

def open_app(path=None, **query):
    """Run the app (with these query parameters) on the page file at `path` (default: the app's default page).
    The page comes as a link's ?page=NAME, so the app goes there in its first run without running the default
    page first (switching after a first run cost every page test a run of the digit page)."""
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(APP, default_timeout=APP_TIMEOUT)
    if path:
        query = {"page": Path(path).stem, **query}
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _decode(obj):
    """Plotly's JSON holds numeric arrays as {'bdata': base64, 'dtype': ..., 'shape': ...}."""
    if isinstance(obj, dict) and "bdata" in obj and "dtype" in obj:
        a = np.frombuffer(base64.b64decode(obj["bdata"]), dtype=obj["dtype"])
        return a.reshape([int(n) for n in str(obj["shape"]).split(",")]) if obj.get("shape") else a
    if isinstance(obj, dict):
        return {k: _decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    return obj


def charts(at) -> list:
    """The Plotly figures on the page, as dicts with numpy arrays."""
    return [_decode(json.loads(c.proto.spec)) for c in at.get("plotly_chart")]


def shown(markdown: str) -> str:
    """A markdown string as the reader sees its text: backslash-escaped punctuation (explorer.tables.plain)
    shown as itself, zero-width spaces gone."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", str(markdown)).replace("\u200b", "")


def texts(at) -> str:
    parts = [m.value for m in at.markdown] + [m.value for m in at.caption]
    parts += [x.value for kind in ("info", "success", "warning", "error") for x in getattr(at, kind)]
    return "\n".join(shown(p) for p in parts)


def run_ok(at):
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def poll(at, done, timeout=180.0):
    """Rerun the page (what st.fragment(run_every=...) does in the browser) until done(at)."""
    end = time.time() + timeout
    while time.time() < end:
        run_ok(at)
        if done(at):
            return at
        time.sleep(0.5)
    raise AssertionError("timed out; the page says:\n" + texts(at))


def one_line_errors(at) -> list:
    """The page's error boxes (sidebar included), each checked to be one line without a traceback."""
    errs = [shown(e.value) for e in at.error]
    assert all("\n" not in e and "Traceback" not in e for e in errs), errs
    return errs


# ----------------------------------------------------------------------------- pictures

def stroke(size=(280, 280), width=18, line=((0.3, 0.2), (0.7, 0.2), (0.5, 0.85))):
    img = Image.new("L", size, 0)
    pts = [(x * size[0], y * size[1]) for x, y in line]
    ImageDraw.Draw(img).line(pts, fill=255, width=width)
    return np.asarray(img)


def encode_image(img: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def seven_picture(size=(120, 160), mode="L", ink=0, paper=255):
    img = Image.new("L", size, paper)
    w, h = size
    ImageDraw.Draw(img).line([(0.25 * w, 0.2 * h), (0.75 * w, 0.2 * h), (0.5 * w, 0.85 * h)], fill=ink,
                             width=max(1, w // 10))
    return img


def picture_in_mode(mode: str) -> Image.Image:
    base = seven_picture()
    if mode in ("I;16", "I;16B"):
        a = (np.asarray(base).astype(np.uint16) * 257)
        return Image.frombytes(mode, base.size, a.astype("<u2" if mode == "I;16" else ">u2").tobytes())
    if mode == "PA":
        return base.convert("P").convert("PA")
    if mode == "I":
        return Image.fromarray(np.asarray(base).astype(np.int32) * 1000)
    if mode == "F":
        return Image.fromarray(np.asarray(base).astype(np.float32) / 255.0)
    return base.convert(mode)


# ----------------------------------------------------------------------------- runs written and read at once

def run_threads(n, fn):
    """Start n threads on fn(i) behind a barrier (so they really start together); return results/errors."""
    barrier = threading.Barrier(n)
    results, errors = [None] * n, []

    def body(i):
        try:
            barrier.wait(timeout=10)
            results[i] = fn(i)
        except BaseException as e:                       # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=body, args=(i,), name=f"hardening-{i}") for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert not errors, errors
    return results


BIG_CFG = TrainConfig(task="parity", max_steps=4, lambda_p=0.3, hidden=384)


def big_model(value):
    """A ~1.8M-parameter model (7 MB file) whose weights all equal `value`, so a version is easy to tell."""
    model = build_model("parity", ParityConfig(n_elems=8, hidden=384), 4, 0.3)
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(value)
    return model


def version_of(run_dir):
    ck = load_checkpoint(run_dir)
    vals = {float(v.flatten()[0]) for v in ck.model.state_dict().values()}
    assert len(vals) == 1, "weights mix two versions"
    [v] = vals
    assert all(torch.all(t == v) for t in ck.model.state_dict().values()), "a torn weights file"
    return v


def no_tmp_files(folder):
    return [p.name for p in folder.rglob("*.tmp")] == []


# ----------------------------------------------------------------------------- pickles that must never run

class ShellPayload:
    """Unpickling this runs `touch marker` through a shell."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class OpenPayload:
    """Unpickling this creates the marker with builtins.open (no shell needed)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (builtins.open, (self.marker, "w"))


def torch_save_bytes(obj, **kw):
    buf = io.BytesIO()
    torch.save(obj, buf, **kw)
    return buf.getvalue()


@contextmanager
def lock_held_elsewhere(folder):
    """Another writer (a thread here; a training in life) holds ponder.files.folder_lock(folder) until
    the block ends."""
    from ponder.files import folder_lock
    held, release = threading.Event(), threading.Event()

    def writer():
        with folder_lock(folder):
            held.set()
            release.wait(30)
    t = threading.Thread(target=writer)
    t.start()
    assert held.wait(10)
    try:
        yield
    finally:
        release.set()
        t.join()


# ----------------------------------------------------------------------------- made-up unrolls

def fake_unroll(B: int, N: int, seed: int, skill: float = 0.0) -> dict:
    """A made-up unroll: answers right more often at later steps (and with `skill`), confidences that follow,
    halting distributions from random hazards."""
    g = torch.Generator().manual_seed(seed)
    level = torch.linspace(0.4, 0.9, N, dtype=torch.float64).unsqueeze(1) + skill
    correct = torch.rand(N, B, generator=g, dtype=torch.float64) < level
    conf = (0.5 * level + 0.5 * torch.rand(N, B, generator=g, dtype=torch.float64)).clamp(0, 1)
    pred = torch.where(correct, 0, torch.randint(1, 4, (N, B), generator=g)).to(torch.int16)
    lam = torch.rand(N, B, generator=g, dtype=torch.float64) * 0.5
    lam[-1] = 1
    survive = torch.cumprod(torch.cat([torch.ones(1, B, dtype=torch.float64), 1 - lam[:-1]]), 0)
    return {"per_step_correct": correct, "per_step_confidence": conf, "per_step_pred": pred, "p": lam * survive}
