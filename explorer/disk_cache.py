"""Study results kept on disk per model, so a page opens at once on a fresh server.

st.cache_data keeps a result for the life of the server process; the measurements behind the Rotation,
Parity and "worth it?" charts take seconds to tens of seconds on a busy CPU, so each is also written
here once: one JSON file per (study, model, settings) under <runs folder>/.cache/studies/ (a hidden
folder, which the run listings skip). The key holds the run folder, its file stamp (mtime and size of
the weights and the card: a run saved again is measured again), the study's settings and SCHEMA, a hash of the
test measurement's fields (ponder.analysis.metrics.TestMetrics): a new field measures every model again.
The measurement runs with the torch threads of the page that asks for it (streamlit_app.py: the cores the load
average leaves free; on a loaded 2-core machine two threads wait on each other, 200 images × 16 rotations took
8.0 s with two, 0.3 s with one).
A file that cannot be read or parsed, or whose key differs, is ignored and the result recomputed;
a folder that cannot be written only means the result is not kept.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable, Optional

from ponder.analysis.metrics import schema
from ponder.journal import atomic_write_bytes
from ponder.store.runs import runs_root

SCHEMA = schema()  # the test measurement's schema: a result kept under another one is measured again
MAX_FILES = 200    # results kept (the newest; a 2,000-image rotation study is about 1 MB)
MAX_BYTES = 64 * 2**20   # and at most this many bytes of them: any visitor can ask for studies with new settings


def folder() -> Path:
    return runs_root() / ".cache" / "studies"


def key_of(study: str, path: str, file_stamp: tuple, settings: dict) -> dict:
    return {"schema": SCHEMA, "study": study, "model": str(Path(path).resolve()),
            "stamp": list(file_stamp), "settings": settings}


def file_of(key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return folder() / f"{key['study']}-{digest}.json"


def read(study: str, path: str, file_stamp: tuple, settings: dict) -> Optional[object]:
    """The kept result, or None (none kept, unreadable, corrupt, or kept for other settings)."""
    key = key_of(study, path, file_stamp, settings)
    try:
        got = json.loads(file_of(key).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(got, dict) or got.get("key") != json.loads(json.dumps(key)) or "result" not in got:
        return None
    return got["result"]


def write(study: str, path: str, file_stamp: tuple, settings: dict, result) -> None:
    """Keep result (atomically: a crash leaves the old file or the new one). Quiet when it cannot."""
    key = key_of(study, path, file_stamp, settings)
    try:
        folder().mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(file_of(key), json.dumps({"key": key, "result": result}, default=_plain).encode())   # NaN kept as NaN
        prune()
    except (OSError, TypeError, ValueError):
        pass


def prune(keep: int = MAX_FILES, max_bytes: int = MAX_BYTES) -> None:
    """Remove all but the `keep` newest results that fit in `max_bytes` together (a deleted run's results, old
    settings)."""
    files = []
    for f in folder().glob("*.json"):
        try:
            st = f.stat()
            files.append((st.st_mtime_ns, st.st_size, f))
        except OSError:
            continue
    total = 0
    for i, (_, size, f) in enumerate(sorted(files, key=lambda t: t[0], reverse=True)):
        total += size
        if i >= keep or total > max_bytes:
            f.unlink(missing_ok=True)


def _plain(obj):
    """numpy / torch numbers and arrays as JSON numbers and lists."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"{type(obj).__name__} is not JSON data")


def cached(study: str, path: str, file_stamp: tuple, settings: dict, compute: Callable[[], object]):
    """The kept result of compute() for these settings, else compute() now and keep it. The result is
    what a JSON round trip gives back (tuples as lists), the same whether it was kept or just computed."""
    got = read(study, path, file_stamp, settings)
    if got is not None:
        return got
    result = json.loads(json.dumps(compute(), default=_plain))
    write(study, path, file_stamp, settings, result)
    return result
