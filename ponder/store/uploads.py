"""Runs uploaded into the runs folder: size limits, the folder's quota, and the validated import.

An upload (bytes, or a file object such as Streamlit's UploadedFile) is size-checked before it is read,
written to a hidden temporary folder, loaded with load_checkpoint (no unpickling, shapes checked) and
only then moved into a fresh run folder (ponder.store.runs.new_run_dir). Its test metrics are dropped:
nobody checked them, so the explorer measures the run when it is shown.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Optional

from ..env import MAX_MB, env_number
from ..memory import MeasureMemoryError, measure_batch
from .atomic import SaveError
from .card import CARD, HISTORY, WEIGHTS, CheckpointError, update_card
from .checkpoint import load_checkpoint
from .runs import TRASH, make_root, new_run_dir, runs_root, safe_name
from ..tasks import count_parameters

MAX_UPLOAD_BYTES = 50 * 1024 * 1024    # weights + card + history of one upload
IMPORT_MAX_STEPS, IMPORT_MAX_HIDDEN = 100, 512   # the largest N and hidden size the explorer's Train form trains
IMPORT_MAX_PARAMS = 4_000_000          # its largest model has ~1.2 M (MNIST, hidden 512)


def runs_quota() -> int:
    """Bytes an import may fill the runs folder up to: $PONDER_RUNS_QUOTA_MB (default 256) MB. EnvError (one
    line) when it is set to anything but a finite number of megabytes."""
    return int(env_number("PONDER_RUNS_QUOTA_MB", 256.0, 0.0, MAX_MB) * 1024 * 1024)


def folder_bytes(root: Path) -> int:
    """Bytes of the regular files under root (links not followed), less the explorer's study results (.cache/:
    bounded on their own, and filled by any visitor, so they must not use up the import quota)."""
    total = 0
    for dirpath, dirs, files in os.walk(root):
        if Path(dirpath) == Path(root):
            dirs[:] = [d for d in dirs if d != ".cache"]
        for f in files:
            try:
                st = os.lstat(os.path.join(dirpath, f))
            except OSError:
                continue
            total += st.st_size if not os.path.islink(os.path.join(dirpath, f)) else 0
    return total


def import_checkpoint(weights: bytes, card: bytes, name: str, root: Optional[Path] = None,
                      history: Optional[bytes] = None, max_bytes: int = MAX_UPLOAD_BYTES,
                      quota: Optional[int] = None) -> Path:
    """Validate uploaded run files (model.safetensors + run.json) and add them to the runs folder.

    The files are written to a temporary folder, loaded with load_checkpoint (no unpickling,
    shapes checked), and only then renamed into the runs folder. The card keeps no test metrics:
    an upload's are unverified, so pages re-measure the run (explorer.loaders.test_metrics).
    Raises CheckpointError.
    """
    root = Path(root or runs_root())
    label = safe_name(name)                           # RunNameError before anything is read or written
    sizes = [upload_size(x) for x in (weights, card, history)]
    if sum(sizes) > max_bytes:
        raise CheckpointError(f"upload '{label}': {sum(sizes)} bytes is over the {max_bytes} byte limit")
    weights, card, history = (upload_bytes(x, what, label) for x, what in ((weights, WEIGHTS), (card, CARD), (history, HISTORY)))
    total = len(weights) + len(card) + len(history or b"")
    if total > max_bytes:
        raise CheckpointError(f"upload '{label}': {total} bytes is over the {max_bytes} byte limit")
    make_root(root)
    _remove_stale_imports(root)
    quota = runs_quota() if quota is None else quota
    used = folder_bytes(root)
    if used + total > quota:
        raise CheckpointError(f"upload '{label}': the runs folder holds {used / 2**20:.1f} MB and imports may fill it "
                              f"only up to {quota / 2**20:.0f} MB (PONDER_RUNS_QUOTA_MB): delete runs first")
    try:
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=".import-"))
    except OSError as e:
        raise SaveError(root, e, "cannot write to the runs folder") from None
    try:
        try:
            (tmp / WEIGHTS).write_bytes(weights)
            (tmp / CARD).write_bytes(card)
            if history:
                (tmp / HISTORY).write_bytes(history)
        except OSError as e:
            raise SaveError(root, e, "cannot write to the runs folder") from None
        _check_import_size(load_checkpoint(tmp), label)     # CheckpointError on anything wrong, or too large
        dest = new_run_dir(root, label)            # ours alone (mkdir); move the files into it
        try:
            # the card names the run by its folder; the uploaded test metrics are claims nobody
            # checked, so they are dropped and the explorer measures the run itself when it is shown
            update_card(tmp, name=dest.name, metrics={})
            for f in (WEIGHTS, HISTORY, CARD):     # the card last: listing skips folders without one
                if (tmp / f).exists():
                    os.replace(tmp / f, dest / f)
        except BaseException as e:
            shutil.rmtree(dest, ignore_errors=True)
            if isinstance(e, OSError) and not isinstance(e, SaveError):
                raise SaveError(dest, e, "cannot write the imported run") from None
            raise
        return dest
    except CheckpointError as e:
        raise CheckpointError(str(e).replace(str(tmp / WEIGHTS), f"upload '{label}' ({WEIGHTS})")
                              .replace(str(tmp / CARD), f"upload '{label}' ({CARD})").replace(str(tmp), f"upload '{label}'")) from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _check_import_size(ck, label: str) -> None:
    """CheckpointError unless an imported run is no larger than what the explorer's Train form trains, so one
    upload cannot make every page that shows it run for minutes, and unless one input of it can be measured
    within the measurement's memory budget (ponder.memory.measure_batch)."""
    hidden = ck.card["model"].get("hidden", 0)
    params = count_parameters(ck.model)
    if ck.card["train"]["max_steps"] > IMPORT_MAX_STEPS or hidden > IMPORT_MAX_HIDDEN or params > IMPORT_MAX_PARAMS:
        raise CheckpointError(f"upload '{label}': N {ck.card['train']['max_steps']}, hidden size {hidden}, {params:,} "
                              f"parameters: an import may have at most N {IMPORT_MAX_STEPS}, hidden "
                              f"{IMPORT_MAX_HIDDEN} and {IMPORT_MAX_PARAMS:,} parameters (the Train form's limits)")
    try:
        measure_batch(ck.model, 1)              # the pages measure it: one input at least must fit their budget
    except MeasureMemoryError as e:
        raise CheckpointError(f"upload '{label}': {e}") from None


def _remove_stale_imports(root: Path, older_than: float = 600.0) -> None:
    """Remove what a killed import or delete left behind, so it neither fills the disk nor counts toward the
    import quota: .import-* folders older than `older_than` seconds (an import takes seconds) and every
    .deleted-* folder (a deleted run, already gone from the lists)."""
    try:
        for p in [*root.glob(".import-*"), *root.glob(TRASH + "*")]:
            if p.is_dir() and not p.is_symlink() and (p.name.startswith(TRASH)
                                                      or time.time() - p.stat().st_mtime > older_than):
                shutil.rmtree(p, ignore_errors=True)
    except OSError:
        pass


def upload_size(x) -> int:
    """Bytes in an upload without reading it (bytes, or a file object such as Streamlit's UploadedFile)."""
    if x is None:
        return 0
    if isinstance(x, (bytes, bytearray, memoryview)):
        return len(x)
    size = getattr(x, "size", None)
    return size if isinstance(size, int) else 0


def upload_bytes(x, what: str, label: str) -> Optional[bytes]:
    """An upload's contents (bytes, or a file object's getvalue()/read()); None for a missing history
    file, CheckpointError (one line) for anything else missing or not bytes."""
    if x is None:
        if what == HISTORY:
            return None
        raise CheckpointError(f"upload '{label}' ({what}): missing")
    if isinstance(x, (bytes, bytearray, memoryview)):
        return bytes(x)
    for attr in ("getvalue", "read"):
        f = getattr(x, attr, None)
        if callable(f):
            data = f()
            if isinstance(data, (bytes, bytearray, memoryview)):
                return bytes(data)
    raise CheckpointError(f"upload '{label}' ({what}): expected file contents (bytes), got {type(x).__name__}")
