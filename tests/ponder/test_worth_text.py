"""ponder/analysis/worth_text.py: the halts N forced, the best signal and the frontier in words and lines."""
from ponder.analysis.worth_text import (NEVER_CHOSE, auroc_sentence, budget_lines, budget_table, forced_sentence,
                                        gap_lines, halt_forced)

from helpers import fake_unroll as unroll


def forced(share, q_share=0.3):
    return {"steps": 20, "mass_on_last_step": share, "sampled": share, "q_exit": {"q": 0.5, "share": q_share},
            "at_equal_steps": {"learned_q": 0.25, "confidence_exit": 0.5}}


def test_a_halt_at_n_is_forced():
    assert halt_forced(20, 20) and not halt_forced(19, 20) and not halt_forced(1, 1)


def test_forced_sentence_says_n_stopped_it_when_it_mostly_did():
    s = forced_sentence(forced(0.63))
    assert s.startswith(f"Mostly {NEVER_CHOSE}: 63.0% of the sampled halts on the test items are at step N = 20")
    assert "Q-exit 25.0%, confidence exit 50.0%" in s and "30.0% of them" in s
    few = forced_sentence(forced(0.01), "validation")
    assert NEVER_CHOSE not in few and few.startswith("N forced few of its stops: 1.0%") and "validation items" in few
    assert "draw stopped" not in s + few


def test_auroc_sentence_names_the_best_signal():
    a = {"halted_by_n": [0.6, 0.7, None], "confidence": [0.9, 0.8, None], "patience": [0.5, 0.75, None],
         "best": ["confidence", "confidence", None], "mean": {"halted_by_n": 0.65, "confidence": 0.85, "patience": 0.625}}
    s = auroc_sentence(a, "m")
    assert s.startswith("m: the signal that best tells a right answer at step n from a wrong one is the answer's "
                        "confidence") and "the answer's confidence 0.850 (best at 2 of 2 steps)" in s
    assert "No step" in auroc_sentence({"confidence": [None], "best": [None], "mean": {"confidence": None}})


def test_budget_and_gap_lines_have_a_row_per_budget():
    from ponder.analysis.against import against
    out = against(unroll(200, 4, 0), unroll(200, 4, 1), unroll(200, 4, 2), unroll(200, 4, 3), "deep")
    lines = budget_lines(out["budgets"], "deep")
    assert len(lines) == 2 + len(out["budgets"]["rows"]) + 1 and "deep: confidence exit" in lines[1]
    assert "(E[n])" in "".join(lines) and lines[-1].startswith("  leads alone at budgets: ")
    header, rows = budget_table(out["budgets"], "deep")
    assert header[-1] == "Q-exit − the best rule" and all(r[-1] == "-" or ": " in r[-1] for r in rows)
    from ponder.analysis.budgets import budget_frontier, contenders
    val, test = unroll(200, 4, 0), unroll(200, 4, 1)
    _, own = budget_table(budget_frontier(contenders(val, test), val, test, resamples=100))
    assert own[0][-1].endswith(": no difference")          # at 1 step each of its policies answers at step 1
    assert len(gap_lines(out["residual_gap"], "deep")) == 1 + len(out["residual_gap"])
