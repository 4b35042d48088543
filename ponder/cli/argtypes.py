"""The command line's argument types: each reads one flag's text and refuses a bad value in one line."""
from __future__ import annotations

import argparse
import math

from ..config import MAX_SEED


def _floats(s: str):
    try:
        vals = [float(v) for v in s.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {s!r}") from None
    if not all(math.isfinite(v) and -360.0 <= v <= 360.0 for v in vals):
        raise argparse.ArgumentTypeError(f"expected angles in [-360, 360] degrees, got {s!r}")
    return vals


def _ranges(s: str):
    vals = _floats(s)
    if not all(0.0 <= v <= 180.0 for v in vals):
        raise argparse.ArgumentTypeError(f"expected ranges in [0, 180] degrees, got {s!r}")
    return vals


def _number(s: str, cast, ok, what: str):
    """s read by cast and checked by ok; one line saying `what` was expected otherwise."""
    try:
        v = cast(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {s!r}") from None
    if not ok(v):
        raise argparse.ArgumentTypeError(f"expected {what}, got {s!r}")
    return v


def _positive_int(s: str) -> int:
    return _number(s, int, lambda v: v >= 1, "a whole number >= 1")


def _unit(s: str) -> float:
    return _number(s, float, lambda v: 0.0 <= v <= 1.0, "a number in [0, 1]")


def _budget(s: str) -> float:
    return _number(s, float, lambda v: math.isfinite(v) and v >= 1.0, "a mean number of steps >= 1")


MAX_EVAL_ITEMS = 1_000_000      # --limit: parity draws that many problems (10,000 by default; ~30 MB at n = 30)


def _eval_items(s: str) -> int:
    v = _positive_int(s)
    if v > MAX_EVAL_ITEMS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_EVAL_ITEMS:,} test items, got {s!r}")
    return v


MAX_EVAL_STEPS = 1000          # evaluate --max-steps: a full unroll keeps [CAP, batch, ...] outputs


def _eval_steps(s: str) -> int:
    v = _positive_int(s)
    if v > MAX_EVAL_STEPS:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_EVAL_STEPS} steps, got {s!r}")
    return v


def _seed(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {s!r}") from None
    if not 0 <= v <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"seed must be an integer in [0, 2**63 - 1], got {s!r}")
    return v
