"""The tasks a PonderNet learns, and their registry. Each task is a folder here (its Task in task.py, registered
on import; its options dataclass in options.py), named once in the import line below; the interface and the
registry are in ponder.tasks.base.

A task says everything the rest of the code needs to know about it:
    its model config dataclass and the TrainConfig defaults that suit it,  build_step() (the step
    function of ponder.halting's protocol),  batches() (endless training batches and a validation set),
    test_set() (the test items and the difficulty groups its metrics report),  the chance level,
    its data presets, the explorer pages that show its models and a default model to show.
The training loop, the lifecycle, the CLI, the analyses and the explorer ask the registry (get_task)
and never compare a task's name. A new task: a folder with a Task subclass that calls register(MyTask()),
and its name in the import line.
"""
from .base import (TASKS, Batches, EvalSet, Task, build_model, count_parameters, get_task,  # noqa: F401
                   init_lambda_head, model_config, model_config_dict, model_config_from_dict, register,
                   step_meaning, train_config, validate)
from . import mnist, parity  # noqa: E402,F401  (each registers its task)
