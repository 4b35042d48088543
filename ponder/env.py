"""Numbers and folders the server's environment sets, read one way: a number must be finite and in its range, else
EnvError says which variable, what it holds and what it may hold, in one line; a folder has its "~" expanded."""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Optional

from .config import ConfigError


MAX_MB = float(2 ** 30)      # the most megabytes a size may be set to (1 PiB): its bytes stay an exact int


class EnvError(ConfigError):
    """An environment variable that does not hold what it should (a ConfigError: pages and the CLI show one line)."""


def env_number(name: str, default: Optional[float], lo: float = 0.0, hi: float = math.inf) -> Optional[float]:
    """$name as a finite float in [lo, hi]; `default` where it is unset or empty. EnvError (one line) for text
    that is not a number, for inf, nan, 1e400 (inf once read) and for a number outside the range."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    shown = raw if len(raw) <= 40 else raw[:40] + "…"
    try:
        v = float(raw)
    except ValueError:
        raise EnvError(f"{name}={shown!r} is not a number; set a number from {lo:g} to {hi:g}, or unset it") from None
    if not (math.isfinite(v) and lo <= v <= hi):
        raise EnvError(f"{name}={shown!r} is not a finite number from {lo:g} to {hi:g}; set one, or unset it")
    return v


def env_folder(name: str, default: str) -> Path:
    """$name (default where unset or empty) as a path, with a leading "~" expanded to the home folder."""
    return Path(os.environ.get(name) or default).expanduser()
