"""The Runs page under AppTest: list, rename, delete (with a confirmation, and only the run it showed), unreadable
runs, export a zip that import takes back, and a run being written is refused."""
import json
import os

import pytest
import torch

from helpers import edit_card, lock_held_elsewhere, one_line_errors, open_app, run_ok, save_tiny_run, texts
from ponder.store.card import CARD, read_card
from ponder.store.checkpoint import load_checkpoint

# under pytest-xdist one worker runs the page tests: their runs folders, the job registry and the pages' first
# imports are set up once
pytestmark = pytest.mark.xdist_group("pages")


@pytest.fixture
def own_runs(tmp_path, monkeypatch):
    """A runs folder of its own (no MNIST needed): two parity runs and a sweep's trial."""
    root = tmp_path / "runs"
    monkeypatch.setenv("PONDER_RUNS", str(root))
    for i, name in enumerate(("alpha", "beta")):
        save_tiny_run(root / name, seed=i, metrics={"test": {"accuracy": 0.625, "mean_steps": 2.5, "n": 8}})
    save_tiny_run(root / "sw" / "lambda_p0.3-seed0")
    plan = {"task": "parity", "base": {"hidden": 16, "max_steps": 5}, "grid": {"lambda_p": [0.3]}, "seeds": [0]}
    (root / "sw" / "sweep.json").write_text(json.dumps({"plan": plan, "trials": []}))
    return root


def _runs_page():
    at = open_app("pages/runs.py")
    assert at.title[0].value == "Runs"
    return at


def _pick(at, name):
    at.selectbox(key="runs_pick").set_value(name)
    return run_ok(at)


def test_runs_page_lists_renames_and_deletes_with_a_confirmation(own_runs):
    at = _runs_page()
    table = at.dataframe[0].value
    rows = {r["run"]: r for r in table.to_dict("records")}
    assert {"runs/alpha", "runs/beta", "runs/sw/lambda_p0.3-seed0", "mnist-default", "parity-15"} <= set(rows)
    assert rows["runs/alpha"]["accuracy"] == 0.625 and rows["runs/alpha"]["mean steps"] == 2.5
    assert rows["runs/alpha"]["task"] == "parity" and rows["runs/alpha"]["status"] == "completed"
    assert rows["mnist-default"]["where"] == "shipped (read-only)" and rows["runs/sw/lambda_p0.3-seed0"]["where"] == "sweep sw"
    trial = rows["runs/sw/lambda_p0.3-seed0"]                 # no test numbers: empty, shown as "—" (not "None")
    assert trial["accuracy"] != trial["accuracy"] and table["accuracy"].dtype.kind == "f"
    assert at.dataframe[0].proto.placeholder == "—"
    _pick(at, "runs/alpha")
    # a taken name is refused in one line, and nothing moves
    at.text_input(key="runs_new_name").set_value("beta")
    at.button(key="runs_rename_go").click()
    run_ok(at)
    assert "already in the runs folder" in one_line_errors(at)[0] and (own_runs / "alpha").is_dir()
    # a name with other characters: renamed, and the page says what the name became
    at.text_input(key="runs_new_name").set_value("my alpha!")
    at.button(key="runs_rename_go").click()
    run_ok(at)
    assert "Renamed runs/alpha to runs/my-alpha (you typed 'my alpha!'" in texts(at)
    assert at.selectbox(key="runs_pick").value == "runs/my-alpha" and not (own_runs / "alpha").exists()
    assert at.text_input(key="runs_new_name").value == ""              # ready for the next name
    assert read_card(own_runs / "my-alpha")["name"] == "my-alpha"
    # delete asks first; Cancel keeps the run
    at.button(key="runs_delete").click()
    run_ok(at)
    assert ("Delete runs/my-alpha for good? Its weights, card and training history are removed. This cannot be "
            "undone.") in texts(at)
    at.button(key="runs_delete_cancel").click()
    run_ok(at)
    assert "for good" not in texts(at) and (own_runs / "my-alpha").is_dir()
    at.button(key="runs_delete").click()
    run_ok(at)
    at.button(key="runs_delete_yes").click()
    run_ok(at)
    assert "Deleted runs/my-alpha." in texts(at) and not (own_runs / "my-alpha").exists()
    assert "runs/my-alpha" not in at.selectbox(key="runs_pick").options


def test_runs_page_deletes_and_renames_the_run_it_showed_not_one_given_its_name_since(own_runs):
    from ponder.store.manage import delete_run, rename_run
    at = _runs_page()
    _pick(at, "runs/alpha")
    at.button(key="runs_delete").click()                     # this session opens "Delete…" on runs/alpha
    run_ok(at)
    delete_run("alpha", own_runs)                            # another session deletes alpha, renames beta to alpha
    rename_run("beta", "alpha", own_runs)
    at.button(key="runs_delete_yes").click()
    run_ok(at)
    assert "no longer the run you opened" in one_line_errors(at)[0] and (own_runs / "alpha" / CARD).is_file()
    assert "Deleted" not in texts(at)
    # the rename form, too, renames the run it was shown on
    _pick(at, "runs/alpha")
    rename_run("alpha", "gamma", own_runs)
    save_tiny_run(own_runs / "alpha", seed=5)
    at.text_input(key="runs_new_name").set_value("delta")
    at.button(key="runs_rename_go").click()
    run_ok(at)
    assert "no longer the run you opened" in one_line_errors(at)[0] and not (own_runs / "delta").exists()


def test_runs_page_lists_an_unreadable_run_with_why_and_deletes_it(own_runs):
    # a card whose numbers are out of range (steps 10**20: st.dataframe could not show it) is listed apart
    edit_card(own_runs / "beta", lambda card: card.update(steps=10 ** 20))
    at = _runs_page()
    assert "runs/beta" not in [r["run"] for r in at.dataframe[0].value.to_dict("records")]
    assert any(t.startswith("runs/beta: ") and "steps must be an integer in [0, 1,000,000,000]" in t
               for t in (x.value for x in at.text)), [x.value for x in at.text]
    at.button(key="runs_bad_delete").click()
    run_ok(at)
    at.button(key="runs_bad_delete_yes").click()
    run_ok(at)
    assert "Deleted runs/beta." in texts(at) and not (own_runs / "beta").exists()
    assert not at.get("expander") or "cannot be read" not in at.get("expander")[0].label


@pytest.mark.parametrize("kind", ["train-task-missing", "history-link", "sweep-trial-unreadable"])
def test_runs_page_lists_what_it_cannot_read_and_deletes_it(own_runs, tmp_path, kind):
    """A card without its task crashed the Runs page (KeyError: 'task'), so nothing could delete it; a run whose
    metrics.jsonl is a link vanished from every list; an unreadable trial was listed but could not be deleted."""
    victim = own_runs / ("sw" if kind == "sweep-trial-unreadable" else "beta")
    (tmp_path / "elsewhere.jsonl").write_text('{"step": 1}\n')
    if kind == "train-task-missing":                  # an MNIST card: the check filled in the default task, mnist
        victim, _ = save_tiny_run(own_runs / "gamma", "mnist")
        edit_card(victim, lambda card: card["train"].pop("task"))
    elif kind == "history-link":
        (victim / "metrics.jsonl").unlink()
        (victim / "metrics.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    else:
        edit_card(victim / "lambda_p0.3-seed0", lambda card: card.update(format_version=7))
    at = _runs_page()
    assert not at.exception and not any(r["run"].startswith(f"runs/{victim.name}")
                                        for r in at.dataframe[0].value.to_dict("records"))
    assert any(t.startswith(f"runs/{victim.name}") for t in (x.value for x in at.text)), [x.value for x in at.text]
    at.button(key="runs_bad_delete").click()
    run_ok(at)
    at.button(key="runs_bad_delete_yes").click()
    run_ok(at)
    assert not victim.exists() and (own_runs / "alpha").is_dir() and (tmp_path / "elsewhere.jsonl").is_file()
    assert f"Deleted {'the sweep ' if victim.name == 'sw' else ''}runs/{victim.name}" in texts(at)


def test_runs_page_exports_a_zip_that_its_import_takes_back(own_runs, monkeypatch):
    import ponder.store.manage
    exported = {}
    real = ponder.store.manage.export_run
    monkeypatch.setattr(ponder.store.manage, "export_run", lambda p: exported.setdefault(p.name, real(p)))
    at = _runs_page()
    _pick(at, "runs/beta")
    assert at.get("download_button")[0].label == "Export (.zip)"
    at.file_uploader(key="import_files").set_value([("beta.zip", exported["beta"], "application/zip")])
    at.text_input(key="import_name").set_value("beta back")
    at.button(key="import_go").click()
    run_ok(at)
    assert "Imported as runs/beta-back." in texts(at) and at.selectbox(key="runs_pick").value == "runs/beta-back"
    a, b = load_checkpoint(own_runs / "beta"), load_checkpoint(own_runs / "beta-back")
    assert all(torch.equal(v, b.model.state_dict()[k]) for k, v in a.model.state_dict().items())
    # a shipped model is exported only; a sweep's trial is exported, or its whole sweep deleted
    for name in ("parity-15", "runs/sw/lambda_p0.3-seed0"):
        _pick(at, name)
        assert at.get("download_button") and not at.get("text_input")[:-1], name   # only the import's name box
        assert [b.label for b in at.button if b.key == "runs_delete"] == ([] if name == "parity-15" else
                                                                          ["Delete the sweep…"])
    assert "parity-15" in exported and "lambda_p0.3-seed0" in exported
    at.button(key="runs_delete").click()
    run_ok(at)
    assert "Delete the sweep runs/sw and its 1 trial for good?" in texts(at)
    at.button(key="runs_delete_yes").click()
    run_ok(at)
    assert "Deleted the sweep runs/sw and its 1 trial." in texts(at) and not (own_runs / "sw").exists()
    assert sorted(p.name for p in own_runs.iterdir()) == ["alpha", "beta", "beta-back"]


def test_runs_page_refuses_to_delete_a_run_being_written(own_runs):
    at = _runs_page()
    _pick(at, "runs/beta")
    with lock_held_elsewhere(own_runs / "beta"):          # what a training into runs/beta holds
        at.button(key="runs_delete").click()
        run_ok(at)
        at.button(key="runs_delete_yes").click()
        run_ok(at)
        errs = one_line_errors(at)
    # the export (beside it) and the delete both say so; the run stays
    assert len(errs) == 2 and all(e.startswith("runs/beta: in use (a training is writing it") or
                                  e.startswith("beta: in use (a training is writing it") for e in errs), errs
    assert (own_runs / "beta" / CARD).is_file()


@pytest.mark.parametrize("name, said", [
    ("runs/alpha", "**A step** of runs/alpha: every step reads the whole vector again and updates the cell's state"),
    ("mnist-adaptive", "**A step** of mnist-adaptive: each step reveals 2 more rows of the image, top to bottom (all "
                       "28 by step 14), so the steps a digit needs depend on how far down its ink goes")])
def test_runs_page_says_what_a_step_is_for_the_run_picked(own_runs, name, said):
    assert said in texts(_pick(_runs_page(), name))


@pytest.mark.parametrize("field, value, bad", [("status", "\ud800", "D800"), ("created", "2026-11-28\udfff", "DFFF"),
                                               ("name", "a\x00b", "0000"), ("reason", "\x1b[2Jwiped", "001B"),
                                               ("device", "cpu\u202e", "202E")])
def test_runs_page_lists_a_card_whose_text_is_no_text_as_unreadable_and_deletes_it(own_runs, field, value, bad):
    """A lone surrogate in a card's status or time stamp (valid JSON) crashed the Runs page for every visitor on
    every view (StreamlitDataframeConversionError), so nothing could delete it; a NUL, an escape sequence or a
    bidirectional override in a name, reason or device reached the pages."""
    edit_card(own_runs / "beta", lambda card: card.update({field: value}))
    at = _runs_page()
    assert "runs/beta" not in [r["run"] for r in at.dataframe[0].value.to_dict("records")]
    assert any(t.startswith("runs/beta: ") and f"{field}: holds U+{bad}" in t
               for t in (x.value for x in at.text)), [x.value for x in at.text]
    at.button(key="runs_bad_delete").click()
    run_ok(at)
    at.button(key="runs_bad_delete_yes").click()
    run_ok(at)
    assert "Deleted runs/beta." in texts(at) and not (own_runs / "beta").exists()


def test_runs_page_lists_a_folder_whose_name_is_not_utf8_as_unreadable_and_deletes_it(own_runs):
    """A run folder named by bytes that are not UTF-8 reads back with lone surrogates, which no page can show."""
    bad = own_runs / os.fsdecode(b"caf\xe9")
    save_tiny_run(bad)
    at = _runs_page()
    assert r"runs/'caf\udce9': its folder's name holds U+DCE9" in " ".join(x.value for x in at.text)
    assert at.selectbox(key="runs_bad_pick").value == f"runs/{bad.name}"
    at.button(key="runs_bad_delete").click()
    run_ok(at)
    at.button(key="runs_bad_delete_yes").click()
    run_ok(at)
    assert r"Deleted runs/'caf\udce9'." in texts(at) and not bad.exists() and (own_runs / "alpha").is_dir()


@pytest.mark.parametrize("card, said", [
    (lambda c: b"[" * 100000 + b"]" * 100000, "not valid JSON (RecursionError"),              # crashed the page
    (lambda c: b'{"name": ' + b"[" * 5000 + b"]" * 5000 + b"}", "not valid JSON (RecursionError"),
    (lambda c: json.dumps(dict(c, name="\ud800")).encode(), "name: holds U+D800"),
    (lambda c: json.dumps(dict(c, name="!!!")).encode(), "Imported as runs/imported."),      # no usable name: its own
    (lambda c: json.dumps(dict(c, name="")).encode(), "Imported as runs/imported.")])
def test_import_of_separate_files_with_a_deep_or_nameless_card_is_one_line(own_runs, card, said):
    """run.json nested deep crashed the page (RecursionError reading the name it brings); a name without a usable
    character was refused instead of the run taking a name of its own."""
    weights, text = (own_runs / "alpha" / "model.safetensors").read_bytes(), (own_runs / "alpha" / CARD).read_text()
    at = _runs_page()
    at.file_uploader(key="import_files").set_value([("model.safetensors", weights, "application/octet-stream"),
                                                    ("run.json", card(json.loads(text)), "application/json")])
    at.button(key="import_go").click()
    run_ok(at)
    shown = texts(at) + " ".join(one_line_errors(at))
    assert said in shown, shown
    assert sorted(p.name for p in own_runs.iterdir()) == ["alpha", "beta"] + (["imported"] if "Imported" in said else []) + ["sw"]
