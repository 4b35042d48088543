"""λp sweep results on the λp sweep page: rows from a running sweep job, from run cards or from a sweep
folder, and the table and charts over them (Streamlit layout around explorer.figures.studies)."""
from __future__ import annotations

from pathlib import Path

import streamlit as st

from ponder.analysis.metrics import TestMetrics
from ponder.store.card import CheckpointError
from ponder.config import ConfigError
from ponder.sweeps.record import SweepError, SweepRecord, read_sweep
from ponder.store.runs import list_sweeps
from ponder.tasks import get_task

from . import loaders
from ..figures import studies as study_figures
from .. import tables
from .job_views import run_name
from ..jobs.job import JobView, where_now
from ..tables import plain
from .ui import chart, tabs_on_demand


def job_sweep_rows(view: JobView) -> list:
    rows = []
    for run in view.runs:
        now = where_now(run)[0] if run.run_dir else None      # None: deleted since it was saved
        record = run.record if now is not None else None
        status = run.status if not run.run_dir or now is not None else "deleted"
        if status == "running":
            last = run.progress[-1] if run.progress else None
            status = f"running {last['fraction']:.0%}" if last else "running"
        row = tables.sweep_row(run_name(str(now)) if now is not None else run.name, record,
                                status=status, reason=run.record.reason if run.record else "", lambda_p=run.config.lambda_p,
                                train=dict(task=run.config.task, reader=run.config.reader))
        rows.append(row)
    return rows


def entry_sweep_rows(entries, measure: bool = True) -> list:
    """A row per run from its card; a run whose card has no test metrics is measured (cached) when `measure`,
    else shown without numbers."""
    rows = []
    for e in entries:
        record = e.record
        try:
            t = loaders.test_metrics(e) if measure and record.status != "failed" else record.test
        except (CheckpointError, ConfigError, OSError) as err:       # a run that cannot be loaded any more
            record = record.completed(status="failed", reason=" ".join(str(err).split()))
            t = TestMetrics()
        rows.append(tables.sweep_row(e.name, record, test=t))
    return rows


def folder_sweep_rows(record: SweepRecord) -> list:
    """A sweep folder's trials in sweep.json's order: from each trial's card where it has one (its numbers as the
    card holds them), else from its record there (running, or failed before it was saved)."""
    entries = {e.path.name: e for e in loaders.models() if e.path.parent == record.folder}
    rows = []
    for t in record.trials:
        if t.name in entries:
            rows += entry_sweep_rows([entries[t.name]], measure=False)   # up to 1,000 trials: never measured here
        else:
            rows.append(tables.sweep_row(t.name, None, status=t.status, reason=t.reason, lambda_p=t.config.lambda_p,
                                         train=dict(task=t.config.task, reader=t.config.reader)))
    return rows


def folder_sweep_ui(folder) -> None:
    """A sweep folder's results: where it is, its table, and the sweep charts over its trials; one red line
    when its sweep.json cannot be read or holds what no sweep writes."""
    try:
        record = read_sweep(folder)
    except SweepError as e:
        st.error(plain(e), icon=":material/error:")
        return
    if record is None:
        st.info(f"{plain(folder)} holds no sweep.json (any more).")
        return
    st.caption(f"{folder}: {len(record.trials)} trials (sweep.json, sweep.md and a run folder per trial); each trial "
               f"is also in every model picker as runs/{Path(folder).name}/<trial>.")
    sweep_results_ui(folder_sweep_rows(record), record.max_steps, key="sweep_dir")


def shipped_reader() -> str:
    """What each step sees in the shipped λp sweep (assets/sweep-lp*): the sweep form's default reader."""
    readers = [tables.sweep_row(e.name, e.record)["reader"] for e in loaders.models("mnist")
               if e.source == "shipped" and e.path.name.startswith("sweep-")]
    return max(set(readers), key=readers.count) if readers else "cnn"


def reader_note(rows: list) -> str:
    """Which reader the runs of a sweep used, what a step is for it (ponder.tasks.step_meaning), and why that
    decides the sweep's curve: '' for runs of another task."""
    readers = sorted({r["reader"] for r in rows if r.get("reader")})
    if not readers:
        return ""
    said = [f"**{r}**: {' — '.join(w for w in get_task('mnist').step_meaning({'reader': r}) if w)}"
            for r in readers]
    return ("What each step sees in these runs: " + "; ".join(said) + ". The reader decides the curve: where extra "
            "steps bring no new evidence (the whole-image reader, the shipped sweep's), the KL term alone sets when "
            "it halts and mean steps follow the prior's 1/λp; where each step reveals more of the digit (rows), a "
            "digit needs enough steps to read its ink whatever λp says, so mean steps fall much less than 1/λp.")


def sweep_results_ui(rows: list, n_steps: int = 20, key: str = "sweep") -> None:
    if not rows:
        st.info("No sweep runs to show yet.")
        return
    rows = sorted(rows, key=lambda r: r["lambda_p"])
    if note := reader_note(rows):
        st.markdown(note)
    table = [{"run": r["name"], "λp": r["lambda_p"], "1/λp": round(1 / r["lambda_p"], 2),
              **({"reader": r["reader"]} if r.get("reader") else {}), "status": r["status"],
              "accuracy": r["accuracy"], "mean steps": r["mean_steps"], "E[n]": r["expected_steps"],
              "reason": r["reason"]} for r in rows]
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config={"accuracy": st.column_config.NumberColumn(format="%.4f"),
                                "mean steps": st.column_config.NumberColumn(format="%.2f"),
                                "E[n]": st.column_config.NumberColumn(format="%.2f")})
    failed = [r for r in rows if r["status"] == "failed"]
    for r in failed:
        st.error(f"{plain(r['name'])} (λp {r['lambda_p']:g}) failed: {plain(r['reason'] or 'no reason recorded')}")
    many = len(rows) > study_figures.MAX_PANELS
    chart(study_figures.sweep_grid_fig(rows), "Each finished run's learned halting distribution (bars, mean over test "
          "images) over the geometric prior of its λp (line); failed or unfinished runs say why."
          + (f" {study_figures.MAX_PANELS} of the {len(rows):,} runs, evenly spaced in λp; every run is in the table "
             "above and the chart below." if many else ""), key=f"{key}_grid")
    if many:
        shown = min(len(rows), study_figures.MAX_HEAT_ROWS)
        chart(study_figures.sweep_heatmap_fig(rows), f"Every run's learned halting distribution in one chart: a row "
              f"per run by λp ({shown:,} of {len(rows):,}, evenly spaced)" * (shown < len(rows)) or
              "Every run's learned halting distribution in one chart: a row per run by λp, p_n by colour.",
              key=f"{key}_heat")
    steps, acc = tabs_on_demand(["Mean halting step vs λp", "Accuracy vs λp"], f"{key}_tab")
    if steps is not None:                        # one chart drawn at a time: the open tab's
        with steps:
            chart(study_figures.sweep_steps_fig(rows, n_steps), "Mean sampled halting step per run against λp; the "
                  "dashed curve is the prior's mean 1/λp, the dotted one that mean truncated at N.", key=f"{key}_steps")
    if acc is not None:
        with acc:
            chart(study_figures.sweep_accuracy_fig(rows), "Test accuracy of each finished run against its λp.",
                  key=f"{key}_acc")


LOOSE = "runs named sweep-* (not in a sweep folder)"


def saved_sweeps_ui(key: str = "sweep_folder") -> None:
    """The sweeps in the runs folder: a sweep folder each (as this page and `python -m ponder sweep` save them,
    runs/sweep-<task>/ ...), newest first, and the single runs named sweep-* when there are any."""
    folders = {f.name: f for f in list_sweeps()}
    loose = [e for e in loaders.models() if e.source != "shipped" and not e.sweep and e.path.name.startswith("sweep-")]
    options = list(folders) + ([LOOSE] if loose else [])
    if not options:
        st.info("No sweeps in the runs folder yet: train one above (saved as runs/sweep-<task>/), or run "
                "`python -m ponder sweep ... --out runs/<name>`.")
        return
    if st.session_state.get(key) not in options:
        st.session_state[key] = options[0]
    name = st.selectbox("Sweep", options, key=key, format_func=lambda n: n if n == LOOSE else f"runs/{n}/")
    if name == LOOSE:
        sweep_results_ui(entry_sweep_rows(loose), max(e.record.max_steps for e in loose), key="sweep_loose")
    else:
        folder_sweep_ui(folders[name])
