"""Files read in bounded time and written atomically, and folder locks. Imports nothing else from ponder: the
data loaders and the run store both stand on it.

Reads: read_regular, the bytes of a regular file up to a size limit (never waits on a FIFO); a file it
refuses raises CheckpointError. Writes: every write goes to a temporary file in the same folder (fsynced)
and is renamed into place, so a crash leaves the old file or the new one, never a half-written one.
Renaming the temporary files into place (one file, or several as one step under a journal) is
ponder.journal's.
SaveError is the one error a failed write raises: an OSError whose message is one line naming
the file and the reason (os_reason adds a hint for a full disk, a read-only file system, ...).
"""
from __future__ import annotations

import errno
import json
import math
import os
import stat
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


class CheckpointError(RuntimeError):
    """A run folder (or a file) that cannot be read. The message is one line and names the file."""


def read_regular(f: Path, limit: int, follow_links: bool = True) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, read in bounded time. Checked on the
    opened file (O_NONBLOCK: a FIFO does not wait for a writer), so a file swapped for a FIFO or a
    device after an earlier check is refused, never waited on; a file that grows past its size is
    cut at limit + 1 bytes and refused. CheckpointError (one line) otherwise; OSError when unreadable
    (or, with follow_links=False, when `f` itself is a symbolic link: O_NOFOLLOW)."""
    nofollow = 0 if follow_links else getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(f, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | nofollow)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CheckpointError(f"{f}: not a regular file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise CheckpointError(f"{f}: over the {limit} byte limit")
    return data


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


def unlink_quiet(name) -> None:
    try:
        os.unlink(name)
    except OSError:
        pass


def json_bytes(obj, indent=2) -> bytes:
    """JSON text of obj with NaN/inf written as null (JSON cannot hold them)."""
    return (json.dumps(jsonable(obj), indent=indent) + "\n").encode()


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
