"""A training run's state between two sessions: the weights, Adam's moments, the batch stream's generator, the
step, the seconds spent and the progress history, in one safetensors file (resume.safetensors in the run folder;
the non-tensor parts as JSON in its metadata). Written every few minutes by the loop's checkpoint callback and
read back by `ponder train --resume`: the same command continues where the file says. Never unpickled.
"""
from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import torch

from ..config import ConfigError
from ..files import CheckpointError, read_regular, unlink_quiet, write_tmp

STATE_FILE = "resume.safetensors"
MAX_STATE_BYTES = 400 * 1024 * 1024        # weights + two Adam moments of the largest model a card allows
MAX_HISTORY_ROWS = 200_000
EXTENDABLE = ("epochs", "max_seconds")     # a resumed run may be given more (or fewer) updates or seconds


@dataclass
class TrainState:
    """Where a run stands after `step` updates; what ponder.training.loop.train(resume=...) continues from."""
    config: dict                                 # the run's TrainConfig.to_dict(): a resume refuses another one
    step: int                                    # optimiser updates done
    elapsed: float                               # seconds of training loop so far (the time budget's clock)
    history: list = field(default_factory=list)  # the progress reports so far (Progress dicts)
    model: dict = field(default_factory=dict)    # {name: tensor} the model's state_dict
    optimizer: dict = field(default_factory=dict)   # torch.optim state_dict: {"state": {i: {k: tensor}}, "param_groups"}
    batches: dict = field(default_factory=dict)  # {name: tensor} the batch stream's state (Batches.state)


def _flat(state: TrainState) -> tuple:
    """(tensors, metadata) for safetensors: tensors under model./opt./batches. prefixes, the rest as JSON."""
    tensors = {f"model.{k}": v.detach().contiguous().cpu() for k, v in state.model.items()}
    opt_scalars = {}
    for i, s in state.optimizer.get("state", {}).items():
        for k, v in s.items():
            if isinstance(v, torch.Tensor):
                tensors[f"opt.{i}.{k}"] = v.detach().contiguous().cpu()
            else:
                opt_scalars[f"{i}.{k}"] = v
    tensors.update({f"batches.{k}": v.detach().contiguous().cpu() for k, v in state.batches.items()})
    groups = [{k: (float(v) if isinstance(v, torch.Tensor) else v) for k, v in g.items()}
              for g in state.optimizer.get("param_groups", [])]
    meta = dict(config=state.config, step=state.step, elapsed=state.elapsed, history=state.history,
                param_groups=groups, opt_scalars=opt_scalars)
    return tensors, {"ponder_train_state": json.dumps(meta)}


def save_state(folder, state: TrainState) -> Path:
    """Write the state atomically to folder/resume.safetensors (a crash mid-write keeps the previous one)."""
    from safetensors.torch import save
    path = Path(folder) / STATE_FILE
    tensors, meta = _flat(state)
    tmp = write_tmp(path, save(tensors, metadata=meta))
    try:
        os.replace(tmp, path)
    except OSError:
        unlink_quiet(tmp)
        raise
    return path


def _metadata(raw: bytes, f: Path) -> dict:
    """The JSON metadata of a safetensors file's header (8-byte little-endian length, then the JSON)."""
    try:
        (n,) = struct.unpack("<Q", raw[:8])
        header = json.loads(raw[8:8 + n].decode("utf-8"))
        return json.loads(header["__metadata__"]["ponder_train_state"])
    except (struct.error, ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise CheckpointError(f"{f}: not a ponder training state ({type(e).__name__})") from None


def load_state(folder) -> Optional[TrainState]:
    """The state saved in folder (None when there is none). CheckpointError (one line) for a bad file."""
    from safetensors.torch import load
    f = Path(folder) / STATE_FILE
    if not f.exists():
        return None
    try:
        raw = read_regular(f, MAX_STATE_BYTES)
    except OSError as e:
        raise CheckpointError(f"{f}: cannot read ({e.strerror or e})") from None
    meta = _metadata(raw, f)
    try:
        tensors = load(raw)
    except Exception as e:                      # any parse failure is a bad file
        raise CheckpointError(f"{f}: not a valid safetensors file ({type(e).__name__})") from None
    ok = (isinstance(meta, dict) and isinstance(meta.get("config"), dict) and isinstance(meta.get("step"), int)
          and isinstance(meta.get("elapsed"), (int, float)) and isinstance(meta.get("history"), list)
          and len(meta["history"]) <= MAX_HISTORY_ROWS and isinstance(meta.get("param_groups"), list))
    if not ok:
        raise CheckpointError(f"{f}: its metadata is not a training state")
    opt_state: dict = {}
    for k, v in tensors.items():
        if k.startswith("opt."):
            _, i, name = k.split(".", 2)
            opt_state.setdefault(int(i), {})[name] = v
    for k, v in meta.get("opt_scalars", {}).items():
        i, name = k.split(".", 1)
        opt_state.setdefault(int(i), {})[name] = v
    return TrainState(config=meta["config"], step=meta["step"], elapsed=float(meta["elapsed"]),
                      history=meta["history"],
                      model={k[6:]: v for k, v in tensors.items() if k.startswith("model.")},
                      optimizer={"state": opt_state, "param_groups": meta["param_groups"]},
                      batches={k[8:]: v for k, v in tensors.items() if k.startswith("batches.")})


def remove_state(folder) -> None:
    """Delete the saved state (the run finished and was saved as a run)."""
    unlink_quiet(Path(folder) / STATE_FILE)


def restore(state: TrainState, cfg, model, update, batches) -> None:
    """Put a saved TrainState into a freshly set-up run of the same cfg (ConfigError for another cfg, EXTENDABLE aside)."""
    now, saved = cfg.to_dict(), with_later_defaults(state.config, cfg)
    diff = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k) and k not in EXTENDABLE)
    if diff:
        raise ConfigError(f"the saved training state is of another config (differs in {', '.join(diff[:4])})")
    model.load_state_dict(state.model)
    groups = update.opt.state_dict()["param_groups"]          # this run's hyperparameters, the saved moments
    update.opt.load_state_dict({"state": state.optimizer["state"],
                                "param_groups": [dict(g, params=s["params"]) for g, s in
                                                 zip(groups, state.optimizer["param_groups"])]})
    batches.load_state(state.batches)


def with_later_defaults(saved: dict, cfg) -> dict:
    """A saved config with the fields and task options an older ponder did not have filled in with their defaults
    (the run trained as those defaults do), so a state saved before they existed still resumes."""
    from ..config import TrainConfig
    from ..tasks import get_task
    from ..tasks.options import option_defaults
    out = {**TrainConfig().to_dict(), **saved}
    defaults = option_defaults(get_task(cfg.task))
    out["options"] = {**{k: defaults[k] for k in cfg.options if k in defaults}, **(saved.get("options") or {})}
    return out


def snapshot(cfg, step: int, elapsed: float, history: list, model, update,
             batches) -> TrainState:
    """The run's TrainState after `step` updates (tensors copied to the host)."""
    return TrainState(config=cfg.to_dict(), step=step, elapsed=elapsed, history=list(history),
                      model={k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
                      optimizer=_copied(update.opt.state_dict()), batches=batches.state())


def _copied(opt_state: dict) -> dict:
    """An optimiser state_dict whose tensors are copies on the host (state_dict() hands out the live moments)."""
    return {"state": {i: {k: v.detach().cpu().clone() if isinstance(v, torch.Tensor) else v for k, v in s.items()}
                      for i, s in opt_state["state"].items()},
            "param_groups": opt_state["param_groups"]}
