"""The Train page under AppTest: starting a run (the name it will be saved as, Start while a job runs), coming
back to a job after a reload, the prior preview, and the running job's line in every page's sidebar.

Runs go to a temporary PONDER_RUNS folder; the jobs are tiny parity runs (tests/job_helpers.TINY).
"""
import re
import time

import pytest

from helpers import open_app, run_cli, run_ok, save_tiny_run, shown, texts
from job_helpers import TINY
from ponder.config import TrainConfig

pytestmark = pytest.mark.xdist_group("pages")          # the app's job registry is one per process
LONG = dict(TINY, epochs=1000, log_every=1)             # 20,000 tiny steps: runs until cancelled


@pytest.fixture
def runs(tmp_path, monkeypatch):
    monkeypatch.setenv("PONDER_RUNS", str(tmp_path))
    registry()
    yield tmp_path
    registry()


def registry():
    """The app's job registry, with no job running."""
    from explorer.app.loaders import job_registry
    reg = job_registry()
    reg.shutdown(timeout=60)
    return reg


def started_job(name="come-back", session="before-the-reload"):
    job = registry().submit(session, [(name, TrainConfig(**LONG))], kind="train")
    while not job.snapshot().runs[0].progress:
        time.sleep(0.02)
    return job


def sidebar_text(at) -> list:
    return [shown(c.value) for c in at.sidebar.caption] + [shown(m.value) for m in at.sidebar.markdown]


def test_the_form_says_the_name_a_run_will_be_saved_as_before_it_starts(runs):
    save_tiny_run(runs / "mnist-lp0.5", "mnist")
    at = open_app(page="train")
    assert at.text_input(key="tf_mnist_name").value == "mnist-lp0.5"
    assert "Saved as **runs/mnist-lp0.5-2** — The name mnist-lp0.5 became mnist-lp0.5-2 (mnist-lp0.5 was taken)." \
        in texts(at)
    at.text_input(key="tf_mnist_name").input("fresh name")
    run_ok(at)
    assert "Saved as **runs/fresh-name** — The name fresh name became fresh-name (a name keeps only" in texts(at)
    at.slider(key="tf_mnist_lp").set_value(0.3)            # a name not typed follows λp; a typed one stays
    run_ok(at)
    assert at.text_input(key="tf_mnist_name").value == "fresh name"
    at.text_input(key="tf_mnist_name").input("mnist-lp0.5")
    run_ok(at)
    at.slider(key="tf_mnist_lp").set_value(0.3)
    run_ok(at)
    assert at.text_input(key="tf_mnist_name").value == "mnist-lp0.3" and "Saved as **runs/mnist-lp0.3**" in texts(at)


def test_start_is_disabled_while_your_job_runs_and_no_line_sends_you_to_the_page_you_are_on(runs):
    at = open_app(page="train")
    at.sidebar.radio(key="train_task").set_value("parity")
    run_ok(at)
    for key, value in (("epochs", 1000.0), ("hidden", 16), ("batch", 32), ("n", 6), ("seconds", 0)):
        at.number_input(key=f"tf_parity_{key}").set_value(value)
    at.button(key="tf_start").click()
    run_ok(at)
    assert at.get("progress") and at.button(key="tf_start").disabled
    assert "on the Train page" not in texts(at) + at.button(key="tf_start").help
    assert "Your training job is running, shown on this page" in at.button(key="tf_start").help
    at.button(key="train_cancel").click()
    run_ok(at)


def test_a_reload_shows_the_jobs_settings_in_the_form_and_counts_its_age(runs):
    job = started_job()
    r = open_app(page="train", job=job.id)                 # the reload: a new session, ?job=<id>
    assert r.sidebar.radio(key="train_task").value == "parity"
    assert r.text_input(key="tf_parity_name").value == "come-back"
    assert r.number_input(key="tf_parity_hidden").value == 16 and r.number_input(key="tf_parity_n").value == 6
    age = lambda a: re.search(r"Back to job \w+, started (under 1|\d+) s ago", texts(a)).group(1)    # noqa: E731
    first = age(r)
    time.sleep(2.1)
    run_ok(r)                                               # what the live fragment's next poll does
    assert int(age(r)) >= (0 if first == 'under 1' else int(first)) + 2
    job.cancel()


def test_the_train_page_previews_the_prior_and_says_why_beta_lets_halting_drift(runs):
    at = open_app(page="train")
    at.slider(key="tf_mnist_lp").set_value(0.5)
    at.number_input(key="tf_mnist_beta").set_value(0.01)
    run_ok(at)
    prior = [c for c in at.get("plotly_chart") if "Geometric" in c.proto.spec or "prior" in c.proto.spec]
    assert prior
    said = texts(at)
    # mnist-adaptive's card: its mean p_n has mean 9.6 steps, KL(p ‖ Geometric(0.5), N = 20) = 4.48 nats (computed
    # from the card by ponder.losses.kl_to_prior), β·KL = 0.045; after 2 steps (4 rows) it is right 13.9 % of the time
    assert "mean **9.6** steps" in said and "KL ≈ **4.5** nats" in said and "β·KL ≈ **0.045**" in said
    assert "right 14% of the time" in said and "1/λp = 2.00" in said
    at.number_input(key="tf_mnist_beta").set_value(1.0)
    run_ok(at)
    assert "β·KL ≈ **4.483**" in texts(at)


def test_every_page_says_in_its_sidebar_that_a_job_is_running(runs):
    job = started_job("sidebar-job", session="someone-else")
    for page in ("runs", "parity", "train"):          # the line is drawn by streamlit_app.py, for every page
        at = open_app(page=page)
        line = [c for c in sidebar_text(at) if "sidebar-job" in c]
        assert line and "Training" in line[0], (page, sidebar_text(at))
    job.cancel()
    assert job.join(60)
    at = open_app(page="digit")
    assert not [c for c in sidebar_text(at) if "sidebar-job" in c]


def test_an_import_takes_the_runs_own_name_and_the_uploader_is_empty_for_the_next_one(runs):
    from ponder.store.card import CARD, WEIGHTS
    from ponder.store.manage import export_run
    save_tiny_run(runs / "mine", "parity")
    at = open_app(page="runs")
    at.file_uploader(key="import_files").set_value([("mine.zip", export_run(runs / "mine"), "application/zip")])
    at.button(key="import_go").click()
    run_ok(at)
    assert "Imported as runs/mine-2." in texts(at)                  # the zip's own name, -2 as mine is taken
    again = at.file_uploader(key="import_files_1")                   # a fresh uploader: the zip is gone
    assert not again.value and at.text_input(key="import_name_1").value == ""
    files = [("model.safetensors", (runs / "mine" / WEIGHTS).read_bytes(), "application/octet-stream"),
             ("run.json", (runs / "mine" / CARD).read_bytes(), "application/json")]
    again.set_value(files)
    at.button(key="import_go").click()
    run_ok(at)
    assert "Imported as runs/mine-3." in texts(at)                  # the name in its run.json


def test_compare_opens_on_two_models_that_halt_differently_with_their_test_numbers_in_view(runs):
    from helpers import charts
    at = open_app(page="compare")
    assert at.multiselect(key="compare_models").value == ["mnist-adaptive", "mnist-default"]
    halting = next(f for f in charts(at) if "Halting distributions" in str(f["layout"].get("title", "")))
    learned = {t["name"]: t["y"] for t in halting["data"] if t.get("mode") == "lines+markers"}
    a, b = learned["mnist-adaptive"], learned["mnist-default"]
    assert max(abs(x - y) for x, y in zip(a, b)) > 0.1                  # the two curves do not lie on top of each other
    assert list(at.dataframe[0].value.columns)[:4] == ["model", "accuracy", "mean steps", "E[n]"]


def _seven():
    """A drawn 7 as the canvas sends it (a data URL of a 280×280 picture)."""
    import base64
    import io

    from PIL import Image, ImageDraw
    img = Image.new("RGBA", (280, 280), (0, 0, 0, 255))
    ImageDraw.Draw(img).line([(90, 60), (190, 60), (140, 230)], fill=(255, 255, 255, 255), width=18)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    url = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    return {"drawing": {"raw": {"objects": [{"type": "path"}], "background": "#000000"}, "data": url},
            "backgroundFit": None}


def test_the_answer_is_under_the_drawing_and_clear_works_by_touch(runs):
    # on a phone the columns stack: the answer must be in the input's column, not a screen and a half further down
    at = open_app(model="mnist-default")
    at.session_state["canvas"] = _seven()
    run_ok(at)
    left = at.columns[0]
    assert any(m.value.startswith(":material/arrow_forward: Answer **7**") for m in left.markdown), \
        [m.value for m in left.markdown]
    assert "Hover" not in texts(at) and "hover" not in texts(at)         # nothing that needs a mouse
    at.button(key="canvas_clear").click()                                 # a button: a tap does it
    run_ok(at)
    assert any("Draw a digit" in i.value for i in at.info) and not at.metric


def test_the_train_page_shows_the_watched_input_learning_to_halt(runs):
    import torch

    from helpers import charts, poll
    x = torch.tensor([[1.0, -1.0, 0.0, 1.0, 0.0, 0.0, 1.0, -1.0]])
    job = registry().submit("watcher", [("watched", TrainConfig(**LONG))], kind="train", watch=(x, "a parity vector"))
    at = open_app(page="train", job=job.id)
    poll(at, lambda a: "Watch it learn to halt" in texts(a) and len(charts(a)) == 5, timeout=60)
    said = texts(at)
    assert re.search(r"at training step [\d,]+ the model answers \*\*[01]\*\*", said) and "a parity vector" in said
    titles = [str(f["layout"].get("title", "")) for f in charts(at)]
    assert any("p_n now" in t for t in titles) and any("E[n] and the answer as it trains" in t for t in titles)
    job.cancel()
    assert job.join(60)


@pytest.fixture
def wiggle_task():
    """A third task, defined here and registered by one line: parity's behaviour under another name, with one
    option of its own (no TrainConfig field), unregistered afterwards."""
    from dataclasses import dataclass
    from ponder.tasks import TASKS, register
    from ponder.tasks.options import option
    from ponder.tasks.parity.task import ParityTask

    @dataclass
    class WiggleOptions:
        wiggles: int = option(3, "how many times the toy wiggles before it reads", label="Wiggles", lo=1, hi=9)

    class WiggleTask(ParityTask):
        name, label, options_cls = "wiggle", "wiggle", WiggleOptions

    yield register(WiggleTask())
    TASKS.pop("wiggle")


@pytest.mark.slow
def test_a_third_task_with_an_option_of_its_own_shows_it_in_the_train_form_and_in_train_help(runs, wiggle_task,
                                                                                               capsys):
    rc, out, _ = run_cli(["train", "--help"], capsys)
    out = " ".join(out.split())                                   # argparse wraps the help at any space
    assert rc == 0 and "wiggle options (--task wiggle): --wiggles WIGGLES how many times the toy wiggles before " \
        "it reads (default 3)" in out
    at = open_app(page="train")
    assert "Wiggle" in at.sidebar.radio(key="train_task").options            # its label, as the task radio shows it
    at.sidebar.radio(key="train_task").set_value("wiggle")
    run_ok(at)
    box = at.sidebar.number_input(key="tf_wiggle_wiggles")
    assert (box.label, box.value, box.min, box.max, box.help) == \
        ("Wiggles", 3, 1, 9, "How many times the toy wiggles before it reads.")
    assert not any(w.key.startswith("tf_wiggle_") and w.key.endswith(("reader", "parity_preset"))
                   for w in at.sidebar.selectbox)                   # only its own options
    box.set_value(5)                                                # the value reaches the run's card
    for key, value in (("epochs", 0.04), ("hidden", 16), ("batch", 32), ("n", 6)):
        at.number_input(key=f"tf_wiggle_{key}").set_value(value)
    at.text_input(key="tf_wiggle_name").input("wiggly")
    at.button(key="tf_start").click()
    run_ok(at)
    from explorer.app.loaders import job_registry
    [job] = job_registry().recent("train", 1)
    assert job.join(120)
    assert job.snapshot().runs[0].status == "completed", job.snapshot().runs[0]
    from ponder.store.card import read_card
    card = read_card(runs / "wiggly")
    assert card["train"]["task"] == "wiggle" and card["train"]["options"] == {"wiggles": 5}


def test_the_train_page_says_what_a_step_is_for_the_settings_and_for_the_running_job(runs):
    at = open_app(page="train")
    assert ("**A step** of the run these settings train: each step reveals 2 more rows of the image, top to bottom "
            "(all 28 by step 14), so the steps a digit needs depend on how far down its ink goes") in texts(at)
    at.selectbox(key="tf_mnist_reader").set_value("cnn")
    assert "**A step** of the run these settings train: every step sees the whole image" in texts(run_ok(at))
    job = started_job("stepper")
    at = open_app(page="train", job=job.id)
    assert "**A step** of stepper: every step reads the whole vector again and updates the cell's state" in texts(at)
    job.cancel()
    assert job.join(60)
