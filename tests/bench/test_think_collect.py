"""bench/think_collect.py: the queue's settings gathered into think.json, from measure.json where it exists, else
from the findings' table row; the command lines expanded from the queue's variables."""
import json

from bench.think_collect import collect, findings_rows, queue_commands
from bench.think_measure import BUDGETS, DIFFS, RULES, summary, table

QUEUE = '''SEEDS=${SEEDS:-0,1,2,3,4}
R="--seeds $SEEDS --reader recall --epochs 0.6 --beta 0"
E2=${R/--epochs 0.6/--epochs 2}
setting() { :; }
setting measured $R --halting-loss exit
setting from-findings $E2 --halting-loss exit \\
    --lambda-input confidence
setting later --seeds "$SEEDS" --reader rows
'''


def _equal_steps(q, conf):
    """One equal_steps() result: Q-exit q, confidence conf, fixed 0.5, λ-exit 0.4 at 1.5 steps; every interval the
    difference ± 0.001."""
    acc = {"learned_q": q, "confidence_exit": conf, "fixed_depth": 0.5, "lambda_exit": 0.4}
    out = {"target_steps": 1.5, **{k: {"steps": 1.5, "accuracy": acc[k]} for k in RULES}}
    for d in DIFFS:
        a, b = d.split("-")
        out[d] = {"diff": acc[a] - acc[b], "interval": [acc[a] - acc[b] - 0.001, acc[a] - acc[b] + 0.001]}
    return out


def _run(seed, q):
    return {"run": f"runs/measured/seed{seed}", "accuracy": 0.7, "per_step_accuracy": [0.6, 0.7],
            "mean_en": 1.5, "std_en": 0.1, "wrong_minus_right_en": 0.05, "clean": _equal_steps(q, 0.8),
            "rotated": _equal_steps(0.3, 0.3), "budgets": {str(b): _equal_steps(q, 0.8) for b in BUDGETS}}


def test_queue_lines_become_command_lines(tmp_path):
    (tmp_path / "q.sh").write_text(QUEUE)
    c = queue_commands(tmp_path / "q.sh")
    assert c == {"measured": "python -m ponder sweep --out runs/measured --seeds 0,1,2,3,4 --reader recall "
                             "--epochs 0.6 --beta 0 --halting-loss exit",
                 "from-findings": "python -m ponder sweep --out runs/from-findings --seeds 0,1,2,3,4 --reader recall "
                                  "--epochs 2 --beta 0 --halting-loss exit --lambda-input confidence",
                 "later": "python -m ponder sweep --out runs/later --seeds 0,1,2,3,4 --reader rows"}


def test_measured_settings_come_from_measure_json_the_others_from_the_findings_row(tmp_path):
    (tmp_path / "q.sh").write_text(QUEUE)
    runs = tmp_path / "runs"
    (runs / "measured").mkdir(parents=True)
    rows = [_run(0, 0.79), _run(1, 0.81)]
    measure = runs / "measured" / "measure.json"
    measure.write_text(json.dumps({"runs": rows, "summary": summary(rows)}))
    row = "| from-findings | 5 | 0.8877 ± 0.0074 | 1.16 ± 0.01 | 0.06 ± 0.00 | 0.06 ± 0.00 | 1.17 ± 0.01 | " \
          "0.9030 ± 0.0077 | 0.9174 ± 0.0068 | 0.8856 ± 0.0077 | -0.0143 ± 0.0034 (0 / 5) | 0.0174 ± 0.0032 (5 / 0) | " \
          "-0.0149 ± 0.0033 (0 / 5) | 1.29 ± 0.03 | -0.0001 ± 0.0063 (1 / 1) |"
    measured_row = "| measured |" + table([measure]).splitlines()[-1].split("|", 2)[2]
    (tmp_path / "findings.md").write_text("\n".join(["| a | b |", row, measured_row.replace("0.8000 ± ", "0.8001 ± ")]))
    log = []
    out = collect(runs, tmp_path / "q.sh", tmp_path / "findings.md", log=log.append)
    m, f = out["settings"]
    assert out["not_run"][0]["name"] == "later" and out["kind"] == "think"
    # measured: Q-exit 0.79 and 0.81 -> mean 0.80, std sqrt(2 * 0.01^2 / 1) = 0.014142; Q - confidence -0.01 and
    # +0.01, intervals [-0.011, -0.009] (below 0) and [0.009, 0.011] (above 0)
    assert m["seeds"] == [0, 1] and m["source"] == "runs/measured/measure.json"
    assert abs(m["summary"]["learned_q"]["mean"] - 0.80) < 1e-12 and abs(m["summary"]["learned_q"]["std"] - 0.014142) < 1e-6
    assert (m["summary"]["q_minus_confidence"]["above"], m["summary"]["q_minus_confidence"]["below"]) == (1, 1)
    assert [round(v, 9) for v in m["per_seed"][1]["q_minus_confidence"]["interval"]] == [0.009, 0.011]
    # the findings' row of "measured" was changed (confidence 0.8000 -> 0.8001): the check says so
    assert log[0] == "measured: DIFFERS from the findings' row"
    (tmp_path / "findings.md").write_text("\n".join([row, measured_row]))
    collect(runs, tmp_path / "q.sh", tmp_path / "findings.md", log=log.append)
    assert log[2] == "measured: agrees with the findings' row"
    assert f["per_seed"] is None and f["seeds"] == [0, 1, 2, 3, 4] and "findings.md" in f["source"]
    assert f["summary"]["rot_q_minus_confidence"] == {"mean": -0.0001, "std": 0.0063, "above": 1, "below": 1}
    assert f["summary"]["std_en"] == {"mean": 0.06, "std": 0.0}


def test_the_findings_table_rows_are_read_for_the_named_settings_only(tmp_path):
    (tmp_path / "f.md").write_text("| x | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 | 10 | 11 | 12 | 13 | 14 |")
    assert findings_rows(tmp_path / "f.md", {"y"}) == {}
