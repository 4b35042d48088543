"""The page registry: each page of the explorer once, with its script, title, icon and the link parameters it
reads. streamlit_app.py builds the navigation and the sidebar's links from it, explorer.links checks a shared
link against it and ui.app_guard finds the page it guards in it: a new page is a script in pages/ and one
entry here. Pure: no Streamlit.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Page:
    script: str                      # the page script, from the repository root
    title: str                       # in the sidebar and the tab
    icon: str                        # a Material icon (drawn from Streamlit's own font: nothing is fetched)
    uses: frozenset = frozenset()    # the link parameters it reads (?model=, ?models=, ?lp=, ?mode=, ...: explorer.links)

    @property
    def name(self) -> str:
        """Its url path and its name in ?page= links: the script's name ('pages/train.py' -> 'train')."""
        return Path(self.script).stem


PAGES = (                            # in the sidebar's order; the first one is the default page (url path /)
    Page("pages/digit.py", "Ponder a digit", ":material/draw:", frozenset({"model", "mode", "digit", "test", "angle", "seed", "q"})),
    Page("pages/train.py", "Train", ":material/model_training:", frozenset({"lp"})),
    Page("pages/sweep.py", "λp sweep", ":material/ssid_chart:", frozenset({"lp"})),
    Page("pages/rotation.py", "Rotation study", ":material/rotate_right:", frozenset({"model"})),
    Page("pages/compare.py", "Compare runs", ":material/compare_arrows:", frozenset({"models"})),
    Page("pages/parity.py", "Parity", ":material/calculate:", frozenset({"model", "mode"})),
    Page("pages/runs.py", "Runs", ":material/folder_open:"),
)
BY_NAME = {p.name: p for p in PAGES}
DEFAULT = PAGES[0]


def page_of(script: str | Path) -> Page:
    """The page whose script this is (a page's `__file__`); KeyError for a script that is not in PAGES."""
    path = Path(script)
    for p in PAGES:
        if path.name == Path(p.script).name and path.parent.name == Path(p.script).parent.name:
            return p
    raise KeyError(f"{script} is not in explorer.navigation.PAGES")
