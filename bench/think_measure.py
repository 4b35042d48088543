"""Does the learned halting beat the obvious rules? One sweep folder's trials (one setting, several seeds), each
measured as docs/results.md's "A network that thinks" section reports it:

    Q-exit at q      stop at the first n with sum_{j<=n} p_j >= q (the learned lambdas used deterministically)
    confidence exit  stop at the first step whose answer's probability is >= tau
    fixed depth      always answer at step n
each at equal mean steps: the target is the learned halting's own mean E[n] on the validation split (the 5,000
training images held out of training), each policy's knob is matched to it there (two neighbouring knob values
mixed), then scored on the test set; 95 % paired bootstrap intervals of the differences on the test set (1,000
resamples). The same on digits rotated 45 degrees, the knobs matched on the rotated validation digits. Also a lambda exit:
stop at the first n with lambda_n >= t (the lambdas themselves as exit scores: what halting_loss "exit" trains).
Also: accuracy (halting sampled from p), E[n] std over the test digits, wrong - right E[n].

    PONDER_DATA=/work/shared/data OMP_NUM_THREADS=1 python -m bench.think_measure runs/recall-ds-acc [--json out.json]

The policy code below is the minimum this needs; ponder.analysis.policies (branch worth) does the same as a
library module (match, score, paired_bootstrap): once merged, this script should call it instead.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from ponder import data as D
from ponder.analysis.baselines import candidates, exit_steps
from ponder.analysis.unroll import unroll_stats
from ponder.store.checkpoint import load_checkpoint

ANGLE = 45.0
PAIRS = (("q_exit", "confidence"), ("q_exit", "fixed"), ("lambda_exit", "confidence"))
DIFFS = tuple(f"{a}-{b}" for a, b in PAIRS)
BUDGETS = (1.5, 2.0, 3.0)       # also at these mean steps (clean digits): the rules along the frontier


def q_exit_steps(p, q):
    return ((p.double().cumsum(0) < q).sum(0) + 1).clamp(max=p.shape[0])      # [B] first n with CDF >= q


def lambdas(p):
    """lambda_n = p_n / (1 - sum_{j<n} p_j), lambda_N = 1: the learned hazards back from p. [N, B]"""
    before = torch.cat([torch.zeros_like(p[:1]), p.double().cumsum(0)[:-1]])     # [N, B]
    lam = (p.double() / (1 - before).clamp_min(1e-12)).clamp(0, 1)
    lam[-1] = 1.0
    return lam


def rules(u):
    """{name: (steps(knob) -> [B], knobs)} on one unroll u (per_step_correct, per_step_confidence, p [N, B])."""
    p, conf, N = u["p"], u["per_step_confidence"], u["p"].shape[0]
    peak = conf.cummax(0).values
    lam = lambdas(p)
    lam_peak = lam.cummax(0).values
    return {"q_exit": (lambda q: q_exit_steps(p, q), [0.0, *p.double().cumsum(0).flatten().unique().tolist()]),
            "lambda_exit": (lambda t: exit_steps(lam, t, lam_peak), candidates(lam).tolist()),
            "confidence": (lambda t: exit_steps(conf, t, peak), candidates(conf).tolist()),
            "fixed": (lambda d: torch.full((p.shape[1],), int(d)), list(range(1, N + 1)))}


def match(steps, knobs, target):
    """(lo, hi, w): knob values whose mean steps bracket target, mixed with weight w on hi (bisection)."""
    ms = lambda i: steps(knobs[i]).double().mean().item()                      # noqa: E731
    lo, hi = 0, len(knobs) - 1
    m_lo, m_hi = ms(lo), ms(hi)
    if target <= m_lo or target >= m_hi:
        k = knobs[lo] if target <= m_lo else knobs[hi]
        return k, k, 0.0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ms(mid) < target:
            lo, m_lo = mid, ms(mid)
        else:
            hi, m_hi = mid, ms(mid)
    return knobs[lo], knobs[hi], (target - m_lo) / (m_hi - m_lo)


def score(steps, correct, op):
    """(mean steps, per-input correctness [B]) of an operating point on a set."""
    lo, hi, w = op
    s_lo, s_hi = steps(lo), steps(hi)
    right = lambda s: correct.gather(0, (s.long() - 1).unsqueeze(0))[0].double()   # noqa: E731
    return (1 - w) * s_lo.double().mean().item() + w * s_hi.double().mean().item(), \
        (1 - w) * right(s_lo) + w * right(s_hi)


def bootstrap(a, b, resamples=1000, seed=0):
    """95 % percentile interval of mean(a) - mean(b) over paired resamplings of the items."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, len(a), (resamples, len(a)), generator=g)
    d = (a[idx] - b[idx]).mean(1)
    return torch.quantile(d, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()


def equal_steps(val, test, target=None):
    """The three rules matched on val at `target` mean steps (default: the learned halting's mean E[n] there),
    scored on test."""
    n = torch.arange(1, val["p"].shape[0] + 1, dtype=torch.float64).unsqueeze(1)
    target = (n * val["p"].double()).sum(0).mean().item() if target is None else target
    rv, rt = rules(val), rules(test)
    out, right = {"target_steps": target}, {}
    for name in rv:
        op = match(*rv[name], target)
        steps, right[name] = score(rt[name][0], test["per_step_correct"], op)
        out[name] = {"steps": steps, "accuracy": right[name].mean().item()}
    for a, b in PAIRS:
        out[f"{a}-{b}"] = {"diff": (right[a] - right[b]).mean().item(), "interval": bootstrap(right[a], right[b])}
    return out


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
                  **{k: agg(lambda r, k=k: get(r)[k]["accuracy"]) for k in ("q_exit", "lambda_exit", "confidence", "fixed")},
                  **{k: agg(lambda r, k=k: get(r)[k]["diff"]) for k in DIFFS},
                  "intervals_above_0": {k: sum(get(r)[k]["interval"][0] > 0 for r in rows) for k in DIFFS},
                  "intervals_below_0": {k: sum(get(r)[k]["interval"][1] < 0 for r in rows) for k in DIFFS}}
    return out


def _pm(d, digits=4):
    return f"{d['mean']:.{digits}f} ± {d['std']:.{digits}f}"


def table(files) -> str:
    """docs/results.md's table rows from measure.json files (mean ± std over the seeds; intervals: in how many
    seeds the paired 95 % interval lies above 0, and below 0)."""
    lines = ["| setting | seeds | accuracy (sampled) | E[n] | E[n] std | wrong − right E[n] | at steps | Q-exit | "
             "confidence | fixed | Q − confidence (above / below 0) | Q − fixed (above / below 0) | "
             "λ-exit − confidence (above / below 0) | rot 45°: at steps | rot 45°: Q − confidence (above / below 0) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for f in files:
        d = json.loads(Path(f).read_text())
        s, c, r = d["summary"], d["summary"]["clean"], d["summary"]["rotated"]
        ab = lambda x, k: f"{x['intervals_above_0'][k]} / {x['intervals_below_0'][k]}"   # noqa: E731
        lines.append(f"| {Path(f).parent.name} | {len(d['runs'])} | {_pm(s['accuracy'])} | {_pm(s['mean_en'], 2)} | "
                     f"{_pm(s['std_en'], 2)} | {_pm(s['wrong_minus_right_en'], 2)} | {_pm(c['target_steps'], 2)} | "
                     f"{_pm(c['q_exit'])} | {_pm(c['confidence'])} | {_pm(c['fixed'])} | "
                     f"{_pm(c['q_exit-confidence'])} ({ab(c, 'q_exit-confidence')}) | "
                     f"{_pm(c['q_exit-fixed'])} ({ab(c, 'q_exit-fixed')}) | "
                     f"{_pm(c['lambda_exit-confidence'])} ({ab(c, 'lambda_exit-confidence')}) | {_pm(r['target_steps'], 2)} | "
                     f"{_pm(r['q_exit-confidence'])} ({ab(r, 'q_exit-confidence')}) |")
    return "\n".join(lines)


def budget_table(files) -> str:
    """Q-exit − confidence exit and − fixed depth at the fixed budgets of mean steps (clean digits)."""
    lines = ["| setting | budget (mean steps) | Q-exit | confidence | fixed | Q − confidence (above / below 0) | "
             "Q − fixed (above / below 0) |", "|---|---|---|---|---|---|---|"]
    for f in files:
        s = json.loads(Path(f).read_text())["summary"]
        for b in BUDGETS:
            x = s[f"budget {b}"]
            lines.append(f"| {Path(f).parent.name} | {b} | {_pm(x['q_exit'])} | {_pm(x['confidence'])} | "
                         f"{_pm(x['fixed'])} | {_pm(x['q_exit-confidence'])} ({x['intervals_above_0']['q_exit-confidence']}"
                         f" / {x['intervals_below_0']['q_exit-confidence']}) | {_pm(x['q_exit-fixed'])} "
                         f"({x['intervals_above_0']['q_exit-fixed']} / {x['intervals_below_0']['q_exit-fixed']}) |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.think_measure")
    ap.add_argument("sweep", nargs="+", help="a sweep folder: one run folder per seed (with --table: measure.json files)")
    ap.add_argument("--json", default=None, help="write every number here")
    ap.add_argument("--table", action="store_true", help="print docs/results.md's tables from measure.json files")
    args = ap.parse_args(argv)
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
              f"wrong-right {r['wrong_minus_right_en']:+.2f}  | at {c['target_steps']:.2f} steps: Q {c['q_exit']['accuracy']:.4f} "
              f"conf {c['confidence']['accuracy']:.4f} fixed {c['fixed']['accuracy']:.4f}  "
              f"Q-conf {c['q_exit-confidence']['diff']:+.4f} {[round(v, 4) for v in c['q_exit-confidence']['interval']]}  "
              f"Q-fixed {c['q_exit-fixed']['diff']:+.4f} {[round(v, 4) for v in c['q_exit-fixed']['interval']]}  "
              f"| rot45 at {ro['target_steps']:.2f}: Q-conf {ro['q_exit-confidence']['diff']:+.4f} "
              f"{[round(v, 4) for v in ro['q_exit-confidence']['interval']]}", flush=True)
    out = {"runs": rows, "summary": summary(rows)}
    print(json.dumps(out["summary"], indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    sys.exit(main())
