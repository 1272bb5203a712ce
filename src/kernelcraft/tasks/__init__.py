"""Tasks: reference modules in KernelBench format, their loaders, the bundled example suite and the hgemm suite."""

from .hgemm import (
    GEMM_FAMILIES,
    GRID_SIZES,
    HGEMM_SUITE,
    HGEMM_WT_SUITE,
    Shape,
    aspect_class,
    grid,
    hgemm_task,
    hgemm_tasks,
    is_hgemm_target,
    parse_shapes,
    sample_grid,
    shape_of,
    volume_class,
)
from .loader import (
    EXAMPLES_SUITE,
    TaskError,
    find_solution,
    load_suite,
    load_task_file,
    module_constants,
    task_from_source,
)
from .model import Task, TaskMeta
from .resolve import (check_sizes, is_module_target, named_task, parse_sizes, resolve_target, resolve_task,
                      select_shapes, sized_task)
from .shape_capture import matmul_shapes
from .user_module import task_from_module

__all__ = [
    "EXAMPLES_SUITE",
    "GEMM_FAMILIES",
    "GRID_SIZES",
    "HGEMM_SUITE",
    "HGEMM_WT_SUITE",
    "Shape",
    "Task",
    "TaskError",
    "TaskMeta",
    "aspect_class",
    "check_sizes",
    "find_solution",
    "grid",
    "is_module_target",
    "hgemm_task",
    "hgemm_tasks",
    "is_hgemm_target",
    "load_suite",
    "load_task_file",
    "module_constants",
    "named_task",
    "matmul_shapes",
    "parse_shapes",
    "parse_sizes",
    "resolve_target",
    "resolve_task",
    "sample_grid",
    "select_shapes",
    "shape_of",
    "sized_task",
    "task_from_module",
    "task_from_source",
    "volume_class",
]
