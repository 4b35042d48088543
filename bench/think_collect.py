"""The "network that thinks" settings gathered into one small file, docs/studies/think.json, which
`python -m ponder reproduce` renders in docs/results.md ("A network that thinks: the settings tried"):

    python -m bench.think_measure --collect runs --to docs/studies/think.json

Per setting of bench/think_queue.sh (in its order): its name, what it changes (WHAT), its command line (the queue's
line with $R, $E2 and $SEEDS expanded), its seeds, and the numbers of docs/findings.md §10-11's tables: per seed and
mean ± std over the seeds, the paired intervals counted above / below 0. Read from runs/NAME/measure.json (written by
`python -m bench.think_measure runs/NAME --json ...`) where it exists; otherwise from the setting's row of the
findings' tables (4 or 2 decimals, no per-seed numbers) and the file says so. Every setting found in both is checked
against the findings row; a setting in neither is listed as not run."""
from __future__ import annotations

import json
import re
from pathlib import Path

from bench.think_table import table

# what each setting changes, in words (docs/findings.md §10-11)
BASE = ("recall step (one weight-tied 3×3 conv again each step, the input re-injected), N 8, 0.6 epoch, "
        "deep-supervised answers")
WHAT = {
    "recall-ds-exit": f"{BASE}; λ trained towards 'the answer at step n is right and stays right' (exit target), "
                      "a linear head on the pooled state",
    "recall-ds-exit-conf": "recall-ds-exit with λ also reading the answer's top probability and its change "
                           "(--lambda-input confidence)",
    "recall-ds-kl": "recall-ds-exit's step and answers; the paper's halting term Σ p_n L_n (step losses detached) + 0.01·KL(p ‖ p_G)",
    "rows-ds-exit": "the row reader (2 rows a step, N 20, 1 epoch), deep-supervised answers, the exit target and the "
                    "confidence features",
    "recall-ds-exit-conf-e2": "recall-ds-exit-conf trained 2 epochs (860 updates)",
    "recall-ds-acc": "recall-ds-exit's step and answers; accuracy minus compute −Σ p_n (1[ŷ_n = y] − 0.002·n), correctness detached, no KL",
    "recall-ds-acc-klr": "recall-ds-acc plus the mass-covering 0.01·KL(p_G ‖ p)",
    "recall-ds-exit-stab-mlp": "recall-ds-exit with λ also reading the stability features (logit confidence, the "
                               "answer's patience, the state's change) through a 16-unit tanh mlp",
    "recall-ds-exit-conf-mlp": "recall-ds-exit with the two confidence features through the tanh mlp",
    "recall-ds-exit-stab": "recall-ds-exit with the stability features, linear head",
    "recall-ds-acc-warm": "recall-ds-acc with the halting term off for the first half of the updates",
    "recall-ds-acc-warm-stab-mlp": "recall-ds-acc-warm with the stability features through the tanh mlp",
    "recall-ds-exit-stab-mlponly": "the exit target with λ from the stability features' mlp alone (the head on the "
                                   "state unread, so the halting trains nothing in the step function)",
    "recall-ds-exit-stab-mlp-e2": "recall-ds-exit-stab-mlp trained 2 epochs",
}
DIFFS = {"q_minus_confidence": "learned_q-confidence_exit", "q_minus_fixed": "learned_q-fixed_depth",
         "lambda_minus_confidence": "lambda_exit-confidence_exit"}
# the findings table's columns after the setting's name, in order
COLUMNS = ("seeds", "accuracy", "mean_en", "std_en", "wrong_minus_right_en", "at_steps", "learned_q", "confidence_exit",
           "fixed_depth", "q_minus_confidence", "q_minus_fixed", "lambda_minus_confidence", "rot_at_steps",
           "rot_q_minus_confidence")


def queue_commands(queue: Path, seeds: str = "0,1,2,3,4") -> dict:
    """{name: command line} of each `setting NAME ARGS` line of bench/think_queue.sh, its variables expanded."""
    text = re.sub(r"\\\n\s*", "", queue.read_text())
    r = re.search(r'^R="([^"]*)"', text, re.M).group(1).replace("$SEEDS", seeds)
    e2 = r.replace("--epochs 0.6", "--epochs 2")             # the queue's E2=${R/--epochs 0.6/--epochs 2}
    out = {}
    for name, args in re.findall(r"^setting (\S+) (.*)$", text, re.M):
        args = args.replace("$E2", e2).replace("$R", r).replace('"$SEEDS"', seeds)
        out[name] = f"python -m ponder sweep --out runs/{name} {args.strip()}"
    return out


def _cell(text: str) -> dict:
    """'-0.0446 ± 0.0044 (0 / 5)' -> {mean, std, above, below}; '5' -> 5."""
    m = re.fullmatch(r"(-?[\d.]+) ± ([\d.]+)(?: \((\d+) / (\d+)\))?", text.strip())
    if m is None:
        return int(text)
    out = {"mean": float(m[1]), "std": float(m[2])}
    return out if m[3] is None else {**out, "above": int(m[3]), "below": int(m[4])}


def findings_rows(findings: Path, names) -> dict:
    """{name: (the row's text after the name, {column: cell})} of the findings' "at the learned halting's own mean
    steps" tables (their rows have 15 cells), for the settings in `names`."""
    out = {}
    for line in findings.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 15 and cells[0] in names:
            out[cells[0]] = (line.split("|", 2)[2].strip(), dict(zip(COLUMNS, map(_cell, cells[1:]))))
    return out


def _seed_row(r: dict) -> dict:
    c, ro = r["clean"], r["rotated"]
    diff = lambda x, k: {"diff": x[k]["diff"], "interval": x[k]["interval"]}     # noqa: E731
    return {"seed": int(re.search(r"(\d+)$", r["run"])[1]), "accuracy": r["accuracy"], "mean_en": r["mean_en"],
            "std_en": r["std_en"], "wrong_minus_right_en": r["wrong_minus_right_en"], "at_steps": c["target_steps"],
            **{k: c[k]["accuracy"] for k in ("learned_q", "confidence_exit", "fixed_depth")},
            **{k: diff(c, v) for k, v in DIFFS.items()},
            "rot_at_steps": ro["target_steps"], "rot_q_minus_confidence": diff(ro, DIFFS["q_minus_confidence"])}


def from_measure(d: dict) -> tuple:
    """(per-seed rows, summary {column: {mean, std[, above, below]}}) of one measure.json."""
    s, c, ro = d["summary"], d["summary"]["clean"], d["summary"]["rotated"]
    ab = lambda x, k: {**x[k], "above": x["intervals_above_0"][k], "below": x["intervals_below_0"][k]}   # noqa: E731
    summ = {k: s[k] for k in ("accuracy", "mean_en", "std_en", "wrong_minus_right_en")}
    summ.update({"at_steps": c["target_steps"], **{k: c[k] for k in ("learned_q", "confidence_exit", "fixed_depth")},
                 **{k: ab(c, v) for k, v in DIFFS.items()}, "rot_at_steps": ro["target_steps"],
                 "rot_q_minus_confidence": ab(ro, DIFFS["q_minus_confidence"])})
    return [_seed_row(r) for r in d["runs"]], summ


def collect(runs: Path, queue: Path, findings: Path, log=print) -> dict:
    """think.json's content; logs whether each measured setting's row agrees with the findings' row."""
    commands = queue_commands(queue)
    rows = findings_rows(findings, commands)
    settings, not_run = [], []
    for name, command in commands.items():
        f = runs / name / "measure.json"
        base = {"name": name, "what": WHAT.get(name, ""), "command": command}
        if f.exists():
            per_seed, summ = from_measure(json.loads(f.read_text()))
            mine = table([f]).splitlines()[-1].split("|", 2)[2].strip()
            if name in rows:
                log(f"{name}: {'agrees with' if mine == rows[name][0] else 'DIFFERS from'} the findings' row")
            settings.append({**base, "seeds": [r["seed"] for r in per_seed], "source": f"{runs.name}/{name}/measure.json",
                             "summary": summ, "per_seed": per_seed})
        elif name in rows:
            summ = dict(rows[name][1])
            n = summ.pop("seeds")
            log(f"{name}: from the findings' row (no {f})")
            settings.append({**base, "seeds": list(range(n)), "source": f"{findings.name} table (rounded; the "
                             "per-seed measure.json was not kept)", "summary": summ, "per_seed": None})
        else:
            not_run.append({"name": name, "what": WHAT.get(name, ""), "command": command})
    return {"kind": "think", "measured_by": "python -m bench.think_measure runs/NAME --json runs/NAME/measure.json",
            "collected_by": "python -m bench.think_measure --collect runs --to docs/studies/think.json",
            "settings": settings, "not_run": not_run}
