"""Atomic file writes: every write goes to a temporary file in the same folder (fsynced) and is
renamed into place, so a crash leaves the old file or the new one, never a half-written one.

A save of several files into one folder (a run's weights, history and card) is one step too: the renames
go through a journal (ponder.store.journal), so a crash between two of them is finished, never left a mix.

SaveError is the one error a failed write raises: an OSError whose message is one line naming
the file and the reason (os_reason adds a hint for a full disk, a read-only file system, ...).
"""
from __future__ import annotations

import errno
import json
import math
import os
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:                     # not on POSIX: folders are not locked
    fcntl = None

STALE_SECONDS = 3600      # temporary files this old were left by a killed writer

_UMASK = os.umask(0)
os.umask(_UMASK)


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


def write_tmp(path: Path, data: bytes) -> str:
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
        unlink_quiet(tmp)
        if isinstance(e, OSError):
            raise SaveError(path, e) from None
        raise
    return tmp


def commit(pairs) -> None:
    """Rename temporary files into place (a rename needs no free space); fsync the folders. A tmp of None
    removes its path. Several files in one folder are renamed under a journal, so that a crash between two
    renames is finished by settle() (the folder's next writer, load_checkpoint) instead of leaving a mix."""
    from .journal import JOURNAL, settle, write_journal
    pairs = [(tmp, Path(path)) for tmp, path in pairs]
    folders = {p.parent for _, p in pairs}
    journal = folders.pop() / JOURNAL if len(pairs) > 1 and len(folders) == 1 else None
    done, path, journaled = 0, journal, False
    try:
        if journal is not None:
            write_journal(journal.parent, pairs)
            journaled = True
        for tmp, path in pairs:
            if tmp is None:
                unlink_quiet(path)
            else:
                os.replace(tmp, path)
            done += 1
    except OSError as e:
        if done == 0:                          # nothing replaced: the old files stand, the new ones go
            for tmp, _ in pairs:
                if tmp is not None:
                    unlink_quiet(tmp)
            if journaled:
                unlink_quiet(journal)
        elif journal is not None:              # some replaced: the save must be finished, now or by a later settle()
            try:
                return settle(journal.parent)
            except OSError:
                pass
        raise SaveError(path, e) from None
    _fsync_folders({p.parent for _, p in pairs})
    if journal is not None:
        os.unlink(journal)


def _fsync_folders(folders) -> None:
    for folder in folders:
        try:                                   # make the renames durable (best effort)
            dfd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError:
            pass


def write_files(files: dict) -> None:
    """{path: bytes, or None to remove it}: every temporary file first (where a full disk fails), then the
    renames in the dict's order. A failure before the renames leaves nothing behind."""
    written = []
    try:
        for path, data in files.items():
            written.append((None if data is None else write_tmp(Path(path), data), Path(path)))
    except BaseException:
        for tmp, _ in written:
            if tmp is not None:
                unlink_quiet(tmp)
        raise
    commit(written)


def unlink_quiet(name) -> None:
    try:
        os.unlink(name)
    except OSError:
        pass


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write via a temporary file in the same folder + rename: a crash leaves the old or the new file.

    Raises SaveError (an OSError with a one-line message naming the file) when it cannot write.
    """
    write_files({Path(path): data})


def json_bytes(obj, indent=2) -> bytes:
    """JSON text of obj with NaN/inf written as null (JSON cannot hold them)."""
    return (json.dumps(jsonable(obj), indent=indent) + "\n").encode()


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_bytes(path, json_bytes(obj))


def jsonable(obj):
    """JSON cannot hold NaN/inf: write them as null."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj


def check_writable(folder: Path, what: str = "cannot write the run folder") -> bool:
    """Create folder (if needed) and write and remove a probe file in it. Returns whether it was
    created here. Raises SaveError (one line) when it cannot be used: unwritable, a file in the way,
    a read-only file system; so a long training never starts for a folder it cannot save in."""
    folder = Path(folder)
    created = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test-", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise SaveError(folder, e, what) from None
    return created


def remove_if_empty(folder) -> None:
    """Remove a folder that holds nothing (a run folder a failed save left behind)."""
    try:
        Path(folder).rmdir()
    except OSError:
        pass


_HELD = threading.local()  # .keys: the (device, inode) of the folders this thread holds locked


def _folder_key(st) -> tuple:
    return (st.st_dev, st.st_ino)


def holds_lock(folder) -> bool:
    """Whether this thread holds folder_lock on folder (it is then the folder's only writer)."""
    try:
        return _folder_key(os.stat(folder)) in getattr(_HELD, "keys", set())
    except OSError:
        return False


@contextmanager
def folder_lock(folder: Path, shared: bool = False):
    """Hold an exclusive lock on an existing folder while one writer (a training, a save, a rename)
    owns it; shared=True for readers (an export), who only keep writers out.

    flock on the folder itself: no lock file is left behind, and the lock goes when the process
    does (kill -9 included). Every writer of a run folder takes it (save_run, update_card, the
    trainings, ponder.store.manage), so a folder locked here has no other live writer. A folder another
    process (or another call here) holds raises SaveError; it never waits.
    """
    if fcntl is None:
        yield
        return
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as e:
        raise SaveError(folder, e, "cannot lock the run folder") from None
    key, held = None, getattr(_HELD, "keys", None)
    if held is None:
        held = _HELD.keys = set()
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SaveError(folder, OSError(errno.EBUSY, "another training is writing to it; wait for it to end "
                                                         "or pick another folder"), "in use") from None
        if not shared:
            key = _folder_key(os.fstat(fd))
            held.add(key)
        yield
    finally:
        if key is not None:
            held.discard(key)
        os.close(fd)


def remove_stale_tmp(folder: Path, names, older_than: float = STALE_SECONDS) -> None:
    """Delete temporary files of `names` a killed writer left behind: those older than `older_than`
    seconds (a live writer's are fresh), or all of them (older_than=0) when the caller holds the
    folder's lock, so that no other writer is alive."""
    now = time.time()
    try:
        for p in folder.glob(".*.tmp"):
            if p.name.startswith(tuple("." + f + "." for f in names)) and p.is_file() \
                    and not p.is_symlink() and now - p.stat().st_mtime >= older_than:
                p.unlink()
    except OSError:
        pass
