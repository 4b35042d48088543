"""The "worth it?" numbers in words and lines, for the CLI, the pages and the docs: the halts N forced, which signal
ranks a right answer best, and the budget frontier as a table (plain functions of JSON-ready results)."""
from __future__ import annotations

from typing import Optional

from .budgets import no_difference
from .signals import SIGNAL_WORDS
from .verdict import difference_words, short_for, steps_text, verdict_sentence

NEVER_CHOSE = "it never chose to stop; N stopped it"


def halt_forced(halt_step: int, max_steps: int) -> bool:
    """A halt at step N is N's (λ_N = 1), in either mode: the draws (or the CDF, for the Q-exit) never stopped it."""
    return max_steps > 1 and halt_step >= max_steps


def forced_sentence(forced: dict, where: str = "test") -> str:
    """The halts N forced on one set (ponder.analysis.signals.forced_stops), in a sentence; it opens with NEVER_CHOSE
    when N forced most of the sampled halts."""
    N, share, q = forced["steps"], forced["sampled"], forced["q_exit"]
    rules = forced.get("at_equal_steps", {})
    tail = ("; of each rule's stops at equal compute, N forced: " + ", ".join(f"{short_for(k)} {v:.1%}"
                                                                           for k, v in rules.items()) if rules else "")
    body = (f"{share:.1%} of the sampled halts on the {where} items are at step N = {N} (the mass p_N: the draw never "
            f"stopped them earlier, λ_N = 1 did), and the Q-exit at q = {q['q']:g} reached step N without its "
            f"Σ p reaching {q['q']:g} on {q['share']:.1%} of them{tail}.")
    if share >= 0.5:
        return f"Mostly {NEVER_CHOSE}: {body}"
    return f"N forced few of its stops: {body}" if share < 0.05 else f"N forced some of its stops: {body}"


def auroc_sentence(auroc: dict, who: str = "") -> str:
    """Which signal ranks "the answer at step n is right" best (ponder.analysis.signals.step_aurocs), in a sentence:
    each signal's mean AUROC over the steps and at how many steps each is the best."""
    means = {k: v for k, v in auroc["mean"].items() if v is not None}
    if not means:
        return "No step has both right and wrong answers, so no signal can be ranked."
    wins = {k: sum(b == k for b in auroc["best"]) for k in means}
    best = max(means, key=means.get)
    defined = sum(b is not None for b in auroc["best"])
    parts = ", ".join(f"{SIGNAL_WORDS[k]} {v:.3f} (best at {wins[k]} of {defined} steps)" for k, v in means.items())
    return (f"{who + ': ' if who else ''}the signal that best tells a right answer at step n from a wrong one is "
            f"{SIGNAL_WORDS[best]}; mean AUROC over the steps: {parts}.")


def _cell(pt: dict) -> str:
    return f"{pt['accuracy']:.4f} ({pt['mean_steps']:.2f})"


def budget_table(front: dict, competitor: str = "", block: str = "chosen") -> tuple:
    """(header, rows) of the frontier: one row per budget, each contender's test accuracy (test steps), the leader
    (or "no difference" and every policy tied with it), and Q-exit − the best rule at that budget with its paired
    95 % interval (difference_words: "no difference" when it holds 0 or rounds to 0)."""
    names = front["contenders"]
    header = ["budget", *(short_for(n, competitor) for n in names), "leads", "Q-exit − the best rule"]
    rows = []
    for r in front["rows"]:
        b = r[block]
        pol = b["policies"]
        lead = short_for(b["leader"], competitor)
        leads = "no difference: " + ", ".join([lead, *(short_for(t, competitor) for t in b["tied"])]) if b["tied"] else lead
        rules = [n for n in names if n in pol and n not in ("sampled", "learned_q")]
        best = max(rules, key=lambda n: pol[n]["accuracy"]) if rules and "learned_q" in pol else None
        vs = "-" if best is None else (f"{short_for(best, competitor)}: " + difference_words(
            pol["learned_q"]["accuracy"] - pol[best]["accuracy"], b["ci95"][f"learned_q-{best}"]))
        budget = f"{r['budget']:.2f} (E[n])" if r["reference"] else steps_text(r["budget"])
        rows.append([budget, *(_cell(pol[n]) if n in pol else "-" for n in names), leads, vs])
    return header, rows


def budget_lines(front: dict, competitor: str = "") -> list:
    """The CLI's lines of the frontier: the table chosen on validation (test steps in brackets), then where the
    leaders are."""
    header, rows = budget_table(front, competitor)
    t = front["tuned_on"]
    out = [f"frontiers: each policy's operating point chosen on {t['n']:,} {t['set']} items to spend each budget "
           f"there; test accuracy (test steps) on {front['test_n']:,} test items:", "  " + " | ".join(header)]
    out += ["  " + " | ".join(r) for r in rows]
    leads = front["leads"]
    out.append("  leads alone at budgets: " + ("; ".join(
        f"{short_for(k, competitor)} {', '.join(steps_text(b) for b in v)}"
        for k, v in leads.items()) if leads else "none (the leader ties another at every budget)"))
    return out


def gap_lines(gaps: list, rule: str = "competitor.confidence_exit", competitor: str = "") -> list:
    """The residual gap of equal compute on the test set (ponder.analysis.budgets.residual_gap of Q-exit − `rule`)
    as lines: at each budget, the difference with the operating points chosen on validation (and how far apart their
    test steps are), and with both matched to the budget's steps on the test set."""
    out = [f"Q-exit − {short_for(rule, competitor)}: chosen on validation (test steps apart) and matched to the "
           "budget's steps on the test set:"]
    out += [f"  {steps_text(g['budget'])}: {g['chosen']:+.4f} at {g['steps_gap']:+.2f} steps apart, "
            f"{g['matched']:+.4f} at equal test steps" for g in gaps]
    return out


def reference_words(front: dict, name: str) -> str:
    """'+0.0184 [+0.0159, +0.0211]' or 'no difference': the reference point − `name` at the E[n] row."""
    r = next(r for r in front["rows"] if r["reference"])
    pol = r["chosen"]["policies"]
    d = front["reference"]["accuracy"] - pol[name]["accuracy"]
    ci = r["chosen"]["versus_reference"][name]
    return "no difference" if no_difference(d, ci) else f"{d:+.4f} [{ci[0]:+.4f}, {ci[1]:+.4f}]"


def headline(baselines: dict, against: Optional[dict] = None) -> str:
    """The first sentence of a "worth it?" section: the verdict against the competitor when one was measured, else
    against this network's own rules; '' for a result measured before frontiers were."""
    if against:
        return against["verdict"]["sentence"]
    if baselines.get("verdict"):
        return baselines["verdict"]["sentence"]
    return verdict_sentence(baselines["budgets"]) if baselines.get("budgets") else ""
