"""One checkpoint format, used by the CLI and the explorer.

A run folder holds:
    model.safetensors   the weights (safetensors: plain tensors, no pickle, no code)
    run.json            the card: task, model config, training config, status, device,
                        training time, metrics, library version
    metrics.jsonl       the training history, one progress report per line

Every write goes to a temporary file in the same folder and is renamed into place, so a
crash leaves the old file or the new one, never a half-written one.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from . import __version__
from .config import ConfigError, TrainConfig, model_config_from_dict
from .halting import PonderNet
from .models import build_model, model_config_dict

FORMAT = "ponder-run"
FORMAT_VERSION = 1
WEIGHTS, CARD, HISTORY = "model.safetensors", "run.json", "metrics.jsonl"
MAX_CHECKPOINT_BYTES = 200 * 1024 * 1024


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be loaded. The message is one line and names the file."""


@dataclass
class Checkpoint:
    model: PonderNet
    card: dict
    path: Path

    @property
    def name(self) -> str:
        return self.card.get("name") or self.path.name

    @property
    def task(self) -> str:
        return self.card["task"]


# ----------------------------------------------------------------------------- atomic writes

_UMASK = os.umask(0)
os.umask(_UMASK)

def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name + ".", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)         # mkstemp makes 0600; use the usual file mode
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_bytes(path, (json.dumps(_jsonable(obj), indent=2) + "\n").encode())


def _jsonable(obj):
    """JSON cannot hold NaN/inf: write them as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


# ----------------------------------------------------------------------------- save / load

def save_run(run_dir, model: PonderNet, config: TrainConfig, *, status: str = "completed", reason: str = "",
             device: str = "cpu", train_seconds: float = 0.0, steps: int = 0, history: Optional[list] = None,
             metrics: Optional[dict] = None, name: Optional[str] = None) -> Path:
    """Write a run folder (weights, card, history). Returns the folder."""
    from safetensors.torch import save

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    atomic_write_bytes(run_dir / WEIGHTS, save(tensors, metadata={"format": FORMAT}))
    if history is not None:
        lines = "".join(json.dumps(_jsonable(h)) + "\n" for h in history)
        atomic_write_bytes(run_dir / HISTORY, lines.encode())
    card = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "ponder_version": __version__,
        "name": name or run_dir.name, "task": config.task,
        "model": model_config_dict(model), "max_steps": model.max_steps, "lambda_p": model.lambda_p,
        "train": config.to_dict(), "status": status, "reason": reason, "device": device,
        "train_seconds": round(float(train_seconds), 2), "steps": int(steps),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "metrics": metrics or {},
    }
    old = _read_card_quiet(run_dir)
    if old and not metrics and old.get("metrics"):
        card["metrics"] = old["metrics"]
    atomic_write_json(run_dir / CARD, card)
    return run_dir


def update_card(run_dir, **fields) -> dict:
    """Merge fields into run.json (e.g. metrics after an evaluation)."""
    card = read_card(run_dir)
    card.update(fields)
    atomic_write_json(Path(run_dir) / CARD, card)
    return card


def _read_card_quiet(run_dir: Path) -> Optional[dict]:
    try:
        return json.loads((run_dir / CARD).read_text())
    except Exception:
        return None


def _resolve(path) -> Path:
    p = Path(path)
    if p.is_file() and p.name in (WEIGHTS, CARD):
        p = p.parent
    if not p.exists():
        raise CheckpointError(f"{p}: no such run folder")
    if not p.is_dir():
        raise CheckpointError(f"{p}: not a run folder (expected a folder holding {WEIGHTS} and {CARD})")
    return p


def read_card(path) -> dict:
    """The run.json of a run folder, checked; no weights loaded."""
    run_dir = _resolve(path)
    f = run_dir / CARD
    if not f.exists():
        raise CheckpointError(f"{f}: missing (not a ponder run folder)")
    try:
        card = json.loads(f.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{f}: not valid JSON ({e.__class__.__name__}: {str(e).splitlines()[0]})") from None
    if not isinstance(card, dict) or card.get("format") != FORMAT:
        raise CheckpointError(f"{f}: not a {FORMAT} card (format field missing or wrong)")
    try:
        TrainConfig.from_dict(card.get("train", {})).validate()
        model_config_from_dict(card["task"], card.get("model", {}))
        if not (isinstance(card.get("max_steps"), int) and 1 <= card["max_steps"] <= 200):
            raise ConfigError(f"max_steps must be an integer in [1, 200], got {card.get('max_steps')!r}")
        lp = card.get("lambda_p")
        if not (isinstance(lp, (int, float)) and 0 < lp <= 1):
            raise ConfigError(f"lambda_p must be in (0, 1], got {lp!r}")
    except (ConfigError, KeyError, TypeError) as e:
        raise CheckpointError(f"{f}: bad config: {e}") from None
    return card


def load_checkpoint(path, device="cpu") -> Checkpoint:
    """Load a run folder (or its run.json / model.safetensors). Never unpickles anything.

    Raises CheckpointError with a one-line message naming the file on any problem:
    missing, empty, truncated, corrupt, not safetensors (e.g. a pickle), or weights
    that do not fit the config.
    """
    from safetensors.torch import load

    run_dir = _resolve(path)
    card = read_card(run_dir)
    f = run_dir / WEIGHTS
    if not f.exists():
        raise CheckpointError(f"{f}: missing")
    size = f.stat().st_size
    if size == 0:
        raise CheckpointError(f"{f}: empty file")
    if size > MAX_CHECKPOINT_BYTES:
        raise CheckpointError(f"{f}: {size} bytes is over the {MAX_CHECKPOINT_BYTES} byte limit")
    raw = f.read_bytes()
    try:
        state = load(raw)
    except Exception as e:  # SafetensorError and friends: any parse failure is a bad file
        if raw[:4] == b"PK\x03\x04" or (raw[:1] == b"\x80" and raw[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05")):
            raise CheckpointError(f"{f}: looks like a pickle / torch.save file; refused, only safetensors "
                                  f"weights are loaded (pickles can run code)") from None
        msg = str(e).splitlines()[0] if str(e) else e.__class__.__name__
        raise CheckpointError(f"{f}: not a valid safetensors file ({msg})") from None
    model = build_model(card["task"], card["model"], card["max_steps"], card["lambda_p"])
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        raise CheckpointError(f"{f}: weights do not fit the config (missing {missing[:3]}, unexpected {extra[:3]})")
    for k, v in state.items():
        if v.shape != expected[k].shape:
            raise CheckpointError(f"{f}: weights do not fit the config ({k} has shape {tuple(v.shape)}, "
                                  f"config needs {tuple(expected[k].shape)})")
        if not torch.isfinite(v).all():
            raise CheckpointError(f"{f}: weight {k} holds NaN or inf")
    model.load_state_dict(state)
    model.to(device).eval()
    return Checkpoint(model=model, card=card, path=run_dir)


def read_history(path) -> list:
    """The metrics.jsonl of a run folder as a list of dicts ([] when absent). Bad lines are skipped."""
    f = _resolve(path) / HISTORY
    if not f.exists():
        return []
    rows = []
    for line in f.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows
