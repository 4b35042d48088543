"""What a user types, turned into numbers and tensors (no Streamlit): angle lists, parity vectors, and when
the rotation slider has settled."""
from __future__ import annotations

import math
import re
from typing import Optional

import torch

from ponder.tasks.parity import data as D

DEFAULT_ANGLES = tuple(range(0, 181, 15))     # the rotation page's fixed angles
# the rotation page evaluates every test set in the page's thread: 24 sets of 10,000 images is a few
# minutes on 2 cores; 5,000 angles would be an hour
MAX_TEST_SETS = 24


MAX_NUMBERS_TEXT = 400     # characters in a list of numbers (24 angles written "-337.5, " take 192)


def _shown(tok: str) -> str:
    """A token as an error message quotes it: at most 20 characters of it."""
    return repr(tok if len(tok) <= 20 else tok[:20] + "…")


def parse_numbers(text: str, lo: float, hi: float, what: str, most: Optional[int] = None) -> list:
    """'0, 15, 30' -> [0.0, 15.0, 30.0] (duplicates dropped); ValueError naming the bad item or range, when
    there are more than `most` numbers (said at the first one over), or when the text is over MAX_NUMBERS_TEXT
    characters (said before it is read)."""
    text = str(text)
    if len(text) > MAX_NUMBERS_TEXT:
        raise ValueError(f"{what}: at most {MAX_NUMBERS_TEXT} characters, got {len(text):,}")
    out, seen = [], set()
    for tok in re.split(r"[,\s;]+", text.strip()):
        if not tok:
            continue
        try:
            v = float(tok)
        except ValueError:
            raise ValueError(f"{what}: {_shown(tok)} is not a number") from None
        if not (math.isfinite(v) and lo <= v <= hi):
            raise ValueError(f"{what}: {_shown(tok)[1:-1]} is outside [{lo:g}, {hi:g}]")
        if v not in seen:
            seen.add(v)
            out.append(v)
            if most is not None and len(out) > most:
                raise ValueError(f"{what}: at most {most} values")
    if not out:
        raise ValueError(f"{what}: give at least one number")
    return out


def parity_vector(n: int, k: int, seed: int, layout: str = "random") -> torch.Tensor:
    """A random parity input [1, n] with exactly k non-zeros (±1), seeded, placed as the model's training placed them
    (layout: random positions, or the first k entries)."""
    k = int(min(max(k, 0), n))
    x, _, _ = D.parity_batch(1, n, k, k, torch.Generator().manual_seed(int(seed)), layout=layout)
    return x


def vector_chars(n: int) -> int:
    """The most characters a typed parity vector of n values may have: '-1, ' for each, and some slack."""
    return 4 * int(n) + 64


def parse_vector(text: str, n: int) -> torch.Tensor:
    """'1 -1 0 ...' or '+-0...' -> [1, n] float in {-1, 0, 1}. ValueError with a plain message, before reading
    a text longer than vector_chars(n)."""
    s = str(text).strip()
    if len(s) > vector_chars(n):
        raise ValueError(f"this model takes {n} values; the text has {len(s):,} characters")
    if re.fullmatch(r"[+\-0]+", s):
        vals = [1.0 if t == "+" else -1.0 if t == "-" else 0.0 for t in s]       # compact: +-0+0-
    else:
        vals = []
        for tok in re.split(r"[,\s;]+", s):
            if not tok:
                continue
            if tok not in ("1", "+1", "-1", "0", "+", "-"):
                raise ValueError(f"{_shown(tok)} is not one of -1, 0, 1")
            vals.append(1.0 if tok in ("1", "+1", "+") else -1.0 if tok in ("-1", "-") else 0.0)
    if len(vals) != n:
        raise ValueError(f"this model takes {n} values, got {len(vals)}")
    return torch.tensor([vals])


NEXT_VALUE = {-1: 0, 0: 1, 1: -1}       # a click on a parity cell: −1 → 0 → +1 → −1


def vector_text(values) -> str:
    """A vector in {-1, 0, 1} as parse_vector's compact text: [1, -1, 0] -> '+-0'."""
    return "".join("+" if v > 0 else "-" if v < 0 else "0" for v in values)


def flip_cell(values, i: int) -> list:
    """values with cell i moved one value on (NEXT_VALUE)."""
    out = [int(v) for v in values]
    out[i] = NEXT_VALUE[out[i]]
    return out


def rotation_sets(angles_text: str, ranges_text: str) -> tuple:
    """The rotation page's (fixed angles, uniform ranges), at most MAX_TEST_SETS in all. ValueError otherwise."""
    angles = parse_numbers(angles_text, -360, 360, "fixed angles", most=MAX_TEST_SETS)
    ranges = parse_numbers(ranges_text, 0, 180, "uniform ranges", most=MAX_TEST_SETS) if ranges_text.strip() else []
    if len(angles) + len(ranges) > MAX_TEST_SETS:
        raise ValueError(f"at most {MAX_TEST_SETS} test sets in all (fixed angles and ranges), "
                         f"got {len(angles) + len(ranges)}")
    return angles, ranges


SETTLE_S = 0.5      # s between the rotation slider's ticks: the angle must stay put one tick before the page reruns


def settled(applied, seen, now) -> bool:
    """Whether the digit page should rerun for the rotation slider now: it has moved away from the angle the
    page shows (applied), and it was already at `now` on the previous tick (seen), so the keys have stopped."""
    return applied is not None and now != applied and seen == now
