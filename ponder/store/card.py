"""The run card (run.json) and the files of a run folder: what a card holds, the one reader that
checks it (the ranges it checks: card_checks.py), and the one way to change it.

A run folder holds:
    model.safetensors   the weights (see ponder.store.checkpoint)
    run.json            the card, format 2: its schema is ponder.store.record.RunRecord (the model config, the
                        training config with the task, N and lambda_p, status, device, training time,
                        metrics, library version); a format-1 card is converted as it is read
    metrics.jsonl       the training history, one progress report per line
"""
from __future__ import annotations

import json
import os
import threading
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Optional

from ..files import CheckpointError, folder_lock, holds_lock, os_reason, read_regular
from ..journal import atomic_write_json, settle
from ..text import text_ok, walk_problem
from .card_checks import MAX_CARD_TEXT, MAX_RUN_STEPS, check_card
from .record import FORMAT, FORMAT_VERSION, RunRecord, card_text
from ..config import ConfigError, finite, short_repr

WEIGHTS, CARD, HISTORY = "model.safetensors", "run.json", "metrics.jsonl"
MAX_CARD_BYTES = 1024 * 1024          # a run.json is a few kB; refuse megabytes of JSON
MAX_JSON_DEPTH = 64                   # nesting a card or sweep.json may have (they use 6); deeper is refused, since
                                      # the code that copies, checks and writes them back recurses once per level
MAX_HISTORY_BYTES = 64 * 1024 * 1024   # a metrics.jsonl over this is not read (the shipped ones are < 1 MB)
MAX_HISTORY_NUMBER = 1e15              # a training history's numbers (plotly refuses integers over 64 bits)
HISTORY_NUMBERS = ("step", "total_steps", "epoch", "loss", "rec", "reg", "accuracy", "mean_steps", "elapsed", "lr",
                   "val_accuracy", "max_seconds")      # the metrics.jsonl fields charts read
_CARD_LOCK = threading.Lock()         # update_card is read-modify-write: one at a time in this process


def one_line(e, limit: Optional[int] = None) -> str:
    """An error's message (or any text) on one line: its whitespace runs as one space, the exception's class name
    when it says nothing, cut to `limit` characters with '…'."""
    text = " ".join(str(e).split()) or e.__class__.__name__
    return text if limit is None or len(text) <= limit else text[:limit - 1] + "…"


def resolve_run_dir(path) -> Path:
    """The run folder named by path (or by its run.json / model.safetensors). CheckpointError if none."""
    try:
        p = Path(path)
        if p.is_file() and p.name in (WEIGHTS, CARD):
            p = p.parent
        exists, is_dir = p.exists(), p.is_dir()
    except (TypeError, ValueError, OSError) as e:     # NUL bytes, names too long, not a path at all
        raise CheckpointError(f"{short_repr(path, 200)}: not a usable path ({e.__class__.__name__}: "
                              f"{' '.join(str(e).split())})") from None
    if not exists:
        raise CheckpointError(f"{p}: no such run folder")
    if not is_dir:
        raise CheckpointError(f"{p}: not a run folder (expected a folder holding {WEIGHTS} and {CARD})")
    return p


def json_depth(obj, limit: int = MAX_JSON_DEPTH) -> int:
    """How many levels obj has (a number: 1, a list of numbers: 2), counted without recursion, up to limit + 1."""
    depth, level = 0, [obj]
    while level and depth <= limit:
        level = [v for o in level if isinstance(o, (dict, list)) for v in (o.values() if isinstance(o, dict) else o)]
        depth += 1
    return depth if not level else limit + 1


def read_json(f: Path, limit: int, what: str, follow_links: bool = True):
    """The JSON value of a regular file of at most `limit` bytes, nested at most MAX_JSON_DEPTH deep, every string
    in it usable text (ponder.text.walk_problem). CheckpointError (one line naming f) otherwise: missing, a FIFO,
    a device, a link to one (any link, with follow_links=False), too big, not UTF-8 JSON, too deep, a lone
    surrogate or a control character in a string. `what` names what it should be ('a card')."""
    try:
        value = json.loads(read_regular(f, limit, follow_links).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:     # JSONDecodeError is a ValueError
        raise CheckpointError(f"{f}: not valid JSON ({e.__class__.__name__}: {one_line(e)[:200]})") from None
    except OSError as e:
        raise CheckpointError(f"{f}: cannot read ({os_reason(e)})") from None
    if json_depth(value) > MAX_JSON_DEPTH:
        raise CheckpointError(f"{f}: nested more than {MAX_JSON_DEPTH} levels deep, not {what}")
    if (problem := walk_problem(value)) is not None:
        raise CheckpointError(f"{f}: {problem}, not {what}")
    return value


def read_card(path) -> dict:
    """The run.json of a run folder, checked; no weights loaded. The only card reader. Its train and model
    blocks come back whole (a field a card leaves out: its default, as the model is built with), and metrics.test
    holds no nulls (what was not measured is left out), so a page may index the one and format the other."""
    run_dir = resolve_run_dir(path)
    f = run_dir / CARD
    if not f.exists():
        raise CheckpointError(f"{f}: missing (not a ponder run folder)")
    if not f.is_file():
        raise CheckpointError(f"{f}: not a regular file")
    try:
        size = f.stat().st_size
    except OSError as e:
        raise CheckpointError(f"{f}: cannot read ({os_reason(e)})") from None
    if size > MAX_CARD_BYTES:
        raise CheckpointError(f"{f}: {size} bytes is over the {MAX_CARD_BYTES} byte limit for a card")
    card = read_json(f, MAX_CARD_BYTES, "a card")
    if not isinstance(card, dict) or card.get("format") != FORMAT:
        raise CheckpointError(f"{f}: not a {FORMAT} card (format field missing or wrong)")
    version = card.get("format_version", 1)
    if version == 1:
        card = from_format_1(card, f)
    elif version != FORMAT_VERSION:
        raise CheckpointError(f"{f}: card format {short_repr(version)}, this ponder reads formats 1 and "
                              f"{FORMAT_VERSION} (a newer ponder wrote it?)")
    try:
        train, model = check_card(card)
    except (ConfigError, KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"{f}: bad config: {one_line(e)}") from None
    card["train"], card["model"] = train.to_dict(), asdict(model)
    test = test_metrics(card)
    if test:                                # a number not measured (NaN, saved as null) is left out, as unmeasured
        card["metrics"]["test"] = {k: v for k, v in test.items() if v is not None}
    return card


def from_format_1(card: dict, f: Path) -> dict:
    """A format-1 card (an upload or run saved by an earlier ponder: the task, N and lambda_p both at the top and
    under train) as format 2. Converted, not refused, so such runs stay listed and importable; refused in one
    line when a top-level copy disagrees with train's, since then it is unknown which one the weights follow."""
    train = card.get("train")
    if not isinstance(train, dict):
        return card                          # check_card says what is wrong with it
    out = {k: v for k, v in card.items() if k not in ("task", "max_steps", "lambda_p")}
    out["format_version"] = FORMAT_VERSION
    out["train"] = dict(train)
    for k in ("task", "max_steps", "lambda_p"):
        if k not in card:
            raise CheckpointError(f"{f}: bad config: {k} is missing (a format-1 card holds it at the top)")
        if k in train and train[k] != card[k]:
            raise CheckpointError(f"{f}: bad config: format-1 card whose {k} {short_repr(card[k])} disagrees with "
                                  f"train.{k} {short_repr(train[k])}")
        out["train"][k] = card[k]
    return out


def read_record(path) -> RunRecord:
    """The run.json of a run folder as a RunRecord, checked by read_card."""
    return RunRecord.from_card(read_card(path))


def update_card(run_dir, **fields) -> dict:
    """Merge fields into run.json (e.g. metrics after an evaluation). The only card writer after a save.
    It holds the folder's lock while it writes (ponder.files.folder_lock), unless this thread does."""
    folder = resolve_run_dir(run_dir)
    with _CARD_LOCK, nullcontext() if holds_lock(folder) else folder_lock(folder):
        settle(folder)                    # a save cut short: its card first, then this change
        card = read_card(folder)
        card.update(fields)
        atomic_write_json(folder / CARD, card)
    return card


def test_metrics(card) -> dict:
    """The card's metrics.test mapping, {} when there is none."""
    m = card.get("metrics") if isinstance(card, dict) else None
    t = m.get("test") if isinstance(m, dict) else None
    return t if isinstance(t, dict) else {}


def two_decimals(v) -> str:
    """A table cell: '-' for a value not measured, else the number with two decimals."""
    return "-" if v is None else f"{v:.2f}"


def history_row(row) -> Optional[dict]:
    """A metrics.jsonl row as charts read it: a step in [0, MAX_RUN_STEPS], only numbers of at most
    MAX_HISTORY_NUMBER in size (charts take no larger integers) or null (not measured, NaN as saved) in the
    number fields (others dropped), a list of at most 200 (the most steps N) numbers as 'halting', and of the
    other fields only those holding a number, text (ponder.text.text_ok: no surrogate, no control character), true /
    false or null. None for a row without such a step."""
    def number(v) -> bool:
        return finite(v) and abs(v) <= MAX_HISTORY_NUMBER
    if not isinstance(row, dict) or not (number(row.get("step")) and 0 <= row["step"] <= MAX_RUN_STEPS):
        return None
    out = {k: v for k, v in row.items() if k not in HISTORY_NUMBERS and k != "halting"    # other fields: scalars
           and (v is None or isinstance(v, (bool, int, float)) or text_ok(v))    # (a nested one broke the pages'
           and text_ok(k, name=True)}                                             # cache), text that is text
    out.update({k: row[k] for k in HISTORY_NUMBERS if k in row and (row[k] is None or number(row[k]))})
    h = row.get("halting")
    if isinstance(h, list) and 0 < len(h) <= 200 and all(number(x) for x in h):
        out["halting"] = h
    return out


def read_history(path, max_rows: Optional[int] = None) -> list:
    """The metrics.jsonl of a run folder as a list of dicts ([] when absent), each checked by
    history_row: bad lines, rows without a step and values that are no numbers are skipped.
    max_rows: read only that many lines, evenly spaced, the first and last among them (what a chart
    needs of a long history)."""
    f = resolve_run_dir(path) / HISTORY
    try:
        if not f.is_file():
            return []
        text = read_regular(f, MAX_HISTORY_BYTES).decode("utf-8", errors="replace")
    except (OSError, CheckpointError):
        return []
    rows, lines = [], text.splitlines()
    if max_rows and len(lines) > max_rows:
        last = len(lines) - 1
        lines = [lines[round(i * last / (max_rows - 1))] for i in range(max_rows)] if max_rows > 1 else lines[-1:]
    for line in lines:
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            continue
        row = history_row(row)
        if row is not None:
            rows.append(row)
    return rows
