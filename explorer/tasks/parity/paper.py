"""The Parity page's "The paper's experiment" section: every run of the paper's vectors (n = 64 interpolation,
n = 96 extrapolation) of any halting method side by side: a sentence, the methods' table, accuracy and steps by k,
and each run's answer and steps on the vector above."""
from __future__ import annotations

from typing import Optional

import streamlit as st
import torch

from ponder.inference import ponder
from ponder.methods import get_method
from ponder.tasks.parity.experiment import table_rows, verdict
from ponder.tasks.parity.data import parity_target

from ...figures.methods import methods_by_k_fig
from ...app import loaders, ui

EXPERIMENTS = {"paper": "interpolation: n = 64, every k", "extrapolation": "extrapolation: n = 96, trained k 1–48"}
LADDER = "python -m bench.parity_ladder run --queue A --out runs/ladder"


def runs_of(preset: str) -> list:
    """The parity runs (shipped and the user's) of one of the paper's presets."""
    return [e for e in loaders.models("parity") if e.record.train.get("parity_preset") == preset]


def section_ui(x: Optional[torch.Tensor]) -> None:
    st.subheader("The paper's experiment")
    which = st.segmented_control("Experiment", list(EXPERIMENTS), format_func=EXPERIMENTS.get, default="paper",
                                 required=True, key="par_paper")
    entries = runs_of(which)
    if not entries:
        st.caption(f"No run of this experiment is here yet. Train the ladder of runs with `{LADDER}`.")
        return
    box = ui.on_demand(f"Compare the {len(entries)} runs (measured once, on 4,000 held-out vectors a set)",
                       "par_paper_open")
    if box is None:
        return
    with box, ui.user_errors():
        named = {e.name: loaders.paper_experiment(str(e.path), loaders.stamp(e.path)) for e in entries}
        st.markdown(verdict(named))
        rows = table_rows(named)
        shown = [k for k in rows[0] if any(r[k] is not None for r in rows)]    # no unseen k, no Q-exit: no column
        st.dataframe([{k: r[k] for k in shown} for r in rows], hide_index=True)
        first = next(iter(named.values()))
        ui.chart(methods_by_k_fig(named, first["train_k"]), "Each run's own answer (PonderNet: a draw of its "
                 "halting; ACT: its mean field; Repeat-RNN and deep supervision: the last step) by k; the shaded "
                 "band is the trained k, the dashed line chance.", key="par_paper_fig")
        if x is not None:
            vector_ui(x, entries)


def vector_ui(x: torch.Tensor, entries: list) -> None:
    """Each run's answer and steps on the vector chosen above (runs of another length are left out)."""
    rows = []
    for e in entries:
        ck = loaders.checkpoint(e)
        if int(ck.record.model["n_elems"]) != x.shape[1]:
            continue
        with torch.no_grad():
            res = ponder(ck.model, x, "sample", generator=torch.Generator().manual_seed(0))
        rows.append({"run": e.name, "method": get_method(ck.model.method).label,
                     "answer": ["even", "odd"][int(res.pred[0])], "right": bool(res.pred[0] == parity_target(x)[0]),
                     "steps": int(res.halt_step[0])})
    if rows:
        st.caption("On the vector above:")
        st.dataframe(rows, hide_index=True)
    else:
        st.caption(f"Choose a model with {x.shape[1]} elements above to see each run's answer on that vector.")
