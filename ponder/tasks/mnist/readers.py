"""The MNIST step functions (readers); ponder.tasks.mnist.task picks one from its config.

All follow the StepFunction protocol of ponder.halting:
    encode(x) -> ctx, init_hidden(ctx) -> h_1, step(ctx, h_n, n) -> (y_n, h_{n+1}, lambda_logit_n)

MNIST has four step functions (MnistConfig.reader), which differ in what the cell sees at step n:
    "cnn"     MnistStep: the whole image's embedding at every step. Step 1 is already a complete
              classifier, so extra steps bring nothing and halting follows the prior.
    "rows"    RowReader: the first rows_per_step * n image rows. Evidence grows with the steps.
    "coarse"  CoarseReader: the image at a growing resolution (2x2, 3x3, ..., 28x28).
    "recall"  RecallStep (ponder.tasks.mnist.recall): the whole image every step, a weight-tied conv block
              that computes further on it each step; no view(), what grows is each position's receptive field.
The readers have view(x, n): the image as step n sees it (the explorer draws it).
"""
from __future__ import annotations


import torch
import torch.nn as nn
import torch.nn.functional as F

from ..base import init_lambda_head
from .config import MnistConfig
from .gru import gru_unroll
from .levels import CoarseLevels, RowLevels, levels_for
from .stepper import GruStepper



def fused_gru(t: torch.Tensor) -> bool:
    """Whether the GRU update of tensors like t runs PyTorch's fused GRU kernel: on CUDA, the only device
    that has it (the kernel nn.GRUCell runs there). Elsewhere GruUpdate's hand-fused update runs."""
    return t.is_cuda


fused_gru_cell = torch.ops.aten._thnn_fused_gru_cell     # (input gates, hidden gates, h) -> (h', workspace)


class GruUpdate:
    """One GRU step h_n -> h_{n+1} from the precomputed input projection gi = W_ih e + b_ih + [b_hr, b_hz, 0]
    (nn.GRUCell's parameters and equations, see MnistStep), with W_hh split once per unroll: each split of a
    tensor that needs a gradient costs a zero-filled gradient buffer in the backward pass.

    Two ways, the same values (tests/ponder/test_mnist_readers.py):
      fused   (CUDA) gh = W_hh h + [0, 0, b_hn] in one GEMM, then PyTorch's fused GRU kernel
              (aten._thnn_fused_gru_cell): one GEMM and one element-wise kernel a step (and one fused
              element-wise kernel in the backward pass).
      hand    (CPU)  two addmm with gi's columns as their bias, then sigmoid, tanh, addcmul, lerp.
    """

    by_hand = True          # training on CPU: the N updates as one node, its backward by hand (bench/profiling.py)

    def __init__(self, cell: nn.GRUCell, like: torch.Tensor):
        H, w, b = cell.hidden_size, cell.weight_hh, cell.bias_hh       # w [3H, H], b [3H]
        self.H, self.fused, self.cell = H, fused_gru(like), cell
        if self.fused:
            self.w = (w.t(), F.pad(b[2 * H:], (2 * H, 0)))             # W_hh^T [H, 3H], [0, 0, b_hn] [3H]
        else:
            self.w = (w[:2 * H].t(), w[2 * H:].t(), b[2 * H:])         # W_hr,hz^T [H, 2H], W_hn^T [H, H], b_hn

    def split(self, gi):
        """One level's gi [B, 3H] as __call__ takes it."""
        return (gi,) if self.fused else (gi[:, :2 * self.H], gi[:, 2 * self.H:])

    def levels(self, gi):
        """gi [B, L, 3H] -> L levels as __call__ takes them, split once (one unbind: one gradient op in the
        backward pass, not a zero-filled [B, L, 3H] buffer per step as gi[:, n] would cost)."""
        if self.fused:
            return [(g,) for g in gi.transpose(0, 1).unbind(0)]
        rz = gi[..., :2 * self.H].transpose(0, 1).unbind(0)         # L x [B, 2H]
        n = gi[..., 2 * self.H:].transpose(0, 1).unbind(0)          # L x [B, H]
        return list(zip(rz, n))

    def __call__(self, h, gi):
        if self.fused:
            w_t, b = self.w
            return fused_gru_cell(gi[0], torch.addmm(b, h, w_t), h)[0]   # h_{n+1} [B, H]
        (gi_rz, gi_n), (w_rz, w_n, b_n) = gi, self.w
        r, z = torch.sigmoid(torch.addmm(gi_rz, h, w_rz)).chunk(2, 1)     # [B, H] each
        n = torch.tanh(torch.addcmul(gi_n, r, torch.addmm(b_n, h, w_n)))   # [B, H]
        return torch.lerp(n, h, z)                              # h_{n+1} = (1 - z) n + z h   [B, H]

    def states(self, ctx, h, n_steps: int):
        """h_1 .. h_N [N, B, H] from h, step n fed level min(n, L - 1) of ctx [B, L, 3H] (or the one level
        [B, 3H]). Training on CPU: one autograd node with a hand-written backward (ponder.tasks.mnist.gru)."""
        # float32 eager training only: under autocast or a compiler, the step-by-step path (they handle it their way)
        if (self.by_hand and not self.fused and torch.is_grad_enabled()
                and not torch.is_autocast_enabled(ctx.device.type) and not torch.compiler.is_compiling()):
            return gru_unroll(ctx, self.cell.weight_hh, self.cell.bias_hh[2 * self.H:], h, n_steps)
        levels = self.levels(ctx) if ctx.dim() == 3 else [self.split(ctx)]     # split once, not once per step
        hs = []
        for n in range(n_steps):
            h = self(h, levels[min(n, len(levels) - 1)])
            hs.append(h)
        return torch.stack(hs)


def add_cell_and_heads(m: nn.Module, cfg: MnistConfig, lambda_p: float, fc_in: int) -> None:
    """What every MNIST reader has after its CNN: fc -> embedding (dropout), a GRU cell, the answer
    head (10 classes) and the lambda head (started at the prior)."""
    m.cfg = cfg
    m.fc = nn.Linear(fc_in, cfg.embed)
    m.drop = nn.Dropout(cfg.dropout)
    m.cell = nn.GRUCell(cfg.embed, cfg.hidden)
    m.out_head = nn.Linear(cfg.hidden, 10)
    m.lambda_head = nn.Linear(cfg.hidden, 1)
    init_lambda_head(m.lambda_head, lambda_p)


class MnistStep(nn.Module):
    """CNN embedding computed once per image, then a GRU cell run over the steps.

    x [B, 1, 28, 28] -> ctx [B, 3H];  h [B, H];  y_n [B, 10] class logits;  lambda_logit_n [B]

    The cell sees the same embedding e at every step, so its input projection is computed once,
    in encode(): ctx = W_ih e + b_ih, with the r and z gates' hidden biases folded in. A step then
    only multiplies the hidden state. The parameters are nn.GRUCell's (so its checkpoints load)
    and so are the gate equations:
        r = sigma(gi_r + gh_r),  z = sigma(gi_z + gh_z),  n = tanh(gi_n + r * gh_n),
        h' = (1 - z) * n + z * h = lerp(n, h, z),        gi = W_ih e + b_ih,  gh = W_hh h + b_hh.
    unroll() runs all N steps for PonderNet.forward and applies the two heads once to the stacked
    states; step() is the same update one step at a time, for early-exit inference.
    """

    def __init__(self, cfg: MnistConfig, lambda_p: float):
        super().__init__()
        self.conv1 = nn.Conv2d(1, cfg.channels1, 5, padding=2)
        self.conv2 = nn.Conv2d(cfg.channels1, cfg.channels2, 5, padding=2)
        add_cell_and_heads(self, cfg, lambda_p, cfg.channels2 * 7 * 7)

    def embed(self, x):
        if x.device.type == "cpu" and x.dim() == 4:
            # channels-last activations on CPU: oneDNN's max-pool and convolutions run faster on
            # them than on NCHW (docs/benchmarks.md, Profile); the same values
            x = x.to(memory_format=torch.channels_last)
        # relu after the max-pool: the same values as before it (relu is monotone), on 4x fewer elements
        z = F.relu(F.max_pool2d(self.conv1(x), 2))              # [B, C1, 14, 14]
        z = F.relu(F.max_pool2d(self.conv2(z), 2))              # [B, C2, 7, 7]
        return self.drop(F.relu(self.fc(z.flatten(1))))         # [B, E]

    def encode(self, x):
        H = self.cfg.hidden
        bias = self.cell.bias_ih + F.pad(self.cell.bias_hh[:2 * H], (0, H))     # b_ih + [b_hr, b_hz, 0]
        return F.linear(self.embed(x), self.cell.weight_ih, bias)               # [B, 3H], once per image

    def init_hidden(self, ctx):
        return ctx.new_zeros(ctx.shape[0], self.cfg.hidden)     # [B, H]

    def step(self, ctx, h, n=0):
        upd = GruUpdate(self.cell, ctx)
        h = upd(h, upd.split(ctx))
        return self.out_head(h), h, self.lambda_head(h).squeeze(-1)

    def stepper(self, ctx):
        return GruStepper(self, GruUpdate(self.cell, ctx), by_level=False)     # step() split for early exit

    def unroll(self, ctx, h, n_steps: int):
        """All steps at once: y [N, B, 10], lambda logits [N, B]; the same values as N step() calls."""
        hs = GruUpdate(self.cell, ctx).states(ctx, h, n_steps)              # [N, B, H]
        return self.out_head(hs), self.lambda_head(hs).squeeze(-1)

    def loss(self, y, target):
        return F.cross_entropy(y.float(), target, reduction="none")      # [B]

    def probs(self, y):
        return torch.softmax(y.float(), -1)                              # [B, 10]


class GrowingEvidence(nn.Module):
    """Shared by the readers whose input changes with n: encode() returns the GRU input projection
    of one embedding per evidence level, ctx [B, L, 3H]; step n feeds level min(n, L - 1).
    Steps past the last level see the whole image and keep refining the state.

    As in MnistStep, ctx has the r and z gates' hidden biases folded in (ctx_l = W_ih e_l + b_ih +
    [b_hr, b_hz, 0]) and a step runs GruUpdate: nn.GRUCell's parameters and equations.
    """

    def init_hidden(self, ctx):
        return ctx.new_zeros(ctx.shape[0], self.cfg.hidden)     # [B, H]

    def project(self, e):
        """GRU input projection of embeddings e [..., E], r/z hidden biases folded in -> [..., 3H]."""
        H = self.cfg.hidden
        bias = self.cell.bias_ih + F.pad(self.cell.bias_hh[:2 * H], (0, H))     # b_ih + [b_hr, b_hz, 0]
        return F.linear(e, self.cell.weight_ih, bias)

    def at_step(self, ctx, n: int):
        """The one level step n reads, ctx [B, L, 3H] -> [B, 1, 3H] (step() reads its level 0 = min(n, 0))."""
        lvl = min(n, ctx.shape[1] - 1)
        return ctx[:, lvl:lvl + 1]

    def step(self, ctx, h, n=0):
        upd = GruUpdate(self.cell, ctx)
        h = upd(h, upd.split(ctx[:, min(n, ctx.shape[1] - 1)]))           # level min(n, L - 1) [B, 3H]
        return self.out_head(h), h, self.lambda_head(h).squeeze(-1)

    def stepper(self, ctx):
        return GruStepper(self, GruUpdate(self.cell, ctx), by_level=True)      # step() split for early exit

    unroll = MnistStep.unroll                                               # level min(n, L - 1) at step n
    loss = MnistStep.loss
    probs = MnistStep.probs


def _causal_rows(x, k: int = 5):
    """Pad for a k x k convolution whose output row i sees input rows <= i only (none below)."""
    return F.pad(x, (k // 2, k // 2, k - 1, 0))


class RowReader(GrowingEvidence):
    """Progressive reading: step n sees the first rows_per_step * n image rows (all 28 from then on).

    One pass of a vertically causal CNN gives a 14 x 7 feature map whose row r depends only on
    image rows <= 2r + 1. The embedding after reading rows 0..2r+1 is relu(b + sum_{r' <= r} W_r' z_r'):
    the fc layer's per-row contributions summed cumulatively, so every reveal level costs one
    cumsum, not one CNN pass. x [B, 1, 28, 28] -> ctx [B, L, 3H], L = 28 / rows_per_step.
    """

    def __init__(self, cfg: MnistConfig, lambda_p: float):
        super().__init__()
        self.conv1 = nn.Conv2d(1, cfg.channels1, 5)
        self.conv2 = nn.Conv2d(cfg.channels1, cfg.channels2, 5)
        add_cell_and_heads(self, cfg, lambda_p, cfg.channels2 * 14 * 7)

    def encode(self, x):
        if x.device.type == "cpu" and x.dim() == 4:
            # channels-last on CPU, as in MnistStep.embed: oneDNN's max-pool is ~6x faster on it; the same values.
            # Set before the padding (F.pad keeps it; a 1-channel tensor made contiguous afterwards would not)
            x = x.to(memory_format=torch.channels_last)
        # relu after the max-pool: the same values (relu is monotone), on fewer elements
        z = F.relu(F.max_pool2d(self.conv1(_causal_rows(x)), 2))            # [B, C1, 14, 14] row r <- image rows <= 2r+1
        z = F.relu(F.max_pool2d(self.conv2(_causal_rows(z)), (1, 2)))       # [B, C2, 14, 7]  row r <- image rows <= 2r+1
        w = self.fc.weight.view(-1, *z.shape[1:])                           # [E, C2, 14, 7]
        per_row = torch.einsum("bcrw,ecrw->bre", z, w)                      # [B, 14, E] each feature row's share
        k = self.cfg.rows_per_step // 2                                     # feature rows per level
        e = per_row.cumsum(1)[:, k - 1::k] + self.fc.bias                   # [B, L, E] after reading level l
        return self.project(self.drop(F.relu(e)))                           # [B, L, 3H]

    def lazy_encode(self, x):
        return levels_for(RowLevels, self, x)                               # early exit: one level a step (or None)

    def view_label(self, n: int) -> str:
        seen = min((n + 1) * self.cfg.rows_per_step, 28)
        return f"rows 1–{seen} of 28 read" if seen < 28 else "all 28 rows read"

    def view(self, x, n: int):
        """The image as step n (0-based) sees it: rows below the read ones at the background value."""
        seen = min((n + 1) * self.cfg.rows_per_step, 28)
        out = torch.full_like(x, float(x.min()) if x.numel() else 0.0)
        out[..., :seen, :] = x[..., :seen, :]
        return out


class CoarseReader(GrowingEvidence):
    """Coarse to fine: step n sees the image area-averaged to RESOLUTIONS[n] squared (then every
    step from the 8th on sees all 28 x 28). The same CNN embeds every level (upsampled back to
    28 x 28, bilinear). x [B, 1, 28, 28] -> ctx [B, L, 3H], L = 8.
    """
    RESOLUTIONS = (2, 3, 4, 5, 7, 10, 14, 28)

    def __init__(self, cfg: MnistConfig, lambda_p: float):
        super().__init__()
        self.conv1 = nn.Conv2d(1, cfg.channels1, 5, padding=2)
        self.conv2 = nn.Conv2d(cfg.channels1, cfg.channels2, 5, padding=2)
        add_cell_and_heads(self, cfg, lambda_p, cfg.channels2 * 7 * 7)

    @staticmethod
    def at_resolution(x, r: int):
        """x [B, 1, 28, 28] averaged over r x r cells and drawn back at 28 x 28."""
        if r >= x.shape[-1]:
            return x
        return F.interpolate(F.adaptive_avg_pool2d(x, r), size=x.shape[-2:], mode="bilinear", align_corners=False)

    def embed(self, xs):
        z = F.relu(F.max_pool2d(self.conv1(xs), 2))                          # [b, C1, 14, 14]
        z = F.relu(F.max_pool2d(self.conv2(z), 2))                           # [b, C2, 7, 7]
        return self.drop(F.relu(self.fc(z.flatten(1))))                      # [b, E]

    def encode(self, x):
        B = x.shape[0]
        xs = torch.cat([self.at_resolution(x, r) for r in self.RESOLUTIONS])   # [L*B, 1, 28, 28]
        e = self.embed(xs).view(len(self.RESOLUTIONS), B, -1).transpose(0, 1)  # [B, L, E]
        return self.project(e)                                               # [B, L, 3H]

    def lazy_encode(self, x):
        return levels_for(CoarseLevels, self, x)                             # early exit: one level a step (or None)

    def view_label(self, n: int) -> str:
        r = self.RESOLUTIONS[min(n, len(self.RESOLUTIONS) - 1)]
        return f"at {r}×{r}" if r < 28 else "at full 28×28"

    def view(self, x, n: int):
        return self.at_resolution(x, self.RESOLUTIONS[min(n, len(self.RESOLUTIONS) - 1)])


from .recall import RecallStep  # noqa: E402  (it imports nothing from here)

MNIST_STEPS = {"cnn": MnistStep, "rows": RowReader, "coarse": CoarseReader, "recall": RecallStep}
