"""bench.pages_profile: the main thread's busy time read from a Chromium trace."""
from bench.pages_profile import main_thread_busy


def _x(name, ts, dur, pid=1, tid=10, **data):
    return {"name": name, "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": {"data": data}}


def _trace():
    return [
        {"name": "thread_name", "ph": "M", "pid": 1, "tid": 10, "args": {"name": "CrRendererMain"}},
        {"name": "thread_name", "ph": "M", "pid": 2, "tid": 20, "args": {"name": "CrRendererMain"}},
        # another tab's navigation (an iframe, the omnibox) and the page's, 1,000 µs into the trace
        {"name": "navigationStart", "ph": "R", "ts": 500, "pid": 2, "tid": 20,
         "args": {"data": {"documentLoaderURL": "chrome://omnibox-popup.top-chrome/"}}},
        {"name": "navigationStart", "ph": "R", "ts": 1000, "pid": 1, "tid": 10,
         "args": {"data": {"documentLoaderURL": "http://127.0.0.1:1/?page=sweep"}}},
        _x("EvaluateScript", 900, 50_000),                          # before the navigation: not counted
        _x("v8.evaluateModule", 2000, 300_000, url="http://h/static/js/PlotlyChart.X.js"),
        _x("v8.compile", 2500, 100_000),                             # inside the evaluation: counted once
        _x("FunctionCall", 400_000, 50_000, url="http://h/static/js/react-dom.Y.js"),
        _x("Layout", 460_000, 20_000),
        _x("FunctionCall", 400_000, 999_000, pid=2, tid=20),          # another process
    ]


def test_busy_time_by_kind_from_the_page_navigation_outermost_events_once():
    got = main_thread_busy(_trace())
    # 300 ms evaluating (the 100 ms compile nested in it not added), 50 ms of calls, 20 ms of layout
    assert got["by_kind_ms"] == {"script evaluate": 300, "function calls": 50, "style and layout": 20}
    # start in ms from the page's navigation (ts 1,000 µs), length, event, script file
    assert got["longest_ms"][0] == [1, 300, "v8.evaluateModule", "PlotlyChart.X.js"]
    assert [x[2] for x in got["longest_ms"]] == ["v8.evaluateModule", "FunctionCall", "Layout"]


def test_no_page_navigation_in_the_trace():
    assert main_thread_busy(_trace()[:2]) == {}
