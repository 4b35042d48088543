"""A sweep's journal: what the sweep folder says about its trials while they run, written by one object that both
backends tell when a trial starts and ends (ponder.sweeps.run's local loop, ponder.sweeps.ray_backend).

DIR/sweep.json (the plan and every trial's entry) and DIR/sweep.md (the same as a table) are written whole at the
start and the end (write); in between each trial's entry is appended to DIR/sweep.log as it starts and as it ends
(one JSON line: nothing is rewritten whole per trial). ponder.sweeps.record.read_sweep reads sweep.json with the
log's newer entries, so a killed sweep still says what it finished.
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Callable, Optional

from ..files import SaveError
from ..journal import atomic_write_bytes, atomic_write_json
from ..store.record import RunRecord, new_record
from ..store.runs import LOG, SWEEP, TABLE
from .plan import Plan, Trial, markdown_table


class SweepJournal:
    """The sweep folder's files for `trials` of `plan`; `kept`: entries of an earlier sweep's other trials, kept in
    sweep.json. on_trial(trial) is told after each start and end. Thread-safe (Ray's results arrive on the
    driver's thread, a local sweep's on the caller's)."""

    def __init__(self, folder: Path, plan: Plan, trials: list, backend: str, kept: list = (),
                 on_trial: Optional[Callable[[Trial], None]] = None):
        self.folder, self.plan, self.trials, self.kept, self.on_trial = Path(folder), plan, trials, list(kept), on_trial
        self.info = dict(plan=plan.to_dict(), backend=backend, started=time.time())
        self.lock = threading.Lock()

    def write(self) -> None:
        """sweep.json and sweep.md, whole, and an empty sweep.log (its entries are in sweep.json now)."""
        with self.lock:
            atomic_write_json(self.folder / SWEEP, dict(self.info, updated=time.time(),
                                                        trials=[t.entry() for t in self.trials] + self.kept))
            atomic_write_bytes(self.folder / TABLE, markdown_table(self.plan, self.trials).encode())
            _append(self.folder / LOG, b"", "w")

    def started(self, t: Trial) -> None:
        t.status = "running"
        self._append(t)

    def finished(self, t: Trial, record: RunRecord) -> None:
        t.end(record)
        self._append(t)

    def unfinished(self, status: str, reason: str) -> None:
        """End every trial still pending or running with this status and reason (the sweep stopped under them),
        then write the whole state."""
        for t in self.trials:
            if t.status in ("pending", "running"):
                t.end(new_record(t.config, {}, status=status, reason=reason, device=""))
        self.write()

    def _append(self, t: Trial) -> None:
        with self.lock:
            _append(self.folder / LOG, (json.dumps(t.entry()) + "\n").encode())
        if self.on_trial:
            self.on_trial(t)


def _append(f: Path, data: bytes, mode: str = "a") -> None:
    """Append data to f (mode "w": replace it), flushed; SaveError (one line naming f) when it cannot be written."""
    try:
        with open(f, mode + "b") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as e:
        raise SaveError(f, e) from None
