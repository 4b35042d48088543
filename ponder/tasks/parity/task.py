"""Parity: is the number of +1s in a vector of -1, 0, +1 odd? (the paper's and labml's setting)

Its difficulty: k, the number of non-zeros. A preset names the vector length, the k trained on and tested on,
and the easy and hard ranges of k that every measurement reports (easy_hard: the one definition).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from ...config import TrainConfig, _check
from ..base import Batches, EvalSet, Task, init_lambda_head, register
from ..options import options_of
from . import data as D
from .options import PARITY_PRESETS, ParityOptions

TEST_SIZE = 10000            # problems in a preset's test set


CELLS = {"gru": nn.GRUCell, "tanh": nn.RNNCell}     # nn.RNNCell: h' = tanh(W x + b + U h + c)


@dataclass
class ParityConfig:
    """A recurrent cell fed the input vector at every step (paper / labml parity setting)."""
    n_elems: int = 8         # input vector length
    hidden: int = 64         # the cell's hidden size
    cell: str = "gru"        # "gru", or "tanh": one layer of tanh units (the paper's App. B.1, Fojo et al.'s)
    first_flag: bool = False  # the input at step n is [1 if n = 0 else 0, x] (Graves' ACT input for a static x)
    init: str = "torch"      # starting weights: "torch" (PyTorch's defaults) or "glorot" (TensorFlow's, glorot_init)


class ParityStep(nn.Module):
    """A cell fed the input vector x (and the first-step flag) at every step; 1 output logit and a lambda head.

    x [B, n_elems] -> ctx = x;  h [B, H];  y_n [B] logit of "odd number of +1s";  lambda_logit_n [B]
    """

    def __init__(self, cfg: ParityConfig, lambda_p: float):
        super().__init__()
        self.cfg = cfg
        self.cell = CELLS[cfg.cell](cfg.n_elems + int(cfg.first_flag), cfg.hidden)
        self.out_head = nn.Linear(cfg.hidden, 1)
        self.lambda_head = nn.Linear(cfg.hidden, 1)
        if cfg.init == "glorot":
            glorot_init(self)
        init_lambda_head(self.lambda_head, lambda_p)

    def encode(self, x):
        return x

    def init_hidden(self, ctx):
        return ctx.new_zeros(ctx.shape[0], self.cfg.hidden)

    def cell_input(self, ctx, n: int):
        """What the cell reads at step n: x, or [flag_n, x] with flag_n = 1 at the first step. [B, n_elems (+1)]"""
        if not self.cfg.first_flag:
            return ctx
        return torch.cat([ctx.new_full((ctx.shape[0], 1), float(n == 0)), ctx], 1)

    def step(self, ctx, h, n=0):
        h = self.cell(self.cell_input(ctx, n), h)
        return self.out_head(h).squeeze(-1), h, self.lambda_head(h).squeeze(-1)

    def stepper(self, ctx):
        return ParityStepper(self)                                       # step() split for early exit

    def loss(self, y, target):
        return F.binary_cross_entropy_with_logits(y.float(), target.float(), reduction="none")

    def probs(self, y):
        p1 = torch.sigmoid(y.float())
        return torch.stack([1 - p1, p1], -1)                             # [B, 2]: even, odd


def glorot_init(m: "ParityStep") -> None:
    """TensorFlow's starting weights (BasicRNNCell's, and tf.get_variable's default for the output head): the input
    and state weights drawn as one Glorot-uniform matrix of the stacked [input, state] shape, zero biases;
    [W_ih | W_hh] ~ U(±sqrt(6 / (n_in + H + H))). A GRU's gates are drawn one gate at a time the same way."""
    c, H = m.cell, m.cfg.hidden
    n_in, gates = c.weight_ih.shape[1], c.weight_ih.shape[0] // H
    with torch.no_grad():
        for g in range(gates):
            w = torch.empty(H, n_in + H)
            nn.init.xavier_uniform_(w)                                  # fan_in n_in + H, fan_out H
            c.weight_ih[g * H:(g + 1) * H] = w[:, :n_in]
            c.weight_hh[g * H:(g + 1) * H] = w[:, n_in:]
        c.bias_ih.zero_()
        c.bias_hh.zero_()
        nn.init.xavier_uniform_(m.out_head.weight)
        m.out_head.bias.zero_()


class ParityStepper:
    """step() split for early exit (ponder.inference.ponder): each step the cell and the lambda head, called as
    the operators their modules run (torch.gru_cell is nn.GRUCell's, torch.rnn_tanh_cell nn.RNNCell's,
    addmm(b, h, W^T) nn.Linear's on 2-D h: the same values, without the modules' per-call overhead); the output
    head once at the end, on the states the inputs halted at.
    s(c, h, n) -> (h_{n+1}, lambda_logit_n [b], h_{n+1} kept at a halt);  s.answer(h) -> y [b]."""

    def __init__(self, m: ParityStep):
        c = m.cell
        self.w = (c.weight_ih, c.weight_hh, c.bias_ih, c.bias_hh)
        self.cell = torch.gru_cell if m.cfg.cell == "gru" else torch.rnn_tanh_cell
        self.cell_input = m.cell_input
        self.lam_b, self.lam_wt, self.out = m.lambda_head.bias, m.lambda_head.weight.t(), m.out_head

    def __call__(self, c, h, n: int):
        h = self.cell(self.cell_input(c, n), h, *self.w)                 # h_{n+1} [b, H]
        return h, torch.addmm(self.lam_b, h, self.lam_wt).squeeze(-1), h

    def answer(self, h):
        return self.out(h).squeeze(-1)                                   # y [b] of the halting states


def halves(lo: int, hi: int) -> tuple:
    """((lo, mid), (mid + 1, hi)), mid = (lo + hi) // 2: the easy and hard halves of a range of k."""
    mid = (lo + hi) // 2
    return (lo, mid), (mid + 1, hi)


def easy_hard(preset: dict) -> tuple:
    """((lo, hi) easy, (lo, hi) hard): the preset's own ranges of k, else the two halves of its test range.
    The test metrics, the CLI and the Parity page's charts all report these."""
    if "easy" in preset and "hard" in preset:
        return tuple(preset["easy"]), tuple(preset["hard"])
    return halves(*preset["test_k"])


def fitted_preset(name, n_elems: int) -> dict:
    """The preset a run of n_elems-long vectors was trained with; when the card's preset does not fit the model
    (an edited or imported card), every k of its own n, trained and tested on."""
    preset = PARITY_PRESETS.get(name) if isinstance(name, str) else None
    if preset is None or preset["n_elems"] != n_elems:
        return dict(n_elems=n_elems, train_k=(1, n_elems), test_k=(1, n_elems))
    return preset


class ParityBatches(Batches):
    """Endless parity batches from the preset's training range, seeded, without the held-out vectors
    (ponder.data.parity_class); its validation set: held-out validation vectors of the training range."""

    def __init__(self, cfg: TrainConfig, device):
        p = PARITY_PRESETS[cfg.parity_preset]
        self.n, (self.k_lo, self.k_hi) = p["n_elems"], p["train_k"]
        self.cfg, self.device = cfg, device
        self.layout = options_of(TASK, cfg).layout
        # on a GPU the batches are drawn there (a CUDA generator), so the host never bottlenecks
        gdev = device if torch.device(device).type == "cuda" else "cpu"
        self.g = torch.Generator(device=gdev).manual_seed(cfg.seed)
        self.per_epoch = cfg.steps_per_epoch
        vx, vy, _ = D.parity_eval_set(self.n, *p["train_k"], size=2000, seed=D.EVAL_SEED + 1, held_out=D.VAL_CLASS,
                                      layout=self.layout)
        self.val = (vx.to(device), vy.to(device))

    def __iter__(self):
        while True:
            x, y, _ = D.parity_train_batch(self.cfg.batch_size, self.n, self.k_lo, self.k_hi, self.g, self.device,
                                           self.layout)
            yield x, y

    def validation(self):
        return self.val

    def state(self) -> dict:
        return {"generator": self.g.get_state()}

    def load_state(self, state: dict) -> None:
        if "generator" in state:
            self.g.set_state(state["generator"].to(torch.uint8).cpu())


class ParityTask(Task):
    name, label = "parity", "parity"
    model_config_cls = ParityConfig
    options_cls = ParityOptions
    # the reverse KL(p_G || p) by default: on the video's n = 15 it makes hard vectors take more expected
    # steps (+2.07 +- 0.84 at 15k steps, +0.66 +- 0.21 at 40k; 3 seeds each), the paper's KL(p || p_G) does not
    # (-0.72 +- 1.21 at 40k) (docs/findings.md §5); a wider cell and more steps than MNIST's
    defaults = dict(hidden=128, lr=3e-3, epochs=6.0, batch_size=128, regulariser="kl-reverse")
    chance = 0.5                    # odd or even
    presets = PARITY_PRESETS
    pages = ("parity",)
    default_model = "parity-15"
    shown_groups = (("easy", "hard"), "on easy and hard problems (the preset's ranges of the number of non-zeros k)")
    budget_seconds = 120

    def model_config(self, cfg: TrainConfig) -> ParityConfig:
        o = options_of(TASK, cfg)            # parity's own options (a task built on this one may have others)
        return ParityConfig(n_elems=PARITY_PRESETS[cfg.parity_preset]["n_elems"], hidden=cfg.hidden, cell=o.cell,
                            first_flag=o.first_flag, init=o.init)

    def check_model_field(self, name: str, value) -> bool:
        if name == "cell":
            _check(isinstance(value, str) and value in CELLS, "cell", f"one of {', '.join(CELLS)}", value)
            return True
        if name == "init":
            _check(value in ("torch", "glorot"), "init", "one of torch, glorot", value)
            return True
        if name == "first_flag":
            _check(isinstance(value, bool), "first_flag", "true or false", value)
            return True
        return False

    def build_step(self, model_cfg: ParityConfig, lambda_p: float) -> ParityStep:
        return ParityStep(model_cfg, lambda_p)

    def batches(self, cfg: TrainConfig, device, data=None) -> ParityBatches:
        return ParityBatches(cfg, device)

    def test_set(self, model, cfg: TrainConfig, data=None, limit: Optional[int] = None) -> EvalSet:
        """The preset's fixed test set (TEST_SIZE held-out test vectors, or `limit`, none ever in the training
        stream): its easy and hard blocks, a row per k."""
        preset = fitted_preset(cfg.parity_preset, model.step_fn.cfg.n_elems)
        lo, hi = preset["test_k"]
        x, y, k = D.parity_eval_set(preset["n_elems"], lo, hi, limit or TEST_SIZE, layout=layout_of(cfg))
        blocks = {name: ({"k_range": [a, b]}, (k >= a) & (k <= b))
                  for name, (a, b) in zip(("easy", "hard"), easy_hard(preset))}
        return EvalSet(x, y, info={"test_k": [lo, hi]}, rows=("by_k", "k", k), blocks=blocks, batch_size=2000)

    def probe_inputs(self, model_cfg: ParityConfig, n: int = 4) -> torch.Tensor:
        x = torch.randint(-1, 2, (n, model_cfg.n_elems), generator=torch.Generator().manual_seed(0)).float()
        x[0], x[1] = 1.0, -1.0                # every entry +1, every entry -1
        return x                              # [n, n_elems]

    def validation_set(self, model, cfg: TrainConfig, data=None, limit: Optional[int] = None) -> EvalSet:
        """TEST_SIZE (or `limit`) held-out validation vectors (never trained on, never in a test set) of the
        trained range of k: where operating points are chosen, before the test set (with its unseen k) is read; the
        easy and hard blocks of the test set where they hold validation vectors (a setting is chosen by them)."""
        preset = fitted_preset(cfg.parity_preset, model.step_fn.cfg.n_elems)
        x, y, k = D.parity_eval_set(preset["n_elems"], *preset["train_k"], limit or TEST_SIZE, seed=D.EVAL_SEED + 2,
                                    held_out=D.VAL_CLASS, layout=layout_of(cfg))
        blocks = {name: ({"k_range": [a, b]}, m) for name, (a, b) in zip(("easy", "hard"), easy_hard(preset))
                  for m in [(k >= a) & (k <= b)] if m.any()}
        return EvalSet(x, y, info={"k": list(preset["train_k"])}, blocks=blocks, batch_size=2000)

    def shifted(self, model, cfg: TrainConfig, k: torch.Tensor) -> dict:
        """{name: mask [M]} of the test items outside the trained range of k (the unseen k), when there are any."""
        preset = fitted_preset(cfg.parity_preset, model.step_fn.cfg.n_elems)
        lo, hi = preset["train_k"]
        unseen = (k < lo) | (k > hi)
        return {f"unseen k (outside {lo}–{hi})": unseen} if unseen.any() else {}

    def describe(self, record) -> str:
        return f"parity preset {record.train.get('parity_preset')}"

    def step_meaning(self, model: dict) -> tuple[str, str]:
        return "every step reads the whole vector again and updates the cell's state: more steps, more thought", ""


def layout_of(cfg: TrainConfig) -> str:
    """Where a run's vectors hold their non-zeros (its layout option)."""
    return options_of(TASK, cfg).layout


TASK = register(ParityTask())
