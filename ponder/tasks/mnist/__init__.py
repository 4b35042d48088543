"""MNIST: classify a digit. task.py (the task, its model config and batches; registered on import), options.py
(its options), readers.py (the step functions), recall.py (the weight-tied recall step)."""
from . import task  # noqa: F401  (registers the task)
