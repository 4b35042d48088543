"""The runs folder: where trained runs live, safe names, new run folders and listing (uploads: ponder.store.uploads).

A user-supplied name never reaches the file system as-is: safe_name() keeps letters,
digits, '.', '_' and '-', and every path is checked to stay inside the runs folder
(no '../', no absolute paths, no symlinks pointing out).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..env import env_folder
from ..files import SaveError
from ..text import shown, text_problem
from .card import CARD, HISTORY, WEIGHTS, CheckpointError, read_card
from .record import RunRecord

ASSETS = Path(__file__).resolve().parents[2] / "assets"   # the repository's assets/ (ponder/store/runs.py)
MAX_NAME = 64
TRASH = ".deleted-"                 # a deleted run's folder while its files are removed (hidden, never listed)
SWEEP = "sweep.json"            # a folder holding it is a sweep: its trials are run folders inside it
TABLE = "sweep.md"              # a sweep folder's results as a Markdown table
LOG = "sweep.log"               # a sweep folder's trial records, appended while the sweep runs


class RunNameError(ValueError):
    """A run name or path that is not allowed."""


def runs_root() -> Path:
    """$PONDER_RUNS ("~" expanded), else ./runs."""
    return env_folder("PONDER_RUNS", "runs")


def safe_name(name: str) -> str:
    """A file-system-safe run name: [A-Za-z0-9._-], no leading '.', at most 64 characters."""
    if not isinstance(name, str) and name is not None:
        raise RunNameError(f"run name must be text, got {type(name).__name__}")
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", str(name or "")[:4 * MAX_NAME]).strip(".-_")[:MAX_NAME].strip(".-_")
    if not s:
        shown = repr(name) if len(str(name or "")) <= MAX_NAME else repr(str(name)[:MAX_NAME]) + "..."
        raise RunNameError(f"run name {shown} has no usable characters (use letters, digits, '.', '_', '-')")
    return s


def inside(root: Path, path: Path) -> bool:
    """True if path (symlinks resolved) is root or below it."""
    root_r, path_r = Path(root).resolve(), Path(path).resolve()
    return path_r == root_r or root_r in path_r.parents


def files_inside(root: Path, run_dir: Path) -> bool:
    """The run folder and its files are no symlinks and stay inside root once resolved."""
    if run_dir.is_symlink() or not inside(root, run_dir):
        return False
    for f in (CARD, WEIGHTS, HISTORY):
        p = run_dir / f
        if p.is_symlink() or (p.exists() and not inside(root, p)):
            return False
    return True


def run_path(root: Path, name: str) -> Path:
    """The folder of an existing run by name, refusing anything that leaves the runs folder."""
    p = Path(root) / safe_name(name)
    if not files_inside(Path(root), p):
        raise RunNameError(f"run {safe_name(name)!r} points outside the runs folder {root} (symlink)")
    return p


def run_identity(path) -> Optional[str]:
    """Which folder a run is, whatever its name: its device and inode ('dev:ino'). A rename keeps it; another
    run renamed to the same name has another. None when there is no such folder."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return f"{st.st_dev}:{st.st_ino}"


def _folder_name(name) -> bool:
    """A plain folder name: not a path (in the OS's reading: on POSIX 'a\\b' is one name, and a run folder so
    named is listed, so it can be renamed and deleted), not hidden, no NUL (which the OS calls refuse with a
    ValueError, not an OSError)."""
    return (isinstance(name, str) and bool(name) and name == Path(name).name and not name.startswith(".")
            and "\0" not in name)


PATH_MAX = 4096                     # bytes in a path the OS accepts (Linux); a run's files must fit under it
LONGEST_FILE = len(".model.safetensors.12345678.tmp")     # the longest name in a run folder: a temporary weights file


def check_fits(root: Path, name: str) -> None:
    """RunNameError unless every file of a run named `name` in root has a path the OS accepts: a longer one would
    make the run vanish from every list once it is there (its card unreadable by its path)."""
    n = len(os.fsencode(os.path.join(str(root), name, "x" * LONGEST_FILE)))
    if n >= PATH_MAX:
        raise RunNameError(f"the runs folder's path is {len(os.fsencode(str(root)))} bytes long, too long for a run "
                           f"named {name!r}: a run's files need paths under {PATH_MAX} bytes; use a shorter name or "
                           f"runs folder")


def unused_name(root: Optional[Path] = None, name: str = "run") -> str:
    """safe_name(name), else name-2, name-3, ...: the first that nothing in the runs folder is called yet."""
    root, base = Path(root or runs_root()), safe_name(name)
    for i in range(1, 10000):
        suffix = "" if i == 1 else f"-{i}"
        cand = base[:MAX_NAME - len(suffix)] + suffix
        if not os.path.lexists(root / cand):
            return cand
    raise RunNameError(f"too many runs named {base!r}")


def new_run_dir(root: Optional[Path] = None, name: str = "run") -> Path:
    """Create and return a fresh, unique run folder under root (name, name-2, name-3, ...).

    mkdir without exist_ok makes this safe when two sessions start runs at the same moment.
    """
    root = Path(root or runs_root())
    base = safe_name(name)                  # a bad name fails before anything is created
    check_fits(root, base + "-9999")
    make_root(root)
    for i in range(1, 10000):
        suffix = "" if i == 1 else f"-{i}"
        cand = root / (base[:MAX_NAME - len(suffix)] + suffix)
        try:
            cand.mkdir()
        except FileExistsError:
            continue
        except OSError as e:
            raise SaveError(root, e, "cannot create a run folder in the runs folder") from None
        if not inside(root, cand):
            raise RunNameError(f"run {base!r} points outside the runs folder {root}")
        return cand
    raise RunNameError(f"too many runs named {base!r}")


def make_root(root: Path) -> None:
    """Create the runs folder if needed; SaveError (one line) when it cannot be made or is no folder."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SaveError(root, e, "cannot create the runs folder") from None
    if not root.is_dir():
        raise SaveError(root, OSError(20, "not a folder"), "cannot use as the runs folder")


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:                 # removed while listing
        return 0.0


@dataclass
class ModelEntry:
    name: str          # shown in pickers
    path: Path         # the run folder
    source: str        # "shipped" (assets/) or "run" (runs folder)
    record: RunRecord  # its run.json, checked (ponder.store.card.read_card)
    sweep: str = ""    # the sweep folder's name when the run is one of its trials (runs/<sweep>/<trial>)


def list_models(root: Optional[Path] = None, assets: Path = ASSETS) -> list:
    """Shipped models then user runs (newest first). Folders with unreadable cards, or whose weights or history
    are symbolic links, are skipped (unreadable_runs lists them)."""
    out = []
    for source, folder in (("shipped", Path(assets)), ("run", Path(root or runs_root()))):
        if not folder.is_dir():
            continue
        try:
            dirs = _run_dirs(folder)
        except OSError:
            continue
        dirs.sort(key=(lambda d: d.relative_to(folder).as_posix()) if source == "shipped"
                  else (lambda d: -_mtime(d / CARD)))
        for d in dirs:
            try:
                card = _read_run(folder, d)
            except CheckpointError:
                continue
            rel = d.relative_to(folder).as_posix()
            out.append(ModelEntry(name=rel if source == "shipped" else f"runs/{rel}", path=d, source=source,
                                  record=RunRecord.from_card(card), sweep=d.parent.name if d.parent != folder else ""))
    return out


def unreadable_runs(root: Optional[Path] = None) -> list:
    """(name, reason) for each run folder in the runs folder (and its sweeps) that list_models skips as
    unreadable, so the Runs page can say why and offer to delete it."""
    folder, out = Path(root or runs_root()), []
    try:
        dirs = _run_dirs(folder)
    except OSError:
        return []
    for d in dirs:
        try:
            _read_run(folder, d)
        except CheckpointError as e:
            if (d / CARD).is_file():      # else renamed or deleted meanwhile (another session): not unreadable
                out.append((f"runs/{d.relative_to(folder).as_posix()}", " ".join(str(e).split())))
    return out


def _read_run(folder: Path, d: Path) -> dict:
    """The card of the run folder d of `folder`; CheckpointError when it cannot be read, a file of the run is a
    symbolic link (never read: it may point at another run's files, or anywhere) or its folder's name is no text
    (ponder.text: bytes that are not UTF-8, a control character), which no page could show."""
    rel = d.relative_to(folder).as_posix()
    if (problem := text_problem(rel, name=True)) is not None:
        raise CheckpointError(f"runs/{shown(rel)}: its folder's name {problem}")
    if not files_inside(folder, d):
        links = [f for f in (WEIGHTS, HISTORY) if (d / f).is_symlink()]
        raise CheckpointError(f"{d}: {' and '.join(links) or 'a file'} of the run is a symbolic link, which is never "
                              f"read")
    return read_card(d)


def models_stamp(root: Optional[Path] = None, assets: Path = ASSETS) -> tuple:
    """Changes whenever list_models(root, assets) could: the folders, and the mtime and size of every run card,
    in both and in their sweep folders (a stat each: a page run compares it instead of reading every card)."""
    out = []
    for folder in (Path(assets), Path(root or runs_root())):
        try:
            dirs = [folder, *(d for d in folder.iterdir() if d.is_dir() and (d / SWEEP).is_file())]
        except OSError:
            continue
        for d in dirs:
            for f in sorted(d.glob(f"*/{CARD}")):
                try:
                    st = f.stat()
                except OSError:
                    continue
                out.append((os.fsencode(f), st.st_mtime_ns, st.st_size))    # bytes: any name hashes
    return tuple(out)


def _run_dirs(folder: Path) -> list:
    """The run folders in folder, and the trials (run folders) of each sweep folder in it.

    No hidden folders (imports in progress, .tmp leftovers), no folder or card that is a symbolic link, nothing
    outside the folder (a weights or history file that is a link: listed, then refused by _read_run).
    """
    def runs_in(f: Path) -> list:
        return [d for d in f.iterdir() if not d.name.startswith(".") and d.is_dir() and not d.is_symlink()
                and (d / CARD).is_file() and not (d / CARD).is_symlink() and inside(folder, d)]

    return runs_in(folder) + [d for s in list_sweeps(folder, named=False) for d in runs_in(s)]


def list_sweeps(root: Optional[Path] = None, named: bool = True) -> list:
    """The sweep folders (holding sweep.json) in the runs folder, newest first; named: only those whose name is text
    (ponder.text; a page shows it), the others' trials being listed as unreadable runs (unreadable_runs)."""
    root = Path(root or runs_root())
    try:
        found = [s for s in root.iterdir() if not s.name.startswith(".") and s.is_dir() and not s.is_symlink()
                 and (s / SWEEP).is_file() and inside(root, s)
                 and not (named and text_problem(s.name, name=True))]
    except OSError:
        return []
    return sorted(found, key=lambda s: -_mtime(s / SWEEP))
