"""python -m ponder evaluate: one run measured on its test set (ponder.analysis.unroll.measure_test) and
the rotations asked for, printed as text or one strict JSON object."""
from __future__ import annotations

import json

from ..config import ConfigError
from ..store.card import two_decimals


def cmd_evaluate(args) -> int:
    from ..analysis.baselines import differences_table, summary_lines
    from ..analysis.equal_steps import ops_from, shift_comparison
    from ..analysis.studies import rotation_label, rotation_study
    from ..analysis.unroll import measure_test
    from ..files import jsonable
    from ..store.checkpoint import load_checkpoint
    from ..tasks import get_task
    from ..halting import with_max_steps
    from ..training.loop import pick_device

    q, budget = getattr(args, "q", None), getattr(args, "budget", None)
    if (q is not None or budget is not None) and args.mode != "deterministic":
        raise ConfigError(f"--{'q' if q is not None else 'budget'} sets the Q-exit of --mode deterministic, "
                          f"not of --mode {args.mode}")
    if q is not None and budget is not None:
        raise ConfigError("give --q or --budget (which chooses q), not both")
    ck = load_checkpoint(args.run, device=pick_device(args.device))
    task = get_task(ck.task)
    data = task.load_data(args.data_dir)
    trained_n = ck.model.max_steps
    # --max-steps: the same weights run up to the cap (lambda_N = 1 only there), past the N it trained with
    model = with_max_steps(ck.model, args.max_steps) if args.max_steps else ck.model
    rival = None
    if getattr(args, "against", None):      # the competitor, on the same items (measure_test refuses other items)
        ck2 = load_checkpoint(args.against, device=pick_device(args.device))
        rival = (ck2.model, ck2.record.config, ck2.name)
    try:
        res = measure_test(model, ck.record.config, data, args.limit, args.mode, args.seed,
                           q=0.5 if q is None else q, budget=budget, against=rival)
    except ValueError as e:   # a budget where the task has no validation set, or outside [1, N]; another task's RUN2
        raise ConfigError(str(e)) from None
    q = 0.5 if res.q is None else res.q
    images = task.rotation_inputs(data, args.limit)
    ops = ops_from(res.baselines["at_equal_steps"])         # chosen on the clean validation set
    rows = rotation_study(model, *images, args.rotations, args.uniform, args.mode, args.seed, q=q,
                          compare=lambda stats: shift_comparison(stats, ops)) if images else []
    res.baselines["shift"] += [{"name": f"rotation {rotation_label(r)}", **r.pop("policies")} for r in rows]
    res.rotations = [r for r in rows if r["kind"] == "fixed"]
    res.uniform_rotations = [r for r in rows if r["kind"] == "uniform"]
    res.per_step_accuracy_by_group.update({f"rotation {rotation_label(r)}": r["per_step_accuracy"] for r in rows})
    if args.json:                           # strict JSON: NaN / inf are written as null
        out = {**res.to_dict(), "max_steps": model.max_steps, "trained_max_steps": trained_n, "run": str(ck.path)}
        print(json.dumps(jsonable(out), allow_nan=False))
        return 0
    cap = f"N={model.max_steps}" + (f" (trained with N={trained_n})" if model.max_steps != trained_n else "")
    how = ""
    if args.mode == "deterministic":
        b = res.budget
        how = (f" (Q-exit at q = {q:.4g}" + (f", chosen on {b['tuned_on']['n']:,} validation items to spend "
                                              f"{b['steps']:g} steps: {b['validation_mean_steps']:.2f} there" if b else "")
               + ")")
    print(f"{ck.name} ({ck.task}, {cap}, lambda_p={model.lambda_p}), mode {args.mode}{how}, n={res.n}")
    if args.mode == "expected":             # every sample runs all N steps; E[n] is what varies
        print(f"accuracy {res.accuracy:.4f}   steps run: {model.max_steps} (all)   expected steps E[n] "
              f"mean {res.mean_steps:.2f} median {res.median_steps:.2f} std {res.std_steps:.2f}")
    else:
        print(f"accuracy {res.accuracy:.4f}   halting step mean {res.mean_steps:.2f} "
              f"median {res.median_steps:.0f} std {res.std_steps:.2f}")
    en, bc = res.expected_steps, res.by_correctness
    print(f"expected steps E[n] per input: mean {en['mean']:.2f} std {en['std']:.2f} (min {en['min']:.2f}, "
          f"max {en['max']:.2f}); right {bc['correct']['count']} at E[n] {two_decimals(bc['correct']['expected_steps'])}, "
          f"wrong {bc['wrong']['count']} at E[n] {two_decimals(bc['wrong']['expected_steps'])}")
    what = "E[n]" if args.mode == "expected" else "steps"
    print("step  p_n(learned)  p_G(prior)  acc-if-stopped")
    for n, (p, q, a) in enumerate(zip(res.halting_distribution, res.prior, res.per_step_accuracy), 1):
        if p > 1e-4 or q > 1e-3:
            print(f"{n:4d}  {p:12.4f}  {q:10.4f}  {a:14.4f}")
    for row in res.rotations + res.uniform_rotations:
        label = f"{row['angle']:g} deg" if row["kind"] == "fixed" else f"U(+-{row['angle']:g}) deg"
        print(f"rotation {label:>14}: accuracy {row['accuracy']:.4f}  {what} {row['mean_steps']:.2f} +- "
              f"{row['std_steps']:.2f}  E[n] {row['expected_steps']:.2f}")
    for text in summary_lines(res.baselines):
        print(text)
    for row in differences_table({ck.name: res}):       # the Compare page's table, one row
        print("at equal steps: " + "; ".join(f"{k} {v}" for k, v in row.items() if k != "model"))
    st = res.settle
    print(f"settle step (answers right from then on): mean {two_decimals(st['mean_settle_step'])}, E[n] - settle "
          f"{two_decimals(st['mean_expected_minus_settle'])}, never settled {st['never_settled']}")
    if res.easy is not None:
        for k, r in (("easy", res.easy), ("hard", res.hard)):
            print(f"{k} (k in {r.k_range}): accuracy {r.accuracy:.4f}  {what} {r.mean_steps:.2f}  "
                  f"E[n] {r.expected_steps:.2f}")
    for line in worth_lines(res):
        print(line)
    return 0


def worth_lines(res) -> list:
    """The verdict first, then the frontiers, the halts N forced and the signals' AUROCs; with a competitor, the
    same against it."""
    from ..analysis.worth_text import auroc_sentence, budget_lines, forced_sentence, gap_lines
    b = res.baselines
    out = []
    if res.against:
        a = res.against
        out += [f"is the extra thought worth it, against {a['name']}? {a['verdict']['sentence']}",
                f"against its own rules: {a['verdict_own_rules']['sentence']}"]
        out += budget_lines(a["budgets"], a["name"]) + gap_lines(a["residual_gap"], competitor=a["name"])
        out.append(auroc_sentence(a["auroc"], a["name"]))
    else:
        out.append(f"is the extra thought worth it? {b['verdict']['sentence']}")
        out += budget_lines(b["budgets"]) + gap_lines(b["residual_gap"], "confidence_exit")
    for where, forced in b["forced"].items():
        out.append(f"forced by N ({where}): {forced_sentence(forced, where)}")
    out.append(auroc_sentence(b["auroc"], "this network"))
    return out
