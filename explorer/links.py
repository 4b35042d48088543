"""The parameters a shared link may carry (?page=rotation&model=mnist-rot22, ?lp=0.35, ?models=a&models=b,
?mode=deterministic; the digit page's input and view: ?digit=<28×28 digit>, ?test=<test digit>, ?angle=, ?seed=, ?q=,
explorer.drawing.shared), which page reads which, and the check that says what a link asked for that cannot
be used. Pure: plain dicts and strings in and out, no Streamlit (explorer.app.ui.link_params_ui shows it).
"""
from __future__ import annotations

import math
from typing import Mapping, Sequence

from ponder.halting import MODES
from ponder.tasks import TASKS
from ponder.text import shown, text_problem

from . import navigation
from .drawing import shared

PAGES = tuple(p.name for p in navigation.PAGES)            # url paths (the first is the default page)
MODEL_TASK = {page: t.name for t in TASKS.values() for page in t.pages}  # pages with a single-model picker: their task
USES = {p.name: p.uses for p in navigation.PAGES}          # the link parameters each page reads
NAMES = ("page", "model", "models", "lp", "mode", "digit", "test", "angle", "seed", "q")      # the app's own; anything else (Streamlit's embed, ...) is left alone
LP_RANGE = (0.01, 0.99)        # λp in (0, 1): at 1 every input halts at step 1, at 0 never (the slider's range)
LP_HELP = ("The geometric prior p_G(n) = λp(1−λp)^(n−1) says 'halt with probability λp at each step'; its mean "
           "is 1/λp steps. λp lies in (0, 1): at 1 every input would stop at step 1, at 0 none would stop.")
VIEW = {"digit": shared.decode_digit, "test": shared.parse_test, "angle": shared.parse_angle,  # -> (value or None, why)
        "seed": shared.parse_seed, "q": shared.parse_q}
TASK_NAMES = {t.name: t.label for t in TASKS.values()}


def article(word: str) -> str:
    """'an' before a vowel sound ('an MNIST', 'an other'), else 'a' ('a parity')."""
    vowel = word[:1] in "AEFHILMNORSX" if word.isupper() else word[:1].lower() in "aeiou"
    return "an" if vowel else "a"


def parse_lambda_p(text) -> float | None:
    """?lp=0.35 -> 0.35; None when it is not a number in LP_RANGE."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) and LP_RANGE[0] <= v <= LP_RANGE[1] else None


def check_params(params: Mapping[str, Sequence[str]], page: str, tasks: Mapping[str, str]) -> tuple[dict, list]:
    """(the parameters to keep, [(name, value, why), ...] for each value that is ignored).

    params: {name: [values]} as in the URL; page: the page shown (one of PAGES); tasks: {model name: task}
    of every model and run there is. A page's own parameters are kept when they can be used there; a known
    parameter that is wrong, or that the page does not read, is ignored with the reason; so is a value that is not
    text (ponder.text: a NUL or another control character, a lone surrogate), before anything else reads it. `page`
    names the page shown, so a wrong ?page= is reported by the caller, which knows what was asked for.
    """
    keep, ignored = {}, []
    for name, values in params.items():
        values = [str(v) for v in values]
        if name not in NAMES or name == "page":
            keep[name] = values
            continue
        ignored += [(name, v, f"not text: it {p}") for v in values if (p := text_problem(v, name=True))]
        values = [v for v in values if not text_problem(v, name=True)]
        if not values:
            continue
        if name not in USES.get(page, ()):
            ignored += [(name, v, "this page does not use it") for v in values]
            continue
        if name == "models":
            good = list(dict.fromkeys(v for v in values if v in tasks))
            ignored += [(name, v, "no model or run of that name") for v in values if v not in tasks]
            ignored += [(name, v, "given twice") for v in good for _ in range(values.count(v) - 1)]
            if good:
                keep[name] = good
            continue
        value, extra = values[0], values[1:]
        ignored += [(name, v, "given twice; the first one is used") for v in extra]
        if name == "lp":
            ok, why = parse_lambda_p(value) is not None, f"not a number from {LP_RANGE[0]:g} to {LP_RANGE[1]:g}"
        elif name == "mode":
            ok, why = value in MODES, "not a halting mode (" + ", ".join(MODES) + ")"
        elif name in VIEW:                                        # the digit page's input and how it is looked at
            parsed, why = VIEW[name](value)
            ok = parsed is not None
        else:                                                     # model
            want = MODEL_TASK[page]
            ok = tasks.get(value) == want
            task, shows = TASK_NAMES.get(tasks.get(value), "other"), TASK_NAMES[want]
            why = (f"{article(task)} {task} model; this page shows {shows} models"
                   if value in tasks else f"no {shows} model or run of that name")
        if ok:
            keep[name] = [value]
        else:
            ignored.append((name, value, why))
    return keep, ignored


SHOWN = 5      # ignored values a sentence names; the rest are counted


def ignored_sentence(ignored: Sequence[tuple]) -> str:
    """One line: 'Ignored in the link: page=nope (no such page), lp=abc (not a number from 0.01 to 1).', naming
    at most SHOWN values (each cut to 40 characters; one that is not text as its ascii() escape) and counting
    the rest."""
    def short(v: str) -> str:
        v = v if not text_problem(v, name=True) else shown(v, 200)
        return v if len(v) <= 40 else v[:39] + "…"
    more = f"; and {len(ignored) - SHOWN:,} more" if len(ignored) > SHOWN else ""
    return "Ignored in the link: " + "; ".join(f"{n}={short(v)} ({why})" for n, v, why in ignored[:SHOWN]) + more + "."
