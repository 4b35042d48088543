"""Runs: the runs folder's runs and the shipped models; export one as a .zip, rename or delete your own
(or a whole sweep), import a run."""
import streamlit as st

from explorer import tables
from explorer.app import forms, loaders, runs_page, ui
from ponder.store import manage
from ponder.store.runs import runs_root, unreadable_runs

ui.app_guard(__file__)
st.title("Runs")
st.caption(f"Your runs (in {runs_root().resolve()}, the folder PONDER_RUNS names) and the shipped models (assets/: "
           "read-only, they can be exported but not renamed or deleted). An imported run shows no accuracy "
           "until a page measures it: the test numbers in an uploaded card are not trusted.")
runs_page.flash_ui()
entries = loaders.models()
bad = runs_page.unreadable_ui(unreadable_runs())
if bad:
    with ui.user_errors(stop=False):
        runs_page.changed(runs_page.delete_unreadable(*bad))
runs_page.runs_table_ui(entries)
entry = runs_page.pick_run_ui(entries)
if step := tables.step_text(entry.record):
    st.caption(f"**A step** of {tables.plain(entry.name)}: {step}.")

c1, c2, c3 = st.columns(3)
with c1, ui.user_errors(stop=False):
    runs_page.export_ui(entry, manage.export_run(entry.path))
if entry.source == "shipped":
    c2.caption("A shipped model: export it, or train or import a copy to rename.")
elif entry.sweep:
    n = sum(e.sweep == entry.sweep for e in entries)
    c2.caption(f"A trial of the sweep runs/{tables.plain(entry.sweep)}: export it, or delete the whole sweep.")
    with c3:
        what = f"the sweep runs/{entry.sweep} and its {n} trial{'s' * (n != 1)} for good?"
        if runs_page.delete_ui(entry, "Delete the sweep…", what):
            with ui.user_errors(stop=False):
                k = manage.delete_sweep(entry.sweep)
                runs_page.changed(f"Deleted the sweep runs/{entry.sweep} and its {k} trial{'s' * (k != 1)}.")
else:
    with c2:
        renamed = runs_page.rename_ui(entry)
        if renamed is not None:
            new, shown = renamed
            with ui.user_errors(stop=False):
                dest = manage.rename_run(entry.path.name, new, identity=shown)
                note = "" if dest.name == new else f" (you typed {new!r}; a name keeps letters, digits, '.', '_', '-')"
                runs_page.changed(f"Renamed {entry.name} to runs/{dest.name}{note}.", pick=f"runs/{dest.name}")
    with c3:
        shown = runs_page.delete_ui(entry)
        if shown:
            with ui.user_errors(stop=False):
                manage.delete_run(entry.path.name, identity=shown)
                runs_page.changed(f"Deleted {entry.name}.")

imported = forms.import_run_ui(st.container())
if imported:
    runs_page.changed(f"Imported as {imported}.", pick=imported)
