"""A save of several files in one folder as one step: every temporary file is written first (ponder.files),
then a journal (JOURNAL) listing the renames, then the renames, then the journal is removed. A crash before the
journal is complete leaves the old files (the temporary ones are leftovers); a crash after it leaves a journal
that settle() finishes -- the folder's next writer, or load_checkpoint -- so the folder holds the new files,
never a mix of two saves.
"""
from __future__ import annotations

import json
import os
from contextlib import nullcontext
from pathlib import Path
from typing import Optional

from .files import (_UMASK, SaveError, _fsync_folders, folder_lock, holds_lock, json_bytes, remove_stale_tmp,
                    unlink_quiet, write_tmp)
from .text import text_ok

JOURNAL = ".commit.tmp"      # in a folder: the renames of a save that was cut short (settle() finishes them)


def write_journal(folder: Path, pairs, folder_name: Optional[str] = None) -> None:
    """The journal of a save: [[temporary name or null, file name], ...] in one folder, fsynced with the
    folder before the first rename. A journal cut short is not JSON, so settle() ignores it (no rename had
    started). folder_name: apply it only in a folder of that name (a rename moves the folder first)."""
    plan = {"renames": [[None if t is None else Path(t).name, Path(p).name] for t, p in pairs], "folder": folder_name}
    journal = Path(folder) / JOURNAL
    fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666 & ~_UMASK)
    try:
        os.write(fd, json.dumps(plan).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    _fsync_folders({journal.parent})


def _journal_plan(folder: Path) -> Optional[list]:
    """The renames a folder's journal lists, each a temporary file of its file in that folder; None when
    there is none, or it is cut short, odd (a name that is not a plain name: a path, a NUL or another control
    character, a lone surrogate; ponder.text), or written for a folder of another name."""
    try:
        fd = os.open(folder / JOURNAL, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            plan = json.loads(f.read(65536))
        renames, name = plan["renames"], plan.get("folder")
        ok = (name is None or name == folder.name) and isinstance(renames, list) and all(
            isinstance(r, list) and len(r) == 2 for r in renames) and all(
            text_ok(p, name=True) and p == Path(p).name and not p.startswith(".") and
            (t is None or (text_ok(t, name=True) and t == Path(t).name and t.startswith(f".{p}.") and t.endswith(".tmp")))
            for t, p in renames)
        return renames if ok else None
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None


def settle(folder, names=()) -> None:
    """Finish what a killed writer left in folder (the caller holds its lock, so no writer is alive): the
    renames its journal lists (the save is then complete), then every temporary file of `names`. Raises
    SaveError when the folder cannot be changed."""
    folder = Path(folder)
    if os.path.lexists(folder / JOURNAL):
        try:
            for tmp, path in _journal_plan(folder) or ():
                if tmp is None:
                    unlink_quiet(folder / path)
                elif os.path.isfile(folder / tmp) and not os.path.islink(folder / tmp):   # never a planted link
                    os.replace(folder / tmp, folder / path)
            _fsync_folders({folder})
            os.unlink(folder / JOURNAL)
        except (OSError, ValueError) as e:    # ValueError: a name the OS calls refuse (a NUL), never raised past here
            raise SaveError(folder, e if isinstance(e, OSError) else OSError(0, str(e)),
                            "cannot finish a save that was cut short") from None
    remove_stale_tmp(folder, names, older_than=0)


def settle_if_free(folder) -> None:
    """settle(folder) when a journal says a save was cut short and no writer holds the folder (a reader's
    call: a live writer, or a folder that cannot be changed, is left as it is)."""
    if not os.path.lexists(Path(folder) / JOURNAL):
        return
    try:
        with nullcontext() if holds_lock(folder) else folder_lock(folder):
            settle(folder)
    except OSError:
        pass


def commit(pairs) -> None:
    """Rename temporary files into place (a rename needs no free space); fsync the folders. A tmp of None
    removes its path. Several files in one folder are renamed under a journal, so that a crash between two
    renames is finished by settle() (the folder's next writer, load_checkpoint) instead of leaving a mix."""
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


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write via a temporary file in the same folder + rename: a crash leaves the old or the new file.

    Raises SaveError (an OSError with a one-line message naming the file) when it cannot write.
    """
    write_files({Path(path): data})


def atomic_write_json(path: Path, obj) -> None:
    atomic_write_bytes(path, json_bytes(obj))
