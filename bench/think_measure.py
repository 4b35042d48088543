"""Does the learned halting beat the obvious rules? One sweep folder's trials (one setting, several seeds), each
measured as docs/results.md's "A network that thinks" section reports it:

    Q-exit at q      stop at the first n with sum_{j<=n} p_j >= q (the learned lambdas used deterministically)
    confidence exit  stop at the first step whose answer's probability is >= tau
    fixed depth      always answer at step n
(ponder.analysis.policies: the definitions the CLI's and the explorer's measurements use), each at equal mean
steps: the target is the learned halting's own mean E[n] on the validation split (the 5,000 training images held
out of training), each policy's knob is matched to it there (two neighbouring knob values mixed), then scored on
the test set; 95 % paired bootstrap intervals of the differences on the test set (1,000 resamples). The same on digits rotated 45 degrees, the knobs matched on the rotated validation digits. Also a lambda exit:
stop at the first n with lambda_n >= t (the lambdas themselves as exit scores: what halting_loss "exit" trains;
ponder.analysis.policies.lambda_exit).
Also: accuracy (halting sampled from p), E[n] std over the test digits, wrong - right E[n].

    PONDER_DATA=/work/shared/data OMP_NUM_THREADS=1 python -m bench.think_measure runs/recall-ds-acc [--json out.json]
    python -m bench.think_measure --collect runs --to docs/studies/think.json     (bench/think_collect.py)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from bench.think_table import BUDGETS, budget_table, table  # noqa: F401  (table: the tests read it here too)
from ponder import data as D
from ponder.analysis.policies import lambda_exit, match, paired_bootstrap, policies, sampled, score
from ponder.analysis.unroll import unroll_stats
from ponder.store.checkpoint import load_checkpoint

ANGLE = 45.0
PAIRS = (("learned_q", "confidence_exit"), ("learned_q", "fixed_depth"), ("lambda_exit", "confidence_exit"))
DIFFS = tuple(f"{a}-{b}" for a, b in PAIRS)
RULES = ("learned_q", "lambda_exit", "confidence_exit", "fixed_depth")


def rules(u: dict) -> dict:
    """{name: Policy} of the rules compared, on one unroll u (per_step_correct, per_step_confidence, p [N, B])."""
    c, conf, p = u["per_step_correct"], u["per_step_confidence"], u["p"]
    return {**policies(c, conf, p), "lambda_exit": lambda_exit(p)}


def equal_steps(val: dict, test: dict, target=None) -> dict:
    """The rules matched on val at `target` mean steps (default: the learned halting's mean E[n] there, its sampled
    policy's), scored on test, with paired bootstrap intervals of the differences."""
    target = sampled(val["per_step_correct"], val["p"]).mean_steps if target is None else target
    rv, rt = rules(val), rules(test)
    pts = {k: score(rt[k], test["per_step_correct"], match(rv[k], val["per_step_correct"], target)) for k in RULES}
    ci = paired_bootstrap({k: v.per_item for k, v in pts.items()}, list(PAIRS))
    return {"target_steps": target, **{k: {"steps": v.mean_steps, "accuracy": v.accuracy} for k, v in pts.items()},
            **{f"{a}-{b}": {"diff": pts[a].accuracy - pts[b].accuracy, "interval": ci[f"{a}-{b}"]} for a, b in PAIRS}}


def measure(run: Path, mnist: D.Mnist) -> dict:
    model = load_checkpoint(run).model.eval()
    sets = {"val": (mnist.val_x, mnist.val_y), "test": (mnist.test_x, mnist.test_y)}
    u = {f"{k}{'' if a == 0 else '_rot'}": unroll_stats(model, D.mnist_inputs(x, angle=a), y)
         for k, (x, y) in sets.items() for a in (0.0, ANGLE)}
    t = u["test"]
    n = torch.arange(1, t["p"].shape[0] + 1, dtype=torch.float64).unsqueeze(1)
    en = (n * t["p"].double()).sum(0)                                          # [B] E[n] per test digit
    right = t["correct"]
    return {"run": str(run), "accuracy": right.double().mean().item(),
            "per_step_accuracy": t["per_step_correct"].double().mean(1).tolist(),
            "mean_en": en.mean().item(), "std_en": en.std().item(),
            "wrong_minus_right_en": (en[~right].mean() - en[right].mean()).item(),
            "clean": equal_steps(u["val"], u["test"]), "rotated": equal_steps(u["val_rot"], u["test_rot"]),
            "budgets": {str(b): equal_steps(u["val"], u["test"], b) for b in BUDGETS}}


def summary(rows: list) -> dict:
    """mean and std over the seeds of each number."""
    def agg(get):
        v = torch.tensor([get(r) for r in rows], dtype=torch.float64)
        return {"mean": v.mean().item(), "std": v.std().item() if len(v) > 1 else 0.0}
    out = {k: agg(lambda r, k=k: r[k]) for k in ("accuracy", "mean_en", "std_en", "wrong_minus_right_en")}
    for s in ("clean", "rotated", *(f"budget {b}" for b in BUDGETS)):
        get = (lambda r, s=s: r[s]) if not s.startswith("budget") else (lambda r, s=s: r["budgets"][s.split()[1]])
        out[s] = {"target_steps": agg(lambda r: get(r)["target_steps"]),
                  **{k: agg(lambda r, k=k: get(r)[k]["accuracy"]) for k in RULES},
                  **{k: agg(lambda r, k=k: get(r)[k]["diff"]) for k in DIFFS},
                  "intervals_above_0": {k: sum(get(r)[k]["interval"][0] > 0 for r in rows) for k in DIFFS},
                  "intervals_below_0": {k: sum(get(r)[k]["interval"][1] < 0 for r in rows) for k in DIFFS}}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.think_measure")
    ap.add_argument("sweep", nargs="+", help="a sweep folder: one run folder per seed (with --table: measure.json files)")
    ap.add_argument("--json", default=None, help="write every number here")
    ap.add_argument("--table", action="store_true", help="print docs/results.md's tables from measure.json files")
    ap.add_argument("--collect", action="store_true", help="gather the queue's settings from the runs folder "
                    "(runs/NAME/measure.json, else the findings' rows) into one file, --to (bench/think_collect.py)")
    ap.add_argument("--to", default="docs/studies/think.json", help="with --collect: the file written")
    ap.add_argument("--queue", default="bench/think_queue.sh", help="with --collect: the settings and their commands")
    ap.add_argument("--findings", default="docs/findings.md", help="with --collect: the tables of settings measured "
                    "before their measure.json was kept")
    args = ap.parse_args(argv)
    if args.collect:
        from bench.think_collect import collect
        out = collect(Path(args.sweep[0]), Path(args.queue), Path(args.findings))
        Path(args.to).write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
        print(f"wrote {args.to}: {len(out['settings'])} settings, {len(out['not_run'])} not run")
        return 0
    if args.table:
        print(table(args.sweep) + "\n\n" + budget_table(args.sweep))
        return 0
    args.sweep = args.sweep[0]
    torch.set_num_threads(1)
    mnist = D.load_mnist()
    runs = sorted(p.parent for p in Path(args.sweep).glob("*/run.json"))
    rows = []
    for run in runs:
        r = measure(run, mnist)
        rows.append(r)
        c, ro = r["clean"], r["rotated"]
        print(f"{run.name}: acc {r['accuracy']:.4f}  E[n] {r['mean_en']:.2f} (std {r['std_en']:.2f})  "
              f"wrong-right {r['wrong_minus_right_en']:+.2f}  | at {c['target_steps']:.2f} steps: Q {c['learned_q']['accuracy']:.4f} "
              f"conf {c['confidence_exit']['accuracy']:.4f} fixed {c['fixed_depth']['accuracy']:.4f}  "
              f"Q-conf {c['learned_q-confidence_exit']['diff']:+.4f} {[round(v, 4) for v in c['learned_q-confidence_exit']['interval']]}  "
              f"Q-fixed {c['learned_q-fixed_depth']['diff']:+.4f} {[round(v, 4) for v in c['learned_q-fixed_depth']['interval']]}  "
              f"| rot45 at {ro['target_steps']:.2f}: Q-conf {ro['learned_q-confidence_exit']['diff']:+.4f} "
              f"{[round(v, 4) for v in ro['learned_q-confidence_exit']['interval']]}", flush=True)
    out = {"runs": rows, "summary": summary(rows)}
    print(json.dumps(out["summary"], indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.exit(main())
