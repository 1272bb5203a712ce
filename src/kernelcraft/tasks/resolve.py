"""From what a user names to tasks: a task by name or file (`resolve_task`), the tasks of a target with
its shape selection and size overrides (`resolve_target`), and the checks of those options."""

from __future__ import annotations

import ast
import math
import reprlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .hgemm import GEMM_FAMILIES, Shape, hgemm_task, hgemm_tasks, is_hgemm_target, parse_shapes
from .loader import (EXAMPLES_DIR, EXAMPLES_SUITE, TaskError, constant_values, load_suite, load_task_file,
                     module_constants)
from .model import Task
from .shape_capture import matmul_shapes
from .user_module import task_from_module


def resolve_task(spec: str | Path) -> Task:
    """One task from a file path, a bundled example by name (`softmax_rows` or `examples/softmax_rows`),
    or one shape of a GEMM family (`hgemm/4096x4096x512`, `hgemm-wt/4096x4096x512`)."""
    p = Path(spec)
    if p.is_file():
        return load_task_file(p)
    task = named_task(str(spec))
    if task is not None:
        return task
    if p.is_dir():
        raise TaskError(f"{spec}: a directory, not a task file (eval-suite and optimize take a directory of tasks)")
    raise TaskError(f"{spec}: no such task file or bundled example")


def named_task(spec: str) -> Task | None:
    """The task a name gives, reading none of the user's files: a bundled example (`softmax_rows`,
    `examples/softmax_rows`) or one shape of a GEMM family (`hgemm/4096x4096x512`); None for any other spec."""
    family, _, rest = spec.partition("/")
    if family in GEMM_FAMILIES and rest:
        shapes = parse_shapes(rest)
        if len(shapes) > 1:
            raise TaskError(f"{spec}: one shape names one task, not {len(shapes)}")
        return hgemm_task(shapes[0], family)
    name = spec.removeprefix(f"{EXAMPLES_SUITE}/")
    bundled = EXAMPLES_DIR / f"{name}.py"
    if "/" not in name and name not in ("", ".", "..") and bundled.is_file():
        return load_task_file(bundled, key=f"{EXAMPLES_SUITE}/{name}", suite=EXAMPLES_SUITE)
    return None


def parse_sizes(items: Sequence[str]) -> dict[str, Any]:
    """Size overrides `NAME=VALUE` (`--set`), each value a Python literal."""
    sizes: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.isidentifier():
            raise TaskError(f"--set {item!r}: expected NAME=VALUE")
        try:
            sizes[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise TaskError(f"--set {item!r}: {value!r} is not a Python literal") from None
    return sizes


def check_sizes(task: Task, sizes: Mapping[str, Any], flag: str = "--set") -> None:
    """The rule on size overrides (`--set`, the reward service's `sizes`; `flag` names them in errors): each names a
    module-level constant of `task` and is of its kind (`constant_values`: an integer for an integer, a number for a
    float, a list or tuple of as many items for a sequence, item by item), and a constant that is a positive integer,
    a size or a count, stays positive: 0 or less would judge a degenerate task. A constant the source does not
    state as a value takes anything. Raises TaskError; its `reason` quotes nothing of the task's source."""
    constants = module_constants(task.source)
    unknown = sorted(set(sizes) - constants)
    if unknown:
        raise TaskError(f"{flag} {unknown[0]}: not a module-level constant of {task.key} "
                        f"(its constants: {', '.join(sorted(constants)) or 'none'})",
                        f"{flag} {unknown[0]}: not a module-level constant of {task.key}")
    values = constant_values(task.source)
    for key, value in sizes.items():
        why = _unfit(value, values[key]) if key in values else None
        if why is not None:
            shown = f"{flag} {key}={reprlib.repr(value)}: {why}"
            raise TaskError(f"{shown} ({key} = {reprlib.repr(values[key])} in {task.key})", shown)


def _unfit(value: Any, like: Any) -> str | None:
    """Why `value` cannot stand for a constant whose value is `like`, or None if it can."""
    if isinstance(like, bool):
        return None if isinstance(value, bool) else "must be true or false"
    if isinstance(like, int):
        if isinstance(value, bool) or not isinstance(value, int):
            return "must be an integer"
        return "must be a positive integer (a size)" if like > 0 and value <= 0 else None
    if isinstance(like, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return "must be a finite number"
        return None
    if isinstance(like, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(value) != len(like):
            return f"must be a list of {len(like)} items"
        return next((f"item {i} {why}" for i, (v, l) in enumerate(zip(value, like))
                     if (why := _unfit(v, l)) is not None), None)
    if like is None or isinstance(value, type(like)):
        return None
    return f"must be a {type(like).__name__}"


def sized_task(spec: str, device: str, sets: Sequence[str] = ()) -> Task:
    """One task (`resolve_task`) at the sizes `sets` gives, checked by `check_sizes`."""
    task, sizes = resolve_task(spec), parse_sizes(sets)
    check_sizes(task, sizes)
    return task.with_sizes(device, sizes)


def is_module_target(target: str) -> bool:
    """Whether `target` names a user's module class, `path.py:Class`."""
    return ":" in target and target.rpartition(":")[0].endswith(".py")


def select_shapes(target: str, *, sample: int | None = None, shapes: Sequence[str] | None = None,
                  from_model: str | None = None, inputs: str | None = None, init_inputs: str | None = None,
                  sets: Sequence[str] = ()) -> list[Shape] | None:
    """The hgemm shapes these options choose, checked against the target: the listed `shapes` ("MxNxK",
    each item may list several), else the matmuls of one forward pass of `from_model` (with `inputs`),
    else None (the grid, or `sample` of it). A `from_model` whose `shapes` are given was captured before."""
    hgemm = is_hgemm_target(target)
    captured = from_model is not None and shapes is not None
    given = [flag for flag, v in (("--sample", sample), ("--shapes", None if captured else shapes),
                                  ("--from-model", from_model)) if v is not None]
    if given and not hgemm:
        raise TaskError(f"{given[0]} chooses shapes of the hgemm suite only, not of the target {target!r}")
    if len(given) > 1:
        raise TaskError(f"give at most one of --sample, --shapes and --from-model, not {' and '.join(given)}")
    if from_model is not None and inputs is None and not captured:
        raise TaskError("--from-model needs --inputs PATH.py:FN (a function making example forward inputs)")
    if hgemm and from_model is None and (inputs is not None or init_inputs is not None):
        raise TaskError("--inputs and --init-inputs go with --from-model for the hgemm suite")
    if hgemm and sets:
        raise TaskError("--set does not apply to hgemm: each task is one shape; choose shapes with --shapes")
    if shapes is not None:
        return parse_shapes(",".join(shapes))
    if from_model is not None:
        return matmul_shapes(from_model, inputs, init_inputs)
    return None


def resolve_target(target: str, *, device: str = "cpu", sets: Sequence[str] = (), inputs: str | None = None,
                   init_inputs: str | None = None, sample: int | None = None, shapes: Sequence[str] | None = None,
                   from_model: str | None = None) -> list[Task]:
    """The tasks of a target at the sizes `sets` gives: the hgemm suite's selected shapes (`select_shapes`), a
    user's module (`path.py:Class` with `inputs`), a task file, a suite directory or KernelBench tree,
    `examples`, or a task by name (`resolve_task`)."""
    listed = select_shapes(target, sample=sample, shapes=shapes, from_model=from_model, inputs=inputs,
                           init_inputs=init_inputs, sets=sets)
    sizes = parse_sizes(sets)
    if is_hgemm_target(target):
        tasks = hgemm_tasks(sample=sample, shapes=listed, family=target)
    elif is_module_target(target) and inputs is None:
        raise TaskError(f"{target}: a module target needs --inputs PATH.py:FN (a function making example inputs)")
    elif is_module_target(target):
        tasks = [task_from_module(target, inputs, init_inputs)]
    elif inputs is not None or init_inputs is not None:
        raise TaskError("--inputs and --init-inputs go with a module target PATH.py:Class or with --from-model")
    elif Path(target).exists() or target == EXAMPLES_SUITE or not _names_one_task(target):
        tasks = load_suite(target)
    else:
        tasks = [resolve_task(target)]
    for t in tasks:
        check_sizes(t, sizes)
    return [t.with_sizes(device, sizes) for t in tasks]


def _names_one_task(target: str) -> bool:
    """Whether a target that is no file names one task: a bundled example (`softmax_rows`, `examples/softmax_rows`)
    or a GEMM family's shape (`hgemm/64x64x64`); any other path is a suite, and a missing one says so."""
    head, _, rest = target.partition("/")
    return not rest or ((head == EXAMPLES_SUITE or head in GEMM_FAMILIES) and "/" not in rest)


__all__ = ["check_sizes", "is_module_target", "named_task", "parse_sizes", "resolve_target", "resolve_task",
           "select_shapes", "sized_task"]
