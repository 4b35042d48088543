"""Ship a trained run folder as a model in assets/: its weights and card as trained (the card's name becomes
the shipped name), its training history thinned to one row every K optimiser steps plus every validation row
and the last one (assets/ holds 10 MB in all; a 40,000-step parity history is 1.7 MB, thinned to every 500th
step about 40 KB). The shipped copy is then loaded and checked like any run.

    python -m bench.ship_run /path/to/run assets/parity-15 --every 500
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from ponder.store.card import CARD, HISTORY, WEIGHTS, read_history, update_card
from ponder.store.checkpoint import history_bytes, load_checkpoint


def thin(rows: list, every: int) -> list:
    """The rows at multiples of `every` steps, every row with a validation accuracy, and the last row."""
    return [r for i, r in enumerate(rows)
            if r["step"] % every == 0 or r.get("val_accuracy") is not None or i == len(rows) - 1]


def ship(run: Path, dest: Path, every: int = 500) -> dict:
    """Copy `run` to `dest` (a new folder); returns {rows, kept, bytes}."""
    load_checkpoint(run)                                    # a run that loads, with a card, or an error here
    if dest.exists():
        raise SystemExit(f"{dest} exists: remove it first")
    rows = read_history(run)
    kept = thin(rows, every)
    dest.mkdir(parents=True)
    for name in (WEIGHTS, CARD):
        shutil.copyfile(run / name, dest / name)
    (dest / HISTORY).write_bytes(history_bytes(kept))
    update_card(dest, name=dest.name)
    load_checkpoint(dest)
    return dict(rows=len(rows), kept=len(kept), bytes=sum(f.stat().st_size for f in dest.iterdir()))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="the trained run folder")
    ap.add_argument("dest", type=Path, help="the shipped folder to create, e.g. assets/parity-15")
    ap.add_argument("--every", type=int, default=500, help="keep one history row every this many steps (500)")
    a = ap.parse_args(argv)
    r = ship(a.run, a.dest, a.every)
    print(f"{a.dest}: {r['kept']} of {r['rows']} history rows kept, {r['bytes']:,} bytes")


if __name__ == "__main__":
    main()
