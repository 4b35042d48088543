"""Whole frontiers at equal compute: every deterministic halting policy of one or two networks at each budget from 1
to N mean steps, its operating point chosen on the validation set to spend the budget there and scored on the test
set (the steps it spends on the test set beside its accuracy), and again matched on the test set itself so the steps
are equal there too; paired bootstrap intervals at every budget, and the budgets where each policy leads.

The sampled halting's mean E[n] on the validation set is one of the budgets (the reference row): there the sampled
halting itself is scored beside the rules, and the learned halting's reference point is the better of it and the
Q-exit. Every (policy, budget) is one column of per-item correctness; one set of bootstrap resamples of the test
items scores them all, so any two of them, at any budgets, are paired.

A contender is a policy of one unroll: its name (a competitor's carry its prefix, "competitor.confidence_exit"),
the Policy on the validation unroll and on the test unroll, and each unroll's correctness.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from .policies import Policy, match, op_steps, policies, sampled, score

RESAMPLES, BOOT_SEED = 1000, 0
LEARNED = ("sampled", "learned_q")          # the learned halting's two uses; every other policy is a rule
ROUND = 4                                    # accuracies and their differences are shown to 4 decimals


@dataclass
class Contender:
    name: str
    val: Policy
    val_correct: torch.Tensor
    test: Policy
    test_correct: torch.Tensor


def contenders(val: dict, test: dict, prefix: str = "", only=None) -> list:
    """The deterministic policies of one network (unroll_stats of its validation and test sets), named with
    `prefix` + "." when given; `only`: the policy names to keep."""
    pv = policies(val["per_step_correct"], val["per_step_confidence"], val["p"], val.get("per_step_pred"))
    pt = policies(test["per_step_correct"], test["per_step_confidence"], test["p"], test.get("per_step_pred"))
    return [Contender(f"{prefix}.{k}" if prefix else k, pv[k], val["per_step_correct"], pt[k], test["per_step_correct"])
            for k in pv if k in pt and (only is None or k in only)]


def no_difference(d: float, ci) -> bool:
    """A difference reads "no difference" when its 95 % interval holds 0 or it rounds to 0 at ROUND decimals."""
    return ci[0] <= 0 <= ci[1] or round(d, ROUND) == 0


class _Columns:
    """Per-item correctness columns [B] and, once resampled, their means under the shared bootstrap resamples."""

    def __init__(self):
        self.cols, self.means = [], None

    def add(self, per_item: torch.Tensor) -> int:
        self.cols.append(per_item.double())
        return len(self.cols) - 1

    def resample(self, resamples: int, seed: int, chunk: int = 50) -> None:
        vals = torch.stack(self.cols, 1)                                         # [B, K]
        B = vals.shape[0]
        g = torch.Generator().manual_seed(seed)
        out = []
        for start in range(0, resamples, chunk):
            idx = torch.randint(0, B, (min(chunk, resamples - start), B), generator=g)
            counts = torch.zeros(idx.shape, dtype=vals.dtype).scatter_add_(1, idx, torch.ones(idx.shape, dtype=vals.dtype))
            out.append(counts @ vals / B)                                         # [R, K]
        self.means = torch.cat(out)                                               # [resamples, K]

    def ci(self, i: int, j: int) -> list:
        d = self.means[:, i] - self.means[:, j]
        return torch.quantile(d, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()


def _block(pts: dict, idx: dict, cols: _Columns, pairs_with: Optional[str]) -> dict:
    """{policies, ci95 (pairs_with − each other, and the leader − each other), leader, tied} of one budget's points."""
    acc = {k: p.accuracy for k, p in pts.items()}
    leader = max(acc, key=lambda k: (acc[k], -pts[k].mean_steps))
    ci = {}
    for a in dict.fromkeys(x for x in (pairs_with, leader) if x in pts):
        ci.update({f"{a}-{b}": cols.ci(idx[a], idx[b]) for b in pts if b != a})
    tied = [b for b in pts if b != leader and no_difference(acc[leader] - acc[b], ci[f"{leader}-{b}"])]
    return {"policies": {k: {"mean_steps": p.mean_steps, "accuracy": p.accuracy} for k, p in pts.items()},
            "ci95": ci, "leader": leader, "tied": tied}


def budget_frontier(conts: list, val: dict, test: dict, budgets=None, resamples: int = RESAMPLES,
                    seed: int = BOOT_SEED) -> dict:
    """Every contender at every budget (default: 1..N of the longest, and the sampled halting's mean E[n] on `val`,
    the reference row); val and test: the unrolls of the network whose learned halting is the reference.

    rows: [{budget, reference (the E[n] row), chosen: the operating points chosen on validation and scored on the
    test set ({policies: {name: {mean_steps (test), validation_steps, accuracy}}, ci95, leader, tied,
    versus_reference: {name: 95 % interval of the reference point − that policy here}}), matched: the same with each
    operating point chosen on the test set to spend exactly the budget there}]. reference: {name, budget, mean_steps,
    accuracy} (the better of sampled and Q-exit at the E[n] row). leads: {name: [budgets where it leads alone]}.
    tied: a policy whose difference from the leader reads "no difference" (no_difference)."""
    N = max(c.val_correct.shape[0] for c in conts)
    target = sampled(val["per_step_correct"], val["p"]).mean_steps
    grid = sorted({*(float(b) for b in (budgets if budgets is not None else range(1, N + 1))), target})
    cols, rows = _Columns(), []
    s_test = sampled(test["per_step_correct"], test["p"])
    for b in grid:
        chosen, matched, val_steps = {}, {}, {}
        for c in conts:
            op = match(c.val, c.val_correct, b)
            chosen[c.name] = score(c.test, c.test_correct, op)
            val_steps[c.name] = op_steps(c.val, op)
            matched[c.name] = score(c.test, c.test_correct, match(c.test, c.test_correct, b))
        if b == target:
            chosen = {"sampled": s_test, **chosen}
        rows.append({"budget": b, "reference": b == target, "chosen": chosen, "matched": matched,
                     "validation_steps": val_steps})
    idx = [({k: cols.add(p.per_item) for k, p in r["chosen"].items()},
            {k: cols.add(p.per_item) for k, p in r["matched"].items()}) for r in rows]
    cols.resample(resamples, seed)
    ref_row, ref_idx = next((r, i) for r, i in zip(rows, idx) if r["reference"])
    ref_name = max((k for k in LEARNED if k in ref_row["chosen"]), key=lambda k: ref_row["chosen"][k].accuracy)
    ref_pt, ref_col = ref_row["chosen"][ref_name], ref_idx[0][ref_name]
    pair = "learned_q" if any(c.name == "learned_q" for c in conts) else None
    out_rows, leads = [], {}
    for r, (ic, im) in zip(rows, idx):
        ch = _block(r["chosen"], ic, cols, pair)
        for k, v in ch["policies"].items():
            v["validation_steps"] = r["validation_steps"].get(k, target if k == "sampled" else None)
        ch["versus_reference"] = {k: cols.ci(ref_col, i) for k, i in ic.items() if i != ref_col}
        out_rows.append({"budget": r["budget"], "reference": r["reference"], "chosen": ch,
                         "matched": _block(r["matched"], im, cols, pair)})
        if not ch["tied"]:
            leads.setdefault(ch["leader"], []).append(r["budget"])
    return {"tuned_on": {"set": "validation", "n": int(val["p"].shape[1])}, "test_n": int(test["p"].shape[1]),
            "resamples": resamples, "contenders": [c.name for c in conts],
            "reference": {"name": ref_name, "budget": target, "mean_steps": ref_pt.mean_steps,
                          "accuracy": ref_pt.accuracy},
            "rows": out_rows, "leads": leads}


def residual_gap(front: dict, a: str, b: str) -> list:
    """[{budget, steps_gap (a's test steps − b's, validation-chosen), chosen (a − b), matched (a − b at exactly the
    budget's steps on the test set)}]: how much of a difference the unequal test steps explain, budget by budget."""
    out = []
    for r in front["rows"]:
        ch, m = r["chosen"]["policies"], r["matched"]["policies"]
        if a in ch and b in ch and a in m and b in m:
            out.append({"budget": r["budget"], "steps_gap": ch[a]["mean_steps"] - ch[b]["mean_steps"],
                        "chosen": ch[a]["accuracy"] - ch[b]["accuracy"], "matched": m[a]["accuracy"] - m[b]["accuracy"]})
    return out
