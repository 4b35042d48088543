"""Cached loaders: st.cache_resource for models, datasets and the job registry (shared objects),
st.cache_data for evaluation results (plain numbers, copied per session).

Cache keys carry a file stamp (mtime and size of the run's files), so a run saved again under
the same folder is reloaded.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import streamlit as st

from ponder.analysis.compute import affordable_items
from ponder.analysis.metrics import TestMetrics, check_test_metrics
from ponder.store.card import CARD, WEIGHTS, read_history
from ponder.store.checkpoint import Checkpoint, load_checkpoint
from ponder.training.lifecycle import QUICK_TEST_ITEMS, card_metrics, measure
from ponder.training.memory import measure_batch
from ponder.tasks import get_task
from ponder.tasks.parity.task import fitted_preset, layout_of
from ponder.store.runs import ModelEntry, list_models, models_stamp
from ponder.sweeps.plan import MAX_TRIALS
from ponder import data as D
from ponder.analysis.studies import parity_sets, parity_study, pondering_gallery as pondering_gallery_of, rotation_study

from .. import disk_cache
from ..drawing.digits import data_dir, missing_data_message, mnist_dataset
from ..jobs.registry import JobRegistry


def stamp(path) -> tuple:
    """Changes when a run folder's weights or card change."""
    out = []
    for f in (WEIGHTS, CARD):
        try:
            s = (Path(path) / f).stat()
            out += [s.st_mtime_ns, s.st_size]
        except OSError:
            out += [0, 0]
    return tuple(out)


@st.cache_resource(max_entries=16, show_spinner="Loading the model…")
def _checkpoint(path: str, file_stamp: tuple) -> Checkpoint:
    ck = load_checkpoint(path, device="cpu")
    measure_batch(ck.model, 1)        # MeasureMemoryError (one line) for a model no page can measure in its budget,
    affordable_items(ck.model, 1)     # MeasureComputeError for one whose single input costs more than a measurement
    return ck


def checkpoint(entry_or_path) -> Checkpoint:
    """The loaded model of a ModelEntry or run folder (cached per process)."""
    path = str(entry_or_path.path if isinstance(entry_or_path, ModelEntry) else entry_or_path)
    return _checkpoint(path, stamp(path))


@st.cache_resource(max_entries=4, show_spinner=False)
def _models(models_stamp: tuple) -> list:
    return list_models()


def models(task: Optional[str] = None) -> list:
    """The user's runs (newest first) then the shipped models, listed again whenever a card or a folder
    changed (ponder.store.runs.models_stamp), so a finished job appears at once; a page run that asks three times
    (the link check, the picker, a second picker) reads the cards once."""
    entries = [e for e in _models(models_stamp()) if task is None or e.record.task == task]
    return [e for e in entries if e.source != "shipped"] + [e for e in entries if e.source == "shipped"]


@st.cache_resource(show_spinner="Loading MNIST…")
def _mnist(folder: str):
    return mnist_dataset()


def mnist():
    """(Mnist, "") or (None, where to put the data). Never downloads."""
    try:
        return _mnist(str(data_dir())), ""
    except Exception:            # DataError, unreadable files: the page shows where to put the data
        return None, missing_data_message()


def task_data(task: str):
    """The data set a task's measurements need (MNIST, from the cache); None when it generates its data or
    the data is missing."""
    return mnist()[0] if get_task(task).uses_data else None


@st.cache_resource
def job_registry() -> JobRegistry:
    """The process-wide registry of training jobs (survives reruns and page switches)."""
    return JobRegistry()


HISTORY_ROWS = 2000      # rows of a training history a chart draws (evenly spaced; 600,000 rows took 435 MB)


@st.cache_data(max_entries=64, show_spinner=False)
def _history(path: str, file_stamp: tuple) -> list:
    return read_history(path, max_rows=HISTORY_ROWS)


def history(entry: ModelEntry) -> list:
    return _history(str(entry.path), stamp(entry.path))


@st.cache_data(max_entries=32, show_spinner="Evaluating the model on rotated digits (cached afterwards)…")
def rotation_results(path: str, file_stamp: tuple, angles: tuple, ranges: tuple, limit: Optional[int],
                     mode: str, seed: int, q: float = 0.5) -> list:
    def compute():
        ck = _checkpoint(path, file_stamp)
        data, _ = mnist()
        n = affordable_items(ck.model, limit or len(data.test_y))       # each rotation: one measurement's budget
        x, y = data.test_x[:n], data.test_y[:n]
        return rotation_study(ck.model, x, y, angles, ranges, mode, seed, per_sample=True, q=q)
    return disk_cache.cached("rotation", path, file_stamp, _rotation_settings(angles, ranges, limit, mode, seed, q),
                             compute, disk_cache.ROTATION)


def _rotation_settings(angles, ranges, limit, mode, seed, q) -> dict:
    """What a rotation study's disk cache is keyed by (q only where it changes the halting)."""
    out = dict(angles=list(angles), ranges=list(ranges), limit=limit, mode=mode, seed=seed)
    return {**out, "q": q} if mode == "deterministic" and q != 0.5 else out


FIRST_PASS = 200      # test images of the rotation study's first pass, shown while the rest is measured


def rotation_first(path: str, file_stamp: tuple, angles: tuple, ranges: tuple, limit: Optional[int],
                   mode: str, seed: int, q: float = 0.5) -> tuple[list, bool]:
    """(rows, whole): the study on all its images when they are kept (memory or disk) or few, else a first
    pass on the first FIRST_PASS images (whole False: the page measures the rest after showing it)."""
    settings = _rotation_settings(angles, ranges, limit, mode, seed, q)
    kept = disk_cache.read("rotation", path, file_stamp, settings, disk_cache.ROTATION) is not None
    if (limit or 10**9) <= FIRST_PASS or kept:
        return rotation_results(path, file_stamp, angles, ranges, limit, mode, seed, q), True
    return rotation_results(path, file_stamp, angles, ranges, FIRST_PASS, mode, seed, q), False


@st.cache_data(max_entries=16, show_spinner="Finding the test digits it ponders least and most (cached afterwards)…")
def pondering_gallery(path: str, file_stamp: tuple, limit: int = 2000, k: int = 8) -> Optional[dict]:
    """The least / most pondered of the first `limit` MNIST test digits, with their images. None without MNIST."""
    ck = _checkpoint(path, file_stamp)
    data, missing = mnist()
    if missing:
        return None
    x, y = data.test_x[:limit], data.test_y[:limit]
    g = pondering_gallery_of(ck.model, D.mnist_inputs(x), y, k)
    for row in g["least"] + g["most"]:
        row["image"] = x[row["index"]].numpy()
    return g


@st.cache_data(max_entries=32, show_spinner="Evaluating parity test sets (cached afterwards)…")
def parity_results(path: str, file_stamp: tuple, size: int, mode: str, seed: int) -> dict:
    def compute():
        ck = _checkpoint(path, file_stamp)
        n = ck.record.model["n_elems"]
        preset = fitted_preset(ck.record.train.get("parity_preset"), n)
        sets = parity_sets(preset)           # the page view's sets share one measurement's compute budget
        res = parity_study(ck.model, n, sets, affordable_items(ck.model, size, times=len(sets)), mode, seed, layout)
        res["train_k"] = list(preset["train_k"])
        return res
    layout = layout_of(_checkpoint(path, file_stamp).record.config)     # where its vectors hold their non-zeros
    return disk_cache.cached("parity", path, file_stamp, dict(size=size, mode=mode, seed=seed, layout=layout), compute,
                             disk_cache.PARITY)


MEASURED_ENTRIES = 4 * MAX_TRIALS    # measurements kept in memory: more than Compare shows (a whole sweep, 1,000 runs,
                                    # and the others); each is a few kB


@st.cache_data(max_entries=MEASURED_ENTRIES, show_spinner="Measuring the model on test data (cached afterwards)…")
def measured_metrics(path: str, file_stamp: tuple, limit: int = QUICK_TEST_ITEMS, max_steps: int = 200) -> TestMetrics:
    """Test metrics for a run whose card has none (e.g. an imported one), as ponder.training.lifecycle measures
    a run (the first `limit` test items), less the breakdowns; kept on disk too (explorer.disk_cache, checked as a
    card's metrics for N = max_steps), so each run is measured once, not once per server. Empty if it cannot be
    measured here."""
    def compute():
        ck = _checkpoint(path, file_stamp)
        data = task_data(ck.task)
        if get_task(ck.task).uses_data and data is None:
            return None
        items = affordable_items(ck.model, limit, times=2)   # validation and test items, fewer within the compute
                                                             # budget (its n says so)
        return card_metrics(measure(ck.model, ck.record.config, data, items))["test"]
    got = disk_cache.cached("measured", path, file_stamp, dict(limit=limit), compute,
                            lambda d: d is None or check_test_metrics(d, max_steps))
    return TestMetrics.from_dict(got or {})


def test_metrics(entry: ModelEntry) -> TestMetrics:
    """The card's test metrics, or measured now (cached) when the card has none."""
    t = entry.record.test
    if t.charted:
        return t
    return measured_metrics(str(entry.path), stamp(entry.path), max_steps=entry.record.max_steps)



@st.cache_data(max_entries=64, show_spinner="Measuring the run as the paper's experiment (cached afterwards)…")
def paper_experiment(path: str, file_stamp: tuple) -> dict:
    """A parity run measured as the paper's experiment (ponder.tasks.parity.experiment), kept on disk too."""
    from ponder.tasks.parity.experiment import measure
    def compute():
        ck = _checkpoint(path, file_stamp)
        return measure(ck.model, ck.record.config).to_dict()
    return disk_cache.cached("paper-parity", path, file_stamp, {}, compute)
