"""Watching one input think, step by step: the step slider, Play / Pause, and the per-step charts with a band at
the slider's step (Streamlit layout around explorer.app.views and explorer.figures.halting).

Play starts at step 1 (or where a Pause left it) and moves one step every PLAY_EVERY seconds through the halt to
step N, where it stops: the evidence builds up to the halt, and the steps after it show as such. While it plays the
slider is a read-only one made afresh for each step (its own key), so the browser always draws the step the
panel below describes; it is sent right after the step's panel, so it never shows a step before the panel does.
The Play / Pause button is outside the fragment that plays: it stays put while the steps change (a button sent
again at each step lost presses on a loaded machine), and a press reruns the page at once, cutting short a step
being sent. Pause keeps the last step whose panel and slider were sent, and hands it back to the slider the reader can drag.

The browser draws a slider it mounts afresh at the default it was sent, and Streamlit keeps a keyed slider's value
on the server even where the browser has dropped it (a page run cut short by the next click keeps it): a slider
whose default is not its value can read 1 while the panel says step 11. So the draggable slider is never set
through session state: its default is always the step it returns, and a new input, a Pause or the end of Play
makes a new slider (a new key, never used before) that starts where it should.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Optional, Sequence

import numpy as np
import streamlit as st

from ponder.analysis.studies import Trace

from .views import seen_image_ui, trace_charts_ui

PLAY_EVERY = 0.8        # seconds a step while playing: slow enough to read the answer and see the band move
SLIDER = "Step through the steps"


def trace_id(tr: Trace) -> str:
    """A short id of one input's trace: a new drawing, angle, mode or model is a new one."""
    return hashlib.blake2b(np.ascontiguousarray(tr.probs).tobytes() + f"{tr.mode}{tr.halt_step}".encode(),
                           digest_size=6).hexdigest()


@dataclass
class SliderView:
    """The draggable slider shown for a trace: which one (gen numbers the sliders made in this session, each its own
    key) and the step it starts at."""
    ident: str
    gen: int
    start: int


def slider_view(view: Optional[SliderView], ident: str, halt: int, at: Optional[tuple]) -> SliderView:
    """The slider to show for trace ident: the one shown, or a new one (the next gen) for a new trace, starting at its
    halting step, or where Play stopped or was paused (at = (ident, step))."""
    moved = at is not None and at[0] == ident
    if view is not None and view.ident == ident and not moved:
        return view
    return SliderView(ident, view.gen + 1 if view is not None else 0, at[1] if moved else halt)


@dataclass
class Playing:
    """Where Play is: the trace it plays (trace_id) and the step it shows; fresh until that step was shown; shown: the
    last step whose panel and slider were sent (0: none yet)."""
    ident: str
    step: int
    fresh: bool = True
    shown: int = 0


def play_from(now: int, n_steps: int, resume: bool) -> int:
    """The step Play starts at: where a Pause left the slider (resume), else step 1."""
    return now if resume and 1 <= now < n_steps else 1


def tick(play: Playing, n_steps: int) -> Optional[Playing]:
    """The next state of a playing trace: its first step is shown once, then one step a tick; None after step N."""
    if play.fresh:
        return replace(play, fresh=False)
    return replace(play, step=play.step + 1, fresh=False) if play.step < n_steps else None


def step_note(tr: Trace, n: int) -> str:
    """Where step n is against the halt: "where it halted", "after it halted: shown to compare", or ""."""
    if tr.mode == "expected":
        return ""
    if n == tr.halt_step:
        return "where it halted"
    return "after it halted: shown to compare" if n > tr.halt_step else ""


def step_panel_ui(tr: Trace, n: int, seen: Optional[np.ndarray], class_names: Sequence[str],
                  labels: Optional[Sequence[str]] = None) -> None:
    """What step n saw and what it would answer if it stopped there."""
    probs = tr.probs[n - 1]
    top = int(np.argmax(probs))
    c1, c2 = st.columns([0.8, 2.4])
    with c1:
        if seen is not None:
            seen_image_ui(seen[n - 1], f"What step {n} has seen" + (f" ({labels[n - 1]})" if labels else ""))
        else:
            st.caption("This model sees its whole input at every step: its steps only refine its state.")
    with c2:
        m1, m2, m3, m4 = st.columns(4)
        m1.metric(f"Answer at step {n}", class_names[top], help=f"{probs[top]:.1%} for this class at step {n}")
        m2.metric("λ_n", f"{tr.lambdas[n - 1]:.3f}", help="chance to halt at this step if still running")
        m3.metric("p_n", f"{tr.p[n - 1]:.3f}", help="probability of halting exactly here")
        m4.metric("P(halted by n)", f"{tr.cdf[n - 1]:.3f}")
        where = step_note(tr, n)
        st.caption(f"Step {n} of {tr.max_steps}{f' ({where})' if where else ''}: it would answer "
                   f"{class_names[top]} with {probs[top]:.1%}.")


def steps_ui(tr: Trace, seen: Optional[np.ndarray], class_names: Sequence[str], truth: Optional[int] = None,
             key: str = "step", labels: Optional[Sequence[str]] = None) -> None:
    """Watch one input think: the step slider with Play / Pause, what that step saw and answered, and the
    per-step charts with a band at it.

    seen: [N, 28, 28] uint8 images per step, or None when every step sees the whole input; labels: a few words
    per step on what it has seen. The slider starts at the halting step of each new input (trace_id: a new
    drawing, angle, mode or model starts it afresh)."""
    ident, n_steps = trace_id(tr), tr.max_steps
    play_key, resume_key, view_key, at_key = f"{key}_playing", f"{key}_resume", f"{key}_view", f"{key}_at"
    if st.session_state.pop(f"{key}_start", False):  # Play pressed (_play_or_pause): from step 1 or the Pause
        view = st.session_state.get(view_key)
        now = st.session_state.get(f"{key}_slider{view.gen}", view.start) if isinstance(view, SliderView) and \
            view.ident == ident else 1
        resume = st.session_state.get(resume_key) == ident
        st.session_state[play_key], st.session_state[resume_key] = Playing(ident, play_from(now, n_steps, resume)), None
    play = st.session_state.get(play_key)
    playing = isinstance(play, Playing) and play.ident == ident
    # outside the fragment: the button stays put while the steps play (a button drawn again at every step lost
    # clicks on a loaded machine), and a press reruns the page once, with or without the fragment's timer
    st.button("Pause" if playing else "Play through the steps", key=f"{key}_play",
              icon=":material/pause:" if playing else ":material/play_arrow:", on_click=_play_or_pause,
              args=(ident, n_steps, key, playing))

    @st.fragment(run_every=PLAY_EVERY if playing else None)
    def section():
        play = st.session_state.get(play_key)
        view = st.session_state[view_key] = slider_view(st.session_state.get(view_key), ident,
                                                        min(tr.halt_step, n_steps), st.session_state.get(at_key))
        st.session_state.pop(at_key, None)
        slider = f"{key}_slider{view.gen}"
        now = st.session_state.get(slider, view.start)              # the step the reader's slider is on
        active = isinstance(play, Playing) and play.ident == ident
        if active and playing:
            play = st.session_state[play_key] = tick(play, n_steps)
            if play is None:                                  # past step N: the slider stays there, Play again
                st.session_state[at_key] = (ident, n_steps)
                st.rerun()                                    # the whole page: the fragment stops polling
        n = play.step if active else now
        controls = st.container()                   # the slider, sent right after the step's panel: never ahead of it
        step_panel_ui(tr, n, seen, class_names, labels)
        with controls:
            if active:                                        # read-only while playing: a new widget each step
                st.slider(SLIDER, 1, n_steps, n, key=f"{key}_{ident}_play{n}", disabled=True,
                          help="Playing: press Pause to move the slider yourself.")
            else:
                st.slider(SLIDER, 1, n_steps, now, key=slider,
                          help="Move through the steps, or press Play to watch them all from step 1 to N, through the "
                               "halt: the image as that step saw it, its answer if it stopped there, and a band at "
                               "that step on every chart below.")
        if active:                 # its panel and slider sent: a Pause pressed while the next step is sent keeps it
            st.session_state[play_key] = replace(play, shown=n)
        st.divider()
        trace_charts_ui(tr, class_names, truth, key=f"{key}_charts", cursor=n)

    section()


def _play_or_pause(ident: str, n_steps: int, key: str, playing: bool) -> None:
    """The Play / Pause button's callback, before the page run that follows the press (which a press outside the
    fragment starts at once, cutting short a step being sent). Pause keeps the last step on screen (paused_at);
    Play is started by that run (steps_ui), which knows the input then shown."""
    state, play_key = st.session_state, f"{key}_playing"
    play = state.get(play_key)
    if playing and isinstance(play, Playing) and play.ident == ident:
        state[f"{key}_at"] = (ident, paused_at(play, n_steps))
        state[f"{key}_resume"], state[play_key] = ident, None
    elif not playing:
        state[f"{key}_start"] = True


def paused_at(play: Playing, n_steps: int) -> int:
    """The step Pause keeps: the last one whose panel and slider were sent (a press that cuts short the next step's
    run, on a loaded machine, keeps the step on screen), else the step ticked to."""
    return play.shown if 1 <= play.shown <= n_steps else play.step
