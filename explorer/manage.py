"""The Runs page's widgets: the table of runs, the run picker, export / rename / delete, and the message
of the last change (kept across the rerun that shows the new list). Each *_ui() returns plain values;
the changes themselves are ponder.manage's."""
from __future__ import annotations

from typing import Optional

import streamlit as st

from ponder.runs import ModelEntry

from . import tables

FLASH, PICK, NEXT_PICK = "_runs_flash", "runs_pick", "_runs_pick_next"      # session-state keys
CONFIRM, CLEAR = "_runs_confirm_delete", "_runs_clear"


def changed(message: str, pick: Optional[str] = None) -> None:
    """After a change: keep its message (and the run to select next) and rerun the page."""
    st.session_state[FLASH] = message
    if pick:
        st.session_state[NEXT_PICK] = pick
    st.session_state.pop(CONFIRM, None)
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


def rename_ui(entry: ModelEntry) -> Optional[str]:
    """The new name typed, when Rename is pressed."""
    if st.session_state.pop(CLEAR, False):
        st.session_state["runs_new_name"] = ""
    with st.form("runs_rename", border=False):
        new = st.text_input("New name", "", max_chars=64, key="runs_new_name", placeholder=entry.path.name,
                            help="Letters, digits, '.', '_' and '-'; anything else becomes '-'.")
        go = st.form_submit_button("Rename", key="runs_rename_go", icon=":material/edit:")
    if go and not new.strip():
        st.warning("Type the new name first.")
    return new if go and new.strip() else None


def delete_ui(entry: ModelEntry, label: str = "Delete…", what: str = "") -> bool:
    """True once the deletion is confirmed (the button, then 'Yes, delete it'); `what` names what goes
    (default: this run, its weights, card and training history)."""
    if st.button(label, key="runs_delete", icon=":material/delete:"):
        st.session_state[CONFIRM] = entry.name
    if st.session_state.get(CONFIRM) != entry.name:
        return False
    what = what or f"{entry.name} for good? Its weights, card and training history are removed."
    st.warning(f"Delete {tables.plain(what)} This cannot be undone.")
    yes, no = st.columns(2)
    if no.button("Cancel", key="runs_delete_cancel"):
        st.session_state.pop(CONFIRM, None)
        st.rerun()
    return yes.button("Yes, delete it", type="primary", key="runs_delete_yes")
