"""ponder/analysis/against.py: a pondering network against a competitor on the same items: refused in one line for
another task or other items, the frontier of both, the verdict against the competitor's rules, its AUROCs."""
import torch

from ponder.analysis.against import against, competitor_path, refusal, same_items
from ponder.tasks.base import EvalSet

from helpers import fake_unroll as unroll


def sets(seed: int, n: int = 6):
    g = torch.Generator().manual_seed(seed)
    return (EvalSet(torch.randn(n, 3, generator=g), torch.arange(n)),
            EvalSet(torch.randn(n, 3, generator=g), torch.arange(n)))


def test_the_same_items_or_a_one_line_refusal():
    a, b = sets(0), sets(0)
    assert same_items(a[0], b[0]) and refusal("parity", "parity", a, b) is None
    assert refusal("parity", "mnist") == "--against needs a run of the same task (parity), got a mnist run"
    why = refusal("parity", "parity", a, sets(1))
    assert "same test and validation items" in why and "\n" not in why
    assert "has none" in refusal("parity", "parity", (a[0], None), (b[0], None))
    short = (EvalSet(a[0].x[:5], a[0].y[:5]), a[1])
    assert refusal("parity", "parity", a, short) is not None          # fewer items: not the same sets


def test_against_compares_with_the_competitors_rules_only():
    val, test = unroll(300, 5, 0), unroll(300, 5, 1)
    other_val, other_test = unroll(300, 4, 2, skill=0.3), unroll(300, 4, 3, skill=0.3)
    out = against(val, test, other_val, other_test, "deep")
    assert out["name"] == "deep" and out["max_steps"] == 4
    names = out["budgets"]["contenders"]
    assert names == ["learned_q", "confidence_exit", "fixed_depth", "patience", "competitor.confidence_exit",
                     "competitor.fixed_depth", "competitor.patience"]              # its λ is not trained: no Q-exit
    assert [r["budget"] for r in out["budgets"]["rows"]][-1] == 5.0                # up to the longer N
    assert out["verdict"]["rule"].startswith("competitor.") and "deep " in out["verdict"]["sentence"]
    assert not (out["verdict_own_rules"]["rule"] or "").startswith("competitor.")
    assert set(out["auroc"]) == {"confidence", "patience", "best", "mean"} and len(out["auroc"]["confidence"]) == 4
    assert [g["budget"] for g in out["residual_gap"]] == [r["budget"] for r in out["budgets"]["rows"]]


def test_the_shipped_competitor_is_name_deep_beside_name(tmp_path):
    (tmp_path / "m").mkdir()
    assert competitor_path(tmp_path / "m") is None
    (tmp_path / "m-deep").mkdir()
    (tmp_path / "m-deep" / "run.json").write_text("{}")
    assert competitor_path(tmp_path / "m") == tmp_path / "m-deep"
    assert competitor_path(tmp_path / "m-deep") is None                            # a competitor has none
