"""The registry of search strategies: each registers under its name (`register`), saying whether it asks
a model, which tasks it can work on and which of the search settings are its own; a run looks its strategy up
in `STRATEGIES`."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from ..tasks import Task

if TYPE_CHECKING:
    from .strategy import TaskContext


class Strategy(Protocol):
    """Spends the run's budget on one task; raises RunStopped or TaskFailed, or returns when done."""

    def run(self, ctx: TaskContext) -> None: ...


STRATEGIES: dict[str, Callable[[], Strategy]] = {}
MODEL_FREE: set[str] = set()  # strategies that never ask a model
# Why a strategy cannot work on a task (None: it can), for strategies that need a kind of task.
TASK_CHECKS: dict[str, Callable[[Task], str | None]] = {}
# The SearchConfig fields each strategy reads of those only some strategies read (the rest, such as the language,
# the budgets and the skills, every strategy reads).
OWN_SETTINGS: dict[str, tuple[str, ...]] = {}


def register(name: str, *, needs_model: bool = True, task_check: Callable[[Task], str | None] | None = None,
             reads: tuple[str, ...] = ()) -> Callable[[type], type]:
    """Add a strategy class to STRATEGIES under `name`: whether it asks a model, which tasks it can work on, and the
    SearchConfig fields of its own it reads (`reads`: e.g. turns, samples, its options' table)."""
    def add(cls: type) -> type:
        STRATEGIES[name] = cls
        if not needs_model:
            MODEL_FREE.add(name)
        if task_check is not None:
            TASK_CHECKS[name] = task_check
        OWN_SETTINGS[name] = reads
        return cls
    return add


def others_settings(strategy: str, paths: Iterable[str]) -> list[tuple[str, list[str]]]:
    """The settings among `paths` (dotted paths within SearchConfig) that `strategy` does not read but other strategies
    do, each with the strategies that read it: an option given for another strategy would be silently ignored."""
    found = []
    for path in paths:
        top = path.split(".")[0]
        readers = [name for name, reads in OWN_SETTINGS.items() if top in reads]
        if readers and strategy not in readers:
            found.append((path, readers))
    return found


def unsuited(strategy: str, tasks: Iterable[Task]) -> str | None:
    """Why `strategy` cannot work on one of `tasks` (the first such task), or None when it can on all."""
    check = TASK_CHECKS.get(strategy)
    return next((reason for t in tasks if check is not None and (reason := check(t)) is not None), None)
