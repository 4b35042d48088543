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


def over_seeds(rows: list) -> dict:
    """{key: {mean, std, min, max, n}} of each pays() key over runs (e.g. the seeds of one setting); std is
    the sample std (n - 1), 0 for one run; keys with no value in any run are None."""
    out = {}
    for k in KEYS:
        v = np.array([r[k] for r in rows if r and r.get(k) is not None], np.float64)
        out[k] = None if not len(v) else {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
                                          "min": float(v.min()), "max": float(v.max()), "n": int(len(v))}
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
