"""The Compare runs page under AppTest: two runs overlaid, imports validated, a run named many times in the link,
broken runs, and a run whose card has no metrics measured."""
import io
import json

import pytest
import torch

from helpers import charts, one_line_errors, open_app, run_ok, shown, texts
from ponder.store.card import CARD, WEIGHTS
from ponder.store.checkpoint import load_checkpoint

# under pytest-xdist one worker runs the page tests: their runs folders, the job registry and the pages' first
# imports are set up once
pytestmark = pytest.mark.xdist_group("pages")


@pytest.mark.long
def test_compare_page_overlays_two_runs(runs):
    at = open_app("pages/compare.py")
    at.multiselect(key="compare_models").set_value(["runs/tiny-mnist", "runs/tiny-mnist-b"])
    run_ok(at)
    figs = charts(at)
    assert len(figs) == 3                 # the two overlays and the open tab's training curve: the rest on demand
    halting = figs[0]
    names = [t["name"] for t in halting["data"]]
    assert "runs/tiny-mnist" in names and "runs/tiny-mnist-b" in names and any(n.startswith("prior") for n in names)
    loss = next(f for f in figs if f["layout"]["title"]["text"] == "Training loss")
    assert len(loss["data"]) == 2
    table = at.dataframe[0]
    assert list(table.value["model"]) == ["runs/tiny-mnist", "runs/tiny-mnist-b"] and "sweep" not in table.value
    columns = json.loads(table.proto.columns)              # a missing value shows as "—", numbers stay numbers
    assert table.proto.placeholder == "—" and columns["accuracy"]["type_config"]["format"] == "%.4f"
    assert at.query_params["models"] == ["runs/tiny-mnist", "runs/tiny-mnist-b"]
    assert not [d for d in at.dataframe if "Q-exit − confidence" in d.value]        # "worth it?": measured when opened
    at.session_state["compare_worth_open"] = True
    run_ok(at)
    assert len(charts(at)) == 4                                                    # with the "worth it?" overlay
    # the differences at equal steps with their intervals and each model's test-set size (differences_table)
    diffs = next(d.value for d in at.dataframe if "Q-exit − confidence" in d.value)
    assert list(diffs["model"]) == ["runs/tiny-mnist", "runs/tiny-mnist-b"] and list(diffs["test items"]) == [2000, 2000]
    assert {"Q-exit − fixed depth", "sampled − Q-exit", "tuned on"} <= set(diffs.columns)
    assert all(" [" in v and "]: " in v for v in diffs["sampled − Q-exit"])
    at.session_state["compare_curves"] = "Mean halting step"              # another tab: its curve instead
    titles = [f["layout"].get("title", {}).get("text") for f in charts(run_ok(at))]
    assert "Mean halting step" in titles and "Training loss" not in titles and len(titles) == 4


def _run_files(root, name="tiny-mnist"):
    return (root / name / WEIGHTS).read_bytes(), (root / name / CARD).read_bytes()


def test_import_on_the_compare_page_validates_uploads(runs):
    weights, card = _run_files(runs)
    pickle = io.BytesIO()
    torch.save({"w": torch.zeros(3)}, pickle)
    bad = json.loads(card)
    bad["train"]["max_steps"] = 10**6
    bad_card = json.dumps(bad).encode()
    parity_weights, _ = _run_files(runs, "tiny-parity")
    at = open_app("pages/compare.py")
    cases = [
        ("pickle weights", [("model.safetensors", pickle.getvalue()), ("run.json", card)], "imported", "pickle"),
        ("garbage weights", [("model.safetensors", b"\x00" * 100), ("run.json", card)], "imported", WEIGHTS),
        ("json that is not a card", [("model.safetensors", weights), ("run.json", b"[1, 2, 3]")], "imported", CARD),
        ("not json", [("model.safetensors", weights), ("run.json", b"\xff\xfe{")], "imported", CARD),
        ("out-of-range card", [("model.safetensors", weights), ("run.json", bad_card)], "imported", "max_steps"),
        ("weights of another model", [("model.safetensors", parity_weights), ("run.json", card)], "imported", "fit"),
        ("weights only", [("model.safetensors", weights)], "imported", "exactly one"),
        ("two cards", [("model.safetensors", weights), ("run.json", card), ("b.json", card)], "imported", "exactly one"),
        ("nothing", [], "imported", "exactly one"),
        ("bad name", [("model.safetensors", weights), ("run.json", card)], "!!!", "run name"),
    ]
    before = sorted(p.name for p in runs.iterdir())
    for case, files, name, expect in cases:
        at.file_uploader(key="import_files").set_value([(f, b, "application/octet-stream") for f, b in files] or None)
        at.text_input(key="import_name").set_value(name)
        at.button(key="import_go").click()
        run_ok(at)
        errs = one_line_errors(at)
        assert len(errs) == 1 and expect in errs[0] and not at.exception, ("import", f"{case} -> {errs}")
    assert sorted(p.name for p in runs.iterdir()) == before           # nothing bad landed in the runs folder
    at.file_uploader(key="import_files").set_value([("model.safetensors", weights, "application/octet-stream"),
                                                    ("run.json", card, "application/json")])
    at.text_input(key="import_name").set_value("from upload")
    at.button(key="import_go").click()
    run_ok(at)
    assert any("runs/from-upload" in s.value and "The name from upload became from-upload" in shown(s.value)
               for s in at.sidebar.success)
    assert "runs/from-upload" in at.multiselect(key="compare_models").value        # and it joins the comparison
    load_checkpoint(runs / "from-upload")
    assert len(charts(at)) == 3                             # the two overlays and the open tab's training curve


def test_compare_page_shows_a_run_named_many_times_in_the_link_once(runs):
    at = open_app("pages/compare.py", models=["runs/tiny-mnist"] * 50 + ["runs/tiny-mnist-b"])
    assert at.multiselect(key="compare_models").value == ["runs/tiny-mnist", "runs/tiny-mnist-b"]
    assert list(at.dataframe[0].value["model"]) == ["runs/tiny-mnist", "runs/tiny-mnist-b"]
    (warned,) = [w.value for w in at.warning if "Ignored in the link" in w.value]
    assert "and 44 more" in warned.replace("\\", "") and "\n" not in warned


def test_compare_and_sweep_pages_with_a_broken_run(runs):
    at = open_app("pages/compare.py")
    at.multiselect(key="compare_models").set_value(["runs/tiny-mnist", "runs/broken-mnist"])
    run_ok(at)
    errs = one_line_errors(at)
    assert len(errs) == 1 and WEIGHTS in errs[0] and not at.exception, ("broken run", "compare page")
    at.switch_page("pages/sweep.py")
    run_ok(at)
    at.radio(key="sweep_source_False").set_value("Your sweeps (runs/)")
    run_ok(at)
    at.selectbox(key="sweep_folder").set_value("runs named sweep-* (not in a sweep folder)")
    run_ok(at)
    df = at.dataframe[0].value
    row = df[df["run"] == "runs/sweep-lp0.45"].iloc[0]
    assert row["status"] == "failed" and WEIGHTS in row["reason"] and not at.exception, ("broken run", "sweep results")
    assert any("sweep-lp0.45" in e for e in one_line_errors(at))


def test_compare_page_measures_a_run_whose_card_has_no_metrics(runs):
    at = open_app("pages/compare.py")
    at.multiselect(key="compare_models").set_value(["runs/tiny-mnist", "runs/plain-mnist"])
    run_ok(at)
    df = at.dataframe[0].value
    row = df[df["model"] == "runs/plain-mnist"].iloc[0]
    # measured now on the first lifecycle.QUICK_TEST_ITEMS (2,000) test images, as a run trained here is
    assert row["test n"] == 2000 and 0 <= row["accuracy"] <= 1
    assert "No test metrics for" not in texts(at) and len(charts(at)) == 3      # 2 overlays and a training curve


def test_compare_page_says_what_a_step_is_once_per_design(runs):
    at = open_app("pages/compare.py")
    at.multiselect(key="compare_models").set_value(["mnist-adaptive", "runs/tiny-mnist", "runs/tiny-mnist-b",
                                                    "runs/tiny-parity"])
    said = texts(run_ok(at))
    # the row reader's sentence and its confound (ponder/tasks/mnist.py), then the two whole-image runs together
    assert ("**What a step is** — mnist-adaptive: each step reveals 2 more rows of the image, top to bottom (all 28 "
            "by step 14), so the steps a digit needs depend on how far down its ink goes") in said
    assert "; runs/tiny-mnist, runs/tiny-mnist-b: every step sees the whole image" in said
    assert "; runs/tiny-parity: every step reads the whole vector again" in said
    assert said.count("every step sees the whole image") == 1
