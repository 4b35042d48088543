"""results.md's section on the paper's parity experiment, read from docs/studies/parity_ladder.json (written by
`python -m bench.parity_ladder report --out runs/ladder --to docs/studies/parity_ladder.json`): each rung of the
ladder with its method and setting, how far validation accuracy got in how many updates, and its own answer on
held-out seen and unseen k (ponder.tasks.parity.experiment); what it says in words first."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from ..tasks.parity.experiment import SOLVED, verdict

LADDER = "parity_ladder.json"


def load_ladder(folder) -> Optional[dict]:
    """The rungs of docs/studies/parity_ladder.json ({"kind": "ladder", "rungs": {name: rung}}), or None when there
    is none (or it is not a ladder report)."""
    try:
        d = json.loads((Path(folder) / LADDER).read_text())
    except (OSError, ValueError):
        return None
    rungs = d.get("rungs") if isinstance(d, dict) and d.get("kind") == "ladder" else None
    return rungs if isinstance(rungs, dict) and all(isinstance(v, dict) and "curve" in v for v in rungs.values()) else None


def _pct(v) -> str:
    return "–" if v is None else f"{v:.3f}"


def _setting(cfg: Optional[dict]) -> str:
    if not cfg:
        return "–"
    o = cfg.get("options") or {}
    method = {"repeat": f"repeat ρ={cfg['max_steps']}", "deep": f"deep sup. N={cfg['max_steps']}",
              "act": f"ACT τ={cfg['beta']:g}", "ponder": f"PonderNet λp={cfg['lambda_p']:g}"}[cfg.get("method", "ponder")]
    init = "Glorot init" if o.get("init") == "glorot" else "PyTorch init"
    clip = "no clip" if cfg.get("grad_clip", 1.0) >= 1e5 else f"clip {cfg.get('grad_clip', 1.0):g}"
    return f"{method}, {o.get('cell', 'gru')} {cfg['hidden']}, {o.get('layout', 'random')}, lr {cfg['lr']:g}, {init}, {clip}"


def ladder_section(ladder: Optional[dict]) -> list:
    if not ladder:
        return []
    done = {n: r["experiment"] for n, r in ladder.items() if r.get("experiment")}
    lines = ["## The paper's parity experiment: the ladder", "",
             verdict(done), "",
             f"Each rung is one run (seed 0) of `python -m bench.parity_ladder` (its docstring lists the settings: "
             f"batch 128, Adam at a constant learning rate, validation on 2,000 held-out vectors every 1,000 "
             f"updates); 'to {SOLVED:.2f}' is the first update whose validation accuracy reached {SOLVED:.2f}. "
             f"Seen / unseen: the run's own answer (PonderNet: a draw of its halting; ACT: its mean field; "
             f"Repeat-RNN and deep supervision: step N) on 4,000 held-out test vectors of the trained k and of the "
             f"k outside it, with the mean steps it took. A rung still training shows its latest validation.", "",
             "| rung | setting | status | updates | best val | to 0.98 | seen acc (steps) | unseen acc (steps) | "
             "train s |", "|---|---|---|---|---|---|---|---|---|"]
    for name, r in ladder.items():
        e = r.get("experiment") or {}
        seen, unseen = e.get("seen") or {}, e.get("unseen") or {}
        s = f"{_pct(seen.get('accuracy'))} ({seen['mean_steps']:.2f})" if seen else "–"
        u = f"{_pct(unseen.get('accuracy'))} ({unseen['mean_steps']:.2f})" if unseen else "–"
        secs = f"{r['seconds']:.0f}" if r.get("seconds") else "–"
        lines.append(f"| {name} | {_setting(r.get('config'))} | {r['status']} | {r['updates']:,} | "
                     f"{_pct(r.get('best'))} | {r.get('to_098') or 'never'} | {s} | {u} | {secs} |")
    return lines + [""] + frontier_table(done)


BUDGETS = (1, 2, 3, 5, 10, 20)            # the mean steps the frontier table shows (those <= a run's N)


def frontier_table(done: dict) -> list:
    """Each finished rung's exit rules at a few budgets: accuracy on the seen k at the mean steps chosen on the
    validation vectors (the test steps it then spent beside it)."""
    rows = [(n, pol, {r["budget"]: r["seen"] for r in e["frontier"] if r["policy"] == pol})
            for n, e in done.items() for pol in sorted({r["policy"] for r in e["frontier"]})]
    if not rows:
        return []
    lines = ["Accuracy on the seen k of each exit rule at a compute budget (mean steps chosen on the validation "
             "vectors, the test steps it spent in brackets):", "",
             "| rung | rule | " + " | ".join(f"{b} steps" for b in BUDGETS) + " |", "|---|---|" + "---|" * len(BUDGETS)]
    for n, pol, at in rows:
        cells = [f"{at[float(b)]['accuracy']:.3f} ({at[float(b)]['mean_steps']:.1f})" if float(b) in at else "–"
                 for b in BUDGETS]
        lines.append(f"| {n} | {pol.replace('_', ' ')} | " + " | ".join(cells) + " |")
    return lines + [""]
