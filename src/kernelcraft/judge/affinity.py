"""The jobs an executor has yet to start, handed to its judges (devices) by task: a task stays with the judge
that took it first. A judge surveys and times each task's reference once, tens of seconds on the device
(reference_cache.py); spreading one task's candidates over every device would pay that on each, and two GPUs
then judged no faster than one (benchmarks/judge_scaling.py)."""

from __future__ import annotations

import json
from concurrent.futures import Future
from dataclasses import dataclass, field

from .executor import Job, Result


def task_affinity(job: Job) -> str:
    """What a judge keeps per task: the task, at its sizes."""
    return json.dumps([job.task.key, job.task.meta.sizes], sort_keys=True, default=str)


@dataclass(eq=False)
class Pending:
    """A submitted job and its future; `tries`: how many judges it was lost on (RayPool's dead hosts)."""

    job: Job
    future: "Future[Result]" = field(default_factory=Future)
    tries: int = 0
    running: bool = False
    key: str = ""

    def __post_init__(self) -> None:
        self.key = task_affinity(self.job)


class AffinityQueue:
    """Pending jobs in submission order. Not thread-safe: its executor calls it under its own lock."""

    def __init__(self) -> None:
        self._items: list[Pending] = []
        self._owner: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: Pending, first: bool = False) -> None:
        if first:  # a job lost with its judge goes ahead of the others
            self._items.insert(0, item)
        else:
            self._items.append(item)

    def take(self, judge: int) -> Pending | None:
        """The next job for `judge`: the first of a task it owns, else the first of a task no judge owns yet (it
        then owns that task), else the first of any task (rather than idle: its owner is busy, and this judge
        surveys the task too)."""
        mine = unowned = None
        for i, item in enumerate(self._items):
            owner = self._owner.get(item.key)
            if owner == judge:
                mine = i
                break
            if owner is None and unowned is None:
                unowned = i
        index = mine if mine is not None else unowned if unowned is not None else (0 if self._items else None)
        if index is None:
            return None
        item = self._items.pop(index)
        self._owner.setdefault(item.key, judge)
        return item

    def forget(self, judge: int) -> None:
        """`judge` is gone: its tasks are anyone's again."""
        self._owner = {k: v for k, v in self._owner.items() if v != judge}

    def drain(self) -> list[Pending]:
        items, self._items = self._items, []
        return items
