"""Managing runs: rename and delete the runs folder's runs, export any run as a .zip, import a .zip.

Only runs directly in the runs folder are renamed or deleted, and whole sweep folders deleted; the
shipped models (assets/) and single trials of a sweep are exported only. Every change takes the run folder's lock first
(ponder.files.folder_lock, the lock every writer holds: a CLI training, an explorer job until its
card has its test metrics, a save), so a run that is being written is refused, never changed under
its writer. A name is one folder inside the runs folder, never a path; a run folder or run file
that is a symbolic link is refused, never followed.

An export is a zip of model.safetensors, run.json and metrics.jsonl (when there is one);
import_zip reads such a zip in memory (nothing is extracted to disk) and hands the files to
ponder.store.uploads.import_checkpoint, which checks them like any upload.
"""
from __future__ import annotations

import errno
import io
import os
import shutil
import stat
import uuid
import zipfile
import zlib
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Optional

from ..files import SaveError, folder_lock, json_bytes, remove_if_empty, remove_stale_tmp, write_tmp
from ..journal import settle, settle_if_free, write_journal
from .card import (CARD, HISTORY, MAX_CARD_BYTES, MAX_HISTORY_BYTES, WEIGHTS, CheckpointError, read_card, read_regular,
                   update_card)
from .checkpoint import MAX_CHECKPOINT_BYTES
from .runs import (SWEEP, TRASH, RunNameError, _folder_name, check_fits, inside, run_identity, runs_root,
                   safe_name)
from .uploads import MAX_UPLOAD_BYTES, claim, import_checkpoint, upload_bytes, upload_size
from ..text import shown

RUN_FILES = (WEIGHTS, CARD, HISTORY)          # what an export holds, in this order (the card after the weights)
LIMITS = {WEIGHTS: MAX_CHECKPOINT_BYTES, CARD: MAX_CARD_BYTES, HISTORY: MAX_HISTORY_BYTES}
MAX_ZIP_ENTRIES = 16                          # an export holds 3; a zipped folder a few more


def _same_run(path: Path, name: str, identity: Optional[str]) -> None:
    """RunNameError when the folder now named `name` is not the run that was shown (identity from
    run_identity then): deleted and replaced meanwhile, e.g. by a rename in another session."""
    if identity is not None and run_identity(path) != identity:
        raise RunNameError(f"runs/{name} is no longer the run you opened (another session deleted or replaced "
                           f"it meanwhile): nothing was changed; look at the list again")


def own_run(name: str, root: Optional[Path] = None) -> Path:
    """The folder of the run `name` directly in the runs folder, which rename and delete may change.

    RunNameError (one line) for anything else: a path instead of a name, a hidden folder, no such
    run, a symbolic link, a folder without a run card, a sweep or a folder holding another run (a folder
    with a run card or a sweep record in it). Other sub-folders (.ipynb_checkpoints/, __pycache__/) go with the run.
    """
    root = Path(root or runs_root())
    if not _folder_name(name):
        raise RunNameError(f"{name!r} is not the name of a run in the runs folder (a folder name, not a path)")
    path = root / name
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise RunNameError(f"there is no run named {name!r} in the runs folder {root}") from None
    except OSError as e:
        raise SaveError(path, e, "cannot read the run folder") from None
    if stat.S_ISLNK(st.st_mode):
        raise RunNameError(f"runs/{name} is a symbolic link: it is never renamed or deleted here")
    if not stat.S_ISDIR(st.st_mode) or not inside(root, path):
        raise RunNameError(f"runs/{name} is not a run folder")
    try:
        card = os.lstat(path / CARD)
        with os.scandir(path) as it:
            entries = list(it)
    except OSError:
        raise RunNameError(f"runs/{name} holds no run (no {CARD})") from None
    if not stat.S_ISREG(card.st_mode):
        raise RunNameError(f"runs/{name}/{CARD} is not a regular file (a link?): the run is left alone")
    if os.path.lexists(path / SWEEP) or any(e.is_dir(follow_symlinks=False) and _holds_runs(e.path) for e in entries):
        raise RunNameError(f"runs/{name} holds other runs (a sweep?), not only a run's files: it is left alone")
    return path


def _holds_runs(folder, levels: int = 2, own: tuple = ()) -> bool:
    """Whether a folder, or one up to `levels - 1` levels below it, holds a run card or a sweep record (other than
    the names in `own`, which it may hold itself), never through a link; True when it cannot be looked into."""
    try:
        with os.scandir(folder) as it:
            entries = [(e.name, e.path, e.is_dir(follow_symlinks=False)) for e in it]
    except OSError:
        return True
    return any(n in (CARD, SWEEP) and n not in own for n, _, _ in entries) or (
        levels > 1 and any(d and _holds_runs(p, levels - 1) for _, p, d in entries))


@contextmanager
def _writing(path: Path, shown: str, shared: bool = False):
    """The folder's lock, with a message for people (naming it as `shown`) when a training holds it."""
    try:
        with folder_lock(path, shared=shared) as held:
            yield held
    except SaveError as e:
        if e.errno != errno.EBUSY:
            raise
        why = "a training is writing it, or another session is renaming, deleting or exporting it; try again when it has finished"
        raise SaveError(shown, OSError(errno.EBUSY, why), "in use") from None


def rename_run(name: str, new_name: str, root: Optional[Path] = None, identity: Optional[str] = None) -> Path:
    """Rename the run `name` to safe_name(new_name) (letters, digits, '.', '_', '-'); returns the new folder.
    identity: run_identity() of the run when it was shown; another run under that name is refused.

    Refuses a name that is already taken (by a run, a file or anything else) and a run being written. The card's
    name follows the folder; its time stamp does not change (the run keeps its place in the newest-first lists).
    """
    root = Path(root or runs_root())
    src = own_run(name, root)
    new = safe_name(new_name)
    if new == src.name:
        raise RunNameError(f"the run is already named {new!r}")
    check_fits(root, new)
    dest = root / new
    with _writing(src, f"runs/{src.name}"):
        _same_run(src, name, identity)
        settle(src, RUN_FILES)                     # the lock holder: a journal or .tmp file is a killed writer's
        # the card's new name is committed by a journal for the new folder name: a crash before the move leaves
        card = read_card(src)                      # the run as it was, one after it the renamed run (settle()); one
        try:                                       # line when a journal cut short took the card away
            stamp = os.stat(src / CARD)
        except OSError as e:
            raise CheckpointError(f"runs/{src.name}/{CARD}: cannot read it ({e.strerror}); nothing was renamed") from None
        card_tmp = write_tmp(src / CARD, json_bytes(dict(card, name=new)))
        os.utime(card_tmp, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))    # keeps its place in newest-first lists
        try:
            try:                                   # an empty folder: refuses a name taken, even at the same moment
                claim(dest)
            except FileExistsError:
                raise RunNameError(f"a run (or file) named {new!r} is already in the runs folder; pick another name") from None
            try:
                with _writing(dest, f"runs/{new}"):    # no training starts in the claimed name meanwhile
                    write_journal(src, [(card_tmp, src / CARD)], folder_name=new)
                    os.rename(src, dest)           # replaces the empty folder made above, in one step
            except BaseException as e:
                if not (isinstance(e, SaveError) and e.errno == errno.EBUSY):   # a training took it: its folder now
                    remove_if_empty(dest)
                raise
        except BaseException as e:
            if src.exists():                       # not moved: the run stays as it was
                settle(src, RUN_FILES)
            if isinstance(e, OSError) and not isinstance(e, SaveError):
                raise SaveError(dest, e, "cannot rename the run") from None
            raise
        settle(dest)                               # the card's new name
    return dest


def delete_run(name: str, root: Optional[Path] = None, identity: Optional[str] = None) -> None:
    """Delete the run `name` (its folder and files). Refuses a run being written, and (identity: its
    run_identity() when it was shown) a run that is not the one shown.

    The folder is first renamed to a hidden name (gone from every list at once), then removed;
    nothing outside it is touched (links inside are removed, never followed).
    """
    root = Path(root or runs_root())
    path = own_run(name, root)
    with _writing(path, f"runs/{name}"):
        _same_run(path, name, identity)
        trash = _hide(root, path)
    _discard(root, trash, f"run {name!r}")


def _hide(root: Path, path: Path) -> Path:
    """Rename a folder to a hidden name in root (gone from every list at once); returns that name."""
    trash = root / f"{TRASH}{path.name}-{uuid.uuid4().hex[:8]}"
    try:
        os.rename(path, trash)
    except OSError as e:
        raise SaveError(path, e, "cannot delete it") from None
    return trash


def _discard(root: Path, trash: Path, what: str) -> None:
    """Remove a hidden folder _hide made, and any a killed delete left; links inside are removed, never followed."""
    for p in [trash] + [p for p in root.glob(TRASH + "*") if p != trash]:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
    if trash.exists():
        raise SaveError(trash, OSError(errno.EACCES, "some files could not be removed"),
                        f"{what} is gone from the lists, but not all its files")


def own_sweep(name: str, root: Optional[Path] = None) -> Path:
    """The folder of the sweep `name` in the runs folder (sweep.json, sweep.md, trial run folders and any other file
    or folder that holds no sweep of its own), which delete_sweep may remove. RunNameError (one line) otherwise."""
    root = Path(root or runs_root())
    if not _folder_name(name):
        raise RunNameError(f"{name!r} is not the name of a sweep in the runs folder (a folder name, not a path)")
    path = root / name
    if path.is_symlink() or not path.is_dir() or not inside(root, path):
        raise RunNameError(f"runs/{name} is not a sweep folder (or it is a symbolic link)")
    if (path / SWEEP).is_symlink() or not (path / SWEEP).is_file():
        raise RunNameError(f"runs/{name} is not a sweep folder (no {SWEEP})")
    with os.scandir(path) as it:
        for e in it:              # files (sweep.json, sweep.md, a stray note) go with it; a folder that holds a
            if e.is_dir(follow_symlinks=False) and _holds_runs(e.path, 3, own=(CARD,)):    # of its own does not
                raise RunNameError(f"runs/{name} holds {shown(e.name)}, which holds a sweep of its own: the sweep "
                                   f"is left alone")
    return path


def delete_sweep(name: str, root: Optional[Path] = None) -> int:
    """Delete a sweep folder and its trials; returns how many trials it held. Refuses a sweep that is
    running (run_sweep holds the sweep folder's lock) or a trial being written."""
    root = Path(root or runs_root())
    path = own_sweep(name, root)
    with _writing(path, f"runs/{name}"), ExitStack() as trials:
        dirs = [d for d in path.iterdir() if d.is_dir() and not d.is_symlink()]
        for d in dirs:
            trials.enter_context(_writing(d, f"runs/{name}/{d.name}"))
        trash = _hide(root, path)
    _discard(root, trash, f"sweep {name!r}")
    return sum(not d.name.startswith(".") for d in dirs)      # its trials (.ipynb_checkpoints/ is none)


def _read(path: Path, limit: int) -> Optional[bytes]:
    """A regular file's bytes (None when it is missing); a link is not followed, a FIFO not waited on."""
    try:
        return read_regular(path, limit, follow_links=False)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read it (a symbolic link?: {e.strerror})") from None


def export_run(run_dir) -> bytes:
    """A zip of a run folder's model.safetensors, run.json and metrics.jsonl (any run: shipped, a sweep's
    trial, the runs folder's). Refuses a run that is being written, and links."""
    path = Path(run_dir)
    if path.is_symlink() or not path.is_dir():
        raise CheckpointError(f"{path}: not a run folder")
    settle_if_free(path)                              # a save cut short: finished first, never exported half-done
    with _writing(path, path.name, shared=True):     # writers wait for no one: a save meanwhile is refused
        files = {f: _read(path / f, LIMITS[f]) for f in RUN_FILES}
    for f in (f for f in (WEIGHTS, CARD) if files[f] is None):
        raise CheckpointError(f"{path / f}: missing, nothing to export")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for f, data in files.items():
            if data is not None:
                info = zipfile.ZipInfo(f, date_time=(1980, 1, 1, 0, 0, 0))    # the same run, the same bytes
                info.external_attr = 0o644 << 16                                  # rw-r--r-- when unzipped
                zf.writestr(info, data, zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def import_zip(data, name: str, root: Optional[Path] = None, max_bytes: int = MAX_UPLOAD_BYTES,
               quota: Optional[int] = None) -> Path:
    """Import a zip holding model.safetensors and run.json (metrics.jsonl optional), as export_run writes
    it or a zipped run folder (files found by their names; anything else in it is ignored, nothing is
    extracted). Sizes are checked before and while reading. Returns the new run folder; CheckpointError."""
    label = safe_name(name)
    if upload_size(data) > max_bytes:
        raise CheckpointError(f"upload '{label}': {upload_size(data)} bytes is over the {max_bytes} byte limit")
    raw = upload_bytes(data, "zip", label)
    try:
        zf = zipfile.ZipFile(io.BytesIO(raw))
        entries = zf.infolist()
        if len(entries) > MAX_ZIP_ENTRIES:
            raise CheckpointError(f"upload '{label}': {len(entries)} files in the zip; a run has 3")
        found = {}
        for info in entries:
            base = info.filename.replace("\\", "/").rsplit("/", 1)[-1]
            if info.is_dir() or base not in RUN_FILES or info.filename.startswith("__MACOSX"):
                continue
            if base in found:
                raise CheckpointError(f"upload '{label}': the zip holds more than one {base}")
            found[base] = info
        if sum(i.file_size for i in found.values()) > max_bytes:
            raise CheckpointError(f"upload '{label}': the zip unpacks to more than {max_bytes} bytes")
        files = {}
        for base, info in found.items():
            with zf.open(info) as f:
                files[base] = f.read(max_bytes + 1)        # a size in the zip may lie: read at most this
            if sum(len(b) for b in files.values()) > max_bytes:
                raise CheckpointError(f"upload '{label}': the zip unpacks to more than {max_bytes} bytes")
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError, OSError) as e:
        if isinstance(e, CheckpointError):
            raise
        why = " ".join(str(e).split())[:200] or e.__class__.__name__
        raise CheckpointError(f"upload '{label}': not a readable zip ({why})") from None
    for f in (WEIGHTS, CARD):
        if f not in files:
            raise CheckpointError(f"upload '{label}': the zip holds no {f} (an export of a run holds "
                                  f"{', '.join(RUN_FILES)})")
    return import_checkpoint(files[WEIGHTS], files[CARD], label, root, history=files.get(HISTORY),
                             max_bytes=max_bytes, quota=quota)
