"""Per-task pieces of the explorer: a folder a task, what only its pages show."""
