"""A new user's walk through every page of the explorer in headless Chromium, at 1280×800 and at 390×844.

    python -m bench.walk [--repo DIR] [--out DIR] [--sizes 1280x800,390x844] [--no-jobs] [--live-views N]

Starts `streamlit run streamlit_app.py` in --repo (a clone set up from its README; default: this checkout) on a
free port of 127.0.0.1, its runs in the clone's ./runs unless PONDER_RUNS is set, MNIST from $PONDER_DATA, and
walks the user stories: draw 0-9 (time to the answer after the stroke), rotate a 7, play through the steps, the
gallery, a second model side by side, Train (start a short run from the sidebar, its progress line, the job on
every page, the live charts), a λp sweep of one's own, Rotation, Compare, Parity and Runs (export, import, rename,
delete). Each step is timed and checked; the screenshots, walk.json and walk.md go to --out (default
bench/walk-out/, ignored by git). Uses /usr/bin/chromium (never `playwright install`), `--no-sandbox`.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
import traceback
import urllib.request
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run", "--disable-sync",
        "--disable-background-networking", "--disable-component-update"]
ROOT = Path(__file__).resolve().parents[1]

# one mouse stroke per digit, as fractions of the canvas (x, y)
DIGITS = {
    0: [(0.5, 0.18), (0.32, 0.3), (0.28, 0.5), (0.32, 0.72), (0.5, 0.82), (0.68, 0.72), (0.72, 0.5), (0.68, 0.3),
        (0.5, 0.18)],
    1: [(0.48, 0.18), (0.5, 0.82)],
    2: [(0.3, 0.3), (0.45, 0.2), (0.65, 0.25), (0.68, 0.4), (0.3, 0.78), (0.72, 0.78)],
    3: [(0.3, 0.22), (0.65, 0.22), (0.45, 0.48), (0.68, 0.62), (0.55, 0.8), (0.3, 0.78)],
    4: [(0.6, 0.82), (0.6, 0.18), (0.28, 0.6), (0.75, 0.6)],
    5: [(0.7, 0.2), (0.35, 0.2), (0.32, 0.48), (0.6, 0.45), (0.7, 0.62), (0.55, 0.8), (0.3, 0.78)],
    6: [(0.62, 0.18), (0.38, 0.45), (0.33, 0.7), (0.5, 0.82), (0.66, 0.68), (0.55, 0.52), (0.36, 0.6)],
    7: [(0.3, 0.22), (0.72, 0.22), (0.62, 0.45), (0.5, 0.8)],
    8: [(0.5, 0.5), (0.32, 0.35), (0.5, 0.2), (0.68, 0.35), (0.5, 0.5), (0.3, 0.66), (0.5, 0.82), (0.7, 0.66),
        (0.5, 0.5)],
    9: [(0.65, 0.35), (0.5, 0.2), (0.33, 0.33), (0.5, 0.48), (0.65, 0.35), (0.62, 0.82)],
}
ANSWER = re.compile(r"Answer (\S+) \((\d+)%\) · (?:halted at step (\d+) of (\d+)|all \d+ steps run) · E\[n\] ([\d.]+)")
SLIDER_AND_PANEL = """() => {
    const s = document.querySelector('[data-testid=stSlider]:has([aria-label="Step through the steps"]) '
                                     + '[data-testid=stSliderThumbValue]');
    const c = [...document.querySelectorAll('[data-testid=stCaptionContainer]')].map(e => e.innerText)
        .find(t => /^Step \\d+ of \\d+/.test(t));
    return [s ? Number(s.innerText) : null, c ? Number(c.match(/^Step (\\d+)/)[1]) : null];
}"""
EMPTY_CHARTS = """() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')].map(c => {
    const r = c.getBoundingClientRect(), svg = c.querySelector('svg.main-svg');
    const marks = c.querySelectorAll('g.trace').length;
    return {h: Math.round(r.height), w: Math.round(r.width), svg: !!svg, marks: marks,
            title: (c.querySelector('.gtitle') || {}).textContent || ''};
})"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def server(repo: Path, out: Path):
    """`streamlit run` in repo on a free port; yields its url once healthy, stops it after."""
    with server_process(repo, out) as (_, url, boot):
        yield url, boot


@contextmanager
def server_process(repo: Path, out: Path, env: dict = None):
    """`streamlit run` in repo on a free port with these environment variables added; yields (the process, its url,
    the seconds until healthy), stops it after."""
    port = free_port()
    python = repo / ".venv" / "bin" / "python"
    env = dict(os.environ, **(env or {}))
    log = open(out / "streamlit.log", "w")
    proc = subprocess.Popen([str(python if python.exists() else sys.executable), "-m", "streamlit", "run",
                             "streamlit_app.py", "--server.address", "127.0.0.1", "--server.port", str(port),
                             "--server.headless", "true", "--browser.gatherUsageStats", "false"],
                            cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        t0 = time.time()
        while True:
            try:
                with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.time() > t0 + 120:
                raise RuntimeError("streamlit did not start: " + (out / "streamlit.log").read_text()[-2000:])
            time.sleep(0.3)
        yield proc, url, time.time() - t0
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


class Walk:
    """The steps walked so far: each one's size, story, seconds, what it found and whether it was as expected."""

    def __init__(self, out: Path):
        self.out, self.steps, self.size, self.shot = out, [], "", 0

    @contextmanager
    def step(self, page, story: str):
        rec = {"size": self.size, "story": story, "ok": True, "found": [], "wrong": []}
        t0 = time.time()
        try:
            yield rec
        except Exception as e:                                  # noqa: BLE001 - a walk records and goes on
            rec["ok"] = False
            rec["wrong"].append(f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
            rec["trace"] = traceback.format_exc()[-1500:]
        rec["seconds"] = round(time.time() - t0, 2)
        if page is not None:
            try:
                errors = page.locator("[data-testid=stException]").all_inner_texts()
                if errors:
                    rec["ok"] = False
                    rec["wrong"].append("exception on the page: " + errors[0][:300])
                self.shot += 1
                name = f"{self.size}/{self.shot:02d}-{re.sub(r'[^a-z0-9]+', '-', story.lower())[:40]}.png"
                (self.out / self.size).mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(self.out / name), full_page=False)
                rec["screenshot"] = name
            except Exception as e:                              # noqa: BLE001
                rec["found"].append(f"(no screenshot: {type(e).__name__})")
        rec["ok"] = rec["ok"] and not rec["wrong"]
        self.steps.append(rec)
        print(f"[{self.size}] {'ok ' if rec['ok'] else 'BAD'} {rec['seconds']:6.1f}s {story}: "
              + "; ".join(rec["found"] + [f"WRONG {w}" for w in rec["wrong"]]), flush=True)


def wait(fn, timeout=60.0, what="", every=0.2):
    end = time.time() + timeout
    last = None
    while time.time() < end:
        try:
            v = fn()
            if v:
                return v
        except Exception as e:                 # noqa: BLE001 - the page is still rerunning
            last = e
        time.sleep(every)
    raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}" + (f" ({last})" if last else ""))


def settled(page, timeout=180.0):
    """Wait until Streamlit's 'running' indicator has been gone for 0.5 s."""
    status = page.locator("[data-testid=stStatusWidget]")
    spinner = page.locator("[data-testid=stSpinner]")
    calm = [0.0]

    def quiet():
        if spinner.count() or status.count() and "Running" in " ".join(status.all_inner_texts()):
            calm[0] = 0.0
            return False
        calm[0] = calm[0] or time.time()
        return time.time() - calm[0] > 0.5
    wait(quiet, timeout, "the page run to end", every=0.1)


def open_page(page, url: str, heading: str) -> tuple:
    """goto url; (seconds to the heading, seconds until the page run ended)."""
    t0 = time.time()
    page.goto(url)
    page.get_by_role("heading", name=heading).first.wait_for(timeout=120000)
    t1 = time.time() - t0
    settled(page)
    return round(t1, 2), round(time.time() - t0, 2)


def stroke(page, box, points, steps=8):
    at = lambda fx, fy: (box["x"] + fx * box["width"], box["y"] + fy * box["height"])    # noqa: E731
    page.mouse.move(*at(*points[0]))
    page.mouse.down()
    for (ax, ay), (bx, by) in zip(points, points[1:]):
        for i in range(1, steps + 1):
            page.mouse.move(*at(ax + (bx - ax) * i / steps, ay + (by - ay) * i / steps))
    page.mouse.up()


def top(page, locator):
    """Scroll the element to the top of the window, below Streamlit's header: where a reader puts the canvas."""
    locator.evaluate("e => { e.scrollIntoView({block: 'start'}); window.scrollBy(0, -70); "
                     "document.querySelector('[data-testid=stMain]')?.scrollBy?.(0, -70); }")
    page.wait_for_timeout(200)


def answer(page):
    texts = page.locator("[data-testid=stMarkdown]").filter(has_text=re.compile(r"Answer \S+ \(\d+%\)")).all_inner_texts()
    for t in texts:
        m = ANSWER.search(" ".join(t.split()))
        if m:
            return m
    return None


def in_view(page, locator) -> bool:
    box = locator.bounding_box()
    vh = page.viewport_size["height"]
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= vh


def sidebar_closed(page) -> bool:
    return page.locator("[data-testid=stSidebar]").get_attribute("data-collapsed") == "true"


# ------------------------------------------------------------------------------------------ the stories

def walk_digit(w: Walk, page, url: str):
    phone = page.viewport_size["width"] < 600
    with w.step(page, "Ponder a digit: page load") as r:
        a, b = open_page(page, url + "/?page=digit", "Ponder a digit")
        r["found"].append(f"heading {a} s, page run ended {b} s")
        try:
            page.get_by_text("A step", exact=True).first.wait_for(timeout=30000)
        except Exception:                                        # noqa: BLE001 - recorded as what it found
            pass
        if "A step of" not in text_of(page):
            r["wrong"].append("the intro does not say what a step is")
        if phone and not sidebar_closed(page):
            r["wrong"].append("the sidebar is open over the page on a phone")
    canvas = page.locator("canvas.upper-canvas").first
    results = {}
    for d in range(10):
        with w.step(page if d in (0, 7) else None, f"draw a {d}") as r:
            clear = page.get_by_role("button", name="Clear")
            if answer(page) is not None:
                t0 = time.time()
                clear.click()
                wait(lambda: answer(page) is None, 30, "the answer gone after Clear")
                r["found"].append(f"Clear emptied it in {time.time() - t0:.2f} s")
            top(page, canvas)
            box = canvas.bounding_box()
            stroke(page, box, DIGITS[d])
            t0 = time.time()
            m = wait(lambda: answer(page), 60, "the answer after drawing")
            dt = time.time() - t0
            results[d] = dict(answer=m.group(1), confidence=int(m.group(2)), halt=m.group(3), e_n=float(m.group(5)),
                              seconds=round(dt, 2))
            r["found"].append(f"answer {m.group(1)} ({m.group(2)}%), halted at {m.group(3)}, E[n] {m.group(5)}, "
                              f"{dt:.2f} s after the stroke")
            if m.group(1) != str(d):
                r["found"].append(f"read as {m.group(1)} (the stroke may be poor)")
            line = page.locator("[data-testid=stMarkdown]").filter(has_text=re.compile(r"Answer \S+ \(\d+%\)")).first
            if not in_view(page, line):
                r["wrong"].append("the answer is not in view after drawing")
    w.digits = results
    with w.step(page, "rotate the 7 by 60°") as r:
        page.get_by_role("button", name="Clear").click()
        wait(lambda: answer(page) is None, 30, "the answer gone")
        canvas.scroll_into_view_if_needed()
        stroke(page, canvas.bounding_box(), DIGITS[7])
        before = wait(lambda: answer(page), 60, "the 7's answer")
        rotation = page.locator("[data-testid=stSlider]").filter(has_text="Rotation").get_by_role("slider")
        wait(lambda: rotation.count() == 1, 30, "one rotation slider")
        rotation.focus()
        for _ in range(12):
            page.keyboard.press("ArrowRight")
        t0 = time.time()
        wait(lambda: page.get_by_text(re.compile("rotated 60°")).count() >= 1, 60, "the 60° view")
        settled(page)
        after = wait(lambda: answer(page), 60, "the answer at 60°")
        r["found"].append(f"E[n] {before.group(5)} -> {after.group(5)} at 60° (answer {before.group(1)} -> "
                          f"{after.group(1)}), {time.time() - t0:.2f} s to redraw")
        hint = " ".join(" ".join(page.locator("[data-testid=stAlert], [data-testid=stCaptionContainer]")
                                 .all_inner_texts()).split())
        if "?." in hint:
            r["wrong"].append("a stray '?.' in the page's notes")
        if "upside down" in hint:
            r["wrong"].append("the hint asks whether a digit rotated on purpose is upside down")
        for _ in range(12):
            page.keyboard.press("ArrowLeft")
        wait(lambda: page.get_by_text(re.compile("rotated 60°")).count() == 0, 60, "back to 0°")
        wait(lambda: answer(page).group(5) == before.group(5), 60, "the 0° answer again")
        settled(page)
    with w.step(page, "Play through the steps") as r:
        play_from_one(page, r)
    with w.step(page, "heatmap and step labels") as r:
        ticks = page.evaluate("""() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]
            .filter(c => c.querySelector('.heatmaplayer'))
            .map(c => [...c.querySelectorAll('.ytick text')].map(t => t.textContent))""")
        r["found"].append(f"heatmap step labels {ticks[0] if ticks else None}")
        if not ticks or "20" not in ticks[0]:
            r["wrong"].append("the heatmap does not label step 20")
    with w.step(page, "expected mode: the answer as a mixture") as r:
        page.get_by_role("radiogroup", name="Halting mode").get_by_text("expected").click()
        t0 = time.time()
        page.get_by_text(re.compile(r"Σ_n p_n·P\(class \| step n\)")).first.wait_for(timeout=60000)
        r["found"].append(f"the mixture chart {time.time() - t0:.2f} s after choosing expected")
        page.get_by_role("radiogroup", name="Halting mode").get_by_text("sample").click()
        settled(page)
    with w.step(page, "gallery: click a digit") as r:
        page.get_by_text("Test digits it ponders least and most").click()
        button = page.locator("[data-testid=stMain] [data-testid=stExpander] button:visible").filter(has_text="#").first
        button.wait_for(timeout=120000)
        idx = button.inner_text().split()[-1].lstrip("#")
        button.click()
        wait(lambda: page.get_by_text(f"image #{idx}").count() >= 1, 60, f"test digit #{idx} loaded")
        r["found"].append(f"test digit #{idx} loaded by a click")
        settled(page)
    with w.step(page, "a second model side by side") as r:
        if phone and sidebar_closed(page):
            page.locator("[data-testid=stExpandSidebarButton]").click()
        box = page.locator("[data-testid=stSidebar] [data-testid=stSelectbox]").filter(
            has_text="Compare with a second model")
        box.click()
        page.get_by_role("option").filter(has_text="mnist-rot22").first.click()
        if phone and not sidebar_closed(page):
            page.locator("[data-testid=stSidebarCollapseButton] button, [data-testid=stSidebarCollapseButton]").first.click()
        settled(page)
        page.get_by_role("heading", name="Side by side").first.scroll_into_view_if_needed()
        page.wait_for_timeout(1000)
        ranges = page.evaluate("""() => [...document.querySelectorAll('[data-testid=stPlotlyChart]')]
            .filter(c => /^p_n vs prior/.test((c.querySelector('.gtitle') || {}).textContent || ''))
            .map(c => { const t = [...c.querySelectorAll('.ytick text')].map(e => e.textContent);
                        return t.length ? t[t.length - 1] : null; })""")
        r["found"].append(f"p_n charts' top y labels {ranges}")
        if len(set(ranges)) > 1:
            r["wrong"].append(f"the side-by-side p_n charts use different y scales {ranges}")


def play_from_one(page, r):
    play = page.get_by_role("button", name="Play through the steps")
    play.scroll_into_view_if_needed()
    start = page.evaluate(SLIDER_AND_PANEL)[0]
    play.click()
    looks, end = [], time.time() + 40
    while time.time() < end and not (len({s for s, _ in looks if s}) >= 5):
        looks.append(tuple(page.evaluate(SLIDER_AND_PANEL)))
        page.wait_for_timeout(100)
    page.get_by_role("button", name="Pause").dispatch_event("click")    # redrawn every step: a click may miss
    page.get_by_role("button", name="Play through the steps").wait_for(timeout=30000)
    played = [s for s, _ in looks if s is not None]
    moved = next((i for i, s in enumerate(played) if s != start), None)
    first = played[moved] if moved is not None else None
    if start == 1 and first == 2:
        first = 1                                              # it stood at step 1 already
    r["found"].append(f"slider {start} before Play, first step played {first}, steps seen {sorted(set(played))}")
    if first != 1:
        r["wrong"].append(f"Play started at step {first}, not 1")
    pairs = [a for a, b in zip(looks, looks[1:]) if a == b and None not in a]
    if any(s != p for s, p in pairs):
        r["wrong"].append(f"the slider and the panel disagreed: {[p for p in pairs if p[0] != p[1]][:3]}")


def walk_static(w: Walk, page, url: str, path: str, heading: str, checks=None):
    with w.step(page, f"{heading}: page load") as r:
        a, b = open_page(page, url + path, heading)
        r["found"].append(f"heading {a} s, page run ended {b} s")
        if page.viewport_size["width"] < 600 and not sidebar_closed(page):
            r["wrong"].append("the sidebar is open over the page on a phone")
        if checks:
            checks(page, r)


def text_of(page) -> str:
    return " ".join(page.locator("[data-testid=stMain]").inner_text().split())


def check_train(page, r):
    said = text_of(page)
    for bad in ("30–45 seconds", "docs/development.md"):
        if bad in said:
            r["wrong"].append(f"the Train page says {bad!r}")
    if "A step" not in said:
        r["wrong"].append("the Train page does not say what a step is")
    start = page.locator("[data-testid=stSidebar]").get_by_role("button", name="Start training")
    if page.viewport_size["width"] >= 600 and not in_view(page, start):
        r["wrong"].append("Start training is below the fold")
    cut = page.evaluate("""() => [...document.querySelectorAll('[data-testid=stSidebar] input[role=combobox]')]
        .filter(i => i.scrollWidth > i.clientWidth + 1).map(i => i.getAttribute('aria-label'))""")
    if cut:
        r["wrong"].append(f"sidebar choices cut: {cut}")


def check_rotation(page, r):
    t0 = time.time()
    page.get_by_role("heading", name="Does it ponder longer on harder inputs?").wait_for(timeout=300000)
    settled(page, 600)
    r["found"].append(f"the verdict {time.time() - t0:.1f} s after the page loaded, the page settled")
    verdict = page.locator("[data-testid=stAlert]").filter(has_text="mean halting step").first
    said = " ".join(verdict.inner_text().split())
    r["found"].append("verdict: " + said[:160] + "…")
    if not any(w in said for w in ("ink", "whole image", "reveal")):
        r["wrong"].append("the Rotation verdict does not say what a step is")


def check_compare(page, r):
    said = text_of(page)
    from urllib.parse import parse_qs, urlparse
    r["found"].append(f"models {parse_qs(urlparse(page.url).query).get('models')}")
    if "What a step is" not in said:
        r["wrong"].append("Compare does not say what a step is")
    page.locator("[data-testid=stDataFrame] .dvn-scroller").first.wait_for(timeout=60000)
    scroll = page.evaluate("""() => [...document.querySelectorAll('[data-testid=stDataFrame] .dvn-scroller')]
        .map(e => [e.scrollWidth, e.clientWidth])""")
    r["found"].append(f"table scroll/client widths {scroll}")


def check_runs(page, r):
    if "A step" not in text_of(page):
        r["wrong"].append("Runs does not say what a step is")


def check_parity(page, r):
    play_from_one(page, r)
    cell = page.locator(".st-key-cell_0 button:visible").first
    before = cell.inner_text().strip()
    t0 = time.time()
    cell.click()
    wait(lambda: cell.inner_text().strip() != before, 30, "the cell to change")
    settled(page)
    r["found"].append(f"cell 1 clicked: {before} -> {cell.inner_text().strip()} in {time.time() - t0:.2f} s")


def check_sweep(page, r):
    reader = page.locator("[data-testid=stSelectbox]").filter(has_text="What each step sees").first
    value = reader.locator("input").first.input_value() or " ".join(reader.inner_text().split())
    r["found"].append(f"sweep form reader: {value}")
    if not value.startswith("cnn"):
        r["wrong"].append(f"the sweep form's reader is {value!r}, not the shipped sweep's (cnn)")


def walk_phone_nav(w: Walk, page, url: str):
    with w.step(page, "choose a page from the sidebar") as r:
        open_page(page, url + "/?page=runs", "Runs")
        if sidebar_closed(page):
            page.locator("[data-testid=stExpandSidebarButton]").click()
        wait(lambda: not sidebar_closed(page), 20, "the sidebar open")
        page.locator("[data-testid=stSidebar] [data-testid=stPageLink-NavLink]", has_text="Parity").click()
        page.get_by_role("heading", name="Parity").first.wait_for(timeout=60000)
        t0 = time.time()
        wait(lambda: sidebar_closed(page), 20, "the sidebar closed after choosing a page")
        r["found"].append(f"the sidebar closed {time.time() - t0:.1f} s after the Parity page showed")


# ------------------------------------------------------------------------------------------ jobs

def walk_train(w: Walk, page, other, url: str, budget: int, live_views: int):
    with w.step(page, f"Train: start a run ({budget} s budget)") as r:
        open_page(page, url + "/?page=train", "Train a PonderNet")
        sb = page.locator("[data-testid=stSidebar]")
        name = sb.locator("[data-testid=stTextInput] input").first
        name.fill("walk-run")
        name.press("Tab")
        settled(page)
        field = sb.get_by_label("Time budget (s, 0 = none)", exact=True)
        field.fill(str(budget))
        field.press("Tab")
        settled(page)
        t0 = time.time()
        sb.get_by_role("button", name="Start training").click()
        page.locator("[data-testid=stProgress]").wait_for(timeout=60000)
        r["found"].append(f"progress bar after {time.time() - t0:.1f} s")
        start = sb.get_by_role("button", name="Start training")
        if start.is_enabled():
            r["wrong"].append("Start training stays enabled while the job runs")
        if "on the Train page" in " ".join(sb.all_inner_texts()):
            r["wrong"].append("the Train page sends you to the Train page to cancel")
    job_everywhere(w, other, url)
    with w.step(page, "Train: the progress line and the live charts") as r:
        lines, blank, views, most = [], [], 0, 0
        bar = page.locator("[data-testid=stProgress]")
        done = page.get_by_role("link", name=re.compile("Try .* on the Digit page"))
        end = time.time() + budget + 180
        while time.time() < end and not done.count():
            texts = bar.all_inner_texts()
            if texts:
                lines.append((round(time.time() - t0, 1), " ".join(texts[0].split())))
            shown = [c for c in page.evaluate(EMPTY_CHARTS) if c["h"] > 0]     # a chart being replaced has 0 height
            views += 1
            blank += [c for c in shown if c["marks"] == 0]
            if len(shown) < most:
                blank.append({"charts shown": len(shown), "before": most, "at": round(time.time() - t0, 1)})
            most = max(most, len(shown))
            page.wait_for_timeout(1000)
        r["found"].append(f"{len(lines)} progress lines: " + " | ".join(f"{t} s: {x}" for t, x in lines[::5]))
        lefts = [(t, _secs(s)) for t, s in lines if _secs(s) is not None]
        rises = [(a, b) for a, b in zip(lefts, lefts[1:]) if b[1] > a[1] + 1]
        if rises:
            r["wrong"].append(f"time left rose: {rises[:2]}")
        if blank:
            r["wrong"].append(f"{len(blank)} blank charts in {views} looks: {blank[:2]}")
        page.get_by_role("link", name=re.compile("Try .* on the Digit page")).wait_for(timeout=120000)
        r["found"].append(f"saved, {time.time() - t0:.1f} s after Start")
        w.progress = lines
    w.trained = "walk-run"


def _secs(line: str):
    m = re.search(r"left ≈ (?:(\d+) min )?(\d+) s", line)
    return None if not m else int(m.group(1) or 0) * 60 + int(m.group(2))


def job_everywhere(w: Walk, other, url: str):
    with w.step(other, "the running job on another page's sidebar") as r:
        open_page(other, url + "/?page=compare", "Compare runs")
        line = other.locator("[data-testid=stSidebar]").get_by_text(re.compile("Training "))
        wait(lambda: line.count() >= 1, 30, "the job's line in the sidebar")
        r["found"].append(" ".join(line.first.inner_text().split()))


def live_chart_views(w: Walk, page, url: str, n: int, seconds: int):
    """A run with the given budget; the Train page opened n times while it trains. Each view: the seconds until
    its live charts show, then 6 looks 0.5 s apart: a chart in view with no data, or fewer charts than that view
    showed before, is a blank."""
    with w.step(page, f"live charts over {n} views of a running job") as r:
        open_page(page, url + "/?page=train", "Train a PonderNet")
        sb = page.locator("[data-testid=stSidebar]")
        name = sb.locator("[data-testid=stTextInput] input").first
        name.fill("walk-live")
        name.press("Tab")
        settled(page)
        field = sb.get_by_label("Time budget (s, 0 = none)", exact=True)
        field.fill(str(seconds))
        field.press("Tab")
        settled(page)
        sb.get_by_role("button", name="Start training").click()
        page.locator("[data-testid=stProgress]").wait_for(timeout=60000)
        wait(lambda: "job=" in page.url, 30, "the job in the address")
        job = page.url
        wait(lambda: len([c for c in page.evaluate(EMPTY_CHARTS) if c["h"] > 0]) >= 2, 180, "the first live charts")
        bad, shown, firsts, late = [], [], [], 0
        for i in range(n):
            t0 = time.time()
            page.goto(job)
            page.get_by_role("heading", name="Train a PonderNet").first.wait_for(timeout=60000)
            if not page.locator("[data-testid=stProgress]").count() and page.get_by_role(
                    "link", name=re.compile("Try .* on the Digit page")).count():
                break
            try:
                wait(lambda: len([c for c in page.evaluate(EMPTY_CHARTS) if c["h"] > 0]) >= 2, 30, "charts")
            except TimeoutError:
                bad.append((i, "no live charts within 30 s"))
                continue
            firsts.append(round(time.time() - t0, 1))
            most, drawn = 0, set()
            for k in range(6):
                charts = [c for c in page.evaluate(EMPTY_CHARTS) if c["h"] > 0]
                # a box plotly has not drawn into yet (no svg) on a view's first looks is a chart being drawn;
                # drawn with no data, or undrawn after it was drawn, or gone, is a blank
                empty = [c for j, c in enumerate(charts) if c["svg"] and c["marks"] == 0 or not c["svg"] and j in drawn]
                late += sum(not c["svg"] for c in charts)
                drawn |= {j for j, c in enumerate(charts) if c["svg"]}
                if empty or len(charts) < most:
                    bad.append((i, {"charts": len(charts), "before": most, "empty": empty}))
                    w.shot += 1
                    page.screenshot(path=str(w.out / w.size / f"{w.shot:02d}-blank-live-{i}.png"))
                most = max(most, len(charts))
                page.wait_for_timeout(500)
            shown.append(most)
        r["found"].append(f"{len(shown)} views while it trained, {len(bad)} blanks; charts per view {shown}; seconds "
                          f"from the address to the charts {firsts}; {late} looks caught a chart not drawn yet")
        if bad:
            r["wrong"].append(f"blank live charts: {bad[:3]}")
        if page.locator("[data-testid=stProgress]").count():
            page.get_by_role("button", name="Cancel").first.dispatch_event("click")


def walk_sweep(w: Walk, page, url: str, seconds: int):
    with w.step(page, "λp sweep: train one of one's own") as r:
        open_page(page, url + "/?page=sweep", "λp sweep")
        form = page.locator("[data-testid=stForm]").filter(has_text="λp values to train")
        budget = form.get_by_label("Time budget per run (s)", exact=True)
        budget.fill(str(seconds))
        t0 = time.time()
        form.get_by_role("button", name=re.compile("Train the sweep")).click()
        page.get_by_text("Sweep started into").wait_for(timeout=60000)
        page.locator("[data-testid=stProgress]").first.wait_for(timeout=60000)
        wait(lambda: page.locator("[data-testid=stProgress]").count() == 0, 4 * seconds + 240, "the sweep to end",
             every=2)
        settled(page)
        r["found"].append(f"sweep done {time.time() - t0:.0f} s after Start")
        rows = page.evaluate("""() => [...document.querySelectorAll('[data-testid=stDataFrame]')].length""")
        r["found"].append(f"{rows} tables")
        page.locator("[data-testid=stRadio] label").filter(has_text="Your sweeps").click()
        settled(page)
        said = text_of(page)
        if "No sweep runs to show yet" in said:
            r["wrong"].append("the saved sweep is not found")
        m = re.search(r"runs/sweep-mnist\S*", said)
        r["found"].append(f"saved sweep listed: {m.group(0) if m else None}")


def walk_runs(w: Walk, page, url: str, name: str, out: Path):
    with w.step(page, "Runs: export, import, rename, delete") as r:
        open_page(page, url + "/?page=runs", "Runs")
        pick = page.locator("[data-testid=stSelectbox]").filter(has_text="Run").first
        pick.click()
        page.get_by_role("option", name=f"runs/{name}").first.click()
        settled(page)
        with page.expect_download() as dl:
            page.get_by_role("button", name="Export (.zip)").click()
        zipped = out / f"{name}.zip"
        dl.value.save_as(zipped)
        r["found"].append(f"exported {zipped.stat().st_size:,} bytes")
        up = page.locator("[data-testid=stFileUploader] input[type=file]").first
        up.set_input_files(str(zipped))
        page.get_by_role("button", name="Import").click()
        msg = page.get_by_text(re.compile("Imported as"))
        msg.first.wait_for(timeout=60000)
        said = " | ".join(" ".join(t.split()) for t in msg.all_inner_texts())
        r["found"].append(said)
        if name not in said:
            r["wrong"].append(f"the import is not named after the run: {said}")
        settled(page)
        if page.locator("[data-testid=stFileUploaderFile]").count():
            r["wrong"].append("the uploader still holds the zip after the import")
        rename = page.locator("[data-testid=stTextInput]").filter(has_text="New name").locator("input")
        if rename.count():
            rename.fill("walk-renamed")
            page.get_by_role("button", name=re.compile("Rename")).first.click()
            page.get_by_text(re.compile("Renamed .* to runs/walk-renamed")).wait_for(timeout=60000)
            r["found"].append("renamed to runs/walk-renamed")
            settled(page)
            page.get_by_role("button", name=re.compile("Delete")).first.click()
            page.get_by_role("button", name="Yes, delete it").first.click()
            page.get_by_text(re.compile("Deleted runs/walk-renamed")).wait_for(timeout=60000)
            r["found"].append("deleted runs/walk-renamed")
        else:
            r["wrong"].append("no rename box found")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", type=Path, default=ROOT)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "walk-out")
    ap.add_argument("--sizes", default="1280x800,390x844")
    ap.add_argument("--no-jobs", action="store_true", help="skip training, the sweep and the Runs changes")
    ap.add_argument("--train-seconds", type=int, default=30)
    ap.add_argument("--sweep-seconds", type=int, default=5)
    ap.add_argument("--live-views", type=int, default=0, help="views of the Train page while a job runs")
    ap.add_argument("--live-only", action="store_true", help="only the live-chart views (with --live-views N)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    w = Walk(args.out)
    w.digits, w.progress, w.trained = {}, [], None
    with server(args.repo.resolve(), args.out) as (url, boot), sync_playwright() as p:
        print(f"streamlit healthy after {boot:.1f} s at {url}", flush=True)
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            for size in args.sizes.split(","):
                wd, ht = map(int, size.split("x"))
                w.size = size
                ctx = browser.new_context(viewport={"width": wd, "height": ht},
                                          **({"is_mobile": True, "has_touch": True} if wd < 600 else {}))
                page = ctx.new_page()
                if args.live_only:
                    live_chart_views(w, page, url, args.live_views, 15 * args.live_views)
                    ctx.close()
                    continue
                walk_digit(w, page, url)
                if wd < 600:
                    walk_phone_nav(w, page, url)
                walk_static(w, page, url, "/?page=train", "Train a PonderNet", check_train)
                walk_static(w, page, url, "/?page=sweep", "λp sweep", check_sweep)
                walk_static(w, page, url, "/?page=rotation", "Rotation study", check_rotation)
                walk_static(w, page, url, "/?page=compare", "Compare runs", check_compare)
                walk_static(w, page, url, "/?page=parity", "Parity", check_parity)
                walk_static(w, page, url, "/?page=runs", "Runs", check_runs)
                if not args.no_jobs and size == args.sizes.split(",")[0]:
                    other = ctx.new_page()
                    walk_train(w, page, other, url, args.train_seconds, args.live_views)
                    walk_sweep(w, page, url, args.sweep_seconds)
                    if w.trained:
                        walk_runs(w, page, url, w.trained, args.out)
                    if args.live_views:
                        live_chart_views(w, page, url, args.live_views, 15 * args.live_views)
                ctx.close()
        finally:
            browser.close()
    (args.out / "walk.json").write_text(json.dumps({"url": url, "boot_seconds": boot, "steps": w.steps,
                                                    "digits": w.digits, "progress": w.progress}, indent=1))
    lines = [f"# Walk through the explorer ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load "
             f"{os.getloadavg()[0]:.1f}, {args.repo.resolve()})", "", "| size | step | s | ok | found |",
             "|---|---|---|---|---|"]
    lines += [f"| {s['size']} | {s['story']} | {s['seconds']} | {'ok' if s['ok'] else '**no**'} | "
              + "; ".join(s["found"] + [f"**{x}**" for x in s["wrong"]]).replace("|", "/") + " |" for s in w.steps]
    (args.out / "walk.md").write_text("\n".join(lines) + "\n")
    bad = [s for s in w.steps if not s["ok"]]
    print(f"{len(w.steps)} steps, {len(bad)} found something wrong; {args.out / 'walk.json'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
