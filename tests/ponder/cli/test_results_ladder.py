"""ponder/cli/results_ladder.py: the ladder's section of results.md from a hand-made two-rung report."""
import json

from ponder.cli.results_ladder import ladder_section, load_ladder

CFG = dict(method="repeat", max_steps=2, beta=0.01, lambda_p=0.2, hidden=128, lr=1e-3, grad_clip=1e6,
           options=dict(cell="tanh", layout="prefix", init="glorot"))
FRONTIER = [dict(policy="fixed_depth", budget=float(b), val_steps=float(b), seen=dict(mean_steps=float(b), accuracy=a),
                 unseen=dict(mean_steps=float(b), accuracy=0.5)) for b, a in ((1, 0.61), (2, 0.991))]
EXP = dict(method="repeat", label="Repeat-RNN", train_k=[1, 48], seen=dict(accuracy=0.991, mean_steps=2.0, n=4000),
           unseen=dict(accuracy=0.52, mean_steps=2.0, n=4000), by_k=[], frontier=FRONTIER)
RUNGS = {"a-repeat2": dict(status="completed", config=CFG, updates=60000, last=0.99, best=0.992, to_098=21000,
                           seconds=832.4, curve=[[1000, 0.5], [21000, 0.981]], experiment=EXP),
         "c-ponder": dict(status="running", config=dict(CFG, method="ponder", lambda_p=0.5, max_steps=20),
                          updates=7000, last=0.51, best=0.52, to_098=None, seconds=None, curve=[[7000, 0.51]],
                          experiment=None)}


def test_a_rung_reads_as_its_setting_its_progress_and_its_own_answer_on_seen_and_unseen_k():
    lines = ladder_section(RUNGS)
    assert lines[0] == "## The paper's parity experiment: the ladder"
    # the verdict first: 0.991 >= 0.98 solves the trained k; 0.52 on the unseen k is near chance
    assert lines[2] == ("Solved on the trained k (≥ 98%): a-repeat2 (Repeat-RNN). On the unseen k the best is "
                        "a-repeat2 (Repeat-RNN) at 52.0% — near chance (50 %).")
    row = next(l for l in lines if l.startswith("| a-repeat2 "))
    assert row == ("| a-repeat2 | repeat ρ=2, tanh 128, prefix, lr 0.001, Glorot init, no clip | completed | 60,000 | "
                   "0.992 | 21000 | 0.991 (2.00) | 0.520 (2.00) | 832 |")
    running = next(l for l in lines if l.startswith("| c-ponder "))
    assert "PonderNet λp=0.5" in running and "| running | 7,000 | 0.520 | never | – | – | – |" in running
    assert ladder_section(None) == []
    # the frontier: a run of N = 2 has budgets 1 and 2 only
    assert "| a-repeat2 | fixed depth | 0.610 (1.0) | 0.991 (2.0) | – | – | – | – |" in lines


def test_load_ladder_reads_only_a_ladder_report(tmp_path):
    assert load_ladder(tmp_path) is None
    (tmp_path / "parity_ladder.json").write_text(json.dumps({"kind": "study", "rungs": RUNGS}))
    assert load_ladder(tmp_path) is None
    (tmp_path / "parity_ladder.json").write_text(json.dumps({"kind": "ladder", "rungs": RUNGS}))
    assert set(load_ladder(tmp_path)) == {"a-repeat2", "c-ponder"}
