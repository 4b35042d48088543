"""ponder/sweeps/study.py: a sweep's trials measured, their pays() numbers in the cards, and the settings summarised
over seeds in study.json / study.md; `python -m ponder study` and what results.md reads."""
import json

import pytest

from ponder.cli.main import main
from ponder.config import ConfigError
from ponder.store.card import read_card
from ponder.sweeps.study import STUDY, STUDY_TABLE, load_studies, study, study_markdown

TINY = ["--task", "parity", "--parity-preset", "small", "--hidden", "8", "--epochs", "1", "--steps-per-epoch", "6",
        "--max-steps", "4", "--device", "cpu"]


pytestmark = pytest.mark.xdist_group("study")       # under pytest-xdist: one worker makes the module's sweep once


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    folder = tmp_path_factory.mktemp("study") / "sw"
    assert main(["sweep", *TINY, "--grid", "lambda_p=0.3,0.5", "--seeds", "0,1", "--out", str(folder)]) == 0
    return folder


@pytest.mark.long
def test_a_study_summarises_each_setting_over_its_seeds(swept, tmp_path, capsys):
    to = tmp_path / "docs" / "tiny.json"
    assert main(["study", str(swept), "--to", str(to), "--ship", "parity-15"]) == 0
    s = json.loads((swept / STUDY).read_text())
    assert json.loads(to.read_text()) == s and (swept / STUDY_TABLE).read_text() == study_markdown(s)
    # a setting: the config fields a study names settings by (those parity reads), then the grid's values
    assert [st["setting"] for st in s["settings"]] == [
        {"regulariser": "kl-reverse", "lambda_p": lp, "beta": 0.01, "hidden": 8, "lambda_input": "hidden",
         "epochs": 1.0, "batch_size": 128, "lr": 0.003, "parity_preset": "small"} for lp in (0.3, 0.5)]
    for st in s["settings"]:
        assert st["seeds"] == [0, 1] and [t["seed"] for t in st["trials"]] == [0, 1]
        learned = [t["pays"]["learned"] for t in st["trials"]]
        o = st["over_seeds"]["learned"]
        assert o["n"] == 2 and o["mean"] == pytest.approx(sum(learned) / 2)
        assert o["min"] == min(learned) and o["max"] == max(learned)
        # parity's easy / hard groups: their per-step accuracy curves, one number per step, averaged over the seeds
        assert len(st["curves"]["easy"]) == len(st["curves"]["hard"]) == 4
    # each trial's card now holds its pays() numbers, the same the study read
    card = read_card(swept / "lambda_p0.3-seed1")
    assert card["metrics"]["test"]["pays"] == s["settings"][0]["trials"][1]["pays"]
    out = capsys.readouterr().out
    # the table names what every setting shares once, and each row by what differs
    assert "parity; every setting: regulariser kl-reverse, beta 0.01, hidden 8," in out
    assert "| lambda_p 0.3 | 0, 1 |" in out and "| lambda_p 0.5 | 0, 1 |" in out
    assert load_studies(to.parent) == {"tiny": s}


@pytest.mark.long
def test_a_study_reports_the_policies_with_their_intervals_and_where_they_were_tuned(swept):
    if not (swept / STUDY).exists():          # this test alone: the study the test above runs
        assert main(["study", str(swept), "--ship", "parity-15"]) == 0
    s = json.loads((swept / STUDY).read_text())
    for st in s["settings"]:
        for tr in st["trials"]:               # each trial: tuned on its validation vectors, item bootstrap intervals
            assert tr["tuned_on"]["set"] == "validation" and tr["tuned_on"]["n"] > 0
            assert {"learned_q-confidence_exit", "learned_q-fixed_depth", "sampled-learned_q"} <= set(tr["ci95"])
        o = st["over_seeds"]["learned_q_minus_fixed"]
        lo, hi = o["ci95"]
        assert o["n"] == 2 and lo <= o["mean"] <= hi
    # the setting to ship is chosen on the validation vectors' numbers (each trial's pays of them), its seed 0 ships
    assert all(tr["validation"]["learned_q"] is not None for st in s["settings"] for tr in st["trials"])
    sh = s["ship"]
    assert sh["on"] == "validation" and sh["seed"] == 0 and sh["of"] == 5 and sh["setting"] in [
        st["setting"] for st in s["settings"]] and set(sh["rank"]) == {"accuracy", "learned_q_minus_confidence",
                                                                       "learned_q_minus_fixed"}
    md = study_markdown(s)
    assert "Chosen on the validation set to ship as parity-15: lambda_p " in md and "its seed 0 ships" in md
    assert "| setting | seeds | sampled | Q-exit | confidence exit | fixed depth | Q-exit − confidence | " in md
    assert "operating points chosen on the validation set" in md
    assert "Fewer than 5 seeds (their spread and intervals say little): lambda_p 0.3; lambda_p 0.5." in md


def _setting(values, seeds):
    rows = [{"learned_q_minus_confidence": v, "learned": 0.9 + v} for v in values]
    from ponder.analysis.pays import KEYS, over_seeds
    return {"setting": {"lambda_p": 0.5}, "seeds": seeds, "curves": {},
            "over_seeds": over_seeds([{**dict.fromkeys(KEYS), **r} for r in rows]),
            "trials": [{"tuned_on": {"set": "validation", "n": 5000}} for _ in seeds]}


def test_a_study_table_of_five_seeds_by_hand():
    # Q-exit − confidence over 5 seeds 0.01 .. 0.05: mean 0.03, t(4) · std / √5 = 2.776 · 0.015811 / 2.236 = 0.0196
    s = {"folders": ["sw"], "task": "mnist", "settings": [_setting([v / 100 for v in range(1, 6)], [0, 1, 2, 3, 4])]}
    md = study_markdown(s)
    assert "| - | 0, 1, 2, 3, 4 | 0.9300 ± 0.0158 (0.9100 to 0.9500) | +0.0300 [+0.0104, +0.0496] (+0.0100 to +0.0500) |" in md
    assert "Fewer than" not in md


@pytest.mark.long
def test_a_study_ships_only_a_model_with_marks(swept):
    with pytest.raises(ConfigError, match="no marks"):
        study(swept, ship="mnist-default")


def test_a_folder_without_a_sweep_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="holds no sweep"):
        study(tmp_path)


@pytest.mark.long
def test_several_sweeps_make_one_study(swept, tmp_path, capsys):
    other = tmp_path / "other"
    assert main(["sweep", *TINY, "--hidden", "12", "--lambda-p", "0.3", "--seeds", "0", "--out", str(other)]) == 0
    assert main(["study", str(swept), str(other)]) == 1      # several folders need --to, said in one line
    assert "ponder: error: a study of several sweep folders is written where --to says" in capsys.readouterr().err
    s = study([swept, other])
    assert s["folders"] == ["sw", "other"] and len(s["settings"]) == 3
    assert s["settings"][2]["trials"][0]["name"] == "other/seed0" and s["settings"][2]["seeds"] == [0]
    md = study_markdown(s)
    # the rows differ in hidden size and lambda_p: both name a row; a study of one folder writes nothing else
    assert "| lambda_p 0.3, hidden 8 | 0, 1 |" in md and "| lambda_p 0.3, hidden 12 | 0 |" in md
    assert not (other / STUDY).exists()


@pytest.mark.long
def test_a_study_of_two_tasks_is_refused(swept, tmp_path):
    mnistish = tmp_path / "m"
    mnistish.mkdir()
    sw = json.loads((swept / "sweep.json").read_text())
    base = {k: v for k, v in sw["plan"]["base"].items() if k != "options"}       # parity's own options are not mnist's
    (mnistish / "sweep.json").write_text(json.dumps({**sw, "plan": {**sw["plan"], "task": "mnist", "base": base},
                                                     "trials": []}))
    with pytest.raises(ConfigError, match="one task"):
        study([swept, mnistish])


def test_load_studies_skips_what_it_cannot_read(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "ok.json").write_text('{"settings": []}')
    assert load_studies(tmp_path) == {"ok": {"settings": []}} and load_studies(tmp_path / "none") == {}


def test_load_studies_leaves_out_a_file_of_another_kind(tmp_path):
    (tmp_path / "think.json").write_text('{"kind": "think", "settings": []}')
    (tmp_path / "ok.json").write_text('{"settings": []}')
    assert load_studies(tmp_path) == {"ok": {"settings": []}}
