"""Where a page's time goes in headless Chromium: one warm visit of each page traced (Chromium's performance
timeline) with the arrival of Streamlit's websocket messages and the draw of each Plotly chart.

    PONDER_DATA=/work/shared/data python -m bench.pages_profile [--pages sweep,rotation] [--repo DIR] [--out DIR]
        [--fresh]

Each page is visited once to fill the server's caches and the browser's HTTP cache, then once more in a new tab
(warm; --fresh: a new browser context, nothing cached) with the timeline traced. Reported per page, in ms from the
navigation: the script run (stApp's data-test-script-state running -> notRunning), the websocket messages (count,
bytes, first and last), when the PlotlyChart chunk was requested, each chart's element shown and drawn (its
`.main-svg`), and the page's main thread busy time by kind (script compile / evaluate, function calls, style and
layout, paint) with its longest tasks. JSON to --out (default bench/pages-out/profile.json). Uses /usr/bin/chromium through bench.walk's helpers.
"""
from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

from .pages_timing import OBSERVE, PAGES, VIEWPORT, until_complete
from .walk import ARGS, CHROMIUM, ROOT, server_process

# Installed before any script: the websocket messages (time, bytes) and each chart's element shown and drawn.
RECORD = """(() => {
  const r = window.__prof = {ws: [], charts: [], states: []};
  const WS = window.WebSocket;
  window.WebSocket = function (...a) {
    const w = new WS(...a);
    w.addEventListener('message', e => r.ws.push([performance.now(), e.data.byteLength ?? e.data.size ?? e.data.length]));
    return w;
  };
  Object.assign(window.WebSocket, WS); window.WebSocket.prototype = WS.prototype;
  const seen = new Map();
  new MutationObserver(() => {
    const t = performance.now();
    document.querySelectorAll('[data-testid=stPlotlyChart]').forEach(c => {
      if (!seen.has(c)) { seen.set(c, {shown: t, drawn: null}); r.charts.push(seen.get(c)); }
      const s = seen.get(c);
      if (s.drawn === null && c.querySelector('.main-svg')) s.drawn = t;
    });
    const st = document.querySelector('[data-testid=stApp]')?.getAttribute('data-test-script-state');
    if (st && (!r.states.length || r.states[r.states.length - 1][1] !== st)) r.states.push([t, st]);
  }).observe(document, {childList: true, subtree: true, attributes: true});
})()"""

KINDS = {"EvaluateScript": "script evaluate", "v8.evaluateModule": "script evaluate", "v8.compile": "script compile",
         "v8.compileModule": "script compile", "v8.produceModuleCache": "script compile", "CompileScript":
         "script compile", "FunctionCall": "function calls", "TimerFire": "function calls", "EventDispatch":
         "function calls", "FireAnimationFrame": "function calls", "RunMicrotasks": "function calls",
         "UpdateLayoutTree": "style and layout", "Layout": "style and layout", "RecalculateStyles": "style and layout",
         "Paint": "paint", "PrePaint": "paint", "Layerize": "paint", "UpdateLayer": "paint", "ParseHTML": "parse html",
         "MajorGC": "gc", "MinorGC": "gc", "V8.GC_SCAVENGER": "gc", "BlinkGC.AtomicPhase": "gc"}


def main_thread_busy(events: list) -> dict:
    """Top-level events of the page's renderer main thread (CrRendererMain of the process that navigated to a
    ?page= URL) after that navigation: ms by kind, and the longest tasks (start and length in ms from the
    navigation, what they were)."""
    navs = [e for e in events if e.get("name") == "navigationStart"
            and "?page=" in (e.get("args", {}).get("data", {}) or {}).get("documentLoaderURL", "")]
    if not navs:
        return {}
    nav, pid = navs[0]["ts"], navs[0]["pid"]
    tids = {e["tid"] for e in events if e.get("name") == "thread_name" and e.get("pid") == pid
            and e.get("args", {}).get("name") == "CrRendererMain"}
    spans = sorted((e for e in events if e.get("pid") == pid and e.get("tid") in tids and e.get("ph") == "X"
                    and e.get("ts", 0) >= nav and e.get("name") in KINDS), key=lambda e: e["ts"])
    by_kind, longest, end = defaultdict(float), [], 0.0
    for e in spans:                                     # nested events counted once: under their outermost one
        if e["ts"] < end:
            continue
        end = e["ts"] + e.get("dur", 0)
        by_kind[KINDS[e["name"]]] += e.get("dur", 0) / 1000
        data = e.get("args", {}).get("data", {}) or {}
        longest.append([round((e["ts"] - nav) / 1000), round(e.get("dur", 0) / 1000), e["name"],
                        str(data.get("url") or "").rsplit("/", 1)[-1]])
    return {"by_kind_ms": {k: round(v) for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])},
            "longest_ms": sorted(longest, key=lambda x: -x[1])[:8]}


def profile_visit(browser, url: str, name: str, ctx, trace_path: Path) -> dict:
    page = ctx.new_page()
    try:
        browser.start_tracing(page=page, path=str(trace_path), categories=[
            "devtools.timeline", "v8.execute", "v8", "disabled-by-default-devtools.timeline", "blink.user_timing"])
        t0 = time.time()
        page.goto(f"{url}/?page={name}")
        done = until_complete(page, PAGES[name])
        prof = page.evaluate("window.__prof")
        plotly = page.evaluate("performance.getEntriesByType('resource').filter(e => e.name.includes('/PlotlyChart.'))"
                               ".map(e => Math.round(e.startTime))")
        browser.stop_tracing()
        events = json.loads(trace_path.read_text())["traceEvents"]
        runs, begin = [], None
        for t, state in prof["states"]:
            if state == "running" and begin is None:
                begin = t
            elif state == "notRunning" and begin is not None:
                runs.append([round(begin), round(t)])
                begin = None
        ws = prof["ws"]
        return {"first_chart_s": done["first"], "complete_s": done["complete"], "wall_s": round(time.time() - t0, 2),
                "script_runs_ms": runs, "plotly_import_ms": plotly,
                "ws": {"messages": len(ws), "kib": round(sum(b or 0 for _, b in ws) / 1024),
                       "first_ms": round(ws[0][0]) if ws else None, "last_ms": round(ws[-1][0]) if ws else None,
                       "largest_kib": sorted((round((b or 0) / 1024) for _, b in ws), reverse=True)[:5]},
                "charts_ms": [[round(c["shown"]), None if c["drawn"] is None else round(c["drawn"])]
                              for c in prof["charts"]],
                "main_thread": main_thread_busy(events)}
    finally:
        page.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.pages_profile", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "pages-out")
    ap.add_argument("--repo", type=Path, default=ROOT)
    ap.add_argument("--pages", default=",".join(PAGES))
    ap.add_argument("--fresh", action="store_true", help="trace a visit from a new browser context (nothing cached)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    from playwright.sync_api import sync_playwright

    res = {}
    with sync_playwright() as p, server_process(args.repo.resolve(), args.out) as (_, url, _boot):
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        ctx = browser.new_context(viewport=VIEWPORT)
        for script in (OBSERVE, RECORD):
            ctx.add_init_script(script)
        for name in args.pages.split(","):
            first = ctx.new_page()                     # the server's caches and the HTTP cache filled
            first.goto(f"{url}/?page={name}")
            until_complete(first, PAGES[name])
            first.close()
            use = ctx
            if args.fresh:
                use = browser.new_context(viewport=VIEWPORT)
                for script in (OBSERVE, RECORD):
                    use.add_init_script(script)
            res[name] = profile_visit(browser, url, name, use, args.out / f"trace-{name}.json")
            if args.fresh:
                use.close()
            print(name, json.dumps(res[name]), flush=True)
        browser.close()
    (args.out / "profile.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
