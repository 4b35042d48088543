"""Parity data: vectors of -1, 0, +1 with k non-zeros and the parity of their +1s; the held-out test and
validation vectors (a hash class each) that the training stream never draws."""
from __future__ import annotations

from typing import Optional, Sequence

import torch


def parity_target(x: torch.Tensor) -> torch.Tensor:
    """1.0 where the number of +1 entries of x [B, n] is odd, else 0.0 (+1s are counted, not non-zeros). [B]"""
    return ((x == 1).sum(-1) % 2).float()


def parity_batch(batch: int, n_elems: int, k_lo: int, k_hi: int,
                 generator: Optional[torch.Generator] = None, device="cpu", layout: str = "random"):
    """Random parity problems.

    x [B, n_elems]: k entries in {-1, +1} at random positions (layout "random", the paper's) or in the first k
    entries (layout "prefix", Fojo et al.'s), the rest 0, k ~ U{k_lo..k_hi}.
    y [B]: 1.0 if the number of +1 entries is odd, else 0.0 (the count of +1s, not of non-zeros).
    k [B]: the number of non-zero entries.
    Drawn where `generator` lives (a CUDA generator draws on the GPU, no host work), then
    moved to `device`. The same generator state gives the same batch.
    """
    gdev = generator.device if generator is not None else torch.device("cpu")
    k = torch.randint(k_lo, k_hi + 1, (batch,), generator=generator, device=gdev)                  # [B]
    if layout == "prefix":
        ranks = torch.arange(n_elems, device=gdev).expand(batch, n_elems)                         # [B, n] in order
    elif layout == "random":
        ranks = torch.rand(batch, n_elems, generator=generator, device=gdev).argsort(1).argsort(1)  # [B, n] random ranks
    else:
        raise ValueError(f"layout must be 'random' or 'prefix', got {layout!r}")
    nonzero = ranks < k.unsqueeze(1)                                                               # [B, n] k True per row
    signs = torch.randint(0, 2, (batch, n_elems), generator=generator, device=gdev) * 2 - 1         # [B, n] +-1
    x = torch.where(nonzero, signs, 0).float()
    return x.to(device), parity_target(x).to(device), k.to(device)


EVAL_SEED = 12345          # parity evaluation sets are generated once from this seed
# Held-out vectors: a vector's class is a hash of it, h = Σ_i (x_i + 1)·HASH_BASE^i mod HASH_PRIME, mod HOLDOUT_MOD.
# Test sets hold only class TEST_CLASS, validation sets only VAL_CLASS, and the training stream neither (2/13 of
# the vectors of every k). The hash mixes every entry, so a class says nothing about the number of +1s (a linear
# rule would: for k = n it fixes the count of -1s); HASH_BASE is one whose classes hold at least 2 of the k = 1
# vectors, and both labels at k = 2, for every preset's n (tests/ponder/test_data.py).
HOLDOUT_MOD, TEST_CLASS, VAL_CLASS = 13, 0, 1
HASH_BASE, HASH_PRIME = 62, 2**31 - 1


def parity_class(x: torch.Tensor) -> torch.Tensor:
    """The held-out class (0..HOLDOUT_MOD - 1) of each vector x [B, n] of -1, 0, +1. [B]"""
    pw = torch.tensor([pow(HASH_BASE, i, HASH_PRIME) for i in range(x.shape[1])], dtype=torch.int64, device=x.device)
    return ((x.long() + 1) * pw).sum(1) % HASH_PRIME % HOLDOUT_MOD               # < 2^39 before the mod: no overflow


def parity_draw(batch: int, n_elems: int, k_lo: int, k_hi: int, classes: Optional[Sequence[int]] = None,
                generator: Optional[torch.Generator] = None, device="cpu", exclude: bool = False,
                layout: str = "random"):
    """parity_batch's problems restricted to vectors whose held-out class is in `classes` (all but those with
    exclude): draws of parity_batch until `batch` are kept, in order."""
    if classes is None:
        return parity_batch(batch, n_elems, k_lo, k_hi, generator, device, layout)
    got, need = [], batch
    cls = torch.tensor(list(classes))
    while need > 0:
        x, y, k = parity_batch(max(2 * need, 64) if exclude else need * HOLDOUT_MOD + 64, n_elems, k_lo, k_hi,
                               generator, device, layout)
        keep = torch.isin(parity_class(x), cls.to(x.device)) != exclude              # [M]
        got.append((x[keep][:need], y[keep][:need], k[keep][:need]))
        need -= len(got[-1][0])
    return tuple(torch.cat(t) for t in zip(*got))


def parity_train_batch(batch: int, n_elems: int, k_lo: int, k_hi: int,
                       generator: Optional[torch.Generator] = None, device="cpu", layout: str = "random"):
    """A training batch: never a vector of a test or validation class."""
    return parity_draw(batch, n_elems, k_lo, k_hi, (TEST_CLASS, VAL_CLASS), generator, device, exclude=True,
                       layout=layout)


def parity_eval_set(n_elems: int, k_lo: int, k_hi: int, size: int = 10000, seed: int = EVAL_SEED,
                    held_out: int = TEST_CLASS, layout: str = "random"):
    """A fixed evaluation set of held-out vectors (class `held_out`: TEST_CLASS or VAL_CLASS), never in the
    training stream: the same tensors every call, so numbers compare run to run. With layout "prefix" a small k
    has few vectors (2^k), so a k whose vectors all fall outside the held-out class has no item here."""
    return parity_draw(size, n_elems, k_lo, k_hi, (held_out,), torch.Generator().manual_seed(seed), layout=layout)
