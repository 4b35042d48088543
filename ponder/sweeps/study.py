"""A study: sweeps' settings compared by whether their thought pays, over seeds. `python -m ponder study DIR [DIR ...]`
measures every completed trial of the sweep folders (one task) on its full test set
(ponder.analysis.unroll.measure_test: the halting policies at equal steps, operating points chosen on the validation
set), writes each trial's pays() numbers into its card, and summarises per setting (the config fields of LABEL_KEYS
and the grid values; the seeds pooled) the mean, spread, range and 95 % interval over seeds of
ponder.analysis.pays.KEYS (paired for the policies' differences: each seed measures both on the same test items),
and the mean per-step accuracy of each named group (parity's easy / hard, MNIST's quartiles of E[n]). A setting with
fewer than MIN_SEEDS seeds is named as such. One folder gets DIR/study.json and DIR/study.md; `--to` writes the JSON where
reproduce reads it (docs/studies/NAME.json)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np

from ..analysis.pays import MARKS, choose_setting, over_seeds, pays, seed_interval, seed_rank
from ..analysis.unroll import measure_test
from ..config import ConfigError
from ..training.lifecycle import card_metrics
from ..journal import atomic_write_bytes, atomic_write_json
from ..store.card import CheckpointError, one_line, read_card, update_card
from ..store.checkpoint import load_checkpoint
from ..store.record import RunRecord
from ..store.runs import ASSETS
from .record import SweepError, read_sweep, trial_folder
from ..tasks import get_task

STUDY, STUDY_TABLE = "study.json", "study.md"
RANKED = ("accuracy", "learned_q_minus_confidence", "learned_q_minus_fixed")   # where a shipped seed's rank is said
MIN_SEEDS = 5                   # fewer seeds than this: a setting's spread and intervals say little
CURVE_GROUPS = ("easy", "hard", "E[n] Q1", "E[n] Q4")      # the per-step accuracy curves a study keeps


def measure_trial(folder: Path, data=None, device: str = "cpu") -> dict:
    """One trial's full test measurement; its card gets the card metrics (with pays). Returns
    {pays, curves: {group: per-step accuracy}, tuned_on, ci95: the policies' paired bootstrap intervals over its
    test items}."""
    ck = load_checkpoint(folder, device=device)
    cfg = ck.record.config
    res = measure_test(ck.model, cfg, data)
    update_card(folder, metrics=card_metrics(res))
    at = res.baselines["at_equal_steps"]
    return {"pays": pays(res), "curves": {g: c for g, c in res.per_step_accuracy_by_group.items() if g in CURVE_GROUPS},
            "tuned_on": at["tuned_on"], "ci95": at["ci95"], "n": res.n,
            "validation": pays(res.validation) if res.validation is not None else None}


def check_trial(sw, t) -> Path:
    """The run folder of a completed trial, once its weights load and its card's config is the trial's (a study
    rewrites that card, and only that one). SweepError (one line) otherwise."""
    folder = trial_folder(sw, t)               # a folder of its own directly in the sweep folder, no link
    try:
        ck = load_checkpoint(folder)
    except CheckpointError as e:
        raise SweepError(f"trial {t.name} of {sw.folder}: {one_line(e)}") from None
    if ck.record.train != t.config.to_dict():
        raise SweepError(f"{folder}: its card's config is not the one {sw.folder / 'sweep.json'} records for trial "
                         f"{t.name}: not measured")
    return folder


def shipped_task(name: str) -> str:
    """The task of the shipped model `name` (assets/NAME/run.json). ConfigError when it cannot be read."""
    try:
        return read_card(ASSETS / name)["train"]["task"]
    except CheckpointError as e:
        raise ConfigError(f"--ship {name}: its shipped card cannot be read ({one_line(e)})") from None


LABEL_KEYS = ("regulariser", "lambda_p", "beta", "hidden", "lambda_input", "epochs", "batch_size", "lr",
              "reader", "rows_per_step", "parity_preset")    # the config fields a setting is named by


def study(folders, data_dir: Optional[str] = None, device: str = "cpu", log=print, ship: Optional[str] = None) -> dict:
    """Measure the completed trials of the sweeps in `folders` (one task) and summarise them per setting (see the
    module). A setting: the config fields of LABEL_KEYS its task reads, and its grid values; its seeds are pooled.
    ship: a model name with marks (ponder.analysis.pays.MARKS): `ship` in the result is the setting chosen for it on
    the validation set (choose_setting) and where its shipped seed ranks among its seeds on the test set."""
    if ship is not None and ship not in MARKS:
        raise ConfigError(f"--ship {ship}: no marks to choose it by (models with marks: {', '.join(MARKS)})")
    folders = [Path(f) for f in ([folders] if isinstance(folders, (str, Path)) else folders)]
    if len({f.resolve() for f in folders}) < len(folders):
        raise ConfigError("a sweep folder is given twice: its trials would count twice among the seeds")
    sweeps = []
    for folder in folders:
        sw = read_sweep(folder)                # SweepError (a ConfigError): one line naming the file
        if sw is None:
            raise ConfigError(f"{folder} holds no sweep (no {folder / 'sweep.json'}): give a folder `python -m ponder "
                              f"sweep` wrote")
        sweeps.append(sw)
    tasks = {sw.plan.task for sw in sweeps}
    if len(tasks) != 1:
        raise ConfigError(f"a study compares sweeps of one task, got {', '.join(sorted(tasks))}")
    task = get_task(tasks.pop())
    if ship is not None and (shipped := shipped_task(ship)) != task.name:
        raise ConfigError(f"--ship {ship}: a {shipped} model, and these sweeps trained {task.name} models")
    keys = [k for k in LABEL_KEYS if k in task.reads or k not in ("reader", "rows_per_step", "parity_preset")]
    todo = [(sw, t, check_trial(sw, t)) for sw in sweeps for t in sw.trials if t.status == "completed"]
    data, points = None, {}                    # every trial checked above: nothing is written before that
    for sw, t, run in todo:
        if task.uses_data and data is None:
            data = task.load_data(data_dir)
        m = measure_trial(run, data, device)
        cfg = t.config.to_dict()
        setting = {k: cfg[k] for k in keys}
        setting.update({k: v for k, v in t.values.items() if k != "seed"})
        p = points.setdefault(json.dumps(setting, sort_keys=True), {"setting": setting, "trials": []})
        p["trials"].append({"name": f"{sw.folder.name}/{t.name}", "seed": t.values.get("seed"), **m})
        log(f"{sw.folder.name}/{t.name}: " + ", ".join(f"{k} {v:.4f}" for k, v in m["pays"].items() if v is not None))
    out = {"folders": [f.name for f in folders], "task": task.name, "settings": []}
    for p in points.values():
        curves = {}
        for g in CURVE_GROUPS:
            cs = [tr["curves"][g] for tr in p["trials"] if g in tr["curves"]]
            if cs:
                curves[g] = np.mean(np.array(cs, np.float64), 0).tolist()      # [N] mean over seeds
        val = [tr["validation"] for tr in p["trials"] if tr.get("validation")]
        out["settings"].append({"setting": p["setting"], "seeds": [tr["seed"] for tr in p["trials"]],
                                "over_seeds": over_seeds([tr["pays"] for tr in p["trials"]]),
                                **({"validation_over_seeds": over_seeds(val)} if val else {}),
                                "curves": curves, "trials": [{k: tr[k] for k in ("name", "seed", "pays", "n", "tuned_on",
                                                                                 "ci95", "validation")}
                                                             for tr in p["trials"]]})
    if ship is not None and (chosen := choose_setting(out["settings"], ship)) is not None:
        trials = out["settings"][chosen["index"]]["trials"]
        out["ship"] = {"name": ship, **chosen, "rank": {k: seed_rank(trials, chosen["seed"], k) for k in RANKED}}
    if len(folders) == 1:
        atomic_write_json(folders[0] / STUDY, out)
        atomic_write_bytes(folders[0] / STUDY_TABLE, study_markdown(out).encode())
    return out


# ----------------------------------------------------------------------------- the tables

POLICIES = (("learned", "sampled", 4), ("learned_q", "Q-exit", 4), ("confidence_exit", "confidence exit", 4),
            ("fixed_depth", "fixed depth", 4), ("learned_q_minus_confidence", "Q-exit − confidence", 4),
            ("learned_q_minus_fixed", "Q-exit − fixed depth", 4), ("sampled_minus_learned_q", "sampled − Q-exit", 4),
            ("learned_minus_confidence", "sampled − confidence", 4), ("learned_minus_fixed", "sampled − fixed depth", 4))
COLUMNS = (("accuracy", "accuracy", 4), ("mean_steps", "E[n]", 2), ("en_std", "E[n] std", 2),
           ("expected_minus_settle", "E[n] − settle", 2),
           ("confidence_minus_settle", "confidence exit − settle", 2), ("hard_minus_easy", "hard − easy E[n]", 2),
           ("needed", "needed on hard", 4))


def _cell(s: Optional[dict], digits: int, key: str = "") -> str:
    """mean ± std (min to max) over seeds; a difference: mean [95 % interval over seeds] (min to max)."""
    if s is None:
        return "-"
    f = lambda v: f"{v:+.{digits}f}" if "_minus_" in key else f"{v:.{digits}f}"      # noqa: E731
    if s["n"] == 1:
        return f(s["mean"])
    span = f"({f(s['min'])} to {f(s['max'])})"
    if "_minus_" in key:
        lo, hi = s.get("ci95") or seed_interval(s)
        return f"{f(s['mean'])} [{f(lo)}, {f(hi)}] {span}"
    return f"{f(s['mean'])} ± {s['std']:.{digits}f} {span}"


def _words(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items())


def _table(settings: list, label: dict, columns) -> list:
    used = [c for c in columns if any(st["over_seeds"].get(c[0]) for st in settings)]
    if not used:
        return []
    lines = ["| setting | seeds | " + " | ".join(name for _, name, _ in used) + " |", "|---|---|" + "---|" * len(used)]
    for st in settings:
        cells = [_cell(st["over_seeds"].get(k), d, k) for k, _, d in used]
        lines.append(f"| {label[id(st)]} | {', '.join(map(str, st['seeds']))} | " + " | ".join(cells) + " |")
    return lines + [""]


def study_markdown(s: dict, title: Optional[str] = None) -> str:
    """A study's tables: what its settings share, then one row per setting (the fields in which they differ) of the
    halting policies at equal steps and of the other measures, over its seeds; then the per-step accuracy curves
    by group."""
    settings = s["settings"]
    fields = list(dict.fromkeys(k for st in settings for k in st["setting"]))
    same = {k: settings[0]["setting"].get(k) for k in fields
            if len({json.dumps(st["setting"].get(k)) for st in settings}) == 1}
    varying = [k for k in fields if k not in same]
    label = {id(st): _words({k: st["setting"].get(k) for k in varying}) or "-" for st in settings}
    lines = [f"### {title or ', '.join(s['folders'])}", "", f"{s['task']}; every setting: {_words(same)}.", ""]
    policies = _table(settings, label, POLICIES)
    if policies:
        sets = {tr["tuned_on"]["set"] for st in settings for tr in st.get("trials", []) if tr.get("tuned_on")}
        where = {frozenset({"validation"}): "the validation set", frozenset({"test"}): "the test set (the task has no "
                 "validation set)", frozenset(): "a set this study did not record"}.get(
                     frozenset(sets), "the validation set where the task has one (each trial's tuned_on)")
        lines += [f"The halting policies at equal steps (test accuracy; operating points chosen on {where} to spend "
                  "the sampled policy's E[n]): mean ± std (min to max) over the seeds; a difference: mean [95 % "
                  "interval over the seeds, Student's t, paired: each seed measures both policies on the same test "
                  "items] (min to max).", ""] + policies
    other = _table(settings, label, COLUMNS)
    if other:
        lines += ["The other measures: mean ± std (min to max) over the seeds; a difference (E[n] − settle, hard − "
                  "easy): mean [95 % interval over the seeds] (min to max).", ""] + other
    if sh := s.get("ship"):
        ranks = "; ".join(f"{k} {r[0]} of {r[1]}" for k, r in sh["rank"].items() if r)
        lines += [f"Chosen on the validation set to ship as {sh['name']}: {label[id(settings[sh['index']])]} (its means "
                  f"over seeds there meet {len(sh['met'])} of the {sh['of']} marks: {', '.join(sh['met']) or 'none'}); "
                  f"its seed {sh['seed']} ships (the default seed, not the best), ranked among its seeds on the test "
                  f"set (1: highest): {ranks or '-'}.", ""]
    few = [label[id(st)] for st in settings if len(st["seeds"]) < MIN_SEEDS]
    if few:
        lines += [f"Fewer than {MIN_SEEDS} seeds (their spread and intervals say little): {'; '.join(few)}.", ""]
    groups = [g for g in CURVE_GROUPS if any(g in st["curves"] for st in settings)]
    if groups:
        lines += ["Per-step accuracy by group, mean over seeds (step 1, 2, …):", ""]
        for st in settings:
            for g in groups:
                if g in st["curves"]:
                    lines.append(f"- {label[id(st)]} · {g}: " + " ".join(f"{a:.3f}" for a in st["curves"][g]))
    return "\n".join(lines).rstrip("\n") + "\n"


def load_studies(folder) -> dict:
    """{name: study} of the study JSON files in `folder` (docs/studies), by file name; {} when there are none. A file
    with a "kind" other than "study" (think.json: ponder.cli.results_studies) is not a study."""
    out = {}
    for f in sorted(Path(folder).glob("*.json")) if Path(folder).is_dir() else []:
        try:
            d = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(d, dict) or d.get("kind", "study") == "study":
            out[f.stem] = d
    return out
