"""Table rows and tooltip text from run records (ponder.store.record.RunRecord), and where a running job is (no
Streamlit)."""
from __future__ import annotations

import re
from dataclasses import asdict
from typing import Optional

from ponder.losses import REGULARISERS
from ponder.methods import METHODS
from ponder.analysis.metrics import TestMetrics
from ponder.store.record import RunRecord
from ponder.store.runs import MAX_NAME, RunNameError, safe_name
from ponder.tasks import TASKS, model_config, step_meaning
from ponder.text import shown, text_ok


def sweep_row(name: str, record: Optional[RunRecord], status: Optional[str] = None, reason: str = "",
              lambda_p: Optional[float] = None, train: Optional[dict] = None,
              test: Optional[TestMetrics] = None) -> dict:
    """A λp-sweep table row from a run's record (or from a job's state when there is none yet: its `train`
    config, a mapping); test: its test metrics when not the record's. reader: what each step of an MNIST run sees
    ('' for another task)."""
    t = test if test is not None else record.test if record is not None else TestMetrics()
    train = (record.train if record is not None else None) or train or {}
    lp = train.get("lambda_p", lambda_p)
    model = record.model if record is not None and isinstance(record.model, dict) else {}
    reader = (model.get("reader") or train.get("reader") or "cnn") if train.get("task", "mnist") == "mnist" else ""
    return dict(name=name, lambda_p=float(lp) if lp is not None else float("nan"), reader=reader,
                status=status or (record.status if record else ""), reason=reason or (record.reason if record else ""),
                accuracy=t.accuracy, mean_steps=t.mean_steps, expected_steps=t.mean_expected_steps,
                halting=t.halting_distribution, steps=record.steps if record else None,
                seconds=record.train_seconds if record else None)


MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")     # every ASCII punctuation mark


def plain(text) -> str:
    """Text from a card or an error message, safe in a Streamlit markdown string (st.warning, a help
    tooltip, ...): shown as plain text on one line. Every ASCII punctuation mark is backslash-escaped
    (CommonMark shows it as it is: no link, image, emphasis, HTML, :colour[...] directive or $math$), and
    a zero-width space breaks '://' and 'www.' so that a bare address does not become a link."""
    text = " ".join(str(text).split()).replace("://", ":\u200b//").replace("www.", "www\u200b.")
    return MARKDOWN_PUNCTUATION.sub(r"\\\1", text)


def label(text) -> str:
    """A name from the file system (a folder's) as a page shows it: itself when it is text (ponder.text), else its
    ascii() escape, which any page can show (a folder named by bytes that are not UTF-8 reads back with lone
    surrogates)."""
    return text if text_ok(text) else shown(text, limit=200)


def lambda_input_name(train: dict) -> str:
    """What the run's λ head reads, in words (cards without the field: h, the paper's)."""
    names = {"confidence": "h and the answer's confidence",
             "stability": "h, the answer's confidence, how long it has held and how far h moves"}
    return names.get((train or {}).get("lambda_input"), "h")


def regulariser_name(train: dict) -> str:
    """The KL direction a run was trained with, in words ('?' for a training config without one)."""
    reg = (train or {}).get("regulariser")
    return REGULARISERS[reg].label if isinstance(reg, str) and reg in REGULARISERS else "?"


def steps_setting(train: dict) -> str:
    """How many steps a run trained each batch on: 'N = 20', or with halt_epsilon (the paper's N) 'N ≤ 20 where
    Σp ≥ 1 − ε, ε = 0.05': each batch ran until every input had halted with probability 1 − ε, N the cap."""
    train = train or {}
    eps = train.get("halt_epsilon")
    n = train.get("max_steps")
    return f"N = {n}" if eps is None else f"N ≤ {n} where Σp ≥ 1 − ε, ε = {eps}"


def task_settings(record: RunRecord) -> str:
    """A run's task-specific settings in a few words ('reader rows (2 a step)', 'parity preset small'): its
    task's describe(); '' for a task this explorer does not know."""
    task = TASKS.get(record.train.get("task"))
    return task.describe(record) if task is not None else ""


def step_text(record: RunRecord) -> str:
    """What one step is for a run (its RunRecord), with what follows from it for its halting: 'each step reveals 2
    more rows of the image, … so the steps a digit needs depend on how far down its ink goes, …' (its task's
    step_meaning, the one source every page quotes); '' for a task this explorer does not know."""
    if record.train.get("task", "mnist") not in TASKS:
        return ""
    meaning, caveat = step_meaning(record)
    return f"{meaning}, {caveat}" if caveat else meaning


def config_record(cfg) -> RunRecord:
    """The record (train and model mappings) a run trained with cfg (a TrainConfig) will have."""
    return RunRecord(train=asdict(cfg), model=asdict(model_config(cfg)))


def step_groups(entries) -> list:
    """[(run names, what a step is for them)] for the runs (ModelEntry) whose step is the same, in the order first
    seen: a comparison says each design once."""
    groups: dict = {}
    for e in entries:
        if text := step_text(e.record):
            groups.setdefault(text, []).append(e.name)
    return [(names, text) for text, names in groups.items()]


def method_name(train: dict) -> str:
    """How a run halts, as the methods table names it (ponder.methods); a card that does not say is PonderNet's."""
    m = METHODS.get(train.get("method", "ponder")) if isinstance(train.get("method", "ponder"), str) else None
    return m.label if m is not None else "?"


def describe_run(record: RunRecord) -> str:
    """A few lines about a run for a tooltip (markdown): task, λp, β, N, size, training, status, test
    numbers. The card's free text (name, status, reason, device) is shown as plain text."""
    tr = record.train
    t = record.test
    budget = tr.get("max_seconds")
    task = TASKS.get(tr.get("task"))
    reads = task.reads if task is not None else ("rotate_train",)    # a task not known here: say all it has
    parts = [f"**{plain(record.name or '?')}** · {tr.get('task', '?')} · status **{plain(record.status or '?')}**"
             + (f" ({plain(record.reason)})" if record.reason else ""),
             f"halting: {method_name(tr)}, λp = {tr.get('lambda_p')}, β = {tr.get('beta')}, regulariser {regulariser_name(tr)}, "
             f"λ head reads {lambda_input_name(tr)}, "
             + (f"{task_settings(record)}, " if task_settings(record) else "") + f"{steps_setting(tr)}, "
             f"hidden = {tr.get('hidden')}, batch = {tr.get('batch_size')}, lr = {tr.get('lr')}",
             f"epochs = {tr.get('epochs')}, time budget = {f'{budget:g} s' if budget else 'none'}, "
             + (f"train rotation ±{tr.get('rotate_train') or 0:g}°, " if "rotate_train" in reads else "")
             + f"seed = {tr.get('seed')}",
             f"trained {_or_unknown(record.steps)} steps in {_or_unknown(record.train_seconds)} s on "
             f"{plain(record.device or '?')}"]
    if t.accuracy is not None:
        en = t.mean_expected_steps
        steps = t.mean_steps if t.mean_steps is not None else float("nan")
        parts.append(f"test accuracy {t.accuracy:.4f}, mean halting step {steps:.2f}"
                     + (f", mean E[n] {en:.2f}" if en is not None else "") + f" (n = {t.n or '?'})")
    return "  \n".join(parts)


def _or_unknown(v) -> str:
    return "?" if v is None else str(v)


def training_eta(row: dict, now: float, shown: Optional[tuple] = None) -> tuple[str, Optional[float]]:
    """("step 190 of 1,290", seconds left) for a running job, from its last progress row.

    row: a Progress dict with 'wall', the time.time() when it was reported. Times are on the
    training clock (row['elapsed'], which starts after the data is loaded) plus the time since
    that report, so start-up is not mistaken for training. Steps are limited by the epochs and,
    when there is one, by the time budget: the run ends at whichever comes first. With a budget that
    may end it first the step count is "about" the library's forecast (row['forecast_steps'],
    ponder.training.progress.StepForecast: it never rises above what it said before and never falls below the
    step), "at most" the epochs' steps before there is a forecast, and the time left is never more than
    the budget's. shown: (seconds left, time.time()) as shown before for this run: the time left never
    rises above that, counted down.
    """
    step, total, train_s = int(row["step"]), int(row["total_steps"]), float(row["elapsed"])
    since = max(0.0, now - float(row.get("wall", now)))
    if step <= 0 or train_s <= 0:
        return f"step {step:,} of {total:,}", None
    left = (total - step) * train_s / step                              # to the end of the epochs, at the pace so far
    text = f"step {step:,} of {total:,}"
    budget, forecast = row.get("max_seconds"), row.get("forecast_steps")
    if budget and (budget - train_s < left or (forecast is not None and int(forecast) < total)):   # the budget may end it
        left = min(left, budget - train_s)
        if forecast is None or int(forecast) >= total:
            text = f"step {step:,} of at most {total:,} ({budget:g} s budget)"
        else:
            text = f"step {step:,} of about {max(step, int(forecast)):,} ({budget:g} s budget)"
    left = max(0.0, left - since)
    if shown is not None and shown[0] is not None:
        left = min(left, max(0.0, shown[0] - max(0.0, now - shown[1])))
    return text, left


def run_rows(entries) -> list:
    """The Runs page's table: one row per run (ponder.store.runs.ModelEntry) with where it lives, its task,
    status, test accuracy, mean halting step, mean E[n], the steps it trained and when it was saved."""
    rows = []
    for e in entries:
        r, t = e.record, e.record.test
        where = "shipped (read-only)" if e.source == "shipped" else f"sweep {e.sweep}" if e.sweep else "runs folder"
        rows.append({"run": e.name, "where": where, "task": r.task, "status": r.status,
                     "accuracy": t.accuracy, "mean steps": t.mean_steps, "E[n]": t.mean_expected_steps,
                     "steps trained": r.steps, "saved": str(r.created or "").replace("T", " ")[:16] or None})
    return rows


def compare_rows(entries, metrics: dict) -> list:
    """The Compare page's table: one row per run with its settings (the regulariser and what the λ head reads
    among them), test numbers (metrics: name -> TestMetrics: accuracy, mean sampled steps, mean E[n]; for
    parity E[n] on the hard minus the easy k) and device; missing values are None, and the sweep column is
    left out when no run is in one."""
    rows, has_sweep = [], any(e.sweep for e in entries)
    for e in entries:
        m, r = metrics.get(e.name) or TestMetrics(), e.record
        easy, hard = easy_hard_expected_steps(m)
        rows.append({"model": e.name,                  # the test numbers first: in view at 1280 px without a scroll
                     "accuracy": m.accuracy, "mean steps": m.mean_steps, "E[n]": m.mean_expected_steps,
                     "E[n] hard − easy": None if easy is None or hard is None else hard - easy, "test n": m.n,
                     **({"sweep": e.sweep or None} if has_sweep else {}),
                     "task": r.task, "status": r.status, "method": method_name(r.train), "λp": r.lambda_p,
                     "regulariser": regulariser_name(r.train),
                     "λ head reads": lambda_input_name(r.train), "design": task_settings(r) or None,
                     "N": r.max_steps, "ε": r.train.get("halt_epsilon"), "train s": r.train_seconds,
                     "device": r.device})
    return rows


def test_sizes_note(rows) -> str:
    """'' when every measured row of compare_rows has the same test-set size, else a sentence naming the sizes:
    an accuracy on 2,000 items is about three times as noisy as one on 10,000 (standard error √(a(1−a)/n))."""
    sizes = {}
    for r in rows:
        if r.get("accuracy") is not None and r.get("test n"):
            sizes.setdefault(int(r["test n"]), []).append(r["model"])
    if len(sizes) < 2:
        return ""
    parts = "; ".join(f"{', '.join(names)} on {n:,}" for n, names in sorted(sizes.items(), reverse=True))
    small = min(sizes)
    return (f"The test numbers come from test sets of different sizes ({parts} items): an accuracy near 99 % "
            f"measured on {small:,} items is uncertain by about ±{200 * (0.99 * 0.01 / small) ** 0.5:.2f} points "
            "(two standard errors), so a smaller difference between them may be noise.")


def renamed(asked: str, final: str) -> str:
    """'' when a run (or sweep folder) got the name asked for, else one sentence on what it became and why:
    the name made safe (ponder.store.runs.safe_name) and/or taken by another run (new_run_dir added -2, -3, ...)."""
    asked, final = str(asked), str(final)
    if final == asked:
        return ""
    try:
        safe = safe_name(asked)
    except RunNameError:
        safe = final
    why = ([f"a name keeps only letters, digits, '.', '_' and '-', at most {MAX_NAME} characters"] if safe != asked else []) \
        + ([f"{safe} was taken"] if final != safe else [])
    return f"The name {asked} became {final} ({'; '.join(why)})."


def signed(v: float, digits: int = 2) -> str:
    """+1.25 / −4.39: the sign always shown, a true minus sign (as in the labels beside it)."""
    return f"{v:+.{digits}f}".replace("-", "\u2212")


def parity_card_line(record: RunRecord) -> str:
    """What a parity run's card recorded when it was saved (the numbers `python -m ponder evaluate RUN --json`
    and docs/findings.md give): accuracy, E[n] on the easy and the hard k, and their gap. '' without them."""
    t = record.test
    e, h = easy_hard_expected_steps(t)
    if t.accuracy is None or e is None or h is None:
        return ""
    k = lambda group: "–".join(str(v) for v in group.k_range or ())      # noqa: E731
    return (f"Measured when the run was saved ({t.n or 0:,} problems, sample mode; its card, as `python -m "
            f"ponder evaluate --json` gives it): accuracy {100 * t.accuracy:.2f}\u00a0%; expected steps E[n] "
            f"{e:.2f} on easy k {k(t.easy)}, {h:.2f} on hard k {k(t.hard)}: hard − easy {signed(h - e)}.")


def easy_hard_expected_steps(metrics: TestMetrics) -> tuple:
    """(mean E[n] on the easy k, on the hard k) of a parity run's test metrics; None where not measured."""
    return tuple(g.mean_expected_steps if g is not None else None for g in (metrics.easy, metrics.hard))
