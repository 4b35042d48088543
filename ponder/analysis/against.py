"""A pondering network against a fair competitor: another network of the same task measured on the same validation
and test items (the same step function trained to answer at every step, without halting, is the fair one). The
pondering network's learned halting (sampled and Q-exit) and its own rules are scored beside the competitor's
confidence exit, patience exit and fixed depth, budget by budget (ponder.analysis.budgets), and the verdict compares
the learned halting with the competitor's rules (ponder.analysis.verdict)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import torch

from .budgets import budget_frontier, contenders, residual_gap
from .signals import step_aurocs
from .verdict import verdict

PREFIX = "competitor"
RULES = ("confidence_exit", "patience", "fixed_depth")       # the competitor's policies: its λ is not trained
SUFFIX = "-deep"                                             # a shipped model's competitor: NAME-deep beside NAME


def same_items(a, b) -> bool:
    """Two EvalSets (or None) hold the same inputs and targets."""
    if a is None or b is None:
        return a is b
    return a.x.shape == b.x.shape and torch.equal(a.x, b.x) and torch.equal(a.y, b.y)


def refusal(task: str, other_task: str, sets: tuple = (), other_sets: tuple = ()) -> Optional[str]:
    """Why a competitor cannot be compared (one line), or None. sets: (test, validation) EvalSets of each run, once
    the tasks agree."""
    if task != other_task:
        return f"--against needs a run of the same task ({task}), got a {other_task} run"
    if not sets:
        return None
    if sets[1] is None:
        return f"--against chooses operating points on a validation set, and the {task} task has none"
    if not all(same_items(a, b) for a, b in zip(sets, other_sets)):
        return ("--against needs a run measured on the same test and validation items (the same task, preset and "
                "input size), and these differ")
    return None


def against(val: dict, test: dict, other_val: dict, other_test: dict, name: str) -> dict:
    """The comparison of one network (unroll_stats of its validation and test sets) with a competitor's unrolls of
    the same items: {name, budgets (budget_frontier of both), verdict (against the competitor's rules),
    verdict_own_rules (against this network's own rules), auroc (the competitor's confidence and patience, each
    ranking its own per-step correctness), residual_gap (Q-exit − the competitor's confidence exit, chosen on
    validation and matched on the test set), max_steps}. JSON-ready."""
    conts = contenders(val, test) + contenders(other_val, other_test, PREFIX, only=RULES)
    front = budget_frontier(conts, val, test)
    theirs = [n for n in front["contenders"] if n.startswith(PREFIX + ".")]
    mine = [n for n in front["contenders"] if "." not in n]
    c, conf = other_test["per_step_correct"], other_test["per_step_confidence"]
    return {"name": name, "max_steps": int(c.shape[0]), "budgets": front,
            "verdict": verdict(front, theirs, name), "verdict_own_rules": verdict(front, mine),
            "auroc": step_aurocs(c, conf, None, other_test.get("per_step_pred")),
            "residual_gap": residual_gap(front, "learned_q", f"{PREFIX}.confidence_exit")}


def competitor_path(run: Path) -> Optional[Path]:
    """The shipped competitor of a run folder: NAME-deep beside NAME, when it holds a run (None otherwise, and for
    a run that is itself a competitor)."""
    run = Path(run)
    if run.name.endswith(SUFFIX):
        return None
    other = run.with_name(run.name + SUFFIX)
    return other if (other / "run.json").is_file() else None
