"""Runs uploaded into the runs folder: size limits, the folder's quota, and the validated import.

An upload (bytes, or a file object such as Streamlit's UploadedFile) is size-checked before it is read,
written to a hidden temporary folder, loaded with load_checkpoint (no unpickling, shapes checked) and
only then moved into a fresh run folder (ponder.store.runs.new_run_dir). Its test metrics are dropped:
nobody checked them, so the explorer measures the run when it is shown.
"""
from __future__ import annotations

import errno
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

from ..env import MAX_MB, env_number
from ..training.memory import MeasureMemoryError, measure_batch
from ..analysis.compute import MeasureComputeError, affordable_items
from ..files import _UMASK, STALE_SECONDS, SaveError, folder_lock, remove_if_empty, remove_stale_tmp
from ..journal import JOURNAL, settle
from .card import CARD, HISTORY, WEIGHTS, CheckpointError, update_card
from .checkpoint import load_checkpoint
from .runs import SWEEP, TRASH, make_root, new_run_dir, runs_root, safe_name
from ..tasks import count_parameters

MAX_UPLOAD_BYTES = 50 * 1024 * 1024    # weights + card + history of one upload
IMPORT_MAX_STEPS, IMPORT_MAX_HIDDEN = 100, 512   # the largest N and hidden size the explorer's Train form trains
IMPORT_MAX_PARAMS = 4_000_000          # its largest model has ~1.2 M (MNIST, hidden 512)
_IMPORTING = threading.Lock()           # imports in this process: one at a time from the quota check to the move
CLAIM_SECONDS = 60.0                   # an empty run folder no one holds, this old, is a killed rename's or import's claim


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
    an upload's are unverified, so pages re-measure the run (explorer.app.loaders.test_metrics).
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
    quota = runs_quota() if quota is None else quota
    with _IMPORTING:                                  # the quota is checked by one import at a time, until it has landed
        remove_leftovers(root)
        used = folder_bytes(root)
        if used + total > quota:
            raise CheckpointError(f"upload '{label}': the runs folder holds {used / 2**20:.1f} MB and imports may fill "
                                  f"it only up to {quota / 2**20:.0f} MB (PONDER_RUNS_QUOTA_MB): delete runs first")
        return _land(root, label, weights, card, history)


def _land(root: Path, label: str, weights: bytes, card: bytes, history: Optional[bytes]) -> Path:
    """import_checkpoint's files into a hidden folder, checked there, then moved into a fresh run folder at once."""
    try:
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=".import-"))
        os.chmod(tmp, 0o777 & ~_UMASK)                # mkdtemp makes 0700: the run folder it becomes gets the usual mode
    except OSError as e:
        raise SaveError(root, e, "cannot write to the runs folder") from None
    try:
        try:
            for f, data in ((WEIGHTS, weights), (CARD, card), (HISTORY, history)):
                if data:
                    (tmp / f).write_bytes(data)
        except OSError as e:
            raise SaveError(root, e, "cannot write to the runs folder") from None
        _check_import_size(load_checkpoint(tmp), label)     # CheckpointError on anything wrong, or too large
        dest = new_run_dir(root, label)            # claims the name: an empty folder (one a crash left is removed)
        try:
            # the card names the run by its folder; the uploaded test metrics are claims nobody
            # checked, so they are dropped and the explorer measures the run itself when it is shown
            update_card(tmp, name=dest.name, metrics={})
            with folder_lock(dest):                # no training starts in the claimed folder meanwhile
                os.rename(tmp, dest)               # the whole run appears at once, in place of the empty claim
        except BaseException as e:
            if not (isinstance(e, SaveError) and e.errno == errno.EBUSY):   # a training took it: its folder now
                remove_if_empty(dest)
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
    within the measurement's memory and compute budgets (ponder.training.memory.measure_batch,
    ponder.analysis.compute.affordable_items)."""
    hidden = ck.record.model.get("hidden", 0)
    params = count_parameters(ck.model)
    if ck.record.max_steps > IMPORT_MAX_STEPS or hidden > IMPORT_MAX_HIDDEN or params > IMPORT_MAX_PARAMS:
        raise CheckpointError(f"upload '{label}': N {ck.record.max_steps}, hidden size {hidden}, {params:,} "
                              f"parameters: an import may have at most N {IMPORT_MAX_STEPS}, hidden "
                              f"{IMPORT_MAX_HIDDEN} and {IMPORT_MAX_PARAMS:,} parameters (the Train form's limits)")
    try:
        measure_batch(ck.model, 1)              # the pages measure it: one input at least must fit their budgets
        affordable_items(ck.model, 1)
    except (MeasureMemoryError, MeasureComputeError) as e:
        raise CheckpointError(f"upload '{label}': {e}") from None


def remove_leftovers(root: Path, older_than: float = 600.0, claim_age: float = CLAIM_SECONDS,
                     tmp_age: float = STALE_SECONDS) -> None:
    """Clean what killed writers left in the runs folder, so that nothing invisible fills the disk, counts toward
    the import quota or blocks a name: every .deleted-* folder (a deleted run, already gone from the lists),
    .import-* folders older than `older_than` seconds (an import takes seconds), and in each run folder and
    sweep trial that no writer holds, a save cut short (finished: ponder.journal.settle) and temporary
    files older than `tmp_age`; a run folder left empty (a rename's or import's claim on a name) goes once it is
    `claim_age` seconds old."""
    now = time.time()
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for e in entries:
        try:
            if e.is_symlink() or not e.is_dir():
                continue
            if e.name.startswith(TRASH) or (e.name.startswith(".import-") and now - e.stat().st_mtime > older_than):
                shutil.rmtree(e.path, ignore_errors=True)
            elif not e.name.startswith("."):
                tidy_folder(Path(e.path), True, claim_age, tmp_age)
                if (Path(e.path) / SWEEP).is_file():
                    for t in os.scandir(e.path):
                        if t.is_dir(follow_symlinks=False):
                            tidy_folder(Path(t.path), False, claim_age, tmp_age)
        except OSError:                       # held by a writer, unreadable, removed meanwhile: left as it is
            continue


def claim(dest: Path) -> None:
    """mkdir dest, taking over an empty folder a killed rename or import left there (tidy_folder removes it).
    FileExistsError when the name is taken."""
    try:
        dest.mkdir()
    except FileExistsError:
        try:
            tidy_folder(dest)
        except OSError:                       # a file, a link, a folder held by a training
            pass
        dest.mkdir()


def tidy_folder(folder: Path, top: bool = True, claim_age: float = CLAIM_SECONDS, tmp_age: float = STALE_SECONDS) -> None:
    """remove_leftovers for one run folder (top: directly in the runs folder, where an empty one is a claim). Only
    a folder holding something that old is locked, so that a writer about to lock its fresh folder never finds it
    held here. Raises OSError (SaveError 'in use' when a writer holds it)."""
    now, names = time.time(), os.listdir(folder)

    def older(name, age) -> bool:
        return now - os.lstat(folder / name).st_mtime >= age
    def tmp(name) -> bool:
        return name.startswith(".") and name.endswith(".tmp")
    due = [n for n in names if tmp(n) and older(n, claim_age if n == JOURNAL else tmp_age)]
    # weights or a history without a card and without a journal to bring one: what a killed writer of an earlier
    # ponder left (invisible, and no page can delete it); such files, an hour old, belong to no run
    orphans = top and names and all(n in (WEIGHTS, HISTORY) or (tmp(n) and n != JOURNAL) for n in names) and all(
        older(n, tmp_age) and not os.path.isdir(folder / n) for n in names)
    if not (due or orphans or (top and not names and older("", claim_age))):
        return
    with folder_lock(folder):
        if JOURNAL in due:
            settle(folder)
        remove_stale_tmp(folder, (WEIGHTS, CARD, HISTORY), older_than=tmp_age)
        if orphans and not os.path.lexists(folder / CARD) and not os.path.lexists(folder / JOURNAL):
            for n in (WEIGHTS, HISTORY):
                if os.path.lexists(folder / n):
                    os.unlink(folder / n)
        if top and not os.listdir(folder):       # a claim, or a killed writer's leftovers only: no run
            os.rmdir(folder)


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
