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
Anyone who can write to the runs folder can write these files, so a kept file is read as every file from there is
(ponder.files.read_regular: a regular file, no link, at most MAX_RESULT_BYTES, never waited on; JSON nested at most
ponder.store.card.MAX_JSON_DEPTH deep, its text text: ponder.text), and its result must fit the shape its study
gives (`shape`, checked by fits). A file that cannot be read or parsed, whose key differs or whose result does not
fit is ignored and the result recomputed; a folder that cannot be written only means the result is not kept.
Pruning removes only regular files directly in the folder, and only when the folder is no link.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Callable, Optional

from ponder.analysis.metrics import schema
from ponder.files import CheckpointError, read_regular
from ponder.journal import atomic_write_bytes
from ponder.store.card import MAX_JSON_DEPTH, json_depth
from ponder.store.runs import runs_root
from ponder.text import walk_problem

SCHEMA = schema()  # the test measurement's schema: a result kept under another one is measured again
MAX_FILES = 5000   # results kept (the newest; a 2,000-image rotation study is about 1 MB, a run's measurement 2 kB)
MAX_BYTES = 64 * 2**20   # and at most this many bytes of them: any visitor can ask for studies with new settings
MAX_RESULT_BYTES = 16 * 2**20   # one kept file (a 10,000-image rotation study with its per-image lists: ~6 MB)
NUM, NUM_OR_NONE = "number", "number or null"      # shape leaves: an int or float (NaN kept), not true / false


def fits(value, shape) -> bool:
    """Whether a JSON value has `shape`: None (anything), NUM / NUM_OR_NONE, a type (str, bool, int, dict, list), a
    list [item shape] (a list of such items), a dict {key: shape} (a mapping holding those keys, a key ending in '?'
    optional; other keys as they are), {str: shape} (a mapping, each value of that shape), a tuple of shapes
    (any of them) or a function that raises or returns false for a value it refuses."""
    if shape is None:
        return True
    if callable(shape) and not isinstance(shape, type):
        try:
            return shape(value) is not False
        except Exception:                   # a check's refusal: ConfigError, KeyError, TypeError, ...
            return False
    if isinstance(shape, tuple):
        return any(fits(value, s) for s in shape)
    if shape in (NUM, NUM_OR_NONE):
        return (value is None and shape == NUM_OR_NONE) or (isinstance(value, (int, float)) and not isinstance(value, bool))
    if isinstance(shape, type):
        return isinstance(value, shape) and not (shape is int and isinstance(value, bool))
    if isinstance(shape, list):
        return isinstance(value, list) and all(fits(v, shape[0]) for v in value)
    if list(shape) == [str]:
        return isinstance(value, dict) and all(fits(v, shape[str]) for v in value.values())
    return isinstance(value, dict) and all(
        (k.endswith("?") and k[:-1] not in value) or (k.rstrip("?") in value and fits(value[k.rstrip("?")], s))
        for k, s in shape.items())


GROUP = {"count": int, "accuracy": NUM_OR_NONE, "mean_steps": NUM_OR_NONE, "expected_steps": NUM_OR_NONE,
         "halting_distribution": [NUM_OR_NONE]}       # ponder.analysis.unroll.group_stats
ROTATION = [{"kind": str, "angle": NUM, "n": int, "accuracy": NUM_OR_NONE, "expected_steps": NUM_OR_NONE,
             "mean_steps": NUM_OR_NONE, "median_steps": NUM_OR_NONE, "std_steps": NUM_OR_NONE,
             "halting_distribution": [NUM_OR_NONE], "per_step_accuracy": [NUM_OR_NONE], "all_seen_step?": NUM,
             "steps?": [NUM], "confidence?": [NUM], "correct?": [bool], "policies?": dict,
             **{f"{k}?": NUM_OR_NONE for k in ("q1", "q3", "lo", "hi")}}]    # ponder.analysis.studies.rotation_study
PARITY = {"sets": {str: {"k_range": [int], **GROUP}}, "by_k": [{"k": int, **GROUP}], "train_k": [int]}
POINT = {"mean_steps": NUM_OR_NONE, "accuracy": NUM_OR_NONE}
COMPARISON = {"policies": {str: POINT}, "ci95": {str: [NUM_OR_NONE]}}    # ponder.analysis.equal_steps.comparison
WORTH = {"n": int, "baselines": {"fixed_depth": [{"steps": NUM, "accuracy": NUM_OR_NONE}], "confidence_exit": [POINT],
                                 "at_equal_steps": {**COMPARISON, "operating_points": {str: dict}},
                                 "frontier?": {str: [POINT]}, "shift?": [COMPARISON]},
         "settle": (dict, None), "per_step_accuracy_by_group": (dict, None)}    # explorer.app.worth's measurement
SHIFTED = [{"name": str, **COMPARISON}]


def folder() -> Path:
    return runs_root() / ".cache" / "studies"


def linked() -> bool:
    """Whether the folder or .cache above it is a symbolic link (or cannot be looked at): then nothing is written
    or removed there, since a link may lead out of the runs folder."""
    try:
        return any(p.is_symlink() for p in (folder(), folder().parent))
    except OSError:
        return True


def key_of(study: str, path: str, file_stamp: tuple, settings: dict) -> dict:
    return {"schema": SCHEMA, "study": study, "model": str(Path(path).resolve()),
            "stamp": list(file_stamp), "settings": settings}


def file_of(key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:24]
    return folder() / f"{key['study']}-{digest}.json"


def read(study: str, path: str, file_stamp: tuple, settings: dict, shape=None) -> Optional[object]:
    """The kept result, or None (none kept, unreadable, not a regular file, too big, corrupt, kept for other
    settings, or not of `shape`)."""
    key = key_of(study, path, file_stamp, settings)
    try:
        got = json.loads(read_regular(file_of(key), MAX_RESULT_BYTES, follow_links=False).decode("utf-8"))
    except (OSError, CheckpointError, ValueError, RecursionError):     # UnicodeDecodeError is a ValueError
        return None
    if json_depth(got) > MAX_JSON_DEPTH or walk_problem(got) is not None:
        return None
    if not isinstance(got, dict) or got.get("key") != json.loads(json.dumps(key)) or "result" not in got:
        return None
    return got["result"] if fits(got["result"], shape) else None


def write(study: str, path: str, file_stamp: tuple, settings: dict, result) -> None:
    """Keep result (atomically: a crash leaves the old file or the new one). Quiet when it cannot."""
    key = key_of(study, path, file_stamp, settings)
    try:
        if linked():
            return
        folder().mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(file_of(key), json.dumps({"key": key, "result": result}, default=_plain).encode())   # NaN kept as NaN
        prune()
    except (OSError, TypeError, ValueError):
        pass


def prune(keep: int = MAX_FILES, max_bytes: int = MAX_BYTES) -> None:
    """Remove all but the `keep` newest results that fit in `max_bytes` together (a deleted run's results, old
    settings): regular files directly in the folder, never through a link (the folder itself or a file)."""
    files, where = [], folder()
    try:
        if linked() or not where.is_dir():
            return
        entries = list(os.scandir(where))
    except OSError:
        return
    for e in entries:
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if e.name.endswith(".json") and stat.S_ISREG(st.st_mode):
            files.append((st.st_mtime_ns, st.st_size, Path(e.path)))
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


def cached(study: str, path: str, file_stamp: tuple, settings: dict, compute: Callable[[], object], shape=None):
    """The kept result of compute() for these settings (when it fits `shape`), else compute() now and keep it. The
    result is what a JSON round trip gives back (tuples as lists), the same whether it was kept or just computed."""
    got = read(study, path, file_stamp, settings, shape)
    if got is not None:
        return got
    result = json.loads(json.dumps(compute(), default=_plain))
    write(study, path, file_stamp, settings, result)
    return result
