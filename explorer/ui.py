"""Small *_ui() helpers: each draws a few widgets and returns plain values.

Shared state: the chosen model (per task), λp and the page live in st.query_params, so a view
can be shared as a link (e.g. /rotation?model=mnist-rot22), and in session state, so a choice
survives switching pages (navigation clears the query string).
"""
from __future__ import annotations

import math
import random
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Optional, Sequence

import streamlit as st

from ponder.store.atomic import SaveError
from ponder.store.card import CheckpointError
from ponder.config import ConfigError
from ponder.halting import MODES
from ponder.store.runs import ModelEntry, RunNameError, list_sweeps
from ponder.tasks import TASKS

from ponder.store.card import test_metrics

from . import canvas, digits, inputs, links, loaders, tables

# Errors whose message is written for people (one line naming the file / field and the reason).
USER_ERRORS = (CheckpointError, SaveError, RunNameError, ConfigError)

# Plotly's toolbar covers titles and legends: off. Drag still zooms, a double
# click resets, and Streamlit's own toolbar (hover, above the chart) shows it full screen.
PLOTLY_CONFIG = {"displayModeBar": False, "displaylogo": False}
MODE_HELP = ("sample: halt at step n with probability λ_n (the paper's inference; a seeded draw). "
             "deterministic: halt at the median of the halting distribution (first n with P(halted by n) ≥ 0.5). "
             "expected: run all N steps and answer the p-weighted mixture Σ p_n · y_n.")


def app_guard(url_path: str) -> None:
    """Send a page that Streamlit ran on its own through streamlit_app.py (call it first in a page).

    With a pages/ folder, the first visit after a server start that opens /<page> directly is run
    in Streamlit's old multipage mode: the page script alone, without st.navigation or the page
    config. Switch to the app with ?page=<page>, which streamlit_app.py turns into that page.
    """
    if not st.session_state.get("_via_app"):
        params = {k: st.query_params.get_all(k) for k in st.query_params}
        params["page"] = url_path
        st.switch_page("streamlit_app.py", query_params=params)


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
                why = getattr(e, "download_failed", "") or one_line(e)
                st.error(one_line(f"The download did not work ({why}). {digits.missing_data_message()}"))
                return
        st.rerun()


def one_line(e: BaseException, limit: int = 400) -> str:
    """An error's message on one line as plain text for a markdown box (never a traceback; a card
    value quoted in it renders as text, not as a link or an image)."""
    text = " ".join(str(e).split()) or e.__class__.__name__
    return tables.plain(text if len(text) <= limit else text[:limit - 1] + "…")


@contextmanager
def user_errors(stop: bool = True):
    """Show a checkpoint / save / run-name / config error as one red line (then stop the page)."""
    try:
        yield
    except USER_ERRORS as e:
        st.error(one_line(e), icon=":material/error:")
        if stop:
            st.stop()


def chart(fig, caption: str, key: Optional[str] = None) -> None:
    """A Plotly chart with its one-line caption underneath."""
    st.plotly_chart(fig, width="stretch", config=PLOTLY_CONFIG, key=key)
    st.caption(caption)


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
    tasks = {e.name: e.card.get("task") for e in loaders.models()} if {"model", "models"} & set(params) else {}
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
        st.session_state[key] = query_float("lp", 0.01, 1.0) or st.session_state.get("_lp", 0.2)
    lp = st.slider(label, 0.01, 1.0, step=0.01, key=key,
                    help="The geometric prior p_G(n) = λp(1−λp)^(n−1) says 'halt with probability λp at each "
                         "step'; its mean is 1/λp steps.")
    st.session_state["_lp"] = lp
    st.query_params["lp"] = f"{lp:g}"
    return lp


def remembered_lambda_p() -> float:
    return query_float("lp", 0.01, 1.0) or st.session_state.get("_lp", 0.2)


# ----------------------------------------------------------------------------- model pickers

def entry_label(e: ModelEntry) -> str:
    c = e.card
    t = test_metrics(c)
    status = c.get("status", "")
    mark = {"cancelled": " · partial (cancelled)", "failed": " · FAILED"}.get(status, "")
    acc = f" · {t['accuracy']:.1%}" if t.get("accuracy") is not None else ""
    return f"{e.name} · λp {c.get('lambda_p'):g}{acc}{mark}"


def _initial(names: Sequence[str], mem_key: str, default: Optional[str]) -> str:
    for want in (st.query_params.get("model"), st.session_state.get(mem_key), default):
        if want in names:
            return want
    return names[0]


def default_model(task: Optional[str]) -> str:
    """The shipped model a picker of `task` starts on; for any task, the first registered task's."""
    return (TASKS[task] if task in TASKS else next(iter(TASKS.values()))).default_model


def pick_model(task: Optional[str], name: str) -> None:
    """Set the sidebar picker of `task` to `name` (a button's on_click: runs before the picker is drawn)."""
    st.session_state[f"pick_model_{task or 'any'}"] = st.session_state[f"_model_{task or 'any'}"] = name


def model_picker_ui(task: Optional[str] = None, label: str = "Model") -> Optional[ModelEntry]:
    """Sidebar picker over shipped models and the user's runs of a task; its config in the tooltip."""
    entries = loaders.models(task)
    if not entries:
        st.sidebar.warning(f"No {task or ''} models found: train one on the Train page.")
        return None
    by = {e.name: e for e in entries}
    wkey, mem = f"pick_model_{task or 'any'}", f"_model_{task or 'any'}"
    chosen = gone = st.session_state.get(wkey)
    if chosen not in by:
        chosen = _initial(list(by), mem, default_model(task))
        if gone is not None:                  # shown a run before, now deleted or renamed (another session?)
            st.sidebar.info(f"{tables.plain(gone)} is gone (deleted or renamed meanwhile): showing "
                            f"{tables.plain(chosen)} instead.", icon=":material/info:")
    # written every run: widget ids differ per page, so a picker met on a new page starts from this
    st.session_state[wkey] = chosen
    current = by[chosen]
    name = st.sidebar.selectbox(label, list(by), key=wkey, format_func=lambda n: entry_label(by[n]),
                                help=f"**{tables.plain(current.name)}**\n\n" + tables.describe_card(current.card))
    st.session_state[mem] = name
    st.query_params["model"] = name
    entry = by[name]
    tr = entry.card.get("train", {})
    settings = tables.task_settings(entry.card)
    # the picker cuts a long name at the sidebar's width: the caption under it says it whole (and wraps)
    st.sidebar.caption(f"**{tables.plain(entry.name)}** · {entry.source} · {entry.card.get('task')}"
                       f"{f' · {settings}' if settings else ''} · "
                       f"λp {entry.card.get('lambda_p'):g} · N {entry.card.get('max_steps')} · β {tr.get('beta')} · "
                       f"{tables.regulariser_name(tr)} · the (?) shows its full config")
    if entry.card.get("status") in ("cancelled", "failed"):
        st.sidebar.warning(f"Partial run ({entry.card['status']}): {tables.plain(entry.card.get('reason') or 'no reason given')}")
    return entry


def checkpoint_picker_ui(task: str):
    """The sidebar model picker and its loaded checkpoint: (entry, Checkpoint). Stops the page when
    there is no model of the task, and shows a run that cannot be loaded as one red line."""
    entry = model_picker_ui(task)
    if entry is None:
        st.stop()
    with user_errors():
        return entry, loaders.checkpoint(entry)


def models_multiselect_ui(label: str = "Models and runs", default: Sequence[str] = ("mnist-default", "mnist-rot22"),
                          key: str = "compare_models", add: Optional[str] = None) -> list:
    """Several models/runs (any task), kept in the URL as ?models=a&models=b. `add` joins the selection."""
    entries = loaders.models()
    by = {e.name: e for e in entries}
    if add in by and key in st.session_state and add not in st.session_state[key]:
        st.session_state[key] = list(st.session_state[key]) + [add]
    if key not in st.session_state:
        want = [n for n in st.query_params.get_all("models") if n in by] or \
               [n for n in st.session_state.get("_" + key, []) if n in by] or [n for n in default if n in by]
        st.session_state[key] = want or list(by)[:2]
    else:
        st.session_state[key] = [n for n in st.session_state[key] if n in by]
    sweeps = {}                                # a sweep's trials are picked as one group
    for e in entries:
        if e.sweep:
            sweeps.setdefault(e.sweep, []).append(e.name)

    def add_sweep():
        picked = st.session_state.get(key + "_sweep")
        st.session_state[key] = list(dict.fromkeys(list(st.session_state[key]) + sweeps.get(picked, [])))
        st.session_state[key + "_sweep"] = ""

    if sweeps:
        st.selectbox("Add a whole sweep", [""] + list(sweeps), key=key + "_sweep", on_change=add_sweep,
                     format_func=lambda s: f"runs/{s}/ ({len(sweeps[s])} trials)" if s else "—",
                     help="A sweep folder (python -m ponder sweep, or the λp sweep page): all its trials at once.")
    names = st.multiselect(label, list(by), key=key, format_func=lambda n: entry_label(by[n]),
                           help="Shipped models (assets/) and every run trained here (runs folder; a sweep's "
                                "trials as runs/<sweep>/<trial>).")
    st.session_state["_" + key] = names
    st.query_params["models"] = names
    return [by[n] for n in names]


def sweep_folder_ui(key: str = "sweep_folder") -> Optional[Path]:
    """A sweep folder of the runs folder (one holding sweep.json), newest first; None when there is none."""
    folders = {f.name: f for f in list_sweeps()}
    if not folders:
        st.info("No sweep folders in the runs folder yet: start a sweep above, or run "
                "`python -m ponder sweep ... --out runs/<name>`.")
        return None
    name = st.selectbox("Sweep folder", list(folders), key=key, format_func=lambda n: f"runs/{n}/")
    return folders[name]


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
    q = st.query_params.get("mode")
    keep_widget_state(key, q if q in MODES else "sample")
    mode = st.segmented_control("Halting mode", MODES, key=key, required=True, help=MODE_HELP,
                                on_change=remember_widget_state, args=(key,))
    return mode or "sample"


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
SOURCES = ["Draw", "MNIST test digit", "Upload"]


def digit_source_ui() -> str:
    if st.session_state.get("digit_source") not in SOURCES:
        st.session_state["digit_source"] = "Draw"
    return st.segmented_control("Input", SOURCES, key="digit_source", required=True) or "Draw"


def drawing_ui(key: str = "canvas"):
    """The drawing canvas -> (uint8 [28, 28] digit or None, hint).

    The drawing outlives a page switch: Streamlit forgets a widget's state when its page is left, so the
    last drawing (the canvas's JSON and its digit) is kept under a plain key and given back as the
    initial drawing of a canvas that starts afresh. The canvas sends no picture for an initial drawing,
    so the kept digit stands for it until the next stroke."""
    from streamlit_drawable_canvas import st_canvas      # only inside a running app

    kept = st.session_state.get("_drawing")              # {"json": fabric JSON, "digit": uint8 [28, 28] or None}
    if key not in st.session_state:                      # a fresh canvas: this page was just opened
        st.session_state["_drawing_initial"] = kept["json"] if kept else None
    initial = st.session_state.get("_drawing_initial")   # unchanged while the canvas lives (a change redraws it)
    st.space("small")                                      # room for the canvas toolbar shown on hover
    drawn = st_canvas(stroke_width=18, stroke_color="#FFFFFF", background_color="#000000", width=280,
                      height=280, drawing_mode="freedraw", return_image_data=True, key=key, initial_drawing=initial)
    st.caption("Draw one digit, white on black, filling most of the box. Hover it for undo and clear.")
    digit, st.session_state["_drawing"] = canvas.keep_drawing(kept, drawn.json_data, drawn.image_data)
    return digit, (
        "Draw a digit in the black box (or switch the input to **MNIST test digit** or **Upload**). "
        "The prediction and the step-by-step charts appear as soon as there is some ink.")


def upload_ui(key: str = "digit_upload"):
    """A picture of one digit -> (uint8 [28, 28] digit or None, hint). Any size or colour mode."""
    f = st.file_uploader("A picture of one digit", type=list(canvas.UPLOAD_TYPES),
                         max_upload_size=canvas.MAX_UPLOAD_MB, key=key,
                         help="Dark on light or light on dark; it is cropped, scaled and centred like MNIST.")
    if f is None:
        return None, "Upload a picture of one digit (PNG, JPEG, …, up to 10 MB)."
    digit, why = canvas.preprocess_upload(f)
    if digit is not None:
        st.caption(f"{f.name}: cropped to the ink, scaled to 20×20 and centred in 28×28.")
    return digit, why


def _pick_random(pool_len: int, labels, want) -> None:
    import numpy as np
    rng = np.random.default_rng()
    where = np.arange(pool_len) if want == "any" else np.flatnonzero(np.asarray(labels) == int(want))
    st.session_state["digit_pos"] = int(rng.choice(where if len(where) else np.arange(pool_len)))


def digit_picker_ui(pool) -> int:
    """Pick a test digit by class or at random; returns its position in the pool."""
    if "digit_pos" not in st.session_state or st.session_state["digit_pos"] >= len(pool):
        st.session_state["digit_pos"] = 0
    c1, c2 = st.columns([1, 1], vertical_alignment="bottom")
    want = c1.selectbox("Class", ["any"] + list(range(10)), key="digit_class")
    if want != "any" and int(pool.y[st.session_state["digit_pos"]]) != int(want):
        _pick_random(len(pool), pool.y, want)
    c2.button("Random digit", icon=":material/shuffle:", on_click=_pick_random, args=(len(pool), pool.y, want), key="digit_random")
    return int(st.session_state["digit_pos"])


def rotation_ui(key: str = "angle") -> float:
    """The rotation slider, debounced. Arrow keys move it 5° a press; were each press to rerun the whole
    page, 45 presses (180° to -45°) would take 11 s and more to settle. The slider lives in a fragment,
    so a press reruns only the slider; a tick every inputs.SETTLE_S reruns the page once the angle has
    stayed put for a tick (inputs.settled), and only that angle is computed and drawn."""
    applied, seen = f"_{key}_applied", f"_{key}_seen"

    @st.fragment(run_every=inputs.SETTLE_S)
    def slider():
        st.slider("Rotation (degrees, counter-clockwise)", -180, 180, 0, step=5, key=key,
                  help="Applied to the drawing or the test digit before the model sees it.")
        now, before = st.session_state[key], st.session_state.get(seen)
        st.session_state[seen] = now
        if inputs.settled(st.session_state.get(applied), before, now):
            st.session_state[applied] = now          # set first: the page run runs this fragment too
            st.rerun(scope="app")

    slider()
    st.session_state[applied] = st.session_state[key]
    return float(st.session_state[key])


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
