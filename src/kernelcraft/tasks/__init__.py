"""Tasks: reference modules in KernelBench format, their loaders and the bundled example suite."""

from .loader import (
    EXAMPLES_SUITE,
    TaskError,
    find_solution,
    load_suite,
    load_task_file,
    resolve_task,
    task_from_source,
)
from .model import Task, TaskMeta
from .user_module import task_from_module

__all__ = [
    "EXAMPLES_SUITE",
    "Task",
    "TaskError",
    "TaskMeta",
    "find_solution",
    "load_suite",
    "load_task_file",
    "resolve_task",
    "task_from_module",
    "task_from_source",
]
