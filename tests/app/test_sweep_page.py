"""The λp sweep page under AppTest: the prior follows λp, a 2-value sweep runs, a parity sweep with the reverse
KL, a diverging trial shows as failed, the machine's running sweep, a sweep folder shown and added to Compare."""
import json
import re

import numpy as np
import pytest

from helpers import charts, one_line_errors, open_app, poll, run_ok, texts
from ponder.store.card import WEIGHTS, read_card
from ponder.config import TrainConfig
from job_helpers import TINY
from page_helpers import DIVERGING, LONG, _progress, idle_registry

# under pytest-xdist one worker runs the page tests: their runs folders, the job registry and the pages' first
# imports are set up once
pytestmark = pytest.mark.xdist_group("pages")


@pytest.mark.long
def test_sweep_page_prior_follows_lambda_p_and_a_two_value_sweep_runs(runs):
    at = open_app("pages/sweep.py")
    at.slider(key="lp").set_value(0.5)
    run_ok(at)
    prior = charts(at)[0]["data"][0]
    assert np.allclose(prior["y"], 0.5 * 0.5 ** np.arange(20)) and at.query_params["lp"] == "0.5"
    assert "1/λp = 2.00" in texts(at)
    at.multiselect(key="sw_values").set_value([0.3, 0.6])
    at.number_input(key="sw_epochs").set_value(0.003)
    at.number_input(key="sw_n").set_value(5)
    at.button(key="sw_start").click()
    run_ok(at)

    def finished(a):
        df = a.dataframe[0].value if a.dataframe else None
        return df is not None and len(df) == 2 and all(s in ("completed", "failed") for s in df["status"])

    poll(at, finished)
    df = at.dataframe[0].value
    assert list(df["λp"]) == [0.3, 0.6] and list(df["status"]) == ["completed", "completed"]
    figs = {f["layout"]["title"]["text"] if f["layout"].get("title") else "grid": f for f in charts(at)}
    assert "Mean halting step vs λp" in figs and "Accuracy vs λp" not in figs     # one tab's chart drawn at a time
    at.session_state["sweep_live_tab"] = "Accuracy vs λp"
    figs = {f["layout"]["title"]["text"] if f["layout"].get("title") else "grid": f for f in charts(run_ok(at))}
    assert "Mean halting step vs λp" not in figs
    acc = figs["Accuracy vs λp"]["data"][0]
    assert list(acc["x"]) == [0.3, 0.6]
    assert list(df["run"]) == ["runs/sweep-mnist/lambda_p0.3-seed0", "runs/sweep-mnist/lambda_p0.6-seed0"]
    assert [t["status"] for t in json.loads((runs / "sweep-mnist" / "sweep.json").read_text())["trials"]] == \
        ["completed", "completed"]                                     # ponder.sweeps.run's folder, as the CLI writes it
    # the form's reader is the shipped sweep's (the whole image), so the two sweeps teach the same lesson, and the
    # page says which reader each used
    assert read_card(runs / "sweep-mnist" / "lambda_p0.3-seed0")["train"]["reader"] == "cnn"
    assert list(df["reader"]) == ["cnn", "cnn"] and "**cnn**: every step sees the whole image" in texts(at)
    at.radio(key="sweep_source_True").set_value("Shipped sweep (assets/sweep-lp*)")
    run_ok(at)
    assert len(at.dataframe[0].value) == 6                              # the shipped sweep loads as well
    assert set(at.dataframe[0].value["reader"]) == {"cnn"} and "The reader decides the curve" in texts(at)
    at.radio(key="sweep_source_True").set_value("Your sweeps (runs/)")   # the saved sweep is found
    run_ok(at)
    at.selectbox(key="sweep_folder").set_value("sweep-mnist")
    run_ok(at)
    assert list(at.dataframe[0].value["run"]) == list(df["run"]) and "No sweep" not in texts(at)
    # the form again with other epochs: a new folder; the first sweep's trials are not replaced
    first = (runs / "sweep-mnist" / "lambda_p0.3-seed0" / WEIGHTS).read_bytes()
    at.number_input(key="sw_epochs").set_value(0.004)
    at.button(key="sw_start").click()
    run_ok(at)
    poll(at, lambda a: all(t["status"] in ("completed", "failed") for t in json.loads(
        (runs / "sweep-mnist-2" / "sweep.json").read_text())["trials"]) if (runs / "sweep-mnist-2" / "sweep.json").exists() else False)
    assert (runs / "sweep-mnist" / "lambda_p0.3-seed0" / WEIGHTS).read_bytes() == first
    assert read_card(runs / "sweep-mnist-2" / "lambda_p0.3-seed0")["train"]["epochs"] == 0.004


@pytest.mark.long
def test_sweep_page_trains_a_parity_sweep_with_the_reverse_kl(runs):
    idle_registry()
    at = open_app("pages/sweep.py")
    at.multiselect(key="sw_values").set_value([0.2, 0.5])
    at.radio(key="sw_task").set_value("parity")
    at.selectbox(key="sw_reg").set_value("kl-reverse")
    at.number_input(key="sw_epochs").set_value(0.02)                   # 10 batches of the small preset
    at.number_input(key="sw_n").set_value(5)
    at.button(key="sw_start").click()
    run_ok(at)
    poll(at, lambda a: bool(a.dataframe) and len(a.dataframe[0].value) == 2
         and all(s in ("completed", "failed") for s in a.dataframe[0].value["status"]))
    assert list(at.dataframe[0].value["status"]) == ["completed", "completed"]
    for v in ("0.2", "0.5"):
        card = read_card(runs / "sweep-parity" / f"lambda_p{v}-seed0")
        assert card["train"]["task"] == "parity" and card["train"]["regulariser"] == "kl-reverse"
        assert card["train"]["parity_preset"] == "small" and card["train"]["lambda_p"] == float(v)


def test_a_diverging_run_shows_as_failed_in_the_sweep_results(runs):
    reg = idle_registry()
    at = open_app("pages/sweep.py")
    session = at.session_state["_session_id"]
    specs = [("sweep-lp0.3", TrainConfig(**{**TINY, "lambda_p": 0.3})),
             ("sweep-lp0.9", TrainConfig(**{**DIVERGING, "lambda_p": 0.9}))]
    job = reg.submit(session, specs, kind="sweep")
    assert job.join(60)
    run_ok(at)
    df = at.dataframe[0].value
    ok = list(df["status"]) == ["completed", "failed"] and "became inf" in df["reason"].iloc[1]
    ok = ok and any("λp 0.9" in e and "failed" in e and "became inf" in e for e in one_line_errors(at))
    grid = charts(at)[1]
    ok = ok and any("became inf" in (a.get("text") or "") for a in grid["layout"].get("annotations", []))
    assert ok and not at.exception, ("divergence", "sweep results")


def test_the_sweep_page_shows_the_machines_running_sweep_and_anyone_can_cancel_it(runs, slow_steps):
    reg = idle_registry()
    specs = [("sweep-lp0.3", TrainConfig(**{**LONG, "lambda_p": 0.3})), ("sweep-lp0.6", TrainConfig(**{**TINY, "lambda_p": 0.6}))]
    job = reg.submit("another-tab", specs, kind="sweep")
    _progress(job)
    at = open_app(page="sweep")
    assert at.radio(key="sweep_source_True").value == "The sweep job" and at.query_params["job"] == job.id
    (note,) = [c.value for c in at.caption if "started elsewhere" in c.value]
    assert re.search(r"started elsewhere .*reload\) (under 1 s|\d+ s|\d+ min \d+ s) ago:", note) and "{" not in note, note   # counted
    at.button(key="sweep_job_cancel").click()
    run_ok(at)
    assert job.join(60)
    at = open_app(page="sweep", job=job.id)                             # a reload after it finished
    df = at.dataframe[0].value
    assert list(df["status"]) == ["cancelled", "cancelled"], df
    assert df["reason"].iloc[0].startswith("cancelled from another session at step")
    assert df["reason"].iloc[1] == "cancelled from another session before it started"


def test_sweep_page_shows_a_sweep_folder_and_compare_adds_it_as_one_group(runs):
    from ponder.sweeps.run import run_sweep
    from ponder.sweeps.plan import Plan, parse_grid
    tiny = dict(hidden=16, batch_size=32, max_steps=5, epochs=1.0, steps_per_epoch=10, device="cpu")
    run_sweep(Plan("parity", tiny, parse_grid(["lambda_p=0.2,0.5"]), [0]), runs / "cli-sweep", eval_limit=200)
    at = open_app("pages/sweep.py")
    at.radio(key="sweep_source_False").set_value("Your sweeps (runs/)")
    run_ok(at)
    at.selectbox(key="sweep_folder").set_value("cli-sweep")
    run_ok(at)
    df = at.dataframe[0].value
    assert list(df["run"]) == ["runs/cli-sweep/lambda_p0.2-seed0", "runs/cli-sweep/lambda_p0.5-seed0"]
    assert list(df["λp"]) == [0.2, 0.5] and list(df["status"]) == ["completed", "completed"]
    at.session_state["sweep_dir_tab"] = "Accuracy vs λp"
    assert list(charts(run_ok(at))[-1]["data"][0]["x"]) == [0.2, 0.5]      # accuracy against λp
    at.switch_page("pages/compare.py")
    run_ok(at)
    at.selectbox(key="compare_models_sweep").set_value("cli-sweep")
    run_ok(at)
    picked = at.multiselect(key="compare_models").value
    assert sorted(n for n in picked if n.startswith("runs/cli-sweep/")) == list(df["run"])   # the whole sweep
    assert at.selectbox(key="compare_models_sweep").value == "" and not at.exception
    assert list(at.dataframe[0].value["sweep"])[-2:] == ["cli-sweep", "cli-sweep"]


def test_without_mnist_an_mnist_sweep_is_refused_before_it_trains_with_the_download_offer(runs, tmp_path,
                                                                                        monkeypatch):
    # an MNIST sweep started without MNIST and failed each of its runs with "MNIST was not found ... or download it
    # here", where there was no download button: it is refused at the start, saying so, with the button
    reg = idle_registry()
    monkeypatch.setenv("PONDER_DATA", str(tmp_path / "no-mnist"))
    at = open_app("pages/sweep.py")
    assert not [b for b in at.button if b.key == "sweep_download"]          # nothing said before it is asked for
    at.multiselect(key="sw_values").set_value([0.5])
    at.button(key="sw_start").click()
    run_ok(at)
    assert "An MNIST sweep needs the MNIST training set; a parity sweep trains without it." in [e.value for e in at.error]
    assert "MNIST was not found" in at.info[0].value and at.button(key="sweep_download")
    assert "Sweep started" not in texts(at) and reg.busy_message("nobody") == ""            # nothing was queued
