"""ponder/cli/reproduce.py: the results tables, from the results.json that `reproduce --from-assets` wrote
(docs/results.json, measured); the retraining path runs in test_lifecycle.py."""
import json

from helpers import ROOT
from ponder.analysis.metrics import TestMetrics
from ponder.cli.reproduce import results_markdown, specs, stats_cells

RESULTS = json.loads((ROOT / "docs" / "results.json").read_text())


def test_expected_mode_row_says_all_steps_run_and_keeps_two_decimals_of_the_median():
    md = results_markdown(RESULTS)
    # docs/results.json: expected mode, accuracy 0.99410, E[n] mean 4.654812, median 4.647853, std 0.058365
    assert "| expected (steps run: 20 (all); expected steps E[n]) | 0.9941 | 4.65 | 4.65 | 0.06 |" in md
    # sampled steps are whole numbers: their median stays an integer (3.0 -> "3")
    assert "| sample | 0.9941 | 4.65 | 3 | 4.04 |" in md


def test_stats_cells_by_hand():
    r = TestMetrics(accuracy=0.5, mean_steps=4.654, median_steps=4.648, std_steps=0.0583)
    assert stats_cells(r) == "0.5000 | 4.65 | 5 | 0.06"
    assert stats_cells(r, expected=True) == "0.5000 | 4.65 | 4.65 | 0.06"


def test_every_section_is_rendered_from_the_measured_results():
    md = results_markdown(RESULTS)
    for heading in ("## MNIST default model `mnist-default`", "## Rotation study `mnist-rot22`", "## lambda_p sweep",
                    "## Parity `parity-15`", "## Parity `parity-30-extrapolation`"):
        assert md.count(heading) == 1, heading
    assert f"Notes: {RESULTS['notes']}." in md                  # what was re-measured later, and how
    # parity sets with their mean E[n]: parity-15's hard vectors take more expected steps than its easy ones
    en = {row.split(" | ")[0].strip("| "): float(row.split(" | ")[4].strip(" |")) for row in
          md.split("## Parity `parity-15`")[1].split("\n\n")[1].splitlines()[2:]}
    assert en["hard"] > en["easy"]
    assert "| fixed 90 deg | 0.2079 | 4.70 | 3 | 4.03 |" in md                 # docs/results.md's rotation table
    # the rotation verdict (ponder.analysis.studies.rotation_verdict, the Rotation page's): steps flat (4.66-4.73)
    assert "No: this model does not ponder longer on harder inputs" in md and "between 4.66 and 4.73" in md
    # the sweep's prior mean truncated at N = 20, as docs/results.md's table: 7.23 for lambda_p 0.1, 4.77 for 0.2
    assert "| 0.1 | 10.00 | 7.23 |" in md and "| 0.2 | 5.00 | 4.77 |" in md


def test_the_halting_policies_side_by_side_for_every_model():
    md = results_markdown(RESULTS).split("## Is the extra thought worth it?")[1]
    table = next(block for block in md.split("\n\n") if block.startswith("| model | sampled"))
    measured = [n for n, m in RESULTS["models"].items() if "ci95" in m["metrics"]["baselines"]["at_equal_steps"]]
    assert [r.split(" | ")[0].strip("| ") for r in table.splitlines()[2:]] == measured and "mnist-adaptive" in measured
    # docs/results.json, mnist-adaptive (β 0.02, seed 0; python -m ponder evaluate assets/mnist-adaptive --json):
    # sampled 0.9905 at E[n] 9.62; Q-exit 0.9924, confidence exit 0.9923 with τ and q chosen on the 5,000 validation
    # images (an independent re-measurement found 0.9924 and 0.9923); fixed depth 0.9702
    a = RESULTS["models"]["mnist-adaptive"]["metrics"]["baselines"]["at_equal_steps"]
    assert a["tuned_on"] == {"set": "validation", "n": 5000}
    assert (round(a["learned"], 4), round(a["learned_q"], 4), round(a["confidence_exit"], 4), round(a["fixed_depth"], 4)) \
        == (0.9905, 0.9924, 0.9923, 0.9702)
    assert "| mnist-adaptive | 0.9905 (9.62) | 0.9924 (9.62) | 0.9923 (9.54) | 0.9702 (9.65) | +0.0001 [" in md
    assert "mnist-adaptive: At equal compute (9.65 mean steps" in md and "(Q-exit) shows no difference from a confidence exit" in md
    assert "| mnist-adaptive | rotation 45° (10,000) |" in md                 # the shifted inputs
    assert "| parity-30-extrapolation | unseen k (outside 1–25) (1,639) |" in md


def test_specs_name_the_shipped_models():
    names = [s.name for s in specs(gpu=False)]
    assert names[:2] == ["mnist-default", "mnist-rot22"] and names[-2:] == ["parity-15", "parity-30-extrapolation"]
    assert [s.name for s in specs(gpu=False) if s.role == "sweep"] == [f"sweep-lp{v:g}" for v in (0.1, 0.2, 0.3, 0.5, 0.7, 0.9)]
    assert {s.name for s in specs(gpu=True)} >= {"parity-paper", "parity-extrapolation"}


def _adaptive(learned, confidence, gap, std):
    """A results.json model entry holding only what the marks read."""
    at = {"mean_steps": 9.0, "learned": learned, "fixed_depth": 0.97, "confidence_exit": confidence}
    return {"role": "adaptive", "metrics": {"accuracy": learned, "expected_steps": {"mean": 9.0, "std": std},
                                            "baselines": {"at_equal_steps": at},
                                            "settle": {"mean_expected_minus_settle": gap}}}


def test_the_marks_table_says_which_marks_a_model_meets():
    from ponder.cli.reproduce import marks_section
    # learned 0.9915 vs confidence 0.9928: -0.0013 >= -0.002 met; E[n] - settle 4.22 > 2.5 not met; std 1.82 >= 1.5
    lines = marks_section({"mnist-adaptive": _adaptive(0.9915, 0.9928, 4.22, 1.82), "other": _adaptive(0.5, 0.5, 0, 0)})
    rows = [line for line in lines if line.startswith("| mnist-adaptive")]
    assert rows == ["| mnist-adaptive | test accuracy | >= 0.99 | 0.9915 | yes |",
                    "| mnist-adaptive | E[n] std over the test images | >= 1.5 | 1.8200 | yes |",
                    "| mnist-adaptive | learned − confidence exit at equal steps | >= -0.002 | -0.0013 | yes |",
                    "| mnist-adaptive | mean E[n] − settle step | <= 2.5 | 4.2200 | **no** |"]
    assert not any(line.startswith("| other") for line in lines)        # a model without marks has no rows
    assert marks_section({"other": _adaptive(0.5, 0.5, 0, 0)}) == []
    # with the interval of the difference: -0.0018 in [-0.0025, -0.0010] holds the mark -0.002, so it is not settled
    m = _adaptive(0.9905, 0.9923, 3.49, 1.77)
    m["metrics"]["baselines"]["at_equal_steps"]["ci95"] = {"sampled-confidence_exit": [-0.0025, -0.0010]}
    (row,) = [line for line in marks_section({"mnist-adaptive": m}) if "confidence" in line]
    assert row == ("| mnist-adaptive | learned − confidence exit at equal steps | >= -0.002 | -0.0018 [-0.0025, -0.0010] "
                   "| yes (the mark is inside the interval: not settled) |")


def test_the_studies_section_renders_each_study_file():
    from ponder.cli.reproduce import studies_section
    acc = {"mean": 0.99, "std": 0.001, "min": 0.989, "max": 0.991, "n": 3}
    s = {"folders": ["sw"], "task": "mnist",
         "settings": [{"setting": {"lambda_p": 0.5, "beta": b}, "seeds": [0, 1, 2], "curves": {"E[n] Q1": [0.5, 0.9]},
                       "over_seeds": {"accuracy": acc}} for b in (0.1, 0.2)]}
    md = "\n".join(studies_section({"mnist-beta": s}))
    assert "### mnist-beta" in md and "mnist; every setting: lambda_p 0.5." in md
    assert "| beta 0.1 | 0, 1, 2 | 0.9900 ± 0.0010 (0.9890 to 0.9910) |" in md
    assert "- beta 0.2 · E[n] Q1: 0.500 0.900" in md
    assert studies_section({}) == []


def test_merge_keeps_the_rotation_rows_and_drops_modes_measured_on_another_test_set():
    from ponder.cli.results_worth import merge_evaluations
    same = {"accuracy": 0.9, "mean_steps": 3.0, "median_steps": 3.0, "std_steps": 1.0}
    results = {"models": {"m": {"metrics": {**same, "modes": {"sample": dict(same)}, "rotations": ["study rows"],
                                            "by_class": "old"}},
                          "p": {"metrics": {**same, "modes": {"sample": dict(same)}}}}}
    measured = {"m": {**same, "baselines": {"new": 1}, "rotations": ["cli rows"], "run": "assets/m", "max_steps": 20},
                "p": {**same, "accuracy": 0.95, "baselines": {"new": 2}},       # another test set: a new sample row
                "elsewhere": {**same}}
    assert merge_evaluations(results, measured) == ["m", "p"]
    m, p = results["models"]["m"]["metrics"], results["models"]["p"]["metrics"]
    assert m["baselines"] == {"new": 1} and m["rotations"] == ["study rows"] and "run" not in m and "modes" in m
    assert m["by_class"] == "old" and p["accuracy"] == 0.95 and "modes" not in p


def _worth_metrics(shift=(), **extra):
    pol = {k: {"accuracy": a, "mean_steps": 9.6} for k, a in
           (("sampled", 0.9905), ("learned_q", 0.9924), ("confidence_exit", 0.9923), ("fixed_depth", 0.9702))}
    ci = {"learned_q-confidence_exit": [-0.0008, 0.0010], "learned_q-fixed_depth": [0.0199, 0.0254],
          "sampled-learned_q": [-0.0025, -0.0013]}
    at = {"policies": pol, "ci95": ci, "target_steps": 9.6, "tuned_on": {"set": "validation", "n": 5000},
          "confidence_minus_settle": 3.35}
    settle = {"mean_settle_step": 6.1, "mean_expected_minus_settle": 3.49, "never_settled": 2, "count": 10000}
    return {"metrics": {"baselines": {"at_equal_steps": at, "shift": list(shift)}, "settle": settle, **extra}}


def test_the_worth_section_gives_every_policy_clean_and_shifted_and_names_the_models_without_a_shift():
    from ponder.cli.results_worth import worth_section
    row = {"name": "rotation 45°", "n": 10000, **_worth_metrics()["metrics"]["baselines"]["at_equal_steps"]}
    md = "\n".join(worth_section({"m": _worth_metrics([row]), "p": _worth_metrics(test_k=[1, 15])}))
    assert ("| m | 0.9905 (9.60) | 0.9924 (9.60) | 0.9923 (9.60) | 0.9702 (9.60) | +0.0001 [-0.0008, +0.0010] | "
            "+0.0222 [+0.0199, +0.0254] | -0.0019 [-0.0025, -0.0013] |") in md
    assert "| Q-exit − confidence | sampled − Q-exit | Q-exit − confidence, Q-exit's steps |" in md
    assert "| m | rotation 45° (10,000) | 0.9905 (9.60) |" in md and "| -0.0019 [-0.0025, -0.0013] | - | - |" in md
    assert "No shifted inputs for p (a parity model whose test k all lie in its trained range)." in md


def test_the_worth_section_opens_each_models_line_with_its_verdict_and_says_what_n_forced():
    from helpers import fake_unroll
    from ponder.analysis.equal_steps import worth_it
    from ponder.cli.results_worth import worth_section
    val, test = fake_unroll(300, 5, 0), fake_unroll(300, 5, 1)
    measured = worth_it(test, val=val)
    lines = worth_section({"m": {"metrics": measured}, "old": RESULTS["models"]["mnist-adaptive"]})
    said = measured["baselines"]["verdict"]["sentence"]
    assert f"- m: **{said}** At equal compute" in "\n".join(lines)
    assert any(line.startswith("- old: At equal compute") for line in lines)      # measured before: no verdict
    told = next(line for line in lines if line.startswith("- m: N forced") or line.startswith("- m: Mostly"))
    assert "of the sampled halts on the test items are at step N = 5" in told and "validation items" in told
    assert "the signal that best tells a right answer at step n" in told
