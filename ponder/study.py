"""A study: sweeps' settings compared by whether their thought pays, over seeds. `python -m ponder study DIR [DIR ...]`
measures every completed trial of the sweep folders (one task) on its full test set
(ponder.analysis.unroll.measure_test), writes each trial's pays() numbers into its card, and summarises per
setting (the config fields of LABEL_KEYS and the grid values; the seeds pooled) the mean, spread and range over
seeds of ponder.analysis.pays.KEYS and the mean per-step accuracy of each named group (parity's easy / hard,
MNIST's quartiles of E[n]). One folder gets DIR/study.json and DIR/study.md; `--to` writes the JSON where
reproduce reads it (docs/studies/NAME.json)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np

from .analysis.pays import over_seeds, pays
from .analysis.unroll import measure_test
from .config import ConfigError
from .lifecycle import card_metrics
from .journal import atomic_write_bytes, atomic_write_json
from .store.card import CheckpointError, one_line, update_card
from .store.checkpoint import load_checkpoint
from .store.record import RunRecord
from .sweep_record import SweepError, read_sweep, trial_folder
from .tasks import get_task

STUDY, STUDY_TABLE = "study.json", "study.md"
CURVE_GROUPS = ("easy", "hard", "E[n] Q1", "E[n] Q4")      # the per-step accuracy curves a study keeps


def measure_trial(folder: Path, data=None, device: str = "cpu") -> dict:
    """One trial's full test measurement; its card gets the card metrics (with pays). Returns
    {pays, curves: {group: per-step accuracy}}."""
    ck = load_checkpoint(folder, device=device)
    cfg = ck.record.config
    res = measure_test(ck.model, cfg, data)
    update_card(folder, metrics=card_metrics(res))
    return {"pays": pays(res), "curves": {g: c for g, c in res.per_step_accuracy_by_group.items() if g in CURVE_GROUPS}}


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


LABEL_KEYS = ("regulariser", "lambda_p", "beta", "hidden", "lambda_input", "epochs", "batch_size", "lr",
              "reader", "rows_per_step", "parity_preset")    # the config fields a setting is named by


def study(folders, data_dir: Optional[str] = None, device: str = "cpu", log=print) -> dict:
    """Measure the completed trials of the sweeps in `folders` (one task) and summarise them per setting (see the
    module). A setting: the config fields of LABEL_KEYS its task reads, and its grid values; its seeds are pooled."""
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
        out["settings"].append({"setting": p["setting"], "seeds": [tr["seed"] for tr in p["trials"]],
                                "over_seeds": over_seeds([tr["pays"] for tr in p["trials"]]),
                                "curves": curves, "trials": [{k: tr[k] for k in ("name", "seed", "pays")}
                                                             for tr in p["trials"]]})
    if len(folders) == 1:
        atomic_write_json(folders[0] / STUDY, out)
        atomic_write_bytes(folders[0] / STUDY_TABLE, study_markdown(out).encode())
    return out


# ----------------------------------------------------------------------------- the tables

COLUMNS = (("accuracy", "accuracy", 4), ("mean_steps", "E[n]", 2), ("en_std", "E[n] std", 2),
           ("learned_minus_confidence", "learned − confidence", 4), ("learned_minus_fixed", "learned − fixed", 4),
           ("learned_q_minus_confidence", "Q-exit − confidence", 4), ("sampled_minus_learned_q", "sampled − Q-exit", 4),
           ("expected_minus_settle", "E[n] − settle", 2),
           ("confidence_minus_settle", "confidence exit − settle", 2), ("hard_minus_easy", "hard − easy E[n]", 2),
           ("needed", "needed on hard", 4))


def _cell(s: Optional[dict], digits: int) -> str:
    if s is None:
        return "-"
    if s["n"] == 1:
        return f"{s['mean']:.{digits}f}"
    return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f} ({s['min']:.{digits}f} to {s['max']:.{digits}f})"


def _words(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items())


def study_markdown(s: dict, title: Optional[str] = None) -> str:
    """A study's table: what its settings share, then one row per setting (the fields in which they differ),
    mean ± std (min to max) over its seeds; then the per-step accuracy curves by group."""
    settings = s["settings"]
    fields = list(dict.fromkeys(k for st in settings for k in st["setting"]))
    same = {k: settings[0]["setting"].get(k) for k in fields
            if len({json.dumps(st["setting"].get(k)) for st in settings}) == 1}
    varying = [k for k in fields if k not in same]
    used = [c for c in COLUMNS if any(st["over_seeds"].get(c[0]) for st in settings)]
    lines = [f"### {title or ', '.join(s['folders'])}", "", f"{s['task']}; every setting: {_words(same)}.", "",
             "| setting | seeds | " + " | ".join(name for _, name, _ in used) + " |",
             "|---|---|" + "---|" * len(used)]
    label = {id(st): _words({k: st["setting"].get(k) for k in varying}) or "-" for st in settings}
    for st in settings:
        cells = [_cell(st["over_seeds"].get(k), d) for k, _, d in used]
        lines.append(f"| {label[id(st)]} | {', '.join(map(str, st['seeds']))} | " + " | ".join(cells) + " |")
    groups = [g for g in CURVE_GROUPS if any(g in st["curves"] for st in settings)]
    if groups:
        lines += ["", "Per-step accuracy by group, mean over seeds (step 1, 2, …):", ""]
        for st in settings:
            for g in groups:
                if g in st["curves"]:
                    lines.append(f"- {label[id(st)]} · {g}: " + " ".join(f"{a:.3f}" for a in st["curves"][g]))
    return "\n".join(lines) + "\n"


def load_studies(folder) -> dict:
    """{name: study} of the study JSON files in `folder` (docs/studies), by file name; {} when there are none."""
    out = {}
    for f in sorted(Path(folder).glob("*.json")) if Path(folder).is_dir() else []:
        try:
            out[f.stem] = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
    return out
