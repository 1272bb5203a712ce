"""A workspace's runs in a line each (`kernelcraft runs list`): what each ran, how far it got, how to go on."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ..store import Store


@dataclass(frozen=True)
class RunLine:
    id: str
    kind: str  # optimize, eval-suite, self-check...
    started_at: float
    finished: bool  # False: stopped (budget, batch, interrupt) or under way; optimize runs resume
    tasks: int
    tasks_done: int
    target: str  # the task file, suite or module it ran on
    model: str  # the model an optimize run asked ("" for other kinds)
    strategy: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_lines(store: Store) -> list[RunLine]:
    """Every run of the workspace, oldest first."""
    lines = []
    for run in store.runs():
        tasks = store.run_tasks(run.id)
        args = run.args
        llm, search = args.get("llm") or {}, args.get("search") or {}
        lines.append(RunLine(run.id, run.kind, run.started_at, run.finished_at is not None, len(tasks),
                             sum(t.finished_at is not None for t in tasks), str(args.get("target") or args.get("suite") or ""),
                             str(llm.get("model") or ""), str(search.get("strategy") or "")))
    return lines
