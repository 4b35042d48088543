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

from .atomic import SaveError
from .card import CARD, HISTORY, WEIGHTS, CheckpointError, read_card, update_card
from .checkpoint import load_checkpoint
from .tasks import count_parameters

ASSETS = Path(__file__).resolve().parent.parent / "assets"
MAX_NAME = 64
MAX_UPLOAD_BYTES = 50 * 1024 * 1024
IMPORT_MAX_STEPS, IMPORT_MAX_HIDDEN = 100, 512   # the largest N and hidden size the explorer's Train form trains
TRASH = ".deleted-"                              # a deleted run's folder while its files are removed
IMPORT_MAX_PARAMS = 4_000_000                   # its largest model has ~1.2 M (MNIST, hidden 512)
SWEEP = "sweep.json"            # a folder holding it is a sweep: its trials are run folders inside it


class RunNameError(ValueError):
    """A run name or path that is not allowed."""


def runs_root() -> Path:
    """$PONDER_RUNS, else ./runs."""
    return Path(os.environ.get("PONDER_RUNS") or "runs")


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


def _files_inside(root: Path, run_dir: Path) -> bool:
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
    if not _files_inside(Path(root), p):
        raise RunNameError(f"run {safe_name(name)!r} points outside the runs folder {root} (symlink)")
    return p


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
    _make_root(root)
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


def _make_root(root: Path) -> None:
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
    card: dict         # run.json
    sweep: str = ""    # the sweep folder's name when the run is one of its trials (runs/<sweep>/<trial>)


def list_models(root: Optional[Path] = None, assets: Path = ASSETS) -> list:
    """Shipped models then user runs (newest first). Folders with unreadable cards are skipped."""
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
                card = read_card(d)
            except CheckpointError:
                continue
            rel = d.relative_to(folder).as_posix()
            out.append(ModelEntry(name=rel if source == "shipped" else f"runs/{rel}", path=d, source=source,
                                  card=card, sweep=d.parent.name if d.parent != folder else ""))
    return out


def unreadable_runs(root: Optional[Path] = None) -> list:
    """(name, reason) for each run folder in the runs folder (and its sweeps) whose card list_models skips
    as unreadable, so the Runs page can say why and offer to delete it."""
    folder, out = Path(root or runs_root()), []
    try:
        dirs = _run_dirs(folder)
    except OSError:
        return []
    for d in dirs:
        try:
            read_card(d)
        except CheckpointError as e:
            out.append((f"runs/{d.relative_to(folder).as_posix()}", " ".join(str(e).split())))
    return out


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
                out.append((str(f), st.st_mtime_ns, st.st_size))
    return tuple(out)


def _run_dirs(folder: Path) -> list:
    """The run folders in folder, and the trials (run folders) of each sweep folder in it.

    No hidden folders (imports in progress, .tmp leftovers), no symlinks out of the folder.
    """
    def runs_in(f: Path) -> list:
        return [d for d in f.iterdir() if not d.name.startswith(".") and d.is_dir()
                and (d / CARD).is_file() and _files_inside(folder, d)]

    return runs_in(folder) + [d for s in list_sweeps(folder) for d in runs_in(s)]


def list_sweeps(root: Optional[Path] = None) -> list:
    """The sweep folders (holding sweep.json) in the runs folder, newest first."""
    root = Path(root or runs_root())
    try:
        found = [s for s in root.iterdir() if not s.name.startswith(".") and s.is_dir() and not s.is_symlink()
                 and (s / SWEEP).is_file() and inside(root, s)]
    except OSError:
        return []
    return sorted(found, key=lambda s: -_mtime(s / SWEEP))


def runs_quota() -> int:
    """Bytes an import may fill the runs folder up to: $PONDER_RUNS_QUOTA_MB (default 256) MB."""
    try:
        mb = float(os.environ.get("PONDER_RUNS_QUOTA_MB", "256"))
    except ValueError:
        mb = 256.0
    return int(max(mb, 0.0) * 1024 * 1024)


def folder_bytes(root: Path) -> int:
    """Bytes of the regular files under root (links not followed)."""
    total = 0
    for dirpath, _, files in os.walk(root):
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
    _make_root(root)
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
    upload cannot make every page that shows it run for minutes."""
    hidden = ck.card["model"].get("hidden", 0)
    params = count_parameters(ck.model)
    if ck.card["max_steps"] > IMPORT_MAX_STEPS or hidden > IMPORT_MAX_HIDDEN or params > IMPORT_MAX_PARAMS:
        raise CheckpointError(f"upload '{label}': N {ck.card['max_steps']}, hidden size {hidden}, {params:,} "
                              f"parameters: an import may have at most N {IMPORT_MAX_STEPS}, hidden "
                              f"{IMPORT_MAX_HIDDEN} and {IMPORT_MAX_PARAMS:,} parameters (the Train form's limits)")


def _remove_stale_imports(root: Path, older_than: float = 600.0) -> None:
    """Remove what a killed import or delete left behind, so it neither fills the disk nor counts toward the
    import quota: .import-* folders older than `older_than` seconds (an import takes seconds) and every
    .deleted-* folder (a deleted run, already gone from the lists)."""
    import time
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
