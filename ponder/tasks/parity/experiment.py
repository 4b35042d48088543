"""The paper's parity experiment, measured for one trained run of any halting method (ponder.methods): its own
answer on held-out vectors of the trained k ("seen") and of the k outside it ("unseen", the extrapolation), by k,
and its accuracy against mean steps at compute budgets chosen on validation vectors (never trained on) and scored
on the test vectors, for each exit rule the run's unroll allows: a fixed depth, a confidence exit, patience (the
answer unchanged for t steps) and, where the method learns a halting distribution, the Q-exit on it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional

import torch

from ...analysis.policies import match, policies, score
from ...analysis.unroll import by_k_rows, unroll_stats
from ...config import TrainConfig
from ...methods import get_method
from ..options import options_of
from .data import TEST_CLASS, VAL_CLASS, parity_eval_set
from .task import TASK, fitted_preset

SET_SIZE = 4000            # vectors in each of the seen, unseen and validation sets (a 95 % interval of an accuracy
                           # near 0.5 is then +-0.016, near 0.98 +-0.004)
EVAL_SEEDS = {"seen": 23456, "unseen": 34567, "val": 45678}   # each set drawn once from its own seed


@dataclass
class SetScore:
    """The run's own answer on one set: accuracy, mean steps, items; and Q-exit at q = 0.5 for PonderNet."""
    accuracy: float
    mean_steps: float
    n: int
    q_exit_accuracy: Optional[float] = None       # PonderNet: the Q-exit at its median step (q = 0.5)
    q_exit_steps: Optional[float] = None


@dataclass
class Experiment:
    """One run measured as the paper's experiment."""
    method: str                      # a name of ponder.methods.METHODS
    label: str
    train_k: list                    # [lo, hi] the k trained on
    seen: SetScore
    unseen: Optional[SetScore]       # None when the run was trained on every k
    by_k: list = field(default_factory=list)       # [{k, count, accuracy, mean_steps}] over seen and unseen
    frontier: list = field(default_factory=list)   # [{policy, budget, val_steps, seen: {mean_steps, accuracy},
                                                   #   unseen: {...} or None}]

    def to_dict(self) -> dict:
        return asdict(self)


def sets(cfg: TrainConfig, n_elems: int, size: int = SET_SIZE) -> dict:
    """{name: (x, y, k)}: held-out test vectors of the trained k ("seen") and of the preset's test k outside it
    ("unseen", when any), and validation vectors of the trained k ("val")."""
    preset = fitted_preset(cfg.parity_preset, n_elems)
    layout = options_of(TASK, cfg).layout
    (lo, hi), (tlo, thi) = preset["train_k"], preset["test_k"]
    out = {"seen": parity_eval_set(n_elems, lo, hi, size, EVAL_SEEDS["seen"], TEST_CLASS, layout),
           "val": parity_eval_set(n_elems, lo, hi, size, EVAL_SEEDS["val"], VAL_CLASS, layout)}
    if thi > hi:
        out["unseen"] = parity_eval_set(n_elems, max(tlo, hi + 1), thi, size, EVAL_SEEDS["unseen"], TEST_CLASS, layout)
    return out


def _own(model, x, y, learns: bool) -> tuple:
    """(SetScore, stats) of the method's own answer (PonderNet: a seeded draw of its halting) on (x, y)."""
    stats = unroll_stats(model, x, y, mode="sample", seed=0)
    s = SetScore(stats["correct"].float().mean().item(), stats["halt_step"].mean().item(), len(y))
    if learns and model.method == "ponder":
        q = unroll_stats(model, x, y, mode="deterministic", q=0.5)
        s.q_exit_accuracy, s.q_exit_steps = q["correct"].float().mean().item(), q["halt_step"].mean().item()
    return s, stats


def _policies(stats: dict, learns: bool) -> dict:
    pols = policies(stats["per_step_correct"], stats["per_step_confidence"], stats["p"], stats["per_step_pred"])
    return pols if learns else {k: v for k, v in pols.items() if k != "learned_q"}


def frontier(val: dict, tests: dict, learns: bool, budgets) -> list:
    """Each policy at each budget: its operating point chosen on `val` to spend `budget` mean steps there, then
    scored on each test set (its mean steps there reported beside the accuracy)."""
    vpols = _policies(val, learns)
    tpols = {name: _policies(st, learns) for name, st in tests.items()}
    rows = []
    for name, pol in vpols.items():
        for b in budgets:
            op = match(pol, val["per_step_correct"], float(b))
            row = {"policy": name, "budget": float(b), "val_steps": score(pol, val["per_step_correct"], op).mean_steps}
            for set_name, st in tests.items():
                pt = score(tpols[set_name][name], st["per_step_correct"], op)
                row[set_name] = {"mean_steps": pt.mean_steps, "accuracy": pt.accuracy}
            rows.append(row)
    return rows


@torch.no_grad()
def measure(model, cfg: TrainConfig, size: int = SET_SIZE, budgets=None) -> Experiment:
    """The run (its PonderNet-wrapped model and TrainConfig) measured as the paper's experiment."""
    method = get_method(model.method)
    n = model.step_fn.cfg.n_elems
    data = sets(cfg, n, size)
    seen, seen_stats = _own(model, *data["seen"][:2], method.learns_halting)
    unseen, tests = None, {"seen": seen_stats}
    if "unseen" in data:
        unseen, tests["unseen"] = _own(model, *data["unseen"][:2], method.learns_halting)
    val = unroll_stats(model, *data["val"][:2], mode="sample", seed=1)
    rows = by_k_rows(seen_stats, data["seen"][2])
    if "unseen" in data:
        rows += by_k_rows(tests["unseen"], data["unseen"][2])
    budgets = budgets or range(1, model.max_steps + 1)
    return Experiment(method=model.method, label=method.label, train_k=list(fitted_preset(cfg.parity_preset, n)["train_k"]),
                      seen=seen, unseen=unseen, by_k=rows,
                      frontier=frontier(val, tests, method.learns_halting, budgets))


SOLVED = 0.98              # the paper's and Fojo et al.'s mark for "solved"


def verdict(named: dict) -> str:
    """One plain sentence on runs measured as the experiment, {run name: Experiment dict}: which solved the seen
    k (accuracy >= SOLVED), and how the best did on the unseen k."""
    if not named:
        return "No run of this experiment has been measured yet."
    def acc(e, s):
        return (e.get(s) or {}).get("accuracy")
    solved = [f"{n} ({e['label']})" for n, e in named.items() if (acc(e, "seen") or 0) >= SOLVED]
    best = max(named, key=lambda n: acc(named[n], "seen") or 0)
    first = (f"Solved on the trained k (≥ {SOLVED:.0%}): {', '.join(solved)}." if solved else
             f"None solved the trained k: the best, {best} ({named[best]['label']}), reached "
             f"{acc(named[best], 'seen'):.1%} where {SOLVED:.0%} is the mark.")
    unseen = {n: acc(e, "unseen") for n, e in named.items() if acc(e, "unseen") is not None}
    if not unseen:
        return first
    top = max(unseen, key=unseen.get)
    return (f"{first} On the unseen k the best is {top} ({named[top]['label']}) at {unseen[top]:.1%}"
            + (" — near chance (50 %)." if unseen[top] < 0.6 else "."))


def table_rows(named: dict) -> list:
    """One row a run for the methods' table: its method, the accuracy and mean steps of its own answer on seen and
    unseen k."""
    rows = []
    for name, e in named.items():
        seen, unseen = e["seen"], e.get("unseen") or {}
        rows.append({"run": name, "method": e["label"], "seen k accuracy": seen["accuracy"],
                     "seen k mean steps": seen["mean_steps"], "unseen k accuracy": unseen.get("accuracy"),
                     "unseen k mean steps": unseen.get("mean_steps"),
                     "Q-exit (q 0.5) seen": seen.get("q_exit_accuracy")})
    return rows
