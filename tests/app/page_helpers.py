"""What the page tests (tests/app/test_*_page.py) share: tiny training configs, the idle job registry, the step
slider, the rotation study's form and the "is the extra thought worth it?" charts."""
import time

from helpers import charts, run_ok
from job_helpers import TINY


DIVERGING = dict(TINY, beta=1e38)            # the KL weight overflows the gradient at the first step


def idle_registry():
    """The app's job registry with no job running (the machine's limit is free)."""
    from explorer.app.loaders import job_registry
    reg = job_registry()
    reg.shutdown(timeout=60)
    assert reg.busy_message("nobody") == ""
    return reg


LONG = dict(TINY, epochs=1000, log_every=1)  # 20,000 tiny steps: runs until cancelled


def _progress(job):
    while not job.snapshot().runs[0].progress:
        time.sleep(0.02)


def _rotation_study(at, angles: str, ranges: str, limit: int):
    """Fill the Rotation page's form and press Evaluate."""
    at.text_input(key="rot_angles").input(angles)
    at.text_input(key="rot_ranges").input(ranges)
    at.number_input(key="rot_limit").set_value(limit)
    at.button(key="rot_go").click()
    return run_ok(at)


def _worth(at):
    return [f for f in charts(at) if "equal compute" in f["layout"].get("title", {}).get("text", "")]


def _step_slider(at):
    return next(s for s in at.slider if s.label == "Step through the steps")
