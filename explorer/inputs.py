"""What a user types, turned into numbers and tensors (no Streamlit): angle lists, parity vectors."""
from __future__ import annotations

import math
import re

import torch

from ponder import data as D

DEFAULT_ANGLES = tuple(range(0, 181, 15))     # the rotation page's fixed angles


def parse_numbers(text: str, lo: float, hi: float, what: str) -> list:
    """'0, 15, 30' -> [0.0, 15.0, 30.0] (duplicates dropped); ValueError naming the bad item or range."""
    out = []
    for tok in re.split(r"[,\s;]+", str(text).strip()):
        if not tok:
            continue
        try:
            v = float(tok)
        except ValueError:
            raise ValueError(f"{what}: {tok!r} is not a number") from None
        if not (math.isfinite(v) and lo <= v <= hi):
            raise ValueError(f"{what}: {tok} is outside [{lo:g}, {hi:g}]")
        if v not in out:
            out.append(v)
    if not out:
        raise ValueError(f"{what}: give at least one number")
    return out


def parity_vector(n: int, k: int, seed: int) -> torch.Tensor:
    """A random parity input [1, n] with exactly k non-zeros (±1), seeded."""
    k = int(min(max(k, 0), n))
    x, _, _ = D.parity_batch(1, n, k, k, torch.Generator().manual_seed(int(seed)))
    return x


def parse_vector(text: str, n: int) -> torch.Tensor:
    """'1 -1 0 ...' or '+-0...' -> [1, n] float in {-1, 0, 1}. ValueError with a plain message."""
    s = str(text).strip()
    if re.fullmatch(r"[+\-0]+", s):
        vals = [1.0 if t == "+" else -1.0 if t == "-" else 0.0 for t in s]       # compact: +-0+0-
    else:
        vals = []
        for tok in re.split(r"[,\s;]+", s):
            if not tok:
                continue
            if tok not in ("1", "+1", "-1", "0", "+", "-"):
                raise ValueError(f"{tok!r} is not one of -1, 0, 1")
            vals.append(1.0 if tok in ("1", "+1", "+") else -1.0 if tok in ("-1", "-") else 0.0)
    if len(vals) != n:
        raise ValueError(f"this model takes {n} values, got {len(vals)}")
    return torch.tensor([vals])
