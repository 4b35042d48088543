"""explorer/app/worth.py: the "is the extra thought worth it?" section of the Compare page under AppTest (its numbers:
tests/ponder/test_baselines.py; the pages' use of it: tests/app/test_worth_it_panel.py)."""

import pytest

from helpers import APP_TIMEOUT, one_line_errors, save_tiny_run, shown
from ponder.store.card import WEIGHTS


def _compare_app():
    from explorer.app import loaders, worth
    entries = [e for e in loaders.models() if e.source == "run"]
    worth.compare_ui(sorted(entries, key=lambda e: e.name))


def test_compare_shows_the_models_it_can_load_and_one_red_line_for_one_it_cannot(tmp_path, monkeypatch):
    """One selected run's weights corrupt (its card still has its numbers): the section raised CheckpointError."""
    from streamlit.testing.v1 import AppTest
    root = tmp_path / "runs"
    monkeypatch.setenv("PONDER_RUNS", str(root))
    save_tiny_run(root / "a-good")
    broken, _ = save_tiny_run(root / "b-broken")
    (broken / WEIGHTS).write_bytes(b"\x00" * 64)
    from explorer.app.worth import open_key
    at = AppTest.from_function(_compare_app, default_timeout=APP_TIMEOUT)
    at.session_state[open_key("compare")] = True                 # the section, measured when opened
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    errs = one_line_errors(at)
    assert len(errs) == 1 and errs[0].startswith("runs/b-broken: ") and WEIGHTS in errs[0], errs
    assert len(at.get("plotly_chart")) == 1 and "runs/a-good" in shown(at.markdown[0].value)


def _worth_app():
    from explorer.app import loaders, worth
    worth.section_ui(next(e for e in loaders.models() if e.name == "runs/measured"), "t")


def test_a_model_measured_before_is_shown_without_loading_mnist(tmp_path, monkeypatch, mnist):
    # loading MNIST only to check it is there took 8 s of a fresh server's first drawing, a stretch in which a
    # click on Clear waited: a measurement kept on disk is shown without it, and with no MNIST at all
    import streamlit as st
    from streamlit.testing.v1 import AppTest
    from explorer.app import loaders
    monkeypatch.setenv("PONDER_RUNS", str(tmp_path / "runs"))
    save_tiny_run(tmp_path / "runs" / "measured", "mnist")
    from explorer.app.worth import open_key

    def opened():                                                                      # the section, opened
        at = AppTest.from_function(_worth_app, default_timeout=APP_TIMEOUT)
        at.session_state[open_key("t")] = True
        return at.run()
    first = opened()                                                                   # measured, kept on disk
    assert not first.exception and len(first.get("plotly_chart")) == 2
    st.cache_data.clear()
    st.cache_resource.clear()                                                          # a fresh server ...
    monkeypatch.setattr(loaders, "mnist", lambda: pytest.fail("MNIST loaded"))          # ... that would load MNIST
    again = opened()
    assert not again.exception, [e.value for e in again.exception]
    assert [c.proto.spec for c in again.get("plotly_chart")] == [c.proto.spec for c in first.get("plotly_chart")]
