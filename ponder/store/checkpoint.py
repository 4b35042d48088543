"""Weights: save a run folder, load a model from one. Never unpickles anything.

save_run writes model.safetensors, run.json and metrics.jsonl atomically (ponder.files);
load_checkpoint reads the card (ponder.store.card.read_card) and the safetensors weights, checks them
against the card's config and builds the model.
"""
from __future__ import annotations

import errno
import json
import os
import pickletools
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from ..files import (SaveError, folder_lock, holds_lock, json_bytes, jsonable, os_reason, remove_if_empty,
                     remove_stale_tmp)
from ..journal import settle, settle_if_free, write_files
from .card import CARD, FORMAT, HISTORY, WEIGHTS, CheckpointError, one_line, read_card, read_regular, resolve_run_dir
from .record import RunRecord, new_record
from ..config import ConfigError
from ..halting import PonderNet
from ..tasks import build_model, get_task, model_config_dict

MAX_CHECKPOINT_BYTES = 200 * 1024 * 1024
SMALL_MODEL_FIELD = 512               # model sizes up to this are built directly when loading
WEIGHT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)   # cast to float32 on load


@dataclass
class Checkpoint:
    model: PonderNet
    record: RunRecord        # its card, checked (ponder.store.card.read_card)
    path: Path

    @property
    def name(self) -> str:
        return self.record.name or self.path.name

    @property
    def task(self) -> str:
        return self.record.task


HISTORY_DIGITS = 5     # significant digits of the floats in metrics.jsonl: a chart history (and a small one)


def chart_precision(v):
    """Floats rounded to HISTORY_DIGITS significant digits, inside lists and dicts too."""
    if isinstance(v, float):
        return float(f"{v:.{HISTORY_DIGITS}g}")
    if isinstance(v, list):
        return [chart_precision(x) for x in v]
    if isinstance(v, dict):
        return {k: chart_precision(x) for k, x in v.items()}
    return v


def history_bytes(history: list) -> bytes:
    """metrics.jsonl's bytes: one progress report per line, floats at chart precision."""
    return "".join(json.dumps(chart_precision(jsonable(h))) + "\n" for h in history).encode()


def save_run(run_dir, model: PonderNet, config, *, status: str = "completed", reason: str = "",
             device: str = "cpu", train_seconds: float = 0.0, steps: int = 0, history: Optional[list] = None,
             metrics: Optional[dict] = None, name: Optional[str] = None) -> Path:
    """Write a run folder (weights, card, history). Returns the folder.

    config: the run's RunRecord (written as its card), or its TrainConfig with the record's fields as keywords.
    Either way the card's model config, N and lambda_p are the model's (those of the weights saved), and its
    name is the folder's unless the record or `name` gives one. The card holds `metrics` or none: a card's
    metrics always belong to the weights saved with it, never to weights it replaces. The folder is locked while it is written (ponder.files.folder_lock;
    SaveError 'in use' when another writer holds it), so temporary files a killed save left are
    removed at once; a folder this call created is removed again when the save fails.
    """
    run_dir = Path(run_dir)
    created = not run_dir.exists()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SaveError(run_dir, e, "cannot create the run folder") from None
    if not run_dir.is_dir():
        raise SaveError(run_dir, OSError(errno.ENOTDIR, "not a folder"), "cannot create the run folder")
    try:
        with nullcontext() if holds_lock(run_dir) else folder_lock(run_dir):
            # the folder is ours alone now: a journal or .tmp file is a killed writer's, not a live one's
            settle(run_dir, (WEIGHTS, CARD, HISTORY))
            record = config if isinstance(config, RunRecord) else new_record(
                config, {}, status=status, reason=reason, device=device, train_seconds=train_seconds, steps=steps,
                metrics=metrics)
            _write_run(run_dir, model, record.completed(name=name or record.name or run_dir.name), history)
    except BaseException:
        if created:
            remove_if_empty(run_dir)        # a failed save leaves no empty run folder behind
        raise
    return run_dir


def _write_run(run_dir: Path, model: PonderNet, record: RunRecord, history: Optional[list]) -> None:
    """save_run's files, written atomically; the caller holds the folder's lock."""
    from safetensors.torch import save

    tensors = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    files = {run_dir / WEIGHTS: save(tensors, metadata={"format": FORMAT})}
    if history is not None or os.path.lexists(run_dir / HISTORY):     # none: a run it replaces keeps no history
        files[run_dir / HISTORY] = None if history is None else history_bytes(history)
    record = record.completed(model=model_config_dict(model), created="",
                              train=dict(record.train, max_steps=model.max_steps, lambda_p=model.lambda_p))
    files[run_dir / CARD] = json_bytes(record.to_card())
    # renamed under a journal (ponder.journal): a crash leaves the old run or, once settled, the new one
    write_files(files)


def looks_like_pickle(raw: bytes) -> bool:
    """A torch.save zip or a pickle of any protocol (0-5). Parsed by opcodes only, never executed."""
    if raw[:4] == b"PK\x03\x04" or (raw[:1] == b"\x80" and raw[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05")):
        return True
    try:
        for n, (op, _arg, _pos) in enumerate(pickletools.genops(raw[: 1 << 20])):
            if op.name == "STOP":
                return True
            if n > 100000:
                return False
    except Exception:
        return False
    return False


def read_weights(f: Path) -> dict:
    """The tensors of a safetensors file, checked for size and format. CheckpointError otherwise."""
    from safetensors.torch import load

    if not f.exists():
        raise CheckpointError(f"{f}: missing")
    if not f.is_file():                      # a folder, a FIFO, a device: never read it
        raise CheckpointError(f"{f}: not a regular file")
    try:
        size = f.stat().st_size
        if size == 0:
            raise CheckpointError(f"{f}: empty file")
        if size > MAX_CHECKPOINT_BYTES:
            raise CheckpointError(f"{f}: {size} bytes is over the {MAX_CHECKPOINT_BYTES} byte limit")
        raw = read_regular(f, MAX_CHECKPOINT_BYTES)
    except OSError as e:
        raise CheckpointError(f"{f}: cannot read ({os_reason(e)})") from None
    try:
        state = load(raw)                    # safetensors: a JSON header and raw numbers, no code
    except Exception as e:  # SafetensorError and friends: any parse failure is a bad file
        if looks_like_pickle(raw):
            raise CheckpointError(f"{f}: looks like a pickle / torch.save file; refused, only safetensors "
                                  f"weights are loaded (pickles can run code)") from None
        raise CheckpointError(f"{f}: not a valid safetensors file ({one_line(e)[:200]})") from None
    if not state:
        raise CheckpointError(f"{f}: holds no tensors")
    return state


def load_checkpoint(path, device="cpu") -> Checkpoint:
    """Load a run folder (or its run.json / model.safetensors). Never unpickles anything.

    Raises CheckpointError with a one-line message naming the file on any problem:
    missing, empty, truncated, corrupt, not safetensors (e.g. a pickle), or weights
    that do not fit the config.
    """
    run_dir = resolve_run_dir(path)
    settle_if_free(run_dir)                  # a save cut short by a crash: finish it, so the files belong together
    card = read_card(run_dir)
    f = run_dir / WEIGHTS
    state = read_weights(f)
    # A card may ask for a huge model (every size up to 4096) next to tiny weights. Such a model
    # is built on the meta device first (no memory) and only built for real once its shapes are
    # known to match weights that passed the size limit. Usual sizes skip that: the first meta
    # build imports torch's Python meta kernels, about a second.
    def build():
        train = card["train"]
        return build_model(train["task"], card["model"], train["max_steps"], train["lambda_p"],
                           train.get("lambda_input", "hidden"), train.get("lambda_head", "linear"),
                           train.get("method", "ponder"), train.get("act_epsilon", 0.01))

    model = None
    try:
        if all(not isinstance(v, int) or v <= SMALL_MODEL_FIELD for v in card["model"].values()):
            model = build()
            expected = {k: (tuple(v.shape), v.dtype) for k, v in model.state_dict().items()}
        else:
            with torch.device("meta"):
                expected = {k: (tuple(v.shape), v.dtype) for k, v in build().state_dict().items()}
    except (ConfigError, KeyError, TypeError, ValueError, RuntimeError) as e:
        raise CheckpointError(f"{run_dir / CARD}: bad config: {one_line(e)}") from None
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        raise CheckpointError(f"{f}: weights do not fit the config (missing {missing[:3]}, unexpected {extra[:3]})")
    cast = {}
    for k, v in state.items():
        if tuple(v.shape) != expected[k][0]:
            raise CheckpointError(f"{f}: weights do not fit the config ({k} has shape {tuple(v.shape)}, "
                                  f"config needs {expected[k][0]})")
        if v.dtype not in WEIGHT_DTYPES:
            raise CheckpointError(f"{f}: weight {k} has dtype {str(v.dtype).replace('torch.', '')}, "
                                  f"expected floating point (float32)")
        cast[k] = v.to(expected[k][1])          # checked after the cast: 1e300 in float64 is inf in float32
        if not torch.isfinite(cast[k]).all():
            raise CheckpointError(f"{f}: weight {k} holds NaN or inf"
                                  + ("" if v.dtype == cast[k].dtype else f" as {str(cast[k].dtype).replace('torch.', '')}"))
        tiny = torch.finfo(cast[k].dtype).tiny  # subnormal weights (1e-40) change no answer and ran ~5x slower
        cast[k] = torch.where(cast[k].abs() < tiny, torch.zeros_like(cast[k]), cast[k])
    if model is None:
        model = build()
    model.load_state_dict(cast)
    model.eval()
    _check_unroll(model, card["train"]["task"], f)
    model.to(device)
    return Checkpoint(model=model, record=RunRecord.from_card(card), path=run_dir)


def _check_unroll(model: PonderNet, task: str, f: Path) -> None:
    """CheckpointError unless the model's answers and halting stay finite on its task's probe inputs (finite weights
    can still overflow inside the network, and every page would show E[n] as nan)."""
    x = get_task(task).probe_inputs(model.step_fn.cfg)
    if x is None:
        return
    with torch.no_grad():
        out = model(x)
    if not (torch.isfinite(out.y).all() and torch.isfinite(out.lambda_logits).all()):
        raise CheckpointError(f"{f}: the weights overflow inside the network (its answers or halting are inf or NaN "
                              f"on plain inputs of its task); refused")
