"""ponder/analysis/verdict.py: "is the extra thought worth it?" answered in one sentence, on frontiers made by hand
(yes, no, no difference, mixed; a difference that rounds to 0; a competitor's rules)."""
import pytest

from ponder.analysis.verdict import difference_words, steps_text, verdict, verdict_sentence, words_for

NAMES = ["learned_q", "confidence_exit", "fixed_depth"]
REF = {"name": "learned_q", "budget": 15.0, "mean_steps": 14.88, "accuracy": 0.9990}


def row(budget, pol, vs, ci=None, ref=False):
    """One budget's row: pol {name: (test steps, accuracy)}, vs {name: interval of the reference − it}, ci: the
    Q-exit − each rule's intervals at this budget (default: above 0)."""
    ci = ci or {f"learned_q-{k}": [0.001, 0.01] for k in pol if k != "learned_q"}
    return {"budget": budget, "reference": ref,
            "chosen": {"policies": {k: {"mean_steps": s, "accuracy": a} for k, (s, a) in pol.items()},
                       "ci95": ci, "versus_reference": vs}}


def front(rows, names=NAMES, ref=REF):
    return {"reference": ref, "contenders": names, "rows": rows}


BELOW = [0.01, 0.03]                     # the reference above this rule: its interval excludes 0


def test_yes_when_the_learned_halting_leads_at_its_steps_and_below():
    f = front([row(3.0, {"learned_q": (3.0, 0.90), "confidence_exit": (3.0, 0.85), "fixed_depth": (3.0, 0.80)},
                   {"confidence_exit": BELOW, "fixed_depth": BELOW}),
               row(15.0, {"learned_q": (14.88, 0.999), "confidence_exit": (14.55, 0.975), "fixed_depth": (15.0, 0.99)},
                   {"confidence_exit": [0.02, 0.03], "fixed_depth": [0.005, 0.012]}, ref=True)])
    v = verdict(f)
    assert v["answer"] == "yes" and v["rule"] == "fixed_depth"
    # 0.9990 − 0.9900 against the best rule at the reference's steps
    assert v["sentence"] == ("Yes: the learned halting (Q-exit) is 0.0090 more accurate than a fixed depth at equal "
                             "compute (14.9 and 15 steps on the test items), and no rule is as accurate with fewer "
                             "steps.")


def test_no_when_a_rule_is_as_accurate_with_fewer_steps():
    f = front([row(3.0, {"learned_q": (3.0, 0.60), "confidence_exit": (3.02, 0.9988), "fixed_depth": (3.0, 0.6)},
                   {"confidence_exit": [-0.0003, 0.0008], "fixed_depth": BELOW}),
               row(5.0, {"learned_q": (5.0, 0.70), "confidence_exit": (4.9, 0.9991), "fixed_depth": (5.0, 0.7)},
                   {"confidence_exit": [-0.0004, 0.0003], "fixed_depth": BELOW}),
               row(15.0, {"learned_q": (14.88, 0.999), "confidence_exit": (14.55, 0.999), "fixed_depth": (15.0, 0.9)},
                   {"confidence_exit": [-0.0003, 0.0003], "fixed_depth": BELOW}, ref=True)])
    v = verdict(f)
    assert v["answer"] == "no" and v["rule"] == "confidence_exit" and v["steps"] == 3.02     # the fewest steps
    assert v["sentence"] == ("No: stopping when confident is as accurate (0.9988) with 3 steps instead of the 14.9 "
                             "the learned halting (Q-exit) spends (0.9990).")


def test_no_when_a_rule_is_more_accurate_at_the_same_steps():
    f = front([row(15.0, {"learned_q": (14.88, 0.999), "confidence_exit": (14.9, 0.9995), "fixed_depth": (15.0, 0.9)},
                   {"confidence_exit": [-0.0008, -0.0002], "fixed_depth": BELOW}, ref=True)])
    v = verdict(f)
    assert v["answer"] == "no" and "more accurate (0.9995 against 0.9990) at the same 14.9 steps" in v["sentence"]


def test_no_difference_when_the_best_rule_at_its_steps_is_as_accurate():
    f = front([row(3.0, {"learned_q": (3.0, 0.9), "confidence_exit": (3.0, 0.9), "fixed_depth": (3.0, 0.9)},
                   {"confidence_exit": BELOW, "fixed_depth": BELOW}),
               row(15.0, {"learned_q": (14.88, 0.999), "confidence_exit": (14.7, 0.9989), "fixed_depth": (15.0, 0.99)},
                   {"confidence_exit": [-0.0004, 0.0006], "fixed_depth": BELOW}, ref=True)])
    v = verdict(f)
    assert v["answer"] == "no difference"
    assert v["sentence"] == ("No difference: stopping when confident is as accurate as the learned halting (Q-exit) "
                             "(0.9989 and 0.9990) at equal compute (14.9 and 14.7 steps on the test items), and no "
                             "rule is as accurate with fewer steps.")


def test_a_difference_that_rounds_to_zero_is_no_difference_whatever_its_interval():
    f = front([row(4.65, {"learned_q": (4.65, 0.99410), "confidence_exit": (4.5, 0.99406), "fixed_depth": (4.66, 0.9941)},
                   {"confidence_exit": [0.00001, 0.00008], "fixed_depth": [0.0, 0.0]}, ref=True)],
              ref={"name": "learned_q", "budget": 4.65, "mean_steps": 4.65, "accuracy": 0.99410})
    s = verdict_sentence(f)
    assert s.startswith("No difference") and "0.0000" not in s and "below" not in s
    assert difference_words(-0.00001, [-0.00002, -0.000005]) == "no difference"
    assert difference_words(0.0184, [0.0159, 0.0211]) == "+0.0184 [+0.0159, +0.0211]"


def test_mixed_when_it_leads_at_its_steps_but_a_rule_leads_its_q_exit_with_fewer():
    behind = {"learned_q-confidence_exit": [-0.5, -0.3], "learned_q-fixed_depth": [0.0, 0.1]}
    f = front([row(b, {"learned_q": (b, 0.5), "confidence_exit": (b, 0.9), "fixed_depth": (b, 0.5)},
                   {"confidence_exit": BELOW, "fixed_depth": BELOW}, ci=behind) for b in (1.0, 2.0, 3.0)]
              + [row(10.0, {"learned_q": (10, 0.99), "confidence_exit": (10, 0.98), "fixed_depth": (10, 0.9)},
                     {"confidence_exit": BELOW, "fixed_depth": BELOW}),
                 row(15.0, {"learned_q": (14.88, 0.999), "confidence_exit": (14.5, 0.9985), "fixed_depth": (15, 0.99)},
                     {"confidence_exit": [0.0001, 0.0008], "fixed_depth": BELOW}, ref=True)])
    v = verdict(f)
    assert v["answer"] == "mixed" and v["budgets_behind"] == [1.0, 2.0, 3.0]
    assert v["sentence"] == ("Mixed: the learned halting (Q-exit) is 0.0005 more accurate than stopping when confident "
                             "at equal compute (14.9 and 14.5 steps on the test items), but with 3 steps or fewer "
                             "stopping when confident is more accurate than its Q-exit.")
    f["rows"][1]["chosen"]["ci95"] = {"learned_q-confidence_exit": [-0.1, 0.2]}      # level at 2: not "or fewer"
    assert "but at 2 budgets between 1 and 3 steps stopping when confident" in verdict_sentence(f)


def test_against_a_competitor_the_sentence_names_it_and_weighs_only_its_rules():
    names = NAMES + ["competitor.confidence_exit"]
    f = front([row(3.0, {"learned_q": (3.0, 0.6), "confidence_exit": (3.0, 0.999), "fixed_depth": (3.0, 0.6),
                         "competitor.confidence_exit": (3.1, 0.9994)},
                   {"confidence_exit": [-0.001, 0.001], "fixed_depth": BELOW, "competitor.confidence_exit": [0.0001, 0.0008]}),
               row(15.0, {"learned_q": (14.88, 0.9998), "confidence_exit": (14.5, 0.97), "fixed_depth": (15, 0.99),
                          "competitor.confidence_exit": (14.0, 0.9994)},
                   {"confidence_exit": BELOW, "fixed_depth": BELOW, "competitor.confidence_exit": [0.0001, 0.0008]},
                   ref=True)], names=names, ref={**REF, "accuracy": 0.9998})
    s = verdict_sentence(f, rules=["competitor.confidence_exit"], competitor="parity-15-deep")
    assert s.startswith("Yes: the learned halting (Q-exit) is 0.0004 more accurate than parity-15-deep stopping when "
                        "confident")
    assert verdict(f)["answer"] == "no"              # its own confidence exit matches it at 3 steps


def test_words_and_steps():
    assert words_for("competitor.patience", "m-deep") == "m-deep stopping once its answer stops changing"
    assert words_for("competitor.fixed_depth", "m-deep") == "m-deep at a fixed depth"
    assert words_for("sampled") == "the learned halting (sampled)"
    assert [steps_text(x) for x in (3.02, 14.88, 1.0)] == ["3", "14.9", "1"]
    assert verdict(front([], names=["learned_q"]))["answer"] is None
