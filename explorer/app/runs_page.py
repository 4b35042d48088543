"""The Runs page's widgets: the table of runs, the run picker, export / rename / delete, and the message
of the last change (kept across the rerun that shows the new list). Each *_ui() returns plain values;
the changes themselves are ponder.store.manage's."""
from __future__ import annotations

from typing import Optional

import streamlit as st

from ponder.store.manage import delete_run, delete_sweep
from ponder.store.runs import run_identity
from ponder.store.record import RunRecord
from ponder.store.runs import ModelEntry, runs_root

from .. import tables

FLASH, PICK, NEXT_PICK = "_runs_flash", "runs_pick", "_runs_pick_next"      # session-state keys
CONFIRM, CLEAR = "_runs_confirm_delete", "_runs_clear"


def changed(message: str, pick: Optional[str] = None) -> None:
    """After a change: keep its message (and the run to select next) and rerun the page."""
    st.session_state[FLASH] = message
    if pick:
        st.session_state[NEXT_PICK] = pick
    for k in [k for k in list(st.session_state.keys()) if str(k).startswith(CONFIRM)]:
        st.session_state.pop(k, None)
    st.session_state[CLEAR] = True                  # the rename box starts empty again
    st.rerun()


def flash_ui() -> None:
    """The last change's message, once."""
    msg = st.session_state.pop(FLASH, None)
    if msg:
        st.success(tables.plain(msg), icon=":material/check_circle:")


def runs_table_ui(entries: list) -> None:
    num = st.column_config.NumberColumn
    st.dataframe(tables.run_rows(entries), hide_index=True, width="stretch", placeholder="—",   # a missing value
                 column_config={"accuracy": num(format="%.4f"), "mean steps": num(format="%.2f"),
                                "E[n]": num(format="%.2f", help="Mean expected halting step Σ n·p_n, test set")})


def pick_run_ui(entries: list) -> ModelEntry:
    """The run to export, rename or delete (a renamed or imported run is selected next)."""
    names = [e.name for e in entries]
    nxt = st.session_state.pop(NEXT_PICK, None)
    if nxt in names:
        st.session_state[PICK] = nxt
    elif st.session_state.get(PICK) not in names:        # deleted: back to the first run
        st.session_state.pop(PICK, None)
    name = st.selectbox("Run", names, key=PICK)
    return entries[names.index(name)]


def export_ui(entry: ModelEntry, data: bytes) -> None:
    st.download_button("Export (.zip)", data, file_name=f"{entry.path.name}.zip", mime="application/zip",
                       on_click="ignore", key="runs_export", icon=":material/download:",
                       help="model.safetensors, run.json and metrics.jsonl in one .zip; Import below takes it back.")


def shown_identity(entry: ModelEntry, key: str) -> str:
    """run_identity() of the run as this page showed it the run before (kept under `key`): a change submitted
    now applies to that run, not to another one given its name meanwhile ('gone' when it had vanished)."""
    before = st.session_state.get(key)
    st.session_state[key] = (entry.name, run_identity(entry.path) or "gone")
    return (before if before and before[0] == entry.name else st.session_state[key])[1]


def rename_ui(entry: ModelEntry) -> Optional[tuple[str, str]]:
    """(the new name typed, shown_identity of the run) when Rename is pressed."""
    shown = shown_identity(entry, "_runs_rename_shown")
    if st.session_state.pop(CLEAR, False):
        st.session_state["runs_new_name"] = ""
    with st.form("runs_rename", border=False):
        new = st.text_input("New name", "", max_chars=64, key="runs_new_name", placeholder=entry.path.name,
                            help="Letters, digits, '.', '_' and '-'; anything else becomes '-'.")
        go = st.form_submit_button("Rename", key="runs_rename_go", icon=":material/edit:")
    if go and not new.strip():
        st.warning("Type the new name first.")
    return (new, shown) if go and new.strip() else None


def delete_ui(entry: ModelEntry, label: str = "Delete…", what: str = "", key: str = "runs_delete") -> Optional[str]:
    """Once the deletion is confirmed (the button, then 'Yes, delete it'): the run_identity() of the run the
    button was pressed on ('gone' if it had vanished), else None. `what` names what goes (default: this run,
    its weights, card and training history); `key` the buttons' key (and the confirmation's)."""
    confirm = CONFIRM + key
    if st.button(label, key=key, icon=":material/delete:"):
        st.session_state[confirm] = (entry.name, run_identity(entry.path) or "gone")
    asked = st.session_state.get(confirm)
    if not asked or asked[0] != entry.name:
        return None
    what = what or f"{entry.name} for good? Its weights, card and training history are removed."
    st.warning(f"Delete {tables.plain(what)} This cannot be undone.")
    yes, no = st.columns(2)
    if no.button("Cancel", key=f"{key}_cancel"):
        st.session_state.pop(confirm, None)
        st.rerun()
    return asked[1] if yes.button("Yes, delete it", type="primary", key=f"{key}_yes") else None


def unreadable_ui(problems: list) -> Optional[tuple[str, str]]:
    """The runs whose card cannot be read, each with why; (name, identity) of one to delete once confirmed: a run
    of the runs folder ('x'), or the sweep of an unreadable trial ('sw/', deleted with all its trials)."""
    if not problems:
        return None
    with st.expander(f"{len(problems)} run{'s' * (len(problems) != 1)} that cannot be read", expanded=True,
                     icon=":material/warning:"):
        for name, why in problems:
            st.text(f"{tables.label(name)}: {tables.label(why)}")
        names = list(dict.fromkeys(n if n.count("/") == 1 else n.rsplit("/", 1)[0] + "/" for n, _ in problems))
        name = st.selectbox("Unreadable run", names, key="runs_bad_pick", format_func=lambda n: tables.label(
            f"the sweep {n} (it holds an unreadable run)" if n.endswith("/") else n))
        folder = name.split("/", 1)[1]
        entry = ModelEntry(name=name, path=runs_root() / folder.rstrip("/"), source="run",
                           record=RunRecord(train={}))       # its card cannot be read: an empty record
        what = (f"the sweep {tables.label(name)} and all its trials for good?" if folder.endswith("/") else
                f"{tables.label(name)} for good? Its files are removed, whatever they hold.")
        shown = delete_ui(entry, "Delete the unreadable run…" if not folder.endswith("/") else "Delete the sweep…",
                          what, key="runs_bad_delete")
        return (folder, shown) if shown else None


def delete_unreadable(folder: str, identity: str) -> str:
    """Delete what unreadable_ui chose (a run 'x', a sweep 'sw/'); returns the message to show."""
    if folder.endswith("/"):
        k = delete_sweep(folder.rstrip("/"))
        return f"Deleted the sweep runs/{tables.label(folder)} and its {k} trial{'s' * (k != 1)}."
    delete_run(folder, identity=identity)
    return f"Deleted runs/{tables.label(folder)}."
