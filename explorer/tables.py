"""Table rows and tooltip text from run cards, and where a running job is (no Streamlit)."""
from __future__ import annotations

import re
from typing import Optional

from ponder.store.card import mean_expected_steps, test_metrics
from ponder.store.runs import MAX_NAME, RunNameError, safe_name
from ponder.tasks import TASKS


def sweep_row(name: str, card: Optional[dict], status: Optional[str] = None, reason: str = "",
              lambda_p: Optional[float] = None, train: Optional[dict] = None) -> dict:
    """A λp-sweep table row from a run card (or from a job's state when there is no card yet: its `train` config,
    a mapping). reader: what each step of an MNIST run sees ('' for another task)."""
    card = card or {}
    t = test_metrics(card)
    train = card.get("train") or train or {}
    lp = train.get("lambda_p", lambda_p)
    model = card.get("model") if isinstance(card.get("model"), dict) else {}
    reader = (model.get("reader") or train.get("reader") or "cnn") if train.get("task", "mnist") == "mnist" else ""
    return dict(name=name, lambda_p=float(lp) if lp is not None else float("nan"), reader=reader,
                status=status or card.get("status", ""), reason=reason or card.get("reason", ""),
                accuracy=t.get("accuracy"), mean_steps=t.get("mean_steps"),
                expected_steps=mean_expected_steps(t), halting=t.get("halting_distribution"),
                steps=card.get("steps"), seconds=card.get("train_seconds"))


MARKDOWN_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")     # every ASCII punctuation mark


def plain(text) -> str:
    """Text from a card or an error message, safe in a Streamlit markdown string (st.warning, a help
    tooltip, ...): shown as plain text on one line. Every ASCII punctuation mark is backslash-escaped
    (CommonMark shows it as it is: no link, image, emphasis, HTML, :colour[...] directive or $math$), and
    a zero-width space breaks '://' and 'www.' so that a bare address does not become a link."""
    text = " ".join(str(text).split()).replace("://", ":\u200b//").replace("www.", "www\u200b.")
    return MARKDOWN_PUNCTUATION.sub(r"\\\1", text)


REGULARISER_NAMES = {"kl": "KL(p ‖ p_G)", "kl-reverse": "KL(p_G ‖ p)", "kl-both": "KL(p ‖ p_G) + KL(p_G ‖ p)"}


def lambda_input_name(train: dict) -> str:
    """What the run's λ head reads, in words (cards without the field: h, the paper's)."""
    names = {"confidence": "h and the answer's confidence",
             "stability": "h, the answer's confidence, how long it has held and how far h moves"}
    return names.get((train or {}).get("lambda_input"), "h")


def regulariser_name(train: dict) -> str:
    """The KL direction a run was trained with, in words ('?' for a training config without one)."""
    return REGULARISER_NAMES.get((train or {}).get("regulariser"), "?")


def steps_setting(train: dict) -> str:
    """How many steps a run trained each batch on: 'N = 20', or with halt_epsilon (the paper's N) 'N ≤ 20 where
    Σp ≥ 1 − ε, ε = 0.05': each batch ran until every input had halted with probability 1 − ε, N the cap."""
    train = train or {}
    eps = train.get("halt_epsilon")
    n = train.get("max_steps")
    return f"N = {n}" if eps is None else f"N ≤ {n} where Σp ≥ 1 − ε, ε = {eps}"


def task_settings(card: dict) -> str:
    """A run's task-specific settings in a few words ('reader rows (2 a step)', 'parity preset small'): its
    task's describe(); '' for a task this explorer does not know."""
    task = TASKS.get((card.get("train") or {}).get("task"))
    return task.describe(card) if task is not None else ""


def describe_card(card: dict) -> str:
    """A few lines about a run for a tooltip (markdown): task, λp, β, N, size, training, status, test
    numbers. The card's free text (name, status, reason, device) is shown as plain text."""
    tr = card.get("train") or {}
    t = test_metrics(card)
    budget = tr.get("max_seconds")
    task = TASKS.get(tr.get("task"))
    reads = task.reads if task is not None else ("rotate_train",)    # a task not known here: say all it has
    parts = [f"**{plain(card.get('name', '?'))}** · {tr.get('task', '?')} · status **{plain(card.get('status', '?'))}**"
             + (f" ({plain(card['reason'])})" if card.get("reason") else ""),
             f"λp = {tr.get('lambda_p')}, β = {tr.get('beta')}, regulariser {regulariser_name(tr)}, "
             f"λ head reads {lambda_input_name(tr)}, "
             + (f"{task_settings(card)}, " if task_settings(card) else "") + f"{steps_setting(tr)}, "
             f"hidden = {tr.get('hidden')}, batch = {tr.get('batch_size')}, lr = {tr.get('lr')}",
             f"epochs = {tr.get('epochs')}, time budget = {f'{budget:g} s' if budget else 'none'}, "
             + (f"train rotation ±{tr.get('rotate_train') or 0:g}°, " if "rotate_train" in reads else "")
             + f"seed = {tr.get('seed')}",
             f"trained {card.get('steps', '?')} steps in {card.get('train_seconds', '?')} s on {plain(card.get('device', '?'))}"]
    if t.get("accuracy") is not None:
        en = mean_expected_steps(t)
        parts.append(f"test accuracy {t['accuracy']:.4f}, mean halting step {t.get('mean_steps', float('nan')):.2f}"
                     + (f", mean E[n] {en:.2f}" if en is not None else "") + f" (n = {t.get('n', '?')})")
    return "  \n".join(parts)


def training_eta(row: dict, now: float, shown: Optional[tuple] = None) -> tuple[str, Optional[float]]:
    """("step 190 of 1,290", seconds left) for a running job, from its last progress row.

    row: a Progress dict with 'wall', the time.time() when it was reported. Times are on the
    training clock (row['elapsed'], which starts after the data is loaded) plus the time since
    that report, so start-up is not mistaken for training. Steps are limited by the epochs and,
    when there is one, by the time budget: the run ends at whichever comes first. With a budget that
    may end it first the step count is "about" the library's forecast (row['forecast_steps'],
    ponder.progress.StepForecast: it never rises above what it said before and never falls below the
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
        t = test_metrics(e.card)
        where = "shipped (read-only)" if e.source == "shipped" else f"sweep {e.sweep}" if e.sweep else "runs folder"
        rows.append({"run": e.name, "where": where, "task": e.card["train"]["task"], "status": e.card.get("status"),
                     "accuracy": t.get("accuracy"), "mean steps": t.get("mean_steps"), "E[n]": mean_expected_steps(t),
                     "steps trained": e.card.get("steps"),
                     "saved": str(e.card.get("created") or "").replace("T", " ")[:16] or None})
    return rows


def compare_rows(entries, metrics: dict) -> list:
    """The Compare page's table: one row per run with its settings (the regulariser and what the λ head reads
    among them), test numbers (metrics: name -> test metrics: accuracy, mean sampled steps, mean E[n]; for
    parity E[n] on the hard minus the easy k) and device; missing values are None, and the sweep column is
    left out when no run is in one."""
    rows, has_sweep = [], any(e.sweep for e in entries)
    for e in entries:
        m = metrics.get(e.name) or {}
        easy, hard = easy_hard_expected_steps(m)
        rows.append({"model": e.name,                  # the test numbers first: in view at 1280 px without a scroll
                     "accuracy": m.get("accuracy"), "mean steps": m.get("mean_steps"), "E[n]": mean_expected_steps(m),
                     "E[n] hard − easy": None if easy is None or hard is None else hard - easy, "test n": m.get("n"),
                     **({"sweep": e.sweep or None} if has_sweep else {}),
                     "task": e.card["train"]["task"], "status": e.card.get("status"), "λp": e.card["train"]["lambda_p"],
                     "regulariser": regulariser_name(e.card.get("train")),
                     "λ head reads": lambda_input_name(e.card.get("train")), "design": task_settings(e.card) or None,
                     "N": e.card["train"]["max_steps"], "ε": e.card["train"].get("halt_epsilon"),
                     "train s": e.card.get("train_seconds"), "device": e.card.get("device")})
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


def parity_card_line(card: dict) -> str:
    """What a parity run's card recorded when it was saved (the numbers `python -m ponder evaluate RUN --json`
    and docs/findings.md give): accuracy, E[n] on the easy and the hard k, and their gap. '' without them."""
    t = test_metrics(card)
    e, h = easy_hard_expected_steps(t)
    if t.get("accuracy") is None or e is None or h is None:
        return ""
    k = lambda name: "–".join(str(v) for v in t[name].get("k_range", ()))      # noqa: E731
    return (f"Measured when the run was saved ({t.get('n', 0):,} problems, sample mode; its card, as `python -m "
            f"ponder evaluate --json` gives it): accuracy {100 * t['accuracy']:.2f}\u00a0%; expected steps E[n] "
            f"{e:.2f} on easy k {k('easy')}, {h:.2f} on hard k {k('hard')}: hard − easy {signed(h - e)}.")


def easy_hard_expected_steps(metrics: dict) -> tuple:
    """(mean E[n] on the easy k, on the hard k) of a parity run's test metrics; None where not measured."""
    return mean_expected_steps(metrics.get("easy") or {}), mean_expected_steps(metrics.get("hard") or {})
