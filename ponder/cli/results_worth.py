"""The halting policies at equal compute in results.md (worth_section: clean and shifted, with intervals), and
merge_evaluations (what `python -m ponder reproduce --merge FOLDER` does): evaluate's JSON results put into results.json."""
from __future__ import annotations


from ..analysis.baselines import difference_text, worth_sentence
from ..analysis.worth_text import auroc_sentence, forced_sentence, headline
from ..store.card import two_decimals


def table(title: str, header: str) -> list:
    """A section heading and a table header: '| a | b |' -> heading, blank, header, separator (no heading
    for an empty title)."""
    return ([f"## {title}", ""] if title else []) + [header, "|" + "---|" * header.count(" | ") + "---|"]


CLI_ONLY = ("run", "max_steps", "trained_max_steps", "rotations", "uniform_rotations")   # evaluate's, not measure_test's


def merge_evaluations(results: dict, measured: dict) -> list:
    """Put `python -m ponder evaluate NAME --json` results ({name: result}) into results.json's models (in place):
    every measure_test field is replaced (the rotation study's rows stay); the other modes' rows are dropped when
    their sample row is not the new measurement's (measured on another test set). Returns the names merged."""
    keys = ("accuracy", "mean_steps", "median_steps", "std_steps")
    done = []
    for name, res in measured.items():
        if name not in results["models"]:
            continue
        m = results["models"][name]["metrics"]
        m.update({k: v for k, v in res.items() if k not in CLI_ONLY})
        if "modes" in m and any(abs(m["modes"]["sample"][k] - res[k]) > 1e-9 for k in keys):
            del m["modes"]
        done.append(name)
    return done


_ci = difference_text


def _acc(p: dict, k: str) -> str:
    return f"{p[k]['accuracy']:.4f} ({p[k]['mean_steps']:.2f})"


def _said(baselines: dict) -> str:
    """The verdict (ponder.analysis.verdict, the pages' first sentence) in bold and a space; '' before it existed."""
    v = headline(baselines)
    return f"**{v}** " if v else ""


def worth_section(models: dict) -> list:
    """The halting policies at equal compute, every model (ponder.analysis.equal_steps: operating points chosen
    on validation, paired bootstrap intervals), clean and shifted; models measured before then are left out."""
    rows = [(n, m["metrics"]) for n, m in models.items() if "ci95" in m.get("metrics", {}).get("baselines", {}).get(
        "at_equal_steps", {})]
    if not rows:
        return []
    lines = ["## Is the extra thought worth it? The halting policies at equal compute", "",
             "`python -m ponder evaluate assets/NAME --json` (MNIST models with `--rotations 22.5,45`): one full unroll "
             "of the validation set and of the test set ('sample' mode, seed 0). Sampled: the halt drawn from p_n, its "
             "expected accuracy Σ p_n·correct_n at its mean E[n]. Q-exit: the same λ's used deterministically, stopping "
             "at the first step where Σ_{j≤n} p_j ≥ q. Confidence exit: the first step whose answer's probability "
             "reaches τ. Fixed depth: always step n. q, τ and the depth are chosen on the validation set (MNIST: the "
             "5,000 training images held out of training; parity: 10,000 vectors of the trained k of the class held out of "
             "today's training stream, which the shipped parity models, trained before, were not: theirs held 79.6 % of "
             "parity-15's validation items) to spend the sampled policy's E[n] there, then scored on the test set "
             "(accuracy, mean steps in brackets). Differences: test accuracy, with 95 % intervals from 1,000 paired "
             "bootstrap resamples of the test items; a difference reads \"no difference\" when its interval holds 0 or "
             "it rounds to 0. One shipped model each: seed 0, not a mean over seeds.", ""]
    lines += table("", "| model | sampled | Q-exit | confidence exit | fixed depth | Q-exit − confidence | "
                       "Q-exit − fixed depth | sampled − Q-exit |")
    for name, t in rows:
        a = t["baselines"]["at_equal_steps"]
        p = a["policies"]
        lines.append(f"| {name} | {_acc(p, 'sampled')} | {_acc(p, 'learned_q')} | {_acc(p, 'confidence_exit')} | "
                     f"{_acc(p, 'fixed_depth')} | {_ci(a, 'learned_q', 'confidence_exit')} | "
                     f"{_ci(a, 'learned_q', 'fixed_depth')} | {_ci(a, 'sampled', 'learned_q')} |")
    shifted = [(n, r) for n, t in rows for r in t["baselines"].get("shift", [])]
    if shifted:
        lines += ["", "Shifted inputs (rotated test digits; parity's test vectors with a k never trained on), at the "
                  "operating points chosen on the clean validation set, so each rule spends what its own signal tells "
                  "it; the last two columns match the confidence exit and the fixed depth on the shifted items "
                  "themselves to the steps Q-exit spends there (tuned where Q-exit is not, which favours them).", "",
                  "| model | inputs | sampled | Q-exit | confidence exit | fixed depth | Q-exit − confidence | "
                  "sampled − Q-exit | Q-exit − confidence, Q-exit's steps | Q-exit − fixed depth, Q-exit's steps |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for name, r in shifted:
            p, eq = r["policies"], r.get("at_q_steps")
            tail = (f"{_ci(eq, 'learned_q', 'confidence_exit')} | {_ci(eq, 'learned_q', 'fixed_depth')}" if eq
                    else "- | -")
            lines.append(f"| {name} | {r['name']} ({r['n']:,}) | {_acc(p, 'sampled')} | {_acc(p, 'learned_q')} | "
                         f"{_acc(p, 'confidence_exit')} | {_acc(p, 'fixed_depth')} | "
                         f"{_ci(r, 'learned_q', 'confidence_exit')} | {_ci(r, 'sampled', 'learned_q')} | {tail} |")
        unshifted = [n for n, t in rows if not t["baselines"].get("shift")]
        if unshifted:
            lines += ["", "No shifted inputs for " + ", ".join(
                f"{n} ({'a parity model whose test k all lie in its trained range' if 'test_k' in t else 'measured without --rotations'})"
                for n, t in rows if n in unshifted) + "."]
    lines += ["", "Settle step: the first step from which every later answer is right. It is an oracle (it reads the "
              "later answers and the label): no rule that stops as it goes can reach it.", "",
              "| model | settle step (oracle) | E[n] − settle | confidence exit − settle | never settled |",
              "|---|---|---|---|---|"]
    for name, t in rows:
        a, st = t["baselines"]["at_equal_steps"], t["settle"]
        lines.append(f"| {name} | {two_decimals(st['mean_settle_step'])} | {two_decimals(st['mean_expected_minus_settle'])} | "
                     f"{two_decimals(a['confidence_minus_settle'])} | {st['never_settled']} of {st['count']} |")
    lines += [""] + [f"- {name}: {_said(t['baselines'])}{worth_sentence(t['baselines']['at_equal_steps'])}"
                     for name, t in rows]
    told = [(n, t["baselines"]) for n, t in rows if t["baselines"].get("forced") or t["baselines"].get("auroc")]
    if told:
        lines += ["", "The halts N forced (λ_N = 1: the sampled halt reached step N without the draw stopping it "
                  "earlier; the Q-exit's CDF never reached q before N), and which signal best tells a right answer at "
                  "step n from a wrong one (per-step AUROC):", ""]
        lines += [f"- {n}: " + " ".join([*(forced_sentence(f, w) for w, f in b.get("forced", {}).items()),
                                         *([auroc_sentence(b["auroc"])] if b.get("auroc") else [])]) for n, b in told]
    groups = [(n, g) for n, t in rows for g, v in t["settle"].get("by_group", {}).items() if g in ("easy", "hard")]
    if groups:
        lines += ["", "| parity model | set | E[n] − settle |", "|---|---|---|"]
        lines += [f"| {n} | {g} | {two_decimals(dict(rows)[n]['settle']['by_group'][g]['mean_expected_minus_settle'])} |"
                  for n, g in groups]
    return lines + [""]
