"""Whether a model's thought pays: a few numbers per run from its test measurement
(ponder.analysis.unroll.measure_test, which holds ponder.analysis.equal_steps.worth_it), their mean and spread
over seeds, and the marks a shipped model is held to. The sweep table, `python -m ponder study`, the run
card and docs/results.md all read these.

Per run (pays):
    learned, fixed_depth, confidence_exit   accuracy of the sampled halting and of the two rules at its mean E[n]
                                            (operating points chosen on validation, ponder.analysis.equal_steps)
    learned_minus_confidence / _fixed       the sampled halting's lead over each (negative: behind)
    learned_q                               the same λ's used deterministically (Q-exit) at that compute
    learned_q_minus_confidence / _fixed     its lead over each rule; sampled_minus_learned_q: what sampling costs
    expected_minus_settle                   mean E[n] - settle step: steps pondered after the answer was right for good
    confidence_minus_settle                 the same for the confidence exit at equal mean steps (its exit step)
    en_std                                  std of E[n] over the test inputs (does the halting vary by input?)
    hard_minus_easy                         parity: mean E[n] on hard vectors minus on easy ones
    needed                                  parity: the hard vectors' accuracy under the learned halting minus
                                            their accuracy at a fixed depth equal to the easy vectors' mean E[n]
                                            (> 0: the extra steps on hard vectors change answers)
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from .metrics import TestMetrics

KEYS = ("accuracy", "mean_steps", "en_std", "learned", "fixed_depth", "confidence_exit", "learned_minus_confidence",
        "learned_minus_fixed", "learned_q", "learned_q_minus_confidence", "learned_q_minus_fixed",
        "sampled_minus_learned_q", "expected_minus_settle", "confidence_minus_settle", "hard_minus_easy", "needed")


def pays(res: TestMetrics) -> Optional[dict]:
    """The numbers above from one measure_test result; None when it has no baselines (a quick measurement
    without them). Keys a task lacks (parity's easy / hard) are None."""
    base = res.baselines
    if not base:
        return None
    at = base["at_equal_steps"]
    out = {k: None for k in KEYS}
    en = res.expected_steps
    out.update(accuracy=res.accuracy, mean_steps=at["mean_steps"], en_std=en.get("std") if isinstance(en, dict) else None,
               learned=at["learned"], fixed_depth=at["fixed_depth"], confidence_exit=at["confidence_exit"],
               learned_minus_confidence=at["learned"] - at["confidence_exit"],
               learned_minus_fixed=at["learned"] - at["fixed_depth"],
               expected_minus_settle=(res.settle or {}).get("mean_expected_minus_settle"),
               confidence_minus_settle=at.get("confidence_minus_settle"))
    if "learned_q" in at:
        q = at["learned_q"]
        out.update(learned_q=q, learned_q_minus_confidence=q - at["confidence_exit"],
                   learned_q_minus_fixed=q - at["fixed_depth"], sampled_minus_learned_q=at["learned"] - q)
    easy, hard = res.easy, res.hard
    if easy and hard and easy.count and hard.count:
        out["hard_minus_easy"] = hard.expected_steps - easy.expected_steps
        curve = res.per_step_accuracy_by_group["hard"]                   # [N] hard vectors' accuracy at depth n
        at_easy = float(np.interp(easy.expected_steps, np.arange(1, len(curve) + 1), curve))
        hard_learned = (res.learned_by_group or {}).get("hard")
        out["needed"] = None if hard_learned is None else hard_learned["accuracy"] - at_easy
    return out


# Student's t 0.975 quantiles by degrees of freedom (a table, as numpy has none); between two rows the lower row's
# (larger, so wider) value is used
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042, 60: 2.000, 120: 1.980}


def seed_interval(s: Optional[dict]) -> Optional[list]:
    """95 % interval [lo, hi] of a mean over seeds ({mean, std, n}): mean ± t(n − 1)·std/√n. For a difference of
    two policies that each seed measured on the same test items (the *_minus_* keys) it is the paired interval over
    seeds: it holds the training seeds' spread, not the test items' (each trial's bootstrap has those). None for
    fewer than 2 seeds."""
    if not s or s["n"] < 2:
        return None
    t = T975[max(k for k in T975 if k <= s["n"] - 1)]
    half = t * s["std"] / math.sqrt(s["n"])
    return [s["mean"] - half, s["mean"] + half]


def over_seeds(rows: list) -> dict:
    """{key: {mean, std, min, max, n, ci95}} of each pays() key over runs (e.g. the seeds of one setting); std is
    the sample std (n - 1), 0 for one run; ci95: seed_interval; keys with no value in any run are None."""
    out = {}
    for k in KEYS:
        v = np.array([r[k] for r in rows if r and r.get(k) is not None], np.float64)
        out[k] = None if not len(v) else {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
                                          "min": float(v.min()), "max": float(v.max()), "n": int(len(v))}
        if out[k] is not None:
            out[k]["ci95"] = seed_interval(out[k])
    return out


# The marks a shipped model is held to: (key, at least / at most, threshold, what it says).
MARKS = {
    "mnist-adaptive": [("accuracy", ">=", 0.990, "test accuracy"),
                       ("en_std", ">=", 1.5, "E[n] std over the test images"),
                       ("learned_minus_confidence", ">=", -0.002, "learned − confidence exit at equal steps"),
                       ("expected_minus_settle", "<=", 2.5, "mean E[n] − settle step")],
    "parity-15": [("accuracy", ">=", 0.99, "test accuracy"),
                  ("hard_minus_easy", ">=", 1.0, "hard − easy E[n]"),
                  ("learned_minus_confidence", ">=", -0.002, "learned − confidence exit at equal steps"),
                  ("expected_minus_settle", "<=", 2.5, "mean E[n] − settle step"),
                  ("needed", ">=", 0.02, "hard: learned − fixed depth at the easy E[n]")],
}


def marks(name: str, p: Optional[dict]) -> list:
    """[{key, what, op, mark, value, met}] of the model's marks (MARKS[name]) against its pays() numbers;
    [] for a model without marks. A missing value is not met."""
    rows = []
    for key, op, mark, what in MARKS.get(name, []):
        v = (p or {}).get(key)
        ok = v is not None and math.isfinite(v) and (v >= mark if op == ">=" else v <= mark)
        rows.append({"key": key, "what": what, "op": op, "mark": mark, "value": v, "met": ok})
    return rows


DEFAULT_SEED = 0      # the seed a chosen setting ships: never the best of its seeds


def choose_setting(settings: list, name: str) -> Optional[dict]:
    """The setting to ship as `name`, chosen on validation data only (the test set unread): of the settings whose
    trials were measured on a validation set (setting["validation_over_seeds"], over_seeds of each trial's
    pays(result["validation"])), the one whose means over seeds meet the most of MARKS[name]; a tie goes to the
    higher mean validation accuracy of Q-exit at equal steps, then to the first. Its DEFAULT_SEED ships (its lowest
    seed where it has no seed 0). Returns {index, setting, met, of, seed, on: 'validation'}; None when no setting
    has validation numbers or `name` has no marks."""
    if name not in MARKS:
        return None
    scored = []
    for i, st in enumerate(settings):
        vo = st.get("validation_over_seeds")
        if not vo:
            continue
        means = {k: (v or {}).get("mean") for k, v in vo.items()}
        met = [m["key"] for m in marks(name, means) if m["met"]]
        scored.append((len(met), means.get("learned_q") or -math.inf, -i, met))
    if not scored:
        return None
    n_met, _, neg_i, met = max(scored)
    st = settings[-neg_i]
    seeds = [s for s in st["seeds"] if s is not None]
    return {"index": -neg_i, "setting": st["setting"], "met": met, "of": len(MARKS[name]),
            "seed": DEFAULT_SEED if DEFAULT_SEED in seeds or not seeds else min(seeds), "on": "validation"}


def seed_rank(trials: list, seed, key: str) -> Optional[tuple]:
    """(rank, of): where `seed`'s test value of pays key `key` ranks among the trials of its setting, 1 the
    highest; None when it has none."""
    vals = [(t["pays"] or {}).get(key) for t in trials]
    mine = next(((t["pays"] or {}).get(key) for t in trials if t["seed"] == seed), None)
    vals = [v for v in vals if v is not None]
    if mine is None:
        return None
    return 1 + sum(v > mine for v in vals), len(vals)
