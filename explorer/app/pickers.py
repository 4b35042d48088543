"""Pickers: what a page looks at. The model or runs (shipped models and the runs folder, per task), a
run's loaded checkpoint, a sweep folder; and the input digit: drawn, uploaded or picked from the test set,
and its rotation. Each *_ui() draws its widgets and returns plain values; the chosen model lives in the
URL (?model=, ?models=) and in session state, so a choice survives a link and a page switch."""
from __future__ import annotations

from typing import Optional, Sequence

import streamlit as st

from ponder.store.runs import ModelEntry
from ponder.tasks import TASKS

from ..drawing import canvas
from .. import inputs, tables
from . import loaders
from .ui import user_errors


# ----------------------------------------------------------------------------- models and runs

def entry_label(e: ModelEntry) -> str:
    r, t = e.record, e.record.test
    mark = {"cancelled": " · partial (cancelled)", "failed": " · FAILED"}.get(r.status, "")
    acc = f" · {t.accuracy:.1%}" if t.accuracy is not None else ""
    return f"{e.name} · λp {r.lambda_p:g}{acc}{mark}"


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
                                help=f"**{tables.plain(current.name)}**\n\n" + tables.describe_run(current.record))
    st.session_state[mem] = name
    st.query_params["model"] = name
    entry = by[name]
    r = entry.record
    tr = r.train
    settings = tables.task_settings(r)
    head = tables.lambda_input_name(tr)                   # said when it is not the paper's (h alone)
    # the picker cuts a long name at the sidebar's width: the caption under it says it whole (and wraps)
    st.sidebar.caption(f"**{tables.plain(entry.name)}** · {entry.source} · {r.task}"
                       f"{f' · {settings}' if settings else ''} · "
                       f"λp {r.lambda_p:g} · {tables.steps_setting(tr)} · β {tr.get('beta')} · "
                       f"{tables.regulariser_name(tr)} · {f'λ head reads {head} · ' if head != 'h' else ''}"
                       "the (?) shows its full config")
    if r.partial:
        st.sidebar.warning(f"Partial run ({r.status}): {tables.plain(r.reason or 'no reason given')}")
    return entry


def checkpoint_picker_ui(task: str):
    """The sidebar model picker and its loaded checkpoint: (entry, Checkpoint). Stops the page when
    there is no model of the task, and shows a run that cannot be loaded as one red line."""
    entry = model_picker_ui(task)
    if entry is None:
        st.stop()
    with user_errors():
        return entry, loaders.checkpoint(entry)


def models_multiselect_ui(label: str = "Models and runs", default: Sequence[str] = ("mnist-adaptive", "mnist-default"),
                          key: str = "compare_models", add: Optional[str] = None) -> list:
    """Several models/runs (any task), kept in the URL as ?models=a&models=b. `add` joins the selection. The default
    pair halts differently (the row reader ponders, the whole-image reader follows its prior): a first view that
    shows what comparing halting curves is for."""
    entries = loaders.models()
    by = {e.name: e for e in entries}
    if add in by and key in st.session_state and add not in st.session_state[key]:
        st.session_state[key] = list(st.session_state[key]) + [add]
    if key not in st.session_state:        # each model once: a link naming one 998 times drew it 998 times (48 s)
        want = [n for n in st.query_params.get_all("models") if n in by] or \
               [n for n in st.session_state.get("_" + key, []) if n in by] or [n for n in default if n in by]
        st.session_state[key] = list(dict.fromkeys(want)) or list(by)[:2]
    else:
        st.session_state[key] = list(dict.fromkeys(n for n in st.session_state[key] if n in by))
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


# ----------------------------------------------------------------------------- the input digit

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

    cleared = st.session_state.get("_canvas_cleared", 0)  # Clear gives a new, empty canvas (a new key)
    key = key if not cleared else f"{key}_{cleared}"
    kept = st.session_state.get("_drawing")              # {"json": fabric JSON, "digit": uint8 [28, 28] or None}
    if key not in st.session_state:                      # a fresh canvas: this page was just opened
        st.session_state["_drawing_initial"] = kept["json"] if kept else None
    initial = st.session_state.get("_drawing_initial")   # unchanged while the canvas lives (a change redraws it)
    st.space("small")                                      # room for the canvas toolbar shown on hover
    try:            # the canvas's state is whatever the browser sent: a malformed one fails inside st_canvas
        drawn = st_canvas(stroke_width=18, stroke_color="#FFFFFF", background_color="#000000", width=canvas.CANVAS_SIDE,
                          height=canvas.CANVAS_SIDE, drawing_mode="freedraw", return_image_data=True, key=key,
                          initial_drawing=initial)
        # the picture as the browser sent it (a data URL), read by canvas.read_drawing; the result's image_data
        # would decode any picture whole
        json_data, url = drawn.json_data, drawn._image_data_url
    except (AttributeError, KeyError, TypeError, ValueError):
        json_data, url = None, ""                         # read as a bad picture: read_drawing's one-line hint
    c1, c2 = st.columns([2.2, 1], vertical_alignment="center")
    c1.caption("Draw one digit, white on black, filling most of the box. **Clear** starts again (with a mouse, undo "
               "and clear also show above the box).")
    c2.button("Clear", icon=":material/delete:", key="canvas_clear", on_click=_clear_drawing,
              help="An empty box to draw a new digit in (works by touch).")
    digit, st.session_state["_drawing"], why = canvas.keep_drawing(kept, json_data, url)
    return digit, why or (
        "Draw a digit in the black box (or switch the input to **MNIST test digit** or **Upload**). "
        "The prediction and the step-by-step charts appear as soon as there is some ink.")


def _clear_drawing() -> None:
    st.session_state["_canvas_cleared"] = st.session_state.get("_canvas_cleared", 0) + 1
    st.session_state["_drawing"] = None


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


CELL_LABELS = {1: "+", 0: "0", -1: "−"}                          # one sign: a cell's button is ~40 px wide
CELL_COLORS = {1: "#E45756", 0: "#F2F2F2", -1: "#4C78A8"}       # study_figures.parity_input_fig's red, grey, blue
CELLS_A_ROW = 15


def _click_cell(values, i: int, how_key: str, text_key: str) -> None:
    """A click on cell i: the vector, that cell moved on, becomes the typed one (its text field holds it)."""
    st.session_state[how_key] = "Type"
    st.session_state[text_key] = inputs.vector_text(inputs.flip_cell(values, i))


def vector_cells_ui(values, how_key: str = "par_how", text_key: str = "par_text") -> None:
    """The parity vector as a row of buttons, CELLS_A_ROW a row: a click moves a cell −1 → 0 → +1 and the page
    ponders the edited vector (as typed: the Type field shows it)."""
    values = [int(v) for v in values]
    st.caption("Click a cell to change it (−1 → 0 → +1 → −1) and watch the answer and the halting change.")
    st.html("<style>" + "".join(f".st-key-cell_{i} button{{background:{CELL_COLORS[v]};color:{'#000' if v == 0 else '#fff'};"
                                f"padding:0;min-height:2rem}}" for i, v in enumerate(values)) + "</style>")
    for start in range(0, len(values), CELLS_A_ROW):
        for i, col in zip(range(start, min(start + CELLS_A_ROW, len(values))), st.columns(CELLS_A_ROW, gap="xxsmall")):
            col.button(CELL_LABELS[values[i]], key=f"cell_{i}", width="stretch",
                       help=f"cell {i + 1}: {values[i]:+d}; click for {inputs.NEXT_VALUE[values[i]]:+d}".replace("+0", "0"),
                       on_click=_click_cell, args=(values, i, how_key, text_key))


def pick_test_digit(index: int) -> None:
    """Load MNIST test digit #index as the input (a click in the pondering gallery): the test-digit source, that
    digit, any class."""
    st.session_state.update(digit_source="MNIST test digit", digit_pos=int(index), digit_class="any")


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
    so a press reruns only the slider. While the slider is away from the angle the page shows, a tick
    (a fragment nested in it) runs every inputs.SETTLE_S and reruns the page once the angle has stayed put
    for a tick (inputs.settled): only that angle is computed and drawn. A page run defines the tick without a
    timer (it shows the slider's angle), which stops the ticks: an idle page runs nothing."""
    applied, seen, in_page = f"_{key}_applied", f"_{key}_seen", f"_{key}_in_page"

    @st.fragment
    def slider():
        st.session_state.setdefault(key, 0)          # a link's angle may be there first (digit_page.link_view_ui)
        st.slider("Rotation (degrees, counter-clockwise)", -180, 180, step=5, key=key,
                  help="Applied to the drawing or the test digit before the model sees it.")
        # a press reruns this fragment alone; a page run shows the slider's angle and so needs no tick
        moved = not st.session_state.get(in_page) and st.session_state[key] != st.session_state.get(applied)

        @st.fragment(run_every=inputs.SETTLE_S if moved else None)
        def tick():
            now, before = st.session_state[key], st.session_state.get(seen)
            st.session_state[seen] = now
            if inputs.settled(st.session_state.get(applied), before, now):
                st.session_state[applied] = now          # set first: the page run runs this fragment too
                st.rerun(scope="app")

        tick()

    st.session_state[in_page] = True
    slider()
    st.session_state[in_page] = False
    st.session_state[applied] = st.session_state[key]
    return float(st.session_state[key])


def rotated_model_hint_ui(entry, task: str) -> None:
    """A button to study a model trained on rotated digits, when the one picked saw none (the picked model is
    shared by every page, so it is suggested, not switched)."""
    rotated = {e.name: float(e.record.train["rotate_train"]) for e in loaders.models(task)
               if (e.record.train.get("rotate_train") or 0) > 0}
    if rotated and entry.name not in rotated:
        name, deg = next(iter(rotated.items()))
        st.info(f"{entry.name} saw no rotated digits in training; {name} was trained on digits rotated by up to "
                f"±{deg:g}°: study it to compare.")
        st.button(f"Study {name}", key="rot_pick_rotated", on_click=pick_model, args=(task, name))
