"""The Rotation study page under AppTest: the rotation-trained model suggested, the answer stated from the numbers,
a first pass refined, and the download offered without MNIST."""
import json
import time

import pytest

from helpers import charts, one_line_errors, open_app, run_ok, shown, texts
from page_helpers import _rotation_study, _worth

# under pytest-xdist one worker runs the page tests: their runs folders, the job registry and the pages' first
# imports are set up once
pytestmark = pytest.mark.xdist_group("pages")


@pytest.mark.long
def test_rotation_page_suggests_the_rotation_trained_model_and_switches_to_it(runs):
    at = open_app(model="mnist-default")                            # trained without rotations (its card: 0.0)
    for key, value in (("rot_limit", 100), ("rot_angles", "0, 90"), ("rot_ranges", "45")):   # a small study
        at.session_state[key] = value
    at.switch_page("pages/rotation.py").run()
    assert any("mnist-default saw no rotated digits" in i.value and "±22.5°" in i.value for i in at.info)
    at.button(key="rot_pick_rotated").click()
    run_ok(at)
    assert at.sidebar.selectbox(key="pick_model_mnist").value == "mnist-rot22"
    assert not [b for b in at.button if b.key == "rot_pick_rotated"]  # no suggestion for a rotation-trained model
    at.switch_page("pages/digit.py").run()
    assert at.sidebar.selectbox(key="pick_model_mnist").value == "mnist-rot22"   # one choice for every page


@pytest.mark.long
def test_rotation_page_states_the_answer_from_the_numbers(runs):
    at = open_app("pages/rotation.py", model="runs/tiny-mnist")
    at.session_state["_model_mnist"] = "runs/tiny-mnist"
    _rotation_study(at, "0, 90", "45", 100)
    assert at.sidebar.selectbox(key="pick_model_mnist").value == "runs/tiny-mnist"
    verdict = texts(at)
    assert "Does it ponder longer" in at.subheader[0].value
    assert "test sets" in verdict and "Accuracy goes from" in verdict
    figs = charts(at)
    assert len(figs) == 3 and any(t["type"] == "box" for f in figs for t in f["data"])   # per-sample, "worth it?": asked
    df = at.dataframe[0].value
    assert list(df["rotation"]) == ["0°", "90°", "±45°"] and "E[n]" in df.columns
    assert df["accuracy"].between(0, 100).all()                         # shown as a percentage
    at.text_input(key="rot_angles").input("0, 400")
    at.button(key="rot_go").click()
    run_ok(at)
    assert "outside" in at.error[0].value
    at.text_input(key="rot_angles").set_value(", ".join(str(a % 720 - 360) for a in range(80_000)))   # took 25 s
    at.button(key="rot_go").click()
    t = time.perf_counter()
    run_ok(at)
    (err,) = one_line_errors(at)
    assert "at most 24 values" in err and time.perf_counter() - t < 10, err      # the first 400 characters read


def test_rotation_page_draws_the_per_sample_view_when_it_is_opened(runs):
    at = _rotation_study(open_app("pages/rotation.py", model="runs/tiny-mnist"), "0, 90", "45", 100)
    titles = [f["layout"]["title"]["text"] for f in charts(at)]
    assert len(titles) == 3 and not any(t.startswith("Halting step vs confidence") for t in titles)
    at.session_state["rot_samples_open"] = True                   # a dot per test image: drawn when asked for
    scatter = [f for f in charts(run_ok(at)) if f["layout"]["title"]["text"].startswith("Halting step vs confidence")]
    assert len(scatter) == 1 and at.selectbox(key="rot_pick").value == "±45°"
    assert sum(len(t["x"]) for t in scatter[0]["data"]) == 100    # one dot per image of the study


def test_rotation_page_refines_a_first_pass_and_a_fresh_server_opens_it_from_disk(runs, monkeypatch):
    from explorer.app import loaders
    at = open_app("pages/rotation.py", model="runs/tiny-mnist")
    at.session_state["rot_worth_open"] = True
    _rotation_study(at, "0, 30", "60", 600)              # more than a first pass: 200 first, then the page again
    assert "on 600 test images rotated" in texts(at) and "A first look" not in texts(at)
    assert len(_worth(at)) == 1                         # the "worth it?" section once all images are in
    kept = list((runs / ".cache" / "studies").glob("rotation-*.json"))
    limits = [json.loads(f.read_text())["key"]["settings"] for f in kept]
    assert {"angles": [0, 30], "ranges": [60], "limit": 600, "mode": "sample", "seed": 0} in limits
    loaders.rotation_results.clear()                     # a fresh server: nothing in memory, the disk remembers
    monkeypatch.setattr(loaders, "rotation_study", lambda *a, **k: pytest.fail("measured again"))
    again = _rotation_study(open_app("pages/rotation.py", model="runs/tiny-mnist"), "0, 30", "60", 600)
    assert "on 600 test images rotated" in texts(again)
    assert at.dataframe[0].value.equals(again.dataframe[0].value)


@pytest.mark.long
def test_without_mnist_the_pages_offer_a_download(runs, mnist, tmp_path, monkeypatch):
    # an empty data folder: the rotation page says where to put MNIST and offers the download button;
    # a failed download is one red line, a successful one (faked: the local copy) opens the study
    import explorer.drawing.digits
    from ponder.data import DataError
    monkeypatch.setenv("PONDER_DATA", str(tmp_path / "no-mnist"))
    at = open_app("pages/rotation.py")
    assert "MNIST was not found" in at.info[0].value and at.button(key="rotation_download")
    tried = []

    def offline(folder, download=True):
        tried.append((folder, download))
        raise DataError(f"MNIST not found in {folder}; pass --data-dir {folder} (download failed: URLError: no "
                        f"internet)", download_failed="URLError: no internet")

    monkeypatch.setattr(explorer.drawing.digits, "load_mnist", offline)
    at.button(key="rotation_download").click()
    run_ok(at)
    assert (str(tmp_path / "no-mnist"), True) in tried                 # the button asked torchvision to download
    err = shown(at.error[0].value)                                   # as the reader sees it
    assert len(at.error) == 1 and "did not work (URLError: no internet)" in err and "\n" not in err
    assert "--data-dir" not in err and "PONDER_DATA" in err                 # the explorer's words, not the CLI's
    monkeypatch.setattr(explorer.drawing.digits, "load_mnist", lambda folder, download=True: mnist)
    at.session_state["rot_limit"] = 100                              # a small study (2,000 images took ~10 s)
    at.button(key="rotation_download").click()
    run_ok(at)
    assert not at.error and at.text_input(key="rot_angles")          # the study's form is there now
    assert at.number_input(key="rot_limit").value == 100 and not at.warning
    at.switch_page("pages/train.py").run()
    run_ok(at)
    assert not [b for b in at.button if b.key == "train_download"]  # MNIST is loaded: no download offer


def test_rotation_page_deterministic_mode_halts_where_the_q_exit_says(runs):
    # q = 0: the CDF reaches 0 at step 1, so every rotated digit halts at step 1; q = 1: at step N (tiny-mnist: 5)
    at = open_app("pages/rotation.py", model="runs/tiny-mnist")
    at.session_state["_model_mnist"] = "runs/tiny-mnist"
    at.selectbox(key="rot_mode").set_value("deterministic")
    for q, step in ((0.0, 1), (1.0, 5)):
        at.number_input(key="rot_q").set_value(q)
        _rotation_study(at, "0, 90", "", 100)
        assert list(at.dataframe[0].value["mean steps"]) == [step, step]
        assert f"deterministic mode (Q-exit at q = {q:g})" in texts(at)
