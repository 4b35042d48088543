"""The explorer: `streamlit run streamlit_app.py`. Page config and navigation only; pages/ holds the pages and
explorer/navigation.py lists them."""
from pathlib import Path

import streamlit as st

from explorer.app import job_views, loaders, ui
from explorer import heap, narrow, navigation

# the tab icon is a local file: a material icon or an emoji would be fetched from the internet
ICON = Path(__file__).resolve().parent / "explorer" / "icon.png"
st.set_page_config(page_title="PonderNet explorer", page_icon=str(ICON), layout="wide")

PAGES = [st.Page(p.script, title=p.title, icon=p.icon, default=p is navigation.DEFAULT) for p in navigation.PAGES]
# Streamlit's own menu stays hidden ([client] showSidebarNavigation = false in .streamlit/config.toml, and
# position="hidden"): on a first load after a server start it lists a pages/ folder's file names before this
# script has run. The sidebar's links are drawn here instead, with the registry's titles.
page = st.navigation(PAGES, position="hidden")
for p in PAGES:
    st.sidebar.page_link(p)
# A metric in a narrow column (three side by side at 1280 px) ended in "…": metric values shrink to 1.5rem when
# their row's columns average under 150 px (n columns, 1rem gaps), all of a row's metrics together (one size a row).
METRIC_ROW = ("[data-testid=stHorizontalBlock]:has(>[data-testid=stColumn]>[data-testid=stVerticalBlock]"
              ">[data-testid=stElementContainer]>[data-testid=stMetric])")
st.html(f"<style>{METRIC_ROW}{{container-type:inline-size}}" + "".join(
    f"@container (max-width: {150 * n + 16 * (n - 1)}px){{{METRIC_ROW}:has(>:nth-child({n})) [data-testid=stMetricValue],"
    f"{METRIC_ROW}:has(>:nth-child({n})) [data-testid=stMetricValue] *{{font-size:1.5rem}}}}" for n in range(2, 7))
    + "</style>" + narrow.CLOSE_SIDEBAR_ON_NAV, unsafe_allow_javascript=True)

# A shared link may name its page as ?page=rotation (as well as by its path): go there once.
wanted = st.query_params.get("page")
paths = {p.name: st_page for p, st_page in zip(navigation.PAGES, PAGES)}
current = page.url_path or navigation.DEFAULT.name
if wanted in paths and wanted != current and not st.session_state.get("_page_from_link"):
    st.session_state["_page_from_link"] = True
    st.switch_page(paths[wanted], query_params={k: st.query_params.get_all(k) for k in st.query_params})
st.session_state["_page_from_link"] = True
st.session_state["_via_app"] = True           # see explorer.app.ui.app_guard
ui.link_params_ui(current, wanted if wanted is not None and wanted not in paths else None, list(paths))
job_views.running_job_sidebar_ui(loaders.job_registry(), current)       # every page: a job is running
st.query_params["page"] = current

try:
    page.run()
finally:                    # a page's st.stop or st.rerun too
    ui.freeze_imports()     # once per process, after a first page run: see its docstring
    heap.release_freed()    # what the run freed leaves the resident set (glibc keeps it per arena)
