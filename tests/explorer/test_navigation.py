"""explorer/navigation.py: the page registry that streamlit_app.py, explorer.links and ui.app_guard read."""
import pytest

from explorer import links, navigation
from helpers import ROOT


def test_every_page_script_is_registered_once_and_every_entry_has_its_script():
    scripts = sorted(p.script for p in navigation.PAGES)
    assert scripts == sorted(f"pages/{f.name}" for f in (ROOT / "pages").glob("*.py"))
    assert len({p.name for p in navigation.PAGES}) == len({p.title for p in navigation.PAGES}) == len(scripts)
    assert navigation.DEFAULT.name == "digit" and navigation.BY_NAME["train"].title == "Train"


def test_the_links_read_the_registry():
    assert links.PAGES == ("digit", "train", "sweep", "rotation", "compare", "parity", "runs")
    assert links.USES["compare"] == {"models"} and links.USES["runs"] == set()
    assert set(links.MODEL_TASK) <= set(links.PAGES)                 # a task's pages are pages
    assert all(p.uses <= set(links.NAMES) for p in navigation.PAGES)


def test_page_of_finds_a_page_from_its_file():
    assert navigation.page_of(ROOT / "pages" / "train.py").name == "train"     # a page's __file__ (absolute)
    assert navigation.page_of("pages/runs.py").title == "Runs"
    with pytest.raises(KeyError):
        navigation.page_of(ROOT / "explorer" / "train.py")                      # same name, not a page
