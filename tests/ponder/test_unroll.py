"""ponder/analysis/unroll.py: metrics of a trained model (accuracy at the halting step, step statistics,
per-step accuracy, the halting distribution next to the prior, by class), and parity by difficulty."""
import json

import pytest
import torch

from helpers import tiny_model
from ponder import data as D
from ponder.analysis.unroll import by_k_rows, group_stats, measure_test, near_chance, per_step_accuracy, summarize
from ponder.config import TrainConfig
from ponder.training.loop import train

MNIST = TrainConfig()


def evaluate_parity(model, preset: str, size: int):
    return measure_test(model, TrainConfig(task="parity", parity_preset=preset), None, size)


def small_mnist(m, n_train=6000, n_val=500):
    return D.Mnist(m.train_x[:n_train], m.train_y[:n_train], m.val_x[:n_val], m.val_y[:n_val],
                   m.test_x[:1000], m.test_y[:1000])


@pytest.mark.long
def test_mnist_short_training_learns_and_evaluates(mnist):
    small = small_mnist(mnist)
    res = train(TrainConfig(epochs=1, batch_size=64, device="cpu", max_steps=8, rotate_train=10.0), data=small)
    assert res.record.status == "completed"
    ev = measure_test(res.model, MNIST, small)
    assert ev.accuracy > 0.85 and ev.n == 1000 and ev.mode == "sample" and ev.split == "test"
    assert 1 <= ev.mean_steps <= 8
    assert len(ev.per_step_accuracy) == 8 and len(ev.halting_distribution) == 8
    assert abs(sum(ev.halting_distribution) - 1) < 1e-4 and abs(sum(ev.prior) - 1) < 1e-4
    assert len(ev.by_class) == 10 and sum(r["count"] for r in ev.by_class) == 1000
    # invariant: the accuracy is the count-weighted mean of the per-class accuracies
    assert ev.accuracy == pytest.approx(sum(r["accuracy"] * r["count"] for r in ev.by_class) / 1000, abs=1e-6)
    det = measure_test(res.model, MNIST, small, 300, "deterministic")
    exp = measure_test(res.model, MNIST, small, 300, "expected")
    assert det.accuracy > 0.85 and exp.accuracy > 0.85 and det.n == exp.n == 300
    # expected mode runs every step: its 'steps' are E[n], whose mean is the expected_steps metric
    assert exp.mean_steps == pytest.approx(exp.expected_steps["mean"], abs=1e-4)


def test_group_stats_and_by_k_by_hand():
    # 4 samples: correct T F T T, halting steps 1 2 3 4, p of two steps; k = 1 1 2 2
    stats = {"correct": torch.tensor([True, False, True, True]), "halt_step": torch.tensor([1.0, 2.0, 3.0, 4.0]),
             "p": torch.tensor([[1.0, 0.5, 0.0, 0.25], [0.0, 0.5, 1.0, 0.75]])}
    # E[n] = 1*p_1 + 2*p_2 per sample: 1, 1.5, 2, 1.75
    g = group_stats(stats, torch.tensor([True, True, False, False]))
    assert g == {"count": 2, "accuracy": 0.5, "mean_steps": 1.5, "expected_steps": 1.25,
                 "halting_distribution": [0.75, 0.25]}
    rows = by_k_rows(stats, torch.tensor([1, 1, 2, 2]))
    # std of E[n] (sample std over the two inputs): k=1: (1, 1.5) -> 0.353553; k=2: (2, 1.75) -> 0.176777
    # mean p per k: k=1 ((1 + 0.5) / 2, (0 + 0.5) / 2); k=2 ((0 + 0.25) / 2, (1 + 0.75) / 2)
    assert rows == [{"k": 1, "count": 2, "accuracy": 0.5, "mean_steps": 1.5, "expected_steps": 1.25,
                     "halting_distribution": [0.75, 0.25], "expected_steps_std": pytest.approx(0.353553, abs=1e-6)},
                    {"k": 2, "count": 2, "accuracy": 1.0, "mean_steps": 3.5, "expected_steps": 1.875,
                     "halting_distribution": [0.125, 0.875], "expected_steps_std": pytest.approx(0.176777, abs=1e-6)}]


def test_parity_evaluation_easy_hard_is_a_split_of_one_test_set():
    model = tiny_model("parity", max_steps=6)
    ev = evaluate_parity(model, "small", size=1000)
    easy, hard = ev.easy, ev.hard
    assert easy.count + hard.count == ev.n == 1000 and ev.test_k == [1, 8]
    assert easy.k_range == [1, 4] and hard.k_range == [5, 8]
    # invariants: the whole set's accuracy and mean steps are the count-weighted means of the halves, and
    # of the per-k rows
    for key in ("accuracy", "mean_steps"):
        assert getattr(ev, key) == pytest.approx((getattr(easy, key) * easy.count + getattr(hard, key) * hard.count)
                                                 / 1000, abs=1e-5)
    assert [r["k"] for r in ev.by_k] == list(range(1, 9))
    assert abs(sum(easy.halting_distribution) - 1) < 1e-4 and abs(sum(hard.halting_distribution) - 1) < 1e-4
    # the same seed replays the same draws
    assert evaluate_parity(model, "small", size=1000).accuracy == ev.accuracy


# ----------------------------------------------------------------------------- per-input E[n] measurements

def _stats(p, correct, halt_step=None):
    """unroll_stats-shaped dict from halting distributions p [N, B] and correctness [B]."""
    N, B = p.shape
    return {"p": p, "correct": torch.tensor(correct), "pred": torch.zeros(B, dtype=torch.long),
            "halt_step": torch.ones(B) if halt_step is None else torch.tensor(halt_step, dtype=torch.float),
            "confidence": torch.ones(B), "per_step_correct": torch.ones(N, B, dtype=torch.bool)}


def test_expected_steps_spread_and_correctness_by_hand():
    # three inputs, N = 3: p = (1, 0, 0) -> E[n] 1; (0, 1, 0) -> 2; (0, 0.5, 0.5) -> 2.5
    p = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.5], [0.0, 0.0, 0.5]])
    s = summarize(_stats(p, [True, False, False]), torch.tensor([0, 1, 1]), 0.5)
    # mean (1 + 2 + 2.5) / 3 = 1.8333; std (sample) of (1, 2, 2.5): deviations -0.8333, 0.1667, 0.6667,
    # squares 0.6944 + 0.0278 + 0.4444 = 1.1667, / 2 = 0.5833, sqrt = 0.7638
    assert s["expected_steps"] == pytest.approx({"mean": 1.833333, "std": 0.763763, "min": 1.0, "max": 2.5}, abs=1e-5)
    assert s["by_correctness"]["correct"] == {"count": 1, "expected_steps": pytest.approx(1.0)}
    assert s["by_correctness"]["wrong"] == {"count": 2, "expected_steps": pytest.approx(2.25)}
    assert [r["expected_steps"] for r in s["by_class"]] == pytest.approx([1.0, 2.25])


def test_per_step_accuracy_by_hand():
    # N = 2, three inputs: step 1 right on 2 of 3, step 2 right on all 3 -> (0.6667, 1.0)
    stats = _stats(torch.ones(2, 3) / 2, [True, True, True])
    stats["per_step_correct"] = torch.tensor([[True, False, True], [True, True, True]])
    assert per_step_accuracy(stats) == pytest.approx([2 / 3, 1.0])


def test_by_correctness_with_no_wrong_answer_is_null_not_nan():
    s = summarize(_stats(torch.tensor([[1.0, 1.0], [0.0, 0.0]]), [True, True]), torch.tensor([0, 1]), 0.5)
    assert s["by_correctness"]["wrong"] == {"count": 0, "expected_steps": None}
    json.dumps(s, allow_nan=False)                                  # strict JSON


def test_parity_blocks_use_the_preset_ranges_and_by_k_adds_up():
    from helpers import tiny_model
    model = tiny_model("parity", max_steps=6, n_elems=15)
    res = evaluate_parity(model, "video-15", size=600)
    assert res.easy.k_range == [1, 4] and res.hard.k_range == [11, 15]
    rows = {r["k"]: r for r in res.by_k}
    assert sum(r["count"] for r in rows.values()) == 600
    assert res.easy.count == sum(rows[k]["count"] for k in range(1, 5) if k in rows)
    # invariant: a block's mean E[n] is the count-weighted mean of its k rows
    hard = [rows[k] for k in range(11, 16) if k in rows]
    weighted = sum(r["expected_steps"] * r["count"] for r in hard) / sum(r["count"] for r in hard)
    assert res.hard.expected_steps == pytest.approx(weighted, rel=1e-5)
    # a preset without its own ranges splits the test range in halves
    small = evaluate_parity(tiny_model("parity", max_steps=6), "small", size=200)
    assert small.easy.k_range == [1, 4] and small.hard.k_range == [5, 8]


def test_near_chance_flags_runs_that_learned_nothing():
    # guessing: 10% on MNIST, 50% on parity; within 10 points of it is "learned nothing"
    assert near_chance("mnist", 0.1135) and not near_chance("mnist", 0.2) and not near_chance("mnist", 0.99)
    assert near_chance("parity", 0.52) and not near_chance("parity", 0.61)
    assert not near_chance("mnist", None) and not near_chance("unknown", 0.0)
