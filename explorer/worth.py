"""The "is the extra thought worth it?" pieces of the digit, parity, rotation and Compare pages: the learned
halting against a fixed depth and a confidence exit at equal compute, per-step accuracy by group, and where
one input's answer settled. The numbers are ponder.analysis.baselines', from one unroll
per model on the first ITEMS test items (ponder.analysis.unroll.measure_test), cached per model like
explorer.loaders."""
from __future__ import annotations

from typing import Optional, Sequence

import streamlit as st

from ponder.analysis.baselines import worth_sentence
from ponder.analysis.studies import Trace, rotation_label
from ponder.analysis.unroll import measure_test
from ponder.config import TrainConfig
from ponder.store.runs import ModelEntry
from ponder.tasks import get_task

from . import disk_cache, loaders, tables, ui
from .worth_figures import by_group_fig, family, settle_sentence, worth_fig

ITEMS = 2000        # test items per model (MNIST: the first 2,000 test digits; parity: 2,000 problems of the preset)
FIELDS = ("n", "baselines", "settle", "per_step_accuracy_by_group")


@st.cache_data(max_entries=32, show_spinner="Measuring a fixed depth and a confidence exit (cached afterwards)…")
def _results(path: str, file_stamp: tuple, items: int) -> dict:
    def compute():
        ck = loaders.checkpoint(path)
        res = measure_test(ck.model, TrainConfig.from_dict(ck.card["train"]), loaders.task_data(ck.task), items)
        return {k: res[k] for k in FIELDS}
    return disk_cache.cached("worth", path, file_stamp, dict(items=items), compute)


def results(entry: ModelEntry, items: int = ITEMS) -> Optional[dict]:
    """The baselines, settle steps and per-step accuracy by group of a model; None when its task's data set
    (MNIST) is missing."""
    if get_task(entry.card["train"]["task"]).uses_data and loaders.task_data(entry.card["train"]["task"]) is None:
        return None
    return _results(str(entry.path), loaders.stamp(entry.path), items)


def series(name: str, res: dict) -> dict:
    b = res["baselines"]
    return {"name": name, "fixed_depth": b["fixed_depth"], "confidence_exit": b["confidence_exit"],
            "at": b["at_equal_steps"]}


CAPTION = ("Test accuracy against the mean number of steps per input: always answering at step n (fixed depth, "
           "dotted), answering at the first step whose answer's probability reaches a threshold (confidence exit, "
           "solid) and the learned halting (diamond: its expected accuracy Σ p_n·correct_n at its mean E[n], with "
           "the 95 % interval of one sampled pass); open circles: the two rules at the same mean steps.")


def worth_ui(entry: ModelEntry, key: str) -> Optional[dict]:
    """The "worth it?" chart of one model and the sentence that says what it shows. Returns its results."""
    res = results(entry)
    if res is None:
        st.caption("The comparison with a fixed depth and a confidence exit needs the MNIST test set.")
        return None
    ui.chart(worth_fig([series(entry.name, res)]), CAPTION + f" {res['n']:,} test items.", key=key)
    st.markdown(worth_sentence(res["baselines"]["at_equal_steps"]))
    return res


def by_group_ui(groups: dict, caption: str, key: str) -> None:
    if groups:
        ui.chart(by_group_fig(groups), caption, key=key)


def section_ui(entry: ModelEntry, key: str, groups: Optional[dict] = None, groups_caption: str = "") -> None:
    """A "worth it?" section: the chart and its sentence beside per-step accuracy by group (`groups`, or the
    task's default groups of the same measurement)."""
    st.subheader("Is the extra thought worth it?")
    c1, c2 = st.columns(2)
    with c1:
        res = worth_ui(entry, f"{key}_worth")
    with c2:
        if groups is None and res is not None:
            names, words = get_task(entry.card["train"]["task"]).shown_groups
            by = res["per_step_accuracy_by_group"]
            groups = family(by, names) if isinstance(names, str) else {k: by[k] for k in names if k in by}
            groups_caption = (f"Accuracy if it stopped at step n, {words}, on the same {res['n']:,} test items; "
                              "the steps after a line goes flat change no answer.")
        by_group_ui(groups or {}, groups_caption, f"{key}_groups")


def rotation_section_ui(entry: ModelEntry, rows: Sequence[dict], n_images: int, key: str = "rot") -> None:
    """The section of the rotation page: per-step accuracy by rotation (the page's own rotated test sets)."""
    section_ui(entry, key, {rotation_label(r): r["per_step_accuracy"] for r in rows if "per_step_accuracy" in r},
               f"Accuracy if it stopped at step n on {n_images:,} test images per rotation; the steps after a line "
               "goes flat change no answer. The chart beside it is on the unrotated test digits.")


def compare_ui(entries: Sequence[ModelEntry], key: str = "compare_worth") -> None:
    """The "worth it?" chart of several models overlaid, a sentence for each; a model that cannot be loaded is
    one red line."""
    got = {}
    for e in entries:
        try:
            got[e.name] = results(e)
        except ui.USER_ERRORS as err:            # its weights cannot be loaded: the others are still compared
            st.error(f"{tables.plain(e.name)}: {ui.one_line(err)}", icon=":material/error:")
    shown = [series(n, r) for n, r in got.items() if r is not None]
    if not shown:
        st.caption("No model to compare with a fixed depth and a confidence exit (MNIST models need the test set).")
        return
    ui.chart(worth_fig(shown), CAPTION + f" Each model on its first {ITEMS:,} test items; a colour per model.",
             key=key)
    st.markdown("\n".join(f"- **{tables.plain(s['name'])}**: {worth_sentence(s['at'])}" for s in shown))
    if missing := [n for n, r in got.items() if r is None]:
        st.caption("Not measured (needs the MNIST test set): " + ", ".join(tables.plain(n) for n in missing))


def settle_ui(trace: Trace, truth: Optional[int]) -> None:
    """Where this input's answer settled, beside when it halted and its E[n]."""
    known = truth is not None
    st.caption(settle_sentence(trace.probs, truth if known else int(trace.probs[-1].argmax()), trace.halt_step,
                               trace.expected_steps, known))
