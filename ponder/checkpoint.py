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

import errno
import json
import math
import os
import pickletools
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from . import __version__
from .config import ConfigError, TrainConfig, _finite, _int, _short_repr, model_config_from_dict
from .halting import PonderNet
from .models import build_model, model_config_dict

FORMAT = "ponder-run"
FORMAT_VERSION = 1
WEIGHTS, CARD, HISTORY = "model.safetensors", "run.json", "metrics.jsonl"
MAX_CHECKPOINT_BYTES = 200 * 1024 * 1024
MAX_CARD_BYTES = 1024 * 1024          # a run.json is a few kB; refuse megabytes of JSON
MAX_CARD_TEXT = 10000                 # name / status / reason / device strings in a card
SMALL_MODEL_FIELD = 512               # model sizes up to this are built directly when loading
WEIGHT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)   # cast to float32 on load


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be loaded. The message is one line and names the file."""


class SaveError(OSError):
    """A run that could not be written: full disk, unwritable or missing folder, a file in the way.

    An OSError (so `except OSError` keeps working) whose message is one line naming the file and
    the reason. Nothing in memory is touched: the model can be saved again somewhere else.
    """

    def __init__(self, path, err: OSError, what: str = "cannot write"):
        super().__init__(err.errno, err.strerror or str(err), str(path))
        self.line = f"{path}: {what} ({os_reason(err)})"

    def __str__(self) -> str:
        return self.line


def os_reason(err: OSError) -> str:
    """A short reason for an OSError, with a hint for the usual suspects."""
    if isinstance(err, SaveError):
        return err.line
    base = err.strerror or str(err) or err.__class__.__name__
    hint = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up",
            errno.EROFS: "the file system is read-only", errno.EACCES: "no permission",
            errno.EPERM: "no permission", errno.ENOTDIR: "a file is in the way of a folder",
            errno.EISDIR: "a folder is in the way of a file"}.get(err.errno)
    return f"{base}: {hint}" if hint and hint.lower() not in base.lower() else base


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
_CARD_LOCK = threading.Lock()      # update_card is read-modify-write: one at a time in this process


def _write_tmp(path: Path, data: bytes) -> str:
    """Write data to a fresh temporary file next to path (fsynced). Returns its name. Raises SaveError."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name + ".", suffix=".tmp")
    except OSError as e:
        raise SaveError(path, e) from None
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)         # mkstemp makes 0600; use the usual file mode
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException as e:
        _unlink_quiet(tmp)
        if isinstance(e, OSError):
            raise SaveError(path, e) from None
        raise
    return tmp


def _commit(pairs) -> None:
    """Rename temporary files into place (a rename needs no free space); fsync the folders."""
    try:
        for tmp, path in pairs:
            os.replace(tmp, path)
    except OSError as e:
        for tmp, _ in pairs:
            _unlink_quiet(tmp)
        raise SaveError(path, e) from None
    for folder in {Path(p).parent for _, p in pairs}:
        try:                                   # make the renames durable (best effort)
            dfd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError:
            pass


def _unlink_quiet(name) -> None:
    try:
        os.unlink(name)
    except OSError:
        pass


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write via a temporary file in the same folder + rename: a crash leaves the old or the new file.

    Raises SaveError (an OSError with a one-line message naming the file) when it cannot write.
    """
    path = Path(path)
    _commit([(_write_tmp(path, data), path)])


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
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SaveError(run_dir, e, "cannot create the run folder") from None
    if not run_dir.is_dir():
        raise SaveError(run_dir, OSError(errno.ENOTDIR, "not a folder"), "cannot create the run folder")
    tensors = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    files = {WEIGHTS: save(tensors, metadata={"format": FORMAT})}
    if history is not None:
        files[HISTORY] = "".join(json.dumps(_jsonable(h)) + "\n" for h in history).encode()
    card = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "ponder_version": __version__,
        "name": _text(name) or run_dir.name, "task": config.task,
        "model": model_config_dict(model), "max_steps": model.max_steps, "lambda_p": model.lambda_p,
        "train": config.to_dict(), "status": _text(status), "reason": _text(reason), "device": _text(device),
        "train_seconds": round(float(train_seconds), 2), "steps": int(steps),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "metrics": metrics or {},
    }
    old = _read_card_quiet(run_dir)
    if old and not metrics and isinstance(old.get("metrics"), dict) and old["metrics"]:
        card["metrics"] = old["metrics"]
    files[CARD] = (json.dumps(_jsonable(card), indent=2) + "\n").encode()
    # every temporary file first (this is where a full disk fails), then the renames, weights
    # first and the card last: a crash in between leaves a folder that still loads
    written = []
    try:
        for fname, data in files.items():
            written.append((_write_tmp(run_dir / fname, data), run_dir / fname))
    except BaseException:
        for tmp, _ in written:
            _unlink_quiet(tmp)
        raise
    _commit(written)
    _remove_stale_tmp(run_dir)
    return run_dir


def _text(v, limit: int = MAX_CARD_TEXT) -> str:
    """A card string: text, at most `limit` characters (a long traceback as a reason stays loadable)."""
    v = "" if v is None else str(v)
    return v if len(v) <= limit else v[: limit - 3] + "..."


STALE_SECONDS = 3600      # temporary files this old were left by a killed writer


def _remove_stale_tmp(folder: Path) -> None:
    """Delete temporary files a killed writer left behind (only old ones: a live writer's are fresh)."""
    now = time.time()
    try:
        for p in folder.glob(".*.tmp"):
            if p.name.startswith(tuple("." + f + "." for f in (WEIGHTS, CARD, HISTORY))) and p.is_file() \
                    and not p.is_symlink() and now - p.stat().st_mtime > STALE_SECONDS:
                p.unlink()
    except OSError:
        pass


def update_card(run_dir, **fields) -> dict:
    """Merge fields into run.json (e.g. metrics after an evaluation)."""
    with _CARD_LOCK:
        card = read_card(run_dir)
        card.update(fields)
        atomic_write_json(_resolve(run_dir) / CARD, card)
    return card


def _read_card_quiet(run_dir: Path) -> Optional[dict]:
    try:
        f = run_dir / CARD
        if f.stat().st_size > MAX_CARD_BYTES:
            return None
        card = json.loads(f.read_text())
        return card if isinstance(card, dict) else None
    except Exception:
        return None


def _resolve(path) -> Path:
    try:
        p = Path(path)
        if p.is_file() and p.name in (WEIGHTS, CARD):
            p = p.parent
        exists, is_dir = p.exists(), p.is_dir()
    except (TypeError, ValueError, OSError) as e:     # NUL bytes, names too long, not a path at all
        raise CheckpointError(f"{_short_repr(path, 200)}: not a usable path ({e.__class__.__name__}: "
                              f"{' '.join(str(e).split())})") from None
    if not exists:
        raise CheckpointError(f"{p}: no such run folder")
    if not is_dir:
        raise CheckpointError(f"{p}: not a run folder (expected a folder holding {WEIGHTS} and {CARD})")
    return p


def _looks_like_pickle(raw: bytes) -> bool:
    """A torch.save zip or a pickle of any protocol (0-5). Parsed by opcodes only, never executed."""
    if raw[:4] == b"PK\x03\x04" or (raw[:1] == b"\x80" and raw[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05")):
        return True
    try:
        for n, (op, _arg, _pos) in enumerate(pickletools.genops(raw[: 1 << 20])):
            if op.name == "STOP":
                return True
            if n > 100000:
                return False
    except Exception:
        return False
    return False


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or e.__class__.__name__


def read_card(path) -> dict:
    """The run.json of a run folder, checked; no weights loaded."""
    run_dir = _resolve(path)
    f = run_dir / CARD
    if not f.exists():
        raise CheckpointError(f"{f}: missing (not a ponder run folder)")
    if not f.is_file():
        raise CheckpointError(f"{f}: not a regular file")
    try:
        size = f.stat().st_size
        if size > MAX_CARD_BYTES:
            raise CheckpointError(f"{f}: {size} bytes is over the {MAX_CARD_BYTES} byte limit for a card")
        card = json.loads(f.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:     # JSONDecodeError is a ValueError
        raise CheckpointError(f"{f}: not valid JSON ({e.__class__.__name__}: {_one_line(e)[:200]})") from None
    except OSError as e:
        raise CheckpointError(f"{f}: cannot read ({os_reason(e)})") from None
    if not isinstance(card, dict) or card.get("format") != FORMAT:
        raise CheckpointError(f"{f}: not a {FORMAT} card (format field missing or wrong)")
    try:
        TrainConfig.from_dict(card.get("train", {})).validate()
        for k in ("task", "model", "max_steps", "lambda_p"):
            if k not in card:
                raise ConfigError(f"{k} is missing")
        model_config_from_dict(card["task"], card["model"])
        if not (_int(card.get("max_steps")) and 1 <= card["max_steps"] <= 200):
            raise ConfigError(f"max_steps must be an integer in [1, 200], got {_short_repr(card.get('max_steps'))}")
        lp = card.get("lambda_p")
        if not (_finite(lp) and 0 < lp <= 1):
            raise ConfigError(f"lambda_p must be in (0, 1], got {_short_repr(lp)}")
        _check_card_fields(card)
    except (ConfigError, KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{f}: bad config: {_one_line(e)}") from None
    return card


_CARD_STRINGS = ("name", "status", "reason", "device", "created", "ponder_version")
_METRIC_NUMBERS = ("n", "accuracy", "mean_steps", "median_steps", "std_steps", "expected_steps")


def _check_card_fields(card: dict) -> None:
    """The descriptive fields that pages print: right types, or absent / null."""
    for k in _CARD_STRINGS:
        v = card.get(k)
        if v is not None and not (isinstance(v, str) and len(v) <= MAX_CARD_TEXT):
            raise ConfigError(f"{k} must be a string, got {_short_repr(v)}")
    for k in ("steps",):
        v = card.get(k)
        if v is not None and not (_int(v) and v >= 0):
            raise ConfigError(f"{k} must be an integer >= 0, got {_short_repr(v)}")
    v = card.get("train_seconds")
    if v is not None and not (_finite(v) and v >= 0):
        raise ConfigError(f"train_seconds must be a number >= 0, got {_short_repr(v)}")
    metrics = card.get("metrics")
    if metrics is not None:
        if not isinstance(metrics, dict):
            raise ConfigError(f"metrics must be a mapping, got {_short_repr(metrics)}")
        test = metrics.get("test")
        if test is not None:
            if not isinstance(test, dict):
                raise ConfigError(f"metrics.test must be a mapping, got {_short_repr(test)}")
            for k in _METRIC_NUMBERS:
                v = test.get(k)
                if v is not None and not _finite(v):
                    raise ConfigError(f"metrics.test.{k} must be a number, got {_short_repr(v)}")


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
    if not f.is_file():                      # a folder, a FIFO, a device: never read it
        raise CheckpointError(f"{f}: not a regular file")
    try:
        size = f.stat().st_size
        if size == 0:
            raise CheckpointError(f"{f}: empty file")
        if size > MAX_CHECKPOINT_BYTES:
            raise CheckpointError(f"{f}: {size} bytes is over the {MAX_CHECKPOINT_BYTES} byte limit")
        raw = f.read_bytes()
    except OSError as e:
        raise CheckpointError(f"{f}: cannot read ({os_reason(e)})") from None
    try:
        state = load(raw)                    # safetensors: a JSON header and raw numbers, no code
    except Exception as e:  # SafetensorError and friends: any parse failure is a bad file
        if _looks_like_pickle(raw):
            raise CheckpointError(f"{f}: looks like a pickle / torch.save file; refused, only safetensors "
                                  f"weights are loaded (pickles can run code)") from None
        raise CheckpointError(f"{f}: not a valid safetensors file ({_one_line(e)[:200]})") from None
    if not state:
        raise CheckpointError(f"{f}: holds no tensors")
    # A card may ask for a huge model (every size up to 4096) next to tiny weights. Such a model
    # is built on the meta device first (no memory) and only built for real once its shapes are
    # known to match weights that passed the size limit. Usual sizes skip that: the first meta
    # build imports torch's Python meta kernels, about a second.
    model = None
    try:
        if all(not isinstance(v, int) or v <= SMALL_MODEL_FIELD for v in card["model"].values()):
            model = build_model(card["task"], card["model"], card["max_steps"], card["lambda_p"])
            expected = {k: (tuple(v.shape), v.dtype) for k, v in model.state_dict().items()}
        else:
            with torch.device("meta"):
                expected = {k: (tuple(v.shape), v.dtype) for k, v in build_model(
                    card["task"], card["model"], card["max_steps"], card["lambda_p"]).state_dict().items()}
    except (ConfigError, KeyError, TypeError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{run_dir / CARD}: bad config: {_one_line(e)}") from None
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        raise CheckpointError(f"{f}: weights do not fit the config (missing {missing[:3]}, unexpected {extra[:3]})")
    for k, v in state.items():
        if tuple(v.shape) != expected[k][0]:
            raise CheckpointError(f"{f}: weights do not fit the config ({k} has shape {tuple(v.shape)}, "
                                  f"config needs {expected[k][0]})")
        if v.dtype not in WEIGHT_DTYPES:
            raise CheckpointError(f"{f}: weight {k} has dtype {str(v.dtype).replace('torch.', '')}, "
                                  f"expected floating point (float32)")
        if not torch.isfinite(v).all():
            raise CheckpointError(f"{f}: weight {k} holds NaN or inf")
    if model is None:
        model = build_model(card["task"], card["model"], card["max_steps"], card["lambda_p"])
    model.load_state_dict({k: v.to(expected[k][1]) for k, v in state.items()})
    model.to(device).eval()
    return Checkpoint(model=model, card=card, path=run_dir)


def read_history(path) -> list:
    """The metrics.jsonl of a run folder as a list of dicts ([] when absent). Bad lines are skipped."""
    f = _resolve(path) / HISTORY
    try:
        if not f.is_file():
            return []
        text = f.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows
