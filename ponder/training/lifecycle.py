"""One run, start to end: train -> save -> evaluate -> record the test metrics in the card.

`python -m ponder train`, `python -m ponder reproduce` and the explorer's background jobs all
call run() and nothing else, so every saved run has the same files and the same metrics shape.
The run is saved before it is evaluated: a crash or Ctrl-C in the evaluation keeps the model.
"""
from __future__ import annotations

import tempfile
import threading
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from ..files import SaveError, folder_lock, remove_if_empty
from ..store.card import one_line, update_card
from ..store.checkpoint import save_run
from ..store.record import RunRecord
from ..analysis.pays import pays
from ..analysis.metrics import TestMetrics
from ..analysis.unroll import measure_test
from ..config import TrainConfig
from ..halting import PonderNet
from ..tasks import get_task, model_config_dict
from .loop import Progress, TrainResult, train

BREAKDOWNS = ("by_class", "by_k", "baselines", "settle", "per_step_accuracy_by_group",   # in results, not in a card
              "learned_by_group", "validation")
QUICK_TEST_ITEMS = 2000    # test items measured where the whole test set would keep a person waiting: a run the
                           # explorer trains, and a run listed there whose card has no test metrics


@dataclass
class RunOutcome:
    """What run() did. The trained model is result.model; the run's record (its card) is record."""
    result: TrainResult                 # the model, its history and its record
    run_dir: Optional[Path] = None      # the folder written; None when there was nothing to save
    saved_elsewhere: str = ""           # why the run went to a fresh temporary folder, not where asked
    metrics: Optional[TestMetrics] = None   # full test metrics (breakdowns included); None when not evaluated
    problems: list = field(default_factory=list)   # one-line notes: a failed save, evaluation or card update

    @property
    def record(self) -> RunRecord:
        """The run's record as its card holds it: named when saved, its metrics once they are in the card."""
        return self.result.record

    @property
    def reason(self) -> str:
        """The training reason, then each problem, '; '-joined."""
        return "; ".join([r for r in [self.record.reason, self.saved_elsewhere] if r] + self.problems)


def card_metrics(metrics: TestMetrics, **extra) -> dict:
    """The one metrics shape a card holds: {'test': the test metrics without the breakdowns, with `pays`
    (ponder.analysis.pays: the baselines' few numbers) where they were measured, **extra}."""
    test = metrics.without(*BREAKDOWNS)
    test.pays = pays(metrics) or metrics.pays
    return {"test": test.to_dict(), **extra}


def measure(model: PonderNet, cfg: TrainConfig, data, limit: Optional[int] = None) -> TestMetrics:
    """The standard test measurement (ponder.analysis.unroll.measure_test): 'sample' mode (seed 0) on the
    task's test set (MNIST's 10,000 test images, a parity preset's 10,000 problems); `limit` keeps that many."""
    return measure_test(model, cfg, data, limit)


def run(cfg: TrainConfig, out, *, load_data: Optional[Callable[[], object]] = None,
        callback: Optional[Callable[[Progress], None]] = None, cancel: Optional[threading.Event] = None,
        on_phase: Optional[Callable[[str], None]] = None, evaluate: bool = True, eval_limit: Optional[int] = None,
        measure_fn: Optional[Callable[[PonderNet, object], dict]] = None, name: Optional[str] = None,
        rescue: bool = False, on_model: Optional[Callable[[PonderNet], None]] = None,
        resume=None, on_checkpoint: Optional[Callable] = None, checkpoint_seconds: float = 180.0) -> RunOutcome:
    """Train cfg, save the run in `out`, measure it on test data and add the metrics to its card.

    out:        the run folder, or a function that makes one when the run is saved (the explorer's
                fresh, uniquely named folder in the runs folder), so nothing is created before then.
    load_data:  returns the task's data set (default: the task's load_data(), MNIST from $PONDER_DATA); not
                called for a task that generates its data (parity).
    callback / cancel / on_model / resume / on_checkpoint: passed to ponder.training.loop.train (progress reports;
                stop after the current step; the model once built; a TrainState to go on from; the periodic state).
    on_phase:   told 'loading data', 'training', 'validating' (the final validation pass, after the time
                budget; not after a cancel), 'saving', 'evaluating' as the run gets there.
    measure_fn: (model, data) -> full TestMetrics; default measure(..., limit=eval_limit).
    rescue:     when saving in `out` fails, save in a fresh temporary folder instead (the CLI, the
                explorer); otherwise the SaveError propagates. A folder `out()` made is locked
                (ponder.files.folder_lock) until its card holds the test metrics, and removed again
                when the save in it fails.
    A run cancelled before its first step is not saved (run_dir None). Problems after the save
    (evaluation, card update) do not raise: they are listed in outcome.problems.
    """
    phase = on_phase or (lambda _: None)
    task, data = get_task(cfg.task), None
    if task.uses_data:
        phase("loading data")
        data = load_data() if load_data is not None else task.load_data()
    phase("training")
    result = train(cfg, data=data, callback=callback, cancel=cancel, on_phase=phase, on_model=on_model, resume=resume,
                   on_checkpoint=on_checkpoint, checkpoint_seconds=checkpoint_seconds)
    outcome = RunOutcome(result)
    if result.record.status == "cancelled" and result.record.steps == 0:
        outcome.problems.append("cancelled before the first step; nothing to save")
        return outcome
    phase("saving")
    target = None if callable(out) else Path(out)
    with ExitStack() as held:
        try:
            if target is None:
                target = out()
                if target.is_dir():                     # made fresh: ours until its card has its metrics,
                    held.enter_context(folder_lock(target))   # so a rename or delete waits (ponder.store.manage)
            _save(outcome, target, name)
        except OSError as e:
            if callable(out) and target is not None:
                remove_if_empty(target)                 # no empty run folder left behind
            if not rescue:
                raise
            _save_elsewhere(outcome, name, target, e)
        if evaluate and result.record.steps > 0:
            _evaluate(outcome, cfg, data, measure_fn, eval_limit, phase)
    return outcome


def _save(outcome: RunOutcome, folder: Path, name: Optional[str]) -> None:
    """Save the trained model and its record in `folder`; the record takes the card's name and model config."""
    res = outcome.result
    res.record = res.record.completed(name=name or folder.name, model=model_config_dict(res.model))
    outcome.run_dir = save_run(folder, res.model, res.record, history=res.history)


def _save_elsewhere(outcome: RunOutcome, name, target, e: OSError) -> None:
    """run()'s rescue: the save where asked failed, so save the run in a fresh temporary folder."""
    first, where = one_line(e), target or "the runs folder"
    try:
        folder = Path(tempfile.mkdtemp(prefix="ponder-unsaved-"))
        _save(outcome, folder, name or (target.name if target else None))
    except OSError as e2:
        raise SaveError(where, e2, f"could not save the run ({first}); the fallback save failed too") from None
    outcome.saved_elsewhere = (f"could not save the run to {where}: {first}; saved it to {outcome.run_dir} "
                               f"instead (move it where you want it)")


def _evaluate(outcome: RunOutcome, cfg: TrainConfig, data, measure_fn, eval_limit, phase) -> None:
    """Measure the saved run on test data and add the metrics to its card (problems noted, not raised)."""
    phase("evaluating")
    try:
        metrics = (measure_fn or (lambda m, d: measure(m, cfg, d, eval_limit)))(outcome.result.model, data)
    except Exception as e:                          # a run is still saved without its metrics
        outcome.problems.append(f"evaluation failed: {one_line(e)}")
        return
    outcome.metrics = metrics
    try:
        update_card(outcome.run_dir, metrics=card_metrics(metrics))
        outcome.result.record = outcome.record.completed(metrics=card_metrics(metrics))
    except Exception as e:
        outcome.problems.append(f"could not add the test metrics to {outcome.run_dir}: {one_line(e)}")
