"""Is the extra thought worth it? The answer in one plain sentence, from a budget frontier
(ponder.analysis.budgets.budget_frontier): the first words of every "worth it?" section, the README and the CLI.

The learned halting's reference point (the better of the sampled halting and its Q-exit, at the sampled halting's
mean E[n]) against the rules (a confidence exit, patience, a fixed depth: of the same network, or of a fair
competitor's when one is given), every difference read with one rule (budgets.no_difference: its 95 % interval holds
0 or it rounds to 0 at 4 decimals):

    No:             a rule is as accurate as the learned halting (or more) with fewer steps, or more accurate with
                    the same steps
    No difference:  the best rule at the same steps is as accurate, and none is with fewer
    Mixed:          the learned halting leads at its own steps, but at fewer steps a rule leads the Q-exit
    Yes:            the learned halting leads every rule at its own steps and at every budget below them
"""
from __future__ import annotations

from .budgets import LEARNED, no_difference

RULE_WORDS = {"confidence_exit": "stopping when confident", "patience": "stopping once the answer stops changing",
              "fixed_depth": "a fixed depth"}
COMPETITOR_WORDS = {"confidence_exit": "stopping when confident", "patience": "stopping once its answer stops changing",
                    "fixed_depth": "at a fixed depth"}
LEARNED_WORDS = {"sampled": "the learned halting (sampled)", "learned_q": "the learned halting (Q-exit)"}


SHORT = {"sampled": "sampled", "learned_q": "Q-exit", "confidence_exit": "confidence exit", "patience": "patience",
         "fixed_depth": "fixed depth"}


def short_for(name: str, competitor: str = "") -> str:
    """A table's name of a policy: 'confidence exit', 'parity-15-deep: confidence exit' for a competitor's."""
    prefix, _, rule = name.rpartition(".")
    return f"{competitor or 'competitor'}: {SHORT.get(rule, rule)}" if prefix else SHORT.get(rule, rule)


def words_for(name: str, competitor: str = "") -> str:
    """How a sentence names a policy: 'stopping when confident' for this network's confidence exit,
    'parity-15-deep stopping when confident' for a competitor's ('competitor.confidence_exit')."""
    if name in LEARNED_WORDS:
        return LEARNED_WORDS[name]
    prefix, _, rule = name.rpartition(".")
    return (f"{competitor or 'the competitor'} {COMPETITOR_WORDS.get(rule, rule)}" if prefix else
            RULE_WORDS.get(rule, rule))


def steps_text(steps: float) -> str:
    """'3' for 3.02 mean steps, '14.9' for 14.88."""
    return f"{round(steps):d}" if abs(steps - round(steps)) < 0.05 else f"{steps:.1f}"


def steps_words(steps: float) -> str:
    """'1 step', '3 steps', '14.9 steps'."""
    t = steps_text(steps)
    return f"{t} step" if t == "1" else f"{t} steps"


def difference_words(d: float, ci) -> str:
    """'no difference' when the interval holds 0 or d rounds to 0; else '+0.0184 [+0.0159, +0.0211]'. Never a
    signed zero with its interval."""
    if no_difference(d, ci):
        return "no difference"
    return f"{d:+.4f} [{ci[0]:+.4f}, {ci[1]:+.4f}]"


def _rules(front: dict, rules) -> list:
    return [n for n in front["contenders"] if n not in LEARNED and (rules is None or n in rules)]


def verdict(front: dict, rules=None, competitor: str = "") -> dict:
    """{answer: yes / no / no difference / mixed, sentence, rule (the rule it names), ...}: the verdict of a budget
    frontier, against `rules` (names among its contenders; default every rule in it). competitor: the competitor's
    name, for the words of its rules."""
    ref = front["reference"]
    names = _rules(front, rules)
    if not names:
        return {"answer": None, "rule": None, "sentence": "No rule was measured to compare the learned halting with."}
    rows = sorted(front["rows"], key=lambda r: r["budget"])
    ref_row = next(r for r in rows if r["reference"])
    say = lambda n: words_for(n, competitor)                                  # noqa: E731
    s_ref, a_ref = ref["mean_steps"], ref["accuracy"]
    # a rule as accurate with fewer steps: the fewest steps of any
    cheaper = []
    for r in rows:
        pol, vs = r["chosen"]["policies"], r["chosen"]["versus_reference"]
        for n in names:
            if n in pol and pol[n]["mean_steps"] < s_ref - 0.5:
                d = a_ref - pol[n]["accuracy"]
                if no_difference(d, vs[n]) or d < 0:
                    cheaper.append((pol[n]["mean_steps"], n, pol[n]["accuracy"], d, vs[n]))
    if cheaper:
        steps, n, acc, d, ci = min(cheaper)
        more = "more accurate" if not no_difference(d, ci) else "as accurate"
        return {"answer": "no", "rule": n, "steps": steps, "accuracy": acc,
                "sentence": f"No: {say(n)} is {more} ({acc:.4f}) with {steps_words(steps)} instead of the "
                            f"{steps_text(s_ref)} {say(ref['name'])} spends ({a_ref:.4f})."}
    pol, vs = ref_row["chosen"]["policies"], ref_row["chosen"]["versus_reference"]
    best = max((n for n in names if n in pol), key=lambda n: pol[n]["accuracy"])
    d, ci = a_ref - pol[best]["accuracy"], vs[best]
    s_best = pol[best]["mean_steps"]
    at = (f"at the same {steps_words(s_ref)}" if steps_text(s_ref) == steps_text(s_best) else
          f"at equal compute ({steps_text(s_ref)} and {steps_words(s_best)} on the test items)")
    if d < 0 and not no_difference(d, ci):
        return {"answer": "no", "rule": best, "steps": pol[best]["mean_steps"], "accuracy": pol[best]["accuracy"],
                "sentence": f"No: {say(best)} is more accurate ({pol[best]['accuracy']:.4f} against {a_ref:.4f}) {at}."}
    if no_difference(d, ci):
        return {"answer": "no difference", "rule": best, "steps": pol[best]["mean_steps"],
                "accuracy": pol[best]["accuracy"],
                "sentence": f"No difference: {say(best)} is as accurate as {say(ref['name'])} "
                            f"({pol[best]['accuracy']:.4f} and {a_ref:.4f}) {at}, and no rule is as accurate with "
                            "fewer steps."}
    behind = []                                  # budgets below its own where a rule leads the Q-exit
    for r in rows:
        p, ci95 = r["chosen"]["policies"], r["chosen"]["ci95"]
        if r["budget"] >= ref["budget"] or "learned_q" not in p:
            continue
        for n in names:
            key = f"learned_q-{n}"
            if n in p and key in ci95 and ci95[key][1] < 0 and round(p["learned_q"]["accuracy"] - p[n]["accuracy"], 4):
                behind.append((r["budget"], n))
    lead = f"{say(ref['name'])} is {d:.4f} more accurate than {say(best)} {at}"
    if behind:
        where = sorted({b for b, _ in behind})
        top = where[-1]
        rule = next(n for b, n in behind if b == top)
        below = [r["budget"] for r in rows if 1 < r["budget"] <= top]   # at 1 step every policy answers at step 1
        span = (f"with {steps_words(top)} or fewer" if set(below) <= set(where) else
                f"at {len(where)} budgets between {steps_text(where[0])} and {steps_text(top)} steps")
        return {"answer": "mixed", "rule": rule, "steps": top, "accuracy": None, "budgets_behind": where,
                "sentence": f"Mixed: {lead}, but {span} {say(rule)} is more accurate than its Q-exit."}
    return {"answer": "yes", "rule": best, "steps": pol[best]["mean_steps"], "accuracy": pol[best]["accuracy"],
            "sentence": f"Yes: {lead}, and no rule is as accurate with fewer steps."}


def verdict_sentence(front: dict, rules=None, competitor: str = "") -> str:
    """verdict()'s sentence alone."""
    return verdict(front, rules, competitor)["sentence"]
