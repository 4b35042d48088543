"""The "network that thinks" settings' tables for docs/results.md, from measure.json files (bench.think_measure
writes them, bench.think_collect gathers them): one module both read, so neither imports the other."""
from __future__ import annotations

import json
from pathlib import Path

BUDGETS = (1.5, 2.0, 3.0)       # also at these mean steps (clean digits): the rules along the frontier


def _pm(d, digits=4):
    return f"{d['mean']:.{digits}f} ± {d['std']:.{digits}f}"


def table(files) -> str:
    """docs/results.md's table rows from measure.json files (mean ± std over the seeds; intervals: in how many
    seeds the paired 95 % interval lies above 0, and below 0)."""
    lines = ["| setting | seeds | accuracy (sampled) | E[n] | E[n] std | wrong − right E[n] | at steps | Q-exit | "
             "confidence | fixed | Q − confidence (above / below 0) | Q − fixed (above / below 0) | "
             "λ-exit − confidence (above / below 0) | rot 45°: at steps | rot 45°: Q − confidence (above / below 0) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for f in files:
        d = json.loads(Path(f).read_text())
        s, c, r = d["summary"], d["summary"]["clean"], d["summary"]["rotated"]
        ab = lambda x, k: f"{x['intervals_above_0'][k]} / {x['intervals_below_0'][k]}"   # noqa: E731
        lines.append(f"| {Path(f).parent.name} | {len(d['runs'])} | {_pm(s['accuracy'])} | {_pm(s['mean_en'], 2)} | "
                     f"{_pm(s['std_en'], 2)} | {_pm(s['wrong_minus_right_en'], 2)} | {_pm(c['target_steps'], 2)} | "
                     f"{_pm(c['learned_q'])} | {_pm(c['confidence_exit'])} | {_pm(c['fixed_depth'])} | "
                     f"{_pm(c['learned_q-confidence_exit'])} ({ab(c, 'learned_q-confidence_exit')}) | "
                     f"{_pm(c['learned_q-fixed_depth'])} ({ab(c, 'learned_q-fixed_depth')}) | "
                     f"{_pm(c['lambda_exit-confidence_exit'])} ({ab(c, 'lambda_exit-confidence_exit')}) | {_pm(r['target_steps'], 2)} | "
                     f"{_pm(r['learned_q-confidence_exit'])} ({ab(r, 'learned_q-confidence_exit')}) |")
    return "\n".join(lines)


def budget_table(files) -> str:
    """Q-exit − confidence exit and − fixed depth at the fixed budgets of mean steps (clean digits)."""
    lines = ["| setting | budget (mean steps) | Q-exit | confidence | fixed | Q − confidence (above / below 0) | "
             "Q − fixed (above / below 0) |", "|---|---|---|---|---|---|---|"]
    for f in files:
        s = json.loads(Path(f).read_text())["summary"]
        for b in BUDGETS:
            x = s[f"budget {b}"]
            lines.append(f"| {Path(f).parent.name} | {b} | {_pm(x['learned_q'])} | {_pm(x['confidence_exit'])} | "
                         f"{_pm(x['fixed_depth'])} | {_pm(x['learned_q-confidence_exit'])} ({x['intervals_above_0']['learned_q-confidence_exit']}"
                         f" / {x['intervals_below_0']['learned_q-confidence_exit']}) | {_pm(x['learned_q-fixed_depth'])} "
                         f"({x['intervals_above_0']['learned_q-fixed_depth']} / {x['intervals_below_0']['learned_q-fixed_depth']}) |")
    return "\n".join(lines)
