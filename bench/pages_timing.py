"""How long each page of the explorer takes to show its first chart and to be complete in headless Chromium, and
the server's memory over many drawing sessions and around a training job.

    PONDER_DATA=/work/shared/data python -m bench.pages_timing [--out DIR] [--repeats 3] [--pages sweep,rotation]
        [--no-fresh] [--no-warm] [--sessions 50] [--job-seconds 20] [--repo before=/tmp/old --repo after=.]

--repo LABEL=DIR (repeated) serves each checkout in turn, their visits interleaved page by page (the machine's load
falls on both alike); default: this checkout.

Times (seconds from page.goto, read in the browser: performance.now() starts at the navigation):
  first chart   the first Plotly chart drawn (a `.main-svg` inside a [data-testid=stPlotlyChart]);
  complete      the last change of the page (an element added or removed, a chart drawn, the script run's end
                (stApp's data-test-script-state), a spinner or a placeholder of an element still loading gone)
                before it stayed the same with every chart drawn for 1 s.
  fresh         the first visit after a server start (a new `streamlit run` for each page and repeat) from a new
                browser context (nothing in its HTTP cache); the studies kept on disk by the warm visits before;
  warm          a visit in a new tab (a new session) of a browser that has opened the page before, the server's
                caches filled by that first visit.
The digit page's default input is a drawing canvas with nothing on it (no chart): its row times drawing a 7 too,
from the mouse-up to the answer and to the page complete.
Memory (the streamlit process's resident set, /proc/PID/status VmRSS):
  sessions      --sessions browser contexts one after the other, each opening the digit page, drawing a digit
                (0-9 in turn) and waiting for the answer and the end of the script run, then closing;
  jobs          --jobs short runs one after the other from the Train page's sidebar (--job-seconds budget each):
                the RSS before, the peak while it trains, and after it is saved (15 s later, the Train page
                closed); the first loads MNIST into the process, the second shows what each job leaves behind.
Median of --repeats for each time. JSON and a markdown table go to --out (default bench/pages-out/, ignored by
git); runs go to a temporary folder (PONDER_RUNS). Uses /usr/bin/chromium (never `playwright install`) through
bench.walk's helpers.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from .walk import ARGS, CHROMIUM, DIGITS, ROOT, answer, server_process, stroke, top, wait

PAGES = {   # name -> heading
    "digit": "Ponder a digit", "train": "Train a PonderNet", "sweep": "λp sweep", "rotation": "Rotation study",
    "compare": "Compare runs", "parity": "Parity", "runs": "Runs"}
VIEWPORT = {"width": 1280, "height": 800}
# Installed before any script of the page: records, in ms from the navigation, the first chart drawn and the last
# change of what the page shows (element containers, charts drawn, the running indicator).
OBSERVE = """(() => {
  const s = window.__pt = {first: null, last: 0, charts: 0, drawn: 0, elements: 0, running: false, sig: ''};
  const check = () => {
    const charts = document.querySelectorAll('[data-testid=stPlotlyChart]');
    const drawn = [...charts].filter(c => c.querySelector('.main-svg')).length;
    const app = document.querySelector('[data-testid=stApp]');
    const running = !app || app.getAttribute('data-test-script-state') !== 'notRunning'
                    || !!document.querySelector('[data-testid=stSpinner], [data-testid=stSkeleton]');
    const elements = document.querySelectorAll('[data-testid=stElementContainer]').length;
    const t = performance.now();
    if (drawn && s.first === null) s.first = t;
    const sig = [charts.length, drawn, running, elements].join();
    if (sig !== s.sig) { s.last = t; s.sig = sig; }
    Object.assign(s, {charts: charts.length, drawn, running, elements});
  };
  new MutationObserver(check).observe(document, {childList: true, subtree: true, attributes: true,
                                                 attributeFilter: ['class', 'data-test-script-state']});
})()"""

# resolves with performance.now() when the digit page shows its answer (polled every 20 ms in the page)
ANSWERED = """() => new Promise(done => { const look = () => [...document.querySelectorAll('[data-testid=stMarkdown]')]
    .some(e => /Answer \\S+ \\(\\d+%\\)/.test(e.innerText)) ? done(performance.now()) : setTimeout(look, 20); look(); })"""


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def until_complete(page, heading: str, since: float = 0.0, timeout: float = 240.0) -> dict:
    """Wait for the heading, then until the page has not changed for 1 s with every chart drawn and nothing
    running; {first, complete} in s from the navigation (first: None without a chart), or after `since` (ms)."""
    page.get_by_role("heading", name=heading).first.wait_for(timeout=timeout * 1000)
    calm = [None, None]

    def quiet():
        s = page.evaluate("window.__pt")
        settled = not s["running"] and s["drawn"] == s["charts"]
        if not settled or s["last"] != calm[1]:
            calm[:] = [time.time(), s["last"]]
            return None
        return s if time.time() - calm[0] > 1.0 else None
    s = wait(quiet, timeout, f"the {heading} page complete", every=0.1)
    first = None if s["first"] is None or s["first"] < since else round((s["first"] - since) / 1000, 2)
    return {"first": first, "complete": round((s["last"] - since) / 1000, 2), "charts": s["charts"]}


def visit(browser, url: str, name: str, ctx=None) -> dict:
    """One visit of a page in a new tab (a new Streamlit session): of ctx (a browser context whose HTTP cache holds
    what earlier visits loaded), or of a new context (nothing cached)."""
    own = ctx is None
    if own:
        ctx = browser.new_context(viewport=VIEWPORT)
        ctx.add_init_script(OBSERVE)
    page = ctx.new_page()
    try:
        page.goto(f"{url}/?page={name}")
        got = until_complete(page, PAGES[name])
        if name == "digit":
            got.update(draw(page, 7))
        return got
    finally:
        page.close()
        if own:
            ctx.close()


def draw(page, d: int) -> dict:
    """Draw digit d on the canvas: s from the mouse-up to the answer and to the page complete."""
    canvas = page.locator("canvas.upper-canvas").first
    top(page, canvas)
    stroke(page, canvas.bounding_box(), DIGITS[d])
    t0 = page.evaluate("performance.now()")
    t1 = page.evaluate(ANSWERED)
    if not answer(page):
        raise RuntimeError("no answer after drawing")
    done = until_complete(page, PAGES["digit"], since=t0)
    return {"draw_answer": round((t1 - t0) / 1000, 2), "draw_complete": done["complete"],
            "draw_charts": done["charts"]}


def timings(p, pages, repos: dict, repeats: int, fresh: bool, warm: bool, out: Path, envs: dict, got: dict,
            fresh_pages=None, saved=lambda: None) -> dict:
    """got = {repo label: {page: {"warm": [visit], "fresh": [visit]}}}, filled visit by visit (saved() after each);
    the repos' visits interleaved page by page, so a change of the machine's load falls on each alike."""
    browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
    got.update({label: {name: {"fresh": [], "warm": []} for name in pages} for label in repos})
    try:
        if warm:
            with ExitStack() as stack:
                urls, ctxs = {}, {}
                for label, repo in repos.items():
                    _, urls[label], _ = stack.enter_context(server_process(repo, out, envs[label]))
                    ctxs[label] = browser.new_context(viewport=VIEWPORT)   # one browser: its HTTP cache warm
                    ctxs[label].add_init_script(OBSERVE)
                    for name in pages:
                        visit(browser, urls[label], name, ctxs[label])    # the page's first visit: caches filled
                for r in range(repeats):
                    for name in pages:
                        for label in repos:
                            got[label][name]["warm"].append(visit(browser, urls[label], name, ctxs[label]))
                            saved()
                            print(f"warm  {label:8s} {name:9s} {got[label][name]['warm'][-1]}", flush=True)
        if fresh:
            for r in range(repeats):
                for name in fresh_pages or pages:
                    for label, repo in repos.items():
                        with server_process(repo, out, envs[label]) as (_, url, _boot):
                            got[label][name]["fresh"].append(visit(browser, url, name))
                        saved()
                        print(f"fresh {label:8s} {name:9s} {got[label][name]['fresh'][-1]}", flush=True)
    finally:
        browser.close()
    return got


def memory(p, repo: Path, sessions: int, job_seconds: int, out: Path, env: dict, jobs: int = 2) -> dict:
    browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
    res = {}
    try:
        with server_process(repo, out, env) as (proc, url, _boot):
            rss = [round(rss_mib(proc.pid), 1)]
            for i in range(sessions):
                ctx = browser.new_context(viewport=VIEWPORT)
                ctx.add_init_script(OBSERVE)
                page = ctx.new_page()
                page.goto(f"{url}/?page=digit")
                page.locator("canvas.upper-canvas").first.wait_for(timeout=240000)
                canvas = page.locator("canvas.upper-canvas").first
                top(page, canvas)
                stroke(page, canvas.bounding_box(), DIGITS[i % 10])
                page.evaluate(ANSWERED)
                run_ended(page)                         # the server's part done; the browser may still be drawing
                ctx.close()
                time.sleep(0.5)
                rss.append(round(rss_mib(proc.pid), 1))
                print(f"session {i + 1:3d}: {rss[-1]:.0f} MiB", flush=True)
            if sessions:
                res["sessions"] = {"rss_mib": rss, "per_session_mib": per_session(rss)}
            if job_seconds:                      # the first job loads MNIST and fills caches; the second, steady
                res["jobs"] = [job(browser, url, proc.pid, job_seconds) for _ in range(jobs)]
    finally:
        browser.close()
    return res


def run_ended(page, timeout: float = 240.0) -> None:
    """Wait until the page's script run has ended (stApp's data-test-script-state) and stayed so for 0.5 s."""
    calm = [None]

    def ended():
        if page.evaluate("document.querySelector('[data-testid=stApp]')?.getAttribute('data-test-script-state')") \
                != "notRunning":
            calm[0] = None
            return False
        calm[0] = calm[0] or time.time()
        return time.time() - calm[0] > 0.5
    wait(ended, timeout, "the script run to end", every=0.1)


def per_session(rss) -> float:
    """The least-squares slope of the RSS over the sessions after the first 10 (the caches filled), MiB per session."""
    ys = rss[11:]
    if len(ys) < 2:
        return None
    xs = range(len(ys))
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return round(sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs), 2)


def job(browser, url: str, pid: int, seconds: int) -> dict:
    """A run from the Train page's sidebar with a time budget: RSS before, peak while it trains, after it is saved."""
    ctx = browser.new_context(viewport=VIEWPORT)
    ctx.add_init_script(OBSERVE)
    page = ctx.new_page()
    page.goto(f"{url}/?page=train")
    until_complete(page, PAGES["train"])
    before = rss_mib(pid)
    sb = page.locator("[data-testid=stSidebar]")
    name = sb.locator("[data-testid=stTextInput] input").first
    name.fill(f"pages-timing-{int(time.time())}")
    name.press("Tab")
    field = sb.get_by_label("Time budget (s, 0 = none)", exact=True)
    field.fill(str(seconds))
    field.press("Tab")
    page.wait_for_timeout(1500)
    sb.get_by_role("button", name="Start training").click()
    done = page.get_by_role("link", name=re.compile("Try .* on the Digit page"))
    peak, t0 = before, time.time()
    while not done.count() and time.time() < t0 + seconds + 300:
        peak = max(peak, rss_mib(pid))
        page.wait_for_timeout(250)
    saved = time.time() - t0
    ctx.close()
    for _ in range(60):                                  # 15 s more: what the job leaves behind
        peak = max(peak, rss_mib(pid))
        time.sleep(0.25)
    after = rss_mib(pid)
    return {"before_mib": round(before, 1), "peak_mib": round(peak, 1), "after_mib": round(after, 1),
            "left_mib": round(after - before, 1), "saved_after_s": round(saved, 1), "budget_s": seconds}


def median(xs):
    """The median of the measured values, '–' where none was measured (no chart, or not visited)."""
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 2) if xs else "–"


def table(repos: dict) -> list:
    lines = ["| page | tree | charts | warm: first chart (s) | warm: complete (s) | fresh: first chart (s) | "
             "fresh: complete (s) | draw a 7: answer / complete (s) |", "|---|---|---|---|---|---|---|---|"]
    first = next(iter(repos.values()))
    for name in first:
        for label, got in repos.items():
            w, f = got[name]["warm"], got[name]["fresh"]
            charts = max([v["charts"] for v in w + f], default=0)
            draw_ = (f"{median([v.get('draw_answer') for v in w])} / {median([v.get('draw_complete') for v in w])}"
                     if name == "digit" and w else "")
            lines.append(f"| {name} | {label} | {charts} | {median([v['first'] for v in w])} | "
                         f"{median([v['complete'] for v in w])} | {median([v['first'] for v in f])} | "
                         f"{median([v['complete'] for v in f])} | {draw_} |")
    return lines


def memory_lines(label: str, mem: dict) -> list:
    lines = []
    if "sessions" in mem:
        r = mem["sessions"]["rss_mib"]
        lines.append(f"{label}: server RSS over {len(r) - 1} drawing sessions: {r[0]:.0f} MiB at the start, "
                     f"{r[min(10, len(r) - 1)]:.0f} after 10, {r[-1]:.0f} after {len(r) - 1}; "
                     f"{mem['sessions']['per_session_mib']} MiB per session after the 10th (least squares).")
    for k, j in enumerate(mem.get("jobs", []), 1):
        lines.append(f"{label}: training job {k}, {j['budget_s']} s: RSS {j['before_mib']:.0f} MiB before, "
                     f"{j['peak_mib']:.0f} peak, {j['after_mib']:.0f} after ({j['left_mib']:+.0f} MiB left behind).")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.pages_timing", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "pages-out")
    ap.add_argument("--repo", action="append", metavar="LABEL=DIR",
                    help="a checkout to serve (repeat it to compare trees, their visits interleaved); default this one")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pages", default=",".join(PAGES), help="comma-separated, of " + ", ".join(PAGES))
    ap.add_argument("--no-fresh", action="store_true", help="skip the first visits after a server start")
    ap.add_argument("--fresh-pages", help="the pages to visit on a fresh server (default: --pages)")
    ap.add_argument("--no-warm", action="store_true", help="skip the warm visits")
    ap.add_argument("--sessions", type=int, default=0, help="drawing sessions for the memory run (0: none)")
    ap.add_argument("--job-seconds", type=int, default=0, help="a training job's budget for the memory run (0: none)")
    ap.add_argument("--jobs", type=int, default=2, help="training jobs one after the other in the memory run")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    pages = [p for p in args.pages.split(",") if p]
    unknown = set(pages) - set(PAGES)
    if unknown:
        ap.error(f"no such page: {', '.join(sorted(unknown))}")
    repos = dict((r.split("=", 1)[0], Path(r.split("=", 1)[1]).resolve()) for r in args.repo or [f"this={ROOT}"])
    from playwright.sync_api import sync_playwright

    load0 = os.getloadavg()
    res = {"started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "load_before": load0,
           "repos": {k: str(v) for k, v in repos.items()}, "repeats": args.repeats, "cpu": cpu_name(),
           "command": " ".join(["python -m bench.pages_timing", *(argv if argv is not None else sys.argv[1:])])}
    with tempfile.TemporaryDirectory() as runs, sync_playwright() as p:
        envs = {label: {"PONDER_RUNS": str(Path(runs) / label)} for label in repos}
        save = lambda: (args.out / "pages_timing.json").write_text(json.dumps(res, indent=1))     # noqa: E731
        if not (args.no_fresh and args.no_warm):
            res["pages"] = {}
            timings(p, pages, repos, args.repeats, not args.no_fresh, not args.no_warm, args.out, envs, res["pages"],
                    [x for x in (args.fresh_pages or args.pages).split(",") if x], save)
        if args.sessions or args.job_seconds:
            res["memory"] = {label: memory(p, repo, args.sessions, args.job_seconds, args.out, envs[label], args.jobs)
                             for label, repo in repos.items()}
    res["load_after"] = os.getloadavg()
    (args.out / "pages_timing.json").write_text(json.dumps(res, indent=1))
    lines = render(res)
    (args.out / "pages_timing.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


def render(res: dict) -> list:
    """One run's results as markdown lines: what was run where, the table of times, the memory lines."""
    lines = [f"`{res.get('command', 'python -m bench.pages_timing')}`, started {res['started']} on "
             f"{res.get('cpu', '?')} ({os.cpu_count()} cores); load average (1, 5, 15 min) "
             f"{' '.join(f'{x:.1f}' for x in res['load_before'])} before, "
             f"{' '.join(f'{x:.1f}' for x in res['load_after'])} after; "
             + ", ".join(f"{k} = {v}" for k, v in res.get("repos", {}).items()) + ".", ""]
    if "pages" in res:
        lines += [f"Pages at 1280×800, median of {res.get('repeats', 3)} (seconds):", ""] + table(res["pages"]) + [""]
    for label, mem in res.get("memory", {}).items():
        lines += [f"- {x}" for x in memory_lines(label, mem)]
    if res.get("note"):
        lines += ["", res["note"]]
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
