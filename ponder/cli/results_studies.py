"""The studies' sections of results.md, read from docs/studies/: the sweeps' studies (studies_section; `python -m
ponder study DIR --to docs/studies/NAME.json`) and the "network that thinks" settings (think_section;
docs/studies/think.json, written by `python -m bench.think_measure --collect runs`), each setting against the marks
mnist-adaptive is held to, what it still lacks computed from its numbers."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from ..sweeps.study import study_markdown

THINK = "think.json"
# mnist-adaptive's marks for a network that thinks: (key in a setting's summary, what, mark, strict, every seed's
# paired 95 % interval above 0 too, the value's format). A mark is met by the mean over the seeds: mean ≥ mark
# (> mark where strict), and for a difference each seed's interval above 0.
THINK_MARKS = (("accuracy", "accuracy", 0.99, False, False, ".4f"),
               ("std_en", "E[n] std", 1.5, False, False, ".2f"),
               ("wrong_minus_right_en", "wrong − right E[n]", 0.5, False, False, "+.2f"),
               ("q_minus_confidence", "Q-exit − confidence", 0.002, False, True, "+.4f"),
               ("q_minus_fixed", "Q-exit − fixed depth", 0.0, True, True, "+.4f"),
               ("rot_q_minus_confidence", "rot 45°: Q-exit − confidence", 0.0, True, True, "+.4f"))


def studies_section(studies: dict) -> list:
    """What each study of docs/studies/ measured (ponder.sweeps.study): per setting, mean ± std (min to max) over seeds."""
    if not studies:
        return []
    lines = ["## What makes halting pay: the studies", "",
             "Each row is one setting trained with several seeds (`python -m ponder sweep ... --seeds 0,1,2,3,4`, then "
             "`python -m ponder study DIR --to docs/studies/NAME.json`), measured on the full test set. The first "
             "table: the halting policies at equal steps (sampled, Q-exit, confidence exit, fixed depth; operating "
             "points chosen on the validation set), their differences with a 95 % interval over the seeds; studies "
             "measured before Q-exit was measured show only the sampled policy's differences. The second: accuracy "
             "(sampled halting), mean E[n] and its std over the inputs, mean E[n] − settle step, and for parity "
             "hard − easy E[n] and 'needed on hard' (the hard vectors' accuracy under the learned halting minus their "
             "accuracy at a fixed depth equal to the easy vectors' mean E[n]). A setting with fewer than 5 seeds is "
             "named under its table.", ""]
    for name, s in studies.items():
        lines += study_markdown(s, title=name).splitlines() + [""]
    return lines


def load_think(folder) -> Optional[dict]:
    """docs/studies/think.json, or None when there is none (or it is not the settings file)."""
    f = Path(folder) / THINK
    try:
        d = json.loads(f.read_text())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) and d.get("kind") == "think" else None


def think_marks(setting: dict) -> list:
    """[(what, met, shortfall text)] of one setting against THINK_MARKS, from its summary (mean over the seeds and,
    for a difference, in how many seeds its interval lies above 0)."""
    s, n = setting["summary"], len(setting["seeds"])
    out = []
    for key, what, mark, strict, intervals, fmt in THINK_MARKS:
        v = s[key]
        ok = v["mean"] > mark if strict else v["mean"] >= mark
        needs = f"{'>' if strict else '≥'} {mark:g}"
        text = f"{what} {v['mean']:{fmt}} (needs {needs})"
        if intervals:
            ok = ok and v["above"] == n
            text = f"{what} {v['mean']:{fmt}}, {v['above']} of {n} intervals above 0 (needs {needs}, all above)"
        out.append((what, ok, text))
    return out


def _pm(v: dict, digits: int, sign: str = "") -> str:
    return f"{v['mean']:{sign}.{digits}f} ± {v['std']:.{digits}f}"


def _diff(v: dict) -> str:
    return f"{_pm(v, 4, '+')} ({v['above']} / {v['below']})"


def closest(settings: list) -> dict:
    """The setting closest by marks met: the most marks met, then the highest Q-exit − confidence exit."""
    return max(settings, key=lambda st: (sum(ok for _, ok, _ in think_marks(st)), st["summary"]["q_minus_confidence"]["mean"]))


def think_section(think: Optional[dict]) -> list:
    """'A network that thinks: the settings tried': one row per setting of docs/studies/think.json with its key
    numbers (mean ± std over the seeds) and what it still lacks against mnist-adaptive's marks."""
    if not think or not think.get("settings"):
        return []
    settings = think["settings"]
    lines = ["## A network that thinks: the settings tried", "",
             f"Each setting trained with 5 seeds on one CPU core (its command below), measured by `{think['measured_by']}` "
             "(docs/findings.md §10–11): accuracy with the halt sampled from p, E[n] (mean over the test digits, and its "
             "std over them), wrong − right E[n]; then the rules at the learned halting's own mean steps (\"at steps\"), "
             "their knobs matched on the 5,000 validation digits and scored on the 10,000 test digits: Q-exit (stop when "
             "Σ_{j≤n} p_j ≥ q), the λ-exit (λ_n ≥ t), a confidence exit and a fixed depth, the differences with paired "
             "bootstrap 95 % intervals, \"(a / b)\": in how many seeds the interval lies above 0 / below 0; on digits "
             "rotated 45° the knobs matched on rotated validation digits. Cells: mean ± std over the seeds. The marks "
             "are `mnist-adaptive`'s: " + "; ".join(
                 f"{what} {'>' if strict else '≥'} {mark:g}{' with every seed' + chr(39) + 's interval above 0' if iv else ''}"
                 for _, what, mark, strict, iv, _ in THINK_MARKS) + ", each on the mean over the seeds. "
             f"Gathered into docs/studies/think.json by `{think['collected_by']}`.", "",
             "| setting | what it changes | seeds | accuracy | E[n] (std over digits) | wrong − right E[n] | at steps | "
             "Q-exit / confidence / fixed | Q − confidence (above / below 0) | Q − fixed (above / below 0) | "
             "λ-exit − confidence (above / below 0) | rot 45°: Q − confidence (above / below 0) | marks met | "
             "what is still short |", "|" + "---|" * 14]
    for st in settings:
        s, mk = st["summary"], think_marks(st)
        met = [w for w, ok, _ in mk if ok]
        short = "; ".join(t for _, ok, t in mk if not ok) or "nothing: every mark met"
        lines.append(
            f"| {st['name']} | {st['what']} | {len(st['seeds'])} | {_pm(s['accuracy'], 4)} | {_pm(s['mean_en'], 2)} "
            f"({_pm(s['std_en'], 2)}) | {_pm(s['wrong_minus_right_en'], 2, '+')} | {_pm(s['at_steps'], 2)} | "
            f"{s['learned_q']['mean']:.4f} / {s['confidence_exit']['mean']:.4f} / {s['fixed_depth']['mean']:.4f} | "
            f"{_diff(s['q_minus_confidence'])} | {_diff(s['q_minus_fixed'])} | {_diff(s['lambda_minus_confidence'])} | "
            f"{_diff(s['rot_q_minus_confidence'])} | {len(met)} of {len(mk)}{' (' + ', '.join(met) + ')' if met else ''} | "
            f"{short} |")
    best = closest(settings)
    b, n_met = best["summary"], sum(ok for _, ok, _ in think_marks(best))
    every = [f"`{st['name']}`" for st in settings if all(ok for _, ok, _ in think_marks(st))]
    nearest = max(settings, key=lambda st: st["summary"]["q_minus_confidence"]["mean"])
    n = nearest["summary"]["q_minus_confidence"]
    also = ("" if nearest is best else
            f" By Q-exit − confidence exit alone `{nearest['name']}` comes nearer, {_pm(n, 4, '+')}, meeting "
            f"{sum(ok for _, ok, _ in think_marks(nearest))} of {len(THINK_MARKS)} marks.")
    verdict = (f"Meeting every mark: {', '.join(every)}." if every else
               f"**No setting met the marks.** The closest by marks met, `{best['name']}` ({n_met} of "
               f"{len(THINK_MARKS)} marks met; of the settings meeting as many, the highest Q-exit − confidence exit), "
               f"has Q-exit {_pm(b['q_minus_confidence'], 4, '+')} against the confidence exit at its "
               f"{b['at_steps']['mean']:.2f} mean steps ({b['q_minus_confidence']['above']} of {len(best['seeds'])} "
               f"intervals above 0) at accuracy {b['accuracy']['mean']:.4f}.{also} The row reader `mnist-adaptive` "
               "stays shipped as the best reached.")
    lines += ["", verdict, ""]
    kept = [st["name"] for st in settings if st.get("per_seed") is None]
    if kept:
        lines += [f"Per-seed measurements were not kept for {', '.join(kept)}: their numbers are the rounded cells of "
                  "docs/findings.md's tables (the others' per-seed numbers are in docs/studies/think.json).", ""]
    if think.get("not_run"):
        lines += ["In `bench/think_queue.sh` but not trained: " + ", ".join(f"`{s['name']}` ({s['what']})"
                                                                         for s in think["not_run"]) + ".", ""]
    lines += ["The commands (each followed by `" + think["measured_by"] + "`):", ""]
    lines += [f"- {st['name']}: `{st['command']}`" for st in settings]
    return lines + [""]
