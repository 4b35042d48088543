"""The "is the extra thought worth it?" pieces of the digit, parity, rotation and Compare pages: the learned
halting (sampled, and used deterministically: Q-exit) against a fixed depth and a confidence exit at equal
compute, with operating points chosen on validation items and paired intervals on the differences, the same on
shifted inputs (rotated digits, parity's unseen k), per-step accuracy by group, and where one input's answer
settled. The numbers are ponder.analysis.equal_steps', from one unroll per model of the first ITEMS validation and
test items (ponder.analysis.unroll.measure_test), cached per model like explorer.app.loaders."""
from __future__ import annotations

from typing import Optional, Sequence

import streamlit as st

from ponder.analysis.against import competitor_path
from ponder.analysis.baselines import differences_table, worth_sentence
from ponder.analysis.equal_steps import ops_from, shift_comparison
from ponder.analysis.studies import Trace, rotation_label, rotation_study
from ponder.analysis.unroll import measure_test
from ponder.analysis.metrics import TestMetrics
from ponder.analysis.worth_text import auroc_sentence, budget_table, forced_sentence, headline
from ponder.store.runs import ModelEntry
from ponder.tasks import get_task
from ponder.analysis.compute import affordable_items

from .. import disk_cache, tables
from . import loaders, ui
from ..figures.worth import (add_competitor, by_group_fig, difference_rows, family, settle_sentence, shift_table,
                             worth_fig)

ITEMS = 2000        # validation and test items per model (MNIST: the first 2,000 of each; parity: 2,000 problems)
FIELDS = ("n", "baselines", "settle", "per_step_accuracy_by_group")
VERSION = 3         # of what a kept measurement holds (3: patience, budgets, verdict, forced stops, AUROCs)
SHIFT_ANGLES = (22.5, 45.0)     # the rotations the Rotation page compares the policies on


@st.cache_data(max_entries=32, show_spinner="Measuring a fixed depth and a confidence exit (cached afterwards)…")
def _results(path: str, file_stamp: tuple, items: int) -> TestMetrics:
    def compute():
        ck = loaders.checkpoint(path)          # validation and test items: twice the items in the compute budget
        res = measure_test(ck.model, ck.record.config, loaders.task_data(ck.task),
                           affordable_items(ck.model, items, times=2))
        return TestMetrics(**{k: getattr(res, k) for k in FIELDS}).to_dict()
    kept = disk_cache.cached("worth", path, file_stamp, dict(items=items, policies=VERSION), compute, disk_cache.WORTH)
    return TestMetrics.from_dict(kept)


def results(entry: ModelEntry, items: int = ITEMS) -> Optional[TestMetrics]:
    """The baselines, settle steps and per-step accuracy by group of a model; None when its task's data set
    (MNIST) is missing and the model was not measured before. A kept measurement is read without loading MNIST
    (seconds, on the first drawing of a fresh server, that no click could interrupt)."""
    path, file_stamp = str(entry.path), loaders.stamp(entry.path)
    kept = disk_cache.read("worth", path, file_stamp, dict(items=items, policies=VERSION), disk_cache.WORTH) is not None
    if not kept and get_task(entry.record.task).uses_data and loaders.task_data(entry.record.task) is None:
        return None
    return _results(path, file_stamp, items)


@st.cache_data(max_entries=16, show_spinner="Measuring the competitor on the same items (cached afterwards)…")
def _against(path: str, file_stamp: tuple, other: str, other_stamp: tuple, items: int) -> dict:
    def compute():
        ck, rival = loaders.checkpoint(path), loaders.checkpoint(other)
        try:
            return measure_test(ck.model, ck.record.config, loaders.task_data(ck.task), items,
                                against=(rival.model, rival.record.config, rival.name)).against
        except ValueError as e:                # not the same task or items: said in one line, not measured
            return {"refused": str(e)}
    return disk_cache.cached("worth_against", path, file_stamp, dict(items=items, policies=VERSION, against=other,
                                                                     against_stamp=list(other_stamp)), compute)


def competitor(entry: ModelEntry, items: int = ITEMS) -> Optional[dict]:
    """The model against its shipped competitor (NAME-deep beside NAME; ponder.analysis.against), or None when it
    has none (or its data set is missing); {"refused": why} when the competitor is not of its task and items."""
    other = competitor_path(entry.path)
    if other is None or (get_task(entry.record.task).uses_data and loaders.task_data(entry.record.task) is None):
        return None
    return _against(str(entry.path), loaders.stamp(entry.path), str(other), loaders.stamp(other), items)


def series(name: str, res: TestMetrics) -> dict:
    b = res.baselines
    return {"name": name, "fixed_depth": b["fixed_depth"], "confidence_exit": b["confidence_exit"],
            "learned_q": (b.get("frontier") or {}).get("learned_q", []), "at": b["at_equal_steps"]}


CAPTION = ("Test accuracy against the mean number of steps per input, each policy's whole frontier: always "
           "answering at step n (fixed depth, dotted), at the first step whose answer's probability reaches a "
           "threshold (confidence exit, solid), at the first step where the learned Σ p_n reaches q (Q-exit, dashed: "
           "the learned λ's used deterministically), and the sampled halting (diamond: its expected accuracy "
           "Σ p_n·correct_n at its mean E[n], with the 95 % interval of one sampled pass). Open circles: each rule "
           "at equal compute, its q, threshold or depth chosen on validation items to spend the sampled mean E[n] "
           "there.")


def differences_ui(at: dict, shifted=()) -> None:
    """The paired differences at equal compute with their 95 % intervals, and the shifted inputs' comparison."""
    if rows := difference_rows(at):
        st.table(rows, hide_index=True)         # its cells wrap: on a phone the verdict column stays in view
        st.caption("Differences of test accuracy at equal compute; 95 % intervals from 1,000 paired bootstrap "
                   "resamples of the test items. \"no difference\" when the interval holds 0 or the difference rounds to 0.")
    if shifted:
        st.dataframe(shift_table(shifted), hide_index=True)
        st.caption("The same policies on shifted inputs, at the operating points chosen on the clean validation "
                   "items: accuracy (mean steps). Under a shift each rule spends what its own signal tells it to.")


def worth_ui(entry: ModelEntry, res: TestMetrics, rival: Optional[dict], key: str) -> None:
    """The "worth it?" chart of one model (and its competitor's frontiers) and the sentence of its numbers."""
    fig = worth_fig([series(entry.name, res)])
    if rival:
        add_competitor(fig, rival["budgets"], rival["name"])          # a trace's name is plain text
    ui.chart(fig, CAPTION + (COMPETITOR_CAPTION if rival else "") + f" {res.n:,} test items.", key=key)
    st.markdown(worth_sentence(res.baselines["at_equal_steps"]))


COMPETITOR_CAPTION = (" Crosses: the competitor's rules (a network of the same task trained to answer at every step, "
                      "without halting) at budgets 1 to N, chosen on validation items, at the steps they spend on the "
                      "test items.")


def frontier_ui(res: TestMetrics, rival: Optional[dict]) -> None:
    """Every policy at budgets 1..N (the competitor's too), the halts N forced and the signals' AUROCs, in words."""
    b = res.baselines
    front, name = (rival["budgets"], rival["name"]) if rival else (b.get("budgets"), "")
    if front:
        header, rows = budget_table(front, name)                     # a table's cells are plain text
        st.dataframe([dict(zip(header, r)) for r in rows], hide_index=True)
        st.caption(f"Each policy at budgets of 1 to N mean steps, its operating point chosen on {front['tuned_on']['n']:,} "
                   "validation items to spend the budget there: test accuracy (mean steps on the test items). "
                   "\"leads\": the most accurate, or \"no difference\" and every policy whose 95 % paired interval "
                   "against it holds 0.")
    if b.get("forced"):
        st.caption(" ".join(forced_sentence(f, where) for where, f in b["forced"].items()))
    if b.get("auroc"):
        st.caption(auroc_sentence(b["auroc"], "This network") + (
            " " + auroc_sentence(rival["auroc"], tables.plain(rival["name"])) if rival else ""))


def by_group_ui(groups: dict, caption: str, key: str) -> None:
    if groups:
        ui.chart(by_group_fig(groups), caption, key=key)


TITLE = "Is the extra thought worth it?"
LABEL = f"**{TITLE}** The learned halting against a fixed depth and a confidence exit, at equal compute"


def opened(key: str):
    """The section's expander, measured and drawn only while open (explorer.app.ui.on_demand): its container or
    None. Its open state is st.session_state[open_key(key)]."""
    return ui.on_demand(LABEL, open_key(key), icon=":material/balance:")


def open_key(key: str) -> str:
    return f"{key}_worth_open"


def section_ui(entry: ModelEntry, key: str, groups: Optional[dict] = None, groups_caption: str = "",
               shifted=()) -> None:
    """A "worth it?" section, on demand: the chart and its sentence beside per-step accuracy by group (`groups`, or
    the task's default groups of the same measurement), then the differences with their intervals and the shifted
    inputs' comparison (`shifted`, or a function that measures them, after the measurement's own: parity's unseen
    k)."""
    box = opened(key)
    if box is None:
        return
    with box:
        _section(entry, key, groups, groups_caption, shifted)


def _section(entry: ModelEntry, key: str, groups: Optional[dict], groups_caption: str, shifted) -> None:
    res = results(entry)
    rival = competitor(entry) if res is not None else None
    if rival and "refused" in rival:
        st.caption(f"Its competitor is not compared: {rival['refused']}")
        rival = None
    if res is not None and (said := headline(res.baselines, rival)):
        st.markdown(f"**{tables.plain(said)}**")             # the answer first, then the numbers
    c1, c2 = st.columns(2)
    with c1:
        if res is None:
            st.caption("The comparison with a fixed depth and a confidence exit needs the MNIST test set.")
        else:
            worth_ui(entry, res, rival, f"{key}_worth")
    with c2:
        if groups is None and res is not None:
            names, words = get_task(entry.record.task).shown_groups
            by = res.per_step_accuracy_by_group
            groups = family(by, names) if isinstance(names, str) else {k: by[k] for k in names if k in by}
            groups_caption = (f"Accuracy if it stopped at step n, {words}, on the same {res.n:,} test items; "
                              "the steps after a line goes flat change no answer.")
        by_group_ui(groups or {}, groups_caption, f"{key}_groups")
    if res is not None:
        frontier_ui(res, rival)
        shifted = shifted() if callable(shifted) else shifted
        differences_ui(res.baselines["at_equal_steps"], [*res.baselines.get("shift", []), *shifted])


@st.cache_data(max_entries=16, show_spinner="Comparing the policies on rotated digits (cached afterwards)…")
def _shifted(path: str, file_stamp: tuple, items: int) -> list:
    def compute():
        ck = loaders.checkpoint(path)
        ops = ops_from(_results(path, file_stamp, items).baselines["at_equal_steps"])
        x, y = get_task(ck.task).rotation_inputs(loaders.task_data(ck.task),
                                                  affordable_items(ck.model, items, times=len(SHIFT_ANGLES)))
        rows = rotation_study(ck.model, x, y, SHIFT_ANGLES, compare=lambda stats: shift_comparison(stats, ops))
        return [{"name": f"rotation {rotation_label(r)}", **r["policies"]} for r in rows]
    return disk_cache.cached("worth_shift", path, file_stamp, dict(items=items, angles=SHIFT_ANGLES), compute,
                             disk_cache.SHIFTED)


def shifted(entry: ModelEntry, items: int = ITEMS) -> list:
    """The policies on the first `items` test digits rotated by SHIFT_ANGLES, at the clean validation's operating
    points (ponder.analysis.equal_steps.comparison)."""
    return _shifted(str(entry.path), loaders.stamp(entry.path), items)


def rotation_section_ui(entry: ModelEntry, rows: Sequence[dict], n_images: int, key: str = "rot") -> None:
    """The section of the rotation page: per-step accuracy by rotation (the page's own rotated test sets) and the
    policies compared on rotated digits."""
    section_ui(entry, key, {rotation_label(r): r["per_step_accuracy"] for r in rows if "per_step_accuracy" in r},
               f"Accuracy if it stopped at step n on {n_images:,} test images per rotation; the steps after a line "
               "goes flat change no answer. The chart beside it is on the unrotated test digits.", lambda: shifted(entry))


def compare_ui(entries: Sequence[ModelEntry], key: str = "compare_worth") -> None:
    """The "worth it?" chart of several models overlaid, a sentence for each, on demand; a model that cannot be
    loaded is one red line."""
    box = opened("compare")
    if box is not None:
        with box:
            _compare(entries, key)


def _compare(entries: Sequence[ModelEntry], key: str) -> None:
    got, said = {}, {}
    for e in entries:
        try:
            got[e.name] = results(e)
            rival = competitor(e) if got[e.name] is not None else None
            said[e.name] = headline(got[e.name].baselines, None if not rival or "refused" in rival else rival) \
                if got[e.name] is not None else ""
        except ui.USER_ERRORS as err:            # its weights cannot be loaded: the others are still compared
            st.error(f"{tables.plain(e.name)}: {ui.error_text(err)}", icon=":material/error:")
    shown = [series(n, r) for n, r in got.items() if r is not None]
    if not shown:
        st.caption("No model to compare with a fixed depth and a confidence exit (MNIST models need the test set).")
        return
    ui.chart(worth_fig(shown), CAPTION + f" Each model on its first {ITEMS:,} test items; a colour per model.",
             key=key)
    st.markdown("\n".join(f"- **{tables.plain(s['name'])}**: **{tables.plain(said[s['name']])}** "
                           f"{worth_sentence(s['at'])}" for s in shown))
    st.dataframe(differences_table({n: r for n, r in got.items() if r is not None}), hide_index=True)
    st.caption("Test accuracy differences at equal steps (each model's sampled mean E[n] on its validation items), "
               "with 95 % intervals from 1,000 paired bootstrap resamples of its test items (their number: test "
               "items); \"no difference\" when the interval holds 0 or the difference rounds to 0. The same table as "
               "`python -m ponder evaluate`.")
    if missing := [n for n, r in got.items() if r is None]:
        st.caption("Not measured (needs the MNIST test set): " + ", ".join(tables.plain(n) for n in missing))


SETTLE_NOTE = ("\"Settled\" is hindsight: the first step from which every later answer is right, found by reading "
               "all the later steps (and the label). No rule that decides as it goes can stop there, so the steps "
               "after it are not all waste.")


def settle_ui(trace: Trace, truth: Optional[int]) -> None:
    """Where this input's answer settled, beside when it halted and its E[n], and what "settled" can mean."""
    known = truth is not None
    st.caption(settle_sentence(trace.probs, truth if known else int(trace.probs[-1].argmax()), trace.halt_step,
                               trace.expected_steps, known) + " " + SETTLE_NOTE)
