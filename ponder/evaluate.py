"""Evaluation: accuracy at the halting step, halting-step statistics, per-step accuracy,
the mean learned halting distribution next to the prior, by class; parity by difficulty.

One full unroll per batch gives everything at once; the halting step of 'sample' and
'deterministic' modes is then read off the unroll (tests/test_halting.py checks that this
equals what early-exit inference gives for the same random draws).
"""
from __future__ import annotations

from typing import Optional

import torch

from . import data as D
from .halting import PonderNet, expected_steps, first_true, halt_mask, draw_uniforms
from .config import PARITY_PRESETS
from .losses import log_geometric_prior
from .analysis.baselines import class_groups, quartile_groups, range_groups, worth_it


@torch.no_grad()
def unroll_stats(model: PonderNet, x: torch.Tensor, target: torch.Tensor, mode: str = "sample",
                 batch_size: int = 1000, seed: int = 0) -> dict:
    """Per-sample results for inputs x [B, ...] and labels [B] (tensors on the model's device).

    Returns tensors (CPU): pred, halt_step (float: E[n] for 'expected'), correct, confidence,
    per_step_correct [N, B], per_step_confidence [N, B] (the top class's probability at step n), p [N, B].
    """
    model.eval()
    dev = next(model.parameters()).device
    g = torch.Generator().manual_seed(seed)
    use_amp = dev.type == "cuda"
    rows = {k: [] for k in ("pred", "halt_step", "correct", "confidence", "per_step_correct", "per_step_confidence", "p")}
    for i in range(0, len(target), batch_size):
        xb, yb = x[i:i + batch_size].to(dev), target[i:i + batch_size].to(dev).long()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp):
            out = model(xb)
        N, B = out.log_p.shape
        probs = model.step_fn.probs(out.y.flatten(0, 1)).float().view(N, B, -1)    # [N, B, C]
        p = out.log_p.exp()                                                          # [N, B]
        if mode == "expected":
            final = (p.unsqueeze(-1) * probs).sum(0)                                 # [B, C]
            steps = expected_steps(out.log_p)
        else:
            u = draw_uniforms(N, B, g) if mode == "sample" else None
            steps = first_true(halt_mask(out.lambda_logits, mode, u))               # [B] 1-based
            final = probs.gather(0, (steps - 1).view(1, B, 1).expand(1, B, probs.shape[2]))[0]
        conf, pred = final.max(1)
        rows["pred"].append(pred.cpu())
        rows["halt_step"].append(steps.float().cpu())
        rows["correct"].append((pred == yb).cpu())
        rows["confidence"].append(conf.cpu())
        top, top_class = probs.max(2)                                                # [N, B]
        rows["per_step_correct"].append((top_class == yb.unsqueeze(0)).cpu())
        rows["per_step_confidence"].append(top.cpu())
        rows["p"].append(p.cpu())
    cat_dims = {"per_step_correct": 1, "per_step_confidence": 1, "p": 1}
    return {k: torch.cat(v, cat_dims.get(k, 0)) for k, v in rows.items()}


CHANCE = {"mnist": 0.1, "parity": 0.5}      # accuracy of guessing: 10 classes / odd or even


def near_chance(task: str, accuracy, margin: float = 0.1) -> bool:
    """True when a test accuracy is within `margin` of guessing: the run learned (next to) nothing."""
    return accuracy is not None and task in CHANCE and accuracy < CHANCE[task] + margin


def expected_steps_per_input(stats: dict) -> torch.Tensor:
    """E[n] = sum_n n p_n for every input: the noise-free measure of how long it ponders. [B]."""
    return expected_steps(stats["p"].clamp_min(1e-45).log())


def spread(values: torch.Tensor) -> dict:
    """{mean, std, min, max} of a 1-D tensor (std 0 for one value)."""
    v = values.double()
    return {"mean": v.mean().item(), "std": v.std().item() if len(v) > 1 else 0.0,
            "min": v.min().item(), "max": v.max().item()}


def summarize(stats: dict, labels: torch.Tensor, lambda_p: float, by_class: bool = True) -> dict:
    """Plain-Python summary of unroll_stats (JSON-ready).

    mean/median/std_steps are over the halting steps of the mode (sampled steps are noisy: std ~ 3
    for one input); expected_steps is over E[n] per input, which is what to compare inputs by.
    by_correctness: how many the mode got right and wrong, and their mean E[n].
    """
    steps = stats["halt_step"]
    N = stats["p"].shape[0]
    en = expected_steps_per_input(stats)                                     # [B]
    right = stats["correct"].bool()
    out = {
        "n": int(len(steps)),
        "accuracy": stats["correct"].float().mean().item(),
        "mean_steps": steps.mean().item(),
        "median_steps": steps.median().item(),
        "std_steps": steps.std().item() if len(steps) > 1 else 0.0,
        "expected_steps": spread(en),
        "per_step_accuracy": stats["per_step_correct"].float().mean(1).tolist(),
        "by_correctness": {name: {"count": int(m.sum()), "expected_steps": en[m].mean().item() if m.any() else None}
                           for name, m in (("correct", right), ("wrong", ~right))},
        "halting_distribution": stats["p"].mean(1).tolist(),
        "prior": log_geometric_prior(lambda_p, N).exp().tolist(),
    }
    if by_class:
        labels = labels.cpu().long()
        out["by_class"] = [
            {"label": int(c), "count": int(m.sum()), "accuracy": stats["correct"][m].float().mean().item(),
             "mean_steps": steps[m].mean().item(), "expected_steps": en[m].mean().item(),
             "halting_distribution": stats["p"][:, m].mean(1).tolist()}
            for c in labels.unique() for m in [labels == c]
        ]
    return out


def evaluate(model: PonderNet, x: torch.Tensor, y: torch.Tensor, mode: str = "sample",
             seed: int = 0, batch_size: int = 1000, by_class: bool = True) -> dict:
    """Summary metrics of a model on ready inputs x and labels y."""
    return summarize(unroll_stats(model, x, y, mode, batch_size, seed), y, model.lambda_p, by_class)


def evaluate_mnist(model: PonderNet, mnist: D.Mnist, mode: str = "sample", split: str = "test",
                   limit: Optional[int] = None, seed: int = 0, batch_size: int = 1000) -> dict:
    """Metrics on an MNIST split (rotated test sets: ponder.studies.rotation_study), with the fixed-depth and
    confidence-exit baselines and per-step accuracy by class and by quartile of E[n]."""
    xs, ys = mnist_split(mnist, split, limit)
    stats = unroll_stats(model, D.mnist_inputs(xs), ys, mode, batch_size, seed)
    res = summarize(stats, ys, model.lambda_p)
    res.update(worth_it(stats, {**quartile_groups(expected_steps_per_input(stats)), **class_groups(ys.long(), "digit")}))
    res["split"], res["mode"] = split, mode
    return res


def mnist_split(mnist: D.Mnist, split: str = "test", limit: Optional[int] = None):
    """(uint8 images [M, 28, 28], labels [M]) of a split, the first `limit` of them."""
    xs = {"test": mnist.test_x, "val": mnist.val_x, "train": mnist.train_x}[split]
    ys = {"test": mnist.test_y, "val": mnist.val_y, "train": mnist.train_y}[split]
    return (xs[:limit], ys[:limit]) if limit else (xs, ys)


def halves(lo: int, hi: int) -> tuple:
    """((lo, mid), (mid + 1, hi)), mid = (lo + hi) // 2: the easy and hard halves of a range of k."""
    mid = (lo + hi) // 2
    return (lo, mid), (mid + 1, hi)


def group_stats(stats: dict, mask: torch.Tensor) -> dict:
    """count, accuracy, mean_steps (sampled), expected_steps (mean E[n]) and halting_distribution of
    the samples where mask [B] is True."""
    return {"count": int(mask.sum()), "accuracy": stats["correct"][mask].float().mean().item(),
            "mean_steps": stats["halt_step"][mask].mean().item(),
            "expected_steps": expected_steps_per_input(stats)[mask].mean().item(),
            "halting_distribution": stats["p"][:, mask].mean(1).tolist()}


def by_k_rows(stats: dict, k: torch.Tensor) -> list:
    """count, accuracy, mean halting step, and mean and std of E[n] for each number of non-zeros k [B]
    of parity inputs."""
    en = expected_steps_per_input(stats)
    return [{"k": int(v), "count": int(m.sum()), "accuracy": stats["correct"][m].float().mean().item(),
             "mean_steps": stats["halt_step"][m].mean().item(), "expected_steps": en[m].mean().item(),
             "expected_steps_std": en[m].std().item() if m.sum() > 1 else 0.0}
            for v in k.unique() for m in [k == v]]


def parity_eval_preset(card: dict) -> dict:
    """The parity preset a run is measured on: its training preset, or every k of the model's own n when the
    card's preset does not fit the model (an edited or imported card)."""
    n = card["model"]["n_elems"]
    preset = PARITY_PRESETS.get(card.get("train", {}).get("parity_preset"), {})
    return preset if preset.get("n_elems") == n else dict(n_elems=n, train_k=(1, n), test_k=(1, n))


def evaluate_parity(model: PonderNet, preset: dict, mode: str = "sample", seed: int = 0,
                    size: int = 10000, batch_size: int = 2000) -> dict:
    """Parity on the preset's fixed test set, with `easy` and `hard` blocks over the preset's ranges of
    k (its `easy` / `hard`, else the two halves of the test range) and one row per k; with the fixed-depth and
    confidence-exit baselines and per-step accuracy for easy, hard and each k."""
    n = preset["n_elems"]
    k_lo, k_hi = preset["test_k"]
    x, y, k = D.parity_eval_set(n, k_lo, k_hi, size)
    stats = unroll_stats(model, x, y, mode, batch_size, seed)
    res = summarize(stats, y, model.lambda_p, by_class=False)
    res["mode"], res["test_k"] = mode, [k_lo, k_hi]
    ranges = (preset["easy"], preset["hard"]) if "easy" in preset else halves(k_lo, k_hi)
    for name, (lo, hi) in zip(("easy", "hard"), ranges):
        m = (k >= lo) & (k <= hi)
        res[name] = {"k_range": [lo, hi], **group_stats(stats, m)}
    res["by_k"] = by_k_rows(stats, k)
    res.update(worth_it(stats, range_groups(k, dict(zip(("easy", "hard"), ranges)))))
    return res
