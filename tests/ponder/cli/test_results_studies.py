"""ponder/cli/results_studies.py: the "network that thinks" settings section of results.md, from a hand-made
think.json of two settings (the marks worked out by hand below), and reproduce's results_markdown / --render."""
import copy
import json

from ponder.cli import reproduce
from ponder.cli.main import main
from ponder.cli.reproduce import results_markdown
from ponder.cli.results_studies import THINK_MARKS, closest, load_think, think_marks, think_section


def _pm(mean, std=0.0, above=None, below=0):
    return {"mean": mean, "std": std} if above is None else {"mean": mean, "std": std, "above": above, "below": below}


def _setting(name, acc, std_en, wr, qc, qc_above, qf, qf_above, rot, rot_above):
    return {"name": name, "what": f"{name} changes", "command": f"python -m ponder sweep --out runs/{name}",
            "seeds": [0, 1], "source": f"runs/{name}/measure.json", "per_seed": None,
            "summary": {"accuracy": _pm(acc, 0.001), "mean_en": _pm(3.2, 0.1), "std_en": _pm(std_en, 0.02),
                        "wrong_minus_right_en": _pm(wr, 0.01), "at_steps": _pm(3.21, 0.1), "learned_q": _pm(0.9920),
                        "confidence_exit": _pm(0.9900), "fixed_depth": _pm(0.9800),
                        "q_minus_confidence": _pm(qc, 0.0004, qc_above), "q_minus_fixed": _pm(qf, 0.001, qf_above),
                        "lambda_minus_confidence": _pm(-0.0010, 0.0005, 0, 1),
                        "rot_at_steps": _pm(4.0, 0.2), "rot_q_minus_confidence": _pm(rot, 0.002, rot_above)}}


# "good" (2 seeds) against the marks: accuracy 0.9912 >= 0.99; E[n] std 1.62 >= 1.5; wrong - right 0.71 >= 0.5;
# Q - confidence +0.0031 >= +0.002 with 2 of 2 intervals above 0; Q - fixed +0.0150 > 0, 2 of 2 above; rotated
# +0.0040 > 0, 2 of 2 above: every mark met.
# "short": accuracy 0.9899 < 0.99 (no); E[n] std 1.50 >= 1.5 (yes: the mark itself meets it); wrong - right 0.49 < 0.5
# (no); Q - confidence +0.0020 >= +0.002 but only 1 of 2 intervals above 0 (no); Q - fixed 0.0000, not > 0 (no);
# rotated +0.0010 > 0 with 2 of 2 above (yes): 2 of 6 met.
GOOD = _setting("good", 0.9912, 1.62, 0.71, 0.0031, 2, 0.0150, 2, 0.0040, 2)
SHORT = _setting("short", 0.9899, 1.50, 0.49, 0.0020, 1, 0.0, 0, 0.0010, 2)
THINK = {"kind": "think", "measured_by": "python -m bench.think_measure runs/NAME --json runs/NAME/measure.json",
         "collected_by": "python -m bench.think_measure --collect runs --to docs/studies/think.json",
         "settings": [GOOD, SHORT], "not_run": [{"name": "later", "what": "later changes", "command": "..."}]}


def _row(lines, name):
    (row,) = [line for line in lines if line.startswith(f"| {name} |")]
    return row


def test_the_marks_met_are_computed_from_the_numbers():
    assert [ok for _, ok, _ in think_marks(GOOD)] == [True] * 6
    assert [ok for _, ok, _ in think_marks(SHORT)] == [False, True, False, False, False, True]
    assert len(THINK_MARKS) == 6


def test_one_row_per_setting_with_what_is_still_short():
    lines = think_section(THINK)
    assert lines[0] == "## A network that thinks: the settings tried"
    good, short = _row(lines, "good"), _row(lines, "short")
    assert good.endswith("| 6 of 6 (accuracy, E[n] std, wrong − right E[n], Q-exit − confidence, Q-exit − fixed depth, "
                         "rot 45°: Q-exit − confidence) | nothing: every mark met |")
    assert "| 2 of 6 (E[n] std, rot 45°: Q-exit − confidence) |" in short
    still = short.rsplit("|", 2)[1].strip()
    assert still == ("accuracy 0.9899 (needs ≥ 0.99); wrong − right E[n] +0.49 (needs ≥ 0.5); Q-exit − confidence "
                     "+0.0020, 1 of 2 intervals above 0 (needs ≥ 0.002, all above); Q-exit − fixed depth +0.0000, "
                     "0 of 2 intervals above 0 (needs > 0, all above)")
    # the key numbers: mean ± std over the seeds, the intervals counted above / below 0
    assert "| 0.9912 ± 0.0010 | 3.20 ± 0.10 (1.62 ± 0.02) | +0.71 ± 0.01 | 3.21 ± 0.10 | 0.9920 / 0.9900 / 0.9800 | " \
           "+0.0031 ± 0.0004 (2 / 0) | +0.0150 ± 0.0010 (2 / 0) | -0.0010 ± 0.0005 (0 / 1) | +0.0040 ± 0.0020 (2 / 0) |" in good
    assert "Meeting every mark: `good`." in lines
    assert any("`later` (later changes)" in line for line in lines)
    assert "- short: `python -m ponder sweep --out runs/short`" in lines


def test_no_setting_meeting_the_marks_names_the_closest_and_keeps_the_row_reader():
    worse = _setting("worse", 0.80, 0.1, 0.0, -0.0300, 0, 0.0100, 2, -0.001, 0)    # 1 of 6: Q - fixed only
    think = dict(THINK, settings=[worse, SHORT], not_run=[])
    assert closest(think["settings"])["name"] == "short"                              # 2 of 6 beats 1 of 6
    (verdict,) = [line for line in think_section(think) if line.startswith("**No setting met the marks.**")]
    assert "The closest by marks met, `short` (2 of 6 marks met; of the settings meeting as many, the highest Q-exit " \
           "− confidence exit), has Q-exit +0.0020 ± 0.0004 against the confidence exit at its 3.21 mean steps (1 of 2 " \
           "intervals above 0) at accuracy 0.9899." in verdict and "comes nearer" not in verdict
    assert verdict.endswith("The row reader `mnist-adaptive` stays shipped as the best reached.")
    # "closest" is said of the quantity named: a setting nearer by Q-exit − confidence exit alone is named too
    nearer = _setting("nearer", 0.80, 0.1, 0.0, 0.0030, 0, -0.0100, 0, -0.001, 0)
    (verdict,) = [line for line in think_section(dict(think, settings=[worse, SHORT, nearer]))
                  if line.startswith("**No setting met the marks.**")]
    assert "By Q-exit − confidence exit alone `nearer` comes nearer, +0.0030 ± " in verdict
    # equal marks met: the higher Q-exit − confidence exit is the closer
    other = copy.deepcopy(SHORT)
    other["name"], other["summary"]["q_minus_confidence"]["mean"] = "other", 0.0021
    assert closest([SHORT, other])["name"] == "other"


def test_results_markdown_has_the_section_only_when_think_json_is_there():
    r = {"quick": False, "device": "cpu", "torch": "2", "date": "2026-01-01", "models": {}}
    assert "A network that thinks" not in results_markdown(r)
    assert "A network that thinks" not in results_markdown(dict(r, think=None))
    md = results_markdown(dict(r, think=THINK))
    assert md.count("## A network that thinks: the settings tried") == 1 and "| short |" in md


def test_load_think_reads_only_the_settings_file(tmp_path):
    assert load_think(tmp_path) is None
    (tmp_path / "think.json").write_text('{"settings": []}')                     # a study, not the settings file
    assert load_think(tmp_path) is None
    (tmp_path / "think.json").write_text(json.dumps(THINK))
    assert load_think(tmp_path) == THINK


def test_render_writes_results_md_again_from_results_json_and_the_studies(tmp_path, monkeypatch, capsys):
    studies, out = tmp_path / "studies", tmp_path / "out"
    studies.mkdir(), out.mkdir()
    (studies / "think.json").write_text(json.dumps(THINK))
    (out / "results.json").write_text(json.dumps({"quick": False, "device": "cpu", "torch": "2", "date": "d",
                                                  "models": {}}))
    monkeypatch.setattr(reproduce, "STUDIES", studies)
    assert main(["reproduce", "--render", "--out", str(out)]) == 0
    assert "| good |" in (out / "results.md").read_text()
    assert json.loads((out / "results.json").read_text())["think"] == THINK
    assert "merged nothing" in capsys.readouterr().out
