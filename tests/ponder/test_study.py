"""ponder/study.py: a sweep's trials measured, their pays() numbers in the cards, and the settings summarised
over seeds in study.json / study.md; `python -m ponder study` and what results.md reads."""
import json

import pytest

from ponder.cli import main
from ponder.config import ConfigError
from ponder.store.card import read_card
from ponder.study import STUDY, STUDY_TABLE, load_studies, setting_label, study, study_markdown

TINY = ["--task", "parity", "--parity-preset", "small", "--hidden", "8", "--epochs", "1", "--steps-per-epoch", "6",
        "--max-steps", "4", "--device", "cpu"]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    folder = tmp_path_factory.mktemp("study") / "sw"
    assert main(["sweep", *TINY, "--grid", "lambda_p=0.3,0.5", "--seeds", "0,1", "--out", str(folder)]) == 0
    return folder


def test_a_study_summarises_each_setting_over_its_seeds(swept, tmp_path, capsys):
    to = tmp_path / "docs" / "tiny.json"
    assert main(["study", str(swept), "--to", str(to)]) == 0
    s = json.loads((swept / STUDY).read_text())
    assert json.loads(to.read_text()) == s and (swept / STUDY_TABLE).read_text() == study_markdown(s)
    assert [st["setting"] for st in s["settings"]] == [{"lambda_p": 0.3}, {"lambda_p": 0.5}]
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
    assert "| lambda_p 0.3 |" not in out and "lambda_p 0.3 | 0, 1 |" in out     # the label names the fixed flags too
    assert load_studies(to.parent) == {"tiny": s}


def test_a_folder_without_a_sweep_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="holds no sweep"):
        study(tmp_path)


def test_setting_label_names_the_flags_its_task_reads():
    base = {"regulariser": "kl", "lambda_p": 0.5, "beta": 0.01, "hidden": 32, "lambda_input": "hidden",
            "reader": "rows", "parity_preset": "video-15", "steps_per_epoch": 1000}
    assert setting_label({"beta": 0.1}, base, "parity") == (
        "regulariser kl, lambda_p 0.5, hidden 32, lambda_input hidden, parity_preset video-15, beta 0.1")
    assert setting_label({"beta": 0.1}, base, "mnist") == (
        "regulariser kl, lambda_p 0.5, hidden 32, lambda_input hidden, reader rows, beta 0.1")


def test_load_studies_skips_what_it_cannot_read(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "ok.json").write_text('{"settings": []}')
    assert load_studies(tmp_path) == {"ok": {"settings": []}} and load_studies(tmp_path / "none") == {}
