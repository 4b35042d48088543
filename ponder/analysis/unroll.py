"""Test measurements: accuracy at the halting step, halting-step statistics, per-step accuracy,
the mean learned halting distribution next to the prior, and the same by each task's groups
(digit class for MNIST; k and the easy / hard ranges for parity). measure_test() is the one
standard test measurement the lifecycle, the CLI, reproduce and the explorer make.

One full unroll per batch gives everything at once; the halting step of 'sample' and
'deterministic' modes is then read off the unroll (tests/test_halting.py checks that this
equals what early-exit inference gives for the same random draws).
"""
from __future__ import annotations

from typing import Optional

import torch

from ..config import TrainConfig
from ..halting import PonderNet, answer_mixture, expected_steps, first_true, halt_mask
from ..inference import draw_uniforms, method_answer
from ..losses import log_geometric_prior
from ..training.memory import measure_batch
from ..tasks import TASKS, get_task
from .against import against as compare_against, refusal
from .baselines import quartile_groups
from .equal_steps import worth_it
from .policies import q_exit_steps, q_for_steps
from .metrics import TestMetrics


@torch.no_grad()
def unroll_stats(model: PonderNet, x: torch.Tensor, target: torch.Tensor, mode: str = "sample",
                 batch_size: int = 1000, seed: int = 0, q: float = 0.5) -> dict:
    """Per-sample results for inputs x [B, ...] and labels [B] (tensors on the model's device); q: the Q-exit's
    of 'deterministic' mode.

    Returns tensors (CPU): pred, halt_step (float: E[n] for 'expected'), correct, confidence,
    per_step_correct [N, B], per_step_confidence [N, B] (the top class's probability at step n), per_step_pred [N, B]
    (that class, int16), p [N, B].
    Batches are cut to what fits in the measurement's memory budget (ponder.training.memory.measure_batch: every model
    the explorer trains fits batch_size 1000); MeasureMemoryError when not one input fits.
    """
    batch_size = measure_batch(model, batch_size)
    model.eval()
    dev = next(model.parameters()).device
    g = torch.Generator().manual_seed(seed)
    use_amp = dev.type == "cuda"
    rows = {k: [] for k in ("pred", "halt_step", "correct", "confidence", "per_step_correct", "per_step_confidence", "per_step_pred", "p")}
    for i in range(0, len(target), batch_size):
        xb, yb = x[i:i + batch_size].to(dev), target[i:i + batch_size].to(dev).long()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp):
            out = model(xb)
        N, B = out.log_p.shape
        probs = model.step_fn.probs(out.y.flatten(0, 1)).float().view(N, B, -1)    # [N, B, C]
        p = out.log_p.exp()                                                          # [N, B]
        if mode == "expected":
            final = answer_mixture(probs, out.log_p)                                 # [B, C]
            steps = expected_steps(out.log_p)
        elif model.method != "ponder":                                               # its own rule (ponder.methods)
            final, steps = method_answer(model, out)
        else:
            u = draw_uniforms(N, B, g) if mode == "sample" else None
            steps = first_true(halt_mask(out.lambda_logits, mode, u, q))               # [B] 1-based
            final = probs.gather(0, (steps - 1).view(1, B, 1).expand(1, B, probs.shape[2]))[0]
        conf, pred = final.max(1)
        rows["pred"].append(pred.cpu())
        rows["halt_step"].append(steps.float().cpu())
        rows["correct"].append((pred == yb).cpu())
        rows["confidence"].append(conf.cpu())
        top, top_class = probs.max(2)                                                # [N, B]
        rows["per_step_correct"].append((top_class == yb.unsqueeze(0)).cpu())
        rows["per_step_confidence"].append(top.cpu())
        rows["per_step_pred"].append(top_class.to(torch.int16).cpu())
        rows["p"].append(p.cpu())
    cat_dims = {"per_step_correct": 1, "per_step_confidence": 1, "per_step_pred": 1, "p": 1}
    return {k: torch.cat(v, cat_dims.get(k, 0)) for k, v in rows.items()}


def near_chance(task: str, accuracy, margin: float = 0.1) -> bool:
    """True when a test accuracy is within `margin` of guessing (the task's chance level): the run learned
    (next to) nothing."""
    return accuracy is not None and task in TASKS and accuracy < TASKS[task].chance + margin


def expected_steps_per_input(stats: dict) -> torch.Tensor:
    """E[n] = sum_n n p_n for every input: the noise-free measure of how long it ponders. [B]."""
    return expected_steps(stats["p"].clamp_min(1e-45).log())


def spread(values: torch.Tensor) -> dict:
    """{mean, std, min, max} of a 1-D tensor (std 0 for one value)."""
    v = values.double()
    return {"mean": v.mean().item(), "std": v.std().item() if len(v) > 1 else 0.0,
            "min": v.min().item(), "max": v.max().item()}


def per_step_accuracy(stats: dict) -> list:
    """[N] accuracy of the answer of step n, as if every input halted there."""
    return stats["per_step_correct"].float().mean(1).tolist()


def summarize(stats: dict, labels: torch.Tensor, lambda_p: float, by_class: bool = True) -> dict:
    """Plain-Python summary of unroll_stats (JSON-ready).

    mean/median/std_steps are over the halting steps of the mode (sampled steps are noisy: std ~ 3
    for one input); expected_steps is over E[n] per input, which is what to compare inputs by.
    by_correctness: how many the mode got right and wrong, and their mean E[n]. by_class: a row per label.
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
        "per_step_accuracy": per_step_accuracy(stats),
        "by_correctness": {name: {"count": int(m.sum()), "expected_steps": en[m].mean().item() if m.any() else None}
                           for name, m in (("correct", right), ("wrong", ~right))},
        "halting_distribution": stats["p"].mean(1).tolist(),
        "prior": log_geometric_prior(lambda_p, N).exp().tolist(),
    }
    if by_class:
        out["by_class"] = rows_by(stats, labels, "label")
    return out


def group_stats(stats: dict, mask: torch.Tensor) -> dict:
    """count, accuracy, mean_steps (sampled), expected_steps (mean E[n]) and halting_distribution of
    the samples where mask [B] is True."""
    return {"count": int(mask.sum()), "accuracy": stats["correct"][mask].float().mean().item(),
            "mean_steps": stats["halt_step"][mask].mean().item(),
            "expected_steps": expected_steps_per_input(stats)[mask].mean().item(),
            "halting_distribution": stats["p"][:, mask].mean(1).tolist()}


def rows_by(stats: dict, values: torch.Tensor, key: str) -> list:
    """One row per distinct value of values [B] (a digit's label, parity's k), in increasing order:
    {key: value, **group_stats, expected_steps_std (std of E[n] over the group)}."""
    values = values.cpu().long()
    en = expected_steps_per_input(stats)
    return [{key: int(v), **group_stats(stats, m), "expected_steps_std": en[m].std().item() if m.sum() > 1 else 0.0}
            for v in values.unique() for m in [values == v]]


def by_k_rows(stats: dict, k: torch.Tensor) -> list:
    """count, accuracy, mean halting step, and mean and std of E[n] for each number of non-zeros k [B]
    of parity inputs."""
    return rows_by(stats, k, "k")


def evaluate(model: PonderNet, x: torch.Tensor, y: torch.Tensor, mode: str = "sample",
             seed: int = 0, batch_size: int = 1000, by_class: bool = True) -> dict:
    """Summary metrics of a model on ready inputs x and labels y."""
    return summarize(unroll_stats(model, x, y, mode, batch_size, seed), y, model.lambda_p, by_class)


def measure_test(model: PonderNet, cfg: TrainConfig, data=None, limit: Optional[int] = None, mode: str = "sample",
                 seed: int = 0, batch_size: Optional[int] = None, q: float = 0.5,
                 budget: Optional[float] = None, against: Optional[tuple] = None) -> TestMetrics:
    """The standard test measurement of a run of cfg: its task's test set (the first `limit` items when given;
    `n` in the result says how many), summarize()'s metrics, `mode`, the task's info (split / test_k), a
    block per difficulty group (parity's easy and hard), a row per value of its breakdown (by_class, by_k), and
    ponder.analysis.equal_steps.worth_it over those groups and the quartiles of E[n] (baselines, settle,
    per_step_accuracy_by_group), with the operating points chosen on the task's validation set (its first `limit`
    items too) and the shifted test items (parity's unseen k) compared at them. data: the task's data set (MNIST)
    when it uses one. 'deterministic' mode is the Q-exit at q, or at a compute budget (a mean number of steps: q
    chosen on the validation set to spend it there, `budget` in the result says which q and what it spent).
    `validation`: the same numbers on the validation set itself (VALIDATION_KEYS; its policies tuned there), what
    ponder.analysis.pays.choose_setting chooses a shipped setting by, the test set unread.
    against: (model, cfg, name) of a competitor of the same task: `against` in the result is
    ponder.analysis.against.against on both networks' unrolls of the same items (ValueError, one line, when its
    task or its sets differ)."""
    task = get_task(cfg.task)
    ts = task.test_set(model, cfg, data, limit)
    vs = task.validation_set(model, cfg, data, limit)
    if against is not None:                 # refused before anything is unrolled
        other_model, other_cfg, other_name = against
        if why := refusal(cfg.task, other_cfg.task):
            raise ValueError(why)
        other = get_task(other_cfg.task)
        other_sets = (other.test_set(other_model, other_cfg, data, limit),
                      other.validation_set(other_model, other_cfg, data, limit))
        if why := refusal(cfg.task, other_cfg.task, (ts, vs), other_sets):
            raise ValueError(why)
    val = None if vs is None else unroll_stats(model, vs.x, vs.y, mode, batch_size or vs.batch_size, seed, q)
    chosen = None
    if budget is not None:
        if mode != "deterministic" or val is None:
            raise ValueError("a compute budget sets the q of 'deterministic' mode on a validation set: "
                             f"{'the task has none' if val is None else 'mode ' + repr(mode) + ' has no q'}")
        if not 1 <= budget <= model.max_steps:
            raise ValueError(f"a budget is a mean number of steps in [1, N = {model.max_steps}], got {budget:g}")
        q = q_for_steps(val["p"], budget)
        val_steps = q_exit_steps(val["p"], q).double().mean().item()
        chosen = {"steps": budget, "q": q, "validation_mean_steps": val_steps, "tuned_on": {"set": "validation",
                                                                                           "n": len(vs.y)}}
    stats = unroll_stats(model, ts.x, ts.y, mode, batch_size or ts.batch_size, seed, q)
    res = summarize(stats, ts.y, model.lambda_p, by_class=False)
    res["mode"] = mode
    if mode == "deterministic":
        res["q"] = q
    if chosen is not None:
        res["budget"] = chosen
    res.update(_measured(stats, ts, val, task.shifted(model, cfg, ts.rows[2]) if ts.rows is not None else {}))
    if val is not None:                                  # what a setting or a shipped seed is chosen by
        v = {**summarize(val, vs.y, model.lambda_p, by_class=False), **_measured(val, vs, val, {}, lean=True)}
        v["baselines"] = {"tuned_on": v["baselines"]["tuned_on"], "at_equal_steps": v["baselines"]["at_equal_steps"]}
        res["validation"] = {k: v[k] for k in VALIDATION_KEYS if k in v}
    if against is not None:
        ots, ovs = other_sets
        run = lambda es: unroll_stats(other_model, es.x, es.y, mode, batch_size or es.batch_size, seed, q)  # noqa: E731
        res["against"] = compare_against(val, stats, run(ovs), run(ots), other_name)
    return TestMetrics.from_dict(res)


VALIDATION_KEYS = ("n", "accuracy", "mean_steps", "expected_steps", "baselines", "settle", "easy", "hard",
                   "per_step_accuracy_by_group", "learned_by_group")      # what ponder.analysis.pays reads


def _measured(stats: dict, es, val: Optional[dict], shifted: dict, lean: bool = False) -> dict:
    """The info, blocks, rows and worth_it of one unroll of an EvalSet (the policies tuned on `val`; lean: see
    worth_it)."""
    res = dict(es.info)
    for name, (extra, mask) in es.blocks.items():
        res[name] = {**extra, **group_stats(stats, mask)}
    groups = {name: mask for name, (_, mask) in es.blocks.items()}        # per-step accuracy by these groups
    if es.rows is not None:
        name, key, values = es.rows
        res[name] = rows_by(stats, values, key)
        groups.update({es.row_group.format(key=key, value=int(v)): values == v for v in values.unique()})
    groups.update(quartile_groups(expected_steps_per_input(stats)))
    res.update(worth_it(stats, groups, val, shifted, lean))    # the policies at equal steps, settle steps
    return res
