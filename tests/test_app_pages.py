"""Every page of the explorer under streamlit.testing's AppTest, with tiny models made here.

Each test runs streamlit_app.py (navigation included), goes to its page and drives the page's main
interaction: pick and rotate a digit, inject a drawing through session state, change λp, train a
tiny job and poll it until it finishes, run a 2-value sweep, compare two runs, explore parity.
Runs go to a temporary PONDER_RUNS folder, never into the repository.
"""
import base64
import io
import json
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw
from streamlit.testing.v1 import AppTest

from conftest import tiny_model
from ponder.card import read_card
from ponder.checkpoint import save_run
from ponder.config import TrainConfig
from ponder.evaluate import evaluate_mnist, evaluate_parity

APP = str(Path(__file__).resolve().parent.parent / "streamlit_app.py")
TIMEOUT = 60


def _history(n=6):
    return [dict(step=10 * i, total_steps=10 * n, epoch=i / n, loss=1.0 / i, rec=0.9 / i, reg=0.05, accuracy=0.5 + i / 20,
                 mean_steps=3.0, elapsed=float(i), lr=1e-3, halting=[0.4, 0.3, 0.2, 0.05, 0.05],
                 val_accuracy=0.8 if i == n else None) for i in range(1, n + 1)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, mnist):
    """A runs folder with two tiny MNIST runs and a tiny parity run (with cards, metrics and history)."""
    root = tmp_path_factory.mktemp("runs")
    mp = pytest.MonkeyPatch()
    mp.setenv("PONDER_RUNS", str(root))
    for name, seed in (("tiny-mnist", 0), ("tiny-mnist-b", 1)):
        m = tiny_model("mnist", max_steps=5, seed=seed)
        metrics = evaluate_mnist(m, mnist, limit=200)
        metrics.pop("by_class")
        save_run(root / name, m, TrainConfig(task="mnist", max_steps=5, lambda_p=0.3, hidden=16), steps=60,
                 history=_history(), metrics={"test": metrics})
    p = tiny_model("parity", max_steps=5, n_elems=8)
    metrics = evaluate_parity(p, dict(n_elems=8, train_k=(1, 8), test_k=(1, 8)), size=200)
    save_run(root / "tiny-parity", p, TrainConfig(task="parity", max_steps=5, lambda_p=0.3, hidden=16), steps=60,
             history=_history(), metrics={"test": metrics})
    yield root
    from explorer.loaders import job_registry
    job_registry().shutdown()
    mp.undo()


def open_app(path=None, **query) -> AppTest:
    """Run the app (with these query parameters), then switch to the page file at `path`."""
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    if path:
        at.switch_page(path).run()
        assert not at.exception, [e.value for e in at.exception]
    return at


def _decode(obj):
    """Plotly's JSON holds numeric arrays as {'bdata': base64, 'dtype': ..., 'shape': ...}."""
    if isinstance(obj, dict) and "bdata" in obj and "dtype" in obj:
        a = np.frombuffer(base64.b64decode(obj["bdata"]), dtype=obj["dtype"])
        return a.reshape([int(n) for n in str(obj["shape"]).split(",")]) if obj.get("shape") else a
    if isinstance(obj, dict):
        return {k: _decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    return obj


def charts(at) -> list:
    """The Plotly figures on the page, as dicts with numpy arrays."""
    return [_decode(json.loads(c.proto.spec)) for c in at.get("plotly_chart")]


def texts(at) -> str:
    parts = [m.value for m in at.markdown] + [m.value for m in at.caption]
    parts += [x.value for kind in ("info", "success", "warning", "error") for x in getattr(at, kind)]
    return "\n".join(str(p) for p in parts)


def run_ok(at) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def poll(at, done, timeout=180.0) -> AppTest:
    """Rerun the page (what st.fragment(run_every=...) does in the browser) until done(at)."""
    end = time.time() + timeout
    while time.time() < end:
        run_ok(at)
        if done(at):
            return at
        time.sleep(0.5)
    raise AssertionError("timed out; the page says:\n" + texts(at))


# ----------------------------------------------------------------------------- 1. Ponder a digit

def test_digit_page_blank_canvas_hint_then_pick_and_rotate_a_test_digit(runs):
    at = open_app(model="runs/tiny-mnist")
    assert at.title[0].value == "Ponder a digit"
    assert at.sidebar.selectbox(key="pick_model_mnist").value == "runs/tiny-mnist"
    assert any("Draw a digit" in i.value for i in at.info) and not at.error          # a hint, not an error
    at.segmented_control(key="digit_source").set_value("MNIST test digit")
    run_ok(at)
    at.selectbox(key="digit_class").set_value(3)
    run_ok(at)
    assert "label 3" in texts(at)
    at.button(key="digit_random").click()
    run_ok(at)
    assert "label 3" in texts(at)
    at.slider(key="angle").set_value(45)
    run_ok(at)
    assert "rotated 45°" in at.image[0].captions[0]
    metrics = {m.label: m.value for m in at.metric}
    assert set(metrics) >= {"Prediction", "Halted at step", "E[n]"} and metrics["Prediction"] in list("0123456789")
    figs = charts(at)
    assert len(figs) == 4
    heat = next(f for f in figs if f["data"][0]["type"] == "heatmap")
    assert np.allclose(np.sum(heat["data"][0]["z"], axis=1), 1, atol=1e-5)
    # the seed is visible and 'Sample again' draws a new one; other modes run too
    seed = at.number_input(key="seed").value
    at.button(key="seed_again").click()
    run_ok(at)
    assert f"seed **{at.number_input(key='seed').value}**" in texts(at)
    assert at.number_input(key="seed").value != seed or seed == 0
    for mode in ("deterministic", "expected"):
        at.segmented_control(key="mode").set_value(mode)
        run_ok(at)
        assert mode.capitalize() in texts(at)
    assert at.query_params["model"] == "runs/tiny-mnist" and at.query_params["page"] == "digit"


def _drawing_state(stroke=((90, 60), (190, 60), (140, 230))):
    img = Image.new("RGBA", (280, 280), (0, 0, 0, 255))
    ImageDraw.Draw(img).line(list(stroke), fill=(255, 255, 255, 255), width=18)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    return {"drawing": {"raw": {"objects": [{"type": "path"}], "background": "#000000"}, "data": url},
            "backgroundFit": None}


def test_digit_page_reads_a_drawing_injected_through_session_state(runs):
    at = open_app()                                   # the shipped default model
    assert at.sidebar.selectbox(key="pick_model_mnist").value == "mnist-default"
    at.session_state["canvas"] = _drawing_state()
    run_ok(at)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Prediction"] == "7", texts(at)   # the shipped model reads the drawn 7
    assert len(charts(at)) == 4 and not at.info


# ----------------------------------------------------------------------------- 2. Train

def test_train_page_runs_a_tiny_job_until_it_finishes(runs):
    at = open_app("pages/train.py")
    assert at.title[0].value == "Train a PonderNet" and "Start training" in texts(at)
    at.sidebar.radio(key="train_task").set_value("parity")
    run_ok(at)
    for key, value in (("epochs", 0.04), ("hidden", 16), ("batch", 32), ("n", 6), ("seconds", 60)):
        at.number_input(key=f"tf_parity_{key}").set_value(value)
    at.text_input(key="tf_parity_name").input("apptest parity")
    at.button(key="tf_start").click()
    run_ok(at)
    at.switch_page("pages/digit.py")                    # the job survives switching pages and reruns
    run_ok(at)
    at.switch_page("pages/train.py")
    poll(at, lambda a: any("Completed" in s.value for s in a.success))
    assert "apptest-parity" in texts(at)
    card = read_card(runs / "apptest-parity")
    assert card["status"] == "completed" and card["steps"] == 20 and card["train"]["hidden"] == 16
    assert len(charts(at)) == 2                             # training curves and the halting distribution
    at.switch_page("pages/parity.py")
    run_ok(at)
    options = at.sidebar.selectbox(key="pick_model_parity").options
    assert options[0].startswith("runs/apptest-parity · λp 0.2")            # the new run, newest first


def _start_parity_job(at, name, epochs):
    at.sidebar.radio(key="train_task").set_value("parity")
    run_ok(at)
    for key, value in (("epochs", epochs), ("hidden", 16), ("batch", 32), ("n", 6), ("seconds", 0)):
        at.number_input(key=f"tf_parity_{key}").set_value(value)
    at.text_input(key="tf_parity_name").input(name)
    at.button(key="tf_start").click()
    return run_ok(at)


def test_train_page_cancel_keeps_a_partial_run_and_a_busy_machine_says_so(runs):
    at = _start_parity_job(open_app("pages/train.py"), "apptest-long", 200.0)
    poll(at, lambda a: bool(a.get("progress")) and len(charts(a)) == 2)       # live progress bar and curves
    other = _start_parity_job(open_app("pages/train.py"), "other-session", 0.04)
    assert [e.value for e in other.error if "machine is busy" in e.value] and not other.warning   # said once
    at.button(key="train_cancel").click()
    run_ok(at)
    poll(at, lambda a: any("Partial run**: cancelled" in w.value for w in a.warning), timeout=60)
    card = read_card(runs / "apptest-long")
    assert card["status"] == "cancelled" and 0 < card["steps"] < 200 * 500
    assert not (runs / "other-session").exists()


# ----------------------------------------------------------------------------- 3. λp sweep

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
    acc = figs["Accuracy vs λp"]["data"][0]
    assert list(acc["x"]) == [0.3, 0.6]
    assert (runs / "sweep-lp0.3").is_dir() and (runs / "sweep-lp0.6").is_dir()
    at.radio(key="sweep_source_True").set_value("Shipped sweep (assets/sweep-lp*)")
    run_ok(at)
    assert len(at.dataframe[0].value) == 6                              # the shipped sweep loads as well


# ----------------------------------------------------------------------------- 4. Rotation study

def test_rotation_page_states_the_answer_from_the_numbers(runs):
    at = open_app("pages/rotation.py", model="runs/tiny-mnist")
    at.session_state["_model_mnist"] = "runs/tiny-mnist"
    at.text_input(key="rot_angles").input("0, 90")
    at.text_input(key="rot_ranges").input("45")
    at.number_input(key="rot_limit").set_value(100)
    at.button(key="rot_go").click()
    run_ok(at)
    assert at.sidebar.selectbox(key="pick_model_mnist").value == "runs/tiny-mnist"
    verdict = texts(at)
    assert "Does it ponder longer" in at.subheader[0].value
    assert "test sets" in verdict and "Accuracy goes from" in verdict
    figs = charts(at)
    assert len(figs) == 4 and any(t["type"] == "box" for f in figs for t in f["data"])
    assert [r for r in at.dataframe[0].value["rotation"]] == ["0°", "90°", "±45°"]
    at.text_input(key="rot_angles").input("0, 400")
    at.button(key="rot_go").click()
    run_ok(at)
    assert "outside" in at.error[0].value


def test_without_mnist_the_pages_offer_a_download(runs, mnist, tmp_path, monkeypatch):
    # an empty data folder: the rotation page says where to put MNIST and offers the download button;
    # a failed download is one red line, a successful one (faked: the local copy) opens the study
    import explorer.data
    from ponder.data import DataError
    monkeypatch.setenv("PONDER_DATA", str(tmp_path / "no-mnist"))
    at = open_app("pages/rotation.py")
    assert "MNIST was not found" in at.info[0].value and at.button(key="rotation_download")
    tried = []

    def offline(folder, download=True):
        tried.append((folder, download))
        raise DataError(f"MNIST not found in {folder} (download failed: URLError: no internet)")

    monkeypatch.setattr(explorer.data, "load_mnist", offline)
    at.button(key="rotation_download").click()
    run_ok(at)
    assert (str(tmp_path / "no-mnist"), True) in tried                 # the button asked torchvision to download
    assert len(at.error) == 1 and "download failed" in at.error[0].value and "\n" not in at.error[0].value
    monkeypatch.setattr(explorer.data, "load_mnist", lambda folder, download=True: mnist)
    at.button(key="rotation_download").click()
    run_ok(at)
    assert not at.error and at.text_input(key="rot_angles")          # the study's form is there now
    at.switch_page("pages/train.py").run()
    run_ok(at)
    assert not [b for b in at.button if b.key == "train_download"]  # MNIST is loaded: no download offer


# ----------------------------------------------------------------------------- 5. Compare runs

def test_compare_page_overlays_two_runs(runs):
    at = open_app("pages/compare.py")
    at.multiselect(key="compare_models").set_value(["runs/tiny-mnist", "runs/tiny-mnist-b"])
    run_ok(at)
    figs = charts(at)
    assert len(figs) == 5
    halting = figs[0]
    names = [t["name"] for t in halting["data"]]
    assert "runs/tiny-mnist" in names and "runs/tiny-mnist-b" in names and any(n.startswith("prior") for n in names)
    loss = next(f for f in figs if f["layout"]["title"]["text"] == "Training loss")
    assert len(loss["data"]) == 2
    assert list(at.dataframe[0].value["model"]) == ["runs/tiny-mnist", "runs/tiny-mnist-b"]
    assert at.query_params["models"] == ["runs/tiny-mnist", "runs/tiny-mnist-b"]


# ----------------------------------------------------------------------------- 6. Parity

def test_parity_page_generated_and_typed_vectors(runs):
    at = open_app(page="parity", model="runs/tiny-parity")         # a shared link: page and model in the URL
    assert at.title[0].value == "Parity"
    assert at.sidebar.selectbox(key="pick_model_parity").value == "runs/tiny-parity"
    at.slider(key="par_k").set_value(3)
    run_ok(at)
    assert "3 non-zeros" in charts(at)[0]["layout"]["title"]["text"]
    at.segmented_control(key="par_how").set_value("Type")
    run_ok(at)
    at.text_input(key="par_text").input("1 1 1 0 0 0 0 -1")
    run_ok(at)
    assert "3 of them +1" in charts(at)[0]["layout"]["title"]["text"]
    assert {m.label for m in at.metric} >= {"Prediction", "E[n]"}
    df = at.dataframe[0].value
    assert len(df) == 2 and all(0 <= a <= 1 for a in df["accuracy"])
    at.text_input(key="par_text").input("1 0 1")
    run_ok(at)
    assert "takes 8 values" in at.error[0].value
    assert len(at.dataframe[0].value) == 2 and len(charts(at)) == 2      # easy vs hard still shows
