"""Encodings built one level at a time, for early exit: the readers whose evidence grows (RowReader, CoarseReader)
encode at each step only the level that step reads, and only for the inputs still running, so an input that halts
at step 3 never pays for the rows (or resolutions) it did not read.

ponder.inference.ponder() takes one from a step function's lazy_encode(x) where it gives one (for large batches,
LAZY_MIN_BATCH; otherwise it encodes once, ponder.inference.WholeEncoding). The protocol:
    at(n, idx) -> ctx_n [b, 1, 3H]   what step n reads (level min(n, L - 1)) for the inputs idx: their positions
                                      in x, ascending (None: all of x). Called for n = 0, 1, 2, ... in turn, with
                                      the inputs left by keep().
    keep(pos)                         only the inputs at positions pos of the last call's batch go on.
The values are those of encode(x)[:, min(n, L - 1)] up to float rounding (tests/ponder/test_mnist_levels.py).
Training and 'expected' mode read every level of every input and keep encode(), one pass for all levels.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

CONV_ROWS = 4             # rows a 5 x 5 causal convolution reads above its output row
# Inputs per call from which the levels are built one a step. Below it one pass for all levels is faster: each
# level costs two more convolution calls (~130 us each on one CPU thread, whatever the batch) and ~15 small ops,
# which only a large batch amortises (mnist-adaptive, one thread, CPU time: the 14 levels one at a time took 1.58x
# the one pass's time at 512 inputs, 0.79x at 2,048; early exit built so was 1.15x slower than with the one pass
# at 768 inputs, 1.08x faster at 1,000 and 1.12x at 1,024).
LAZY_MIN_BATCH = 1000


def levels_for(cls, reader, x: torch.Tensor):
    """cls(reader, x) where building the levels one a step pays (x.shape[0] >= LAZY_MIN_BATCH), else None."""
    return cls(reader, x) if x.shape[0] >= LAZY_MIN_BATCH else None


def _gather(t: torch.Tensor, idx: Optional[torch.Tensor]) -> torch.Tensor:
    return t if idx is None else t.index_select(0, idx)


def _pool_columns(y: torch.Tensor) -> torch.Tensor:
    """max over column pairs: [b, h, 2w, C] -> [b, h, w, C]"""
    y = y.unflatten(2, (-1, 2))
    return torch.maximum(y[:, :, :, 0], y[:, :, :, 1])


def _pool_rows(y: torch.Tensor) -> torch.Tensor:
    """max over row pairs: [b, 2h, w, C] -> [b, h, w, C]"""
    y = y.unflatten(1, (-1, 2))
    return torch.maximum(y[:, :, 0], y[:, :, 1])


class RowLevels:
    """RowReader's levels, one a step. Level l reads feature rows [l k, (l + 1) k), k = rows_per_step / 2, of the
    causal CNN (RowReader.encode): pooled conv1 row r comes from image rows 2r - 4 .. 2r + 1, feature row r from
    pooled conv1 rows r - 4 .. r. Kept for the inputs still running: the last 4 pooled conv1 rows (the next
    level's conv2 reads them), the fc layer's running sum over the feature rows read (encode's cumsum), and the
    last level once reached (every step from L on reads it again)."""

    def __init__(self, reader, x: torch.Tensor):
        self.m, self.k = reader, reader.cfg.rows_per_step // 2
        self.levels = 14 // self.k                                      # L
        if x.device.type == "cpu" and x.dim() == 4:
            x = x.to(memory_format=torch.channels_last)                 # as in RowReader.encode; the same values
        self.x = F.pad(x, (2, 2, CONV_ROWS, 0))                         # [B, 1, 32, 32] the causal padding
        self.tail = None                                                # [b, 4, 18, C1] pooled conv1 rows
        self.acc = None                                                 # [b, E] sum of the feature rows' fc shares
        self.last = None                                                # [b, 1, 3H] level L - 1
        C2 = reader.conv2.out_channels
        # fc's weight by feature row, its columns in the activations' (column, channel) order
        self.w = reader.fc.weight.view(-1, C2, 14, 7).permute(2, 0, 3, 1).flatten(2)   # [14, E, 7 C2]

    def at(self, n: int, idx: Optional[torch.Tensor]) -> torch.Tensor:
        if n >= self.levels:
            return self.last
        m, k, r0 = self.m, self.k, n * self.k                           # feature rows r0 .. r0 + k - 1
        xb = _gather(self.x[:, :, 2 * r0:2 * (r0 + k) + CONV_ROWS], idx)        # [b, 1, 2k + 4, 32]
        # activations as [b, rows, columns, channels] (channels-last memory, oneDNN's layout on CPU): the 2 x 2
        # max-pool is then 3 element-wise maxima of views, and new rows join the kept ones by a plain copy
        z = _pool_rows(_pool_columns(m.conv1(xb).permute(0, 2, 3, 1))).relu_()  # [b, k, 14, C1]
        z = F.pad(z, (0, 0, 2, 2))                                              # [b, k, 18, C1]
        if self.tail is None:
            self.tail = z.new_zeros(z.shape[0], CONV_ROWS, *z.shape[2:])        # rows above the image
        band = torch.cat([self.tail, z], 1)                                     # [b, 4 + k, 18, C1]
        self.tail = band[:, k:]                                                 # [b, 4, 18, C1]
        z = _pool_columns(m.conv2(band.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)).relu_()   # [b, k, 7, C2]
        per_row = torch.einsum("brf,ref->bre", z.flatten(2), self.w[r0:r0 + k])          # [b, k, E]
        # the running sum in encode's cumsum order: acc + row r0, then + row r0 + 1, ...
        if k == 1:
            self.acc = per_row[:, 0] if self.acc is None else self.acc + per_row[:, 0]       # [b, E]
        else:
            seq = per_row if self.acc is None else torch.cat([self.acc.unsqueeze(1), per_row], 1)
            self.acc = seq.cumsum(1)[:, -1]                                                 # [b, E]
        ctx = m.project(m.drop(F.relu(self.acc + m.fc.bias))).unsqueeze(1)     # [b, 1, 3H]
        if n == self.levels - 1:
            self.last = ctx
        return ctx

    def keep(self, pos: torch.Tensor) -> None:
        self.tail, self.acc = self.tail.index_select(0, pos), self.acc.index_select(0, pos)
        if self.last is not None:
            self.last = self.last.index_select(0, pos)


class CoarseLevels:
    """CoarseReader's levels, one a step: level l is the image at RESOLUTIONS[l] through the CNN, for the inputs
    still running; the last level is kept (every step from L on reads it again)."""

    def __init__(self, reader, x: torch.Tensor):
        self.m, self.x, self.last = reader, x, None
        self.levels = len(reader.RESOLUTIONS)

    def at(self, n: int, idx: Optional[torch.Tensor]) -> torch.Tensor:
        if n >= self.levels:
            return self.last
        x = self.m.at_resolution(_gather(self.x, idx), self.m.RESOLUTIONS[n])   # [b, 1, 28, 28]
        ctx = self.m.project(self.m.embed(x)).unsqueeze(1)                       # [b, 1, 3H]
        if n == self.levels - 1:
            self.last = ctx
        return ctx

    def keep(self, pos: torch.Tensor) -> None:
        if self.last is not None:
            self.last = self.last.index_select(0, pos)
