"""Runs: the runs folder's runs and the shipped models; export one as a .zip, rename or delete your own
(or a whole sweep), import a run."""
import streamlit as st

from explorer import forms, loaders, manage, ui
from ponder import manage as runs
from ponder.runs import runs_root, unreadable_runs

ui.app_guard("runs")
st.title("Runs")
st.caption(f"Your runs (in {runs_root().resolve()}, the folder PONDER_RUNS names) and the shipped models (assets/: "
           "read-only, they can be exported but not renamed or deleted). An imported run shows no accuracy "
           "until a page measures it: the test numbers in an uploaded card are not trusted.")
manage.flash_ui()
entries = loaders.models()
bad = manage.unreadable_ui(unreadable_runs())
if bad:
    with ui.user_errors(stop=False):
        runs.delete_run(bad[0], identity=bad[1])
        manage.changed(f"Deleted runs/{bad[0]}.")
manage.runs_table_ui(entries)
entry = manage.pick_run_ui(entries)

c1, c2, c3 = st.columns(3)
with c1, ui.user_errors(stop=False):
    manage.export_ui(entry, runs.export_run(entry.path))
if entry.source == "shipped":
    c2.caption("A shipped model: export it, or train or import a copy to rename.")
elif entry.sweep:
    n = sum(e.sweep == entry.sweep for e in entries)
    c2.caption(f"A trial of the sweep runs/{ui.one_line(entry.sweep)}: export it, or delete the whole sweep.")
    with c3:
        what = f"the sweep runs/{entry.sweep} and its {n} trial{'s' * (n != 1)} for good?"
        if manage.delete_ui(entry, "Delete the sweep…", what):
            with ui.user_errors(stop=False):
                k = runs.delete_sweep(entry.sweep)
                manage.changed(f"Deleted the sweep runs/{entry.sweep} and its {k} trial{'s' * (k != 1)}.")
else:
    with c2:
        renamed = manage.rename_ui(entry)
        if renamed is not None:
            new, shown = renamed
            with ui.user_errors(stop=False):
                dest = runs.rename_run(entry.path.name, new, identity=shown)
                note = "" if dest.name == new else f" (you typed {new!r}; a name keeps letters, digits, '.', '_', '-')"
                manage.changed(f"Renamed {entry.name} to runs/{dest.name}{note}.", pick=f"runs/{dest.name}")
    with c3:
        shown = manage.delete_ui(entry)
        if shown:
            with ui.user_errors(stop=False):
                runs.delete_run(entry.path.name, identity=shown)
                manage.changed(f"Deleted {entry.name}.")

imported = forms.import_run_ui(st.container())
if imported:
    manage.changed(f"Imported as {imported}.", pick=imported)
