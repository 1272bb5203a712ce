"""The task a submission names, and its stored form: a job keeps the task as it was resolved at
submission, so a restarted service judges exactly what was asked even if the file changed since."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..tasks import Task, TaskError, TaskMeta, resolve_task, task_from_source
from .models import SubmitRequest


def request_task(request: SubmitRequest, device: str) -> Task:
    """The task of a submission, at its size on `device`. Raises TaskError with a one-line message."""
    if request.task is not None:
        try:
            task = resolve_task(request.task)
        except ValueError as e:  # e.g. "hgemm/" with several shapes
            raise TaskError(f"{request.task}: not one task ({e})") from None
    else:
        assert request.task_source is not None and request.task_name is not None  # SubmitRequest checks both
        task = task_from_source(request.task_source, request.task_name)
    return task.with_sizes(device, request.sizes)


def task_record(task: Task) -> dict[str, Any]:
    """A task as JSON, source included."""
    return {**task.to_dict(), "source": task.source}


def task_from_record(record: dict[str, Any]) -> Task:
    """The task `task_record` wrote."""
    return Task(key=record["key"], name=record["name"], source=record["source"], suite=record["suite"],
                level=record["level"], problem_id=record["problem_id"],
                path=Path(record["path"]) if record["path"] else None, meta=TaskMeta.from_dict(record["meta"]))
