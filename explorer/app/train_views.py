"""The Train page before a run: what the defaults reach (as measured), and the prior the settings choose with
why β lets the learned halting drift far from it (Streamlit; the numbers come from ponder and a shipped card)."""
from __future__ import annotations

import torch
import streamlit as st

from ponder.analysis.studies import prior_mean
from ponder.losses import REGULARISERS, kl_to_prior
from ponder.store.card import read_record
from ponder.store.runs import ASSETS
from ponder.tasks import train_config

from ..figures import halting as figures
from ..jobs.limits import fmt_duration
from ..tables import config_record, plain, step_text
from .ui import chart

# What a default run reached on the development machine (2 CPU cores shared with other work), started the way the
# page starts it: `python -m bench.train_defaults --task T`, whose output lines are in docs/development.md, "What the
# Train page's defaults reach"). Test accuracy on the 2,000 test items a saved run is measured on.
DEFAULTS_MEASURED = {
    "mnist": ("It trains for the whole 60 s budget: 768 steps reached 98.2\u00a0% test accuracy on a quiet machine "
              "(load 1), 95 steps reached 86.0\u00a0% under load 5–9; the run is saved and measured about 5–20 s later."),
    "parity": ("It trains for the whole 120 s budget: 996 steps reached only 57.9\u00a0% test accuracy at load 1–6, "
               "225 steps 54.1\u00a0% at load 10–14 (chance is 50\u00a0%); parity needs a quiet machine or a longer budget "
               "to learn."),
}
EXAMPLE = "mnist-adaptive"      # a shipped row-reader run whose learned halting sits far from its prior


def intro_ui(task: str, cap_seconds: float) -> None:
    st.markdown(
        "Set the hyperparameters in the sidebar and press **Start training**. "
        f"{DEFAULTS_MEASURED.get(task, '')} Training runs in the background: you can switch pages, reload or close "
        "the tab and come back (the address holds the job); **Cancel** stops training within a second (after the "
        "step running); what was trained is then saved as a partial run and measured on 2,000 test items. "
        "A running job shows in every page's sidebar, and anyone can cancel it. A job trains for at most "
        f"{fmt_duration(cap_seconds)} on this server (PONDER_MAX_JOB_SECONDS): then it stops and is saved as a "
        "partial run. Finished runs are saved to the runs folder and appear in every model picker.")


def example_halting() -> tuple:
    """(the example run's mean learned p_n over its test set, its per-step accuracy), from its card."""
    t = read_record(ASSETS / EXAMPLE).test
    p = torch.tensor(t.halting_distribution, dtype=torch.float64)
    return (p / p.sum()).tolist(), t.per_step_accuracy


def kl_of(p, lambda_p: float, regulariser: str) -> float:
    """The regulariser's KL between the distribution p over N steps and the geometric prior truncated at N."""
    log_p = torch.tensor(p, dtype=torch.float64).clamp_min(1e-30).log().unsqueeze(1)     # [N, 1]
    return float(kl_to_prior(log_p, lambda_p, regulariser))


def step_ui(cfg, name: str = "") -> None:
    """What one step is for the run cfg (a TrainConfig) trains: the run's name, or the settings' run."""
    if step := step_text(config_record(cfg)):
        st.markdown(f"**A step** of {plain(name) if name else 'the run these settings train'}: {step}.")


def prior_preview_ui(lambda_p: float, beta: float, n: int, regulariser: str, reader: str, task: str) -> None:
    """What a step is, the prior the settings choose, and why β small lets the learned mean drift far from the
    prior's."""
    step_ui(train_config(task, lambda_p=lambda_p, beta=beta, max_steps=n, regulariser=regulariser, reader=reader))
    st.subheader("The prior you chose")
    c1, c2 = st.columns([1.3, 1], gap="large")
    with c1:
        chart(figures.prior_fig(lambda_p, n), f"Geometric(λp = {lambda_p:g}) over N = {n} steps: the halting "
              "distribution the KL term pulls the network towards; the live chart of a run draws it as a line.",
              key="train_prior")
    p, acc = example_halting()
    mean = sum((i + 1) * q for i, q in enumerate(p))
    kl = kl_of(p, lambda_p, regulariser)
    at_prior = acc[min(len(acc), max(1, round(prior_mean(lambda_p, len(p))))) - 1]
    with c2:
        st.markdown(
            f"Prior mean **1/λp = {1 / lambda_p:.2f}** steps ({prior_mean(lambda_p, n):.2f} within N = {n}).  \n"
            f"The loss is Σ p_n·L_n + β·{REGULARISERS[regulariser].label}: the prior is a price, not a rule. "
            f"The KL term is the only pull towards 1/λp, weighed by β = {beta:g}; the answer's loss pulls towards "
            "the steps that make answers right.")
        if task == "mnist":
            st.markdown(
                f"Example, the shipped **{EXAMPLE}** (the row reader: step n sees 2n rows): its learned halting has "
                f"mean **{mean:.1f}** steps. Against this prior it costs KL ≈ **{kl:.1f}** nats, so "
                f"β·KL ≈ **{beta * kl:.3f}** in the loss. Halting near the prior's mean instead, after "
                f"{round(prior_mean(lambda_p, len(p)))} step(s), it would be right {at_prior:.0%} of the time: a "
                "wrong answer costs about 2 nats of cross-entropy. So with β small the learned mean drifts far from "
                "the prior's (the live chart's KL shows what the run pays); raise β to pull it closer, at the "
                "answers' expense.")
        else:
            st.markdown(f"With β = {beta:g} a halting distribution KL = 5 nats away from the prior costs "
                        f"{5 * beta:.3f} in the loss: when more steps make the answers right, the learned mean drifts "
                        "far from the prior's; raise β to pull it closer.")
