"""Small *_ui() helpers: each draws a few widgets and returns plain values (the pickers of a model, a sweep
or an input digit: pickers.py).

Shared state: the chosen model (per task), λp and the page live in st.query_params, so a view
can be shared as a link (e.g. /rotation?model=mnist-rot22), and in session state, so a choice
survives switching pages (navigation clears the query string).
"""
from __future__ import annotations

import gc
import math
import random
import uuid
from contextlib import contextmanager
from typing import Optional, Sequence

import streamlit as st

from ponder.files import SaveError
from ponder.store.card import CheckpointError, one_line
from ponder.config import ConfigError
from ponder.halting import MODES
from ponder.training.progress import free_threads
from ponder.store.runs import RunNameError

from ..drawing import digits
from .. import inputs, links, navigation, tables
from . import loaders

# Errors whose message is written for people (one line naming the file / field and the reason).
USER_ERRORS = (CheckpointError, SaveError, RunNameError, ConfigError)

# Plotly's toolbar, shown on hover, holds one button (the chart as a PNG): its other buttons covered titles and
# legends. Drag still zooms, a double click resets, and Streamlit's own toolbar shows a chart full screen.
PLOTLY_CONFIG = {"displaylogo": False, "modeBarButtons": [["toImage"]],     # one button: the chart as a PNG
                 "toImageButtonOptions": {"format": "png", "scale": 2, "filename": "ponder-chart"}}
MODE_HELP = ("sample: halt at step n with probability λ_n (the paper's inference; a seeded draw). "
             "deterministic: the Q-exit, the same λ's used without a draw: halt at the first n with P(halted by n) ≥ q "
             "(q = 0.5: the median of the halting distribution; a larger q spends more steps). "
             "expected: run all N steps and answer the p-weighted mixture Σ p_n · y_n.")


def app_guard(script: str) -> None:
    """Send a page that Streamlit ran on its own through streamlit_app.py (call it first in a page, with its
    `__file__`).

    The first visit after a server start that opens /<page> directly (a deep link such as /train) runs the
    page script alone, in Streamlit's old multipage mode for a pages/ folder: without st.navigation, the page
    config or the sidebar's page links. Switch to the app with ?page=<page> (the page's name in
    explorer.navigation), which streamlit_app.py turns into that page.

    The page's models then run on the cores the load average leaves free (ponder.training.progress.free_threads): two
    threads where one core is busy elsewhere wait on each other. torch's thread number is per thread, and each
    script run is a thread of its own; a job's thread sets its own (explorer.jobs.limits.job_threads_from_env).
    """
    import torch
    torch.set_num_threads(free_threads())
    if not st.session_state.get("_via_app"):
        params = {k: st.query_params.get_all(k) for k in st.query_params}
        params["page"] = navigation.page_of(script).name
        st.switch_page("streamlit_app.py", query_params=params)


def freeze_imports() -> None:
    """Take what is alive now out of the cycle collector's sight, once per process, after a first page run: the
    modules of torch, plotly (its validators are made at a first figure), streamlit and this app, ~440,000 objects.
    A full collection then takes milliseconds instead of ~0.25 s, so Streamlit's after every script run ([runner]
    postScriptGC in .streamlit/config.toml) frees a run's reference cycles (Plotly figures: ~2,100 objects a
    digit-page run) at once, instead of leaving them until Python's next full collection, sessions later. What that
    first run left alive (its session's state) is frozen with them, and kept for good."""
    if not gc.get_freeze_count():
        gc.collect()
        gc.freeze()


def session_id() -> str:
    """A stable id for this browser session (jobs are owned by it)."""
    if "_session_id" not in st.session_state:
        st.session_state["_session_id"] = uuid.uuid4().hex
    return st.session_state["_session_id"]


def mnist_missing_ui(message: str, key: str, note: str = "") -> None:
    """Where to put MNIST, and a button that downloads it with torchvision (about 11 MB)."""
    st.info(f"{message} {note}".strip())
    if st.button("Download MNIST now (about 11 MB, needs internet)", key=key, icon=":material/download:"):
        with st.spinner("Downloading MNIST…"):
            try:
                digits.mnist_dataset(download=True)
            except Exception as e:      # DataError: no internet, unwritable folder, ...
                why = getattr(e, "download_failed", "") or error_text(e)
                st.error(error_text(f"The download did not work ({why}). {digits.missing_data_message()}"))
                return
        st.rerun()


def error_text(e, limit: int = 400) -> str:
    """An error's message on one line (ponder.store.card.one_line) as plain text for a markdown box (never a
    traceback; a card value quoted in it renders as text, not as a link or an image)."""
    return tables.plain(one_line(e, limit))


@contextmanager
def user_errors(stop: bool = True):
    """Show a checkpoint / save / run-name / config error as one red line (then stop the page)."""
    try:
        yield
    except USER_ERRORS as e:
        st.error(error_text(e), icon=":material/error:")
        if stop:
            st.stop()


def chart(fig, caption: str, key: Optional[str] = None) -> None:
    """A Plotly chart with its one-line caption underneath."""
    st.plotly_chart(fig, width="stretch", config=PLOTLY_CONFIG, key=key)
    st.caption(caption)


def on_demand(label: str, key: str, icon: Optional[str] = None):
    """An expander whose content is made and sent only while it is open: the container, or None while closed. A
    section below the fold that the server would otherwise measure and the browser draw on every visit (each Plotly
    chart costs the browser tenths of a second; the page is drawn only once every chart is)."""
    box = st.expander(label, key=key, on_change="rerun", icon=icon)
    return box if box.open else None


def tabs_on_demand(labels: Sequence[str], key: str) -> list:
    """Tabs of which only the open one is made and drawn: a container for it, None for the others."""
    return [t if t.open else None for t in st.tabs(list(labels), key=key, on_change="rerun")]


# ----------------------------------------------------------------------------- query params

def query_float(name: str, lo: float, hi: float) -> Optional[float]:
    try:
        v = float(st.query_params.get(name, ""))
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and lo <= v <= hi else None


def link_params_ui(page: str, asked: Optional[str] = None, pages: Sequence[str] = links.PAGES) -> None:
    """What a link asked for that this page cannot use (a page, model, λp or mode that does not exist, a
    model of the other task, ...): said once, on one line, and taken out of the URL, so the address shows
    what is on the page. asked: the ?page= of the link when it is none of `pages` (streamlit_app.py)."""
    params = {k: st.query_params.get_all(k) for k in st.query_params}
    tasks = {e.name: e.record.task for e in loaders.models()} if {"model", "models"} & set(params) else {}
    keep, ignored = links.check_params(params, page, tasks)
    if asked is not None:
        ignored.insert(0, ("page", asked, "no such page; there are " + ", ".join(pages)))
    for name in {n for n, _, _ in ignored} - {"page"}:
        if name in keep:
            st.query_params[name] = keep[name]
        else:
            del st.query_params[name]
    if ignored:
        st.warning(tables.plain(links.ignored_sentence(ignored)), icon=":material/link_off:")


def lambda_p_ui(label: str = "λp (prior's halting probability per step)", key: str = "lp") -> float:
    """The λp slider, kept in the URL (?lp=0.2) and across pages."""
    if key not in st.session_state:
        st.session_state[key] = query_float("lp", *links.LP_RANGE) or st.session_state.get("_lp", 0.2)
    lp = st.slider(label, *links.LP_RANGE, step=0.01, key=key, help=links.LP_HELP)
    st.session_state["_lp"] = lp
    st.query_params["lp"] = f"{lp:g}"
    return lp


def remembered_lambda_p(default: float = 0.2) -> float:
    """λp the user last chose (the link's lp, then this session's), else `default` (the task's)."""
    return query_float("lp", *links.LP_RANGE) or st.session_state.get("_lp", default)


# ----------------------------------------------------------------------------- ponder controls

def _kept(key: str) -> str:
    return "_kept_" + key


def keep_widget_state(key: str, default) -> None:
    """A widget that disappears for a run (e.g. the results column hidden by a blank canvas) comes
    back in the browser showing its default, while the server may still hold the old value: a mode
    shown as unselected but used, a seed box at 0 and a sentence naming another seed. So the value is
    kept under a plain key (copied by remember_widget_state, the widget's on_change, which runs before
    the script) and assigned to the widget's key before the widget is created, every run: an
    assignment before creation is what the browser is sent."""
    st.session_state[key] = st.session_state.setdefault(_kept(key), st.session_state.get(key, default))


def remember_widget_state(key: str) -> None:
    st.session_state[_kept(key)] = st.session_state[key]


def mode_ui(key: str = "mode") -> str:
    """The halting mode, read from a link's ?mode= the first time and written back to the address."""
    q = st.query_params.get("mode")
    keep_widget_state(key, q if q in MODES else "sample")
    mode = st.segmented_control("Halting mode", MODES, key=key, required=True, help=MODE_HELP,
                                on_change=remember_widget_state, args=(key,)) or "sample"
    if st.query_params.get("mode") != mode:
        st.query_params["mode"] = mode                      # the address says the mode shown (a link reads it)
    return mode


def q_ui(key: str = "q") -> float:
    """The Q-exit's q of deterministic mode: it halts at the first step where P(halted by n) reaches q."""
    keep_widget_state(key, 0.5)
    return float(st.slider("Q-exit q", 0.0, 1.0, step=0.05, key=key, on_change=remember_widget_state, args=(key,),
                           help="Deterministic mode halts at the first step where P(halted by n) = Σ_{j≤n} p_j "
                                "reaches q: 0.5 is the median step, a larger q waits longer."))


def _new_seed(key: str) -> None:
    st.session_state[key] = random.randrange(100000)
    remember_widget_state(key)


def seed_ui(key: str = "seed", enabled: bool = True, stacked: bool = False) -> int:
    """The seed of the halting draws, visible and editable, and a 'Sample again' button
    (under it when stacked, for narrow columns)."""
    keep_widget_state(key, 0)
    c1, c2 = (st, st) if stacked else st.columns([1.2, 1], vertical_alignment="bottom")
    seed = c1.number_input("Seed of the halting draws", 0, 10**9, step=1, key=key, disabled=not enabled,
                           help="The same seed replays the same sampled halting step.",
                           on_change=remember_widget_state, args=(key,))
    c2.button("Sample again", icon=":material/casino:", key=key + "_again", on_click=_new_seed, args=(key,), disabled=not enabled,
              help="Draw the halting step again with a new seed (shown on the left).")
    st.caption(SEED_NOTE if enabled else "The seed only matters in sample mode; this mode's halting step does not "
               "depend on it.")
    return int(seed)


SEED_NOTE = ("The seed sets sample mode's halting step: each step stops with probability λ_n, and the seed fixes "
             "those draws. Another seed may stop at another step, with that step's answer; E[n] and the charts stay.")
def rotation_table_ui(labels: Sequence[str], rows: Sequence[dict]) -> None:
    """The rotation study as a table: every row visible (no inner scroll), numbers formatted."""
    data = [{"rotation": lab, "accuracy": 100 * r["accuracy"], "mean steps": r["mean_steps"],
             "E[n]": r.get("expected_steps"), "median": r["median_steps"], "std": r["std_steps"], "images": r["n"]}
            for lab, r in zip(labels, rows)]
    cc = st.column_config
    st.dataframe(data, hide_index=True, height=36 * (len(data) + 1) + 2, column_config={
        "accuracy": cc.NumberColumn("accuracy", format="%.1f%%"),
        "mean steps": cc.NumberColumn("mean steps", format="%.2f", help="mean sampled halting step"),
        "E[n]": cc.NumberColumn("E[n]", format="%.2f", help="mean over the images of E[n] = Σ n·p_n"),
        "median": cc.NumberColumn("median", format="%.0f"), "std": cc.NumberColumn("std", format="%.2f"),
        "images": cc.NumberColumn("images", format="%d")})


def rotation_settings_ui() -> tuple:
    """The Rotation page's settings form: (fixed angles, uniform ranges, test images, halting mode, full set, the
    Q-exit's q of deterministic mode); a bad angle list is one red line and stops the page."""
    with st.form("rotation_settings"):
        c1, c2, c3, c4 = st.columns([2, 1.3, 1, 1])
        angles_text = c1.text_input("Fixed angles θ (degrees)", ", ".join(str(a) for a in inputs.DEFAULT_ANGLES),
                                    max_chars=inputs.MAX_NUMBERS_TEXT, key="rot_angles")
        ranges_text = c2.text_input("Uniform ranges ±d (degrees)", "22.5, 45, 90", max_chars=inputs.MAX_NUMBERS_TEXT,
                                    key="rot_ranges")
        limit = c3.number_input("Test images", 100, 10000, 2000, 100, key="rot_limit")
        mode = c4.selectbox("Halting mode", MODES, key="rot_mode", help=MODE_HELP)
        full = st.checkbox("Use the full 10,000-image test set (slower)", key="rot_full")
        q = c4.number_input("Q-exit q", 0.0, 1.0, 0.5, 0.05, key="rot_q", help="Deterministic mode only: halt at the "
                            "first step where P(halted by n) reaches q (0.5: the median step).")
        st.form_submit_button("Evaluate", key="rot_go")
    try:
        angles, ranges = inputs.rotation_sets(angles_text, ranges_text)
    except ValueError as e:
        st.error(str(e))
        st.stop()
    return angles, ranges, limit, mode, full, float(q)
