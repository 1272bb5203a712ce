"""The task a submission names, and its stored form: a job keeps the task as it was resolved at
submission, so a restarted service judges exactly what was asked even if the file changed since.

A client names a task by name (a bundled example, a GEMM shape), by a file under one of the service's task
roots, or by its source. A path is resolved (symlinks and `..` followed) and checked against the roots before
anything is read, and what a client is told about a file on the server quotes nothing of it
(`TaskError.reason`): a token is no key to the server's files.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..tasks import Task, TaskError, TaskMeta, check_sizes, load_task_file, named_task, task_from_source
from .models import SubmitRequest

SIZES_FIELD = "sizes"  # how size overrides are named in the service's errors: the request's field


def request_task(request: SubmitRequest, device: str, roots: Sequence[Path] = ()) -> Task:
    """The task of a submission, at its size on `device`; clients may name the `.py` files under `roots`. Raises
    TaskError with a one-line message: about a file on the server, in words that quote nothing of it; about a task
    given by its source, as the CLI words it (the source is the client's own)."""
    if request.task_source is not None:
        assert request.task_name is not None  # SubmitRequest checks both
        task = task_from_source(request.task_source, request.task_name)
        check_sizes(task, request.sizes, SIZES_FIELD)
        return task.with_sizes(device, request.sizes)
    assert request.task is not None  # SubmitRequest checks that one of task and task_source is given
    task = named_task(request.task) or _file_task(request.task, roots)
    try:
        check_sizes(task, request.sizes, SIZES_FIELD)
    except TaskError as e:
        raise TaskError(e.reason) from None
    return task.with_sizes(device, request.sizes)


def _file_task(spec: str, roots: Sequence[Path]) -> Task:
    """The task file `spec` names under a root; the same refusal, whether or not such a file exists, for any other."""
    path = _under_roots(spec, roots)
    if path is None:
        raise TaskError(f"{spec}: not a task this service serves (a bundled example, hgemm/MxNxK, a .py file under "
                        f"one of its --task-root directories, or task_source)")
    try:
        return load_task_file(path)
    except TaskError as e:
        raise TaskError(f"{spec}: {e.reason}") from None


def _under_roots(spec: str, roots: Sequence[Path]) -> Path | None:
    """The `.py` file `spec` names (absolute, or relative to a root), resolved, if it lies under a root: of several,
    the first that holds a file. Only names are resolved here: no file is opened."""
    resolved, found = [Path(os.path.realpath(r)) for r in roots], []
    for root in resolved:
        try:
            path = Path(os.path.realpath(root / spec))  # an absolute spec stays itself
        except ValueError:  # a NUL byte
            return None
        if path.suffix == ".py" and any(path.is_relative_to(r) for r in resolved):
            found.append(path)
    return next((p for p in found if p.is_file()), found[0] if found else None)


def task_record(task: Task) -> dict[str, Any]:
    """A task as JSON, source included."""
    return {**task.to_dict(), "source": task.source}


def task_from_record(record: dict[str, Any]) -> Task:
    """The task `task_record` wrote."""
    return Task(key=record["key"], name=record["name"], source=record["source"], suite=record["suite"],
                level=record["level"], problem_id=record["problem_id"],
                path=Path(record["path"]) if record["path"] else None, meta=TaskMeta.from_dict(record["meta"]))
