"""The runs folder: where trained runs live, safe names, listing, and importing uploads.

A user-supplied name never reaches the file system as-is: safe_name() keeps letters,
digits, '.', '_' and '-', and every path is checked to stay inside the runs folder
(no '../', no absolute paths, no symlinks pointing out).
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .checkpoint import CARD, HISTORY, WEIGHTS, CheckpointError, load_checkpoint, read_card

ASSETS = Path(__file__).resolve().parent.parent / "assets"
MAX_NAME = 64
MAX_UPLOAD_BYTES = 50 * 1024 * 1024


class RunNameError(ValueError):
    """A run name or path that is not allowed."""


def runs_root() -> Path:
    """$PONDER_RUNS, else ./runs."""
    return Path(os.environ.get("PONDER_RUNS") or "runs")


def safe_name(name: str) -> str:
    """A file-system-safe run name: [A-Za-z0-9._-], no leading '.', at most 64 characters."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", str(name or "")).strip(".-_")[:MAX_NAME].strip(".-_")
    if not s:
        raise RunNameError(f"run name {name!r} has no usable characters (use letters, digits, '.', '_', '-')")
    return s


def inside(root: Path, path: Path) -> bool:
    """True if path (symlinks resolved) is root or below it."""
    root_r, path_r = Path(root).resolve(), Path(path).resolve()
    return path_r == root_r or root_r in path_r.parents


def run_path(root: Path, name: str) -> Path:
    """The folder of an existing run by name, refusing anything that leaves the runs folder."""
    p = Path(root) / safe_name(name)
    if p.is_symlink() or not inside(root, p):
        raise RunNameError(f"run {name!r} points outside the runs folder {root}")
    return p


def new_run_dir(root: Optional[Path] = None, name: str = "run") -> Path:
    """Create and return a fresh, unique run folder under root (name, name-2, name-3, ...).

    mkdir without exist_ok makes this safe when two sessions start runs at the same moment.
    """
    root = Path(root or runs_root())
    root.mkdir(parents=True, exist_ok=True)
    base = safe_name(name)
    for i in range(1, 10000):
        cand = root / (base if i == 1 else f"{base}-{i}")
        try:
            cand.mkdir()
        except FileExistsError:
            continue
        if not inside(root, cand):
            raise RunNameError(f"run {name!r} points outside the runs folder {root}")
        return cand
    raise RunNameError(f"too many runs named {base!r}")


@dataclass
class ModelEntry:
    name: str          # shown in pickers
    path: Path         # the run folder
    source: str        # "shipped" (assets/) or "run" (runs folder)
    card: dict         # run.json


def list_models(root: Optional[Path] = None, assets: Path = ASSETS) -> list:
    """Shipped models then user runs (newest first). Folders with unreadable cards are skipped."""
    out = []
    for source, folder in (("shipped", Path(assets)), ("run", Path(root or runs_root()))):
        if not folder.is_dir():
            continue
        dirs = [d for d in folder.iterdir() if d.is_dir() and not d.is_symlink() and (d / CARD).exists()]
        dirs.sort(key=(lambda d: d.name) if source == "shipped" else (lambda d: -(d / CARD).stat().st_mtime))
        for d in dirs:
            try:
                card = read_card(d)
            except CheckpointError:
                continue
            out.append(ModelEntry(name=d.name if source == "shipped" else f"runs/{d.name}", path=d,
                                  source=source, card=card))
    return out


def import_checkpoint(weights: bytes, card: bytes, name: str, root: Optional[Path] = None,
                      history: Optional[bytes] = None, max_bytes: int = MAX_UPLOAD_BYTES) -> Path:
    """Validate uploaded run files (model.safetensors + run.json) and add them to the runs folder.

    The files are written to a temporary folder, loaded with load_checkpoint (no unpickling,
    shapes checked), and only then renamed into the runs folder. Raises CheckpointError.
    """
    root = Path(root or runs_root())
    total = len(weights) + len(card) + len(history or b"")
    if total > max_bytes:
        raise CheckpointError(f"upload '{name}': {total} bytes is over the {max_bytes} byte limit")
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root, prefix=".import-"))
    try:
        (tmp / WEIGHTS).write_bytes(weights)
        (tmp / CARD).write_bytes(card)
        if history:
            (tmp / HISTORY).write_bytes(history)
        load_checkpoint(tmp)                       # raises CheckpointError on anything wrong
        dest = new_run_dir(root, name)
        dest.rmdir()
        os.replace(tmp, dest)
        return dest
    except CheckpointError as e:
        raise CheckpointError(str(e).replace(str(tmp / WEIGHTS), f"upload '{name}' ({WEIGHTS})")
                              .replace(str(tmp / CARD), f"upload '{name}' ({CARD})").replace(str(tmp), f"upload '{name}'")) from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
