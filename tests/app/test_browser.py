"""The real thing: `streamlit run` on 127.0.0.1 and Debian's Chromium driven by Playwright.

Draws a 7 with mouse events on the canvas and waits for the prediction, the halting step and the
per-step chart. Uses /usr/bin/chromium (never `playwright install`); skipped only without it.
"""
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager

import pytest

from helpers import DATA_DIR, ROOT, needs_mnist

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]

pytestmark = [pytest.mark.browser, pytest.mark.long,
              pytest.mark.xdist_group("browser"),              # one worker, one streamlit server for the module
              pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                 reason=f"Debian's Chromium is not installed at {CHROMIUM} "
                                        "(apt-get install chromium); the real-browser test needs it")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def streamlit_server(tmp):
    """`streamlit run streamlit_app.py` on a free port of 127.0.0.1, its runs in tmp: yields its url once healthy."""
    port = free_port()
    env = dict(os.environ, PONDER_RUNS=str(tmp / "runs"), PONDER_DATA=DATA_DIR,
               OMP_NUM_THREADS="1")                                  # one torch thread, as the rest of the suite
    log = open(tmp / "streamlit.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "streamlit_app.py"),
                             "--server.address", "127.0.0.1", "--server.port", str(port),
                             "--server.headless", "true", "--browser.gatherUsageStats", "false"],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 90
        while True:
            try:
                with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail("streamlit did not start:\n" + (tmp / "streamlit.log").read_text()[-3000:])
            time.sleep(0.3)
        yield url
    finally:
        proc.kill()                     # nothing to save (its runs folder is temporary); a SIGTERM took 2 s
        proc.wait(10)
        log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with streamlit_server(tmp_path_factory.mktemp("browser")) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    """One Chromium for the module: a launch took ~4 s of CPU."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def new_page(browser):
    """new_page(width, height) -> a tab of that size in the test's own browser context (one window: its
    cookies, storage and Streamlit sessions are the test's), closed after the test."""
    context = browser.new_context()

    def new(width, height):
        page = context.new_page()
        page.set_viewport_size({"width": width, "height": height})
        return page
    yield new
    context.close()


def draw(page, box, points, steps=10):
    """A mouse stroke through points given as fractions of the canvas box."""
    def at(fx, fy):
        return box["x"] + fx * box["width"], box["y"] + fy * box["height"]

    page.mouse.move(*at(*points[0]))
    page.mouse.down()
    for (ax, ay), (bx, by) in zip(points, points[1:]):
        for i in range(1, steps + 1):
            t = i / steps
            page.mouse.move(*at(ax + (bx - ax) * t, ay + (by - ay) * t))
    page.mouse.up()


def test_draw_a_digit_and_see_the_prediction_and_the_per_step_chart(server, new_page):
    page = new_page(1400, 1600)
    page.goto(server)
    page.get_by_text("Draw a digit in the black box").wait_for(timeout=60000)    # blank canvas: a hint
    icons = page.locator("link[rel*='icon']").evaluate_all("ls => ls.map(l => l.href)")
    assert icons and all(h.startswith(server) for h in icons), icons    # served by the app, works offline
    canvas = page.locator("canvas.upper-canvas").first
    canvas.wait_for(timeout=60000)
    box = canvas.bounding_box()
    draw(page, box, [(0.3, 0.22), (0.72, 0.22), (0.62, 0.45), (0.5, 0.8)])      # a 7
    page.get_by_text("Per-step answer: class probabilities at").wait_for(timeout=60000)   # a title's first line
    # the answer's top 3 and the four per-step charts ("worth it?" drawn when its section is opened)
    _wait(page, lambda: page.locator("[data-testid=stPlotlyChart]").count() == 5, what="charts")
    metrics = dict(zip(page.locator("[data-testid=stMetricLabel]").all_inner_texts(),
                       page.locator("[data-testid=stMetricValue]").all_inner_texts()))
    metrics = {k.strip(): v.strip() for k, v in metrics.items()}
    assert metrics["Prediction"] == "7", metrics
    assert re.fullmatch(r"\d+ / 20", metrics["Halted at step"]), metrics
    assert page.get_by_text("What the model sees").count() == 1


def _wait(page, fn, timeout=60.0, what=""):
    end = time.time() + timeout
    while time.time() < end:
        try:
            if fn():
                return
        except Exception:                     # noqa: BLE001 - the page is still rerunning
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@needs_mnist
def test_shared_links_a_test_digit_rotated_and_an_upload(server, new_page, tmp_path):
    from PIL import Image, ImageDraw

    seven = tmp_path / "seven.png"
    img = Image.new("L", (300, 400), 255)
    ImageDraw.Draw(img).line([(80, 80), (220, 80), (140, 340)], fill=0, width=25)     # dark ink on paper
    img.save(seven)
    page = new_page(1280, 1400)
    page.goto(server + "/?page=sweep&lp=0.35&model=..%2F..%2Fetc")    # a shared link: page, λp, a bad model
    page.get_by_text("1/λp = 2.86").first.wait_for(timeout=60000)
    page.get_by_text("Ignored in the link: model=../../etc (this page does not use it).").wait_for(timeout=30000)
    _wait(page, lambda: "model=" not in page.url, timeout=30, what="the ignored model out of the URL")
    assert "/sweep" in page.url and "lp=0.35" in page.url
    page.goto(server + "/?page=digit&model=mnist-rot22")          # page and model
    page.get_by_text("Draw a digit in the black box").wait_for(timeout=60000)
    picker = page.locator("[data-testid=stSidebar] [data-testid=stSelectbox] input").first
    assert picker.input_value().startswith("mnist-rot22"), picker.input_value()
    page.get_by_role("radio", name="MNIST test digit").click()
    captions = page.locator("[data-testid=stCaptionContainer]")
    page.locator("[data-testid=stSelectbox]").filter(has_text="Class").click()
    page.get_by_role("option", name="3", exact=True).click()
    _wait(page, lambda: any("label 3" in c for c in captions.all_inner_texts()), what="a 3")
    rotation = page.locator("[data-testid=stSlider]").filter(has_text="Rotation").get_by_role("slider")
    # while a page run is under way Streamlit still shows the last run's slider, faded, where the layout
    # changed (the input source): wait for that run to end
    _wait(page, lambda: rotation.count() == 1, what="one rotation slider (the page run ended)")
    rotation.focus()
    for _ in range(18):                                        # 18 × 5° to the right
        page.keyboard.press("ArrowRight")
    _wait(page, lambda: page.get_by_text("What the model sees (28×28, rotated 90°)").count() == 1, what="90°")
    _wait(page, lambda: page.locator("[data-testid=stPlotlyChart]").count() == 5, what="charts")   # top 3 + per step
    # the halting mode and seed chosen here survive the results column disappearing (Upload, no file yet)
    seed_box = page.locator("[data-testid=stNumberInput]").filter(has_text="Seed").locator("input")
    page.get_by_role("button", name="Sample again").click()
    _wait(page, lambda: seed_box.input_value() not in ("", "0"), what="a new seed")
    seed = seed_box.input_value()
    _wait(page, lambda: page.get_by_text(f"Sampled with seed {seed}").count() == 1, what="the seed's sentence")
    page.get_by_role("radio", name="deterministic").click()
    _wait(page, lambda: page.get_by_text("Deterministic:").count() == 1, what="deterministic")
    page.get_by_role("radio", name="Upload").click()
    page.locator("[data-testid=stFileUploader] input[type=file]").set_input_files(str(seven))
    _wait(page, lambda: page.get_by_text("seven.png: cropped to the ink").count() == 1, what="the upload")
    _wait(page, lambda: page.get_by_text("Deterministic:").count() == 1, what="deterministic still in use")
    checked = [r.inner_text() for r in page.get_by_role("radio").all() if r.get_attribute("aria-checked") == "true"]
    assert "deterministic" in checked, checked                # shown as selected, as it is used
    page.get_by_role("radio", name="sample").click()
    _wait(page, lambda: page.get_by_text(f"Sampled with seed {seed}").count() == 1, what="the same seed")
    assert seed_box.input_value() == seed
    _wait(page, lambda: rotation.count() == 1, what="one rotation slider (the page run ended)")
    rotation.focus()
    for _ in range(18):
        page.keyboard.press("ArrowLeft")
    _wait(page, lambda: page.get_by_text("What the model sees (28×28)").count() == 1, what="0°")
    values = lambda: dict(zip(page.locator("[data-testid=stMetricLabel]").all_inner_texts(),   # noqa: E731
                              page.locator("[data-testid=stMetricValue]").all_inner_texts()))
    _wait(page, lambda: values().get("Prediction", "").strip() == "7", what=f"a 7, not {values()}")
    assert page.locator("[data-testid=stException]").count() == 0


@needs_mnist
def test_an_idle_digit_page_runs_nothing_before_and_after_the_rotation_slider_moves(server, new_page):
    """The rotation slider's debounce ticks only while the slider is away from the angle the page shows: an idle
    digit page runs no script (a tick every 0.5 s would be 6 runs in 3 s), and after three arrow presses it reruns
    for 15° and goes quiet again."""
    page = new_page(1280, 900)
    page.add_init_script("""new MutationObserver(() => {
        const app = document.querySelector('[data-testid=stApp]');
        const state = app && app.getAttribute('data-test-script-state');
        if (state === 'running' && window.__state !== 'running') window.__runs = (window.__runs || 0) + 1;
        window.__state = state;
    }).observe(document, {subtree: true, attributes: true, attributeFilter: ['data-test-script-state'], childList: true})""")
    page.goto(server + "/?page=digit")
    page.get_by_text("Draw a digit in the black box").wait_for(timeout=60000)
    page.get_by_role("radio", name="MNIST test digit").click()
    rotation = page.locator("[data-testid=stSlider]").filter(has_text="Rotation").get_by_role("slider")
    _wait(page, lambda: rotation.count() == 1, what="one rotation slider (the page run ended)")

    def runs_in(seconds):
        _wait(page, lambda: page.evaluate("window.__state") == "notRunning", what="the page run's end")
        n = page.evaluate("window.__runs || 0")
        time.sleep(seconds)
        return page.evaluate("window.__runs || 0") - n

    time.sleep(1.0)
    assert runs_in(3) == 0
    rotation.focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    _wait(page, lambda: page.get_by_text("What the model sees (28×28, rotated 15°)").count() == 1, what="15°")
    time.sleep(1.5)
    assert runs_in(3) == 0
    assert page.locator("[data-testid=stException]").count() == 0


def test_reload_during_training_comes_back_and_a_new_tab_cancels_the_run(server, new_page):
    """Start a parity run, reload the tab (the job is in the address), see its progress again; open the
    Train page in a new tab (another session), see the machine's job there and cancel it: a partial run."""
    page = new_page(1280, 1200)
    page.goto(server + "/?page=train")
    sidebar = page.locator("[data-testid=stSidebar]")
    sidebar.get_by_role("button", name="Start training").wait_for(timeout=60000)
    sidebar.locator("[data-testid=stRadio] label").filter(has_text="Parity").click()
    name = sidebar.locator("[data-testid=stTextInput] input").first
    sizes = (("Hidden size", "16"), ("Batch size", "32"), ("N (most steps)", "6"),   # small steps,
             ("Epochs", "100"))                                             # still running when cancelled
    # the MNIST form fades out while the page reruns: wait until each field is there once, the parity one's
    _wait(page, lambda: name.input_value().startswith("parity-") and
          all(sidebar.get_by_label(label, exact=True).count() == 1 for label, _ in sizes), what="the parity form")
    # a rerun on a loaded machine can show the faded form again for a moment: fill each field once it is alone
    for field, value, what in [(name, "browser-reload", "Run name")] + \
            [(sidebar.get_by_label(label, exact=True), value, label) for label, value in sizes]:
        _wait(page, lambda: field.count() == 1 and (field.fill(value, timeout=2000) or field.input_value() == value),
              what=f"the parity form's {what}")
    sidebar.get_by_role("button", name="Start training").click()
    progress = page.locator("[data-testid=stProgress]")
    progress.wait_for(timeout=60000)
    _wait(page, lambda: "job=" in page.url, what="the job in the address")
    page.reload()                                                   # a new session, same address
    progress.wait_for(timeout=60000)
    assert page.get_by_text("Back to job").count() == 1
    other = new_page(1280, 1200)                                     # another tab, a plain address
    other.goto(server + "/?page=train")
    other.get_by_text("started elsewhere").wait_for(timeout=60000)
    # cancel once a training step is logged: on a loaded machine the job can still be importing torch when the
    # tab opens, and a cancel then saves nothing (test_a_cancel_before_the_first_step_says_so_in_one_sentence)
    bar = other.locator("[data-testid=stProgress]")
    _wait(other, lambda: re.search(r"step [1-9][\d,]* of", bar.inner_text(timeout=1000)), timeout=120,
          what="a logged training step")
    other.get_by_role("button", name="Cancel").dispatch_event("click")    # the live view redraws every second
    other.get_by_text("cancelled from another session at step").wait_for(timeout=60000)
    assert other.get_by_text("Partial run").count() == 1 and other.get_by_text("runs/browser-reload", exact=True).count() == 1
    other.get_by_role("link", name="Try runs/browser-reload on the Parity page").wait_for(timeout=60000)  # the page's
                                                                     # rerun after the job ends draws the links
    assert page.locator("[data-testid=stException]").count() == other.locator("[data-testid=stException]").count() == 0


def test_parity_at_1280px_shows_the_whole_mode_control_and_one_metric_size_a_row(server, new_page):
    # At 1280 px the halting mode control sat in a ~240 px column with "expected" cut off, and the CSS that
    # shrinks a narrow metric's value gave "E[n] 9.87" (a 120 px box) a smaller font than "odd" beside it.
    # A real browser is the only place layout can be seen (about 5 s: the page loads parity-15).
    page = new_page(1280, 800)
    page.goto(server + "/?page=parity")
    values = page.locator("[data-testid=stMetricValue]")
    values.nth(2).wait_for(timeout=60000)
    group = page.get_by_role("radiogroup", name="Halting mode")
    box, last = group.bounding_box(), group.get_by_text("expected").bounding_box()
    scroll, width = group.evaluate("e => [e.scrollWidth, e.clientWidth]")
    assert scroll <= width and last["x"] + last["width"] <= box["x"] + box["width"], (scroll, width, last, box)
    sizes = values.evaluate_all("es => es.map(e => getComputedStyle(e).fontSize)")
    assert len(sizes) == 7 and len(set(sizes)) == 1, sizes     # odd, 13 / 20, 9.87; the step slider's four


def test_enter_in_a_train_form_field_starts_nothing(server, new_page):
    # Enter in the run name or time budget started a job with whatever the form held; only the button starts one
    page = new_page(1280, 800)
    page.goto(server + "/?page=train")
    sidebar = page.locator("[data-testid=stSidebar]")
    sidebar.get_by_role("button", name="Start training").wait_for(timeout=60000)
    for field in (sidebar.locator("[data-testid=stTextInput] input").first,
                  sidebar.get_by_label("Time budget (s, 0 = none)", exact=True)):
        field.click()
        field.press("End")
        field.type("1")
        field.press("Enter")
    page.wait_for_timeout(2000)                                   # a submitted form reruns within a second
    assert page.locator("[data-testid=stProgress]").count() == 0 and page.get_by_text("Training job").count() == 0
    assert page.locator("[data-testid=stException]").count() == 0


SLIDER_AND_PANEL = """() => {
    const s = document.querySelector('[data-testid=stSlider]:has([aria-label="Step through the steps"]) '
                                     + '[data-testid=stSliderThumbValue]');     // the number the reader sees
    const c = [...document.querySelectorAll('[data-testid=stCaptionContainer]')].map(e => e.innerText)
        .find(t => /^Step \\d+ of \\d+/.test(t));
    return [s ? Number(s.innerText) : null, c ? Number(c.match(/^Step (\\d+)/)[1]) : null];
}"""


def test_play_starts_at_step_1_and_the_slider_and_the_panel_agree(server, new_page):
    # the fragment's timer is the browser's: only a real browser shows the steps playing on their own. Play began
    # at the halting step, and once the slider read 15 while the panel said step 16: every settled view (the same
    # in two looks 100 ms apart) shows one step in both, from step 1 on
    page = new_page(1280, 1000)
    page.goto(server + "/?page=parity")
    play = page.get_by_role("button", name="Play through the steps")
    play.wait_for(timeout=60000)
    page.get_by_role("slider", name="Number of non-zeros k").press("Home")      # k = 0: parity-15 halts at step 3
    page.get_by_text("Step 3 of 20 (where it halted)").wait_for(timeout=60000)
    play.click()
    # looked at from the click on (waiting for the Pause button first could miss step 1 on a busy machine): the
    # looks before Play has taken effect still show the halting step, 3
    looks, end = [], time.time() + 30
    while time.time() < end and not (looks and looks[-1][0] and looks[-1][0] >= 5):
        looks.append(tuple(page.evaluate(SLIDER_AND_PANEL)))
        page.wait_for_timeout(100)
    # Pause, pressed where the button is (as a hand does: a locator's click waits for a steady button), keeps the
    # step the browser showed when the press reached it, or the next one where that was sent already and not yet
    # drawn: it landed steps later on a loaded machine, or the press was lost and Play ran on to step N
    page.evaluate(f"() => {{ const look = {SLIDER_AND_PANEL}; document.addEventListener('mousedown', "
                  "() => { window.atPress = look(); }, {capture: true, once: true}); }")
    box = page.get_by_role("button", name="Pause").bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.get_by_role("button", name="Play through the steps").wait_for(timeout=30000)
    at_press = page.evaluate("window.atPress")
    _wait(page, lambda: page.evaluate(SLIDER_AND_PANEL) in [[s, s] for s in range(at_press[0], at_press[1] + 2)],
          timeout=30, what=f"the step shown at the press, {at_press}, not {page.evaluate(SLIDER_AND_PANEL)}")
    settled = [a for a, b in zip(looks, looks[1:]) if a == b and None not in a]
    assert settled and all(s == p for s, p in settled), looks
    played = looks[next(i for i, (s, _) in enumerate(looks) if s != 3):]          # from the first step Play showed
    first = next(a for a, b in zip(played, played[1:]) if a == b)                  # its first settled view
    assert played[0][0] == 1 and first == (1, 1), looks                            # from step 1 ...
    assert {s for s, _ in played} == {1, 2, 3, 4, 5}, looks                         # ... through the halt
    assert page.locator("[data-testid=stException]").count() == 0


def test_no_choice_of_a_train_form_select_is_cut_in_the_sidebar(server, new_page):
    # "rows: 2 more a step (ponde…": every choice of each sidebar select, measured in the box's own font, fits it;
    # a task's option selects (made from its options dataclass) are measured with that task chosen
    from explorer.app import forms
    from ponder.losses import REGULARISERS
    from ponder.tasks import TASKS
    from ponder.tasks.options import option_fields
    page = new_page(1280, 800)
    page.goto(server + "/?page=train")
    measured = {}
    for task in TASKS.values():
        page.get_by_role("radio", name=forms.task_label(task.name)).click(force=True)     # its styled dot covers it
        selects = {f.metadata["label"]: [f.metadata["labels"].get(c, str(c)) for c in f.metadata["choices"]]
                   for f in option_fields(task) if f.metadata["choices"]}
        options = {"Regulariser": [forms.regulariser_choice(name) for name in REGULARISERS],
                   "What the λ head reads": list(forms.LAMBDA_INPUT_LABELS.values()), **selects}
        # the page run the click started has drawn each of them once (while it runs, a moved select can show
        # twice: the stale box and the new one)
        page.wait_for_function("""(labels) => labels.every(l => document.querySelectorAll(
            `[data-testid=stSidebar] input[role=combobox][aria-label="${l}"]`).length === 1)""", arg=list(options),
                               timeout=60000)
        measured.update(page.evaluate("""(options) => Object.fromEntries(Object.entries(options).map(([label, choices]) => {
        const input = document.querySelector(`[data-testid=stSidebar] input[role=combobox][aria-label="${label}"]`);
        const cs = getComputedStyle(input), ctx = document.createElement('canvas').getContext('2d');
        ctx.font = cs.font;
        const room = input.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
        return [label, choices.filter(c => ctx.measureText(c).width > room).concat([room])];
    }))""", options))
    assert {"What each step sees (MNIST)", "Parity preset"} <= set(measured)
    assert all(len(cut) == 1 and cut[0] > 100 for cut in measured.values()), measured     # only the room: none cut


@pytest.mark.parametrize("path, heading", [("/", "Ponder a digit"), ("/train", "Train a PonderNet")])
def test_the_first_load_never_lists_the_page_files_by_name(path, heading, browser, tmp_path):
    # On the first load after a server start Streamlit runs a pages/ folder in its old multipage mode and, unless
    # showSidebarNavigation is off, lists the files ("digit", "train", ...) in the sidebar until st.navigation has
    # run (1.4-3.6 s seen). A fresh server for each path: only its first load shows it. A deep link (/train)
    # is first run alone and sent through the app by ui.app_guard.
    from explorer.navigation import PAGES

    files, titles, seen = {p.name for p in PAGES}, {p.title for p in PAGES}, set()
    with streamlit_server(tmp_path) as url:
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        try:
            page = context.new_page()
            page.goto(url + path, wait_until="commit")
            start = time.time()
            # every line of the sidebar every 0.1 s: for 5 s, and on until the app's links show (a first load
            # imports torch: slower than 5 s on a busy machine)
            while time.time() < start + 5 or not titles <= seen and time.time() < start + 90:
                for text in page.locator("[data-testid=stSidebar]").all_inner_texts():
                    seen |= {line.strip() for line in text.splitlines() if line.strip()}
                page.wait_for_timeout(100)
            page.get_by_role("heading", name=heading).wait_for(timeout=60000)     # the page the link asked for
        finally:
            context.close()
    assert not seen & files, seen & files
    assert titles <= seen, titles - seen                # the sampling saw the sidebar's links, by title


def test_start_training_is_in_view_at_1280x800_without_scrolling(server, new_page):
    page = new_page(1280, 800)
    page.goto(server + "/?page=train")
    start = page.locator("[data-testid=stSidebar]").get_by_role("button", name="Start training")
    start.wait_for(timeout=60000)
    box = start.bounding_box()
    assert box["y"] >= 0 and box["y"] + box["height"] <= 800, box
    assert page.locator("[data-testid=stSidebar]").get_by_text("Saved as").count() == 1    # the name, before it starts


def test_on_a_narrow_screen_choosing_a_page_closes_the_sidebar(server, new_page):
    # Streamlit closes it only for a browser that calls itself mobile; a 390 px window of any browser is as narrow
    page = new_page(390, 844)
    page.goto(server + "/?page=runs")
    sidebar = page.locator("[data-testid=stSidebar]")
    page.get_by_role("heading", name="Runs").first.wait_for(timeout=60000)
    if sidebar.get_attribute("data-collapsed") == "true":
        page.locator("[data-testid=stExpandSidebarButton]").click()
    _wait(page, lambda: sidebar.get_attribute("data-collapsed") == "false", what="the sidebar open")
    sidebar.locator("[data-testid=stPageLink-NavLink]", has_text="Parity").click()
    page.get_by_role("heading", name="Parity").first.wait_for(timeout=60000)
    _wait(page, lambda: sidebar.get_attribute("data-collapsed") == "true", what="the sidebar closed")
    # Start training too: its progress and Cancel are on the page, under an open sidebar
    page.locator("[data-testid=stExpandSidebarButton]").click()
    sidebar.locator("[data-testid=stPageLink-NavLink]", has_text="Train").click()
    page.locator("[data-testid=stExpandSidebarButton]").click()
    sidebar.get_by_role("button", name="Start training").click()
    _wait(page, lambda: sidebar.get_attribute("data-collapsed") == "true", what="the sidebar closed on Start")
    page.locator("[data-testid=stProgress]").wait_for(timeout=60000)
    page.get_by_role("button", name="Cancel").dispatch_event("click")     # the live view redraws every second
    page.get_by_text("stopping…").first.wait_for(timeout=60000)           # the press reached the job


def _inked(page) -> int:
    """Pixels of the drawing canvas brighter than mid-grey."""
    return page.locator("canvas.dc-canvas.lower-canvas").first.evaluate(
        "c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data; let n = 0;"
        " for (let i = 0; i < d.length; i += 4) n += d[i] > 128; return n; }")


def test_a_phone_shows_the_answer_after_a_stroke_and_a_copied_link_shows_the_same_view(server, new_page):
    page = new_page(390, 844)
    page.goto(server + "/?page=digit&model=mnist-adaptive")
    canvas = page.locator("canvas.upper-canvas").first
    canvas.wait_for(timeout=60000)
    canvas.scroll_into_view_if_needed()
    draw(page, canvas.bounding_box(), [(0.3, 0.22), (0.72, 0.22), (0.62, 0.45), (0.5, 0.8)])      # a 7
    line = page.locator(".st-key-answer_line")
    _wait(page, lambda: "Answer 7" in line.inner_text(), what="the answer's line")
    box = line.bounding_box()                                     # in the window, without scrolling
    assert 0 <= box["y"] and box["y"] + box["height"] <= 844, box
    page.get_by_role("radio", name="expected").click()
    _wait(page, lambda: "mode=expected" in page.evaluate("location.href"), what="mode=expected in the address")
    link = page.evaluate("location.href")
    assert "digit=" in link and len(link) < 600, link
    other = new_page(1280, 800)                                   # another session, the link pasted
    other.goto(link)
    other.get_by_text("Expected: it ran all 20 steps").wait_for(timeout=60000)
    assert other.locator(".st-key-answer_line").inner_text() == line.inner_text()
    _wait(other, lambda: _inked(other) > 2000, what="the shared digit drawn in the canvas")
