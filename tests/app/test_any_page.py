"""Any page under AppTest: a run that cannot be loaded is one red line, card text is plain text, the server's upload
limit, no traceback or server paths on an uncaught error, per-step downloads and a PNG button on every chart."""
import json
import shutil
from pathlib import Path

import pytest

from helpers import APP, charts, one_line_errors, open_app, run_ok, save_tiny_run, texts
from ponder.store.card import WEIGHTS

# under pytest-xdist one worker runs the page tests: their runs folders, the job registry and the pages' first
# imports are set up once
pytestmark = pytest.mark.xdist_group("pages")


@pytest.mark.parametrize("key,model", [("digit", "runs/broken-mnist"), ("parity", "runs/broken-parity"),
                                       ("rotation", "runs/broken-mnist")])
def test_a_run_that_cannot_be_loaded_is_one_red_line(runs, key, model):
    at = open_app(page=key, model=model)                   # a shared link to the broken run
    if key == "rotation":
        at.number_input(key="rot_limit").set_value(100)
        at.button(key="rot_go").click()
        run_ok(at)
    errs = one_line_errors(at)
    ok = len(errs) == 1 and WEIGHTS in errs[0] and "broken" in errs[0] and not at.exception and not charts(at)
    assert ok, ("broken run", f"{key} page")


def test_card_text_is_shown_as_plain_text_never_as_links_or_images(runs):
    """An imported card's reason and name cannot put links or remote images in another user's page."""
    from explorer.tables import plain
    reason = "see [the fix](http://evil.example/fix) ![pixel](http://evil.example/p.png) :red[ALERT]"
    d = runs / "md-card"
    save_tiny_run(d, "mnist", status="cancelled", reason=reason)
    try:
        at = open_app(model="runs/md-card")
        assert at.sidebar.selectbox(key="pick_model_mnist").value == "runs/md-card"
        warning = [w.value for w in at.sidebar.warning if "Partial run" in w.value]
        tooltip = at.sidebar.selectbox(key="pick_model_mnist").help
        assert warning == [f"Partial run (cancelled): {plain(reason)}"], warning
        for shown_text in (warning[0], tooltip):
            assert "](" not in shown_text and "![" not in shown_text and ":red[" not in shown_text, shown_text
    finally:
        import shutil
        shutil.rmtree(d)


def test_the_server_takes_no_upload_larger_than_a_widget_reads():
    """Streamlit enforces only server.maxUploadSize on the server (200 MB by default); each widget's limit is the
    browser's. The largest a widget reads is an import's MAX_UPLOAD_BYTES."""
    import tomllib
    from ponder.store.uploads import MAX_UPLOAD_BYTES
    cfg = tomllib.loads((Path(APP).parent / ".streamlit" / "config.toml").read_text())
    assert cfg["server"]["maxUploadSize"] == MAX_UPLOAD_BYTES // 2**20


def test_each_page_run_is_followed_by_a_collection_that_scans_only_what_the_runs_made(runs):
    """Reference cycles a run leaves (Plotly figures) are freed after it ([runner] postScriptGC), not sessions later;
    that collection is cheap because the app froze the ~440k objects of its imports after its first page run."""
    import gc
    import tomllib
    cfg = tomllib.loads((Path(APP).parent / ".streamlit" / "config.toml").read_text())
    assert cfg["runner"]["postScriptGC"] is True
    open_app("pages/runs.py")
    frozen = gc.get_freeze_count()
    assert frozen > 100_000                               # torch, plotly, streamlit and the app's modules
    open_app("pages/compare.py")
    assert gc.get_freeze_count() <= frozen     # once per process (less what was freed since): later runs' objects stay
    #                                            collectable


def test_an_uncaught_error_shows_no_traceback_or_server_paths(runs, monkeypatch):
    """.streamlit/config.toml: showErrorDetails keeps exception types, messages and tracebacks in the server log."""
    import explorer.app.loaders

    def broken(task=None):
        raise RuntimeError(f"boom in {runs}/secret-file.json")
    monkeypatch.setattr(explorer.app.loaders, "models", broken)
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert at.exception, "the page should have failed"
    shown_text = " ".join(str(e.value) + " " + " ".join(e.stack_trace) for e in at.exception)
    assert "secret-file" not in shown_text and "RuntimeError" not in shown_text and "Traceback" not in shown_text \
        and ".py" not in shown_text, shown_text


@pytest.mark.long
@pytest.mark.parametrize("page", ["digit", "parity"])
def test_per_step_numbers_download_and_every_chart_has_a_png_button(runs, mnist, page):
    at = open_app(page=page, model="runs/tiny-mnist" if page == "digit" else "runs/tiny-parity")
    if page == "digit":
        at.segmented_control(key="digit_source").set_value("MNIST test digit")
    run_ok(at)
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Steps as CSV" in labels and "Steps as JSON" in labels
    configs = [json.loads(c.proto.config) for c in at.get("plotly_chart")]
    assert configs and all(c["modeBarButtons"] == [["toImage"]] and c["toImageButtonOptions"]["format"] == "png"
                           for c in configs)


@pytest.mark.parametrize("page, query, needs", [
    ("digit", {}, ""), ("train", {}, "MNIST was not found"), ("sweep", {}, ""), ("rotation", {}, "MNIST was not found"),
    ("compare", {}, ""), ("parity", {"model": "runs/tiny-parity"}, ""), ("runs", {}, "")])
def test_without_mnist_every_page_opens_and_those_that_need_it_say_so(runs, tmp_path, monkeypatch, page, query,
                                                                      needs):
    # the README: without MNIST the Rotation study and MNIST training say so and offer the download; the other
    # pages work with the shipped models
    monkeypatch.setenv("PONDER_DATA", str(tmp_path / "no-mnist"))
    at = open_app(f"pages/{page}.py", **query)
    assert not at.error, [e.value for e in at.error]
    said = [i.value for i in at.info if "MNIST was not found" in i.value]
    assert bool(said) == bool(needs), said
    if needs:
        assert at.button(key=f"{page}_download").label.startswith("Download MNIST")
    else:
        assert at.title[0].value and "Download MNIST" not in texts(at)


def test_card_and_sweep_text_that_is_no_text_never_reaches_a_page(tmp_path, monkeypatch):
    """A lone surrogate ("\\ud800" is valid JSON) in a card's name or reason crashed the parity picker (its tooltip:
    UnicodeEncodeError) and Compare, and in a sweep record's reason the λp sweep page; a NUL or an escape sequence
    reached them as it was. Such a run is listed as unreadable (the Runs page), a sweep is one red line."""
    from helpers import edit_card
    from ponder.store.runs import SWEEP
    root = tmp_path / "runs"
    monkeypatch.setenv("PONDER_RUNS", str(root))
    save_tiny_run(root / "fine")
    for name, field, value in (("bad-name", "name", "\ud800"), ("bad-reason", "reason", "a\x00\x1b[2J")):
        save_tiny_run(root / name)
        edit_card(root / name, lambda card: card.update({field: value, "status": "failed"}))
    save_tiny_run(root / "sw" / "t0")
    trial = {"name": "t1", "values": {"lambda_p": 0.3}, "status": "failed", "reason": "out of \udfff",
             "config": json.loads((root / "fine" / "run.json").read_text())["train"]}
    plan = {"task": "parity", "base": {"hidden": 16, "max_steps": 5}, "grid": {"lambda_p": [0.3]}, "seeds": [0]}
    (root / "sw" / SWEEP).write_text(json.dumps({"plan": plan, "trials": [trial]}))
    at = open_app(page="parity", model="runs/bad-name")
    picker = at.sidebar.selectbox(key="pick_model_parity")
    assert "runs/fine · λp 0.3" in picker.options and not any("bad" in o for o in picker.options)
    at = open_app("pages/compare.py", models=["runs/fine", "runs/bad-reason"])
    assert at.multiselect(key="compare_models").value == ["runs/fine"] and not at.exception
    at = open_app("pages/sweep.py")
    at.radio(key="sweep_source_False").set_value("Your sweeps (runs/)")
    run_ok(at)
    at.selectbox(key="sweep_folder").set_value("sw")
    errs = one_line_errors(run_ok(at))
    assert len(errs) == 1 and "trials[0].reason: holds U+DFFF" in errs[0] and SWEEP in errs[0], errs
