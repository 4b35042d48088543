"""One trial of a sweep, on either backend (ponder.sweeps.run trains it here, ponder.sweeps.ray_backend in a Ray task): one
ordinary run through ponder.training.lifecycle.run into its run folder, a failure recorded, never raised."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable, Optional

from ..training import lifecycle
from ..config import TrainConfig
from ..store.card import CARD, HISTORY, WEIGHTS, one_line
from ..store.record import RunRecord, new_record


def run_trial(cfg: TrainConfig, out: Path, load_data: Optional[Callable] = None,
              cancel: Optional[threading.Event] = None, callback: Optional[Callable] = None,
              on_phase: Optional[Callable] = None, eval_limit: Optional[int] = None) -> RunRecord:
    """Train one trial into the run folder `out` through lifecycle.run (measured on eval_limit test
    items, default all). Returns its record, the reason followed by any problem after the save (a failed
    evaluation); a failure is a record too, never an exception."""
    clear_run(out)                             # a rerun of a failed trial starts from nothing
    t0 = time.time()
    try:
        done = lifecycle.run(cfg, out, load_data=load_data, callback=callback, cancel=cancel,
                             on_phase=on_phase, eval_limit=eval_limit, name=Path(out).name)
    except Exception as e:                     # bad device, missing data, the folder cannot be written, ...
        return new_record(cfg, {}, status="failed", reason=one_line(e), device="", train_seconds=time.time() - t0)
    return done.record.completed(reason=done.reason)


def clear_run(out: Path) -> None:
    """Remove the run files of an earlier, unfinished attempt (only those: the folder may hold others)."""
    if Path(out).is_dir():
        for f in (CARD, WEIGHTS, HISTORY):
            (Path(out) / f).unlink(missing_ok=True)
