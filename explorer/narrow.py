"""The explorer on a narrow screen (a phone, or a narrow window): the sidebar covers the page there, so
choosing a page in it closes it. Streamlit does that itself only for a browser that calls itself mobile;
this does it by the screen's width. So does a sidebar button whose result shows on the page (Start training:
its progress, charts and Cancel are under the sidebar otherwise)."""

NARROW_PX = 768            # below this Streamlit draws the sidebar over the page rather than beside it
SHOWN_ON_PAGE = ("tf_start",)   # keys of sidebar buttons whose result the page shows (explorer.app.train_form)
CLOSES = ", ".join(["[data-testid=stSidebar] [data-testid=stPageLink-NavLink]",
                    *(f"[data-testid=stSidebar] .st-key-{k} button" for k in SHOWN_ON_PAGE)])

# One listener for the tab (st.html runs the script on every rerun; the flag keeps it to one): a click on a
# page link, or a button of SHOWN_ON_PAGE, in the sidebar closes the sidebar when the window is narrow.
CLOSE_SIDEBAR_ON_NAV = f"""<script>
if (!window.ponderCloseOnNav) {{
  window.ponderCloseOnNav = true;
  document.addEventListener("click", (e) => {{
    if (!e.target.closest("{CLOSES}") || window.innerWidth >= {NARROW_PX}) return;
    setTimeout(() => document.querySelector("[data-testid=stSidebarCollapseButton] button")?.click(), 0);
  }}, true);
}}
</script>"""
