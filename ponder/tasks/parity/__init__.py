"""Parity (the paper's): the parity of a vector's ones. task.py (the task, its model, data presets and test sets;
registered on import), options.py (its options)."""
from . import task  # noqa: F401  (registers the task)
