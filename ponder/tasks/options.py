"""A task's options: the settings only its runs read, declared once as a dataclass (Task.options_cls) whose
fields say, beside their defaults, what the `ponder train` flag and the Train form's widget are made from (the
help text, a label, the choices or the range). The CLI and the form read the fields; nothing lists them by hand.

Where an option's value lives in a TrainConfig: in the field of that name when TrainConfig has one (the MNIST and
parity options predate this module and are stored flat in every card), else in TrainConfig.options.
"""
from __future__ import annotations

from dataclasses import MISSING, Field, field, fields
from typing import Optional

from ..config import ConfigError, TrainConfig, _check, finite, is_int, short_repr

FLAT = frozenset(TrainConfig.__dataclass_fields__) - {"options"}   # options stored as TrainConfig fields


def option(default, help: str, *, label: str = "", choices: Optional[tuple] = None, labels: Optional[dict] = None,
           lo: Optional[float] = None, hi: Optional[float] = None, step: Optional[float] = None,
           slider: bool = False, note: str = "") -> Field:
    """A field of an options dataclass: its default and what its flag and widget show. default: a str (then
    `choices` lists the allowed values; `labels` their shorter names in the form), an int, a float (in [lo, hi],
    `step` apart in the form; `slider` for a slider rather than a number box) or a bool. help: one sentence;
    note: a line the form shows under the widget."""
    if not help:
        raise ValueError("a task option needs a help text")
    return field(default=default, metadata=dict(help=help, label=label, choices=tuple(choices) if choices else None,
                                                labels=dict(labels or {}), lo=lo, hi=hi, step=step, slider=slider,
                                                note=note))


def option_fields(task) -> tuple:
    """The fields of a task's options dataclass (() for a task without options)."""
    return fields(task.options_cls) if task.options_cls is not None else ()


def default_of(f: Field):
    return f.default if f.default is not MISSING else f.default_factory()


def option_defaults(task) -> dict:
    """{option: its default} of a task."""
    return {f.name: default_of(f) for f in option_fields(task)}


def options_of(task, cfg: TrainConfig):
    """The task's options dataclass holding cfg's values (a value cfg does not give is the option's default)."""
    values = {f.name: getattr(cfg, f.name) if f.name in FLAT else cfg.options.get(f.name, default_of(f))
              for f in option_fields(task)}
    return task.options_cls(**values)


def split_options(task, values: dict) -> dict:
    """TrainConfig keyword arguments for `values` given to a run of `task`: its options without a TrainConfig
    field go into `options`; a name that is neither a TrainConfig field nor one of the task's options is refused."""
    own = {f.name for f in option_fields(task)} - FLAT
    unknown = sorted(set(values) - FLAT - own - {"options"})
    if unknown:
        raise ConfigError(f"unknown config field(s) for task {task.name}: {', '.join(unknown)}")
    out = {k: v for k, v in values.items() if k in FLAT}
    extra = {k: v for k, v in values.items() if k in own}
    if extra or "options" in values:
        out["options"] = {**values.get("options", {}), **extra}
    return out


def check_option(f: Field, value) -> None:
    """ConfigError naming the option when value is not one it allows (its choices, its range, its type)."""
    m, d = f.metadata, default_of(f)
    if m.get("choices"):
        _check(value in m["choices"] and type(value) is type(d), f.name,
               f"one of {', '.join(map(str, m['choices']))}", value)
    elif isinstance(d, bool):
        _check(isinstance(value, bool), f.name, "true or false", value)
    elif isinstance(d, (int, float)):
        ok = is_int(value) if is_int(d) else finite(value)
        lo, hi = m.get("lo"), m.get("hi")
        ok = ok and (lo is None or value >= lo) and (hi is None or value <= hi)
        kind = "an integer" if is_int(d) else "a number"
        where = f" in [{lo:g}, {hi:g}]" if lo is not None and hi is not None else \
            f" >= {lo:g}" if lo is not None else f" <= {hi:g}" if hi is not None else ""
        _check(ok, f.name, kind + where, value)
    else:
        _check(isinstance(value, str), f.name, "a string", value)


def check_options(task, cfg: TrainConfig, own: bool) -> None:
    """Check the task's options in cfg: those stored as TrainConfig fields always (every run's card has them),
    those in cfg.options when cfg is a run of this task (own), which then names no option the task lacks."""
    if own:
        names = {f.name for f in option_fields(task)} - FLAT
        unknown = sorted(k for k in cfg.options if k not in names)
        if unknown:
            raise ConfigError(f"unknown option(s) of task {task.name}: {', '.join(map(short_repr, unknown))}")
    for f in option_fields(task):
        if f.name in FLAT:
            check_option(f, getattr(cfg, f.name))
        elif own:
            check_option(f, cfg.options.get(f.name, default_of(f)))
