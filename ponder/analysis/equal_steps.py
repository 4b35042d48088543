"""The halting policies (ponder.analysis.policies) compared at equal compute, the way a result is read:

1. on the validation set (held out of training: the models trained before parity's held-out classes, the shipped
   parity ones, saw most of theirs), the sampled policy's mean E[n] is the compute to match, and every
   deterministic policy's operating point (Q-exit's q, the confidence exit's τ, the fixed depth) is chosen there
   to spend it;
2. those operating points are scored on the test set (and on shifted test inputs: rotated digits, parity vectors
   with a k never trained on), beside the sampled policy on the same items;
3. every difference gets a paired bootstrap 95 % interval over the test items.

Each takes unrolls as ponder.analysis.unroll.unroll_stats gives them (per_step_correct, per_step_confidence, p).
"""
from __future__ import annotations

from typing import Optional

from .baselines import exit_steps, fixed_depth, learned, settle, settle_steps
from .budgets import budget_frontier, contenders, residual_gap
from .policies import Operating, frontier, match, oracle, paired_bootstrap, policies, sampled, score
from .signals import forced_stops, step_aurocs
from .verdict import verdict

PAIRS = (("learned_q", "confidence_exit"), ("learned_q", "fixed_depth"), ("sampled", "learned_q"),
         ("sampled", "confidence_exit"), ("sampled", "fixed_depth"))
RESAMPLES, BOOT_SEED = 1000, 0
UNROLL_KEYS = ("per_step_correct", "per_step_confidence", "p", "per_step_pred")     # [N, B] each


def _unroll(stats: dict) -> tuple:
    return stats["per_step_correct"], stats["per_step_confidence"], stats["p"]


def _policies(stats: dict) -> dict:
    """policies() of one unroll, the patience exit among them when it holds the answers (per_step_pred)."""
    return policies(*_unroll(stats), stats.get("per_step_pred"))


def tune(val: dict) -> dict:
    """{policy: Operating} matching the sampled policy's mean E[n] on `val`, and {'target_steps': that E[n]}."""
    c, conf, p = _unroll(val)
    target = sampled(c, p).mean_steps
    ops = {name: match(pol, c, target) for name, pol in _policies(val).items()}
    return {"target_steps": target, "ops": ops}


def scored(stats: dict, ops: dict) -> dict:
    """{name: Point} of the sampled policy and each deterministic one at its operating point on `stats`."""
    c, conf, p = _unroll(stats)
    pols = _policies(stats)
    return {"sampled": sampled(c, p), **{name: score(pols[name], c, ops[name]) for name in ops if name in pols}}


def comparison(stats: dict, ops: dict, resamples: int = RESAMPLES, seed: int = BOOT_SEED) -> dict:
    """{policies: {name: {mean_steps, accuracy}}, ci95: {"a-b": [lo, hi]}} on `stats` at the operating points
    (no ci95 for resamples = 0)."""
    pts = scored(stats, ops)
    out = {"n": int(stats["p"].shape[1]),
           "policies": {k: {"mean_steps": v.mean_steps, "accuracy": v.accuracy} for k, v in pts.items()}}
    if resamples:
        out["ci95"] = paired_bootstrap({k: v.per_item for k, v in pts.items()}, list(PAIRS), resamples, seed)
    return out


def _minus_settle(conf, correct, op: Operating) -> Optional[float]:
    """Mean exit step − settle step of the confidence exit at op, over the inputs that settle (None: none does)."""
    s = settle_steps(correct)
    ok = s > 0
    if not ok.any():
        return None
    g = [(exit_steps(conf, t)[ok] - s[ok]).double().mean().item() for t in (op.lo, op.hi)]
    return (1 - op.w) * g[0] + op.w * g[1]


def at_equal_steps(test: dict, val: Optional[dict], resamples: int = RESAMPLES, seed: int = BOOT_SEED,
                   tuned: Optional[dict] = None) -> dict:
    """The policies at equal compute on the test set with operating points tuned on `val` (on the test set itself
    when there is none; `tuned_on` says which). Fields: tuned_on {set, n}, target_steps (the sampled E[n] on the
    tuning set), policies {name: {mean_steps, accuracy}} on the test set, operating_points {name: {knob_lo,
    knob_hi, w}}, ci95, the oracle (settle step) for reference, and the keys of one at_equal_steps row:
    learned_q, fixed_depth, confidence_exit, confidence_threshold, confidence_minus_settle, q.
    tuned: tune(val) when already computed."""
    tuning = val if val is not None else test
    t = tune(tuning) if tuned is None else tuned
    comp = comparison(test, t["ops"], resamples, seed)
    c, conf, p = _unroll(test)
    pol, ops = comp["policies"], t["ops"]
    knobs = {name: p_.knob for name, p_ in _policies(test).items()}
    orc = oracle(c)
    return {"tuned_on": {"set": "validation" if val is not None else "test", "n": int(tuning["p"].shape[1])},
            "target_steps": t["target_steps"], **comp,
            "operating_points": {k: op.as_dict(knobs[k]) for k, op in ops.items()},
            "oracle": {"mean_steps": orc.mean_steps, "accuracy": orc.accuracy},
            "learned_q": pol["learned_q"]["accuracy"], "fixed_depth": pol["fixed_depth"]["accuracy"],
            "confidence_exit": pol["confidence_exit"]["accuracy"], "confidence_threshold": ops["confidence_exit"].lo,
            "q": ops["learned_q"].lo, "confidence_minus_settle": _minus_settle(conf, c, ops["confidence_exit"])}


def frontiers(stats: dict) -> dict:
    """{learned_q: [{q, mean_steps, accuracy}], ...}: each deterministic policy's whole accuracy-compute curve."""
    return {name: frontier(pol, stats["per_step_correct"]) for name, pol in _policies(stats).items()}


def shift_comparison(stats: dict, ops: dict, resamples: int = RESAMPLES, seed: int = BOOT_SEED) -> dict:
    """comparison() on shifted inputs at the clean validation's ops (each policy spends what its own signal tells
    it there), and `at_q_steps`: the confidence exit and the fixed depth matched on these inputs themselves to the
    mean steps Q-exit spends on them, so the three compare at equal compute (a match on the shifted test items
    favours those two rules: it is tuned where Q-exit is not)."""
    out = comparison(stats, ops, resamples, seed)
    c = stats["per_step_correct"]
    pols = _policies(stats)
    q = score(pols["learned_q"], c, ops["learned_q"])
    pts = {"learned_q": q, **{k: score(pols[k], c, match(pols[k], c, q.mean_steps))
                              for k in ("confidence_exit", "fixed_depth", "patience") if k in pols}}
    out["at_q_steps"] = {"mean_steps": q.mean_steps,
                         "policies": {k: {"mean_steps": v.mean_steps, "accuracy": v.accuracy} for k, v in pts.items()},
                         "ci95": paired_bootstrap({k: v.per_item for k, v in pts.items()}, list(PAIRS[:2]), resamples, seed)}
    return out


def shift_rows(shifted: dict, ops: dict) -> list:
    """[{name, **shift_comparison}] for each named shifted unroll {name: stats}, at the clean validation's ops."""
    return [{"name": name, **shift_comparison(stats, ops)} for name, stats in shifted.items()]


def ops_from(at: dict) -> dict:
    """{policy: Operating} back from an at_equal_steps result's operating_points ({knob_lo, knob_hi, w})."""
    end = lambda d, tail: next(v for k, v in d.items() if k.endswith(tail))     # noqa: E731
    return {name: Operating(end(d, "_lo"), end(d, "_hi"), d["w"]) for name, d in at["operating_points"].items()}


def worth_it(stats: dict, groups: Optional[dict] = None, val: Optional[dict] = None,
             shifted: Optional[dict] = None, lean: bool = False) -> dict:
    """The policies at equal steps, settle steps, per-step accuracy and the learned halting (mean E[n], expected
    accuracy) by group of one unroll (ponder.analysis.unroll.unroll_stats: per_step_correct, per_step_confidence,
    p [N, B]; correct [B] of the mode's own halting). groups: {name: bool mask [B]}; empty groups are left out.
    val: the unroll of the validation set, where operating points are chosen (ponder.analysis.equal_steps; the
    test set itself when None, and `tuned_on` says so). shifted: {name: mask [B]} of test items under a shift,
    compared at the same operating points. lean: the numbers a setting is chosen by only (ponder.analysis.pays), no
    frontiers and no intervals. baselines also hold `forced` (ponder.analysis.signals.forced_stops of the test set
    and the validation set) and, unless lean, `budgets` (ponder.analysis.budgets.budget_frontier: every policy at
    budgets 1..N), `verdict` (ponder.analysis.verdict), `residual_gap` (budgets.residual_gap: Q-exit − confidence exit
    chosen on validation and matched on the test set) and `auroc` (signals.step_aurocs on the test set). JSON-ready."""
    correct, conf, p = stats["per_step_correct"], stats["per_step_confidence"], stats["p"]
    groups = {k: m for k, m in (groups or {}).items() if m.any()}
    fd = fixed_depth(correct).tolist()
    ln = learned(correct, p, stats.get("correct"))
    t = tune(val if val is not None else stats)
    at = {"mean_steps": ln["mean_steps"], "learned": ln["accuracy"], "learned_interval": ln["interval"],
          "sampled": ln["accuracy"], **at_equal_steps(stats, val, resamples=0 if lean else RESAMPLES, tuned=t)}
    if "sampled_accuracy" in ln:
        at["learned_sampled"] = ln["sampled_accuracy"]
    ops = t["ops"]
    sub = lambda m: {k: stats[k][:, m] for k in UNROLL_KEYS if k in stats}  # noqa: E731
    front = {} if lean else frontiers(stats)   # the confidence exit's is confidence_curve's
    tuning = val if val is not None else stats
    forced = lambda s: forced_stops(s["p"], s["per_step_confidence"], s.get("per_step_pred"), ops)  # noqa: E731
    extra = {"forced": {"test": forced(stats), **({"validation": forced(val)} if val is not None else {})}}
    if not lean:                           # the whole frontiers at budgets 1..N, the verdict, the signals' AUROCs
        budgets = budget_frontier(contenders(tuning, stats), tuning, stats)
        extra.update(budgets=budgets, verdict=verdict(budgets),
                     residual_gap=residual_gap(budgets, "learned_q", "confidence_exit"),
                     auroc=step_aurocs(correct, conf, p, stats.get("per_step_pred")))
    return {
        "baselines": {"fixed_depth": [{"steps": n, "accuracy": a} for n, a in enumerate(fd, 1)],
                      "confidence_exit": front.get("confidence_exit", []),
                      "tuned_on": at["tuned_on"], "at_equal_steps": at, "frontier": front,
                      "shift": shift_rows({k: sub(m) for k, m in (shifted or {}).items() if m.any()}, ops), **extra},
        "settle": {**settle(correct, p), "by_group": {k: settle(correct[:, m], p[:, m]) for k, m in groups.items()}},
        "per_step_accuracy_by_group": {k: fixed_depth(correct[:, m]).tolist() for k, m in groups.items()},
        "learned_by_group": {k: {key: ln[key] for key in ("mean_steps", "accuracy")}
                             for k, m in groups.items() for ln in [learned(correct[:, m], p[:, m])]},
    }
